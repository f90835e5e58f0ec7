"""mbarrier objects (the statements are :mod:`tirx.families.mbarrier.sim`), written from the
PTX ISA ("Parallel Synchronization and Communication Instructions: mbarrier", "mbarrier:
tx-count", "Memory Consistency Model": release and acquire patterns).

One object per 8-byte word of shared memory: the phase (completed phases; the current phase's
parity is ``phase & 1``), the pending and expected arrival counts, the tx-count; the clock
snapshot its current phase's arrivals released and the one its last completed phase gives its
observers (:mod:`tirx.sim.order`); the copies that complete on it, delivered as the barrier's
own agent. The semantics and the faults are described in the statements' module.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ...sim.faults import Fault
from ...sim.memory import thread_name
from ...sim.shared import line_of
from ...sim.trace import stamp

__all__ = ["Barriers", "BarrierTrace", "BarrierEvent", "MAX_COUNT", "MAX_TX", "check_count"]

MAX_COUNT = (1 << 20) - 1
MAX_TX = (1 << 20) - 1


class BarrierEvent(enum.Enum):
    INIT = "init"
    ARRIVE = "arrive"
    EXPECT_TX = "expect_tx"
    COMPLETE = "phase complete"
    WAIT = "wait"
    TEST = "test"
    INVAL = "inval"
    COMPLETE_TX = "complete_tx"  # a tensor copy's bytes (tirx/families/tma/sim.py)
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
        "name", "expected", "pending", "tx", "phase", "arrivers", "released", "seen",
        "landings", "agent", "deliveries", "observed", "remote", "seen_remote", "done_by",
        "saw", "ran", "armed", "delivered", "last_armed",
    )  # fmt: skip

    def __init__(self, name: str, count: int, agent: int):
        self.name = name
        self.expected = self.pending = count
        self.tx = self.phase = 0
        self.arrivers: list[int] = []
        self.ran: tuple[int, ...] = ()  # the threads that arrived in the last completed phase
        self.released = None  # what the current phase's arrivals released (a clock snapshot)
        self.seen = None  # what the last completed phase orders before its observers
        self.landings: list = []  # the complete-tx copies of this phase, landing at completion
        self.agent = agent  # the order's column of the copies that complete on this barrier
        self.deliveries: list = []  # (phase, site, issuer, name) of copies completing here
        self.observed = -1  # the latest completed phase a thread observed
        # the arrivals of other blocks' threads that release at cluster scope (their rank,
        # thread, and when: tirx/sim/distributed.py), this phase's and the last completed one's
        self.remote: list = []
        self.seen_remote: list = []
        # the delivery of a copy that completed the last completed phase (an asynchronous
        # completion, at the stamp ``seen[agent]``), and the threads that observed it
        # themselves; an arrive for the next phase must come after it
        self.done_by = None
        self.saw: set[int] = set()
        # this phase's expect-tx operations (span, bytes) and the bytes its copies completed
        self.armed: list = []
        self.delivered = 0
        # the last completed phase's expect-tx operations and the bytes its copies completed
        self.last_armed: tuple = ((), 0)

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
        self.retired: list[_Barrier] = []  # replaced objects with copies nobody observed

    def reset(self) -> None:
        self.live.clear()
        self.retired.clear()

    def finish_block(self) -> None:
        """The block ends: a copy that completes on a barrier must have had its phase
        observed by some thread (else it may still be writing shared memory)."""
        for b in [*self.live.values(), *self.retired]:
            for phase, site, issuer, name in b.deliveries:
                if phase <= b.observed:
                    continue
                sh = self.m.shared
                self.m.span = sh.sites[site]
                state = (
                    "never completed"
                    if phase >= b.phase
                    else "completed, but no thread observed it"
                )
                raise Fault(
                    f"the block exits while the {name} at {line_of(sh.sites[site])} issued by "
                    f"{thread_name(issuer)} may still be writing shared memory: phase {phase} of "
                    f"mbarrier {b.name}, which completes it, {state} ({b.state()})",
                    issuer,
                    "wait for the phase that completes the copy (T.cuda.mbarrier_wait(bar, "
                    "parity)) in some thread before the block ends, or do not issue the copy",
                )

    def agent(self, addr: int) -> int:
        """The order's column of the copies that complete on the barrier at ``addr``."""
        return self.m.shared.agent(
            ("mbarrier", addr),
            f"the copies completing on mbarrier {self.m.shared.describe(addr)}",
            "wait on the mbarrier phase that completes the copy (T.cuda.mbarrier_wait) in this "
            "thread, or put T.cuda.cta_sync() between a thread's wait and this access",
        )

    def deliver(self, addr: int, site: int, issuer: int, name: str) -> None:
        """A copy issued by ``issuer`` at ``site`` completes on the barrier's current phase."""
        b = self.get(addr, issuer)
        b.deliveries.append((b.phase, site, issuer, name))

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
        check_count(count, tid, "mbarrier.init's count")
        if old is not None and any(d[0] > old.observed for d in old.deliveries):
            self.retired.append(old)
        b = self.live[addr] = _Barrier(self.m.shared.describe(addr), count, self.agent(addr))
        self.changed()
        self.record(BarrierEvent.INIT, b, (tid,))

    def check_armed(self, b: _Barrier, tid: int, what: str, noun: str) -> None:
        """``tid`` changes ``b``'s current phase (an arrive, an expect-tx): a fault if a copy
        completed the phase before it and ``tid`` is not ordered after that completion (its
        own wait, or a release/acquire chain from a thread that waited). On the GPU the copy
        may still be in flight, so the phase is still the earlier one, whose arrivals are in:
        the arrive would be counted there (an over-arrival) and its bytes expected there."""
        if b.done_by is None or tid in b.saw:
            return
        if self.m.shared.order.vc[tid, b.agent] >= b.seen[b.agent]:
            return
        _, site, issuer, name = b.done_by
        phase = b.phase - 1
        sh = self.m.shared
        raise Fault(
            f"mbarrier {b.name}: {thread_name(tid)} {what} at {line_of(self.m.span)} for phase "
            f"{b.phase}, but has not observed phase {phase} complete, which the {name} at "
            f"{line_of(sh.sites[site])} issued by {thread_name(issuer)} completes when its bytes "
            f"land: on the GPU that copy may still be in flight, and the {noun} would count "
            f"toward phase {phase}, whose arrivals are all in",
            tid,
            f"arm the barrier again only after phase {phase} completed for this thread: its own "
            f"wait (T.cuda.mbarrier_wait(bar, {phase & 1})), or the wait on a barrier that the "
            "threads which waited for it arrive on afterwards (a stage's empty barrier)"
            + _last_wait_note(sh.last_wait_of(tid)),
        )

    def expect_tx(self, addr: int, tx: int, tid: int) -> _Barrier:
        b = self.get(addr, tid)
        self.check_armed(b, tid, "expects bytes", "expect-tx")
        if not -MAX_TX <= b.tx + tx <= MAX_TX:
            raise Fault(
                f"mbarrier {b.name}: tx-count {b.tx} + {tx} leaves the ISA's range "
                f"-{MAX_TX}..{MAX_TX} ({b.state()})",
                tid,
                "expect at most 2^20-1 bytes in flight on one barrier: split the transfer",
            )
        b.tx += tx
        b.armed.append((self.m.span, tx))
        self.changed()
        self.record(BarrierEvent.EXPECT_TX, b, (tid,))
        return b

    def arrive(self, addr: int, count: int, tid: int, release: bool = True, remote=None) -> None:
        """``tid`` arrives ``count`` times; with release semantics (all but ``.relaxed``) its
        accesses so far, and what it observed, are ordered before the phase's observers.
        ``remote``: the arrive of a thread of another block of the cluster (``(rank, thread,
        seq)`` when it releases at cluster scope, else ``()``), which the block's order does
        not hold (tirx/sim/distributed.py orders it)."""
        b = self.get(addr, tid)
        check_count(count, tid, "mbarrier.arrive's count")
        if remote is None:
            self.check_armed(b, tid, "arrives", "arrive")
        if count > b.pending:
            raise Fault(
                f"over-arrival on mbarrier {b.name}: an arrive of {count} when {b.state()}",
                tid,
                "every phase takes exactly the init count of arrivals: check the count in "
                "mbarrier.init against the threads that arrive (cp.async.mbarrier.arrive.noinc "
                "counts too)",
            )
        b.pending -= count
        if remote is not None:
            if remote:
                b.remote.append(remote)
        else:
            b.arrivers.append(tid)
            if release:
                how = (  # for a race report: a thread that did not wait for this phase
                    f"arrives on mbarrier {b.name} at {line_of(self.m.span)}",
                    f"wait for that phase (T.cuda.mbarrier_wait on that barrier with parity "
                    f"{b.phase & 1})",
                )
                order = self.m.shared.order
                b.released = order.merge(b.released, order.release(np.array([tid]), how))
        self.changed()
        self.record(BarrierEvent.ARRIVE, b, (tid,))
        self._complete(b)

    def complete_tx(self, addr: int, tx: int, tid: int, land) -> None:
        """An asynchronous copy issued by ``tid`` performs complete-tx of ``tx`` bytes on the
        barrier (PTX ISA, "mbarrier: tx-count"): the tx-count drops by ``tx``. ``land(agent)``
        writes the copy's bytes as the barrier's agent when the current phase completes; the
        completion releases them to the phase's observers (:meth:`passed`)."""
        b = self.get(addr, tid)
        if not -MAX_TX <= b.tx - tx <= MAX_TX:
            raise Fault(
                f"mbarrier {b.name}: tx-count {b.tx} - {tx} leaves the ISA's range "
                f"-{MAX_TX}..{MAX_TX} ({b.state()})",
                tid,
                "at most 2^20-1 bytes may be in flight on one barrier: split the transfer",
            )
        b.tx -= tx
        b.delivered += tx
        b.landings.append(land)
        self.changed()
        self.record(BarrierEvent.COMPLETE_TX, b, (tid,))
        self._complete(b)

    def _complete(self, b: _Barrier) -> None:
        if b.pending or b.tx:
            return
        order = self.m.shared.order
        for land in b.landings:
            land(b.agent)
        b.landings = []
        seen = order.empty() if b.released is None else b.released
        seen = order.merge(seen, order.empty())
        seen[b.agent] = order.stamp()  # the copies done so far are done for the observers
        b.seen, b.released = seen, None
        b.done_by = next((d for d in reversed(b.deliveries) if d[0] == b.phase), None)
        b.saw = set()
        threads, b.arrivers = b.arrivers, []
        b.ran = tuple(threads)
        b.seen_remote, b.remote = b.remote, []
        b.phase += 1
        b.pending = b.expected
        b.last_armed = (tuple(b.armed), b.delivered)
        b.armed, b.delivered = [], 0
        self.record(BarrierEvent.COMPLETE, b, threads)

    def inval(self, addr: int, tid: int) -> None:
        b = self.get(addr, tid)
        self.record(BarrierEvent.INVAL, b, (tid,))
        del self.live[addr]
        self.changed()

    def passed(
        self, b: _Barrier, threads: np.ndarray, acquire: bool = True, cluster: bool = False
    ) -> None:
        """Threads ``threads`` observed ``b``'s last completed phase: with acquire semantics
        (all but ``.relaxed``), what its arrivals released, and the copies that completed on
        it, are ordered before them; other blocks' arrivals only at cluster scope
        (``cluster``: ``.acquire.cluster``; a CTA-scope acquire is not morally strong with
        another block's release, so it orders nothing of theirs)."""
        self.m.shared.waited(threads, b.name, b.phase, b.last_armed, self.m.span)
        if acquire and b.seen is not None:
            self.m.shared.order.acquire(threads, b.seen)
        if acquire and b.seen_remote:  # other blocks' arrivals (tirx/sim/distributed.py)
            if cluster:
                self.m.cluster.shared.acquire(b.seen_remote)
            else:
                self.m.cluster.shared.cta_wait(b.seen_remote, self.m.span)
        b.observed = max(b.observed, b.phase - 1)
        if b.done_by is not None:
            b.saw.update(int(t) for t in threads)
        if b.deliveries:
            b.deliveries = [d for d in b.deliveries if d[0] > b.observed]


def check_count(count: int, tid: int, what: str) -> None:
    if not 1 <= count <= MAX_COUNT:
        raise Fault(
            f"{what} is {count}, outside the ISA's range 1..{MAX_COUNT}",
            tid,
            f"an mbarrier counts 1..{MAX_COUNT} arrivals",
        )


def _last_wait_note(last) -> str:
    """What the arming thread's last mbarrier wait says about the slip: none at all, or one
    that passed at once (parity 1 on a barrier with no completed phase)."""
    if last is None:
        return "; this thread has waited on no mbarrier before it"
    if last.phase == 0:
        return (
            f"; this thread's last wait, at {line_of(last.span)} on mbarrier {last.barrier}, "
            "passed at once: no phase of that barrier had completed, and parity 1 on it does "
            "not wait (the first phase's parity is 0, then 1, 0, ...)"
        )
    return ""
