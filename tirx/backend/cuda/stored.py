"""A CUDA executable made from saved parts instead of a compile: the cubin and PTX for one
arch, the parameters, the launch, and what the launcher must know that it would otherwise read
off the lowered program (pointer alignments, TMA tensor maps, written tensors).

It is a :class:`CudaExecutable` in every other respect -- the same checks by parameter, the
same runner and memo, the C launch, tensor maps encoded per call -- so a saved kernel launches
as the kernel it was saved from. Its lowered function has the parameters and the launch and no
body: the code is the cubin. NVRTC is never involved (tirx/artifact.py reads and writes the
file)."""

from __future__ import annotations

from ...errors import LaunchError, TirxError
from ...executable import CacheState
from ...ir import nodes as ir
from . import driver
from .executable import CudaExecutable
from .nvrtc import NvrtcOutput

__all__ = ["StoredExecutable"]


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
        # the checked path before the first launch: without a GPU, say that first (the
        # arguments would fail as CPU tensors, which is not the mistake)
        if self._launcher is None:
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
