"""Where ``wgmma.mma_async`` finds its shared operands, written from the PTX ISA (9.7.15.5.1.2,
"Shared Memory Matrix Layout", "Strides", "Matrix Descriptor Format") independently of
tirx's compiler tables.

* **Descriptor**: a 64-bit value; bits 0-13 the start address, 16-29 the leading dimension
  byte offset (LBO), 32-45 the stride dimension byte offset (SBO), each encoded as
  ``(x & 0x3FFFF) >> 4``; bits 49-51 the matrix base offset (valid for the swizzled modes);
  bits 62-63 the swizzle mode (0 none, 1 128-byte, 2 64-byte, 3 32-byte).
* **Core matrices and atoms**: operands are made of 16-byte chunks. A swizzle of W bytes
  (128, 64, 32) makes atoms of 8 lines of W bytes whose 16-byte chunks are permuted by an XOR
  of the address, as the ISA's swizzle figures draw them (line ``r`` of the 128-byte atom
  takes chunk ``c ^ r``, of the 64-byte atom ``c ^ (r >> 1)``, of the 32-byte atom
  ``c ^ (r >> 2)``): on address bits, 128B bits [4:6] ^= bits [7:9], 64B bits [4:5] ^= [7:8],
  32B bit 4 ^= bit 7. The pattern repeats at 1024-, 512- and 256-byte boundaries. "The base
  offset is 0 when the repeating pattern starts" on such a boundary, "otherwise ... (pattern
  start addr >> 0x7) & 0x7": the simulator reads it as "the XOR's row phase counts from the
  pattern's start", the phase being ``(address >> 7) - base_offset`` in the bits above (with
  base offset 0, the address's own bits, wherever the matrix starts inside the pattern).
* **K-major** (imm-trans 0; every type): each row (M of A, N of B) holds the instruction's K
  elements in 32 bytes, two chunks. Without swizzle a core matrix is 8 rows of one chunk, 128
  contiguous bytes; LBO is the step between the two chunks of a row (along K), SBO between
  8-row groups. With a W-byte swizzle row ``r`` of an atom is line ``r`` (``r * W``), its two
  chunks side by side, SBO the step between 8-row atoms and LBO unused ("assumed 1").
* **MN-major** (imm-trans 1; .f16/.bf16 only): a chunk holds 8 consecutive rows of one K.
  Without swizzle a core matrix is 8 K of one chunk (128 contiguous bytes); LBO is the step
  between 8-K groups, SBO between 8-row groups. With a W-byte swizzle line ``k`` of an atom
  holds ``W / 2`` consecutive rows of one K (its ``W / 16`` chunks side by side); SBO is the
  step between 8-K groups, LBO the step between atoms along M/N ("the stride from the first
  (swizzle-byte-size/16) rows to the next (swizzle-byte-size/16) rows", in 16-byte units).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Swizzle", "Descriptor", "decode_descriptor", "swizzle_address", "operand_chunks",
    "operand_bytes", "ROW_BYTES",
]  # fmt: skip

ROW_BYTES = 32  # K bytes of one row of A or B per instruction, every type


class Swizzle(enum.Enum):
    """The descriptor's swizzle mode (bits 62-63) and the atom line width it implies."""

    NONE = 0
    B128 = 1
    B64 = 2
    B32 = 3

    @property
    def row_bytes(self) -> int:
        """The byte pitch of an atom's lines (16 without swizzle: a core matrix row)."""
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


def operand_chunks(desc: Descriptor, rows: int, mn_major: bool = False) -> np.ndarray:
    """int64 shared addresses of the operand's 16-byte chunks: K-major ``[rows, 2]`` (chunk
    ``c`` of row ``r``: K bytes ``16c .. 16c+15``), MN-major ``[rows // 8, 16]`` (chunk
    ``(q, k)``: rows ``8q .. 8q+7`` of K element ``k``, 2 bytes each)."""
    w = desc.swizzle.row_bytes
    if mn_major:
        q = np.arange(rows // 8, dtype=np.int64)[:, None]
        k = np.arange(16, dtype=np.int64)[None, :]
        if desc.swizzle is Swizzle.NONE:
            return desc.start + q * desc.sbo + (k & 7) * 16 + (k >> 3) * desc.lbo
        per = w // 16  # chunks of one atom line
        linear = desc.start + (q // per) * desc.lbo + (q % per) * 16 + (k & 7) * w
        linear = linear + (k >> 3) * desc.sbo
        return swizzle_address(linear, desc.swizzle, desc.base_offset)
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(2, dtype=np.int64)[None, :]
    group = desc.start + (r >> 3) * desc.sbo
    if desc.swizzle is Swizzle.NONE:
        return group + c * desc.lbo + (r & 7) * 16
    linear = group + (r & 7) * w + c * 16
    return swizzle_address(linear, desc.swizzle, desc.base_offset)


def operand_bytes(data: np.ndarray, chunks: np.ndarray, mn_major: bool) -> np.ndarray:
    """uint8 ``[rows, 32]``: each row's K bytes in K order, read from the shared bytes
    ``data`` at ``chunks`` (from :func:`operand_chunks`)."""
    got = data[chunks[..., None] + np.arange(16)]  # [..., 16 bytes]
    if not mn_major:
        return got.reshape(chunks.shape[0], ROW_BYTES)
    groups = chunks.shape[0]
    by_row = got.reshape(groups, 16, 8, 2).transpose(0, 2, 1, 3)  # [q, row in q, k, byte]
    return np.ascontiguousarray(by_row).reshape(groups * 8, ROW_BYTES)
