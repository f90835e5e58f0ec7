"""The run of a kernel launched in clusters of several blocks: the blocks of each cluster run
together, each on a machine of its own (:mod:`tirx.sim.machine`), so that a block can read and
write its peers' shared memory, wait at the cluster barrier for them and wait on an mbarrier
phase their arrives or multicast copies complete (:mod:`tirx.sim.cluster`).

Clusters run one after another, in grid order. Within one, each block runs on a Python thread
of its own, and one runs at a time (a baton, as :mod:`tirx.sim.strands` passes one between a
block's strands): a block runs until all its strands wait (``Strands`` asks :meth:`Scheduler.
stall`), then the next block that can go on runs. A stalled block is looked at again once
something that could release it changed (an arrive, a barrier's phase, an exit); when every
block that has not finished waits and nothing changed, the cluster is deadlocked and the fault
names every wait. The simulator's verdicts do not depend on this order: every rule it checks
is one of order between the accesses (:mod:`tirx.sim.distributed`), not of the values seen.
"""

from __future__ import annotations

import threading

import numpy as np

from ..errors import SimulationError
from .cluster import Cluster
from .distributed import Distributed
from .faults import Fault
from .strands import deadlock_order

__all__ = ["ClusterRun", "Scheduler"]

_DEADLOCK_HINT = (
    "every thread of every block of the cluster must arrive (barrier.cluster.arrive) before any "
    "wait passes; an mbarrier phase needs its init count of arrivals and its tx-count back at "
    "zero (a multicast copy completes its bytes on the barrier of every block of its ctaMask, "
    "so the mask must name each block that waits for the box)"
)


class ClusterRun:
    """The run of every cluster of ``fn``'s grid: ``run()`` gives the blocks run; ``traces``,
    ``copy_traces``, ``barrier_traces``, ``budget`` and ``recorder`` are the rank-0 machine's,
    which every machine shares (one record of the run, in the order things happened)."""

    def __init__(self, fn, args, sink, trace: bool, budget, profile: bool = False):
        from .machine import Machine

        self.fn = fn
        self.cluster = cluster = Cluster([], fn.launch)
        for _ in range(cluster.size):
            m = Machine(fn, args, sink, trace, budget, profile, cluster=cluster)
            m.rank = len(cluster.machines)
            cluster.machines.append(m)
        first = cluster.machines[0]
        for m in cluster.machines[1:]:
            m.traces, m.copy_traces = first.traces, first.copy_traces
            m.barrier_traces = first.barrier_traces
            if m.recorder is not None:  # one count per source line for all the blocks
                m.recorder.lines = first.recorder.lines
        cluster.threads = first.T
        cluster.arrived = np.zeros((cluster.size, first.T), dtype=np.int64)
        cluster.waited = np.zeros((cluster.size, first.T), dtype=np.int64)
        cluster.shared = Distributed(cluster)
        cluster.scheduler = Scheduler(cluster)
        self.first = first
        self.traces, self.copy_traces = first.traces, first.copy_traces
        self.barrier_traces, self.budget, self.recorder = (
            first.barrier_traces, first.budget, first.recorder,
        )  # fmt: skip

    def run(self) -> int:
        cluster = self.cluster
        (gx, gy, gz), (cx, cy, cz) = self.fn.launch.grid, cluster.shape
        blocks = 0
        for z0 in range(0, gz, cz):
            for y0 in range(0, gy, cy):
                for x0 in range(0, gx, cx):
                    for rank, m in enumerate(cluster.machines):
                        m.start_block(
                            (x0 + rank % cx, y0 + rank // cx % cy, z0 + rank // (cx * cy))
                        )
                    cluster.reset()
                    cluster.scheduler.run()
                    blocks += cluster.size
                    for m in cluster.machines:
                        m.budget.done = blocks
        return blocks


class _Cancelled(BaseException):
    """Ends a stalled block when its cluster stops with a fault."""


class _Block:
    def __init__(self, sched: Scheduler, machine):
        self.sched, self.machine = sched, machine
        self.go = threading.Semaphore(0)
        self.done = False
        self.error: BaseException | None = None
        self.stalled_at = None  # the scheduler's progress when the block last stalled
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()

    def _main(self):
        self.go.acquire()
        m = self.machine
        try:
            with np.errstate(all="ignore"):
                if self.sched.cancelled:
                    raise _Cancelled
                m.run_block()
                self.sched.cluster.exited(m.rank, m.span)
        except _Cancelled:
            pass
        except BaseException as e:  # handed to the scheduler, which raises it
            self.error = e
        finally:
            self.done = True
            self.sched.back.release()


class Scheduler:
    """Runs the blocks of one cluster together (module docstring)."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.back = threading.Semaphore(0)
        self.cancelled = False
        self.blocks: list[_Block] = []
        self.current: _Block | None = None
        self.turn = 0

    def progress(self) -> int:
        """Changes that may release a wait: arrives and exits, and every mbarrier change."""
        strands = (m.strands for m in self.cluster.machines)
        return self.cluster.version + sum(s.version for s in strands if s is not None)

    def run(self) -> None:
        self.cancelled = False
        self.blocks = [_Block(self, m) for m in self.cluster.machines]
        self.turn = 0
        try:
            while True:
                b = self._pick()
                if b is None:
                    break
                self.current = b
                b.go.release()
                self.back.acquire()  # until the block stalls or ends
                self.current = None
                if b.error is not None:
                    raise self._error(b)
        except BaseException:
            self._cancel()
            raise

    def _pick(self) -> _Block | None:
        n = len(self.blocks)
        now = self.progress()
        for k in range(n):
            b = self.blocks[(self.turn + k) % n]
            if not b.done and (b.stalled_at is None or b.stalled_at != now):
                self.turn = (self.turn + k + 1) % n
                return b
        if any(not b.done for b in self.blocks):
            raise self._deadlock()
        return None

    def stall(self, m) -> bool:
        """Called on ``m``'s block's thread: hand the baton back until the block is resumed."""
        b = self.current
        b.stalled_at = self.progress()
        self.back.release()
        b.go.acquire()
        if self.cancelled:
            raise _Cancelled
        return True

    def _cancel(self) -> None:
        self.cancelled = True
        for b in self.blocks:
            if not b.done:
                b.go.release()
                self.back.acquire()

    def _error(self, b: _Block) -> BaseException:
        e = b.error
        if isinstance(e, Fault):
            return b.machine._error(e)
        return e

    def _deadlock(self) -> SimulationError:
        found = []  # (line, machine, span): each blocked wait, ranked by deadlock_order
        for b in self.blocks:
            m = b.machine
            if b.done or m.strands is None:
                continue
            for s in m.strands.strands:
                if not s.done and s.blocked is not None and s.blocked[1] is not None:
                    found.append((s.blocked[1](), m, s.span))
        order, _ = deadlock_order([f[0] for f in found], [f[1].rank for f in found])
        found = [found[i] for i in order]
        lines = [f"block {self.cluster.coords(m.rank)}: {line[1]}" for line, m, _ in found]
        where = (found[0][1], found[0][0][0], found[0][2]) if found else None
        if where is None:
            m = next(b.machine for b in self.blocks if not b.done)
            where = (m, 0, m.span)
        m, tid, span = where
        m.span = span
        return m._error(
            Fault(
                "deadlock across the cluster: every thread that has not finished waits, and "
                "nothing can release it: " + "; ".join(lines or ["(no wait recorded)"]),
                tid,
                _DEADLOCK_HINT,
            )
        )
