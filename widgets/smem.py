"""A wgmma operand in shared memory: its tile as *core matrices* under each swizzle mode, and the
fields of the matrix descriptor that name it (PTX ISA, "Asynchronous Warpgroup Level Matrix
Shared Memory Layout" and "Matrix Descriptor Format").

A K-major operand of 16-bit elements is read as core matrices of 8 rows x 16 bytes (8 x 8
elements); its K = 16 columns are two of them side by side. The descriptor gives where they
are: the *start address* of the first, the *leading dimension byte offset* (LBO) from a core
matrix to the next along K, the *stride dimension byte offset* (SBO) from one group of 8
rows to the next, and the swizzle mode. Without swizzle a core matrix is 128 contiguous
bytes. With the 32-, 64- or 128-byte swizzle, the tile is stored in rows of that many bytes
and the 16-byte chunks of each row are permuted by an XOR with the row's place in its group
of 8 (so the 8 rows of a core matrix fall into 8 different groups of banks); the chunks of
a K step sit side by side in a row (LBO is not used) and the operand's slice ``k`` starts
``32·k`` bytes into the row.

Two panels, linked (a click on a chunk outlines it in both): the operand's rows x K chunks,
each cell the chunk's byte offset in the tile, a block per core matrix, the block names
saying how far each is from the start (``+SBO``, ``+LBO``); and the shared memory in lines
of 128 bytes (the 32 banks), each 16-byte slot labelled with the chunk that lands there.
The layouts are tirx's own (``ComposeLayout(3, s, 3, TileLayout(S[rows, W]))``, the
canonical unswizzled one); the notes give each descriptor field and the 64-bit value.
"""

from __future__ import annotations

from dataclasses import dataclass

from tirx.errors import TirxError

from .fragment import Element, Fragment
from .fragview import FragmentView
from .panels import Panels
from .tma import hue

__all__ = ["SWIZZLES", "Descriptor", "shared_operand", "chunk_addresses"]

# mode -> (bytes per stored row, the ComposeLayout's swizzle length, the descriptor's value)
SWIZZLES = {"none": (0, 0, 0), "32B": (32, 1, 3), "64B": (64, 2, 2), "128B": (128, 3, 1)}
CHUNK = 16  # bytes of one core-matrix row
LINE = 128  # bytes of one line of shared memory: the 32 banks
MAX_ROWS = 64  # rows of the operand drawn (the pattern repeats every 8 rows, SBO apart)


@dataclass(frozen=True)
class Descriptor:
    """The fields of a wgmma matrix descriptor, in bytes (``lbo`` None: not used)."""

    start: int
    lbo: int | None
    sbo: int
    swizzle: str

    @property
    def value(self) -> int:
        """The 64-bit descriptor: start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in
        32-45, base offset 0 in 49-51, the swizzle mode in 62-63."""
        lbo = 1 if self.lbo is None else self.lbo >> 4  # an unused LBO is written as 1
        return (
            ((self.start >> 4) & 0x3FFF)
            | ((lbo & 0x3FFF) << 16)
            | (((self.sbo >> 4) & 0x3FFF) << 32)
            | (SWIZZLES[self.swizzle][2] << 62)
        )

    def lines(self) -> list[str]:
        lbo = (
            "not used (written as 1)"
            if self.lbo is None
            else f"{self.lbo} B (field {self.lbo >> 4})"
        )
        return [
            f"start address = tile + {self.start} B (bits 0-13: address >> 4 = {self.start >> 4})",
            f"LBO = {lbo}; SBO = {self.sbo} B (bits 32-45: {self.sbo >> 4})",
            f"swizzle = {self.swizzle} (bits 62-63: {SWIZZLES[self.swizzle][2]}); "
            f"descriptor = 0x{self.value:016x} for a tile at address 0",
        ]


def _tile(rows: int, swizzle: str, element_bits: int):
    """The whole shared tile the operand is a slice of: (layout, shape), in elements."""
    from tirx.layout import ComposeLayout, S, TileLayout

    per_chunk = CHUNK * 8 // element_bits
    width, length, _ = SWIZZLES[swizzle]
    if not width:  # core matrices of 128 contiguous bytes: K chunks LBO = 128 B apart
        return TileLayout(S[(rows // 8, 8, 2, per_chunk) : (16 * per_chunk, per_chunk, 8 * per_chunk, 1)]), (rows, 2 * per_chunk)  # fmt: skip
    per_row = width * 8 // element_bits
    log = per_chunk.bit_length() - 1
    return ComposeLayout(log, length, 3, TileLayout(S[rows, per_row])), (rows, per_row)


def chunk_addresses(rows: int, swizzle: str, k: int = 0, element_bits: int = 16):
    """For each (row, K chunk) of the operand's slice ``k``: (byte address in the tile before
    the swizzle, after it), read from tirx's layout of the tile. Returns (addresses,
    Descriptor)."""
    if swizzle not in SWIZZLES:
        raise TirxError(f"unknown swizzle {swizzle!r}", hint="none, 32B, 64B or 128B")
    layout, shape = _tile(rows, swizzle, element_bits)
    per_chunk = CHUNK * 8 // element_bits
    slices = shape[1] // (2 * per_chunk)
    if not 0 <= k < slices:
        raise TirxError(
            f"k={k}: a {swizzle} tile row holds {slices} K slice(s) of 32 bytes",
            hint=f"k is 0..{slices - 1}",
        )
    tile = getattr(layout, "tile_layout", layout)
    out = {}
    for r in range(rows):
        for c in range(2):
            col = (2 * k + c) * per_chunk
            plain = tile.apply(r, col, shape=shape)["m"] * element_bits // 8
            out[(r, c)] = plain, layout.apply(r, col, shape=shape)["m"] * element_bits // 8
    start = out[(0, 0)][0]
    lbo = None if SWIZZLES[swizzle][0] else out[(0, 1)][0] - start
    sbo = out[(8, 0)][0] - start if rows > 8 else 8 * (SWIZZLES[swizzle][0] or CHUNK)
    return out, Descriptor(start, lbo, sbo, swizzle)


def shared_operand(contract, operand: str, *, swizzle: str = "128B", k: int = 0) -> Panels:
    """The picture of ``operand`` (a descriptor operand: wgmma's A or B) in shared memory."""
    spec = contract.operand(operand)
    rows_total = spec.atom[0]
    rows = min(rows_total, MAX_ROWS)
    element_bits = 16  # the m64nNk16 forms multiply 16-bit elements
    addresses, desc = chunk_addresses(rows, swizzle, k, element_bits)
    name = f"{contract.text} · {operand}"
    # each chunk's core matrix, as a colour key: eight hues, then lighter shades
    cm = {key: hue((key[0] // 8) * 2 + key[1]) for key in addresses}
    width = SWIZZLES[swizzle][0]

    def cm_name(key):
        return f"core matrix ({key[0] // 8}, {key[1]})"

    logical = []
    for r in range(rows):
        for c in range(2):
            plain, at = addresses[(r, c)]
            info = (
                f"row {r}, K chunk {c} (elements {8 * c}..{8 * c + 7}): {cm_name((r, c))}, "
                f"byte {at} of the tile (bank {(at // 4) % 32}..{(at // 4) % 32 + 3})"
                + (f"; {plain} before the swizzle" if plain != at else "")
            )
            logical.append(Element((r, c), cm[(r, c)], None, 0, ((cm[(r, c)], None, 0),),
                                   text=f"+{at}", info=info))  # fmt: skip
    down = tuple("start" if i == 0 else f"+{i}·SBO" if i > 1 else "+SBO" for i in range(rows // 8))
    across = ("+0", "+LBO") if desc.lbo is not None else ("+0", "+16 (row)")
    left = Fragment(
        f"{name}: {rows} rows x K as core matrices", rows, 2, tuple(logical), block=(8, 1),
        axes=("row (M)" if operand == "A" else "row (N)", "K chunk (16 bytes)"),
        block_labels=(down, across), element_bits=element_bits, holder="core matrix",
        caption="cell = a 16-byte chunk of a row (8 elements), its byte offset in the tile; "
        "block = a core matrix (8 rows x 16 bytes); colour = core matrix",
    )  # fmt: skip
    by_slot = {at: key for key, (_, at) in addresses.items()}
    size = max(at for _, at in addresses.values()) + CHUNK
    lines = -(-size // LINE)
    physical = []
    for line in range(lines):
        for slot in range(LINE // CHUNK):
            at = line * LINE + slot * CHUNK
            key = by_slot.get(at)
            if key is None:
                physical.append(Element((-1, line, slot), text="·",
                                        info=f"bytes {at}..{at + 15}: another K slice"))  # fmt: skip
                continue
            physical.append(Element(key, cm[key], None, 0, ((cm[key], None, 0),),
                                    text=f"r{key[0]}·k{key[1]}",
                                    info=f"bytes {at}..{at + 15} (banks {(at // 4) % 32}..{(at // 4) % 32 + 3}): "
                                    f"row {key[0]}, K chunk {key[1]}, {cm_name(key)}"))  # fmt: skip
    right = Fragment(
        f"shared memory: {lines} lines of 128 bytes ({swizzle} swizzle)", lines, LINE // CHUNK,
        tuple(physical), axes=("line (128 bytes)", "16-byte slot (4 banks each)"),
        element_bits=element_bits, holder="core matrix",
        caption="cell = the operand chunk (row·K chunk) stored in this 16-byte slot; "
        "colour = core matrix; · = a slot of another K slice",
    )  # fmt: skip
    notes = desc.lines()
    if rows < rows_total:
        notes.append(f"rows 0-{rows - 1} of {rows_total} drawn; every 8 rows repeat SBO further on")
    if width:
        notes.append(
            f"the tile is stored in rows of {width} bytes; slice k={k} of the row starts "
            f"{32 * k} bytes in (k=0..{width // 32 - 1})"
        )
    views = [FragmentView(f, max_rows=10**6) for f in (left, right)]
    return Panels(f"{name} in shared memory, {swizzle} swizzle", views, notes)
