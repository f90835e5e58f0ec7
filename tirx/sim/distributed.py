"""Distributed shared memory in the simulator: the accesses of one cluster's blocks to each
other's shared memory, and the record that orders them (PTX ISA, "Distributed Shared Memory",
"Memory Consistency Model"; see :mod:`tirx.sim.cluster` for the cluster barrier's order).

Per byte of each block's shared memory, :class:`Distributed` keeps the accesses that another
block could race with: the last writer (its block's rank, thread, the arrivals at the cluster
barrier it had made, its line) and, per rank, the readers (the most arrivals among them, one of
them, its line). Every access to the byte is recorded: a block's own (through the hook
:mod:`tirx.sim.shared` calls, ``SharedMemory.cluster``) and its peers' (``ld``/``st.shared::
cluster``, a remote ``mbarrier.arrive``, a multicast copy's delivery). An access by thread q of
rank ``r`` conflicts with an earlier one of another rank made after ``A`` arrivals when q has not
waited for a phase after it (``waits(q) <= A``) and one of the two writes: a fault naming both
blocks, threads and lines. Accesses within one block are the block's own race checks'
(:mod:`tirx.sim.shared`).

A ``.relaxed`` arrive at the cluster barrier releases nothing (the ISA: "no memory ordering and
visibility guarantees ... for the memory accesses performed prior to" it): the records of its
thread's accesses since its last arrive move on to the next arrive, which must release them
(:meth:`Distributed.relaxed_arrive`). The one exception is what the ISA's light-weight fence is
for: an ``mbarrier.init`` followed by the thread's ``fence.mbarrier_init.release.cluster`` is
released by the ``.relaxed`` arrive after the fence. A race whose record a ``.relaxed`` arrive
held back names that arrive and the fix.

An mbarrier phase orders across blocks too: the arrivals of a peer's threads (``mbarrier.
arrive.release.cluster.shared::cluster``) are acquired by a waiter of the barrier's block, which
clears the records those threads made before their arrive (:meth:`Distributed.acquire`), as a
completed phase clears its arrivals' records in the block's own checks.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType
from .faults import Fault
from .memory import ONES, UINT, first
from .numeric import storage_type
from .shared import line_of

__all__ = ["Distributed", "LocalHook", "RACE_HINT"]

_SYNC_OR = (
    "put T.cuda.cluster_sync() (barrier.cluster.arrive + barrier.cluster.wait by every thread "
    "of the cluster) between {first} and {second}, or order them through an mbarrier of the "
)
RACE_HINT = _SYNC_OR + (
    "reading block (mbarrier.arrive.release.cluster.shared::cluster by the writers, a wait by "
    "the readers)"
)
WAR_HINT = _SYNC_OR + (  # a write after a read: the writer waits for the readers
    "writing block: the readers arrive on it (mbarrier.arrive.release.cluster.shared::cluster) "
    "after their reads, and the writer waits for that phase "
    "(T.cuda.mbarrier_wait_acquire_cluster) before it writes"
)
RELAXED_HINT = (
    "arrive with release semantics at {arrive} (barrier.cluster.arrive, the default, as "
    "T.cuda.cluster_sync() does)"
)
CTA_WAIT_HINT = (
    "wait with T.cuda.mbarrier_wait_acquire_cluster(bar, parity) at {wait} "
    "(mbarrier.try_wait.parity.acquire.cluster), which acquires the arrivals of other blocks"
)
CTA_ARRIVE_HINT = (
    'arrive with T.ptx["mbarrier.arrive.release.cluster.shared::cluster.b64"] at {arrive}, '
    "which releases the thread's accesses to the waiters of another block (they wait with "
    "T.cuda.mbarrier_wait_acquire_cluster)"
)
INIT_HINT = (
    'put T.ptx["fence.mbarrier_init.release.cluster"]() after the init, before the .relaxed '
    "arrive at {arrive} (the fence releases the thread's inits at its next arrive), or arrive "
    "with release semantics there"
)


class LocalHook:
    """What ``SharedMemory.cluster`` holds for a block of a cluster of several: its own
    accesses, recorded in the cluster's record (called after the block's own checks)."""

    __slots__ = ("shared", "rank")

    def __init__(self, shared: Distributed, rank: int):
        self.shared, self.rank = shared, rank

    def access(self, b: np.ndarray, p: np.ndarray, write: bool) -> None:
        d = self.shared
        d.access(self.rank, b, self.rank, p, write, d.site(d.machines[self.rank].span))

    def tensor_core_read(self, b: np.ndarray, tid: int) -> None:
        """Warpgroup ``tid >> 7``'s tensor core has read bytes ``b`` (its wgmma.mma_async,
        every issuing thread's wait_group passed): a read of the block that a peer's later
        write must be ordered after, by an arrive of any of the warpgroup's threads."""
        d = self.shared
        site = d.site(d.machines[self.rank].span)
        d.access(self.rank, b, self.rank, np.full(b.size, tid), False, site, group=True)


class Distributed:
    """The cluster's record of accesses to its blocks' shared memory (module docstring)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.machines = cluster.machines
        n = cluster.size
        self.sizes = [m.shared.data.size for m in self.machines]
        size = max(self.sizes)
        self.w_rank = np.full((n, size), -1, dtype=np.int16)
        self.w_tid = np.zeros((n, size), dtype=np.int32)
        self.w_arr = np.zeros((n, size), dtype=np.int64)
        self.w_site = np.zeros((n, size), dtype=np.int32)
        self.w_seq = np.zeros((n, size), dtype=np.int64)
        self.r_arr = np.full((n, n, size), -1, dtype=np.int64)  # [target, reader rank, byte]
        self.r_tid = np.zeros((n, n, size), dtype=np.int32)
        self.r_site = np.zeros((n, n, size), dtype=np.int32)
        self.r_seq = np.zeros((n, n, size), dtype=np.int64)
        # the site of the .relaxed arrive that held a record back (0: none), and the inits
        self.w_held = np.zeros((n, size), dtype=np.int32)
        self.r_held = np.zeros((n, n, size), dtype=np.int32)
        # the read is a warpgroup's tensor core's (wgmma): each of the warpgroup's threads
        # observed it, so an arrive by any of them releases it
        self.r_group = np.zeros((n, n, size), dtype=bool)
        self.w_init = np.zeros((n, size), dtype=bool)
        self.init_fence = np.zeros((n, cluster.threads), dtype=np.int64)  # seq of the last
        self.seq = 0  # counts accesses: an arrive acquires what its thread did before it
        self.sites: list = [None]
        self.site_ids: dict = {}
        self.peers: list = [None] * n  # per target: (arrivals, rank, tid, span, verb, what)
        self.cta_waits: dict = {}  # (rank, thread) of a remote arrive -> a CTA-scope wait on it
        self.cta_arrives: dict = {}  # (rank, thread) -> the site of its CTA-scope remote arrive
        for rank, m in enumerate(self.machines):
            m.shared.cluster = LocalHook(self, rank)

    def reset(self) -> None:
        self.w_rank.fill(-1)
        self.r_arr.fill(-1)
        self.init_fence.fill(0)
        self.peers = [None] * len(self.peers)
        self.cta_waits.clear()
        self.cta_arrives.clear()

    def site(self, span) -> int:
        sid = self.site_ids.get(span)
        if sid is None:
            sid = self.site_ids[span] = len(self.sites)
            self.sites.append(span)
        return sid

    # ------------------------------------------------------------------ the record

    def access(
        self,
        target: int,
        b,
        rank: int,
        p,
        write: bool,
        site: int,
        verb=None,
        record=True,
        group=False,
    ) -> None:
        """Threads ``p`` of the block of ``rank`` access bytes ``b`` of the block of
        ``target``: a fault if an access of another block is not ordered with it; recorded
        unless ``record`` is False (a copy's write at issue: the barrier phase it completes
        orders its bytes for the waiters)."""
        c = self.cluster
        self.seq += 1
        waits = c.waited[rank, p]
        wr = self.w_rank[target, b]
        bad = (wr >= 0) & (wr != rank) & (waits <= self.w_arr[target, b])
        if bad.any():
            k = first(bad)
            other = (int(wr[k]), int(self.w_tid[target, b[k]]), int(self.w_site[target, b[k]]))
            other += (int(self.w_held[target, b[k]]), bool(self.w_init[target, b[k]]))
            raise self._race(target, b[k], rank, int(p[k]), write, "wrote", other, verb)
        if write:
            for r in range(c.size):
                if r == rank:
                    continue
                ra = self.r_arr[target, r, b]
                bad = (ra >= 0) & (waits <= ra)
                if bad.any():
                    k = first(bad)
                    other = (r, int(self.r_tid[target, r, b[k]]), int(self.r_site[target, r, b[k]]),
                             int(self.r_held[target, r, b[k]]), False,
                             bool(self.r_group[target, r, b[k]]))  # fmt: skip
                    raise self._race(target, b[k], rank, int(p[k]), True, "read", other, verb)
            if not record:
                return
            self.w_rank[target, b] = rank
            self.w_tid[target, b] = p
            self.w_arr[target, b] = c.arrived[rank, p]
            self.w_site[target, b] = site
            self.w_seq[target, b] = self.seq
            self.w_held[target, b] = 0
            self.w_init[target, b] = False
            self.r_arr[target, :, b] = -1
            return
        arr = c.arrived[rank, p]
        newer = arr >= self.r_arr[target, rank, b]
        at = b[newer]
        self.r_arr[target, rank, at] = arr[newer]
        self.r_tid[target, rank, at] = p[newer]
        self.r_site[target, rank, at] = site
        self.r_seq[target, rank, at] = self.seq
        self.r_held[target, rank, at] = 0
        self.r_group[target, rank, at] = group

    def _race(self, target, byte, rank, tid, write, did, other, verb) -> Fault:
        c = self.cluster
        o_rank, o_tid, o_site, held, init, *group = other
        did = "initialized (mbarrier.init)" if init else did
        other_who = c.who(o_rank, o_tid)
        if group and group[0]:  # a wgmma's operand: its warpgroup's tensor core read it
            other_who = f"block {c.coords(o_rank)}'s tensor core (warpgroup {o_tid >> 7})"
        where = self.machines[target].shared.describe(int(byte))
        owner = "its own" if target == rank else f"block {c.coords(target)}'s"
        here, there = self.machines[rank].span, self.sites[o_site]
        verb = verb or ("writes" if write else "reads")
        between = "with no cluster barrier in between"
        # which block must wait for which: the writer for the readers (a write after a read),
        # else the reader for the writer
        fmt = WAR_HINT if did == "read" else RACE_HINT
        hint = fmt.format(first=line_of(there), second=line_of(here))
        waited = self.cta_waits.get((o_rank, o_tid))
        if waited is not None and not held:
            between = (
                f"ordered only by an mbarrier phase it arrived at with .release.cluster, which "
                f"the wait at {line_of(waited)} acquires at CTA scope (the default): that "
                "orders nothing of another block's"
            )
            hint = CTA_WAIT_HINT.format(wait=line_of(waited))
        arrived = self.cta_arrives.get((o_rank, o_tid))
        if arrived is not None and waited is None and not held:
            arrive = line_of(self.sites[arrived])
            between = (
                f"ordered only by its thread's arrive at {arrive} on another block's "
                "mbarrier, which releases at CTA scope (the default): that orders nothing for "
                "another block's waiters"
            )
            hint = CTA_ARRIVE_HINT.format(arrive=arrive)
        if held:
            arrive = line_of(self.sites[held])
            between = (
                f"with no cluster barrier in between that releases it: its thread's arrive at "
                f"{arrive} is .relaxed, which orders none of the accesses before it"
            )
            hint = (INIT_HINT if init else RELAXED_HINT).format(arrive=arrive)
        return Fault(
            f"distributed shared-memory race: {c.who(rank, tid)} {verb} {owner} {where} at "
            f"{line_of(here)}, which {other_who} {did} at {line_of(there)} {between}",
            tid,
            hint,
        )

    # ------------------------------------------------------ .relaxed arrives, inits

    def mark_init(self, rank: int, b) -> None:
        """Bytes ``b`` of the block of ``rank`` were just written by ``mbarrier.init``."""
        self.w_init[rank, b] = True

    def fence_init(self, rank: int, idx) -> None:
        """Threads ``idx`` of ``rank`` executed ``fence.mbarrier_init.release.cluster``: their
        earlier inits are released by their next arrive, ``.relaxed`` or not."""
        self.init_fence[rank, idx] = self.seq

    def relaxed_arrive(self, rank: int, idx, site: int) -> None:
        """Threads ``idx`` of ``rank`` arrive ``.relaxed`` (before their count goes up): the
        records of their accesses since their last arrive are not released by it, so they move
        on to the next arrive, except the inits a ``fence.mbarrier_init`` has released."""
        c = self.cluster
        arrived = c.arrived[rank]
        mine = np.zeros(c.threads, dtype=bool)
        mine[idx] = True
        tid = self.w_tid
        held = (self.w_rank == rank) & mine[tid] & (self.w_arr == arrived[tid])
        held &= ~(self.w_init & (self.w_seq <= self.init_fence[rank][tid]))
        self.w_arr[held] += 1
        self.w_held[held] = site
        tid = self.r_tid[:, rank]
        held = (self.r_arr[:, rank] >= 0) & mine[tid] & (self.r_arr[:, rank] == arrived[tid])
        self.r_arr[:, rank][held] += 1
        self.r_held[:, rank][held] = site
        for target, access in enumerate(self.peers):  # the peer accesses an exit must follow
            if access is not None and access[1] == rank and mine[access[2]]:
                if access[0] == arrived[access[2]]:  # (and the .relaxed arrive's line)
                    self.peers[target] = (access[0] + 1, *access[1:-1], self.sites[site])

    def cta_arrive(self, rank: int, tids, span) -> None:
        """Threads ``tids`` of ``rank`` arrived on another block's mbarrier at CTA scope: it
        releases nothing of theirs there; kept for the hint of a race it did not order."""
        site = self.site(span)
        for t in tids.tolist():
            self.cta_arrives[(rank, t)] = site

    def cta_wait(self, arrivals, span) -> None:
        """A wait at CTA scope passed a phase that threads of other blocks arrived at with
        ``.release.cluster``: nothing of theirs is acquired; the wait is kept for the hint of
        a race with what they did before their arrive."""
        for rank, tid, _ in arrivals:
            self.cta_waits[(rank, tid)] = span

    def acquire(self, arrivals) -> None:
        """A waiter passed an mbarrier phase that threads of other blocks arrived at:
        ``arrivals`` = ``(rank, thread, seq)``; what each did before its arrive is ordered."""
        for rank, tid, seq in arrivals:
            mine = (self.w_rank == rank) & (self.w_tid == tid) & (self.w_seq < seq)
            self.w_rank[mine] = -1
            readers = self.r_tid[:, rank]
            mine = (readers == tid) | (self.r_group[:, rank] & (readers >> 7 == tid >> 7))
            self.r_arr[:, rank][mine & (self.r_seq[:, rank] < seq)] = -1

    # ----------------------------------------------------------------------- exits

    def note_peer(
        self, target: int, rank: int, p, span, verb: str, what: str, lasting: bool = True
    ) -> None:
        """Threads ``p`` of ``rank`` accessed the shared memory of block ``target``: it must
        not exit before (:meth:`tirx.sim.cluster.Cluster.exited`). ``lasting=False``: only a
        block that has exited is a fault (a multicast copy, whose delivery the receiving block
        waits for)."""
        c = self.cluster
        arr = c.arrived[rank, p]
        k = int(np.argmax(arr))
        access = (int(arr[k]), rank, int(p[k]), span, verb, what, None)
        gone = c.exits[target]
        if gone is not None:
            waits, exit_span = gone
            if access[0] >= waits:
                raise c.exit_fault(target, access[1:], exit_span)
        held = self.peers[target]
        if lasting and (held is None or access[0] > held[0]):
            self.peers[target] = access

    def check_exit(self, target: int, waits: int, span) -> None:
        held = self.peers[target]
        if held is not None and held[0] >= waits:
            raise self.cluster.exit_fault(target, held[1:], span)

    # ------------------------------------------------------------- peer accesses

    def _peer_bytes(self, target: int, offsets, size: int, tids, what: str):
        shared = self.machines[target].shared
        bad = (offsets % size != 0) | (offsets < 0) | (offsets + size > self.sizes[target])
        if bad.any():
            k = first(bad)
            c = self.cluster
            raise Fault(
                f"{what} of block {c.coords(target)}'s shared memory at offset {int(offsets[k])}: "
                f"not a {size}-byte aligned place inside its {self.sizes[target]} bytes",
                int(tids[k]),
                "map an address of one of the block's shared tensors with mapa (the same "
                "allocation exists in every block of the cluster)",
            )
        if shared.in_flight:
            shared.check_pending(offsets, size, tids, "reads" if "read" in what else "writes")
        return shared, (offsets[:, None] + np.arange(size)).ravel(), np.repeat(tids, size)

    def load(self, m, target: int, offsets, d: DType, tids) -> np.ndarray:
        """``ld.shared::cluster`` by threads ``tids`` of ``m``'s block from block ``target``."""
        dt = storage_type(d)
        s = dt.itemsize
        shared, b, p = self._peer_bytes(target, offsets, s, tids, "read")
        ok = shared.written.view(UINT[s])[offsets // s] == ONES[s]
        if not ok.all():
            k = first(~ok)
            raise Fault(
                f"{self.cluster.who(m.rank, int(tids[k]))} reads "
                f"{shared.describe(int(offsets[k]))} of block {self.cluster.coords(target)}, "
                "which nothing wrote there",
                int(tids[k]),
                "write the peer's shared memory (and synchronize the cluster) before reading it",
            )
        self.access(target, b, m.rank, p, False, self.site(m.span))
        self.note_peer(target, m.rank, tids, m.span, "reads", shared.describe(int(offsets[0])))
        return shared.data.view(dt)[offsets // s]

    def store(self, m, target: int, offsets, bits, d: DType, tids) -> None:
        """``st.shared::cluster`` by threads ``tids`` of ``m``'s block into block ``target``."""
        dt = storage_type(d)
        s = dt.itemsize
        shared, b, p = self._peer_bytes(target, offsets, s, tids, "write")
        self.access(target, b, m.rank, p, True, self.site(m.span))
        self.note_peer(target, m.rank, tids, m.span, "writes", shared.describe(int(offsets[0])))
        shared.data.view(dt)[offsets // s] = bits
        shared.written.view(UINT[s])[offsets // s] = ONES[s]
