"""What one warp-level memory access costs the memory system, by the hardware's published rules.

Both functions take one instruction's accesses by many threads at once (several warps, each
with its active lanes) and return the totals over the warps.

* **Global memory** is served in 32-byte *sectors* (CUDA C++ Best Practices Guide, "Coalesced
  Access to Global Memory"; the CUDA Programming Guide's "Device Memory Accesses"). A warp's
  request costs the number of distinct sectors its lanes touch; the least it can cost is the
  bytes it asks for (each distinct byte once: lanes reading the same element share it) rounded
  up to whole sectors. A coalesced copy of 32 floats touches 4 sectors for 128 bytes (the
  minimum); the same 32 floats 128 bytes apart touch 32 sectors.
* **Shared memory** has 32 banks of 4 bytes: word ``w`` (byte address ``4w``) is in bank
  ``w mod 32`` (CUDA Programming Guide, "Shared Memory" of compute capability 5.x and later).
  The lanes of a request are served in *wavefronts*; one wavefront serves at most one word per
  bank, and lanes that read the same word share it (a broadcast). So a request needs as many
  wavefronts as its most crowded bank has distinct words. Accesses of 8 bytes are processed
  per half warp (lanes 0-15, 16-31) and of 16 bytes per quarter warp (lanes 0-7, 8-15, ...):
  each part is a request of its own, so a full warp of 16-byte accesses needs at least 4
  wavefronts. An ``ldmatrix``/``stmatrix`` row (16 bytes, lane ``8i + r`` supplying row ``r``
  of matrix ``i``) is such a 16-byte access: each matrix is one quarter. The *ideal* is one
  wavefront per part that has active lanes; what goes beyond it are the bank-conflict
  replays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Cost", "global_cost", "shared_cost", "warp_count", "SECTOR_BYTES", "BANKS"]

SECTOR_BYTES = 32
BANKS = 32
BANK_BYTES = 4

_WARP_SHIFT = 40  # keys: warp id above the byte offset / word (both below 2**40)


@dataclass(frozen=True)
class Cost:
    """The cost of some warp-level requests: ``requests`` (one per warp that made one),
    ``units`` (sectors for global memory, wavefronts for shared memory), ``ideal`` (the fewest
    units the same bytes could cost) and ``bytes`` (what the lanes asked for, each lane's
    access counted: a broadcast counts every lane)."""

    requests: int = 0
    units: int = 0
    ideal: int = 0
    bytes: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.requests + other.requests,
            self.units + other.units,
            self.ideal + other.ideal,
            self.bytes + other.bytes,
        )

    @property
    def excess(self) -> int:
        """Units beyond the ideal: extra sectors, or bank-conflict replays."""
        return self.units - self.ideal

    @property
    def efficiency(self) -> float | None:
        """``ideal / units`` (1.0: coalesced, or conflict-free); None without requests."""
        return self.ideal / self.units if self.units else None


def warp_count(tids: np.ndarray) -> int:
    """The number of distinct warps among the sorted thread ids ``tids``."""
    if tids.size == 0:
        return 0
    w = tids >> 5
    return 1 + int(np.count_nonzero(w[1:] != w[:-1]))


def _distinct_per_warp(warps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per key ``(warp, value)`` made unique: the warp of each distinct pair."""
    keys = np.unique((warps.astype(np.int64) << _WARP_SHIFT) | values.astype(np.int64))
    return keys >> _WARP_SHIFT


def global_cost(tids: np.ndarray, offsets: np.ndarray, size: int) -> Cost:
    """The sectors that threads ``tids`` (sorted, grouped into warps by ``tid // 32``) touch
    accessing ``size`` bytes each at byte ``offsets`` of a tensor whose first byte starts a
    sector (cudaMalloc and torch's allocator align far more)."""
    if tids.size == 0:
        return Cost()
    warps = tids >> 5
    offsets = np.asarray(offsets, dtype=np.int64)
    first = offsets // SECTOR_BYTES
    last = (offsets + size - 1) // SECTOR_BYTES
    sector_warps = _distinct_per_warp(np.concatenate([warps, warps]), np.concatenate([first, last]))
    distinct_bytes = np.bincount(_distinct_per_warp(warps, offsets)) * size
    ideal = -(-distinct_bytes // SECTOR_BYTES)
    return Cost(warp_count(tids), int(sector_warps.size), int(ideal.sum()), int(size * tids.size))


def shared_cost(tids: np.ndarray, addresses: np.ndarray, size: int) -> Cost:
    """The wavefronts that threads ``tids`` (lane ``tid % 32`` of warp ``tid // 32``) need
    accessing ``size`` bytes each at shared byte ``addresses`` (see the module's rules)."""
    if tids.size == 0:
        return Cost()
    addresses = np.asarray(addresses, dtype=np.int64)
    words_each = max(size, BANK_BYTES) // BANK_BYTES
    lanes_per_part = 32 // words_each  # 32, 16 (8-byte accesses) or 8 (16-byte ones)
    part = (tids >> 5) * (32 // lanes_per_part) + (tids & 31) // lanes_per_part
    words = ((addresses // BANK_BYTES)[:, None] + np.arange(words_each)).ravel()
    parts = np.repeat(part, words_each)
    # one row per distinct word of each part; the bank of a word is its low 5 bits
    distinct = np.unique((parts.astype(np.int64) << _WARP_SHIFT) | words)
    part_of, bank = distinct >> _WARP_SHIFT, distinct & (BANKS - 1)
    used, part_index = np.unique(part_of, return_inverse=True)
    per_bank = np.zeros((used.size, BANKS), dtype=np.int64)
    np.add.at(per_bank, (part_index, bank), 1)
    wavefronts = int(per_bank.max(axis=1).sum())
    return Cost(warp_count(tids), wavefronts, int(used.size), int(size * tids.size))
