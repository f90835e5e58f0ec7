"""``tirx.compile``: the pipeline from a parsed kernel to something you can call.

    parse (at @T.function) -> lower (views, tile contracts, shared plan)
        -> sim: SimExecutable
        -> cuda: codegen -> NVRTC (content-addressed cache) -> load -> CudaExecutable

Compiling the same kernel object for the same target again in one process is a dictionary
lookup: the first result is remembered per (kernel, target) and the repeat gets a twin of it
(same code and loaded module, its own ``cache == "hit"``, timings and per-call state). The
lowered IR is remembered per (kernel, arch) too, so the simulator and the GPU share one
lowering. A kernel is immutable once parsed; what else would make a remembered result stale
is checked on every lookup (see :class:`_Memo`). :func:`clear_cache` forgets everything.

Across processes, a kernel compiled before skips the front end: ``@T.function`` found it in
the front-end cache (tirx/frontend_cache.py) without parsing, and for the cuda target its lowered IR
and generated source come from there (``timings["frontend"]``; parse, lower and codegen 0).
"""

from __future__ import annotations

import functools
import time
import weakref
from dataclasses import dataclass, field, replace

from . import collector, frontend_cache
from .errors import TirxError
from .executable import Executable, SimExecutable
from .ir import nodes as ir
from .isa import registry as isa_registry
from .script.parser import KernelFunction
from .target import Target
from .transform.lower import lower_function

__all__ = ["compile", "clear_cache"]


@dataclass
class _Memo:
    """What one kernel object has been compiled to in this process.

    Valid while the instruction-contract registry is the same object (redefining contracts,
    as tests do, replaces it) and :func:`clear_cache` has not run since. (A kernel's IR never
    changes, and is not read here: a kernel from the front-end cache parses it on first use.)
    Entries hold no reference to the kernel itself, so the weak map below frees them with it.
    """

    registry: dict
    generation: int
    lowered: dict[int, ir.Function] = field(default_factory=dict)  # by sm number
    executables: dict[Target, Executable] = field(default_factory=dict)  # twins, kernel=None


_MEMO: weakref.WeakKeyDictionary[KernelFunction, _Memo] = weakref.WeakKeyDictionary()
_GENERATION = 0


def compile(func, target=None, *, sms: int | None = None) -> Executable:  # noqa: A001
    """Compile a ``@T.function`` kernel for ``target`` ("cuda", "cuda -arch=sm_90", "sim",
    a :class:`tirx.Target`, or None: the GPU when one is visible, else the simulator).

    ``sms``: the multiprocessor count a ``grid="sms"`` kernel is launched for (the target's
    ``-sms=N``); by default the GPU's own, and 132 (the H200's) on the simulator.

    ``exe.cache`` is ``"hit"`` when the compiled code came from a cache (this process's
    memory, or the disk cache for the cuda target) and ``"miss"`` when it was built now.

    ``exe.timings`` are milliseconds per stage. ``parse`` is what ``@T.function`` spent when
    the kernel was defined (0 for a kernel the front-end cache found); every other entry was
    spent inside this call (``frontend``, ``lower``, ``codegen``, ``nvrtc``, ``load``, or
    ``memo`` for a repeat) and they add up to its wall time, ``other`` being the rest.

    An explicit arch (``"cuda -arch=sm_90"``) asks the GPU nothing and imports no driver
    bindings here: the module loads at the first launch (see :class:`~tirx.Target`). On a GPU
    machine NVRTC's first compile in a process initializes the CUDA driver itself; a cold
    compile starts that initialization in a thread beside its lowering."""
    t0 = time.perf_counter()
    if not isinstance(func, KernelFunction):
        raise TirxError(
            f"tirx.compile expects a @T.function kernel, got {type(func).__name__}",
            hint="decorate the kernel with @T.function",
        )
    target = Target.parse(target)
    if sms is not None:
        target = replace(target, sms=sms)
    memo = _memo_of(func)
    known = memo.executables.get(target)
    if known is not None:
        # the same stages as the first compile, none of which ran this time
        timings = dict.fromkeys(known.timings, 0.0)
        timings["parse"] = func.parse_ms
        timings["memo"] = (time.perf_counter() - t0) * 1e3
        return known.twin(func, "hit", _close(timings, t0))
    with collector.paused():
        return _compile_anew(func, target, memo, t0)


def _compile_anew(func: KernelFunction, target: Target, memo: _Memo, t0: float) -> Executable:
    """The compile past the memo: lower (or find the front end's work on disk), then the
    simulator's executable or the CUDA build."""
    timings = {"parse": func.parse_ms}
    t1 = time.perf_counter()
    arch = target.arch_number
    lowered = memo.lowered.get(arch)
    stored = frontend_cache.load(func, arch) if lowered is None and target.kind == "cuda" else None
    if stored is not None:
        lowered = memo.lowered[arch] = stored[0]
        timings["frontend"] = (time.perf_counter() - t1) * 1e3
        timings["lower"] = 0.0
    else:
        if lowered is None:
            if target.kind == "cuda":
                from .backend.cuda.libnvrtc import start_loading

                # NVRTC's library loads while the kernel lowers; for a named arch, the CUDA
                # driver initializes meanwhile too (NVRTC's first compile would wait for it)
                start_loading(init_driver=target.arch_given)
            lowered = memo.lowered[arch] = lower_function(func.ir, arch=arch)
        timings["lower"] = (time.perf_counter() - t1) * 1e3
    if target.kind == "sim":
        exe = SimExecutable(func, lowered, target, timings)
    else:
        from .backend.cuda.build import build

        if stored is None:
            stage = functools.partial(frontend_cache.prepare, func, arch, lowered)
            try:
                exe = build(func, lowered, target, timings, meanwhile=stage)
            except BaseException:
                frontend_cache.discard(func, arch)
                raise
            frontend_cache.store(func, arch, lowered, exe.source)
        else:
            exe = build(func, lowered, target, timings, source=stored[1])
    _close(timings, t0)
    exe.compile_kernel = compile
    memo.executables[target] = exe.twin(None, exe.cache, dict(timings))
    return exe


def _close(timings: dict, t0: float) -> dict:
    """Add ``other``: the call's wall time since ``t0`` that no stage accounts for (parsing
    the target, first-use imports of the backend, lookups), so that every entry but
    ``parse`` (spent earlier, at ``@T.function``) adds up to the time the call took."""
    wall = (time.perf_counter() - t0) * 1e3
    timings["other"] = 0.0
    timings["other"] = max(wall - sum(v for k, v in timings.items() if k != "parse"), 0.0)
    return timings


def clear_cache() -> None:
    """Forget every compiled kernel: this process's memory (including what repeated
    ``tirx.compile`` calls return) and the on-disk cache in ``$TIRX_CACHE_DIR``.

    Executables already returned keep working; the next compile of any kernel is a miss."""
    global _GENERATION
    _GENERATION += 1
    _MEMO.clear()
    frontend_cache.clear()
    from .backend.cuda.cache import default_cache

    default_cache().clear()


def _memo_of(func: KernelFunction) -> _Memo:
    memo = _MEMO.get(func)
    registry = isa_registry.CONTRACTS
    if memo is None or memo.registry is not registry or memo.generation != _GENERATION:
        memo = _MEMO[func] = _Memo(registry, _GENERATION)
    return memo
