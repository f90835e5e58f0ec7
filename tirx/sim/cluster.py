"""Thread-block clusters in the simulator (PTX ISA, "Thread Block Clusters", "Distributed Shared
Memory", "barrier.cluster", the cluster special registers; the CUDA programming guide,
"Thread Block Clusters" and "Distributed Shared Memory").

A :class:`Cluster` is the state the blocks of one cluster share while they run together: the
machines of its blocks (one :class:`~tirx.sim.machine.Machine` per rank, each with its own
shared memory, registers and units), the cluster barrier's counts, which blocks have exited,
and the record of accesses across blocks (:mod:`tirx.sim.distributed`). The blocks are
co-scheduled by :mod:`tirx.sim.cluster_run`: each runs until it waits for another block (a
cluster barrier, an mbarrier phase that a peer's arrive or multicast copy completes), then
another runs. A kernel launched without clusters that uses a cluster instruction gets a cluster
of one block (a machine unit, reset with each block).

**The shared::cluster window.** A block's shared::cta addresses (what ``SharedAddress`` and
``T.cuda.cvta_generic_to_shared`` give) are its own bytes; ``mapa.shared::cluster`` maps one to
the same offset in the block of rank ``r``, which the simulator writes ``(r + 1) << 24 |
offset``. A shared::cta address is a shared::cluster address of the executing block (the ISA:
the shared::cta window lies in the shared::cluster window). The GPU's numbers differ; a kernel
that treats these addresses as opaque (the ISA's contract) runs the same on both.

**barrier.cluster.** Per thread of the cluster, the arrivals and waits it made. ``arrive``
counts the thread into the next phase (a second arrive before its wait is a fault);
``wait`` passes when every thread of every block that has not exited has arrived at that
phase (an exited thread counts as arrived, as the ISA's "all non-exited threads" says). An
arrive releases the thread's earlier accesses and a wait acquires them, cluster-wide: an access
by thread p after ``A`` arrivals is ordered before an access by thread q of another block iff q
has waited for a phase after ``A`` (``waits(q) > A``). A ``.relaxed`` arrive releases none of
its thread's earlier accesses: they wait for its next arrive (:mod:`tirx.sim.distributed`),
except the ``mbarrier.init`` operations a ``fence.mbarrier_init.release.cluster`` released.
Within a block the same holds: a wait that the whole block passes orders the block's own
accesses as a CTA barrier does, but when some thread arrived at that phase ``.relaxed``, the
waiters acquire only what the releasing arrivals released (and, for a ``.relaxed`` arrive,
what the thread's ``fence.mbarrier_init`` before it released: all its accesses, which is more
than the fence's inits, so the simulator reports less there, never more).

**Exit.** A block's shared memory goes away when the block exits: an access by another block
must be ordered before the exit by a cluster barrier (the thread arrives after its access, the
exiting block waits for that phase). A peer access that is not (``A >= waits`` of the target at
its exit) is a fault naming both blocks and lines, whenever the schedule ran the exit.
"""

from __future__ import annotations

import numpy as np

from ..errors import SimulationError
from ..ir import nodes as ir
from .faults import Fault
from .memory import thread_name
from .shared import line_of

__all__ = [
    "Cluster", "cluster_of", "cluster_register", "cluster_address", "WINDOW_BITS",
    "EXIT_HINT",
]  # fmt: skip

WINDOW_BITS = 24  # a block's part of the simulator's shared::cluster window: 16 MiB

EXIT_HINT = (
    "a block's shared memory goes away when it exits: end the kernel with T.cuda.cluster_sync() "
    "(barrier.cluster.arrive + barrier.cluster.wait by every thread) so that every block has "
    "finished its accesses to its peers before any block exits"
)


def cluster_address(rank, offset):
    """The simulator's shared::cluster address of byte ``offset`` of the block of ``rank``."""
    return ((rank + 1) << WINDOW_BITS) | offset


def cluster_of(m) -> Cluster:
    """The cluster of machine ``m``: the one it was made in, or a cluster of one block (a
    machine unit, reset with each block) for a kernel launched without clusters."""
    if m.cluster is None:
        m.cluster = m.unit("cluster", lambda m: Cluster([m], m.fn.launch))
    return m.cluster


def cluster_register(m, kind: ir.Builtin, d: int):
    """The evaluator of a cluster register for machine ``m``: ``f(idx)``, computed from the
    block's index and the launch (PTX ISA, "Special Registers"; the grid is a whole number of
    clusters, each a box of the grid, ranked x fastest)."""
    launch = m.fn.launch
    shape = launch.cluster_shape
    block = m.block_idx
    if kind is ir.Builtin.CLUSTER_DIM:
        value = np.int32(shape[d])
        return lambda idx: value
    if kind is ir.Builtin.CLUSTER_SIZE:
        value = np.int32(shape[0] * shape[1] * shape[2])
        return lambda idx: value
    if kind is ir.Builtin.CLUSTER_COUNT:
        value = np.int32(launch.grid[d] // shape[d])
        return lambda idx: value
    if kind is ir.Builtin.CLUSTER_CTA_ID:
        return lambda idx: np.int32(block[d] % shape[d])
    if kind is ir.Builtin.CLUSTER_ID:
        return lambda idx: np.int32(block[d] // shape[d])
    if kind is ir.Builtin.CLUSTER_CTA_RANK:
        cx, cy, _ = shape

        def rank(idx):
            x, y, z = (int(block[a]) % shape[a] for a in range(3))
            return np.int32(x + cx * (y + cy * z))

        return rank
    raise ValueError(f"{kind} is not a cluster register")


class Cluster:
    """The shared state of the blocks of one cluster (see the module docstring); ``machines``
    by rank, ``launch`` the kernel's."""

    def __init__(self, machines: list, launch: ir.LaunchConfig):
        self.machines = machines
        self.shape = launch.cluster_shape
        self.size = self.shape[0] * self.shape[1] * self.shape[2]
        self.threads = machines[0].T if machines else 0
        self.arrived = np.zeros((self.size, self.threads), dtype=np.int64)
        self.waited = np.zeros((self.size, self.threads), dtype=np.int64)
        self.exits: list = [None] * self.size  # per rank: (waits at exit, span) once exited
        self.version = 0  # bumped by every arrive and exit (a stalled block may go on)
        self.scheduler = None  # tirx.sim.cluster_run: the blocks' scheduler (None: one block)
        self.shared = None  # tirx.sim.distributed.Distributed, for more than one block
        self._forget_phases()

    def reset(self) -> None:
        """A new cluster of blocks (or, for a cluster of one, a new block) starts."""
        self.arrived.fill(0)
        self.waited.fill(0)
        self.exits = [None] * self.size
        self.version += 1
        self._forget_phases()
        if self.shared is not None:
            self.shared.reset()

    def _forget_phases(self) -> None:
        """Within each block, for the phases some thread arrived at ``.relaxed`` (rank -> phase
        -> the arrive's line): what the block's releasing arrivals released (rank -> phase -> a
        clock snapshot of :mod:`tirx.sim.order`), and the release a thread's
        ``fence.mbarrier_init`` made for its next arrive ((rank, thread) -> snapshot)."""
        self.relaxed: list[dict] = [{} for _ in range(self.size)]
        self.released: list[dict] = [{} for _ in range(self.size)]
        self.fenced: dict = {}

    def finish_block(self) -> None:
        """A machine unit's end of block (a cluster of one): nothing is left to check."""

    def coords(self, rank: int) -> tuple[int, int, int]:
        return tuple(int(x) for x in self.machines[rank].block_idx)

    def who(self, rank: int, tid: int) -> str:
        """``block (x, y, z) thread t (warp w, lane l)``."""
        return f"block {self.coords(rank)} {thread_name(tid)}"

    # ----------------------------------------------------------------- addresses

    def locate(self, m, addr: np.ndarray, tids: np.ndarray, what: str):
        """``(ranks, offsets)`` of shared::cluster addresses ``addr`` used by ``tids`` of
        ``m``'s block: a shared::cta address is the block's own."""
        addr = addr.astype(np.int64)
        window = addr >> WINDOW_BITS
        ranks = np.where(window == 0, m.rank, window - 1)
        offsets = addr & ((1 << WINDOW_BITS) - 1)
        bad = (ranks >= self.size) | (addr < 0)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise Fault(
                f"{what}: address {int(addr[k]):#x} is no shared::cluster address of this "
                f"cluster of {self.size} block(s)",
                int(tids[k]),
                'make peer addresses with T.ptx["mapa.shared::cluster.u32"](d, addr, rank), rank '
                f"0..{self.size - 1}",
            )
        return ranks, offsets

    def peer(self, m, rank: int, tid: int, what: str):
        """The machine of the block of ``rank``, which ``tid`` of ``m`` names in ``what``."""
        if not 0 <= rank < self.size:
            raise Fault(
                f"{what}: rank {rank} names no block of this cluster of {self.size} block(s)",
                tid,
                f"a cluster's ranks are 0..{self.size - 1} (T.cuda.mov_sreg(32, "
                '"cluster_nctarank") blocks)',
            )
        return self.machines[rank]

    # -------------------------------------------------------------- barrier.cluster

    def arrive(self, m, idx: np.ndarray, relaxed: bool = False) -> None:
        """Threads ``idx`` of ``m``'s block arrive at the cluster barrier (``relaxed``: with
        ``.relaxed``, which releases none of their earlier accesses)."""
        arrived, waited = self.arrived[m.rank], self.waited[m.rank]
        again = arrived[idx] > waited[idx]
        if again.any():
            t = int(idx[np.flatnonzero(again)[0]])
            raise Fault(
                f"barrier.cluster.arrive at {line_of(m.span)}: {thread_name(t)} arrives again "
                "before it waited for the phase it arrived at",
                t,
                "each thread arrives once per phase: barrier.cluster.wait before the next "
                "barrier.cluster.arrive (T.cuda.cluster_sync() does both)",
            )
        if relaxed and self.shared is not None:
            self.shared.relaxed_arrive(m.rank, idx, self.shared.site(m.span))
        self._release(m, idx, relaxed)
        arrived[idx] += 1
        self.version += 1

    def _release(self, m, idx: np.ndarray, relaxed: bool) -> None:
        """Within the block: what threads ``idx`` release into the phase they arrive at (all
        their accesses, or with ``.relaxed`` only what a fence of theirs released)."""
        order, rank = m.shared.order, m.rank
        phase = int(self.arrived[rank, idx].max()) + 1
        released = self.released[rank]
        if relaxed:
            self.relaxed[rank][phase] = m.span  # (the arrive's line, for a race's hint)
            snaps = [self.fenced.pop((rank, t)) for t in idx.tolist() if (rank, t) in self.fenced]
        else:
            snaps = [order.release(idx)]
        for snap in snaps:
            released[phase] = order.merge(released.get(phase), snap)

    def fence(self, m, idx: np.ndarray) -> None:
        """Threads ``idx`` executed ``fence.mbarrier_init.release.cluster``: within the block,
        their next (``.relaxed``) arrive releases their accesses so far (the fence releases
        their inits only; the simulator orders more, never less, than that)."""
        snap = m.shared.order.release(idx)
        for t in idx.tolist():
            self.fenced[(m.rank, t)] = snap
        if self.shared is not None:
            self.shared.fence_init(m.rank, idx)

    def phase_of(self, m, idx: np.ndarray) -> int:
        """The phase threads ``idx`` wait for (a fault when one has not arrived at it)."""
        arrived, waited = self.arrived[m.rank], self.waited[m.rank]
        early = arrived[idx] <= waited[idx]
        if early.any():
            t = int(idx[np.flatnonzero(early)[0]])
            raise Fault(
                f"barrier.cluster.wait at {line_of(m.span)}: {thread_name(t)} waits without "
                "having arrived at the phase",
                t,
                "arrive first: barrier.cluster.arrive, then barrier.cluster.wait (or "
                "T.cuda.cluster_sync(), which does both)",
            )
        return int(waited[idx].max()) + 1

    def complete(self, phase: int) -> bool:
        """Whether every thread of every block that has not exited arrived at ``phase``."""
        live = [r for r in range(self.size) if self.exits[r] is None]
        return all(int(self.arrived[r].min()) >= phase for r in live)

    def missing(self, phase: int) -> str:
        """Who has not arrived at ``phase`` (for a deadlock report)."""
        for r in range(self.size):
            if self.exits[r] is None and int(self.arrived[r].min()) < phase:
                t = int(np.flatnonzero(self.arrived[r] < phase)[0])
                said = f"{self.who(r, t)} has not arrived at phase {phase}"
                if int(self.arrived[r].max()) >= phase:  # its block's threads diverged there
                    said += (
                        ", at which other threads of its block wait: the block reaches the "
                        "cluster barrier on different paths (a thread that skips it and exits "
                        "counts as arrived on the GPU; the simulator runs a block's threads in "
                        "step and counts them so only once the whole block has ended): put the "
                        "cluster barrier where every thread of the block reaches it"
                    )
                return said
        return "every thread arrived"

    def waited_for(self, m, idx: np.ndarray) -> None:
        """Threads ``idx`` of ``m``'s block passed the wait: their waits count one more; when
        the whole block passed it at once, it also orders the block's own accesses as a CTA
        barrier does (every thread released them before any passed), unless some thread
        arrived at the phase ``.relaxed``: then the waiters acquire what the releasing
        arrivals (and the fences before relaxed ones) released, nothing more."""
        rank = m.rank
        self.waited[rank, idx] += 1
        phase = int(self.waited[rank, idx].max())
        released = self.released[rank]
        relaxed = self.relaxed[rank].get(phase)
        if relaxed is not None:
            m.shared.relaxed_span = relaxed
            snap = released.get(phase)
            if snap is not None:
                m.shared.order.acquire(idx, snap)
        elif idx.size == m.T:
            m.shared.barrier()
        if int(self.waited[rank].min()) >= phase:  # every thread passed it: forget the phase
            released.pop(phase, None)
            self.relaxed[rank].pop(phase, None)

    # ------------------------------------------------------------------------ exit

    def exited(self, rank: int, span) -> None:
        """The block of ``rank`` has ended: its threads count as arrived, and a peer's access
        to its shared memory not ordered before the exit is a fault."""
        waits = int(self.waited[rank].max())
        self.exits[rank] = (waits, span)
        self.version += 1
        if self.shared is not None:
            self.shared.check_exit(rank, waits, span)

    def exit_fault(self, rank: int, access: tuple, exit_span) -> SimulationError:
        """The error for ``access`` = (accessor rank, thread, line, verb, what, the line of a
        ``.relaxed`` arrive that did not order it or None) of the shared memory of the block of
        ``rank``, which exits at ``exit_span`` with no cluster barrier after the access."""
        a_rank, tid, span, verb, what, relaxed = access
        why = ""
        if relaxed is not None:
            why = (
                f" (the accessing thread's arrive at {line_of(relaxed)} is .relaxed, which "
                "orders none of its accesses)"
            )
        return SimulationError(
            f"{self.who(a_rank, tid)} {verb} {what} of block {self.coords(rank)} at "
            f"{line_of(span)}, but that block may exit before it: it ends at "
            f"{line_of(exit_span)} with no cluster barrier that orders the access before its "
            f"exit{why} [block {self.coords(a_rank)}, warp {tid // 32}, lane {tid % 32}]",
            span,
            EXIT_HINT,
        )

    # ------------------------------------------------------------------ scheduling

    def stall(self, m) -> bool:
        """Every strand of ``m``'s block waits: let the other blocks of the cluster run.
        True when they may have changed something (look again), False for a cluster of one
        (the block's wait is a deadlock)."""
        if self.scheduler is None:
            return False
        return self.scheduler.stall(m)
