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
    the generated CUDA C++ (for reading; loading never compiles it).

Saving writes the file atomically with the mode a new file gets (0666 less the umask) or the
mode of the file it replaces, and through a symbolic link to its target (the link stays):
:func:`tirx.files.write_atomic` with ``shared=True``. A loaded kernel is saved with every
image it holds unless ``archs`` says otherwise.

Loading (``tirx.load``: :func:`tirx.backend.cuda.stored.load`, which reads the file through
:func:`read`) checks the format, the tirx version (a file from another version is refused: the
launcher's conventions may differ) and every blob's checksum, then picks the image for the
visible GPU or the ``arch`` asked for (spelled as ``archs`` is; an arch the file lacks is an
:class:`ArtifactError` naming what it has) or, with no GPU, the first image: its metadata and
PTX can be read, and a launch raises the ``LaunchError`` that says a GPU is needed.
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
FORMAT_VERSION = 1
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
    text = os.fspath(path)
    if not text:
        raise ArtifactError("save: the path is empty", hint="name the file to write, like "
                            "exe.save('kernel.tirx')")  # fmt: skip
    images = _images(exe, _archs(exe, archs))
    manifest = _manifest(exe, images)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(manifest, indent=1) + "\n")
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
        found = next((k for k in have if k == a or k == a + "a"), None)
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


def read(path) -> tuple[dict, dict]:
    from .files import read_regular

    if not os.fspath(path):
        raise ArtifactError("load: the path is empty", hint="name the saved file, like "
                            "tirx.load('kernel.tirx')")  # fmt: skip
    data = read_regular(os.fspath(path), limit=1 << 30)
    if data is None:
        raise ArtifactError(f"cannot read {path}: not a regular file, or missing")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            blobs = {}
            for info in z.infolist():
                if info.file_size > _MAX_MEMBER:
                    raise ArtifactError(f"{path}: member {info.filename} is too large")
                blobs[info.filename] = z.read(info)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ArtifactError(f"{path} is not a saved kernel (a zip archive): {e}") from None
    try:
        manifest = json.loads(blobs["manifest.json"])
    except (KeyError, ValueError):
        raise ArtifactError(f"{path}: no readable manifest.json") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{path}: not a saved tirx kernel (format {FORMAT!r})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ArtifactError(f"{path}: format version {manifest.get('format_version')!r}; this "
                            f"tirx reads version {FORMAT_VERSION}")  # fmt: skip
    from .version import __version__

    if manifest.get("tirx_version") != __version__:
        raise ArtifactError(
            f"{path} was saved by tirx {manifest.get('tirx_version')}; this is tirx "
            f"{__version__}, whose launcher may pass arguments another way",
            hint="save the kernel again with this version of tirx",
        )
    return manifest, blobs
