"""Named barriers in the simulator, written from the PTX ISA ("Parallel Synchronization and
Communication Instructions: bar, barrier").

A block has sixteen barriers. A barrier counts *warps*: the aligned forms (``bar.*``,
``barrier.*.aligned``) are executed by every thread of a warp together, and each warp that
executes one adds the warp size to the arrival count. ``b`` (a multiple of 32) is the count
that completes the barrier; without ``b``, every thread of the block (its warps, the last one
partial or not). On completion the waiting warps go on and the barrier starts over, so
``b / 32`` more arrivals complete it again.

* ``bar.sync a{, b}`` / ``barrier.sync.aligned``: the warp arrives and waits for the
  completion its arrival belongs to (the other warps run meanwhile: :mod:`tirx.sim.strands`).
* ``bar.arrive a, b`` / ``barrier.arrive.aligned``: the warp arrives and goes on.

Warps that reach one statement together arrive in warp order: with 8 warps at ``bar.sync 1,
128``, warps 0-3 complete the barrier once and warps 4-7 again (on the GPU the first four to
arrive; any grouping is a legal schedule).

Memory ordering: the ISA orders the accesses a thread made before its arrival before the
accesses of the threads that wait on that completion, after their wait. Each arriving warp
releases what it has done and observed into the completion (:mod:`tirx.sim.order`); each
warp whose ``sync`` waited on it acquires the completion's snapshot. An ``arrive`` releases and
does not acquire, so a producer that arrives is ordered before its consumers' reads, and a
consumer's reads are not ordered before the producer's next writes unless another barrier
says so (a race the race checks report).

Faults: a barrier outside 0 .. 15; a count not a multiple of 32, or more threads than the
block has (the barrier could never complete); barrier 0 with a count (``T.cuda.cta_sync()``
uses it with every thread); a barrier in use for one count met with another; a warp whose
threads name different barriers or counts, or that reaches the statement in part; and, from
the scheduler, a deadlock: every unfinished warp waits and the count is never reached.
"""

from __future__ import annotations

import re

import numpy as np

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.faults import Fault, check_aligned
from ...sim.memory import as_index
from ...sim.races import line_of

__all__ = ["NamedBarriers", "compile_call", "FORMS", "BLOCKING", "PER_WARPGROUP"]

FORMS = "bar[.cta].{sync,arrive}, barrier[.cta].{sync,arrive}.aligned"
#: the statements that wait for other warps (tirx.sim.strands runs those meanwhile)
BLOCKING = ("bar.sync", "bar.cta.sync", "barrier.sync", "barrier.cta.sync")
#: a branch that holds one runs one strand per warpgroup: warpgroups that take turns through
#: named barriers (each syncs on its own, the other's arrive comes later) must not wait as one
PER_WARPGROUP = BLOCKING

_FORM = re.compile(r"(bar|barrier)(\.cta)?\.(sync|arrive)(\.aligned)?")
BARRIERS = 16
_HINT = (
    "a named barrier completes when as many threads as its count have arrived (whole warps): "
    "check the count against the warps that reach bar.sync / bar.arrive with that barrier"
)


class _Barrier:
    """One of the block's barriers: the count and the warps of the completion in progress, and
    the snapshots of completions that warps still have to acquire."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.expected: int | None = None  # warps that complete the current round
        self.arrived: list[int] = []
        self.snap = None
        self.site = None  # the statement of the round's first arrival
        self.completed = 0  # rounds completed
        self.pending: dict[int, list] = {}  # round -> [snapshot, warps yet to acquire it]


class NamedBarriers:
    """The sixteen barriers of the block being run (the ``named barrier`` unit)."""

    def __init__(self, machine):
        self.m = machine
        self.bars = [_Barrier() for _ in range(BARRIERS)]

    def reset(self) -> None:
        for b in self.bars:
            b.reset()

    def finish_block(self) -> None:
        """Arrivals left without a waiter are only counts in the barrier; a waiter left behind
        is the scheduler's deadlock."""

    def arrive(self, a: int, warps: int, w: int, rows, count: int, span, waits: bool) -> int:
        """Warp ``w`` (threads ``rows``) arrives at barrier ``a`` whose round completes with
        ``warps`` warps (and will wait for that round, if ``waits``); the round it joined."""
        b, order = self.bars[a], self.m.shared.order
        if b.expected is None:
            b.expected, b.site = warps, span
        elif b.expected != warps:
            raise Fault(
                f"barrier {a} is in use for {32 * b.expected} threads ({len(b.arrived)} warps "
                f"arrived, the first at {line_of(b.site)}), and warp {w} arrives with a count "
                f"of {count}",
                int(rows[0]),
                "every warp that meets at one barrier gives the same thread count; a group of "
                "another size takes another barrier",
            )
        b.snap = order.merge(b.snap, order.release(rows))
        b.arrived.append(w)
        rnd = b.completed
        entry = b.pending.setdefault(rnd, [None, 0])
        entry[1] += waits
        if len(b.arrived) == b.expected:
            entry[0] = b.snap
            b.completed += 1
            b.expected, b.arrived, b.snap, b.site = None, [], None, None
            if entry[1] == 0:
                del b.pending[rnd]
            if self.m.strands is not None:
                self.m.strands.version += 1
        return rnd

    def done(self, a: int, rnd: int) -> bool:
        return self.bars[a].completed > rnd

    def acquire(self, a: int, rnd: int, rows: np.ndarray) -> None:
        """Warp ``rows`` waited on round ``rnd`` of barrier ``a``: it acquires its arrivals."""
        b = self.bars[a]
        entry = b.pending[rnd]
        self.m.shared.order.acquire(rows, entry[0])
        entry[1] -= 1
        if entry[1] == 0:
            del b.pending[rnd]

    def state(self, a: int) -> str:
        b = self.bars[a]
        if b.expected is None:
            return "no warp has arrived at it since its last completion"
        return (
            f"{len(b.arrived)} of the {b.expected} warps of {32 * b.expected} threads have "
            f"arrived (warps {', '.join(map(str, b.arrived))})"
        )


def _barriers(m) -> NamedBarriers:
    return m.unit("named barrier", NamedBarriers)


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one named-barrier statement for a set of threads."""
    form = _FORM.fullmatch(text)
    if form is None or (form.group(1) == "barrier") != (form.group(4) is not None):
        raise unknown_instruction(stmt, text, FORMS)
    waits = form.group(3) == "sync"
    fa = compiler.compile(stmt.operands[0].value)
    fb = compiler.compile(stmt.operands[1].value) if len(stmt.operands) > 1 else None
    if waits:  # the other warps run meanwhile
        m.use_strands()
    span = stmt.span

    def run(idx):
        m.span = span
        check_aligned(m, idx, text)
        a = as_index(fa(idx), idx.size)
        b = as_index(fb(idx), idx.size) if fb is not None else None
        warp_of = idx >> 5
        warps, first, where = np.unique(warp_of, return_index=True, return_inverse=True)
        _uniform(idx, a, first, where, text, "barrier")
        if b is not None:
            _uniform(idx, b, first, where, text, "thread count")
        bars = _barriers(m)
        _one_round(m, bars, text, idx, a, b, first, warps)
        waiting = []
        for k, w in enumerate(warps.tolist()):
            tid = int(idx[first[k]])
            aw = int(a[first[k]])
            count = int(b[first[k]]) if b is not None else None
            needed = _check(m, text, tid, aw, count)
            rows = idx[warp_of == w]
            rnd = bars.arrive(aw, needed, w, rows, count or 32 * needed, span, waits)
            if waits:
                waiting.append((aw, rnd, rows, tid))
        for aw, rnd, rows, tid in waiting:
            if not bars.done(aw, rnd):

                def describe(aw=aw, tid=tid):
                    return (
                        tid,
                        (
                            f"{text} at {line_of(span)}: warp {tid // 32} waits at barrier {aw}, "
                            f"where {bars.state(aw)}"
                        ),
                        _HINT,
                    )

                m.strands.wait_until(lambda aw=aw, rnd=rnd: bars.done(aw, rnd), describe)
                m.span = span
            bars.acquire(aw, rnd, rows)

    return run


def _one_round(m, bars, text: str, idx, a, b, first, warps) -> None:
    """More warps arriving at a barrier together than complete one round of it: on the GPU the
    first to arrive complete the round, whichever they are, so which warps a round orders
    depends on timing (two warpgroups on one barrier id). Lockstep would group them in warp
    order and hide it: a fault."""
    ids, at, counts = np.unique(a[first], return_index=True, return_counts=True)
    for aw, k, n in zip(ids.tolist(), at.tolist(), counts.tolist()):
        tid = int(idx[first[k]])
        count = int(b[first[k]]) if b is not None else None
        needed = _check(m, text, tid, aw, count)
        bar = bars.bars[aw]
        if bar.expected not in (None, needed):
            continue  # a count that differs from the round's: arrive() names both
        pending = len(bar.arrived)
        if pending + n > needed:
            raise Fault(
                f"{text} at {line_of(m.span)}: {n} warps arrive at barrier {aw} together "
                f"({pending} arrived before), and a round of it is {needed} warps "
                f"({32 * needed} threads): on the GPU the first {needed} to arrive complete a "
                "round, whichever they are, so which warps it orders depends on timing",
                tid,
                "give each group of warps its own barrier id (T.cuda.warpgroup_sync(1 + the "
                "warpgroup index)), or count every warp that meets there",
            )


def _uniform(idx, values, first, where, text: str, what: str) -> None:
    bad = values != values[first][where]
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        tid = int(idx[k])
        lead = int(idx[first[where[k]]])
        raise Fault(
            f"{text}: the threads of warp {tid // 32} name different values of the {what} "
            f"(lane {lead % 32}: {int(values[first[where[k]]])}, lane {tid % 32}: "
            f"{int(values[k])})",
            tid,
            f"the warp executes the barrier together: compute the {what} from the warp or "
            "warpgroup index, not the lane",
        )


def _check(m, text: str, tid: int, a: int, count: int | None) -> int:
    """The warps that complete barrier ``a`` for a thread count ``count`` (None: the block)."""
    if not 0 <= a < BARRIERS:
        raise Fault(
            f"{text}: barrier {a} does not exist; a block has barriers 0 .. {BARRIERS - 1}",
            tid,
            "name a barrier of 1 .. 15 (0 is T.cuda.cta_sync()'s)",
        )
    if count is None:
        return m.nwarps
    if count <= 0 or count % 32:
        raise Fault(
            f"{text}: the thread count {count} is not a positive multiple of 32",
            tid,
            "the barrier counts whole warps: the count is 32 times the warps that take part",
        )
    if count > 32 * m.nwarps:
        raise Fault(
            f"{text}: barrier {a} waits for {count} threads, but the block has {m.T}; it can "
            "never complete",
            tid,
            "count the threads of the warps that meet at it",
        )
    if a == 0:
        raise Fault(
            f"{text}: barrier 0 is the one T.cuda.cta_sync() (__syncthreads) uses with every "
            f"thread of the block; a barrier of {count} threads there would meet it",
            tid,
            "take a barrier of 1 .. 15 for a group of threads",
        )
    return count // 32
