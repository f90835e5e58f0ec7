"""The bulk-store kernel of the sanitizer parity suite (tests/test_sanitizer_parity.py), as a
clean case: threads store a tile into shared memory, fence the async proxy, synchronize, and
two threads each hand one row to ``cp.async.bulk``, commit and wait.

Only clean cases are here. The faults the simulator reports for bulk stores (a missing
``fence.proxy.async``, a source written before ``wait_group.read``, a destination accessed
before the wait, a block exiting with reads pending) concern the async proxy, which none of
racecheck, memcheck, initcheck or synccheck documents checking; see tirx/sim/bulkcopy.py.
"""

from __future__ import annotations

import numpy as np

import tirx
from tests.planted import Kind, Planted
from tirx import T

__all__ = ["BULK_CASES", "BY_NAME"]


@T.function
def bulk_store(A: T.Tensor((4, 64), "float32"), Out: T.Tensor((4, 64), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
    tid = T.cuda.linear_thread_id()
    bx = T.cuda.block_idx("x")
    s = T.alloc_shared((2, 64), "float32")
    for j in range(2):
        s[tid // 32, (tid % 32) * 2 + j] = A[2 * bx + tid // 32, (tid % 32) * 2 + j]
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.cta_sync()
    if tid < 2:
        T.ptx["cp.async.bulk.global.shared::cta.bulk_group"](Out[2 * bx + tid, 0], s[tid, 0], 256)
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group.read"](0)
        T.ptx["cp.async.bulk.wait_group"](0)


def _build():
    return tirx.compile(bulk_store, "sim").lowered


def _inputs():
    a = np.arange(4 * 64, dtype=np.float32).reshape(4, 64) * 0.25 - 5.0
    return [a, np.zeros_like(a)]


BULK_CASES: list[Planted] = [
    Planted("bulk_store.clean.racecheck", Kind.RACE, _build, _inputs, False),
    Planted("bulk_store.clean.memcheck", Kind.OUT_OF_BOUNDS, _build, _inputs, False),
    Planted("bulk_store.clean.synccheck", Kind.DIVERGENT_BARRIER, _build, _inputs, False),
]
BY_NAME = {p.name: p for p in BULK_CASES}
