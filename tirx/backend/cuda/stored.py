"""A CUDA executable made from saved parts instead of a compile: the cubin and PTX for one
arch, the parameters, the launch, and what the launcher must know that it would otherwise read
off the lowered program (pointer alignments, TMA tensor maps, written tensors).

It is a :class:`CudaExecutable` in every other respect -- the same checks by parameter, the
same runner and memo, the C launch, tensor maps encoded per call -- so a saved kernel launches
as the kernel it was saved from. Its lowered function has the parameters and the launch and no
body: the code is the cubin. NVRTC is never involved (tirx/artifact.py reads and writes the
file; :func:`load` is ``tirx.load``)."""

from __future__ import annotations

import json

from ...artifact import ArtifactError, check_arch, read, sha256_hex, sm_number
from ...errors import LaunchError, TirxError
from ...executable import ArgChecker, CacheState
from ...ir import nodes as ir
from . import driver
from .executable import CudaExecutable
from .nvrtc import NvrtcOutput

__all__ = ["StoredExecutable", "load"]


class StoredExecutable(CudaExecutable):
    """A kernel loaded from a file (``tirx.load``).

    ``stub``: a lowered :class:`ir.Function` with the kernel's name, parameters and launch
    (``dynamic_smem_bytes`` the shared memory each launch asks for) and an empty body;
    ``images``: arch -> (ptx, cubin, stats) of every arch the file holds, ``arch`` the one
    this executable launches; ``requirements``: the :class:`~.alignment.Requirements`;
    ``maps``: per tensor map, (tensor parameter index, TensorMap); ``written``: indices of the
    tensor parameters the kernel writes; ``source``: the generated CUDA C++, when saved."""

    def __init__(self, stub: ir.Function, target, images: dict, arch: str, requirements, maps,
                 written, source=None):  # fmt: skip
        ptx, cubin, stats = images[arch]
        out = NvrtcOutput(ptx, cubin, "", (), 0.0, stats=dict(stats), arch=arch)
        self.images = dict(images)
        self._requirements = requirements
        self._maps = tuple(maps)
        super().__init__(None, stub, target, {}, source, out, written=written)
        self.arch = arch
        self.cache = CacheState.HIT

    def load(self) -> None:
        if self._launcher is None and driver.gpu_count() == 0:
            raise LaunchError(
                f"kernel {self.name!r} (loaded from a saved file, {self.arch}) needs a CUDA GPU "
                "to launch, and none is visible",
                hint="run it on a machine with a GPU; here its signature, launch, PTX and SASS "
                "can be read (exe.signature, exe.manifest, exe.ptx, exe.sass)",
            )
        super().load()

    def _call(self, *args, **kw) -> None:
        # the checked path before the first launch. Without a GPU the arguments are checked as
        # far as a CPU machine can (their count, the tensors' dtypes and shapes as CPU
        # tensors, the scalars), so a test without a GPU finds a wrong call; then the error
        # is the missing GPU
        if self._launcher is None and driver.gpu_count() == 0:
            ArgChecker(self.lowered, "cpu", written=self.checker.written()).checked(args, kw)
            self.load()
        super()._call(*args, **kw)

    def pointer_requirements(self):
        return self._requirements

    def map_sources(self) -> tuple:
        return self._maps

    def script(self, lowered: bool = False) -> str:
        raise TirxError(
            f"kernel {self.name!r} was loaded from a saved file, which holds its machine code "
            "(exe.ptx, exe.sass, exe.source) but no IR",
            hint="compile the kernel from its source to see its IR",
        )

    def __repr__(self) -> str:
        return f"<tirx.Executable {self.name} target={self.target} (loaded)>"


# ------------------------------------------------------------------------------ loading


def load(path, arch: str | None = None):
    """The kernel saved in ``path``, ready to launch (see the module docstring). ``arch``
    picks an image (default: the visible GPU's, or the first without a GPU): ``"sm_90"``,
    or ``"sm_90a"``, as ``exe.save(archs=)`` names archs (a ValueError for anything else)."""
    if arch is not None:
        check_arch(arch, "load: arch")
    manifest, blobs = read(path)
    from ...signature import Signature
    from ...target import Target, TargetKind

    try:
        sig = Signature.from_json(manifest["signature"])
        images = _images(path, manifest, blobs)
        _check_launch(path, manifest["launch"])
        stub, maps, requirements = _parts(manifest, sig)
    except (KeyError, TypeError, ValueError, TirxError) as e:
        raise ArtifactError(f"{path}: the manifest is not a saved kernel's ({e!r})",
                            hint=_DAMAGED) from None  # fmt: skip
    chosen = _choose(path, images, arch, driver.device_arch(0) if driver.gpu_count() else None)
    written = [i for i, p in enumerate(sig.params) if p.writes]
    source = _source(path, manifest, blobs)
    target = Target(TargetKind.CUDA, sm_number(chosen))
    exe = StoredExecutable(stub, target, images, chosen, requirements, maps, written, source)
    exe.signature = sig  # the saved one (the stub has no body to read it from)
    exe.manifest = manifest
    return exe


_DAMAGED = "the file is damaged or was edited: save the kernel again"


def _images(path, manifest: dict, blobs: dict) -> dict:
    """arch -> (ptx, cubin, stats) of every image the manifest lists, each member present and
    its checksum right; an ArtifactError naming what is not."""
    listed = manifest["images"]
    if not isinstance(listed, list) or not listed:
        raise ArtifactError(f"{path}: the manifest lists no images (\"images\": "
                            f"{json.dumps(listed)}), so the file holds no code",
                            hint=_DAMAGED)  # fmt: skip
    images = {}
    for img in listed:
        arch = img["arch"]
        try:
            check_arch(arch, "an image's arch")
        except ValueError:
            raise ArtifactError(f"{path}: the manifest lists an image for {arch!r}, which is "
                                "not an arch", hint=_DAMAGED) from None  # fmt: skip
        missing = [img[k] for k in ("ptx", "cubin") if img[k] not in blobs]
        if missing:
            which = "member {} is" if len(missing) == 1 else "members {} are"
            raise ArtifactError(f"{path}: the {arch} image's "
                                f"{which.format(' and '.join(map(str, missing)))} missing from "
                                "the file", hint=_DAMAGED)  # fmt: skip
        ptx, cubin = blobs[img["ptx"]], blobs[img["cubin"]]
        if sha256_hex(cubin) != img["sha256"]["cubin"] or sha256_hex(ptx) != img["sha256"]["ptx"]:
            raise ArtifactError(f"{path}: the {arch} image is damaged (checksum)", hint=_DAMAGED)
        images[arch] = (_text(path, ptx, f"the {arch} image's PTX"), cubin,
                        dict(img.get("stats") or {}))  # fmt: skip
    return images


def _source(path, manifest: dict, blobs: dict) -> str | None:
    """kernel.cu's text (None where the kernel was saved without it), checked against the
    manifest's sha256 of it."""
    if manifest.get("source") is None:
        return None
    data = blobs.get("kernel.cu")
    if data is None:
        raise ArtifactError(f"{path}: member kernel.cu is missing from the file", hint=_DAMAGED)
    if sha256_hex(data) != manifest["source_sha256"]:
        raise ArtifactError(f"{path}: kernel.cu is damaged (checksum)", hint=_DAMAGED)
    return _text(path, data, "kernel.cu") or None


def _text(path, data: bytes, what: str) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ArtifactError(f"{path}: {what} is not UTF-8 text", hint=_DAMAGED) from None


def _check_launch(path, launch: dict) -> None:
    """An ArtifactError naming the first field of the manifest's ``launch`` that is not what
    a launch needs: grid, block and cluster three positive ints (a ``sms_grid`` kernel's grid
    x is 0: it is set where the kernel is loaded), the shared bytes ints of 0 or more."""

    def count(v, low=0) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= low

    def dims(v, low=(1, 1, 1)) -> bool:
        return isinstance(v, list) and len(v) == 3 and all(map(count, v, low))

    sms = launch.get("sms_grid") is True
    three = "three positive integers"
    checks = {
        "grid": (lambda v: dims(v, (0, 1, 1) if sms else (1, 1, 1)), three),
        "block": (dims, three),
        "dynamic_shared_bytes": (count, "an integer of 0 or more"),
        "shared_bytes": (count, "an integer of 0 or more"),
        "cluster": (lambda v: v is None or dims(v), three),  # absent: no clusters
        "sms_grid": (lambda v: isinstance(v, bool), "true or false"),  # absent: a fixed grid
    }
    for field, (ok, want) in checks.items():
        if field not in launch:
            if field in ("cluster", "sms_grid"):
                continue
            raise ArtifactError(f"{path}: the manifest's launch has no {field}", hint=_DAMAGED)
        if not ok(launch[field]):
            raise ArtifactError(f"{path}: the manifest's launch {field} is "
                                f"{json.dumps(launch[field])}, not {want}", hint=_DAMAGED)  # fmt: skip


def _choose(path, images: dict, arch, device) -> str:
    have = ", ".join(images)
    want = arch or device
    if want is None:  # no GPU: the first image, for reading
        return next(iter(images))
    found = want if want in images else None  # the exact arch first, then its other spelling
    if found is None:
        found = next((a for a in images if sm_number(a) == sm_number(want)), None)
    if found is None:
        why = "this GPU is" if arch is None else "asked for"
        raise ArtifactError(f"{path} holds code for {have}; {why} {want}",
                            hint=f"save it with archs=[{want!r}, ...] (or tirx compile "
                            f"--arch {want} --out), where NVRTC compiles for {want} and the "
                            "kernel's instructions exist on it")  # fmt: skip
    return found


def _parts(manifest: dict, sig):
    """The stub function, tensor maps and pointer requirements the stored executable needs."""
    from ...dtypes import dtype_of
    from ...ir.aligned_access import AccessKind
    from ...ir.tensor_map import TensorMap, TensorMapFields
    from ...layout import S, TileLayout
    from .alignment import Alignment, Requirements

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
    cluster = la.get("cluster")  # absent from files saved before clusters: none
    launch = ir.LaunchConfig(
        tuple(la["grid"]), tuple(la["block"]), int(la["dynamic_shared_bytes"]),
        tuple(cluster) if cluster else None, bool(la.get("sms_grid", False)),
    )  # fmt: skip
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
