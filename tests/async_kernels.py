"""Planted faults of the asynchronous model and their corrected twins, in the form of the
sanitizer parity suite (tests/test_sanitizer_parity.py, tests/planted.py): bytes an
asynchronous unit delivered read by a thread that never observed the completion, a proxy
fence placed after the barrier that publishes the stores, a block that ends with copies in
flight, an mbarrier armed for its next phase before the copy completing the current one landed;
and, clean, a block that ends with an mbarrier phase nobody completes.

Each kernel is a ``@T.function`` from text (tests/helpers.py's ``define``: the parser reads a
file), lowered for the simulator; the runner launches those with tensor maps through tirx's
own CUDA path (``Planted.kernel``), which passes the hidden map parameters.

The sanitizer sees none of the first three: measured on an H100 (docs/gpu-runs/sessions.md,
2026-12-05), racecheck and memcheck stay silent on every such planted fault here, as the
compute-sanitizer guide leads one to expect (it describes racecheck as checking threads'
shared-memory accesses, and nothing about the async proxy, mbarrier phases or copies
outliving a block; a report by the FlashAttention maintainers says racecheck attributes a
tensor copy's writes to no thread). So those faults are ``blind``, with that reason. An
early-armed barrier is not blind: the GPU itself traps (an unspecified launch failure, which
memcheck reports as the run's error; racecheck and synccheck stay silent, and under them the
ring ran right in the runs measured, 2026-12-07).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np

from tests.helpers import define
from tests.pipeline_kernels import ring_inputs, ring_kernel
from tests.planted import Kind, Planted

__all__ = ["ASYNC_CASES", "BY_NAME", "SOURCES"]

TMA = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"

# tid 0 loads a 32 x 64 f16 box (4096 bytes) through the mbarrier; {wait}; every thread copies
# 16 elements of the tile to Out
TMA_READ = """
@T.function
def kernel(A: T.Tensor((32, 64), "float16"), Out: T.Tensor((32, 64), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    s = T.alloc_shared((32, 64), "float16", align=128)
    bars = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 4096)
        T.cuda.tile.apply(T.ptx[TMA], s[:, :], A[:, :], box=(32, 64), coords=(0, 0), swizzle=0, mbar=bars[0], scope="thread")
    {wait}
    for i in range(16):
        Out[tid // 4, (tid % 4) * 16 + i] = s[tid // 4, (tid % 4) * 16 + i]
"""

# every thread copies its 16 bytes with cp.async and arrives on the barrier when they land
# (cp.async.mbarrier.arrive.noinc: 64 arrivals complete the phase); {wait}; each reads its own
CP_ASYNC_ARRIVE = """
@T.function
def kernel(A: T.Tensor((256,), "float32"), Out: T.Tensor((256,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    s = T.alloc_shared((256,), "float32", align=16)
    bars = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 64)
    T.cuda.cta_sync()
    T.ptx["cp.async.ca.shared.global"](s[tid * 4], A[tid * 4], 16)
    T.ptx["cp.async.mbarrier.arrive.noinc.shared::cta.b64"](bars[0])
    {wait}
    for j in range(4):
        Out[tid * 4 + j] = s[tid * 4 + j] * 2.0
"""

# threads store a row each, {publish}, two threads hand their row to the bulk copy engine
BULK_FENCE = """
@T.function
def kernel(A: T.Tensor((2, 64), "float32"), Out: T.Tensor((2, 64), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    s = T.alloc_shared((2, 64), "float32", align=16)
    for j in range(2):
        s[tid // 32, (tid % 32) * 2 + j] = A[tid // 32, (tid % 32) * 2 + j] + 1.0
    {publish}
    if tid < 2:
        T.ptx["cp.async.bulk.global.shared::cta.bulk_group"](Out[tid, 0], s[tid, 0], 256)
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group"](0)
"""

# every thread copies 16 bytes with cp.async and commits; {wait}; Out gets the thread ids
CP_ASYNC_EXIT = """
@T.function
def kernel(A: T.Tensor((256,), "float32"), Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
    s = T.alloc_shared((256,), "float32", align=16)
    tid = T.cuda.thread_idx("x")
    T.ptx["cp.async.ca.shared.global"](s[tid * 4], A[tid * 4], 16)
    T.ptx["cp.async.commit_group"]()
    {wait}
    Out[tid] = tid
"""

# tid 0 arms the barrier and loads a box nobody reads; {wait}; Out gets the thread ids
TMA_EXIT = """
@T.function
def kernel(A: T.Tensor((32, 64), "float16"), Out: T.Tensor((128,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128))
    s = T.alloc_shared((32, 64), "float16", align=128)
    bars = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 4096)
        T.cuda.tile.apply(T.ptx[TMA], s[:, :], A[:, :], box=(32, 64), coords=(0, 0), swizzle=0, mbar=bars[0], scope="thread")
        {wait}
    Out[tid] = tid
"""

# a phase with 64 expected arrivals gets 32 and nobody waits: only bytes of shared memory
PHASE_PENDING = """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
    bars = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 64)
    T.cuda.cta_sync()
    if tid < 32:
        T.ptx["mbarrier.arrive.shared::cta.b64"](bars[0])
    Out[tid] = tid
"""

SOURCES = {
    "tma_read_before_observing": TMA_READ,
    "cp_async_arrive_read_before_observing": CP_ASYNC_ARRIVE,
    "proxy_fence_after_the_barrier": BULK_FENCE,
    "exit_with_cp_async_in_flight": CP_ASYNC_EXIT,
    "exit_with_tensor_copy_in_flight": TMA_EXIT,
    "exit_with_an_mbarrier_phase_pending": PHASE_PENDING,
}

_TMA_ONLY_THREAD_0 = "if tid == 0:\n        T.cuda.mbarrier_wait(bars[0], 0)"
VARIANTS = {  # name -> (the fault's fields, the twin's fields)
    "tma_read_before_observing": (
        dict(wait=_TMA_ONLY_THREAD_0),  # thread 0 observed the phase; the others did not
        dict(wait=_TMA_ONLY_THREAD_0 + "\n    T.cuda.cta_sync()"),  # ordered after thread 0
    ),
    "cp_async_arrive_read_before_observing": (
        dict(wait="pass"),  # the issuing thread's own copy: the arrive does not wait for it
        dict(wait="T.cuda.mbarrier_wait(bars[0], 0)"),
    ),
    "proxy_fence_after_the_barrier": (
        dict(publish='T.cuda.cta_sync()\n    T.ptx["fence.proxy.async.shared::cta"]()'),
        dict(publish='T.ptx["fence.proxy.async.shared::cta"]()\n    T.cuda.cta_sync()'),
    ),
    "exit_with_cp_async_in_flight": (
        dict(wait="pass"),
        dict(wait='T.ptx["cp.async.wait_group"](0)'),
    ),
    "exit_with_tensor_copy_in_flight": (
        dict(wait="pass"),
        dict(wait="T.cuda.mbarrier_wait(bars[0], 0)"),
    ),
}


@functools.cache
def _dir() -> Path:
    """This process's folder for the kernels' files (the parser reads a kernel's source)."""
    return Path(tempfile.mkdtemp(prefix="tirx_async_kernels_"))


@functools.cache
def kernel(name: str, fault: bool | None):
    """The ``@T.function`` of planted kernel ``name`` (its fault, its twin, or for a clean-only
    entry ``None``)."""
    fields = {} if fault is None else VARIANTS[name][0 if fault else 1]
    source = (
        SOURCES[name]
        .replace("{wait}", fields.get("wait", ""))
        .replace("{publish}", fields.get("publish", ""))
    )
    return define(source, _dir(), "kernel", TMA=TMA)


def _lowered(define_kernel, *args):
    """The simulator's lowered form of ``define_kernel(*args)`` (a ``@T.function``)."""
    import tirx

    return tirx.compile(define_kernel(*args), target="sim").lowered


def _inputs(name):
    if name in ("tma_read_before_observing",):
        a = (np.arange(32 * 64) % 97).reshape(32, 64).astype(np.float16)
        return lambda: [a.copy(), np.zeros((32, 64), np.float16)]
    if name == "cp_async_arrive_read_before_observing":
        return lambda: [np.arange(256, dtype=np.float32) * 0.5, np.zeros(256, np.float32)]
    if name == "proxy_fence_after_the_barrier":
        return lambda: [
            np.arange(128, dtype=np.float32).reshape(2, 64),
            np.zeros((2, 64), np.float32),
        ]
    if name == "exit_with_cp_async_in_flight":
        return lambda: [np.arange(256, dtype=np.float32), np.zeros(64, np.int32)]
    if name == "exit_with_tensor_copy_in_flight":
        a = np.ones((32, 64), np.float16)
        return lambda: [a.copy(), np.zeros(128, np.int32)]
    return lambda: [np.zeros(64, np.int32)]


_BLIND = (
    "measured on an H100: compute-sanitizer stays silent; its guide documents no check of {what}"
)
_KIND = {
    "tma_read_before_observing": (Kind.ASYNC_VISIBILITY, "an mbarrier phase's observers"),
    "cp_async_arrive_read_before_observing": (Kind.ASYNC_VISIBILITY, "cp.async.mbarrier.arrive"),
    "proxy_fence_after_the_barrier": (Kind.PROXY_ORDER, "the async proxy"),
    "exit_with_cp_async_in_flight": (Kind.EXIT_IN_FLIGHT, "copies outliving a block"),
    "exit_with_tensor_copy_in_flight": (Kind.EXIT_IN_FLIGHT, "copies outliving a block"),
}


def _cases() -> list[Planted]:
    cases = []
    for name, (kind, what) in _KIND.items():
        for fault in (True, False):
            cases.append(
                Planted(
                    name if fault else name + ".fixed",
                    kind,
                    functools.partial(_lowered, kernel, name, fault),
                    _inputs(name),
                    fault,
                    _BLIND.format(what=what),
                    kernel=functools.partial(kernel, name, fault),
                )
            )
    name = "exit_with_an_mbarrier_phase_pending"
    cases.append(
        Planted(
            name,
            Kind.EXIT_IN_FLIGHT,
            functools.partial(_lowered, kernel, name, None),
            _inputs(name),
            False,
            kernel=functools.partial(kernel, name, None),
        )
    )
    for name, planted in _RINGS.items():
        for fault in (True, False):
            cases.append(
                Planted(
                    name if fault else name + ".fixed",
                    Kind.EARLY_ARM,
                    functools.partial(_lowered, ring, planted if fault else None),
                    _ring_inputs,
                    fault,
                    kernel=functools.partial(ring, planted if fault else None),
                )
            )
    return cases


# the ring of tests/pipeline_kernels.py over 64 tiles, its producer arming a stage's full
# barrier before the wait on its empty barrier, or with no such wait: the GPU traps
# (measured on an H100, docs/gpu-runs/sessions.md, 2026-12-07); the twin is the ring as written
_RINGS = {
    "stage_armed_before_its_empty_wait": "arm",
    "stage_refilled_without_its_empty_wait": "empty",
}
RING_TILES = 64


@functools.cache
def ring(planted: str | None):
    return ring_kernel(_dir(), RING_TILES, planted=planted)


def _ring_inputs():
    a, out, _ = ring_inputs(RING_TILES)
    return [a, out]


ASYNC_CASES: list[Planted] = _cases()
BY_NAME = {p.name: p for p in ASYNC_CASES}
