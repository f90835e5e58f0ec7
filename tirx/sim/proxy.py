"""The generic and the asynchronous proxy of shared memory (the PTX ISA's memory consistency
model, "Proxies"; "membar / fence: fence.proxy.async").

Ordinary loads and stores, atomics, stmatrix and cp.async's landings access shared memory
through the *generic proxy*; the bulk and tensor copies' engine and wgmma's operand reads
through the *async proxy*. The two are ordered only by a proxy fence: the thread that wrote the
bytes executes ``fence.proxy.async`` (all state spaces) or ``fence.proxy.async.shared::cta``
after its writes, and a barrier then orders the fence before the asynchronous reader's issue
as usual. This module keeps, per shared byte, the generic writer whose write no fence of its
own has published yet; an asynchronous reader that meets such a byte may read stale bytes,
which its family reports. Bytes written by the async proxy (a tensor copy landing) need no
fence. It is made by the first asynchronous-proxy reader of a kernel (``SharedMemory.
async_proxy``); before that no byte can be stale for anyone.
"""

from __future__ import annotations

import numpy as np

__all__ = ["AsyncProxy"]


class AsyncProxy:
    """Per shared byte of the block being run: the thread whose generic write of it no proxy
    fence of that thread has published yet (-1: none)."""

    def __init__(self, memory):
        self.memory = memory
        self.unfenced = np.full(memory.data.size, -1, dtype=np.int32)

    def reset(self) -> None:
        self.unfenced.fill(-1)

    def generic_write(self, b: np.ndarray, p: np.ndarray) -> None:
        """Threads ``p`` wrote bytes ``b`` through the generic proxy."""
        self.unfenced[b] = p

    def async_write(self, b: np.ndarray) -> None:
        """The async proxy wrote bytes ``b`` (a tensor copy landing): nothing to publish."""
        self.unfenced[b] = -1

    def fence(self, idx: np.ndarray) -> None:
        """Threads ``idx`` executed a shared-memory proxy fence: their writes so far are
        visible to the async proxy."""
        mine = np.isin(self.unfenced, idx)
        self.unfenced[mine] = -1

    def stale(self, b: np.ndarray) -> tuple[int, int] | None:
        """``(byte, writer)`` of the first of bytes ``b`` whose generic write is unfenced, or
        None: what an asynchronous reader of ``b`` must not meet."""
        writers = self.unfenced[b]
        bad = writers >= 0
        if not bad.any():
            return None
        k = int(np.flatnonzero(bad)[0])
        return int(b[k]), int(writers[k])
