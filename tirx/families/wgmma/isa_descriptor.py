"""The shared-memory matrix descriptors of ``wgmma.mma_async`` (PTX ISA, "Asynchronous
Warpgroup Level Matrix Multiply-Accumulate": "Matrix Descriptor Format", "Shared Memory
Matrix Layout" and "Strides"), derived from a view and checked against it.

A descriptor is 64 bits: the start address >> 4 in bits 0-13, the leading-dimension byte
offset (LBO) >> 4 in bits 16-29, the stride-dimension byte offset (SBO) >> 4 in bits 32-45,
the matrix base offset in bits 49-51 and the swizzle mode in bits 62-63 (the ISA's numbering:
0 none, 1 128-byte, 2 64-byte, 3 32-byte).

An operand is A as a (64, K) view or B as an (N, K) view (B given N-major), K being 32 bytes
of the element type (16 f16/bf16, 32 fp8/int8, 8 tf32). The hardware reads 16-byte chunks.

* **K-major** (``imm-trans`` 0, every type): a row's K elements are contiguous, its 32 bytes
  two chunks. Byte offset of element (row, k) from the start, before the swizzle::

      (row % 8) * W + (row // 8) * SBO + (kb // 16) * L + kb % 16        (kb = k * bytes)

  with W = 16 and L = LBO without swizzle (each core matrix of 8 rows x 16 bytes is 128
  contiguous bytes), and W = 32, 64 or 128 with L = 16 for a W-byte swizzle (LBO unused).
* **MN-major** (``imm-trans`` 1, 16-bit types only): 8 consecutive rows (M or N) of one K
  are a chunk. Byte offset of element (mn, k)::

      no swizzle:  (mn // 8) * SBO + (k % 8) * 16 + (k // 8) * LBO + (mn % 8) * 2
      W-byte:      (mn // (8 c)) * LBO + ((mn // 8) % c) * 16 + (k % 8) * W
                   + (k // 8) * SBO + (mn % 8) * 2                      (c = W / 16)

  i.e. without swizzle a core matrix is 8 K x 16 bytes of MN, LBO steps 8 K and SBO 8 MN;
  with a swizzle an atom is 8 K-rows of W bytes (8 c MN elements), SBO steps 8 K and LBO
  steps the next atom along MN (the ISA's "Strides" table; CUTLASS's GMMA MN-major canonical
  layouts say the same).

The swizzle XORs the 16-byte chunk bits [4, 4+s) of the byte address with bits [7, 7+s)
(s = 1, 2, 3): a function of the address, repeating every ``8 * W`` bytes. The base offset
(bits 49-51) is "0 when the repeating pattern starts on a 1024/512/256-byte boundary" and
otherwise ``(pattern start addr >> 7) & 7``: it concerns where the *pattern* starts, not the
matrix. tirx requires a swizzled tile's buffer to be aligned to the period, so its pattern
always starts on a boundary and the base offset is 0, wherever in the tile the view starts
(a view may start at any row, e.g. row 3 of an atom: the row phase comes from the address).

:func:`derive` finds the mode from the view's layout (a ``ComposeLayout`` whose swizzle is the
hardware's on every byte of a period, or none), the major-ness, LBO and SBO from its offsets,
and checks every element of the view against the formulas above; a view that no descriptor
describes is a :class:`ContractError` naming the first element that lies elsewhere.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.simplify_index import simplify_index
from ...isa.operands import passed
from ...isa.shared_rows import residue
from ...layout.swizzle import ComposeLayout

__all__ = ["Swizzle", "Descriptor", "derive", "encode", "check_align", "mode_of", "FIELD_LIMIT"]

FIELD_LIMIT = 1 << 14  # the 14-bit address and offset fields (units of 16 bytes)
ROWS = 8  # rows of a core matrix
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
    (unswizzled; an expression), LBO and SBO in bytes, the mode, and whether the operand is
    MN-major (its ``imm-trans`` immediate)."""

    buffer: ir.Buffer
    start: ir.Expr | int
    lbo: int
    sbo: int
    swizzle: Swizzle
    mn_major: bool = False


def encode(d: Descriptor) -> ir.Expr:
    """The uint64 descriptor value (the start address is the buffer's shared-window address
    plus ``d.start``, what ``SharedAddress`` evaluates to in both targets; base offset 0)."""
    address = ir.SharedAddress(d.buffer, d.start)
    start = ir.cast((address & 0x3FFFF) >> 4, ir.U64)
    fields = (d.lbo >> 4) << 16 | (d.sbo >> 4) << 32 | d.swizzle.field << 62
    return start | ir.Const(fields, ir.U64)


def mode_of(layout, ebytes: int, where: str) -> Swizzle:
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
    e = {1: 4, 2: 3, 4: 2}.get(ebytes, 3)  # log2 of the elements of a 16-byte chunk
    raise ContractError(
        f"{where}: the swizzle ComposeLayout({layout.per_element}, {layout.swizzle_len}, "
        f"{layout.atom_len}, ...) is none of the descriptor's (128-, 64- or 32-byte: XOR of "
        "the 16-byte chunk bits [4, 7) with the row bits [7, 10))",
        hint=f"for {8 * ebytes}-bit elements: ComposeLayout({e}, 3, 3, ...) for 128 bytes, "
        f"({e}, 2, 3, ...) for 64, ({e}, 1, 3, ...) for 32",
    )


# Where a descriptor reads element (row or MN index, K index): each is a term of the first
# index plus a term of the second, both 0 at 0 (_geometry compares whole tiles on that).


def _k_major(mode: Swizzle, lbo: int, sbo: int, row: int, k: int, ebytes: int) -> int:
    lead = lbo if mode is Swizzle.NONE else CHUNK
    kb = k * ebytes
    return (row % ROWS) * mode.row_bytes + (row // ROWS) * sbo + (kb // CHUNK) * lead + kb % CHUNK


def _mn_major(mode: Swizzle, lbo: int, sbo: int, mn: int, k: int, ebytes: int) -> int:
    inner = (mn % ROWS) * ebytes
    if mode is Swizzle.NONE:
        return (mn // ROWS) * sbo + (k % ROWS) * CHUNK + (k // ROWS) * lbo + inner
    chunks = mode.row_bytes // CHUNK
    atom = (mn // (ROWS * chunks)) * lbo + ((mn // ROWS) % chunks) * CHUNK
    return atom + (k % ROWS) * mode.row_bytes + (k // ROWS) * sbo + inner


def _describe(mode: Swizzle, mn_major: bool) -> str:
    if mn_major:
        if mode is Swizzle.NONE:
            return (
                "an MN-major operand without swizzle is made of core matrices of 8 K x 8 "
                "rows (128 contiguous bytes, the 8 rows of one K adjacent); SBO steps 8 rows, "
                "LBO 8 K"
            )
        return (
            f"an MN-major operand with the {mode.row_bytes}-byte swizzle holds "
            f"{mode.row_bytes // 2} rows of one K in a {mode.row_bytes}-byte line, K lines "
            f"{mode.row_bytes} bytes apart; SBO steps 8 K, LBO the next {mode.row_bytes // 2} "
            "rows"
        )
    if mode is Swizzle.NONE:
        return (
            "without swizzle each core matrix (8 rows x 16 bytes) is 128 contiguous bytes; "
            "LBO is the step to the next core matrix along K, SBO to the next 8 rows"
        )
    return (
        f"with the {mode.row_bytes}-byte swizzle a row is {mode.row_bytes} bytes apart from the "
        f"next, its K elements 32 contiguous bytes, and SBO is the step to the next 8 rows"
    )


def derive(view: ir.View, where: str, trans_ok: bool = True) -> Descriptor:
    """The descriptor of a (rows, K) shared view, K-major or (when ``trans_ok``, the 16-bit
    types) MN-major; ContractError when none holds it."""
    buf = view.buffer
    if buf.scope is not ir.Scope.SHARED:
        raise ContractError(
            f"{where} must be in shared memory (T.alloc_shared), got {buf.scope.value} buffer "
            f"{buf.name!r}",
            hint="wgmma reads B (and A, unless A is given as registers) from shared memory "
            "through descriptors: stage the tile in a T.alloc_shared buffer",
        )
    eb = view.dtype.bytes
    rows, cols = view.shape
    key = ("descriptor", view.layout, eb, rows, cols, trans_ok)
    mode, origin, lbo, sbo, mn_major = passed(
        key, lambda: _geometry(view.layout, eb, rows, cols, trans_ok, where)
    )
    start = simplify_index(simplify_index(ir.as_expr(view.elem_offset) + origin) * eb)
    _check_start(where, buf, start, mode)
    return Descriptor(buf, start, lbo, sbo, mode, mn_major)


def _geometry(layout, eb: int, rows: int, cols: int, trans_ok: bool, where: str):
    """What the layout alone decides of a descriptor: ``(mode, origin, LBO, SBO,
    mn_major)``, every element checked against it (``origin``: the first element's offset)."""
    mode = mode_of(layout, eb, where)
    tile = layout.tile_layout if isinstance(layout, ComposeLayout) else layout
    column = tile.column("m")
    origin = column[0]
    offsets = [(m - origin) * eb for m in column]  # bytes from the view's origin, unswizzled

    def at(r, k):
        return offsets[r * cols + k]

    mn_major = at(1, 0) == eb and at(0, 1) != eb
    if mn_major and not trans_ok:
        raise ContractError(
            f"{where} is MN-major (consecutive rows are adjacent in memory); this type's wgmma "
            "takes K-major operands only (imm-trans exists for .f16/.bf16 alone)",
            hint="store the tile with each row's K elements contiguous (32 bytes), e.g. A as "
            "(M, K) row-major and B as (N, K) row-major, and slice one K step per instruction",
        )
    if mn_major:
        chunks = mode.row_bytes // CHUNK
        if mode is Swizzle.NONE:
            lbo, sbo = at(0, ROWS), at(ROWS, 0) if rows > ROWS else ROWS * CHUNK
        else:
            lbo = at(ROWS * chunks, 0) if rows > ROWS * chunks else CHUNK
            sbo = at(0, ROWS)
        place = _mn_major
    else:
        lbo = at(0, CHUNK // eb) if mode is Swizzle.NONE else CHUNK
        sbo = at(ROWS, 0) if rows > ROWS else ROWS * mode.row_bytes
        place = _k_major
    if not mn_major:
        steps = {"LBO": "along K between core matrices", "SBO": "between 8-row groups"}
    elif mode is Swizzle.NONE:
        steps = {"LBO": "between 8-K groups", "SBO": "between 8-row groups"}
    else:
        steps = {"LBO": f"between {ROWS * chunks}-row atoms", "SBO": "between 8-K groups"}
    for name, value in (("LBO", lbo), ("SBO", sbo)):
        if value % CHUNK or not 0 <= value >> 4 < FIELD_LIMIT:
            raise ContractError(
                f"{where}: the step {steps[name]} is {value} bytes, which a descriptor's {name} "
                f"(a multiple of 16 bytes, 0 .. {16 * (FIELD_LIMIT - 1)}) cannot hold",
                hint=_describe(mode, mn_major),
            )
    # place(r, k) is a term of r plus a term of k (see _k_major, _mn_major), so every element
    # is compared in one pass; the loop below finds the first one out of place
    by_row = [place(mode, lbo, sbo, r, 0, eb) for r in range(rows)]
    by_col = [place(mode, lbo, sbo, 0, k, eb) for k in range(cols)]
    if offsets == [a + b for a in by_row for b in by_col]:
        return mode, origin, lbo, sbo, mn_major
    for r in range(rows):
        for k in range(cols):
            want = place(mode, lbo, sbo, r, k, eb)
            if at(r, k) != want:
                major = "an MN-major" if mn_major else "a K-major"
                raise ContractError(
                    f"{where}: element ({r}, {k}) lies {at(r, k)} bytes from the view's origin "
                    f"(before any swizzle), but {major} descriptor ({mode.label}, LBO {lbo}, "
                    f"SBO {sbo}) reads it {want} bytes from there",
                    hint=_describe(mode, mn_major) + ": lay the tile out so (e.g. a row-major "
                    "(rows, 64) f16 tile under ComposeLayout(3, 3, 3, ...), sliced 16 columns "
                    "at a time)",
                )
    return mode, origin, lbo, sbo, mn_major


def check_align(where: str, buf: ir.Buffer, mode: Swizzle, span=None) -> None:
    """A swizzled buffer starts on a pattern boundary (so the descriptor's base offset is 0):
    its ``align=`` is at least the period (1024, 512 or 256 bytes; 16 without swizzle)."""
    need = max(mode.period, CHUNK)
    if buf.align < need:
        raise ContractError(
            f"{where}: {buf.name!r} is allocated with align={buf.align}, but a descriptor with "
            f"{mode.label} needs its tile to start on a {need}-byte boundary",
            span,
            hint=f"allocate it with align={need}: T.alloc_shared(..., align={need})",
        )


def _check_start(where: str, buf: ir.Buffer, start, mode: Swizzle) -> None:
    """The start is 16-byte aligned (the field drops 4 bits) and a swizzled buffer starts on
    a pattern boundary (:func:`check_align`)."""
    check_align(where, buf, mode)
    rem = residue(start, CHUNK)
    if rem is None or rem:
        at = "an offset whose alignment cannot be proven" if rem is None else f"{rem} bytes past"
        raise ContractError(
            f"{where} starts at {at} a multiple of 16 bytes; a descriptor's start address "
            "drops its 4 low bits",
            hint="start the view at a whole core-matrix row: a row index times the row stride "
            "and a whole 16-byte chunk along K",
        )
