"""The shared-memory matrix descriptors of ``wgmma.mma_async`` (PTX ISA, "Asynchronous
Warpgroup Level Matrix Multiply-Accumulate": "Matrix Descriptor Format" and "Shared Memory
Matrix Layout"), derived from a view and checked against it.

A descriptor is 64 bits: the start address >> 4 in bits 0-13, the leading-dimension byte
offset (LBO) >> 4 in bits 16-29, the stride-dimension byte offset (SBO) >> 4 in bits 32-45,
the matrix base offset in bits 49-51 (0 here) and the swizzle mode in bits 62-63 (the ISA's
numbering: 0 none, 1 128-byte, 2 64-byte, 3 32-byte).

tirx takes K-major operands only: A as a (64, 16) view, B as an (N, 16) view, each row's 16
K elements (of a 16-bit type) 32 bytes of shared memory in two 16-byte chunks. The hardware
reads them as *core matrices* of 8 rows x 16 bytes. In the ISA's canonical K-major layouts
the byte offset of element (row, k) from the start address, before the swizzle, is::

    (row % 8) * W + (row // 8) * SBO + (k // 8) * L + (k % 8) * 2

with ``W`` = 16 and ``L`` = LBO without swizzle (each core matrix 128 contiguous bytes), and
``W`` = 32, 64 or 128 with ``L`` = 16 for the 32/64/128-byte swizzles (the two chunks side by
side in one swizzled row, LBO unused). The swizzle XORs the 16-byte chunk bits [4, 4+s) of the
byte address with bits [7, 7+s) (s = 1, 2, 3): a function of the address, repeating every
``8 * W`` bytes, so a swizzled tile must start its buffer on such a boundary.

:func:`derive` finds the mode from the view's layout (a ``ComposeLayout`` whose swizzle is the
hardware's on every byte of a period, or none), LBO and SBO from its offsets, and checks every
element of the view against the formula above; a view that no descriptor describes is a
:class:`ContractError` naming the first element that lies elsewhere.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.simplify_index import simplify_index
from ...isa.shared_rows import residue
from ...layout.swizzle import ComposeLayout

__all__ = ["Swizzle", "Descriptor", "derive", "encode", "FIELD_LIMIT"]

FIELD_LIMIT = 1 << 14  # the 14-bit address and offset fields (units of 16 bytes)
ROWS = 8  # rows of a core matrix
PHASE_FREE = 128  # bytes at the start of a swizzle period whose row-phase bits are 0
CHUNK = 16  # bytes of a core-matrix row


class Swizzle(enum.Enum):
    """A descriptor's swizzle mode: ``(field value, row bytes W)``."""

    NONE = (0, 16)
    B128 = (1, 128)
    B64 = (2, 64)
    B32 = (3, 32)

    @property
    def field(self) -> int:
        return self.value[0]

    @property
    def row_bytes(self) -> int:
        return self.value[1]

    @property
    def period(self) -> int:
        """Bytes after which the pattern repeats (and to which a swizzled tile is aligned)."""
        return ROWS * self.row_bytes if self is not Swizzle.NONE else CHUNK

    @property
    def bits(self) -> int:
        return {16: 0, 32: 1, 64: 2, 128: 3}[self.row_bytes]

    def apply(self, byte: int) -> int:
        """The hardware's swizzle of a byte address (chunk bits ^= row-phase bits)."""
        mask = ((1 << self.bits) - 1) << 4
        return byte ^ ((byte >> 3) & mask)

    @property
    def label(self) -> str:
        return "no swizzle" if self is Swizzle.NONE else f"{self.row_bytes}-byte swizzle"


@dataclass(frozen=True)
class Descriptor:
    """What one operand's descriptor holds: the start as a byte offset in ``buffer``
    (unswizzled; an expression), LBO and SBO in bytes, and the mode."""

    buffer: ir.Buffer
    start: ir.Expr | int
    lbo: int
    sbo: int
    swizzle: Swizzle


def encode(d: Descriptor) -> ir.Expr:
    """The uint64 descriptor value (the start address is the buffer's shared-window address
    plus ``d.start``, what ``SharedAddress`` evaluates to in both targets)."""
    address = ir.SharedAddress(d.buffer, d.start)
    start = ir.cast((address & 0x3FFFF) >> 4, ir.U64)
    fields = (d.lbo >> 4) << 16 | (d.sbo >> 4) << 32 | d.swizzle.field << 62
    return start | ir.Const(fields, ir.U64)


def _mode_of(layout, ebytes: int, where: str) -> Swizzle:
    """The hardware mode whose swizzle is the layout's on every byte of its period."""
    if not isinstance(layout, ComposeLayout) or layout.swizzle_len == 0:
        return Swizzle.NONE
    for mode in (Swizzle.B128, Swizzle.B64, Swizzle.B32):
        # equal on a whole period of both swizzles is equal everywhere
        own = ebytes << (layout.per_element + layout.swizzle_len + layout.atom_len)
        span = max(mode.period, own)
        if all(
            layout.swizzle(b // ebytes) * ebytes == mode.apply(b) for b in range(0, span, ebytes)
        ):
            return mode
    fixes = {2: "ComposeLayout(3, 3, 3, ...) for 128 bytes, (3, 2, 3) for 64, (3, 1, 3) for 32"}
    raise ContractError(
        f"{where}: the swizzle ComposeLayout({layout.per_element}, {layout.swizzle_len}, "
        f"{layout.atom_len}, ...) is none of the descriptor's (128-, 64- or 32-byte: XOR of "
        "the 16-byte chunk bits [4, 7) with the row bits [7, 10))",
        hint=fixes.get(ebytes, "use the 128-, 64- or 32-byte swizzle of 16-byte chunks"),
    )


def _canonical(mode: Swizzle, lbo: int, sbo: int, row: int, k: int, ebytes: int) -> int:
    lead = lbo if mode is Swizzle.NONE else CHUNK
    per_chunk = CHUNK // ebytes
    return (
        (row % ROWS) * mode.row_bytes
        + (row // ROWS) * sbo
        + (k // per_chunk) * lead
        + (k % per_chunk) * ebytes
    )


def _describe(mode: Swizzle) -> str:
    if mode is Swizzle.NONE:
        return (
            "without swizzle each core matrix (8 rows x 16 bytes) is 128 contiguous bytes; "
            "LBO is the step to the next core matrix along K, SBO to the next 8 rows"
        )
    return (
        f"with the {mode.row_bytes}-byte swizzle a row is {mode.row_bytes} bytes apart from the "
        f"next, its 16 K elements 32 contiguous bytes, and SBO is the step to the next 8 rows"
    )


def derive(view: ir.View, where: str) -> Descriptor:
    """The descriptor of a K-major (rows, 16) shared view; ContractError when none holds it."""
    eb = view.dtype.bytes
    buf = view.buffer
    layout = view.layout
    mode = _mode_of(layout, eb, where)
    tile = layout.tile_layout if isinstance(layout, ComposeLayout) else layout
    rows, cols = view.shape
    table = [m for (m,) in tile.table(("m",))]
    origin = table[0]
    offsets = [(m - origin) * eb for m in table]  # bytes from the view's origin, unswizzled

    def at(r, k):
        return offsets[r * cols + k]

    if rows > 1 and at(1, 0) == eb and cols > 1 and at(0, 1) != eb:
        raise ContractError(
            f"{where} is MN-major (consecutive rows are adjacent in memory); tirx's wgmma "
            "takes K-major operands only",
            hint="store the tile with each row's 16 K elements contiguous (32 bytes), e.g. A "
            "as (M, K) row-major and B as (N, K) row-major, and slice 16 columns per k step",
        )
    lbo = at(0, 8) if mode is Swizzle.NONE else CHUNK
    sbo = at(8, 0) if rows > ROWS else ROWS * mode.row_bytes
    for name, value in (("LBO", lbo), ("SBO", sbo)):
        if value % CHUNK or not 0 <= value >> 4 < FIELD_LIMIT:
            step = "along K between core matrices" if name == "LBO" else "between 8-row groups"
            raise ContractError(
                f"{where}: the step {step} is {value} bytes, which a descriptor's {name} "
                f"(a multiple of 16 bytes, 0 .. {16 * (FIELD_LIMIT - 1)}) cannot hold",
                hint=_describe(mode),
            )
    for r in range(rows):
        for k in range(cols):
            want = _canonical(mode, lbo, sbo, r, k, eb)
            if at(r, k) != want:
                raise ContractError(
                    f"{where}: element ({r}, {k}) lies {at(r, k)} bytes from the view's origin "
                    f"(before any swizzle), but a descriptor ({mode.label}, LBO {lbo}, SBO "
                    f"{sbo}) reads it {want} bytes from there",
                    hint=_describe(mode) + ": lay the tile out so (e.g. a row-major (rows, 64) "
                    "f16 tile under ComposeLayout(3, 3, 3, ...), sliced 16 columns at a time)",
                )
    start = simplify_index(ir.as_expr(view.elem_offset) + origin) * eb
    start = simplify_index(start)
    _check_start(where, buf, start, mode)
    return Descriptor(buf, start, lbo, sbo, mode)


def _check_start(where: str, buf: ir.Buffer, start, mode: Swizzle) -> None:
    """The start is 16-byte aligned (the field drops 4 bits), a swizzled buffer starts on a
    pattern boundary, and a swizzled view starts in the first row of a period (base offset 0)
    when that is known at compile time."""
    if buf.scope is not ir.Scope.SHARED:
        raise ContractError(
            f"{where} must be in shared memory (T.alloc_shared), got {buf.scope.value} buffer "
            f"{buf.name!r}",
            hint="wgmma's ss form reads A and B from shared memory through descriptors",
        )
    need = max(mode.period, CHUNK)
    if buf.align < need:
        raise ContractError(
            f"{where}: {buf.name!r} is allocated with align={buf.align}, but a descriptor with "
            f"{mode.label} needs its tile to start on a {need}-byte boundary",
            hint=f"allocate it with align={need}: T.alloc_shared(..., align={need})",
        )
    rem = residue(start, CHUNK)
    if rem is None or rem:
        at = "an offset whose alignment cannot be proven" if rem is None else f"{rem} bytes past"
        raise ContractError(
            f"{where} starts at {at} a multiple of 16 bytes; a descriptor's start address "
            "drops its 4 low bits",
            hint="start the view at a whole core-matrix row: a row index times the row stride "
            "and a multiple of 8 elements along K",
        )
    if mode is not Swizzle.NONE:
        phase = residue(start, mode.period)
        if phase is not None and phase >= PHASE_FREE:
            raise ContractError(
                f"{where} starts {phase} bytes into a {mode.period}-byte swizzle period, past "
                f"its first {PHASE_FREE} bytes; tirx's descriptors have base offset 0",
                hint="start the view on a multiple of 8 rows of the swizzled tile",
            )
