"""``mma.sync`` semantics, written from the PTX ISA's own fragment descriptions.

Nothing here reads tirx's contract tables or layout code. The lane/element formulas are
transcriptions of the ISA sections "Matrix Fragments for mma.m16n8k4 / m16n8k8 / m16n8k16 /
m16n8k32" (floating point and integer types); the handling of a tf32 operand's low mantissa
bits is the H200's, measured (docs/simulator.md, "tf32").

Forms: ``mma.sync.aligned.m16n8k{K}.row.col[.satfinite].{dtype}.{atype}.{btype}.{ctype}``

| A/B type | K | C/D types | registers per lane A, B, C/D |
|---|---|---|---|
| f16 | 8, 16 | f32.f32 or f16.f16 | K/4, K/8, 4 (f32) or 2 (f16x2) |
| bf16 | 8, 16 | f32.f32 | K/4, K/8, 4 |
| tf32 | 4, 8 | f32.f32 | K/2, K/4, 4 |
| s8/u8 (any mix) | 16, 32 | s32.s32, optionally ``.satfinite`` | K/8, K/16, 4 |

ptxas rejects a mixed f16/f32 pair of C and D types for these shapes (".dtype must be '.f32'
when .ctype is '.f32'", checked on the H200), so only equal C and D types are instructions.

The ISA's conventions: ``groupID = laneid >> 2``, ``threadID_in_group = laneid % 4``; a
32-bit register holding several narrower elements keeps the lower-index element in its low
bits. Functions take and return numpy arrays shaped ``[W, 32, regs]`` (warp, lane, register).
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass

import numpy as np

from ...sim.tf32 import tf32_value

__all__ = ["Mma", "Element", "parse_mma", "fragment", "mma_compute", "tf32_operand"]

LANES = np.arange(32)
GROUP = LANES >> 2  # groupID
THREAD_IN_GROUP = LANES % 4  # threadID_in_group


class Element(enum.Enum):
    """A PTX element type of an mma operand: its name and width in bits."""

    F16 = ("f16", 16)
    BF16 = ("bf16", 16)
    TF32 = ("tf32", 32)
    S8 = ("s8", 8)
    U8 = ("u8", 8)
    F32 = ("f32", 32)
    S32 = ("s32", 32)

    @property
    def ptx(self) -> str:
        return self.value[0]

    @property
    def bits(self) -> int:
        return self.value[1]

    @property
    def per_register(self) -> int:
        return 32 // self.bits


_BY_NAME = {e.ptx: e for e in Element}

#: (A/B element types allowed together, the K values, the accumulator types) per family.
_FAMILIES = (
    ({Element.F16}, (8, 16), (Element.F32, Element.F16)),
    ({Element.BF16}, (8, 16), (Element.F32,)),
    ({Element.TF32}, (4, 8), (Element.F32,)),
    ({Element.S8, Element.U8}, (16, 32), (Element.S32,)),
)

_MMA_RE = re.compile(
    r"mma\.sync\.aligned\.m16n8k(\d+)\.row\.col(\.satfinite)?"
    r"\.(\w+)\.(\w+)\.(\w+)\.(\w+)"
)


@dataclass(frozen=True)
class Mma:
    """One mma.sync form: D (16x8) = A (16xK, row) · B (Kx8, col) + C."""

    k: int
    a: Element
    b: Element
    c: Element  # the accumulator type, C's and D's
    satfinite: bool = False

    @property
    def integer(self) -> bool:
        return self.c is Element.S32

    def regs(self, role: str) -> int:
        """Registers per lane of operand ``role`` (``"a"``, ``"b"``, ``"c"``, ``"d"``)."""
        if role == "a":
            return 16 * self.k // 32 // self.a.per_register
        if role == "b":
            return 8 * self.k // 32 // self.b.per_register
        return 4 // self.c.per_register

    @property
    def a_regs(self) -> int:
        return self.regs("a")

    @property
    def b_regs(self) -> int:
        return self.regs("b")


def parse_mma(text: str) -> Mma | None:
    """The mma form ``text`` names, or ``None`` when it is not one of the forms above."""
    m = _MMA_RE.fullmatch(text)
    if m is None:
        return None
    k, sat = int(m.group(1)), m.group(2) is not None
    types = [_BY_NAME.get(x) for x in m.group(3, 4, 5, 6)]
    if None in types:
        return None
    d, a, b, c = types
    for ab, ks, accs in _FAMILIES:
        if a in ab and b in ab and k in ks and c in accs and d is c:
            if sat and c is not Element.S32:
                return None
            return Mma(k, a, b, c, sat)
    return None


# ------------------------------------------------------------------------- fragments
#
# For each lane and element index i (low to high over the registers), the (row, col) of the
# matrix element it holds. Element i sits in register i // per_register, bits
# [width * (i % per_register), ...) of it.


def _a_coords(op: Mma, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g, t = GROUP[:, None], THREAD_IN_GROUP[:, None]
    i = i[None, :]
    if op.a in (Element.F16, Element.BF16):
        # row = groupID for a0,a1 (a4,a5), groupID + 8 for a2,a3 (a6,a7);
        # col = threadID_in_group*2 + (i & 1), + 8 for i >= 4
        return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)
    if op.a is Element.TF32:
        # row = groupID for a0, a2, groupID + 8 for a1, a3;
        # col = threadID_in_group for a0, a1, threadID_in_group + 4 for a2, a3 (m16n8k4: a0, a1)
        return g + 8 * (i & 1), t + 4 * (i >> 1)
    # s8/u8: row = groupID for a0..a3 (a8..a11), groupID + 8 for a4..a7 (a12..a15);
    # col = threadID_in_group*4 + (i & 3), + 16 for i >= 8
    return g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)


def _b_coords(op: Mma, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g, t = GROUP[:, None], THREAD_IN_GROUP[:, None]
    i = i[None, :]
    col = np.broadcast_to(g, (32, i.shape[1]))
    if op.b in (Element.F16, Element.BF16):
        # row = threadID_in_group*2 + (i & 1), + 8 for i >= 2; col = groupID
        return 2 * t + (i & 1) + 8 * (i >> 1), col
    if op.b is Element.TF32:
        # row = threadID_in_group for b0, threadID_in_group + 4 for b1; col = groupID
        return t + 4 * i, col
    # s8/u8: row = threadID_in_group*4 + (i & 3), + 16 for i >= 4; col = groupID
    return 4 * t + (i & 3) + 16 * (i >> 2), col


def _cd_coords(i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # row = groupID for c0, c1, groupID + 8 for c2, c3; col = threadID_in_group*2 + (i & 1)
    g, t = GROUP[:, None], THREAD_IN_GROUP[:, None]
    i = i[None, :]
    return g + 8 * (i >> 1), 2 * t + (i & 1)


@functools.lru_cache(maxsize=256)
def fragment(op: Mma, role: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), each int ``[32, elements]``: where each lane's elements of ``role`` sit
    (cached per form: treat the arrays as read-only)."""
    if role == "a":
        n = 16 * op.k // 32
        rows, cols = _a_coords(op, np.arange(n))
    elif role == "b":
        n = 8 * op.k // 32
        rows, cols = _b_coords(op, np.arange(n))
    else:
        rows, cols = _cd_coords(np.arange(4))
    rows = np.ascontiguousarray(np.broadcast_to(rows, cols.shape))
    cols = np.ascontiguousarray(cols)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


# ---------------------------------------------------------------------- element values


def _unpack(regs: np.ndarray, bits: int) -> np.ndarray:
    """uint32 ``[..., n]`` → uint32 ``[..., n * 32 // bits]`` fields, low bits first."""
    per = 32 // bits
    if per == 1:
        return regs.astype(np.uint32)
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(bits))[None, :]
    mask = np.uint32((1 << bits) - 1)
    fields = (regs[..., None] >> shifts) & mask
    return fields.reshape(*regs.shape[:-1], -1)


def tf32_operand(bits: np.ndarray) -> np.ndarray:
    """The value the tensor core uses for an f32 register given as a ``.tf32`` operand: its
    bits with the low 13 mantissa bits cleared (:mod:`tirx.sim.tf32`, measured on the H200)."""
    return tf32_value(bits)


def _values(fields: np.ndarray, e: Element) -> np.ndarray:
    """Element fields (uint32) as exact float64 (floats) or int64 (integers) values."""
    if e is Element.F16:
        return fields.astype(np.uint16).view(np.float16).astype(np.float64)
    if e is Element.BF16:
        return (fields << np.uint32(16)).view(np.float32).astype(np.float64)
    if e is Element.TF32:
        return tf32_operand(fields)
    if e is Element.F32:
        return fields.view(np.float32).astype(np.float64)
    if e is Element.S8:
        return fields.astype(np.uint8).view(np.int8).astype(np.int64)
    if e is Element.U8:
        return fields.astype(np.int64)
    return fields.view(np.int32).astype(np.int64)  # S32


def _pack(values: np.ndarray, e: Element) -> np.ndarray:
    """``[W, 32, 4]`` accumulator values → uint32 ``[W, 32, regs]`` registers of type ``e``."""
    if e is Element.F32:
        return values.astype(np.float32).view(np.uint32)
    if e is Element.S32:
        return values.astype(np.int64).astype(np.int32).view(np.uint32)
    halves = values.astype(np.float16).view(np.uint16).astype(np.uint32)  # F16
    return halves[..., 0::2] | (halves[..., 1::2] << np.uint32(16))


def mma_compute(op: Mma, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D = A·B + C for W warps, all operands uint32 register bits ``[W, 32, regs]``.

    Floating point: the products are exact in float64 (16-bit and tf32 mantissas), the sum
    is formed in float64 and rounded once to the accumulator type, so integer-valued inputs
    give exact results. Integer: products and sum are exact (int64); without ``.satfinite``
    the result wraps to 32 bits, with it the result is clamped to the int32 range.
    """
    w = a.shape[0]
    k = op.k
    a_mat = np.zeros((w, 16, k), dtype=np.int64 if op.integer else np.float64)
    b_mat = np.zeros((w, k, 8), dtype=a_mat.dtype)
    c_mat = np.zeros((w, 16, 8), dtype=a_mat.dtype)
    ar, ac = fragment(op, "a")
    a_mat[:, ar, ac] = _values(_unpack(a, op.a.bits), op.a)
    br, bc = fragment(op, "b")
    b_mat[:, br, bc] = _values(_unpack(b, op.b.bits), op.b)
    cr, cc = fragment(op, "c")
    c_mat[:, cr, cc] = _values(_unpack(c, op.c.bits), op.c)
    d_mat = np.matmul(a_mat, b_mat) + c_mat
    d = d_mat[:, cr, cc]
    if op.satfinite:
        d = np.clip(d, -(2**31), 2**31 - 1)
    return _pack(d, op.c)
