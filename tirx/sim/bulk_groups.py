"""Bulk async-groups: the ``.bulk_group`` completion that the bulk copies and the tensor stores
and reductions share (PTX ISA, "Data Movement and Conversion Instructions: cp.async.bulk",
"cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor", "cp.async.bulk.commit_group",
"cp.async.bulk.wait_group").

The ISA: an instruction whose completion mechanism is ``.bulk_group`` is a *bulk async
operation* of the thread that issues it; it reads its shared source and writes (or, for a
reduction, updates) global memory through the async proxy, and joins the thread's current,
uncommitted bulk async-group, whatever the instruction. ``cp.async.bulk.commit_group`` closes
the thread's uncommitted bulk operations into a new group (possibly empty);
``cp.async.bulk.wait_group N`` waits until at most the ``N`` newest groups of the thread are
pending -- the older ones are complete, their writes visible to the thread -- and
``.read N`` only until their reads of the source are done, so the source may be reused.

The model, per block (the machine's unit ``UNIT``; families add operations to it and execute
commit and wait through it):

* an operation's source bytes belong to the copy engine until a ``.read`` (or full) wait of its
  thread covers it: a write to one of them by any thread (a store, an atomic, stmatrix, a copy
  landing there) is a fault naming both lines. At that wait they count as read by the issuing
  thread, so another thread that reuses them needs a barrier after the wait;
* its destination bytes are written when a full wait covers it, or at the end of the block,
  in issue order; before that any access to them (a load, store or atomic, a copy reading
  them) is a fault naming both lines, and so is another operation onto them -- except two
  reductions, which the ISA performs element by element as atomic updates in any order;
* a block that ends while an operation's reads were not waited for is a fault: the next block
  may reuse its shared memory while the engine reads it.

What each operation reads and writes, and its checks at issue (source written, proxy fence,
barriers), are its family's; this module keeps the groups, the two sets of bytes in flight and
the completion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .faults import Fault
from .memory import thread_name
from .shared import line_of

__all__ = ["UNIT", "BulkOperation", "BulkGroups", "bulk_groups", "byte_runs", "WAIT_READ_HINT"]

UNIT = "bulk async-group"  # the machine unit's name (the ISA's concept, no family's)
_UNKNOWN = object()  # a region whose pending runs are not computed yet

WAIT_READ_HINT = (
    'the issuing thread must commit the copy (T.ptx["cp.async.bulk.commit_group"]()) and wait '
    'for its reads (T.ptx["cp.async.bulk.wait_group.read"](0)) before the shared source is '
    "written again, then T.cuda.cta_sync() before other threads write it"
)
_WAIT_FULL_HINT = (
    'the issuing thread must wait for the copy (T.ptx["cp.async.bulk.wait_group"](0) after '
    "its commit_group; .read is not enough), then T.cuda.cta_sync() before other threads "
    "access the bytes"
)


@dataclass(eq=False)
class BulkOperation:
    """One bulk async operation of thread ``tid``: ``name`` as messages call it ("cp.async.bulk",
    the tensor store's text), the shared bytes ``source`` it reads, the byte intervals
    ``[starts, ends)`` of global ``region`` it writes, and ``land()``, which writes them.
    ``accumulates``: a reduction, whose destination other reductions may share."""

    tid: int
    span: object
    name: str
    source: np.ndarray  # int64 shared addresses, each once
    region: object  # tirx.sim.memory.GlobalRegion
    starts: np.ndarray  # int64 byte offsets in the region, sorted, disjoint
    ends: np.ndarray
    land: Callable[[], None]
    accumulates: bool = False
    group: int = -1  # -1 until committed
    reads_done: bool = False


def byte_runs(offsets: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The sorted, merged intervals ``[starts, ends)`` covered by ``size`` bytes at each of the
    byte ``offsets``."""
    if offsets.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    o = np.unique(offsets.astype(np.int64))
    cut = np.flatnonzero(o[1:] > o[:-1] + size) + 1
    starts = o[np.concatenate(([0], cut))]
    ends = o[np.concatenate((cut - 1, [o.size - 1]))] + size
    return starts, ends


class BulkGroups:
    """The bulk async-groups of the block being run: per thread, how many groups it committed;
    the pending operations; the shared bytes they read (an observer of shared-memory writes)
    and the global bytes they will write (the guard of those regions)."""

    def __init__(self, machine):
        self.m = machine
        size = machine.shared.data.size
        self.committed = np.zeros(machine.T, dtype=np.int64)
        self.ops: list[BulkOperation] = []
        self.src_count = np.zeros(size, dtype=np.int32)  # pending operations reading each byte
        self.src_op = np.empty(size, dtype=object)  # the newest of them, for messages
        self._pending: dict = {}  # id(region) -> (starts, ends, running max of ends, op per run)
        machine.shared.observers.append(self)

    def reset(self) -> None:
        self.committed.fill(0)
        self.ops.clear()
        self.src_count.fill(0)
        self._pending.clear()

    def guard(self, region) -> None:
        """From now on the loads, stores and atomics of ``region`` are checked against the
        pending destinations (set when a statement that writes it is compiled)."""
        region.guard = self

    # ------------------------------------------------------------------- shared side

    def shared_write(self, b: np.ndarray, p: np.ndarray, record: bool) -> None:
        """Shared bytes ``b`` are about to be written by threads ``p`` (called by
        :class:`tirx.sim.shared.SharedMemory`): none may be a pending operation's source."""
        busy = self.src_count[b] > 0
        if busy.any():
            k = int(np.flatnonzero(busy)[0])
            op = self.src_op[int(b[k])]
            sh = self.m.shared
            raise Fault(
                f"{thread_name(int(p[k]))} writes {sh.describe(int(b[k]))} at "
                f"{line_of(sh.where())}, the source of the {op.name} at {line_of(op.span)} "
                f"issued by {thread_name(op.tid)}, whose reads of it are not known to be done",
                int(p[k]),
                WAIT_READ_HINT,
            )

    # ------------------------------------------------------------------- global side

    def _runs(self, region):
        found = self._pending.get(id(region), _UNKNOWN)
        if found is _UNKNOWN:
            parts = [(op.starts, op.ends, op) for op in self.ops if op.region is region]
            if parts:
                starts = np.concatenate([s for s, _, _ in parts])
                ends = np.concatenate([e for _, e, _ in parts])
                owner = np.concatenate([np.full(s.size, i) for i, (s, _, _) in enumerate(parts)])
                order = np.argsort(starts, kind="stable")
                starts, ends, owner = starts[order], ends[order], owner[order]
                found = (starts, ends, np.maximum.accumulate(ends), owner, [o for *_, o in parts])
            else:
                found = None
            self._pending[id(region)] = found
        return found

    def _overlaps(self, region, first: np.ndarray, last: np.ndarray):
        """Per access ``[first, last]`` (bytes of ``region``), whether a pending destination
        overlaps it; and the runs table (None when nothing of ``region`` is pending)."""
        runs = self._runs(region)
        if runs is None:
            return None, None
        starts, _, reach, _, _ = runs
        k = np.searchsorted(starts, last, side="right") - 1
        return (k >= 0) & (first < reach[np.maximum(k, 0)]), runs

    @staticmethod
    def _owners(runs, first: int, last: int) -> list[BulkOperation]:
        starts, ends, _, owner, ops = runs
        hit = np.flatnonzero((starts <= last) & (ends > first))
        return [ops[int(i)] for i in dict.fromkeys(owner[hit].tolist())]

    def check_global(self, region, offsets: np.ndarray, s: int, tids, what: str) -> None:
        """Called by :class:`tirx.sim.memory.GlobalRegion` (and by copies that read global
        memory) before an access of ``s`` bytes at each of byte ``offsets`` by ``tids``
        (``what``: "read of", "write to", ...)."""
        hit, runs = self._overlaps(region, offsets, offsets + (s - 1))
        if hit is None or not hit.any():
            return
        j = int(np.flatnonzero(hit)[0])
        o = int(offsets[j])
        op = self._owners(runs, o, o + s - 1)[0]
        raise Fault(
            f"{thread_name(int(tids[j]))}: {what} global '{region.name}' bytes {o}..{o + s - 1} "
            f"at {line_of(self.m.span)}, the destination of the {op.name} at "
            f"{line_of(op.span)} issued by {thread_name(op.tid)}, which has not completed",
            int(tids[j]),
            _WAIT_FULL_HINT,
        )

    # -------------------------------------------------------------------- operations

    def add(self, op: BulkOperation) -> None:
        """Thread ``op.tid`` issued ``op`` (its family checked the source at issue): it joins the
        thread's uncommitted operations, its source is busy, its destination pending."""
        if op.starts.size:
            hit, runs = self._overlaps(op.region, op.starts, op.ends - 1)
            if hit is not None and hit.any():
                j = int(np.flatnonzero(hit)[0])
                a, b = int(op.starts[j]), int(op.ends[j])
                for other in self._owners(runs, a, b - 1):
                    if not (op.accumulates and other.accumulates):
                        raise Fault(
                            f"the {op.name} at {line_of(op.span)} writes global "
                            f"'{op.region.name}' bytes {a}..{b - 1}, which the {other.name} "
                            f"at {line_of(other.span)} issued by {thread_name(other.tid)} is "
                            "still writing",
                            op.tid,
                            "wait for the first copy (cp.async.bulk.wait_group) before writing "
                            "its bytes again (only reductions may update the same bytes "
                            "together)",
                        )
        self.ops.append(op)
        self.src_count[op.source] += 1
        self.src_op[op.source] = op
        self._pending.pop(id(op.region), None)

    def commit(self, idx: np.ndarray) -> np.ndarray:
        """``cp.async.bulk.commit_group`` by threads ``idx``; returns each one's new group."""
        mine = set(idx.tolist())
        for op in self.ops:
            if op.group < 0 and op.tid in mine:
                op.group = int(self.committed[op.tid])
        groups = self.committed[idx].copy()
        self.committed[idx] += 1
        return groups

    def wait(self, idx: np.ndarray, n: int, reads_only: bool) -> np.ndarray:
        """``cp.async.bulk.wait_group{.read} n`` by threads ``idx``: complete (or, reads_only,
        finish the reads of) their groups older than the ``n`` newest; returns per thread how
        many operations that touched."""
        limit = np.full(self.m.T, -1, dtype=np.int64)
        limit[idx] = self.committed[idx] - n
        done = np.zeros(self.m.T, dtype=np.int64)
        keep = []
        for op in self.ops:
            if 0 <= op.group < limit[op.tid]:
                done[op.tid] += 1
                self._release(op)
                if not reads_only:
                    op.land()
                    self._pending.pop(id(op.region), None)
                    continue
            keep.append(op)
        self.ops = keep
        return done[idx]

    def _release(self, op: BulkOperation) -> None:
        """The engine is done reading ``op``'s source: from now on (the wait) the bytes count as
        read by the issuing thread, so other threads need a barrier before writing them."""
        if not op.reads_done:
            op.reads_done = True
            self.src_count[op.source] -= 1
            tids = np.full(op.source.size, op.tid, dtype=np.intp)
            self.m.shared.track_read(op.source, 1, tids)

    def finish_block(self) -> None:
        """The block ends: every operation must have had its reads waited for; all land."""
        for op in self.ops:
            if not op.reads_done:
                self.m.span = op.span
                never = " (it was never committed to a bulk group)" if op.group < 0 else ""
                raise Fault(
                    f"the block exits while the {op.name} at {line_of(op.span)} issued by "
                    f"{thread_name(op.tid)} may still be reading its shared source{never}: the "
                    "shared memory may be reused by the next block",
                    op.tid,
                    'end with T.ptx["cp.async.bulk.commit_group"]() and '
                    'T.ptx["cp.async.bulk.wait_group.read"](0) (or wait_group 0) in the issuing '
                    "thread",
                )
        for op in self.ops:
            op.land()
        self.ops.clear()
        self._pending.clear()


def bulk_groups(machine) -> BulkGroups:
    """The machine's bulk async-groups (made by the first statement that needs them)."""
    return machine.unit(UNIT, BulkGroups)
