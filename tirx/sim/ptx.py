"""PTX warp-matrix instructions, written from the PTX ISA's own descriptions.

Nothing here reads tirx's contract tables or layout code: the lane/element formulas below
are transcriptions of the ISA sections "Warp-level matrix load instruction: ldmatrix",
"Warp-level matrix store instruction: stmatrix" and "Matrix Fragments for mma.m16n8k8 /
mma.m16n8k16 with floating point type". The machine (``machine.py``) gathers operands for a
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

__all__ = [
    "LdMatrix",
    "StMatrix",
    "Mma",
    "parse_instruction",
    "ldmatrix_registers",
    "stmatrix_rows",
    "mma_compute",
    "A_FRAGMENT",
    "B_FRAGMENT",
    "CD_FRAGMENT",
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


@dataclass(frozen=True)
class Mma:
    """``mma.sync.aligned.m16n8k{k}.row.col.f32.{ab}.{ab}.f32``: D = A·B + C, f32 accumulate."""

    k: int
    ab: str  # "f16" | "bf16"

    @property
    def a_regs(self) -> int:
        """A is 16 x k: k/2 halves per lane, two per 32-bit register."""
        return self.k // 4

    @property
    def b_regs(self) -> int:
        """B is k x 8: k/4 halves per lane."""
        return self.k // 8


Instruction = LdMatrix | StMatrix | Mma

_MATRIX_RE = re.compile(
    r"(ldmatrix|stmatrix)\.sync\.aligned\.m8n8\.x(1|2|4)(\.trans)?\.shared(::cta)?\.b16"
)
_MMA_RE = re.compile(
    r"mma\.sync\.aligned\.m16n8k(8|16)\.row\.col\.f32\.(f16|bf16)\.(f16|bf16)\.f32"
)


def parse_instruction(text: str) -> Instruction | None:
    """The instruction a PTX text names, or ``None`` when the simulator does not know it.

    ``mma`` with ``.f16``/``.bf16`` inputs requires ``.atype == .btype`` (PTX ISA); a mixed
    form is not an instruction and is rejected like unknown text.
    """
    text = text.strip()
    m = _MATRIX_RE.fullmatch(text)
    if m:
        cls = LdMatrix if m.group(1) == "ldmatrix" else StMatrix
        return cls(int(m.group(2)), m.group(3) is not None)
    m = _MMA_RE.fullmatch(text)
    if m and m.group(2) == m.group(3):
        return Mma(int(m.group(1)), m.group(2))
    return None


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


# ------------------------------------------------------------------------------- mma
#
# Fragment tables: for each lane and register, the matrix coordinates of the two 16-bit
# halves (low, high) — or of the single f32 element for C/D. Straight from the ISA's
# "row = ..., col = ..." formulas, element index i running low to high over the registers.


def _a_fragment(k: int) -> tuple[np.ndarray, np.ndarray]:
    # m16n8k16: row = groupID for a_i with 0 <= i < 2 or 4 <= i < 6, else groupID + 8;
    #           col = threadID_in_group*2 + (i & 1), + 8 for i >= 4.
    # m16n8k8:  row = groupID for a0, a1, groupID + 8 for a2, a3; col = threadID_in_group*2 + (i&1)
    # Both are the same formula with i < k/2.
    i = np.arange(k // 2)  # element index a_i; register i // 2, half i % 2
    row = GROUP[:, None] + 8 * ((i[None, :] >> 1) & 1)
    col = 2 * THREAD_IN_GROUP[:, None] + (i[None, :] & 1) + 8 * (i[None, :] >> 2)
    return row.reshape(32, k // 4, 2), col.reshape(32, k // 4, 2)


def _b_fragment(k: int) -> tuple[np.ndarray, np.ndarray]:
    # B is K x N. m16n8k16: row = threadID_in_group*2 + (i & 1) for b_i with i < 2, + 8 for
    # i >= 2; col = groupID. m16n8k8: row = threadID_in_group*2 + i, col = groupID.
    i = np.arange(k // 4)
    row = 2 * THREAD_IN_GROUP[:, None] + (i[None, :] & 1) + 8 * (i[None, :] >> 1)
    col = np.repeat(GROUP[:, None], k // 4, axis=1)
    return row.reshape(32, k // 8, 2), col.reshape(32, k // 8, 2)


def _cd_fragment() -> tuple[np.ndarray, np.ndarray]:
    # row = groupID for c0, c1, groupID + 8 for c2, c3; col = threadID_in_group*2 + (i & 1)
    i = np.arange(4)
    row = GROUP[:, None] + 8 * (i[None, :] >> 1)
    col = 2 * THREAD_IN_GROUP[:, None] + (i[None, :] & 1)
    return row, col


A_FRAGMENT = {k: _a_fragment(k) for k in (8, 16)}
B_FRAGMENT = {k: _b_fragment(k) for k in (8, 16)}
CD_FRAGMENT = _cd_fragment()


def _halves_to_values(regs: np.ndarray, ab: str) -> np.ndarray:
    """uint32 registers [..., n] → float64 halves [..., n, 2] (low half first)."""
    halves = np.stack([regs & np.uint32(0xFFFF), regs >> np.uint32(16)], axis=-1)
    halves = halves.astype(np.uint16)
    if ab == "f16":
        return halves.view(np.float16).astype(np.float64)
    return (halves.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def mma_compute(op: Mma, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D = A·B + C for W warps.

    ``a``: uint32 ``[W, 32, k/4]``, ``b``: uint32 ``[W, 32, k/8]``, ``c``: float32
    ``[W, 32, 4]``. Returns float32 ``[W, 32, 4]``. Products of 16-bit floats are exact in
    float64; the sum is formed in float64 and rounded to float32 once, so integer-valued
    inputs give exact results.
    """
    w = a.shape[0]
    k = op.k
    a_mat = np.zeros((w, 16, k))
    ar, ac = A_FRAGMENT[k]
    a_mat[:, ar, ac] = _halves_to_values(a, op.ab)
    b_mat = np.zeros((w, k, 8))
    br, bc = B_FRAGMENT[k]
    b_mat[:, br, bc] = _halves_to_values(b, op.ab)
    c_mat = np.zeros((w, 16, 8))
    cr, cc = CD_FRAGMENT
    c_mat[:, cr, cc] = c.astype(np.float64)
    d_mat = np.matmul(a_mat, b_mat) + c_mat
    return d_mat[:, cr, cc].astype(np.float32)
