"""The CUDA executable: NVRTC output (cached), a loaded module, a pre-packed launcher."""

from __future__ import annotations

import functools
import time

from ...errors import LaunchError
from ...executable import ArgChecker, Executable
from ...ir import nodes as ir
from . import driver
from .cache import cache_key, default_cache
from .codegen import CODEGEN_VERSION, generate, param_kinds
from .nvrtc import DEFAULT_OPTIONS, compile_cuda, nvrtc_version

__all__ = ["CudaExecutable", "build"]

# Bit-exact agreement with the simulator: no contraction of a*b+c into FMA.
NVRTC_OPTIONS = ("--fmad=false",)


def build(kernel, lowered: ir.Function, target, timings: dict) -> CudaExecutable:
    """Generate, compile (through the cache) and, when a GPU is visible, load."""
    t0 = time.perf_counter()
    source = generate(lowered)
    t1 = time.perf_counter()
    timings["codegen"] = (t1 - t0) * 1e3
    filename = f"{lowered.name}.cu"
    options = (*DEFAULT_OPTIONS, *NVRTC_OPTIONS)
    key = cache_key(source, options, target.arch, nvrtc_version(), CODEGEN_VERSION)
    out, state = default_cache().get_or_compile(
        key, lambda: compile_cuda(source, arch=target.arch, filename=filename,
                                  options=NVRTC_OPTIONS)
    )
    t2 = time.perf_counter()
    timings["nvrtc"] = (t2 - t1) * 1e3
    exe = CudaExecutable(kernel, lowered, target, timings, source, out)
    exe.cache = state
    if driver.gpu_count() > 0:
        exe.load()
        timings["load"] = (time.perf_counter() - t2) * 1e3
    return exe


class CudaExecutable(Executable):
    def __init__(self, kernel, lowered, target, timings, source, nvrtc_out):
        super().__init__(kernel, lowered, target, timings)
        self.source = source
        self.ptx = nvrtc_out.ptx
        self.cubin = nvrtc_out.cubin
        self.nvrtc = nvrtc_out
        self.checker = ArgChecker(lowered, "cuda")
        self._kinds = param_kinds(lowered)
        self._launcher = None
        self._module = None
        launch = lowered.launch
        self._grid, self._block, self._smem = launch.grid, launch.block, launch.dynamic_smem_bytes
        self._is_buffer = [isinstance(p, ir.Buffer) for p in lowered.params]

    @functools.cached_property
    def sass(self) -> str | None:
        from .tools import disassemble

        return disassemble(self.cubin) if self.cubin else None

    @property
    def stats(self) -> dict:
        stats = {"shared_bytes": self.lowered.shared_bytes, **self.nvrtc.stats}
        stats.setdefault("registers", None)
        stats.setdefault("spill_stores", None)
        stats.setdefault("spill_loads", None)
        return stats

    def load(self) -> None:
        """Load the cubin into the GPU's primary context (once)."""
        if self._launcher is not None:
            return
        if driver.gpu_count() == 0:
            raise LaunchError(
                "no CUDA GPU is visible, so this kernel cannot be launched",
                hint='compile with target="sim" to run it on the CPU simulator',
            )
        device = driver.device_arch(0)
        if device and device.split("_")[1].rstrip("a") != self.target.arch.split("_")[1].rstrip("a"):
            raise LaunchError(
                f"kernel compiled for {self.target.arch} but the GPU is {device}",
                hint='compile with target="cuda" to use the GPU\'s architecture',
            )
        self._module = driver.Module(self.cubin)
        kernel = self._module.function(self.lowered.name)
        self._launcher = kernel.launcher(self._kinds)

    def __call__(self, *args):
        check = self.checker
        if len(args) != len(self._is_buffer):
            check.count(args)
        values = []
        for i, (p, a, is_buf) in enumerate(zip(self.lowered.params, args, self._is_buffer)):
            if is_buf:
                values.append(check.tensor(i, p, a).data_ptr())
            else:
                values.append(check.scalar(p, a))
        if self._launcher is None:
            self.load()
        self._launcher(self._grid, self._block, self._smem, driver.current_torch_stream(),
                       *values)
