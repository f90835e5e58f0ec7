"""Named-barrier kernels of the sanitizer parity suite (tests/test_sanitizer_parity.py): a
producer warpgroup stores a tile to shared memory and a consumer warpgroup reads it, ordered
by ``bar.arrive 1, 256`` / ``bar.sync 1, 256`` in the corrected twins. Planted: no barrier at
all, and the producer's arrive placed before its stores. The question they settle on the GPU
is whether racecheck orders a producer's ``bar.arrive`` before a consumer's ``bar.sync`` as the
simulator does (the ISA's producer/consumer pattern), and sees both plants. Measured on an H100
(docs/gpu-runs/sessions.md, 2026-12-05): racecheck reports the handoff without a barrier and
is silent on the twin, but it is also silent on the arrive placed before the stores: it does
not order the producer's stores by where its ``bar.arrive`` stands, so that plant is ``blind``.
"""

from __future__ import annotations

import functools

import numpy as np

import tirx
from tests.planted import Kind, Planted
from tirx import T

__all__ = ["NAMED_BARRIER_CASES", "BY_NAME", "handoff_kernel"]

N = 128


@functools.cache
def handoff_kernel(barrier: str):
    """``barrier``: "arrive-sync" (the twin), "none", or "arrive-first" (the producer arrives
    before it stores)."""
    arrive_first = barrier == "arrive-first"
    ordered = barrier != "none"

    @T.function
    def named_barrier_handoff(A: T.Tensor((N,), "int32"), Out: T.Tensor((N,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=2 * N))
        s = T.alloc_shared((N,), "int32")
        tid = T.cuda.thread_idx("x")
        if tid < N:
            if arrive_first:
                T.ptx["bar.arrive"](1, 2 * N)
            s[tid] = A[tid] * 3
            if ordered and not arrive_first:
                T.ptx["bar.arrive"](1, 2 * N)
        else:
            if ordered:
                T.ptx["bar.sync"](1, 2 * N)
            Out[tid - N] = s[2 * N - 1 - tid]

    return named_barrier_handoff


def _build(barrier: str):
    return lambda: tirx.compile(handoff_kernel(barrier), "sim").lowered


def _inputs():
    return [np.arange(N, dtype=np.int32) - 40, np.zeros(N, np.int32)]


_ARRIVE_FIRST = (
    "measured on H100s and an H200: racecheck reports the stores a producer makes after its "
    "bar.arrive and a consumer reads after its bar.sync on some machines and runs and not on "
    "others (the simulator orders only what comes before the arrive, and reports the race "
    "every time)"
)

NAMED_BARRIER_CASES: list[Planted] = [
    Planted("named_barrier_handoff_without_a_barrier", Kind.RACE, _build("none"), _inputs, True),
    Planted("named_barrier_arrive_before_the_stores", Kind.RACE, _build("arrive-first"), _inputs,
            True, _ARRIVE_FIRST, seen_sometimes=True),
    Planted("named_barrier_handoff.fixed", Kind.RACE, _build("arrive-sync"), _inputs, False),
]  # fmt: skip
BY_NAME = {p.name: p for p in NAMED_BARRIER_CASES}
