"""Saved kernels: ``exe.save(path)`` writes one file, ``tirx.load(path)`` gives back a kernel
that launches without its source and without NVRTC.

The file is a zip archive (``unzip -l`` lists it, ``unzip -p k.tirx manifest.json`` prints
its description); nothing in it is executable Python and nothing is unpickled:

``manifest.json``
    ``format`` ("tirx-kernel") and ``format_version``; the ``tirx_version`` and
    ``codegen_version`` that wrote it; the kernel's ``signature`` (each parameter's name,
    kind, dtype, shape, whether the kernel reads and writes it); ``launch`` (grid, block, the
    dynamic shared memory each launch asks for, the block's shared bytes); ``pointer_alignment``
    (per parameter that needs one: the bytes, the access kind, the phrase for messages);
    ``tensor_maps`` (per TMA map, in hidden-parameter order: the tensor parameter it reads,
    the byte origin of its address, dtype, dims, strides, box, swizzle, L2 promotion: the
    launcher encodes each map from them and the tensor's pointer); ``images`` (per arch: the
    member names of its cubin and PTX, their sha256, ptxas' resource figures).
``<arch>.cubin``, ``<arch>.ptx``
    the machine code and the PTX of each arch the file was saved for.
``kernel.cu``
    the generated CUDA C++ (for reading; loading never compiles it).

Loading checks the format, the tirx version (a file from another version is refused: the
launcher's conventions may differ) and every blob's checksum, then picks the image for the
visible GPU (an arch the file lacks is an :class:`ArtifactError` naming what it has) or, with
no GPU, the first image: its metadata and PTX can be read, and a launch raises the
``LaunchError`` that says a GPU is needed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zipfile
from pathlib import Path

from .errors import TirxError

__all__ = ["save", "load", "ArtifactError", "FORMAT", "FORMAT_VERSION"]

FORMAT = "tirx-kernel"
FORMAT_VERSION = 1
_ARCH = re.compile(r"^sm_\d{2,3}a?$")
_MAX_MEMBER = 1 << 28  # bytes: larger members are not a kernel


class ArtifactError(TirxError):
    """A saved kernel that cannot be read or used here (format, version, arch, damage)."""


# ------------------------------------------------------------------------------- saving


def save(exe, path, archs=None) -> Path:
    """Write ``exe`` (a cuda executable) to ``path`` with cubin and PTX for each of ``archs``
    (default: the arch it was compiled for); returns the path."""
    from .backend.cuda.executable import CudaExecutable

    if not isinstance(exe, CudaExecutable):
        raise TypeError(
            f"save: {exe!r} runs on the simulator; a saved kernel is GPU code: compile it "
            f'with tirx.compile(kernel, "cuda -arch=sm_90") (NVRTC compiles without a GPU)'
        )
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
    path = Path(os.fspath(path))
    from .backend.cuda.cache import write_atomic

    try:
        write_atomic(path, buffer.getvalue())
    except OSError as e:
        raise ArtifactError(f"cannot write {path}: {e.strerror or e}") from None
    return path


def _archs(exe, archs) -> list[str]:
    if archs is None:
        return [exe.arch]
    if isinstance(archs, str):
        archs = [archs]
    out = []
    for a in archs:
        if not isinstance(a, str) or not _ARCH.match(a) or int(a[3:].rstrip("a")) < 80:
            raise ValueError(f"save: archs must name real architectures sm_80 or newer, like "
                             f"'sm_90', got {a!r}")  # fmt: skip
        if a not in out:
            out.append(a)
    if not out:
        raise ValueError("save: archs is empty")
    return out


def _images(exe, archs) -> dict:
    """arch -> (ptx, cubin, stats), compiling the kernel again for archs it lacks."""
    from .backend.cuda.stored import StoredExecutable
    from .compile import compile as tirx_compile

    have = (
        exe.images if isinstance(exe, StoredExecutable)
        else {exe.arch: (exe.ptx, exe.cubin, _stats(exe))}
    )  # fmt: skip
    images = {}
    for a in archs:
        found = next((k for k in have if k == a or k == a + "a"), None)
        if found is not None:
            images[found] = have[found]
            continue
        if exe.kernel is None:
            raise ArtifactError(
                f"save: this kernel was loaded with images for {', '.join(have)} and no "
                f"source to compile {a} from", hint="save it from the kernel's source instead",
            )  # fmt: skip
        other = tirx_compile(exe.kernel, f"cuda -arch={a}")
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
    from . import __version__
    from .backend.cuda.abi import CODEGEN_VERSION

    grid, block, smem = exe.launch_dims
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
                   "shared_bytes": exe.lowered.shared_bytes},
        "pointer_alignment": aligned, "tensor_maps": maps,
        "images": [
            {"arch": a, "cubin": f"{a}.cubin", "ptx": f"{a}.ptx",
             "sha256": {"cubin": _sha(cubin), "ptx": _sha(ptx.encode())}, "stats": stats}
            for a, (ptx, cubin, stats) in images.items()
        ],
        "source": "kernel.cu" if exe.source else None,
    }  # fmt: skip


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------ loading


def load(path, arch: str | None = None):
    """The kernel saved in ``path``, ready to launch (see the module docstring). ``arch``
    picks an image (default: the visible GPU's, or the first without a GPU)."""
    manifest, blobs = _read(path)
    from .backend.cuda import driver
    from .backend.cuda.stored import StoredExecutable
    from .signature import Signature
    from .target import Target, TargetKind

    try:
        sig = Signature.from_json(manifest["signature"])
        images = {}
        for img in manifest["images"]:
            ptx, cubin = blobs[img["ptx"]], blobs[img["cubin"]]
            if _sha(cubin) != img["sha256"]["cubin"] or _sha(ptx) != img["sha256"]["ptx"]:
                raise ArtifactError(f"{path}: the {img['arch']} image is damaged (checksum)")
            images[str(img["arch"])] = (ptx.decode(), cubin, dict(img.get("stats") or {}))
        stub, maps, requirements = _parts(manifest, sig)
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{path}: the manifest is not a saved kernel's ({e!r})") from None
    chosen = _choose(path, images, arch, driver.device_arch(0) if driver.gpu_count() else None)
    written = [i for i, p in enumerate(sig.params) if p.writes]
    source = blobs.get("kernel.cu", b"").decode() or None
    target = Target(TargetKind.CUDA, chosen.rstrip("a"))
    exe = StoredExecutable(stub, target, images, chosen, requirements, maps, written, source)
    exe.signature = sig  # the saved one (the stub has no body to read it from)
    exe.manifest = manifest
    return exe


def _read(path) -> tuple[dict, dict]:
    from .backend.cuda.cache import read_regular

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
    from . import __version__

    if manifest.get("tirx_version") != __version__:
        raise ArtifactError(
            f"{path} was saved by tirx {manifest.get('tirx_version')}; this is tirx "
            f"{__version__}, whose launcher may pass arguments another way",
            hint="save the kernel again with this version of tirx",
        )
    return manifest, blobs


def _choose(path, images: dict, arch, device) -> str:
    def sm(a: str) -> str:
        return a.rstrip("a")

    have = ", ".join(images) or "none"
    want = arch or device
    if want is None:  # no GPU: the first image, for reading
        return next(iter(images))
    found = next((a for a in images if sm(a) == sm(want)), None)
    if found is None:
        why = "this GPU is" if arch is None else "asked for"
        raise ArtifactError(f"{path} holds code for {have}; {why} {want}",
                            hint=f"save it with archs=[{want!r}, ...] (or tirx compile "
                            f"--arch {sm(want)} --out)")  # fmt: skip
    return found


def _parts(manifest: dict, sig):
    """The stub function, tensor maps and pointer requirements the stored executable needs."""
    from .backend.cuda.alignment import Alignment, Requirements
    from .dtypes import dtype_of
    from .ir import nodes as ir
    from .ir.aligned_access import AccessKind
    from .ir.tensor_map import TensorMap, TensorMapFields
    from .layout import S, TileLayout

    params = []
    for p in sig.params:
        d = dtype_of(p.dtype)
        if p.is_tensor:
            n = 1
            for e in p.shape:
                n *= e
            layout = TileLayout(S[p.shape]) if p.shape else None
            params.append(ir.Buffer(p.name, d, ir.Scope.GLOBAL, p.shape, layout, n))
        else:
            params.append(ir.Var(p.name, d))
    la = manifest["launch"]
    launch = ir.LaunchConfig(tuple(la["grid"]), tuple(la["block"]), int(la["dynamic_shared_bytes"]))
    maps = [
        (sig.names.index(m["param"]), TensorMap(
            params[sig.names.index(m["param"])], int(m["origin"]),
            TensorMapFields(m["dtype"], tuple(m["dims"]), tuple(m["strides"]), tuple(m["box"]),
                            int(m["swizzle"]), int(m["l2_promotion"]))))
        for m in manifest["tensor_maps"]
    ]  # fmt: skip
    per_param = [None] * len(params)
    for r in manifest["pointer_alignment"]:
        i = sig.names.index(r["param"])
        per_param[i] = Alignment(i, r["param"], int(r["bytes"]), r["what"], AccessKind(r["access"]))
    stub = ir.Function(sig.name, tuple(params), ir.Seq(()), launch, lowered=True,
                       shared_bytes=int(la["shared_bytes"]), tensor_maps=bool(maps))  # fmt: skip
    return stub, maps, Requirements(tuple(per_param))
