"""The shared memory's record of atomic updates since the last barrier (the race model of
atomics; see :mod:`tirx.sim.shared`): atomics never race with each other, but an atomic and a
plain read or write of the same byte by another thread race unless a barrier orders them
(racecheck ignores atomic-atomic pairs). The atomics are kept per byte like the readers are
(:class:`AtomicAccesses`); their semantics are the cta_ops family's
(``tirx/families/cta_ops/sim.py``)."""

from __future__ import annotations

import numpy as np

from .memory import accessors_per_byte, merge_accessors

__all__ = ["AtomicAccesses"]


class AtomicAccesses:
    """Per shared byte: which threads updated it atomically since the last barrier -- one warp
    or several (-2), one thread of that warp at its latest epoch or several (-2), that epoch,
    the latest line. Plain accesses check against it; atomics only add to it."""

    def __init__(self, size: int):
        self.warp = np.full(size, -1, dtype=np.int32)
        self.tid = np.zeros(size, dtype=np.int32)
        self.stamp = np.zeros(size, dtype=np.int32)
        self.site = np.zeros(size, dtype=np.int32)

    def clear(self) -> None:
        self.warp.fill(-1)

    def check(self, memory, b, p, wp, e, verb: str) -> None:
        """Fault if a plain access (``verb``) of bytes ``b`` by threads ``p`` (warps ``wp`` at
        epochs ``e``) meets an atomic of another thread that no barrier orders before it."""
        xw = self.warp[b]
        bad = (xw == -2) | ((xw >= 0) & ((xw != wp) | ((self.stamp[b] == e) & (self.tid[b] != p))))
        if not bad.any():
            return
        k = int(np.flatnonzero(bad)[0])
        xt = int(self.tid[b[k]])
        if xw[k] == -2 or xt < 0:
            other, who = "threads of several warps atomically updated", -1
            if xw[k] >= 0:
                other, who = f"threads of warp {xw[k]} atomically updated", 32 * int(xw[k])
        else:
            other, who = f"thread {xt} (warp {xt // 32}, lane {xt % 32}) atomically updated", xt
        raise memory.race(b, p, k, verb, other, who, self.site[b[k]])

    def record(self, b, p, wp, e, site: int) -> None:
        bu, in_w, in_p, in_e = accessors_per_byte(b, wp, p, e)
        merge_accessors(self.warp, self.stamp, self.tid, bu, in_w, in_p, in_e)
        self.site[bu] = site
