"""The 8x8 matrix of 16-bit elements as the warp-level matrix data-movement instructions hold it
(PTX ISA, "Warp-level matrix load instruction: ldmatrix", "... store instruction: stmatrix",
"... transpose instruction: movmatrix"), written from the ISA's descriptions and shared by those
families' simulator modules.

"Each thread in a warp loads fragments of a row, with thread 0 receiving the first fragment in
its register r, and so on. A group of four threads loads an entire row": lane ``l`` holds row
``l // 4``, elements ``2 * (l % 4)`` and ``2 * (l % 4) + 1``, of a matrix in one 32-bit register,
the lower-index element in the low half. Read column-major (``.trans``), lane ``l`` holds column
``l // 4``, rows ``2 * (l % 4)`` and ``2 * (l % 4) + 1``. Arrays are ``[W, ...]`` over warps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .memory import as_index

__all__ = [
    "LANES", "GROUP", "THREAD_IN_GROUP", "fragment_coords", "words_of", "matrices_of",
    "MatrixRows", "parse_rows", "row_addresses",
]  # fmt: skip

LANES = np.arange(32)
GROUP = LANES >> 2  # groupID
THREAD_IN_GROUP = LANES % 4  # threadID_in_group


def fragment_coords(trans: bool) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of the 16-bit element each lane holds in each half: arrays [32, 2]."""
    first = (2 * THREAD_IN_GROUP)[:, None] + np.arange(2)[None, :]  # 2*(l%4) + half
    fixed = np.repeat(GROUP[:, None], 2, axis=1)  # l // 4
    return (first, fixed) if trans else (fixed, first)


def words_of(matrices: np.ndarray, trans: bool) -> np.ndarray:
    """The registers that hold matrices ``uint16 [W, num, 8, 8]`` (warp, matrix, row, column):
    ``uint32 [W, 32, num]``, register ``i`` of each lane from matrix ``i``."""
    rows, cols = fragment_coords(trans)
    halves = matrices[:, :, rows, cols].astype(np.uint32)  # [W, num, 32, 2]
    words = halves[..., 0] | (halves[..., 1] << np.uint32(16))
    return np.ascontiguousarray(words.transpose(0, 2, 1))


def matrices_of(registers: np.ndarray, trans: bool) -> np.ndarray:
    """The matrices registers ``uint32 [W, 32, num]`` hold: ``uint16 [W, num, 8, 8]``."""
    w, _, num = registers.shape
    rows, cols = fragment_coords(trans)
    regs = registers.transpose(0, 2, 1)  # [W, num, 32]
    halves = np.stack([regs & np.uint32(0xFFFF), regs >> np.uint32(16)], axis=-1)
    out = np.zeros((w, num, 8, 8), dtype=np.uint16)
    out[:, :, rows, cols] = halves.astype(np.uint16)
    return out


@dataclass(frozen=True)
class MatrixRows:
    """``{ldmatrix,stmatrix}.sync.aligned.m8n8.x{num}[.trans].shared{,::cta}.b16``: ``num``
    8x8 matrices of b16, their rows at the addresses lanes ``0 .. 8 num - 1`` supply."""

    num: int
    trans: bool

    @property
    def used(self) -> int:
        """How many lanes supply a row address (8 per matrix)."""
        return 8 * self.num


def parse_rows(mnemonic: str, text: str) -> MatrixRows | None:
    """The form of ``mnemonic`` (ldmatrix or stmatrix) that ``text`` names, or None."""
    m = re.fullmatch(
        rf"{mnemonic}\.sync\.aligned\.m8n8\.x(1|2|4)(\.trans)?\.shared(::cta)?\.b16", text.strip()
    )
    return MatrixRows(int(m.group(1)), m.group(2) is not None) if m else None


def row_addresses(address, idx: np.ndarray, w: int) -> np.ndarray:
    """The shared address each lane of ``w`` whole warps supplies (``address``: the compiled
    operand), as ``int64 [w, 32]``."""
    addrs = np.broadcast_to(as_index(address(idx), idx.size), idx.size).reshape(w, 32)
    return addrs.astype(np.uint32).astype(np.int64)
