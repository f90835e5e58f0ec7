"""mbarrier objects, written from the PTX ISA ("Parallel Synchronization and Communication
Instructions: mbarrier", "cp.async.mbarrier.arrive").

The ISA's object, one per 8-byte word of shared memory: a *phase* (we count completed phases;
the current phase's parity is ``phase & 1``), a *pending arrival count*, the *expected arrival
count* and a *tx-count*.

* ``mbarrier.init [a], count``: the current phase is 0 (parity 0), expected and pending
  arrivals are ``count`` (1 .. 2^20-1), the tx-count 0.
* ``mbarrier.arrive [a]{, count}`` decrements pending by ``count`` (default 1);
  ``arrive.expect_tx [a], tx`` first adds ``tx`` to the tx-count (an expect-tx operation),
  ``mbarrier.expect_tx [a], tx`` only adds it. A phase completes when pending arrivals and the
  tx-count are both zero: the phase advances (its parity flips), pending is reloaded from the
  expected count. The tx-count lies in -(2^20-1) .. 2^20-1.
* ``mbarrier.test_wait.parity / try_wait.parity waitComplete, [a], p``: true iff the phase of
  parity ``p`` has completed, i.e. the current phase's parity is not ``p``. The waiting form
  (no ``waitComplete``: tirx's loop around one test) suspends the thread until then
  (:mod:`tirx.sim.strands` runs the other warps meanwhile).
* ``cp.async.mbarrier.arrive{.noinc} [a]``: an arrive-on triggered once all the thread's prior
  ``cp.async`` have completed. Without ``.noinc`` the pending count is incremented first, so
  the arrive is net zero for the current phase; with ``.noinc`` it counts against ``init``.
  The simulator completes the thread's copies right there (a legal schedule: a copy may land
  any time after its issue) and then arrives.
* ``mbarrier.inval [a]`` ends the object: a later use is a use before init.

Memory ordering: arrive has release and the waits acquire semantics at CTA scope, so a
completed phase makes the arriving threads' earlier shared-memory accesses ordered before the
waiters' later ones. Modelled like a barrier in the race bookkeeping of
:mod:`tirx.sim.shared`: at completion the bytes last written (or read) by an arriving thread
are noted, and a waiter that passes clears those records that are unchanged since, as
``cta_sync`` clears all. The barrier word itself counts as written by ``init``/``inval`` and
read by every other operation, so a use by another thread needs a ``cta_sync`` after init.

Faults (each names the barrier, the thread and the state): use before init (or after
inval); re-init of a barrier with arrivals pending in its current phase; an arrive beyond the
pending count (over-arrival); a count outside 1 .. 2^20-1; a tx-count outside its range; a
barrier address not 8-byte aligned or outside every shared allocation; and, from the
scheduler, a deadlock: every unfinished thread waits and nothing can arrive.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

import numpy as np

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.faults import Fault
from ...sim.memory import as_index
from ...sim.shared import line_of
from ...sim.trace import stamp

__all__ = ["Barriers", "BarrierTrace", "BarrierEvent", "compile_call", "BLOCKING", "FORMS"]

FORMS = (
    "mbarrier.{init,arrive[.expect_tx],expect_tx,test_wait.parity,try_wait.parity,inval}"
    "[.release|.acquire|.relaxed][.cta|.cluster].shared[::cta].b64, "
    "mbarrier.arrive[.expect_tx][.release.{cta,cluster}].shared::cluster.b64, "
    "cp.async.mbarrier.arrive[.noinc].shared[::cta].b64, fence.mbarrier_init.release.cluster"
)
#: the statements that may wait for other warps (tirx.sim.strands runs those meanwhile)
BLOCKING = ("mbarrier.test_wait", "mbarrier.try_wait")

MAX_COUNT = (1 << 20) - 1
MAX_TX = (1 << 20) - 1

_OPS = re.compile(
    r"mbarrier\.(init|arrive|arrive\.expect_tx|expect_tx|test_wait\.parity|try_wait\.parity"
    r"|inval)(?:\.(?:release|acquire|relaxed)\.(cta|cluster))?\.shared(::cta|::cluster)?\.b64"
    r"|cp\.async\.mbarrier\.arrive(\.noinc)?\.shared(?:::cta)?\.b64"
    r"|fence\.mbarrier_init\.release\.cluster"
)


class BarrierEvent(enum.Enum):
    INIT = "init"
    ARRIVE = "arrive"
    EXPECT_TX = "expect_tx"
    COMPLETE = "phase complete"
    WAIT = "wait"
    TEST = "test"
    INVAL = "inval"
    COMPLETE_TX = "complete_tx"  # a tensor copy's bytes (tirx/sim/tma.py)
    BLOCKED = "blocked"  # a wait found its phase incomplete: the threads stall until it is


@dataclass(frozen=True)
class BarrierTrace:
    """One event of one barrier: ``phase`` (completed phases so far), ``pending`` arrivals and
    ``tx`` after it; ``threads`` that made it (for a completion: the arrivals' threads)."""

    step: int
    event: BarrierEvent
    barrier: str
    span: object
    block: tuple[int, int, int]
    threads: tuple[int, ...]
    phase: int
    pending: int
    tx: int
    seq: int = -1  # the run's order of every trace record (tirx.sim.trace.stamp)


class _Barrier:
    __slots__ = (
        "name", "expected", "pending", "tx", "phase", "arrivers", "seen", "landings", "landed",
        "remote", "seen_remote",
    )  # fmt: skip

    def __init__(self, name: str, count: int):
        self.name = name
        self.expected = self.pending = count
        self.tx = self.phase = 0
        self.arrivers: list[int] = []
        self.seen = None  # the race records the last completed phase orders for its waiters
        self.landings: list = []  # the complete-tx copies of this phase, landing at completion
        self.landed: list = []  # their bytes, the copy engine's until a waiter passes
        # the arrivals of other blocks' threads that release at cluster scope (their rank,
        # thread, and when: tirx/sim/distributed.py), this phase's and the last completed one's
        self.remote: list = []
        self.seen_remote: list = []

    def state(self) -> str:
        return (
            f"phase {self.phase} (parity {self.phase & 1}), {self.pending} of "
            f"{self.expected} arrivals pending, tx-count {self.tx}"
        )


class Barriers:
    """The mbarrier objects of the block being run, by shared address."""

    def __init__(self, machine):
        self.m = machine
        self.live: dict[int, _Barrier] = {}

    def reset(self) -> None:
        self.live.clear()

    def finish_block(self) -> None:
        """Phases nobody completes when the block ends are not reported (docs/simulator.md)."""

    def get(self, addr: int, tid: int) -> _Barrier:
        b = self.live.get(addr)
        if b is None:
            raise Fault(
                f"mbarrier {self.m.shared.describe(addr)} is used before mbarrier.init (or after "
                f"mbarrier.inval) at {line_of(self.m.span)}",
                tid,
                'initialize it first: T.ptx["mbarrier.init.shared::cta.b64"](bar, count) by one '
                "thread, then T.cuda.cta_sync()",
            )
        return b

    def changed(self) -> None:
        if self.m.strands is not None:
            self.m.strands.version += 1

    def record(self, event, b: _Barrier, threads) -> None:
        traces = self.m.barrier_traces
        if traces is None:
            return
        traces.append(
            BarrierTrace(
                len(traces), event, b.name, self.m.span, tuple(int(x) for x in self.m.block_idx),
                tuple(int(t) for t in threads), b.phase, b.pending, b.tx, stamp(self.m),
            )
        )  # fmt: skip

    # ------------------------------------------------------------------ operations

    def init(self, addr: int, count: int, tid: int) -> None:
        old = self.live.get(addr)
        if old is not None and (old.pending != old.expected or old.tx):
            raise Fault(
                f"mbarrier.init of {old.name}, which is in use: {old.state()}",
                tid,
                "re-initialize a barrier only when no arrival of its current phase is pending "
                "(after its last phase completed, or after mbarrier.inval)",
            )
        _check_count(count, tid, "mbarrier.init's count")
        b = self.live[addr] = _Barrier(self.m.shared.describe(addr), count)
        self.changed()
        self.record(BarrierEvent.INIT, b, (tid,))

    def expect_tx(self, addr: int, tx: int, tid: int) -> _Barrier:
        b = self.get(addr, tid)
        if not -MAX_TX <= b.tx + tx <= MAX_TX:
            raise Fault(
                f"mbarrier {b.name}: tx-count {b.tx} + {tx} leaves the ISA's range "
                f"-{MAX_TX}..{MAX_TX} ({b.state()})",
                tid,
                "expect at most 2^20-1 bytes in flight on one barrier: split the transfer",
            )
        b.tx += tx
        self.changed()
        self.record(BarrierEvent.EXPECT_TX, b, (tid,))
        return b

    def arrive(self, addr: int, count: int, tid: int, remote=None) -> None:
        """``remote``: the arrive of a thread of another block of the cluster (``(rank,
        thread, seq)`` when it releases at cluster scope, else ``()``)."""
        b = self.get(addr, tid)
        _check_count(count, tid, "mbarrier.arrive's count")
        if count > b.pending:
            raise Fault(
                f"over-arrival on mbarrier {b.name}: an arrive of {count} when {b.state()}",
                tid,
                "every phase takes exactly the init count of arrivals: check the count in "
                "mbarrier.init against the threads that arrive (cp.async.mbarrier.arrive.noinc "
                "counts too)",
            )
        b.pending -= count
        if remote is None:
            b.arrivers.append((tid, int(self.m.shared.epoch[tid >> 5])))
        elif remote:
            b.remote.append(remote)
        self.changed()
        self.record(BarrierEvent.ARRIVE, b, (tid,))
        self._complete(b)

    def complete_tx(self, addr: int, tx: int, tid: int, land) -> None:
        """An asynchronous copy issued by ``tid`` performs complete-tx of ``tx`` bytes on the
        barrier (PTX ISA, "mbarrier: tx-count"): the tx-count drops by ``tx``. ``land()`` writes
        the copy's bytes when the current phase completes and returns ``(bytes, threads,
        site)``, the shared bytes written, their issuing threads and the copy's line: the
        phase's completion orders them before its waiters' later accesses, and they stay the
        copy's (pending) until the first waiter passes (:meth:`passed`)."""
        b = self.get(addr, tid)
        if not -MAX_TX <= b.tx - tx <= MAX_TX:
            raise Fault(
                f"mbarrier {b.name}: tx-count {b.tx} - {tx} leaves the ISA's range "
                f"-{MAX_TX}..{MAX_TX} ({b.state()})",
                tid,
                "at most 2^20-1 bytes may be in flight on one barrier: split the transfer",
            )
        b.tx -= tx
        b.landings.append(land)
        self.changed()
        self.record(BarrierEvent.COMPLETE_TX, b, (tid,))
        self._complete(b)

    def _complete(self, b: _Barrier) -> None:
        if b.pending or b.tx:
            return
        landed = [land() for land in b.landings]
        b.landings, b.landed = [], b.landed + [x[0] for x in landed]
        b.seen = _ordered_records(self.m.shared, b.arrivers)
        if landed:  # the copies' bytes are ordered for the waiters like the arrivals' writes
            wb, wt, ws, rb, rs = b.seen
            wb = np.concatenate([wb, *(x[0] for x in landed)])
            wt = np.concatenate([wt, *(x[1].astype(wt.dtype) for x in landed)])
            ws = np.concatenate([ws, *(np.full(x[0].size, x[2], ws.dtype) for x in landed)])
            b.seen = wb, wt, ws, rb, rs
        threads, b.arrivers = [t for t, _ in b.arrivers], []
        b.seen_remote, b.remote = b.remote, []
        b.phase += 1
        b.pending = b.expected
        self.record(BarrierEvent.COMPLETE, b, threads)

    def inval(self, addr: int, tid: int) -> None:
        b = self.get(addr, tid)
        self.record(BarrierEvent.INVAL, b, (tid,))
        del self.live[addr]
        self.changed()

    def passed(self, b: _Barrier) -> None:
        """A waiter saw ``b``'s last phase complete: the arrivals' accesses are ordered, and
        the bytes of its complete-tx copies are the threads' (until then only the wait tells a
        thread they are there: any access of them is one to an unfinished copy)."""
        if b.seen is not None:
            _clear_ordered(self.m.shared, b.seen)
        if b.seen_remote:  # other blocks' arrivals, acquired (tirx/sim/distributed.py)
            self.m.cluster.shared.acquire(b.seen_remote)
        if b.landed:
            shared = self.m.shared
            for at in b.landed:
                shared.pend_tid[at] = -1
                shared.in_flight -= at.size
            b.landed = []


def _check_count(count: int, tid: int, what: str) -> None:
    if not 1 <= count <= MAX_COUNT:
        raise Fault(
            f"{what} is {count}, outside the ISA's range 1..{MAX_COUNT}",
            tid,
            f"an mbarrier counts 1..{MAX_COUNT} arrivals",
        )


def _ordered_records(shared, arrivals: list[tuple[int, int]]):
    """The race records (written and read bytes, with their lines) ordered before the
    ``(thread, warp epoch)`` arrivals: the arriving threads' own accesses, and those of their
    warp's threads before a warp barrier that came before the arrive (release is cumulative:
    what the arriving thread has observed is released too)."""
    tids = np.array([t for t, _ in arrivals], dtype=np.int32)
    before = np.full(shared.epoch.size, -1, dtype=np.int64)  # per warp: the latest epoch
    np.maximum.at(before, tids >> 5, np.array([e for _, e in arrivals], dtype=np.int64))
    wt = shared.w_tid
    wb = np.flatnonzero(
        np.isin(wt, tids) | ((wt >= 0) & (shared.w_stamp < before[np.maximum(wt, 0) >> 5]))
    )
    # a byte read by several threads of an arriving warp (tid -2) counts as the arrivals'
    # too: the simulator would rather miss a race than report one that is not there
    rw, rt = shared.r_warp, shared.r_tid
    since = before[np.maximum(rw, 0)]
    rb = np.flatnonzero(
        (rw >= 0) & (np.isin(rt, tids) | (shared.r_stamp < since) | ((rt == -2) & (since >= 0)))
    )
    return wb, shared.w_tid[wb].copy(), shared.w_site[wb].copy(), rb, shared.r_site[rb].copy()


def _clear_ordered(shared, seen) -> None:
    wb, wt, ws, rb, rs = seen
    same = (shared.w_tid[wb] == wt) & (shared.w_site[wb] == ws)
    shared.w_tid[wb[same]] = -1
    same = shared.r_site[rb] == rs
    shared.r_warp[rb[same]] = -1


# --------------------------------------------------------------------- statements


def _barriers(m) -> Barriers:
    return m.unit("mbarrier", Barriers)


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one mbarrier statement for a set of threads."""
    match = _OPS.fullmatch(text)
    if match is None:
        raise unknown_instruction(stmt, text, FORMS)
    if text.startswith("fence."):
        return lambda idx: None  # one CTA at a time: nothing for another CTA to observe
    op = "cp.async.arrive" if text.startswith("cp.") else match.group(1)
    if match.group(3) == "::cluster":  # an arrive on a barrier of any block of the cluster
        from .sim_cluster import compile_remote_arrive

        return compile_remote_arrive(m, compiler, stmt, op, match.group(2) == "cluster", Barriers)
    ops = list(stmt.operands)
    done = ops.pop(0) if ops and isinstance(ops[0], ir.RegVector) else None
    if not ops or not (
        isinstance(ops[0], ir.AddressOperand) and isinstance(ops[0].address, ir.SharedAddress)
    ):
        raise compiler.error(f"{text}: the barrier operand must be a shared-memory address")
    addr_f = compiler.compile(ops[0].address)
    value_f = compiler.compile(ops[1].value) if len(ops) > 1 else None
    if op in ("test_wait.parity", "try_wait.parity"):
        if m.strands is None:  # a wait, or a test in a loop: other warps must run meanwhile
            from ...sim.strands import Strands

            m.strands = Strands(m)
        return _wait(m, stmt, addr_f, value_f, done)
    noinc = match.group(4) is not None
    span = stmt.span

    def run(idx):
        m.span = span
        bars = _barriers(m)
        addr = _addresses(m, addr_f, idx)
        vals = _values(value_f, idx, 1)
        copies = m.unit("cp.async") if op == "cp.async.arrive" else None
        if copies is not None:  # the arrive-on waits for all the thread's prior cp.async
            copies.land_all(idx)
        if op in ("init", "inval"):
            m.shared.track_write(addr, 8, idx)
        else:
            m.shared.track_read(addr, 8, idx)
        for tid, a, v in zip(idx.tolist(), addr.tolist(), vals.tolist()):
            if op == "init":
                bars.init(a, v, tid)
            elif op == "inval":
                bars.inval(a, tid)
            elif op == "expect_tx":
                bars.expect_tx(a, v, tid)
            elif op == "arrive.expect_tx":
                bars.expect_tx(a, v, tid)
                bars.arrive(a, 1, tid)
            elif op == "cp.async.arrive":
                if not noinc:  # the ISA's increment first: the arrive is net zero
                    bars.get(a, tid).pending += 1
                bars.arrive(a, 1, tid)
            else:
                bars.arrive(a, v, tid)

    return run


def _addresses(m, addr_f, idx) -> np.ndarray:
    addr = np.broadcast_to(as_index(addr_f(idx), idx.size), (idx.size,)).astype(np.int64)
    m.shared.check_rows(addr, idx, "mbarrier", 8)
    return addr


def _values(f, idx, default: int) -> np.ndarray:
    if f is None:
        return np.full(idx.size, default, dtype=np.int64)
    v = np.broadcast_to(np.asarray(f(idx)), (idx.size,))
    return v.astype(np.uint32).astype(np.int64)


def _wait(m, stmt, addr_f, parity_f, done):
    span = stmt.span
    out = None
    if done is not None:
        (reg,) = done.regs
        out = (m.region(reg.buffer, m.compiler), reg.slot, reg.dtype)

    def complete(bars, addr, parity, idx) -> np.ndarray:
        return np.array(
            [(bars.get(a, t).phase & 1) != p for t, a, p in zip(idx, addr, parity)], dtype=bool
        )

    def run(idx):
        m.span = span
        bars = _barriers(m)
        addr = _addresses(m, addr_f, idx)
        parity = _values(parity_f, idx, 0) & 1
        m.shared.track_read(addr, 8, idx)
        ok = complete(bars, addr.tolist(), parity.tolist(), idx.tolist())
        if out is None:
            if not ok.all():
                first = int(np.flatnonzero(~ok)[0])

                def describe(first=first):
                    b = bars.get(int(addr[first]), int(idx[first]))
                    return int(idx[first]), (
                        f"mbarrier {b.name} at {line_of(span)}: thread {int(idx[first])} (warp "
                        f"{int(idx[first]) // 32}, lane {int(idx[first]) % 32}) waits for the "
                        f"phase of parity {int(parity[first])}; the barrier is in {b.state()}"
                    )

                def ready():
                    return complete(bars, addr.tolist(), parity.tolist(), idx.tolist()).all()

                for a in np.unique(addr[~ok]).tolist():  # the stall's start, for a timeline
                    bars.record(BarrierEvent.BLOCKED, bars.get(a, int(idx[0])),
                                idx[~ok & (addr == a)].tolist())  # fmt: skip
                m.strands.wait_until(ready, describe)
                m.span = span
            ok[:] = True
            event = BarrierEvent.WAIT
        else:
            region, slot, dtype = out
            bits = ok.astype(np.uint32)
            region.store(np.full(idx.size, slot), bits, dtype, idx, idx)
            event = BarrierEvent.TEST
            if not ok.all() and m.strands is not None:
                first = int(np.flatnonzero(~ok)[0])
                b = bars.get(int(addr[first]), int(idx[first]))
                text = (
                    f"mbarrier {b.name} at {line_of(span)}: thread {int(idx[first])} tests "
                    f"(in a loop) for the phase of parity {int(parity[first])}; the barrier is "
                    f"in {b.state()}"
                )
                m.strands.yield_now(id(stmt), lambda: (int(idx[first]), text))
                m.span = span
        for a in np.unique(addr[ok]).tolist():
            b = bars.get(a, int(idx[0]))
            bars.passed(b)
            bars.record(event, b, idx[ok & (addr == a)].tolist())

    return run
