"""The generic and the asynchronous proxy of shared memory (the PTX ISA's memory consistency
model, "Proxies"; "membar / fence: fence.proxy.async").

Ordinary loads and stores, atomics, stmatrix and cp.async's landings access shared memory
through the *generic proxy*; the bulk and tensor copies' engine and wgmma's operand reads
through the *async proxy*. The two are ordered only by a proxy fence, and the fence orders
only what comes after it in the order of the memory model: the thread that wrote the bytes
executes ``fence.proxy.async`` (all state spaces) or ``fence.proxy.async.shared::cta`` after
its writes, and *then* a release/acquire chain (a ``cta_sync``, an mbarrier arrive and wait)
orders that fence before the asynchronous reader's issue. A fence after the barrier publishes
the writes to the async proxy only after the reader may have read them.

Per shared byte this module keeps the generic writer whose write no fence of its own has
published yet (``unfenced``), and for a published write the fence that did it (its thread,
time and line: ``fenced_by``, ``fence_time``, ``fence_site``) until a CTA barrier orders that
fence before everything. An asynchronous reader calls :meth:`AsyncProxy.check_read` with the
threads whose issue its reads follow; it is refused when a byte is unfenced, or when its
fence is not ordered before one of those threads although the write is (:mod:`tirx.sim.order`;
a write not ordered before the reader is a race, which the race checks report). Bytes written by the
async proxy (a tensor copy landing) need no fence. The state is made by the first
asynchronous-proxy reader of a kernel (``SharedMemory.async_proxy``); before that no byte can
be stale for anyone.
"""

from __future__ import annotations

import numpy as np

from .faults import Fault
from .memory import first, thread_name
from .races import line_of

__all__ = ["AsyncProxy"]

_FENCE = 'T.ptx["fence.proxy.async.shared::cta"]()'


class AsyncProxy:
    """Per shared byte of the block being run: whose generic write is unfenced, and which
    fence published the write since the last CTA barrier."""

    def __init__(self, memory):
        self.memory = memory
        size = memory.data.size
        self.unfenced = np.full(size, -1, dtype=np.int32)
        self.fenced_by = np.full(size, -1, dtype=np.int32)
        self.fence_time = np.zeros(size, dtype=np.int32)
        self.fence_site = np.zeros(size, dtype=np.int32)
        self.dirty = False  # some fence is not yet ordered before everything

    def reset(self) -> None:
        self.unfenced.fill(-1)
        self.fenced_by.fill(-1)
        self.dirty = False

    def barrier(self) -> None:
        """A CTA barrier orders every fence so far before every thread."""
        if self.dirty:
            self.fenced_by.fill(-1)
            self.dirty = False

    def generic_write(self, b: np.ndarray, p: np.ndarray) -> None:
        """Threads ``p`` wrote bytes ``b`` through the generic proxy."""
        self.unfenced[b] = p

    def async_write(self, b: np.ndarray) -> None:
        """The async proxy wrote bytes ``b`` (a tensor copy landing): nothing to publish."""
        self.unfenced[b] = -1
        self.fenced_by[b] = -1

    def fence(self, idx: np.ndarray) -> None:
        """Threads ``idx`` executed a shared-memory proxy fence now: their writes so far are
        published to the async proxy for whoever is ordered after this fence."""
        mine = np.flatnonzero(np.isin(self.unfenced, idx))
        if not mine.size:
            return
        self.fenced_by[mine] = self.unfenced[mine]
        self.fence_time[mine] = self.memory.order.now
        self.fence_site[mine] = self.memory.site()
        self.unfenced[mine] = -1
        self.dirty = True

    def check_read(self, b: np.ndarray, readers: np.ndarray, what: str, engine: str) -> None:
        """An asynchronous reader (``what``: "the wgmma.mma_async at line 12", read by
        ``engine``: "the tensor core") reads the bytes ``b`` through the async proxy, issued by
        threads ``readers`` (one per warp that must be ordered after the writers). Fault
        unless each byte's generic write was fenced by its writer and that fence is ordered
        before every reader."""
        mem = self.memory
        writers = self.unfenced[b]
        bad = writers >= 0
        if bad.any():
            k = first(bad)
            byte, writer = int(b[k]), int(writers[k])
            store = line_of(mem.sites[int(mem.races.w_site[byte])])
            glob = mem.global_fences.get(writer)
            note = (
                f" (its fence.proxy.async.global at {line_of(mem.sites[glob])} orders global "
                "memory only)"
                if glob is not None
                else ""
            )
            raise Fault(
                f"{engine} may read stale bytes: {what} reads {mem.describe(byte)}, which "
                f"{thread_name(writer)} stored at {store} through the generic proxy with no "
                f"fence.proxy.async of shared memory after it{note}",
                int(readers[0]),
                f"put {_FENCE} after the stores at {store} (executed by the storing threads), "
                f"then T.cuda.cta_sync(), before {what}",
            )
        if not self.dirty:
            return
        fb = self.fenced_by[b]
        live = np.flatnonzero(fb >= 0)
        if not live.size:
            return
        bl, fl, tl = b[live], fb[live], self.fence_time[b[live]]
        wl, wt = mem.races.w_who[bl], mem.races.w_time[bl]
        for r in readers.tolist():
            rr = np.full(bl.size, r)
            # a write not ordered before the reader at all is a race, reported as one
            late = ~mem.order.ordered(rr, fl, tl) & mem.order.ordered(rr, wl, wt)
            if late.any():
                k = first(late)
                byte, writer = int(bl[k]), int(fl[k])
                fence = line_of(mem.sites[int(self.fence_site[byte])])
                store = line_of(mem.sites[int(mem.races.w_site[byte])])
                raise Fault(
                    f"{engine} may read stale bytes: {what}, issued by {thread_name(r)}, reads "
                    f"{mem.describe(byte)}, which {thread_name(writer)} stored at {store} and "
                    f"published to the async proxy with the fence.proxy.async at {fence}; that "
                    f"fence is not ordered before the issue (it comes after the barrier that "
                    f"orders the two threads)",
                    r,
                    f"move the fence before the barrier: {_FENCE} right after the stores at "
                    f"{store}, then T.cuda.cta_sync() (or the mbarrier arrive and wait), then "
                    f"{what}",
                )
