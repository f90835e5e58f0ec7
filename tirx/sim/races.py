"""The race checks of shared memory: every access is checked against the accesses before it
that the happens-before order of :mod:`tirx.sim.order` does not put before it.

Per byte the simulator keeps the last write (who made it -- a thread, or an agent: the copies
that complete on one mbarrier, ... -- when, and at which line) and the reads and atomic updates
since (:class:`tirx.sim.accesses.Accesses`). An access by thread ``p`` conflicts with

* the last write, unless that write is ``p``'s or ordered before ``p``;
* for a write or an atomic, every read since, unless ordered before ``p``; for a plain access,
  every atomic update since, likewise (two atomics never race).

Ordered before ``p`` means: a chain of release/acquire synchronizations from the other access
to ``p`` -- ``cta_sync`` (which clears the records of threads' accesses: every one of them is
then ordered before every thread), a warp barrier within a warp, an mbarrier phase the other
thread arrived on (after its access) and ``p`` observed, and such chains of them; for an
agent's access, a wait of ``p`` (or of a thread ``p`` is ordered after) that observed the
agent's completion. The check is exact for the first conflicting pair, which is all the
simulator reports, naming both threads (or the asynchronous unit) and both lines.
"""

from __future__ import annotations

import numpy as np

from .accesses import Accesses
from .faults import Fault
from .memory import first, thread_name
from .order import Order

__all__ = ["Races", "landed_hint", "line_of", "race_hint", "same_statement_hint"]


def line_of(span) -> str:
    """``line N`` of a statement's span (``an unknown line`` when it has none)."""
    return f"line {span.line}" if span is not None else "an unknown line"


def race_hint(
    first, second, same_warp: bool, warpgroups: bool = False, others: bool = False
) -> str:
    """The fix for a race between the accesses at spans ``first`` (earlier) and ``second``;
    ``warpgroups``: the two threads are in different warpgroups, which may be warp roles that
    never reach one line together (a producer and a consumer); ``others``: threads of other
    warps than the reader's also wrote bytes the access reads (a warp barrier cannot do)."""
    if first is not None and second is not None and first.line == second.line:
        where = f"between the two statements at {line_of(first)}"
    else:
        where = f"between {line_of(first)} and {line_of(second)}"
    if same_warp and others:
        return (
            f"put T.cuda.cta_sync() {where} (threads of other warps wrote bytes this access "
            "reads too, so T.cuda.warp_sync() does not order them all)"
        )
    if same_warp:
        return f"put T.cuda.cta_sync() (or T.cuda.warp_sync() within one warp) {where}"
    hint = (
        f"put T.cuda.cta_sync() {where} (the threads are in different warps, so "
        f"T.cuda.warp_sync() does not order them)"
    )
    if warpgroups:
        hint += (
            f'; for warp roles that do not reach one line together, T.ptx["bar.arrive"](1, n) '
            f'after {line_of(first)} and T.ptx["bar.sync"](1, n) before {line_of(second)} (n: '
            "the threads of both roles), or an mbarrier arrive and wait"
        )
    return hint


def same_statement_hint(span, other_wrote: bool, same_warp: bool) -> str:
    """The fix for a race of two accesses made by the statement at ``span`` (one execution of
    it, or two): ``other_wrote``: the earlier access is another thread's write, which the
    statement made in an earlier pass (a loop iteration, or another call of its macro: its
    reads come before its store in one pass); else another thread's read of this pass, which
    this thread's store of the same statement overwrites."""
    sync = "T.cuda.warp_sync()" if same_warp else "T.cuda.cta_sync()"
    if not same_warp:
        sync += " (the threads are in different warps)"
    if other_wrote:
        return (
            f"the write was made by an earlier pass over {line_of(span)} (an iteration of the "
            f"loop around it, or an earlier call of the macro it is in): put {sync} at the end "
            "of the loop body, outside any branch (every thread must reach it), so that each "
            "iteration's writes are ordered before the next one's reads (between the calls, for "
            "a macro)"
        )
    return (
        f"the statement at {line_of(span)} reads the array and writes it, and another thread's "
        "read of this byte is not ordered before this thread's store: no barrier can go inside "
        f"one statement. Read into a variable, synchronize, then store (v = s[...]; {sync}; "
        "s[...] = v)"
    )


def landed_hint(landing, here, same_warp: bool, warpgroups: bool) -> str:
    """The fix for a race with the bytes of a cp.async that landed at a wait: ``landing`` is
    ``(the wait's span, the span of the last CTA barrier between the copy and the wait, or
    None)``."""
    wait, barrier = landing
    if barrier is not None:
        return (
            f"the barrier at {line_of(barrier)} comes before the wait at {line_of(wait)}, where "
            "the copy's bytes count as written, so it does not order them: move the barrier "
            f"after the wait (between {line_of(wait)} and {line_of(here)})"
        )
    return race_hint(wait, here, same_warp, warpgroups) + (
        " (a cp.async's bytes count as written at the wait that completes it, so the barrier "
        "goes after that wait)"
    )


class Races:
    """The access records of the block's shared memory (``memory``: its
    :class:`tirx.sim.shared.SharedMemory`, for names, lines and the asynchronous copies)."""

    def __init__(self, memory, size: int, threads: int):
        self.memory = memory
        self.order = Order(threads)
        self.width = self.order.width
        self.w_who = np.full(size, -1, dtype=np.int32)
        self.w_time = np.zeros(size, dtype=np.int32)
        self.w_site = np.zeros(size, dtype=np.int32)
        self.readers = Accesses(size, self.order)
        self.atomics = Accesses(size, self.order)
        self.agent_written = 0  # bytes an agent wrote last (they outlive CTA barriers)
        self.hints: dict[int, str] = {}  # agent column -> how a thread observes its work
        self.scratch = np.zeros(size, dtype=np.int64)
        self.barriers = 0  # CTA barriers passed in this block (a copy's landing names the last)
        self.barrier_span = None  # the statement of the last one

    def reset(self) -> None:
        self.order.reset()
        self.barriers, self.barrier_span = 0, None
        self.w_who.fill(-1)
        self.agent_written = 0
        self.readers.clear()
        self.atomics.clear()

    def barrier(self) -> None:
        """A CTA barrier: every thread's access so far is ordered before every thread; an
        agent's, when some thread had observed it before the barrier."""
        self.barriers += 1
        self.barrier_span = self.memory.where()
        self.order.cta_barrier()
        if self.agent_written:
            who = self.w_who
            agent = who >= self.width
            seen = self.order.vc[0, np.where(agent, who, 0)] > self.w_time
            keep = agent & ~seen
            who[~keep] = -1
            self.agent_written = int(np.count_nonzero(keep))
        else:
            self.w_who.fill(-1)
        self.readers.clear()
        self.atomics.clear()

    def agent(self, key, name: str, hint: str) -> int:
        """The order's column of an asynchronous unit (``name`` and ``hint`` for messages)."""
        col = self.order.agent(key, name)
        self.hints[col] = hint
        return col

    # ------------------------------------------------------------------------ checks

    def check_writer(self, b, p, verb: str) -> None:
        """Fault if the last write of one of bytes ``b`` is not ordered before ``p``."""
        who = self.w_who[b]
        bad = ~self.order.ordered(p, who, self.w_time[b])
        if bad.any():
            k = first(bad)
            w = int(who[k])
            if w >= self.width:
                raise self._unobserved(b, p, k, verb, w)
            when = int(self.w_time[b[k]])
            writers = who[bad]
            others = bool(((writers < self.width) & (writers >> 5 != p[bad] >> 5)).any())
            raise self.race(
                b, p, k, verb, f"{thread_name(w)} wrote", w, self.w_site[b[k]], when, others
            )

    def check_accesses(self, accesses: Accesses, b, p, verb: str, what: str) -> None:
        """Fault if one of ``accesses`` (reads, or atomic updates: ``what``) of bytes ``b`` is
        not ordered before ``p``."""
        found = accesses.first_unordered(b, p)
        if found is None:
            return
        k, who, site = found
        if who >= self.width:
            name = self.order.names[who]
            raise Fault(
                f"shared-memory race: {thread_name(int(p[k]))} {verb} "
                f"{self.memory.describe(int(b[k]))} at {line_of(self.memory.where())}, which "
                f"{name} {what} at {line_of(self.memory.sites[site])}, and this thread is not "
                f"ordered after that",
                int(p[k]),
                self.hints[who],
            )
        if who >= 0:
            other, tid = f"{thread_name(who)} {what}", who
        else:
            other, tid = f"threads of warp {-who - 1} {what}", 32 * (-who - 1)
        raise self.race(b, p, k, verb, other, tid, site)

    def race(
        self,
        b,
        p,
        k: int,
        verb: str,
        other: str,
        other_tid: int,
        other_site,
        when=None,
        others: bool = False,
    ) -> Fault:
        """The race of thread ``p[k]`` with ``other`` (thread ``other_tid``, at ``other_site``;
        ``when``: the time of its access, known for a write; ``others``: writers in other
        warps than their readers race with this access too)."""
        mem = self.memory
        here, there = mem.where(), mem.sites[int(other_site)]
        same_warp = other_tid >= 0 and other_tid >> 5 == int(p[k]) >> 5
        warpgroups = other_tid >= 0 and other_tid >> 7 != int(p[k]) >> 7
        landing = mem.landings.get(int(other_site))  # a cp.async's bytes landed at a wait
        later = None if when is None else self.order.released_after(other_tid, when)
        if int(other_site) in mem.init_sites:  # the barrier's init, before any use elsewhere
            hint = (
                f"put T.cuda.cta_sync() after the mbarrier.init at {line_of(there)}, where every "
                "thread still runs it (before the roles split): another thread may use the "
                "barrier only once a barrier orders its init before that use"
                + (
                    "; in a cluster whose peers use it too, T.cuda.cluster_sync() there orders "
                    "it before theirs as well"
                    if mem.cluster is not None
                    else ""
                )
            )
        elif later is not None:  # the writer released it afterwards: acquire that release
            did, acquire = later
            hint = (
                f"{thread_name(other_tid)} {did}, after its write at {line_of(there)}: "
                f"{acquire} in this thread before {line_of(here)}"
            )
            if warpgroups:
                hint += (
                    " (not T.cuda.cta_sync(): in one warp role's branch it is a barrier the "
                    "other role never reaches)"
                )
        elif landing is not None:
            hint = landed_hint(landing, here, same_warp, warpgroups)
        elif there is not None and there == here:  # one statement, in one pass or two
            hint = same_statement_hint(here, when is not None, same_warp)
        else:
            hint = race_hint(there, here, same_warp, warpgroups, others)
        last = mem.last_wait_of(int(p[k]))
        if last is not None and last.phase == 0:  # its last mbarrier wait waited for nothing
            hint = mem.unwritten_hint(int(p[k])) + "; else " + hint
        relaxed = mem.relaxed_span  # the arrive of a .relaxed cluster phase the block passed
        if relaxed is not None:
            hint += (
                f"; if the cluster barrier whose arrive is at {line_of(relaxed)} should order "
                "them: that arrive is .relaxed, which orders none of the accesses before it "
                "(arrive with release semantics, as T.cuda.cluster_sync() does)"
            )
        if landing is not None:
            there_text = (
                f"at {line_of(there)} (its cp.async, whose bytes count as written at its wait "
                f"at {line_of(landing[0])}), with no barrier between that wait and "
                f"{line_of(here)}"
            )
        else:
            there_text = f"at {line_of(there)} with no barrier in between"
        return Fault(
            f"shared-memory race: {thread_name(int(p[k]))} {verb} {mem.describe(int(b[k]))} at "
            f"{line_of(here)}, which {other} {there_text}",
            int(p[k]),
            hint,
        )

    def same_step(self, b, p, k: int, other: int) -> Fault:
        """Two threads write one byte in one step, by one statement: no barrier can go between
        them; one thread should write, or each its own address."""
        mem = self.memory
        here = line_of(mem.where())
        who = (
            "T.cuda.lane_id() == 0"
            if other >> 5 == int(p[k]) >> 5
            else 'T.cuda.thread_idx("x") == 0'
        )
        return Fault(
            f"shared-memory race: {thread_name(int(p[k]))} writes {mem.describe(int(b[k]))} at "
            f"{here}, which {thread_name(other)} also writes in the same step: the statement "
            "stores to one address from several threads",
            int(p[k]),
            f"let one thread write it (put {here} under `if {who}:`), or index by the thread so "
            "that each writes its own address; no barrier can go between two threads of one "
            "statement",
        )

    def _unobserved(self, b, p, k: int, verb: str, agent: int) -> Fault:
        """Thread ``p[k]`` accesses a byte an asynchronous copy delivered, unordered."""
        mem = self.memory
        site = int(self.w_site[b[k]])
        name, hint = mem.copy_kinds.get(site, ("cp.async", None))
        if callable(hint):  # one per reader (shared.py's copy_kinds)
            hint = hint(mem, int(p[k]), line_of(mem.sites[site]))
        issuer = mem.issuers.get(site)
        by = f" issued by {thread_name(issuer)}" if issuer is not None else ""
        return Fault(
            f"shared-memory race: {thread_name(int(p[k]))} {verb} {mem.describe(int(b[k]))} at "
            f"{line_of(mem.where())}, the destination of the {name} at "
            f"{line_of(mem.sites[site])}{by}, whose completion this thread has not observed "
            f"(its own wait, or a barrier after a thread that waited)",
            int(p[k]),
            hint or self.hints[agent],
        )

    # --------------------------------------------------------------------- recording

    def read(self, b, p, site: int) -> None:
        self.check_writer(b, p, "reads")
        self.check_accesses(self.atomics, b, p, "reads", "atomically updated")
        self.readers.record(b, p, site)

    def write(self, b, p, site: int, record: bool) -> None:
        self.check_writer(b, p, "writes")
        self.check_accesses(self.atomics, b, p, "writes", "atomically updated")
        self.check_accesses(self.readers, b, p, "writes", "read")
        scratch = self.scratch
        scratch[b] = p
        bad = scratch[b] != p
        if bad.any():
            k = first(bad)
            other = int(scratch[b[k]])
            raise self.same_step(b, p, k, other)
        if record:
            self.set_writer(b, p, site)

    def atomic(self, b, p, site: int) -> None:
        verb = "atomically updates"
        self.check_writer(b, p, verb)
        self.check_accesses(self.readers, b, p, verb, "read")
        self.atomics.record(b, p, site)

    def set_writer(self, b, who, site: int) -> None:
        """Bytes ``b`` are written now by ``who`` (threads, or one agent column)."""
        if self.agent_written:
            self.agent_written -= int(np.count_nonzero(self.w_who[b] >= self.width))
        self.w_who[b] = who
        self.w_time[b] = self.order.now
        self.w_site[b] = site
        if np.ndim(who) == 0 and who >= self.width:
            self.agent_written += b.size
        self.readers.forget(b)
        self.atomics.forget(b)
