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

Memory ordering: arrive has release and the waits acquire semantics at CTA scope (a wait
acquires another block's ``.release.cluster`` arrivals only at ``.acquire.cluster``, as the
ISA's scopes say: :mod:`tirx.families.mbarrier.sim_cluster`). Each arrive
releases what its thread has done and observed so far into the phase (a snapshot of the
thread's clock, :mod:`tirx.sim.order`); a thread whose wait (or ``test_wait``/``try_wait``
that returned true) observed the phase acquires the phase's snapshot, so the arrivals'
earlier accesses are ordered before its later ones -- that thread's only: a thread that did
not wait is ordered after them only through a barrier, or a further arrive/wait chain, after
one that did. Copies that complete on the barrier (a tensor copy's complete-tx, the cp.async
of ``cp.async.mbarrier.arrive``) write their bytes as the barrier's own agent, which the
phase's completion releases: only the phase's observers see those bytes. The barrier word
itself counts as written by ``init``/``inval`` and read by every other operation, so a use by
another thread needs a ``cta_sync`` after init.

A block that ends while a copy that completes on a barrier may still be writing its shared
memory -- no thread observed the phase that completes it -- is a fault (the next block on the
SM may be given that shared memory). A phase left with arrivals pending, and nothing
asynchronous tracked on it, is not: the object is only bytes of shared memory then.

Faults (each names the barrier, the thread and the state): use before init (or after
inval); re-init of a barrier with arrivals pending in its current phase; an arrive beyond the
pending count (over-arrival); a count outside 1 .. 2^20-1; a tx-count outside its range; a
barrier address not 8-byte aligned or outside every shared allocation; a parity waited for
that is not 0 or 1 (a constant one is refused at compile time); and, from the
scheduler, a deadlock: every unfinished thread waits and nothing can arrive. The deadlock
report lists every blocked wait and leads with one whose barrier has all of its phase's
arrivals in but a tx-count off zero (the expect_tx count is not the bytes the copies
deliver: it names the expect_tx lines, the bytes armed and the bytes delivered), then with
one whose barrier completed a phase no thread observed (:func:`_blocked`): a wait past a phase that came (a wrong parity), not the waits
that only wait for its thread to go on; after several such phases (the arriving threads ran
rounds ahead), with the wait an arriving thread is blocked on, not the waiter's. An arrive keeps, for a race report, the wait that would
order its thread's earlier accesses (``Order.release``'s ``how``).
"""

from __future__ import annotations

import re

import numpy as np

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.faults import Fault
from ...sim.memory import as_index
from ...sim.shared import line_of
from ...sim.strands import Blocked
from .sim_objects import BarrierEvent, Barriers, BarrierTrace

__all__ = ["Barriers", "BarrierTrace", "BarrierEvent", "compile_call", "BLOCKING", "FORMS"]

FORMS = (
    "mbarrier.{init,arrive[.expect_tx],expect_tx,test_wait.parity,try_wait.parity,inval}"
    "[.release|.acquire|.relaxed][.cta|.cluster].shared[::cta].b64, "
    "mbarrier.arrive[.expect_tx][.release.{cta,cluster}].shared::cluster.b64, "
    "cp.async.mbarrier.arrive[.noinc].shared[::cta].b64, fence.mbarrier_init.release.cluster"
)
#: the statements that may wait for other warps (tirx.sim.strands runs those meanwhile)
BLOCKING = ("mbarrier.test_wait", "mbarrier.try_wait")

_OPS = re.compile(
    r"mbarrier\.(init|arrive|arrive\.expect_tx|expect_tx|test_wait\.parity|try_wait\.parity"
    r"|inval)(?:\.(release|acquire|relaxed)\.(cta|cluster))?\.shared(::cta|::cluster)?\.b64"
    r"|cp\.async\.mbarrier\.arrive(\.noinc)?\.shared(?:::cta)?\.b64"
    r"|fence\.mbarrier_init\.release\.cluster"
)


# --------------------------------------------------------------------- statements


def _barriers(m) -> Barriers:
    return m.unit("mbarrier", Barriers)


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one mbarrier statement for a set of threads."""
    match = _OPS.fullmatch(text)
    if match is None:
        raise unknown_instruction(stmt, text, FORMS)
    if text.startswith("fence."):  # fence.mbarrier_init: what the cluster's blocks observe

        def fence(idx):
            if m.cluster is not None:  # the kernel uses the cluster barrier (tirx.sim.cluster)
                m.cluster.fence(m, idx)

        return fence
    op = "cp.async.arrive" if text.startswith("cp.") else match.group(1)
    if match.group(4) == "::cluster":  # an arrive on a barrier of any block of the cluster
        from .sim_cluster import compile_remote_arrive

        return compile_remote_arrive(m, compiler, stmt, op, match.group(3) == "cluster", Barriers)
    ops = list(stmt.operands)
    done = ops.pop(0) if ops and isinstance(ops[0], ir.RegVector) else None
    if not ops or not (
        isinstance(ops[0], ir.AddressOperand) and isinstance(ops[0].address, ir.SharedAddress)
    ):
        raise compiler.error(f"{text}: the barrier operand must be a shared-memory address")
    addr_f = compiler.compile(ops[0].address)
    value_f = compiler.compile(ops[1].value) if len(ops) > 1 else None
    if op in ("test_wait.parity", "try_wait.parity"):
        m.use_strands()  # a wait, or a test in a loop: other warps must run meanwhile
        return _wait(m, stmt, addr_f, value_f, done, match.group(2) != "relaxed",
                     match.group(3) == "cluster")  # fmt: skip
    noinc = match.group(5) is not None
    ordered = match.group(2) != "relaxed"  # .relaxed arrives release nothing
    span = stmt.span

    def run(idx):
        m.span = span
        bars = _barriers(m)
        addr = _addresses(m, addr_f, idx)
        vals = _values(value_f, idx, 1)
        copies = m.unit("cp.async") if op == "cp.async.arrive" else None
        if copies is not None:  # the arrive-on waits for all the thread's prior cp.async
            for a in np.unique(addr).tolist():
                mine = idx[addr == a]
                for site, issuer in copies.land_all(mine, bars.agent(a)):
                    bars.deliver(a, site, issuer, "cp.async")
        if op in ("init", "inval"):
            m.shared.track_write(addr, 8, idx)
            if op == "init":
                m.shared.init_sites.add(m.shared.site())
            hook = m.shared.cluster
            if op == "init" and hook is not None:  # its release: tirx.sim.distributed
                hook.shared.mark_init(hook.rank, (addr[:, None] + np.arange(8)).ravel())
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
                bars.arrive(a, 1, tid, ordered)
            elif op == "cp.async.arrive":
                if not noinc:  # the ISA's increment first: the arrive is net zero
                    bars.get(a, tid).pending += 1
                bars.arrive(a, 1, tid)
            else:
                bars.arrive(a, v, tid, ordered)

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


def _wait(m, stmt, addr_f, parity_f, done, acquire: bool, cluster: bool = False):
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
        parity = _values(parity_f, idx, 0)
        if parity.max() > 1:  # the ISA: "the valid values of phaseParity are 0 and 1"
            k = int(np.flatnonzero(parity > 1)[0])
            raise Fault(
                f"the parity of the phase waited for is {int(parity[k])}, not 0 or 1",
                int(idx[k]),
                "pass the phase's parity, phase & 1 (a count of phases is not a parity)",
            )
        m.shared.track_read(addr, 8, idx)
        ok = complete(bars, addr.tolist(), parity.tolist(), idx.tolist())
        if out is None:
            if not ok.all():
                first = int(np.flatnonzero(~ok)[0])

                def describe(first=first):
                    tid = int(idx[first])
                    b = bars.get(int(addr[first]), tid)
                    return _blocked(b, tid, int(parity[first]), span, "waits", m.cluster)

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
                tid = int(idx[first])
                b = bars.get(int(addr[first]), tid)
                line = _blocked(b, tid, int(parity[first]), span, "tests (in a loop)", m.cluster)
                m.strands.yield_now(id(stmt), lambda: line)
                m.span = span
        for a in np.unique(addr[ok]).tolist():
            b = bars.get(a, int(idx[0]))
            mine = idx[ok & (addr == a)]
            bars.passed(b, mine, acquire, cluster)
            bars.record(event, b, mine.tolist())

    return run


def _blocked(b, tid: int, parity: int, span, verb: str, cluster=None) -> Blocked:
    """The deadlock report's line of thread ``tid`` blocked on ``b`` for ``parity`` (the
    current phase's: a wait for the other parity returns at once). ``lead`` ranks the waits to report first: a phase whose arrivals are all in but whose
    tx-count is off zero (lead 3, :func:`_tx_mismatch`); phases of the barrier completed that no
    thread observed, so the wait is for a later round of arrivals than the one that came. One
    such phase (lead 2): the wait skipped it, a wrong parity (a consumer's). Several (lead 1):
    the arriving threads ran rounds ahead of the waiters (a wait of theirs that is missing or
    returned early, or more arrivals than the init count), and this wait is their victim:
    ``ahead`` is those threads (the last completed phase's arrivers), whose own blocked wait,
    if any, leads instead (:func:`tirx.sim.strands.deadlock_order`). The other waits of
    the deadlock wait for what a leading wait's thread would do next."""
    text = (
        f"mbarrier {b.name} at {line_of(span)}: thread {tid} (warp {tid // 32}, lane "
        f"{tid % 32}) {verb} for the phase of parity {parity}; the barrier is in {b.state()}"
    )
    if not b.pending and b.tx:  # every arrival is in: the bytes do not match what was armed
        return _tx_mismatch(b, tid, text, cluster is None)
    last, unseen = b.phase - 1, b.phase - 1 - b.observed  # completed phases nobody observed
    if last < 0 or unseen < 1:
        return Blocked(tid, text)
    if unseen > 1:
        text += f", and its phases {b.observed + 1} to {last} completed with no thread waiting"
        hint = (
            f"{unseen} phases of mbarrier {b.name} completed while no thread waited for them: "
            "the threads that arrive on it ran rounds ahead of its waiters. Look for a wait of "
            "theirs that is missing (before arriving for the next round, they must wait for "
            "the waiters to be done with the last one: the empty slot's barrier of a "
            "producer/consumer ring) or that returned early (a wait for the other parity "
            "returns at once once the phase before it completed: the parity of the phase to "
            "observe is the number of the barrier's phases completed before it, mod 2), or for "
            "more arrivals than the mbarrier.init count"
        )
        return Blocked(tid, text, hint, 1, frozenset(b.ran))
    text += (
        f", and its phase {last} (parity {last & 1}), which completed, was waited for by no "
        "thread: this wait skipped it"
    )
    hint = (
        f"the wait at {line_of(span)} names parity {parity}, the phase after the one that "
        f"completed unobserved (parity {last & 1}): it waits for a later round of arrivals "
        f"than the one that came. Wait for parity {last & 1} there (the parity of the phase "
        "to observe is the number of the barrier's phases completed before it, mod 2; for use "
        "i of a ring of stages, (i // stages) % 2)"
    )
    return Blocked(tid, text, hint, 2)


def _tx_mismatch(b, tid: int, text: str, alone: bool) -> Blocked:
    """The line of a wait on a phase whose arrivals are all in but whose tx-count is not zero:
    the expect-tx operations armed other bytes than the copies completing on it delivered.
    It leads the report (lead 3): the other waits wait for what this one's thread does next;
    but for bytes still missing in a block of a cluster (``alone`` false) only as any wait
    does: another block's multicast, whose producer is blocked, may be the one to bring them."""
    armed = sum(tx for _, tx in b.armed)
    spans = {s.line: s for s, _ in b.armed if s is not None}
    at = ", ".join(line_of(spans[n]) for n in sorted(spans))
    by = f" by the expect_tx at {at}" if at else ""
    text += (
        f", and all of its arrivals are in: it was armed for {armed} bytes{by}, and the copies "
        f"that complete on it delivered {b.delivered}"
    )
    if b.tx < 0:
        why = f"{-b.tx} bytes more than the expect_tx count"
        fix = "raise the count"
    else:
        why = f"{b.tx} bytes fewer than the expect_tx count"
        fix = (
            "lower the count, or issue the missing copy on this barrier (a multicast's ctaMask "
            "must name each block that waits for the box)"
        )
    where = f" at {at}" if at else ""
    hint = (
        f"the copies completing on mbarrier {b.name} delivered {why} armed{where}, so its "
        f"tx-count stays at {b.tx} and the phase never completes: the expect_tx count must be "
        f"the sum of the bytes of the boxes that complete on the barrier ({b.delivered} here, "
        f"not {armed}); {fix}"
    )
    return Blocked(tid, text, hint, 3 if alone or b.tx < 0 else 0)
