"""``tirx.compile``: the pipeline from a parsed kernel to something you can call.

    parse (at @T.function) -> lower (views, tile contracts, shared plan)
        -> sim: SimExecutable
        -> cuda: codegen -> NVRTC (content-addressed cache) -> load -> CudaExecutable
"""

from __future__ import annotations

import time

from .errors import TirxError
from .executable import Executable, SimExecutable
from .script.parser import KernelFunction
from .target import Target
from .transform.lower import lower_function

__all__ = ["compile"]


def compile(func, target=None) -> Executable:  # noqa: A001 - the public name SPEC asks for
    """Compile a ``@T.function`` kernel for ``target`` ("cuda", "cuda -arch=sm_90", "sim",
    a :class:`tirx.Target`, or None: the GPU when one is visible, else the simulator)."""
    if not isinstance(func, KernelFunction):
        raise TirxError(
            f"tirx.compile expects a @T.function kernel, got {type(func).__name__}",
            hint="decorate the kernel with @T.function",
        )
    target = Target.parse(target)
    timings = {"parse": func.parse_ms}
    t0 = time.perf_counter()
    lowered = lower_function(func.ir, arch=target.arch_number)
    timings["lower"] = (time.perf_counter() - t0) * 1e3
    if target.kind == "sim":
        return SimExecutable(func, lowered, target, timings)
    from .backend.cuda.executable import build

    return build(func, lowered, target, timings)
