"""Per shared byte, the accesses of one kind (plain reads, or atomic updates) made since the
last CTA barrier, for the race checks of :mod:`tirx.sim.shared`.

The accesses are kept by *slot*: one slot per warp (which of its lanes -- one lane, or
several -- and the latest time one of them accessed the byte) and one per asynchronous reader
(an agent of :mod:`tirx.sim.order`: the tensor core of a warpgroup). A later write by thread
``p`` is ordered after the accesses of a slot when ``p`` is ordered after the one lane's
access, or after each lane of the warp when several accessed it (the latest time standing
for all of them), or after the agent's. Keeping a warp's latest time, rather than one per
lane, is exact unless lanes of one warp accessed the byte at different times with a release
in between; keeping the warps apart is what lets a producer that waited on the arrivals of
several consumer warps (each arriving when it was done) write again.
"""

from __future__ import annotations

import numpy as np

from .memory import first
from .order import Order

__all__ = ["Accesses", "SEVERAL"]

SEVERAL = -2  # the lane of a slot that several lanes accessed
_MAX_AGENTS = 32  # asynchronous readers with a slot of their own (mask bits: warps + these)


class Accesses:
    """Per shared byte and slot: whether the slot accessed it since the last CTA barrier
    (``mask``), the latest time, which lane (or ``SEVERAL``) and the latest line."""

    def __init__(self, size: int, order: Order):
        self.order = order
        self.nwarps = order.nwarps
        slots = self.nwarps
        self.mask = np.zeros(size, dtype=np.uint64)
        self.time = np.zeros((slots, size), dtype=np.int32)
        self.lane = np.zeros((slots, size), dtype=np.int8)
        self.site = np.zeros((slots, size), dtype=np.int32)
        self.agent_cols: list[int] = []  # slot nwarps + i -> agent column
        self.dirty = False
        self.scratch = np.zeros(size, dtype=np.int64)
        self._pairs: np.ndarray | None = None  # made at the first step with repeated bytes

    def clear(self) -> None:
        if self.dirty:
            self.mask.fill(0)
            self.dirty = False

    def forget(self, b: np.ndarray) -> None:
        """Bytes ``b`` were written (their writer was checked against these accesses)."""
        if self.dirty:
            self.mask[b] = 0

    def _agent_slot(self, agent: int) -> int:
        if agent in self.agent_cols:
            return self.nwarps + self.agent_cols.index(agent)
        if len(self.agent_cols) == _MAX_AGENTS:
            raise RuntimeError("more asynchronous readers than the shared-memory records hold")
        self.agent_cols.append(agent)
        grow = [np.zeros((1, self.mask.size), dtype=a.dtype) for a in (self.time, self.lane)]
        self.time = np.concatenate([self.time, grow[0]])
        self.lane = np.concatenate([self.lane, grow[1]])
        self.site = np.concatenate([self.site, np.zeros((1, self.mask.size), np.int32)])
        return self.nwarps + len(self.agent_cols) - 1

    # -------------------------------------------------------------------- recording

    def record(self, b: np.ndarray, p: np.ndarray, site: int) -> None:
        """Threads ``p`` access bytes ``b`` now (a byte may appear more than once)."""
        n = b.size
        if not n:
            return
        self.dirty = True
        slot = (p >> 5).astype(np.intp)
        lane = (p & 31).astype(np.int8)
        order = np.arange(n)
        self.scratch[b] = order
        several = not (self.scratch[b] == order).all()  # a byte accessed by several threads
        size = self.mask.size
        at = slot * size + b  # (slot, byte) in the flat records
        if several:  # by several warps only (each pair once), or by lanes of one warp too
            pairs = self._pair_scratch()
            pairs[at] = order
            if not (pairs[at] == order).all():
                b, slot, lane = _per_pair(b, slot, lane, self.time.shape[0])
                at = slot * size + b
        bits = np.left_shift(np.uint64(1), slot.astype(np.uint64))
        old = self.mask[b]
        had = (old & bits) != 0
        lanes = self.lane.reshape(-1)
        prev = lanes[at]
        lanes[at] = np.where(had & (prev != lane), np.int8(SEVERAL), lane)
        self.time.reshape(-1)[at] = self.order.now
        self.site.reshape(-1)[at] = site
        if several:  # a byte may still come once per warp
            np.bitwise_or.at(self.mask, b, bits)
        else:
            self.mask[b] = old | bits

    def _pair_scratch(self) -> np.ndarray:
        """A scratch entry per (slot, byte), for telling repeated pairs (as ``scratch``)."""
        if self._pairs is None or self._pairs.size != self.time.size:
            self._pairs = np.zeros(self.time.size, dtype=np.int64)
        return self._pairs

    def record_agent(self, b: np.ndarray, agent: int, site: int) -> None:
        """Agent ``agent`` (an asynchronous reader) accessed the distinct bytes ``b`` now."""
        if not b.size:
            return
        self.dirty = True
        s = self._agent_slot(agent)
        self.time[s, b] = self.order.now
        self.lane[s, b] = 0
        self.site[s, b] = site
        self.mask[b] |= np.uint64(1) << np.uint64(s)

    # ---------------------------------------------------------------------- queries

    def first_unordered(self, b: np.ndarray, p: np.ndarray):
        """The first ``k`` such that an access of byte ``b[k]`` recorded here is not ordered
        before thread ``p[k]``, as ``(k, who, site)``: ``who`` a thread id, ``-(w + 1)`` for
        several lanes of warp ``w``, or an agent column (>= the thread columns); else None."""
        if not self.dirty:
            return None
        m = self.mask[b]
        live = np.flatnonzero(m)
        if not live.size:
            return None
        bb, pp, mm = b[live], p[live], m[live]
        found = None
        present = int(np.bitwise_or.reduce(mm))
        s = 0
        while present:
            if present & 1:
                sel = np.flatnonzero((mm >> np.uint64(s)) & np.uint64(1))
                bad = self._unordered(s, bb[sel], pp[sel])
                if bad.any():
                    k = int(sel[first(bad)])
                    if found is None or k < found[0]:
                        found = (k, s)
            present >>= 1
            s += 1
        if found is None:
            return None
        k, s = found
        byte = int(bb[k])
        if s < self.nwarps:
            lane = int(self.lane[s, byte])
            who = 32 * s + lane if lane >= 0 else -(s + 1)
        else:
            who = self.agent_cols[s - self.nwarps]
        return int(live[k]), who, int(self.site[s, byte])

    def _unordered(self, s: int, b: np.ndarray, p: np.ndarray) -> np.ndarray:
        t = self.time[s, b]
        if s >= self.nwarps:
            col = self.agent_cols[s - self.nwarps]
            return self.order.vc[p, col] <= t
        lane = self.lane[s, b].astype(np.intp)
        one = lane >= 0
        bad = np.empty(b.size, dtype=bool)
        bad[one] = self.order.vc[p[one], 32 * s + lane[one]] <= t[one]
        several = ~one
        if several.any():
            bad[several] = ~self.order.ordered_after_warp(p[several], s, t[several])
        return bad


def _per_pair(b, slot, lane, slots: int):
    """One entry per (byte, slot) pair: its lane, or SEVERAL when different lanes of the
    slot's warp access the byte in the same step."""
    key = b.astype(np.int64) * slots + slot
    srt = np.argsort(key, kind="stable")
    ks = key[srt]
    starts = np.flatnonzero(np.concatenate(([True], ks[1:] != ks[:-1])))
    ls = lane[srt]
    lo = np.minimum.reduceat(ls, starts)
    hi = np.maximum.reduceat(ls, starts)
    lanes = np.where(lo == hi, lo, np.int8(SEVERAL)).astype(np.int8)
    return b[srt][starts], slot[srt][starts], lanes
