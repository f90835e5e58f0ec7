"""PTX warp-matrix instructions, written from the PTX ISA's own descriptions.

Nothing here reads tirx's contract tables or layout code: the lane/element formulas below
are transcriptions of the ISA sections "Warp-level matrix load instruction: ldmatrix",
"Warp-level matrix store instruction: stmatrix"; the mma forms live in :mod:`tirx.sim.mma`
(the ISA's "Matrix Fragments for mma.m16n8k*" sections). The machine (``machine.py``) gathers operands for a
batch of ``W`` whole warps and calls the pure functions here; they take and return numpy
arrays shaped ``[W, 32, ...]`` (warp, lane, ...).

Conventions from the ISA used throughout:

* a 32-bit register holding two 16-bit elements keeps the element with the lower index
  (the lower column, or the lower row for a B fragment) in its low half;
* ``groupID = laneid >> 2`` and ``threadID_in_group = laneid % 4``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .mma import Element, Mma, fragment, mma_compute, parse_mma

__all__ = [
    "LdMatrix",
    "StMatrix",
    "Mma",
    "parse_instruction",
    "ldmatrix_registers",
    "stmatrix_rows",
    "mma_compute",
    "Element",
    "fragment",
]

LANES = np.arange(32)
GROUP = LANES >> 2  # groupID
THREAD_IN_GROUP = LANES % 4  # threadID_in_group


@dataclass(frozen=True)
class LdMatrix:
    """``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``: 8x8 matrices of b16."""

    num: int
    trans: bool


@dataclass(frozen=True)
class StMatrix:
    """``stmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16`` (sm_90+)."""

    num: int
    trans: bool


Instruction = LdMatrix | StMatrix | Mma

_MATRIX_RE = re.compile(
    r"(ldmatrix|stmatrix)\.sync\.aligned\.m8n8\.x(1|2|4)(\.trans)?\.shared(::cta)?\.b16"
)


def parse_instruction(text: str) -> Instruction | None:
    """The instruction a PTX text names, or ``None`` when the simulator does not know it.

    ``mma`` forms are those of :mod:`tirx.sim.mma`; a form the ISA does not have (mixed
    f16/bf16 inputs, f16 D with f32 C) is rejected like unknown text.
    """
    text = text.strip()
    m = _MATRIX_RE.fullmatch(text)
    if m:
        cls = LdMatrix if m.group(1) == "ldmatrix" else StMatrix
        return cls(int(m.group(2)), m.group(3) is not None)
    return parse_mma(text)


# --------------------------------------------------------------------- ldmatrix / stmatrix
#
# ISA: for .x1/.x2/.x4, threads 0-7 / 0-15 / 0-31 supply the row addresses; thread 8*i + r
# supplies the address of row r of matrix i, each row being 8 consecutive 16-bit elements
# (16 bytes). "Each thread in a warp loads fragments of a row, with thread 0 receiving the
# first fragment in its register r, and so on. A group of four threads loads an entire row":
# lane l receives row l // 4, elements 2*(l % 4) and 2*(l % 4) + 1, of every matrix i into
# its i-th destination register. With .trans the matrix is read in column-major order: lane l
# receives column l // 4, rows 2*(l % 4) and 2*(l % 4) + 1. stmatrix is the same mapping in
# the other direction.


def _fragment_coords(trans: bool) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of the 16-bit element each lane holds in each half: arrays [32, 2]."""
    first = (2 * THREAD_IN_GROUP)[:, None] + np.arange(2)[None, :]  # 2*(l%4) + half
    fixed = np.repeat(GROUP[:, None], 2, axis=1)  # l // 4
    return (first, fixed) if trans else (fixed, first)


def ldmatrix_registers(matrices: np.ndarray, trans: bool) -> np.ndarray:
    """Destination registers from the loaded matrices.

    ``matrices``: uint16 ``[W, num, 8, 8]`` (warp, matrix, row, column) — row ``r`` of matrix
    ``i`` is what lane ``8i + r``'s address points to. Returns uint32 ``[W, 32, num]``.
    """
    rows, cols = _fragment_coords(trans)
    halves = matrices[:, :, rows, cols].astype(np.uint32)  # [W, num, 32, 2]
    words = halves[..., 0] | (halves[..., 1] << np.uint32(16))
    return np.ascontiguousarray(words.transpose(0, 2, 1))


def stmatrix_rows(registers: np.ndarray, trans: bool) -> np.ndarray:
    """The matrices a stmatrix writes: uint32 ``[W, 32, num]`` → uint16 ``[W, num, 8, 8]``."""
    w, _, num = registers.shape
    rows, cols = _fragment_coords(trans)
    regs = registers.transpose(0, 2, 1)  # [W, num, 32]
    halves = np.stack([regs & np.uint32(0xFFFF), regs >> np.uint32(16)], axis=-1)
    out = np.zeros((w, num, 8, 8), dtype=np.uint16)
    out[:, :, rows, cols] = halves.astype(np.uint16)
    return out
