"""Happens-before in the block being run: vector clocks over its threads and the asynchronous
units that write or read shared memory on their behalf (the PTX ISA's memory consistency
model: release and acquire patterns, "base causality order"; mbarrier phase completion;
cp.async, bulk and wgmma groups).

Every access the simulator records carries the *time* it was made (``Order.now``) and who
made it: a thread, or an *agent* -- an asynchronous unit with a column of its own (the copies
that complete on one mbarrier object, the tensor core of one warpgroup). An access by ``q``
at time ``t`` is ordered before thread ``p`` when ``vc[p, q] > t``: ``p`` has acquired a
release that ``q`` made after the access. A thread's own column in its own row is the
largest int32, so a thread is always ordered after itself.

* A *release* by a set of threads stamps them with ``now + 1`` and advances ``now``: their
  accesses so far carry times below the stamp, later ones do not. ``release`` returns the
  snapshot a synchronizing object keeps (an mbarrier phase accumulates its arrivals').
* An *acquire* merges a snapshot into the acquiring threads' rows (elementwise max): a
  waiter that observed a phase, the threads of a warp barrier.
* An agent is *published* to threads (``publish``): a wait that completes a group.
* A CTA barrier orders everything before it before everything after it. The shared-memory
  records of threads' accesses are cleared there (a cheaper way to say the same), so only the
  agents' columns are merged across all rows here: an agent observed by one thread before the
  barrier is observed by every thread after it.

The rows are padded to whole warps; a padding thread's column is the largest int32 in every
row, so the minimum over a partial warp's lanes ignores it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Order", "FAR"]

FAR = np.iinfo(np.int32).max  # a thread's own column: always ordered
_KEPT = 16  # the releases with a ``how`` kept per thread (the latest)


class Order:
    """The vector clocks of one machine's blocks (reset at each block)."""

    def __init__(self, threads: int):
        self.threads = threads
        self.nwarps = max(1, -(-threads // 32))
        self.width = 32 * self.nwarps  # thread columns; agent columns follow
        self.agents: dict = {}  # key -> column
        self.names: dict[int, str] = {}  # agent column -> what it is, for messages
        self.vc = np.zeros((self.width, self.width + 8), dtype=np.int32)
        self.now = 1
        self.reset()

    def reset(self) -> None:
        """A new block: no access is ordered before any other thread yet."""
        self.releases: dict[int, list] = {}  # thread -> [(stamp, how)] (release's how)
        self.vc.fill(0)
        self.vc[np.arange(self.width), np.arange(self.width)] = FAR
        self.vc[:, self.threads : self.width] = FAR  # padding lanes never access anything
        self.now = 1

    def agent(self, key, name: str) -> int:
        """The column of the asynchronous unit ``key`` (made at its first use)."""
        col = self.agents.get(key)
        if col is None:
            col = self.width + len(self.agents)
            if col >= self.vc.shape[1]:
                grown = np.zeros((self.width, 2 * self.vc.shape[1] - self.width), np.int32)
                grown[:, : self.vc.shape[1]] = self.vc
                self.vc = grown
            self.agents[key] = col
            self.names[col] = name
        return col

    # ---------------------------------------------------------------- synchronization

    def stamp(self) -> int:
        """A new time, past every access so far (and not past the ones made from now on)."""
        self.now += 1
        return self.now

    def release(self, rows: np.ndarray, how=None) -> np.ndarray:
        """Threads ``rows`` release together: the snapshot of what they have observed and
        done so far (each of their own accesses up to now included). ``how``: for a race
        report, ``(what the threads did, how another thread acquires it)`` (an mbarrier
        arrive, and the wait on its phase), kept per thread (:meth:`released_after`)."""
        snap = self.vc[rows].max(axis=0) if rows.size > 1 else self.vc[int(rows[0])].copy()
        stamp = snap[rows] = self.stamp()
        if how is not None:
            for r in rows.tolist():
                kept = self.releases.setdefault(r, [])
                kept.append((stamp, how))
                del kept[:-_KEPT]
        return snap

    def released_after(self, thread: int, time: int):
        """The ``how`` of the first release ``thread`` made after ``time`` with one (see
        :meth:`release`; of its latest few), or None."""
        return next((how for stamp, how in self.releases.get(thread, ()) if stamp > time), None)

    def empty(self) -> np.ndarray:
        """The snapshot that orders nothing (to accumulate releases into)."""
        return np.zeros(self.vc.shape[1], dtype=np.int32)

    def merge(self, into: np.ndarray | None, snap: np.ndarray) -> np.ndarray:
        """``into`` joined with ``snap`` (either may predate an agent column made since)."""
        if into is None:
            return snap.copy()
        if into.size < snap.size:
            into = np.concatenate([into, np.zeros(snap.size - into.size, np.int32)])
        elif snap.size < into.size:
            snap = np.concatenate([snap, np.zeros(into.size - snap.size, np.int32)])
        return np.maximum(into, snap)

    def acquire(self, rows: np.ndarray, snap: np.ndarray) -> None:
        """Threads ``rows`` acquire ``snap``: what it orders is ordered before them."""
        n = min(snap.size, self.vc.shape[1])
        self.vc[rows, :n] = np.maximum(self.vc[rows, :n], snap[:n])

    def warp_barrier(self, warps: np.ndarray) -> None:
        """``bar.warp.sync`` by the whole of each of ``warps``: each warp's threads are
        ordered after each other's accesses before the barrier (not other warps')."""
        stamp = self.stamp()
        for w in warps.tolist():
            lanes = slice(32 * w, min(32 * w + 32, self.threads))
            merged = self.vc[lanes].max(axis=0)
            merged[lanes] = stamp  # each lane's accesses so far, not its future ones
            self.vc[lanes] = np.maximum(self.vc[lanes], merged)

    def cta_barrier(self) -> None:
        """Every thread passed a CTA barrier: agents observed by any thread are observed by
        all (the threads' own records are cleared by the shared memory)."""
        agents = self.vc[: self.threads, self.width :]
        agents[:] = agents.max(axis=0)
        self.now += 1
        self.releases.clear()  # every thread's access so far is ordered now

    def publish(self, agent: int, rows: np.ndarray) -> None:
        """Threads ``rows`` observe the completion of every access agent ``agent`` made so far
        (a wait that covers an asynchronous unit's work)."""
        self.vc[rows, agent] = self.stamp()

    # ---------------------------------------------------------------------- queries

    def ordered(self, p: np.ndarray, who: np.ndarray, time: np.ndarray) -> np.ndarray:
        """Whether the access by ``who`` (a thread or agent column; -1: nobody) at ``time`` is
        ordered before thread ``p``, elementwise."""
        return (who < 0) | (self.vc[p, np.maximum(who, 0)] > time)

    def ordered_after_warp(self, p: np.ndarray, warp: int, time: np.ndarray) -> np.ndarray:
        """Whether accesses by several lanes of ``warp`` at ``time`` (at most) are all ordered
        before thread ``p``: each lane's column of ``p``'s row is past ``time``."""
        lanes = self.vc[p, 32 * warp : 32 * warp + 32]
        return lanes.min(axis=1) > time
