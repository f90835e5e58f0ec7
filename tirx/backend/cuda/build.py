"""The CUDA build: codegen, the NVRTC command line, the compile through the disk cache, then
the executable (tirx/backend/cuda/executable.py).

What the compile needs is imported here; the executable's module (its launch machinery and
the driver module) is imported in a thread while NVRTC compiles, which releases the GIL: a
cold compile waits for NVRTC, not for those imports."""

from __future__ import annotations

import functools
import time

from ...executable import CacheState
from ...ir import nodes as ir
from .abi import CODEGEN_VERSION
from .cache import cache_key, default_cache
from .nvrtc import command_line, compile_cuda, nvrtc_version

__all__ = ["MINIMAL", "NVRTC_OPTIONS", "build", "nvrtc_arch", "nvrtc_options"]

# Bit-exact agreement with the simulator: no contraction of a*b+c into FMA.
NVRTC_OPTIONS = ("--fmad=false",)
# NVRTC 12.4 and later leave out, with -minimal, what generated code never uses (textures and
# surfaces, the device runtime API, their types): each compile reads that much less of NVRTC's
# builtin headers, about 4 ms of the seed's 40 ms. The binaries are the same byte for byte
# (PTX and CUBIN of every kernel the test suite compiles, compared when this was added).
MINIMAL = "-minimal"


def nvrtc_options(version: tuple[int, int]) -> tuple[str, ...]:
    """What tirx adds to NVRTC's default options (:data:`~.nvrtc.DEFAULT_OPTIONS`) for the code
    it generates, with NVRTC ``version``."""
    return (*NVRTC_OPTIONS, MINIMAL) if version >= (12, 4) else NVRTC_OPTIONS


def build(kernel, lowered: ir.Function, target, timings: dict, source=None, meanwhile=None):
    """Generate (unless ``source``, what codegen made of ``lowered`` before, is given: the
    front-end cache keeps it), compile (through the cache) and load when the target's arch came
    from the GPU (``target.arch_given``: left to the first launch, see
    :meth:`~.executable.CudaExecutable.load`). Returns the
    :class:`~.executable.CudaExecutable`.

    ``meanwhile(source)``, if given, runs in a thread during the compile: NVRTC releases the
    GIL, so Python work that does not feed it (the front-end cache's encoding) costs no wall
    time there (with the CUBIN from the cache it runs here, before the return). It must not
    raise."""
    t0 = time.perf_counter()
    if source is None:
        from .codegen import generate  # not imported when the front-end cache has the source

        source = generate(lowered)
        timings["codegen"] = (time.perf_counter() - t0) * 1e3
    else:
        timings["codegen"] = 0.0
    t1 = time.perf_counter()
    filename = f"{lowered.name}.cu"
    arch = nvrtc_arch(lowered, target.arch)
    version = nvrtc_version()
    command = command_line(arch, nvrtc_options(version))  # what runs is what the key hashes
    key = cache_key(source, command, arch, version, CODEGEN_VERSION)
    during = functools.partial(_meanwhile, meanwhile, source)
    out, state = default_cache().get_or_compile(
        key,
        lambda: compile_cuda(source, arch=arch, filename=filename, command=command,
                             meanwhile=during),
    )  # fmt: skip
    if state == "hit" and meanwhile is not None:  # a cached CUBIN: no compile to run it beside
        meanwhile(source)
    from .executable import CudaExecutable  # imported meanwhile, where NVRTC compiled

    t2 = time.perf_counter()
    timings["nvrtc"] = (t2 - t1) * 1e3
    exe = CudaExecutable(kernel, lowered, target, timings, source, out)
    exe.arch = arch
    exe.cache = CacheState(state)
    # A named arch needs no device: the driver is left alone (its bindings cost tens of ms to
    # import) until the first launch loads the module. Otherwise the target probed already.
    if not target.arch_given:
        from . import driver

        if driver.gpu_count() > 0:
            exe.load()
            timings["load"] = (time.perf_counter() - t2) * 1e3
    return exe


def _meanwhile(meanwhile, source: str) -> None:
    """What runs beside NVRTC's compile: the caller's work, and the import of the executable's
    module (a failed import is left for the caller's own, after the compile, to raise)."""
    try:
        from . import executable  # noqa: F401
    except Exception:  # noqa: BLE001 - raised again where build() imports it
        pass
    if meanwhile is not None:
        meanwhile(source)


def nvrtc_arch(lowered: ir.Function, arch: str) -> str:
    """The arch NVRTC compiles for: ``sm_90a`` for a kernel that uses sm_90a's arch-specific
    forms (wgmma) on an sm_90 target (the lowering refused any other arch for them)."""
    if lowered.arch_specific and not arch.endswith("a"):
        return arch + "a"
    return arch
