"""Bulk asynchronous stores (``cp.async.bulk``, shared to global), written from the PTX ISA's
descriptions.

The ISA ("Data Movement and Conversion Instructions: cp.async.bulk", "cp.async.bulk.commit_group",
"cp.async.bulk.wait_group"; the memory consistency model's "Proxies" and "membar / fence:
fence.proxy.async"):

* ``cp.async.bulk.global.shared::cta.bulk_group [dstMem], [srcMem], size`` starts a copy of
  ``size`` bytes (a multiple of 16) from shared memory at ``srcMem`` to global memory at
  ``dstMem`` (both 16-byte aligned) and returns at once. The copy is performed by the *async
  proxy* and belongs to the issuing thread's current bulk async-group.
* ``cp.async.bulk.commit_group`` closes the thread's uncommitted bulk operations into a new
  bulk async-group (possibly empty).
* ``cp.async.bulk.wait_group N`` waits until at most the ``N`` newest bulk async-groups of the
  thread are pending: the older ones are complete, their writes visible to the thread.
  ``.read`` waits only until their reads of the source are done, so the source may be reused.
* The generic proxy (ordinary loads and stores, stmatrix, cp.async) and the async proxy are
  ordered only by a proxy fence: ``fence.proxy.async`` (all state spaces) or
  ``fence.proxy.async.shared::cta`` (shared memory) by the thread that stored, after its stores;
  another thread that issues the copy needs a barrier after that fence as usual.

The model, per block:

* A copy snapshots its source bytes at issue (they must have been written in this block; the
  ordinary race rules of :mod:`tirx.sim.shared` apply between their writers and the issuing
  thread) and refuses source bytes written by the generic proxy that their writer's
  shared-memory proxy fence has not published, or published with a fence not ordered before
  the issue (:meth:`tirx.sim.proxy.AsyncProxy.check_read`): the copy engine may read stale
  bytes.
* Until a ``.read`` (or full) wait of the issuing thread covers the copy, its source bytes
  belong to the copy engine: a write to them by any thread (a store, stmatrix, a cp.async
  landing there) is a fault naming both lines. At that wait they count as read by the issuing
  thread, so another thread that reuses them needs a barrier after the wait (a race otherwise).
* Its destination bytes land in global memory at the full wait that covers it, or at the end
  of the block; before that an access to them by any thread (a load, store or atomic), or
  another bulk copy onto them, is a fault naming both lines.
* A block that ends while one of its copies has not been covered by a ``.read`` or full wait
  is a fault: its shared memory may be reused by the next block while the engine reads it.
* The proxy-fence state is the simulator's (:mod:`tirx.sim.proxy`); the fences are the
  fence_proxy family's statements.

The simulator checks more than ``compute-sanitizer`` here: racecheck reports hazards between
threads' shared-memory accesses, memcheck and synccheck bad addresses and barriers, and none
documents checks of the async proxy, so the parity suite has the bulk store as a clean case.
The statements are decoded and their operands checked by :mod:`tirx.families.cp_async_bulk.sim`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ...sim.faults import Fault
from ...sim.memory import thread_name
from ...sim.shared import line_of

__all__ = ["BulkCopies", "BulkEvent", "COPY", "COMMIT", "WAITS", "UNIT"]

COPY = "cp.async.bulk.global.shared::cta.bulk_group"
COMMIT = "cp.async.bulk.commit_group"
WAITS = {"cp.async.bulk.wait_group": False, "cp.async.bulk.wait_group.read": True}
UNIT = 16  # bytes: the alignment of both addresses and of the size
_WAIT_READ_HINT = (
    'the issuing thread must commit the copy (T.ptx["cp.async.bulk.commit_group"]()) and wait '
    'for its reads (T.ptx["cp.async.bulk.wait_group.read"](0)) before the shared source is '
    "written again, then T.cuda.cta_sync() before other threads write it"
)


class BulkEvent(enum.Enum):
    """What one bulk-copy statement did (for traces)."""

    COPY = "copy"
    COMMIT = "commit_group"
    WAIT = "wait_group"


@dataclass(eq=False)
class _Copy:
    """One thread's pending bulk copy."""

    tid: int
    span: object
    region: object  # the destination GlobalRegion
    dst: int  # byte offset in the region
    src: int  # shared address
    data: np.ndarray  # uint8 [size], the source bytes at issue
    group: int = -1  # -1 until committed
    reads_done: bool = False


class BulkCopies:
    """The pending bulk copies and bulk groups of the block being run (the machine's unit of
    the family, and an observer of shared-memory writes: a copy's source is not written)."""

    def __init__(self, machine):
        self.m = machine
        size = machine.shared.data.size
        self.committed = np.zeros(machine.T, dtype=np.int64)
        self.copies: list[_Copy] = []
        self.src_count = np.zeros(size, dtype=np.int32)  # pending copies reading each byte
        self.src_copy: list = [None] * size  # the newest of them, for messages
        self._intervals: dict = {}  # region -> (starts, ends, copies) of pending destinations
        self.proxy = machine.shared.async_proxy()  # the copies read through the async proxy
        machine.shared.observers.append(self)

    def reset(self) -> None:
        self.committed.fill(0)
        self.copies.clear()
        self.src_count.fill(0)
        self._intervals.clear()

    # ------------------------------------------------------------------- shared side

    def shared_write(self, b: np.ndarray, p: np.ndarray, record: bool) -> None:
        """Shared bytes ``b`` are about to be written by threads ``p`` through the generic
        proxy (called by :class:`tirx.sim.shared.SharedMemory`)."""
        busy = self.src_count[b] > 0
        if busy.any():
            k = int(np.flatnonzero(busy)[0])
            c = self.src_copy[int(b[k])]
            sh = self.m.shared
            raise Fault(
                f"{thread_name(int(p[k]))} writes {sh.describe(int(b[k]))} at {line_of(sh.where())}, "
                f"the source of the cp.async.bulk at {line_of(c.span)} issued by "
                f"{thread_name(c.tid)}, whose reads of it are not known to be done",
                int(p[k]),
                _WAIT_READ_HINT,
            )

    # ------------------------------------------------------------------- global side

    def _pending(self, region):
        iv = self._intervals.get(id(region))
        if iv is None:
            mine = sorted((c for c in self.copies if c.region is region), key=lambda c: c.dst)
            starts = np.array([c.dst for c in mine], dtype=np.int64)
            ends = np.array([c.dst + c.data.size for c in mine], dtype=np.int64)
            iv = self._intervals[id(region)] = (starts, ends, mine)
        return iv

    def _hit(self, region, offsets: np.ndarray, last: np.ndarray):
        """The index in ``offsets`` of the first access ``[offsets, last]`` that overlaps a
        pending destination in ``region``, and that copy; None when there is none."""
        starts, ends, mine = self._pending(region)
        if not mine:
            return None
        k = np.searchsorted(starts, last, side="right") - 1
        hit = (k >= 0) & (offsets < ends[np.maximum(k, 0)])
        if not hit.any():
            return None
        j = int(np.flatnonzero(hit)[0])
        return j, mine[int(k[j])]

    def check_global(self, region, offsets: np.ndarray, s: int, tids, what: str) -> None:
        """Called by :class:`tirx.sim.memory.GlobalRegion` before an access of ``s`` bytes at
        each of byte ``offsets`` by ``tids`` (``what``: "read of", "write to", ...)."""
        found = self._hit(region, offsets, offsets + (s - 1))
        if found is None:
            return
        j, c = found
        o = int(offsets[j])
        raise Fault(
            f"{thread_name(int(tids[j]))}: {what} global '{region.name}' bytes {o}..{o + s - 1} at "
            f"{line_of(self.m.span)}, the destination of the cp.async.bulk at "
            f"{line_of(c.span)} issued by {thread_name(c.tid)}, which has not completed",
            int(tids[j]),
            'the issuing thread must wait for the copy (T.ptx["cp.async.bulk.wait_group"](0) '
            "after its commit_group; .read is not enough), then T.cuda.cta_sync() before "
            "other threads access the bytes",
        )

    # --------------------------------------------------------------------- the copies

    def issue(self, tid: int, region, dst: int, src: int, size: int, span) -> _Copy:
        sh = self.m.shared
        t = np.array([tid])
        b = src + np.arange(size)
        if not (sh.written[b] == 0xFF).all():
            k = int(np.flatnonzero(sh.written[b] != 0xFF)[0])
            raise Fault(
                f"cp.async.bulk at {line_of(span)} reads shared memory that nothing wrote in "
                f"this block: {sh.describe(int(b[k]))}",
                tid,
                "write the tile into shared memory before copying it",
            )
        if sh.in_flight:
            sh.check_pending(np.array([src]), size, t, "reads")
        # the stores must be fenced for the async proxy, each fence ordered before this issue
        self.proxy.check_read(b, t, f"the cp.async.bulk at {line_of(span)}", "the copy engine")
        sh.track_read(np.array([src]), size, t)  # the race rules: a barrier after the stores
        found = self._hit(region, np.array([dst]), np.array([dst + size - 1]))
        if found is not None:
            other = found[1]
            raise Fault(
                f"the cp.async.bulk at {line_of(span)} writes global '{region.name}' bytes "
                f"{dst}..{dst + size - 1}, which the cp.async.bulk at {line_of(other.span)} "
                f"issued by {thread_name(other.tid)} is still writing",
                tid,
                "wait for the first copy (cp.async.bulk.wait_group) before writing its bytes again",
            )
        c = _Copy(tid, span, region, dst, src, sh.data[b].copy())
        self.copies.append(c)
        self.src_count[b] += 1
        self.src_copy[src : src + size] = [c] * size
        self._intervals.pop(id(region), None)
        return c

    def commit(self, idx: np.ndarray) -> np.ndarray:
        mine = set(idx.tolist())
        for c in self.copies:
            if c.group < 0 and c.tid in mine:
                c.group = int(self.committed[c.tid])
        groups = self.committed[idx].copy()
        self.committed[idx] += 1
        return groups

    def wait(self, idx: np.ndarray, n: int, reads_only: bool) -> np.ndarray:
        """Complete (or, ``reads_only``, finish the reads of) the groups of threads ``idx``
        older than their ``n`` newest; returns how many copies that touched, per thread."""
        limit = np.full(self.m.T, -1, dtype=np.int64)
        limit[idx] = self.committed[idx] - n
        done = np.zeros(self.m.T, dtype=np.int64)
        keep = []
        for c in self.copies:
            if 0 <= c.group < limit[c.tid]:
                done[c.tid] += 1
                self._release(c)
                if not reads_only:
                    self._land(c)
                    continue
            keep.append(c)
        if len(keep) != len(self.copies):
            self._intervals.clear()
        self.copies = keep
        return done[idx]

    def _release(self, c: _Copy) -> None:
        """The engine is done reading ``c``'s source: from now on (the wait) the bytes count as
        read by the issuing thread, so other threads need a barrier before writing them."""
        if not c.reads_done:
            c.reads_done = True
            self.src_count[c.src : c.src + c.data.size] -= 1
            self.m.shared.track_read(np.array([c.src]), c.data.size, np.array([c.tid]))

    def _land(self, c: _Copy) -> None:
        c.region.bytes[c.dst : c.dst + c.data.size] = c.data

    def finish_block(self) -> None:
        """The block ends: every copy must have had its reads waited for; all land."""
        for c in self.copies:
            if not c.reads_done:
                self.m.span = c.span
                never = " (it was never committed to a bulk group)" if c.group < 0 else ""
                raise Fault(
                    f"the block exits while the cp.async.bulk at {line_of(c.span)} issued by "
                    f"{thread_name(c.tid)} may still be reading its shared source{never}: the shared "
                    "memory may be reused by the next block",
                    c.tid,
                    'end with T.ptx["cp.async.bulk.commit_group"]() and '
                    'T.ptx["cp.async.bulk.wait_group.read"](0) (or wait_group 0) in the issuing '
                    "thread",
                )
        for c in self.copies:
            self._land(c)
        self.copies.clear()
        self._intervals.clear()
