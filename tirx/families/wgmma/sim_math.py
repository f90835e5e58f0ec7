"""``wgmma`` (Hopper's warpgroup matrix multiply-accumulate), written from the PTX ISA.

Sources (PTX ISA 9.7.15, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
Instructions"), read independently of tirx's compiler tables:

* "Matrix Descriptor Format": a 64-bit value; bits 0-13 the start address, 16-29 the leading
  dimension byte offset (LBO), 32-45 the stride dimension byte offset (SBO), each encoded as
  ``(x & 0x3FFFF) >> 4``; bits 49-51 the matrix base offset (valid for the swizzled modes);
  bits 62-63 the swizzle mode (0 none, 1 128-byte, 2 64-byte, 3 32-byte).
* "Shared Memory Matrix Layout" and "Strides": K-major operands are made of core matrices of
  8 rows x 16 bytes. Without swizzle a core matrix is 128 contiguous bytes, LBO is the step
  between core matrices along K and SBO the step between 8-row groups along M/N. With a
  swizzle of W bytes (128, 64 or 32) the swizzle atom is 8 rows of W bytes (row r at
  ``r * W``), SBO the step between 8-row atoms, LBO unused ("assumed 1") since one k16 step
  of 16-bit elements (32 bytes) never leaves a row; the 16-byte chunks of each row are then
  permuted by an XOR of the byte address, as the ISA's swizzle figures draw it (rows of the
  128-byte atom take chunk ``c ^ r``, of the 64-byte atom ``c ^ (r >> 1)``, of the 32-byte
  atom ``c ^ (r >> 2)``), i.e. on address bits: 128B bits [4:6] ^= bits [7:9]; 64B bits
  [4:5] ^= bits [7:8]; 32B bit 4 ^= bit 7 (CUTLASS names the same maps Swizzle<3,4,3>,
  <2,4,3> and <1,4,3>). The pattern repeats at 1024-, 512- and 256-byte boundaries; a tile
  whose pattern starts elsewhere gives the "base offset" ``(pattern start >> 7) & 7``, which
  the simulator reads as "the XOR's row phase counts from there": the phase is
  ``((address >> 7) - base_offset)`` in the bits above (our reading; not measured on the GPU).
  MN-major operands (``imm-trans`` = 1) are not modelled: a SimulationError says so.
* "Register Fragments" for m64nNk16 with .f32 accumulators: thread ``t = 32 w + lane`` of
  the warpgroup holds ``D[16 w + lane / 4 + 8 h][8 j + 2 (lane % 4) + e]`` in ``d[4 j + 2 h + e]``.
* The operation: ``D = scale_a * A * scale_b * B + (scale_d ? D : 0)`` with A 64x16 and B
  16xN (stored K-major as N rows of K), computed as :mod:`tirx.families.mma.sim_math` computes mma.sync's
  f32-accumulated products: exact products and sum in float64, rounded once to float32, so
  integer-valued data give exact results.

This module holds the readings above (forms, descriptors, swizzles, fragments, the product);
:mod:`tirx.families.wgmma.sim_async` the asynchronous model (groups, registers and shared bytes
in flight, fences) and :mod:`tirx.families.wgmma.sim` the statements.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass

import numpy as np

__all__ = [
    "MmaAsync", "Swizzle", "Descriptor", "parse_mma_async", "decode_descriptor",
    "swizzle_address", "operand_chunks", "accumulator_map", "product", "ROWS", "WARPGROUP",
]  # fmt: skip

_MMA_RE = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.(f16|bf16)\.(f16|bf16)")
WARPGROUP = 128  # threads: four consecutive warps, the first a multiple of 4
ROWS = 64  # M of every wgmma shape


@dataclass(frozen=True)
class MmaAsync:
    """One wgmma.mma_async form: D (64xN, f32) = A (64x16) * B (16xN) (+ D)."""

    n: int
    element: str  # "f16" or "bf16", A's and B's

    @property
    def registers(self) -> int:
        """Accumulator registers per thread."""
        return self.n // 2


def parse_mma_async(text: str) -> MmaAsync | None:
    """The form ``text`` names, or None when it is not one the simulator implements."""
    m = _MMA_RE.fullmatch(text)
    if m is None or m.group(2) != m.group(3):
        return None
    n = int(m.group(1))
    if not (8 <= n <= 256 and n % 8 == 0):
        return None
    return MmaAsync(n, m.group(2))


class Swizzle(enum.Enum):
    """The descriptor's swizzle mode (bits 62-63) and the atom row width it implies."""

    NONE = 0
    B128 = 1
    B64 = 2
    B32 = 3

    @property
    def row_bytes(self) -> int:
        """The byte pitch of an atom's rows (16 without swizzle: a core matrix row)."""
        return {0: 16, 1: 128, 2: 64, 3: 32}[self.value]

    @property
    def phase_mask(self) -> int:
        """The XOR's width in 16-byte chunks, minus one (0 without swizzle)."""
        return {0: 0, 1: 7, 2: 3, 3: 1}[self.value]


@dataclass(frozen=True)
class Descriptor:
    """A decoded matrix descriptor; addresses and offsets in bytes."""

    start: int
    lbo: int
    sbo: int
    base_offset: int
    swizzle: Swizzle


def decode_descriptor(bits: int) -> Descriptor:
    """The fields of the 64-bit descriptor ``bits`` ("Matrix Descriptor Format")."""
    bits = int(bits)
    return Descriptor(
        start=(bits & 0x3FFF) << 4,
        lbo=((bits >> 16) & 0x3FFF) << 4,
        sbo=((bits >> 32) & 0x3FFF) << 4,
        base_offset=(bits >> 49) & 0x7,
        swizzle=Swizzle((bits >> 62) & 0x3),
    )


def swizzle_address(addr: np.ndarray, swizzle: Swizzle, base_offset: int = 0) -> np.ndarray:
    """The byte address the swizzle turns ``addr`` into: the 16-byte chunk bits [4:4+b) XOR
    the row phase ``(addr >> 7) - base_offset`` (b = 3, 2, 1 for 128, 64, 32 bytes)."""
    mask = swizzle.phase_mask
    if not mask:
        return addr
    phase = ((addr >> 7) - base_offset) & mask
    return addr ^ (phase << 4)


def operand_chunks(desc: Descriptor, rows: int) -> np.ndarray:
    """int64 ``[rows, 2]``: the shared address of the 16-byte chunk holding K elements
    ``8c .. 8c+7`` of row ``r`` (M for A, N for B) of a K-major 16-bit operand."""
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(2, dtype=np.int64)[None, :]
    group = desc.start + (r >> 3) * desc.sbo
    if desc.swizzle is Swizzle.NONE:
        return group + c * desc.lbo + (r & 7) * 16
    linear = group + (r & 7) * desc.swizzle.row_bytes + c * 16
    return swizzle_address(linear, desc.swizzle, desc.base_offset)


@functools.lru_cache(maxsize=64)
def accumulator_map(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), int ``[128, n/2]``: the element of D each thread's register holds."""
    t = np.arange(WARPGROUP)[:, None]
    i = np.arange(n // 2)[None, :]
    w, lane = t >> 5, t & 31
    j, h, e = i >> 2, (i >> 1) & 1, i & 1
    rows = 16 * w + (lane >> 2) + 8 * h
    cols = 8 * j + 2 * (lane & 3) + e
    rows = np.ascontiguousarray(np.broadcast_to(rows, cols.shape))
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


def _values(bits: np.ndarray, element: str) -> np.ndarray:
    """uint16 element bits as exact float64 values."""
    if element == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def product(
    a_bits: np.ndarray, b_bits: np.ndarray, element: str, scale_a: int, scale_b: int, d=None
) -> np.ndarray:
    """float32 ``[64, N]``: ``scale_a * A @ (scale_b * B).T (+ d)`` for uint16 element bits
    ``a_bits`` ``[64, 16]`` and ``b_bits`` ``[N, 16]`` (B given N-major rows of K) and the old
    accumulator ``d`` (float32 ``[64, N]``, or None for scale_d = 0). Products and sum exact in
    float64, one rounding to float32, as tirx.families.mma.sim_math rounds mma.sync."""
    a = _values(a_bits, element) * scale_a
    b = _values(b_bits, element) * scale_b
    acc = a @ b.T
    if d is not None:
        acc = acc + d.astype(np.float64)
    return acc.astype(np.float32)
