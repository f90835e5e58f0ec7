"""tirx: write, check, compile, simulate and see warp-level matrix kernels (the TIRx tile language).

    import tirx
    from tirx import T
    exe = tirx.compile(kernel, target="sim")   # or "cuda"

Importing tirx touches no GPU, compiles nothing and reads no file beyond its own modules.
"""

from . import layout
from .compile import clear_cache, compile
from .errors import (
    CompileError,
    ContractError,
    LaunchError,
    LayoutError,
    SimulationError,
    TirxError,
    TirxSyntaxError,
)
from .isa import lookup as instruction_contract
from .layout import (
    Axis,
    ComposeLayout,
    Iter,
    R,
    S,
    TileLayout,
    bx,
    by,
    bz,
    laneid,
    m,
    tid_in_wg,
    tx,
    warpid,
    wgid,
    wid_in_wg,
)
from .script.namespace import T
from .script.parser import KernelFunction as Kernel
from .target import Target
from .version import __version__

__all__ = [
    "__version__",
    "compile",
    "clear_cache",
    "T",
    "Target",
    "layout",
    "instruction_contract",
    "gpu_available",
    "torch_op",
    "TensorSpec",
    "bench",
    "BenchResult",
    "TimingError",
    "autotune",
    "load",
    "ArtifactError",
    "Kernel",
    "RunResult",
    "PtxTrace",
    "RegisterTrace",
    "TileLayout",
    "ComposeLayout",
    "S",
    "R",
    "Iter",
    "Axis",
    "laneid",
    "warpid",
    "tx",
    "bx",
    "by",
    "bz",
    "wgid",
    "tid_in_wg",
    "wid_in_wg",
    "m",
    "TirxError",
    "TirxSyntaxError",
    "LayoutError",
    "ContractError",
    "CompileError",
    "LaunchError",
    "SimulationError",
]


def load_ipython_extension(ipython):
    """``%load_ext tirx``: register the ``%%tirx`` cell magic (the notebook layer, lazily)."""
    import importlib

    importlib.import_module("widgets.magic").load_ipython_extension(ipython)


def gpu_available() -> bool:
    """True when a CUDA GPU is visible to the driver (a safe probe: never raises)."""
    from .backend.cuda.driver import gpu_count

    return gpu_count() > 0


_SIM_NAMES = ("RunResult", "PtxTrace", "RegisterTrace")
# Public names of the modules that bring kernels into torch, time, tune and save them, loaded
# on first use: name -> module.
_LAZY = {
    "torch_op": "torch_ops",
    "bench": "timing",
    "BenchResult": "timing",
    "TimingError": "timing",
    "autotune": "tuning",
    "load": "backend.cuda.stored",
    "ArtifactError": "artifact",
    "TensorSpec": "signature",
}


def __getattr__(name):
    # The simulator's result types, loaded on first use (they bring numpy with them).
    if name in _SIM_NAMES:
        from . import sim

        return getattr(sim, name)
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'tirx' has no attribute {name!r}")
