"""Saved kernels: ``exe.save(path)`` writes one file, ``tirx.load(path)`` gives back a kernel
that launches without its source and without NVRTC.

The file is a zip archive (``unzip -l`` lists it, ``unzip -p k.tirx manifest.json`` prints
its description); nothing in it is executable Python and nothing is unpickled:

``manifest.json``
    ``format`` ("tirx-kernel") and ``format_version``; the ``tirx_version`` and
    ``codegen_version`` that wrote it; the kernel's ``signature`` (each parameter's name,
    kind, dtype, shape, whether the kernel reads and writes it); ``launch`` (grid, block, the
    dynamic shared memory each launch asks for, the block's shared bytes, and ``cluster``,
    the cluster shape, for a kernel launched in clusters); ``pointer_alignment``
    (per parameter that needs one: the bytes, the access kind, the phrase for messages);
    ``tensor_maps`` (per TMA map, in hidden-parameter order: the tensor parameter it reads,
    the byte origin of its address, dtype, dims, strides, box, swizzle, L2 promotion: the
    launcher encodes each map from them and the tensor's pointer); ``images`` (per arch: the
    member names of its cubin and PTX, their sha256, ptxas' resource figures).
``<arch>.cubin``, ``<arch>.ptx``
    the machine code and the PTX of each arch the file was saved for.
``kernel.cu``
    the generated CUDA C++ (for reading; loading never compiles it), its sha256 the
    manifest's ``source_sha256``.

The archive's comment is ``tirx-kernel manifest sha256 <hex>``, the sha256 of
``manifest.json`` as stored (``unzip -z`` prints it): the members' checksums are in the
manifest, and the manifest's is here, so an edit of any of them is found.

Saving writes the file atomically with the mode a new file gets (0666 less the umask) or the
mode of the file it replaces, and through a symbolic link to its target (the link stays):
:func:`tirx.files.write_atomic` with ``shared=True``. A loaded kernel is saved with every
image it holds unless ``archs`` says otherwise (an arch asked for takes the image of that
name, else its ``a`` variant).

Loading (``tirx.load``: :func:`tirx.backend.cuda.stored.load`, which reads the file through
:func:`read`) checks the archive (any member that does not unpack is damage), the format, the
tirx and codegen versions (a file from another version is refused: the launcher's conventions
may differ), every field of the manifest (types, CUDA's grid and block limits, the shared
memory of the images' archs, unique parameters and images), the manifest's checksum and every
blob's, all as an :class:`ArtifactError`; then it picks the image for the visible GPU or the
``arch`` asked for (spelled as ``archs`` is; an arch the file lacks is an ArtifactError naming
what it has) or, with no GPU, the first image: its metadata and PTX can be read, and a launch
raises the ``LaunchError`` that says a GPU is needed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zipfile
from pathlib import Path

from .errors import TirxError, UnsupportedArchError

__all__ = [
    "save", "read", "ArtifactError", "FORMAT", "FORMAT_VERSION", "sha256_hex", "check_arch",
    "sm_number",
]  # fmt: skip

FORMAT = "tirx-kernel"
FORMAT_VERSION = 3  # 2: the manifest's sha256 in the archive comment; 3: kernel.cu's in it
_ARCH = re.compile(r"^sm_(\d{2,3})(a?)$")
_MAX_MEMBER = 1 << 28  # bytes: larger members are not a kernel


class ArtifactError(TirxError):
    """A saved kernel that cannot be read or used here (format, version, arch, damage)."""


# ------------------------------------------------------------------------------- saving


def save(exe, path, archs=None) -> Path:
    """Write ``exe`` (a cuda executable) to ``path`` with cubin and PTX for each of ``archs``
    (default: the arch it was compiled for; a loaded kernel's: every arch it holds); returns
    the path."""
    if exe.target.kind != "cuda":
        raise TypeError(
            f"save: {exe!r} runs on the simulator; a saved kernel is GPU code: compile it "
            f'with tirx.compile(kernel, "cuda -arch=sm_90") (NVRTC compiles without a GPU)'
        )
    text = os.fsdecode(path)  # str, bytes or a path object, as tirx.load takes
    if not text:
        raise ArtifactError("save: the path is empty", hint="name the file to write, like "
                            "exe.save('kernel.tirx')")  # fmt: skip
    images = _images(exe, _archs(exe, archs))
    manifest = _manifest(exe, images)
    manifest_text = (json.dumps(manifest, indent=1) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.comment = _seal(manifest_text)
        z.writestr("manifest.json", manifest_text)
        for arch, (ptx, cubin, _) in images.items():
            z.writestr(f"{arch}.cubin", cubin)
            z.writestr(f"{arch}.ptx", ptx)
        if exe.source:
            z.writestr("kernel.cu", exe.source)
    path = Path(text)
    from .files import write_atomic

    try:  # the umask's mode, or the replaced file's; through a link to its target
        write_atomic(path, buffer.getvalue(), shared=True)
    except OSError as e:
        link = f" (a link to {os.path.realpath(path)})" if os.path.islink(path) else ""
        raise ArtifactError(f"cannot write {path}{link}: {e.strerror or e}") from None
    return path


def check_arch(arch, what: str) -> str:
    """``arch`` when it names a real architecture tirx compiles for: ``sm_XX`` (80 or newer)
    or ``sm_XXa`` (90 or newer: the arch-specific features); else a ValueError naming it
    (``what`` says which argument, as in "save: archs")."""
    m = _ARCH.match(arch) if isinstance(arch, str) else None
    if m is None or int(m[1]) < 80 or (m[2] and int(m[1]) < 90):
        like = f"'sm_{arch}'" if str(arch).isdigit() else "'sm_90'"
        raise ValueError(f"{what} must name real architectures, sm_80 or newer (with an 'a', "
                         f"sm_90a or newer), like {like}, got {arch!r}")  # fmt: skip
    return arch


def sm_number(arch: str) -> str:
    """``arch`` without the arch-specific suffix: sm_90a -> sm_90 (one trailing 'a' only)."""
    return arch[:-1] if arch.endswith("a") else arch


def _archs(exe, archs) -> list[str]:
    if archs is None:  # a loaded kernel: every image it holds, in the file's order
        stored = getattr(exe, "images", None)
        return list(stored) if stored else [exe.arch]
    if isinstance(archs, str):
        archs = [archs]
    else:
        try:
            archs = list(archs)
        except TypeError:  # a bare 90: the ValueError that names the value
            check_arch(archs, "save: archs")
            raise  # (check_arch refuses whatever is not a string)
    out = []
    for a in archs:
        if check_arch(a, "save: archs") not in out:
            out.append(a)
    if not out:
        raise ValueError("save: archs is empty")
    return out


def _images(exe, archs) -> dict:
    """arch -> (ptx, cubin, stats), compiling the kernel again for archs it lacks."""
    stored = getattr(exe, "images", None)  # a kernel loaded from a file: its images
    have = stored if stored is not None else {exe.arch: (exe.ptx, exe.cubin, _stats(exe))}
    images = {}
    for a in archs:
        found = a if a in have else a + "a" if a + "a" in have else None  # exact first
        if found is not None:
            images[found] = have[found]
            continue
        if exe.kernel is None or exe.compile_kernel is None:
            raise ArtifactError(
                f"save: this kernel was loaded with images for {', '.join(have)} and no "
                f"source to compile {a} from", hint="save it from the kernel's source instead",
            )  # fmt: skip
        try:
            other = exe.compile_kernel(exe.kernel, f"cuda -arch={a}")
        except UnsupportedArchError as e:  # archs is what is wrong, not the kernel
            raise ValueError(f"save: archs names {a}, which this NVRTC does not compile for "
                             f"— {e.message}; name an arch it knows, like {exe.arch}") from None  # fmt: skip
        except TirxError as e:  # the kernel's instructions do not exist on that arch
            raise ValueError(
                f"save: archs names {a}, for which kernel {exe.name!r} does not build: "
                f"{e.message}" + (f" ({e.hint})" if e.hint else "")
            ) from None
        if other.signature != exe.signature or other.launch_dims != exe.launch_dims:
            raise ArtifactError(f"save: kernel {exe.name!r} compiles to another signature or "
                                f"launch for {a}; save the archs separately")  # fmt: skip
        images[other.arch] = (other.ptx, other.cubin, _stats(other))
    return images


def _stats(exe) -> dict:
    try:
        stats = dict(exe.nvrtc.stats)
    except Exception:  # ptxas missing: the figures are for reading only
        stats = {}
    return {k: v for k, v in stats.items() if isinstance(v, (int, float, str, type(None)))}


def _manifest(exe, images) -> dict:
    from .backend.cuda.abi import CODEGEN_VERSION
    from .version import __version__

    grid, block, smem = exe.launch_dims
    if exe.lowered.launch.sms_grid:  # sized where it is loaded, not where it was saved
        grid = exe.lowered.launch.grid
    sig = exe.signature
    aligned = [
        {"param": r.name, "bytes": r.nbytes, "access": r.kind.value, "what": r.what}
        for r in exe.pointer_requirements().per_param
        if r is not None
    ]
    maps = []
    for i, tm in exe.map_sources():
        f = tm.fields
        maps.append({
            "param": sig.params[i].name, "origin": tm.origin, "dtype": f.dtype,
            "dims": list(f.dims), "strides": list(f.strides), "box": list(f.box),
            "swizzle": f.swizzle, "l2_promotion": f.l2_promotion,
        })  # fmt: skip
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "tirx_version": __version__,
        "codegen_version": CODEGEN_VERSION, "name": exe.name, "signature": sig.to_json(),
        "launch": {"grid": list(grid), "block": list(block), "dynamic_shared_bytes": smem,
                   "shared_bytes": exe.lowered.shared_bytes, **_cluster(exe)},
        "pointer_alignment": aligned, "tensor_maps": maps,
        "images": [
            {"arch": a, "cubin": f"{a}.cubin", "ptx": f"{a}.ptx",
             "sha256": {"cubin": sha256_hex(cubin), "ptx": sha256_hex(ptx.encode())}, "stats": stats}
            for a, (ptx, cubin, stats) in images.items()
        ],
        "source": "kernel.cu" if exe.source else None,
        "source_sha256": sha256_hex(exe.source.encode()) if exe.source else None,
    }  # fmt: skip


def _cluster(exe) -> dict:
    """``{"cluster": [x, y, z]}``, the cluster shape each launch asks for (``{}`` for a kernel
    launched without clusters), and ``{"sms_grid": true}`` for a ``grid="sms"`` kernel, whose
    grid's x the loading machine sets to its multiprocessor count."""
    launch = exe.lowered.launch
    out = {"cluster": list(launch.cluster)} if launch.cluster is not None else {}
    if launch.sms_grid:
        out["sms_grid"] = True
    return out


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------ reading


_DAMAGED = "the file is damaged or was edited: save the kernel again"
_AGAIN = "save the kernel again with this version of tirx"
_SEAL = b"tirx-kernel manifest sha256 "  # the archive comment: this, then the hex digest

# The CUDA programming guide's limits that compiling checks (tirx/script/namespace.py: grid and
# block; tirx/transform/shared_memory.py: the opt-in shared memory per block, KB by compute
# capability; tirx/transform/limits.py: a global tensor's bytes), repeated because the file
# format does not import the compiler; tests/test_artifact_damage.py checks that they agree.
_GRID_LIMITS = (2**31 - 1, 65535, 65535)
_BLOCK_LIMITS = (1024, 1024, 64)
_MAX_THREADS = 1024
_SHARED_KB = {80: 163, 86: 99, 87: 163, 89: 99, 90: 227, 100: 227, 120: 99}
_TENSOR_BYTES = 2**31
_HEX = re.compile(r"^[0-9a-f]{64}$")


def _seal(manifest: bytes) -> bytes:
    return _SEAL + sha256_hex(manifest).encode()


def read(path) -> tuple[dict, dict]:
    """The manifest and the members (name -> bytes) of the saved kernel at ``path``: the
    archive, the format and versions, every manifest field and the manifest's checksum
    checked (an :class:`ArtifactError` naming what is wrong). The images' members and their
    checksums are checked where the images are taken (tirx/backend/cuda/stored.py)."""
    from .files import read_regular

    if not os.fspath(path):
        raise ArtifactError("load: the path is empty", hint="name the saved file, like "
                            "tirx.load('kernel.tirx')")  # fmt: skip
    data = read_regular(os.fspath(path), limit=1 << 30)
    if data is None:
        raise ArtifactError(f"cannot read {path}: not a regular file, or missing")
    blobs, comment = _unzip(path, data)
    try:
        manifest = json.loads(blobs["manifest.json"])
    except KeyError:
        raise ArtifactError(f"{path}: no manifest.json", hint=_DAMAGED) from None
    except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, nested past the stack
        why = "nested too deeply" if isinstance(e, RecursionError) else "not JSON"
        raise ArtifactError(f"{path}: no readable manifest.json ({why})", hint=_DAMAGED) from None
    _check_versions(path, manifest)
    _check_fields(path, manifest)
    if comment != _seal(blobs["manifest.json"]):  # after the fields: those name what is wrong
        what = ("differs from the sha256 saved with it" if comment.startswith(_SEAL) else
                "has no sha256 in the file's comment to check it against")  # fmt: skip
        raise ArtifactError(f"{path}: the manifest {what}", hint=_DAMAGED)
    return manifest, blobs


def _unzip(path, data: bytes) -> tuple[dict, bytes]:
    """The archive's members and its comment. zipfile reads the bytes in memory, so whatever
    it raises comes from them: a damaged file (a header, a deflate stream that zlib refuses, a
    CRC that differs, a compression method or flag changed), an ArtifactError."""
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except Exception as e:  # whichever of zipfile's errors: the bytes are no zip
        raise ArtifactError(f"{path} is not a saved kernel (a zip archive): {_reason(e)}",
                            hint="if it was one, it is damaged: save the kernel again") from None  # fmt: skip
    blobs = {}
    with z:
        for info in z.infolist():
            if info.file_size > _MAX_MEMBER:
                raise ArtifactError(f"{path}: member {_member(info.filename)} is too large",
                                    hint=_DAMAGED)  # fmt: skip
            try:
                blobs[info.filename] = z.read(info)
            except Exception as e:  # zlib.error, BadZipFile (a CRC), EOFError, ...
                raise ArtifactError(f"{path}: member {_member(info.filename)} is damaged "
                                    f"({_reason(e)})", hint=_DAMAGED) from None  # fmt: skip
        return blobs, z.comment


def _reason(e: Exception) -> str:
    """``zlib.error: Error -3 while ...``: the exception's class, its module when not built in."""
    kind, module = type(e).__name__, type(e).__module__
    kind = kind if module == "builtins" else f"{module}.{kind}"
    return f"{kind}: {e}" if str(e) else kind


def _member(name: str) -> str:
    """A member's name for a message (quoted when damage made it unprintable)."""
    return name if name.isprintable() and name.strip() == name and name else repr(name)


def _check_versions(path, manifest) -> None:
    """The format, and the tirx and codegen versions: a file another tirx wrote is refused
    (its launcher may pass the arguments another way)."""
    from .backend.cuda.abi import CODEGEN_VERSION
    from .version import __version__

    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{path}: not a saved tirx kernel (format {FORMAT!r})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ArtifactError(f"{path}: format version {_show(manifest.get('format_version'))}; "
                            f"this tirx reads version {FORMAT_VERSION}", hint=_AGAIN)  # fmt: skip
    if manifest.get("tirx_version") != __version__:
        raise ArtifactError(
            f"{path} was saved by tirx {_show(manifest.get('tirx_version'), '')}; this is tirx "
            f"{__version__}, whose launcher may pass arguments another way", hint=_AGAIN,
        )  # fmt: skip
    if manifest.get("codegen_version") != CODEGEN_VERSION:
        raise ArtifactError(
            f"{path} was saved by codegen version {_show(manifest.get('codegen_version'), '')}; "
            f"this tirx's codegen is version {CODEGEN_VERSION}, whose kernels may take their "
            "arguments another way", hint=_AGAIN,
        )  # fmt: skip


def _show(value, quote='"') -> str:
    """``value`` as JSON, cut to 60 characters (``quote=''``: a string without quotes)."""
    if isinstance(value, str) and not quote:
        text = value
    else:
        try:
            text = json.dumps(value)
        except (ValueError, TypeError, RecursionError):
            text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _count(v, low: int = 0, high: float = float("inf")) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _one_of(v, names) -> bool:
    return isinstance(v, str) and v in names


def _wrong(path, what: str, value, want: str) -> ArtifactError:
    return ArtifactError(f"{path}: the manifest's {what} is {_show(value)}, not {want}",
                         hint=_DAMAGED)  # fmt: skip


def _check_fields(path, m: dict) -> None:
    """An ArtifactError naming the first field of the manifest that is not what a saved kernel
    holds: the images, the signature, the launch, the pointer alignments and the tensor maps
    (docs/saving.md, "Errors")."""
    for key in ("signature", "launch", "images", "pointer_alignment", "tensor_maps"):
        if key not in m:
            raise ArtifactError(f"{path}: the manifest has no {key}", hint=_DAMAGED)
    if not isinstance(m.get("name"), str):
        raise _wrong(path, "name", m.get("name"), "the kernel's name")
    archs = _check_images(path, m["images"])
    params = _check_signature(path, m["signature"])
    _check_launch(path, m["launch"], archs)
    tensors = {name for name, kind in params.items() if kind == "tensor"}
    listed = m["pointer_alignment"]
    if not isinstance(listed, list):
        raise _wrong(path, "pointer_alignment", listed, "a list")
    from .backend.cuda.abi import ACCESS_KINDS

    for r in listed:
        if not (isinstance(r, dict) and _one_of(r.get("param"), tensors) and _count(r.get("bytes"), 1)
                and r.get("access") in ACCESS_KINDS and isinstance(r.get("what"), str)):  # fmt: skip
            raise _wrong(path, "pointer_alignment entry", r, "a tensor parameter's alignment")
    _check_source(path, m)
    listed = m["tensor_maps"]
    if not isinstance(listed, list):
        raise _wrong(path, "tensor_maps", listed, "a list")
    for tm in listed:
        ok = isinstance(tm, dict) and _one_of(tm.get("param"), tensors)
        ok = ok and isinstance(tm.get("dtype"), str)
        ok = ok and all(_count(tm.get(k)) for k in ("origin", "swizzle", "l2_promotion"))
        ok = ok and all(isinstance(tm.get(k), list) and all(map(_count, tm[k]))
                        for k in ("dims", "strides", "box"))  # fmt: skip
        if not ok:
            raise _wrong(path, "tensor map", tm, "a tensor parameter's map")


def _check_source(path, m: dict) -> None:
    """``source`` names kernel.cu (or is null) and ``source_sha256`` is its sha256 hex."""
    source, sha = m.get("source"), m.get("source_sha256")
    if source not in ("kernel.cu", None):
        raise _wrong(path, "source", source, '"kernel.cu" or null')
    ok = sha is None if source is None else isinstance(sha, str) and _HEX.match(sha)
    if not ok:
        raise _wrong(path, "source_sha256", sha, "the sha256 of kernel.cu")


def _check_images(path, listed) -> list[str]:
    """The archs of the images (each listed once, its members its own, its sha256 hex)."""
    if not isinstance(listed, list) or not listed:
        raise ArtifactError(f'{path}: the manifest lists no images ("images": {_show(listed)}), '
                            "so the file holds no code", hint=_DAMAGED)  # fmt: skip
    archs, members = [], {"manifest.json", "kernel.cu"}
    for img in listed:
        if not isinstance(img, dict):
            raise _wrong(path, "image", img, "an arch's cubin and PTX")
        arch = img.get("arch")
        try:
            check_arch(arch, "an image's arch")
        except ValueError:
            shown = repr(arch) if isinstance(arch, str) and len(arch) < 40 else _show(arch)
            raise ArtifactError(f"{path}: the manifest lists an image for {shown}, which is "
                                "not an arch", hint=_DAMAGED) from None  # fmt: skip
        if arch in archs:
            raise ArtifactError(f"{path}: the manifest lists the {arch} image twice", hint=_DAMAGED)
        for kind in ("cubin", "ptx"):
            name = img.get(kind)
            if not isinstance(name, str) or name in members:
                raise _wrong(
                    path, f"{kind} member of the {arch} image", name, "a member of its own"
                )
            members.add(name)
        sha = img.get("sha256")
        if not (isinstance(sha, dict) and all(isinstance(sha.get(k), str) and _HEX.match(sha[k])
                                              for k in ("cubin", "ptx"))):  # fmt: skip
            raise _wrong(
                path, f"sha256 of the {arch} image", sha, "the sha256 of its cubin and PTX"
            )
        stats = img.get("stats")
        if stats is not None and not (isinstance(stats, dict) and all(
                isinstance(v, (int, float, str, type(None))) for v in stats.values())):  # fmt: skip
            raise _wrong(path, f"stats of the {arch} image", stats, "ptxas' figures")
        archs.append(arch)
    return archs


def _check_signature(path, sig) -> dict[str, str]:
    """Parameter name -> kind ("tensor" or "scalar"), in order: names unique, dtypes tirx's, a
    tensor's shape positive ints (less than 2 GiB in all), a scalar's empty."""
    from .backend.cuda.abi import SCALAR_DTYPES
    from .dtypes import DTYPES

    if not isinstance(sig, dict):
        raise _wrong(path, "signature", sig, "the kernel's name and parameters")
    if not (isinstance(sig.get("name"), str) and sig["name"].isidentifier()):
        raise _wrong(path, "kernel name", sig.get("name"), "a name")
    listed = sig.get("params")
    if not isinstance(listed, list):
        raise _wrong(path, "parameters", listed, "a list")
    params = {}
    for i, p in enumerate(listed):
        name = p.get("name") if isinstance(p, dict) else None
        if not (isinstance(name, str) and name.isidentifier()):
            raise _wrong(path, f"parameter {i + 1}", p, "a parameter with a name")
        if name in params:
            raise ArtifactError(f"{path}: the manifest names two parameters {name!r}",
                                hint=_DAMAGED)  # fmt: skip
        kind, dtype, shape = p.get("kind"), p.get("dtype"), p.get("shape")
        if kind not in ("tensor", "scalar"):
            raise _wrong(path, f"kind of parameter {name!r}", kind, '"tensor" or "scalar"')
        if not (isinstance(dtype, str) and dtype in DTYPES):
            raise _wrong(path, f"dtype of parameter {name!r}", dtype, "a tirx dtype")
        if kind == "scalar" and not (isinstance(shape, list) and not shape):
            raise _wrong(path, f"shape of parameter {name!r}", shape, "[] (a scalar's)")
        if kind == "scalar" and dtype not in SCALAR_DTYPES:
            raise _wrong(path, f"dtype of parameter {name!r}", dtype, "a scalar parameter's")
        if kind == "tensor":
            if not (isinstance(shape, list) and all(_count(e, 1) for e in shape)):
                raise _wrong(path, f"shape of parameter {name!r}", shape,
                             "a list of positive integers")  # fmt: skip
            size = DTYPES[dtype].bytes
            for e in shape:
                size *= e
            if size >= _TENSOR_BYTES:
                raise _wrong(path, f"shape of parameter {name!r}", shape,
                             "a tensor of less than 2 GiB")  # fmt: skip
        for flag in ("reads", "writes"):
            if not isinstance(p.get(flag), bool):
                raise _wrong(path, f"{flag} of parameter {name!r}", p.get(flag), "true or false")
        params[name] = kind
    return params


def _shared_limit(arch: str) -> int:
    """The most shared memory one block of ``arch`` may use, opted in (bytes)."""
    n = int(_ARCH.match(arch)[1])
    return _SHARED_KB[max(a for a in _SHARED_KB if a <= n)] * 1024


def _check_launch(path, launch, archs: list[str]) -> None:
    """Grid, block and cluster three positive ints within CUDA's limits (a ``sms_grid``
    kernel's grid x is 0: it is set where the kernel is loaded), at most 1024 threads a block,
    the shared bytes ints from 0 to the smallest maximum of the images' archs."""
    if not isinstance(launch, dict):
        raise _wrong(path, "launch", launch, "the kernel's grid, block and shared memory")

    def dims(v, low, high) -> bool:
        return isinstance(v, list) and len(v) == 3 and all(map(_count, v, low, high))

    sms = launch.get("sms_grid", False)
    if not isinstance(sms, bool):
        raise _wrong(path, "launch sms_grid", sms, "true or false")
    three = "three positive integers of at most {}, {} and {}"
    for field, low, high in (("grid", (0 if sms else 1, 1, 1), _GRID_LIMITS),
                             ("block", (1, 1, 1), _BLOCK_LIMITS),
                             ("cluster", (1, 1, 1), _GRID_LIMITS)):  # fmt: skip
        if field not in launch:
            if field == "cluster":  # absent: no clusters
                continue
            raise ArtifactError(f"{path}: the manifest's launch has no {field}", hint=_DAMAGED)
        v = launch[field]
        if not (field == "cluster" and v is None or dims(v, low, high)):
            raise _wrong(path, f"launch {field}", v, three.format(*high))
    x, y, z = launch["block"]
    if x * y * z > _MAX_THREADS:
        raise _wrong(path, "launch block", launch["block"],
                     f"a block of at most {_MAX_THREADS} threads (it has {x * y * z})")  # fmt: skip
    limit, arch = min((_shared_limit(a), a) for a in archs)
    for field in ("dynamic_shared_bytes", "shared_bytes"):
        if field not in launch:
            raise ArtifactError(f"{path}: the manifest's launch has no {field}", hint=_DAMAGED)
        if not _count(launch[field]):
            raise _wrong(path, f"launch {field}", launch[field], "an integer of 0 or more")
        if launch[field] > limit:
            raise _wrong(path, f"launch {field}", launch[field],
                         f"at most the {limit} bytes ({limit // 1024} KB) that a block has on "
                         f"{arch}")  # fmt: skip
