"""``show_tma_box``: a TMA tensor load (``cp.async.bulk.tensor.2d``) drawn: the box over the
global tensor, and where its bytes land in (swizzled) shared memory.

Written from the PTX ISA ("Tensor Map: bounding box, out-of-bounds access, swizzling
modes"), independently of the simulator: the copy engine reads the box whose first element is
at ``coords`` (row, column; negative or past the edge is allowed); an element outside the
tensor reads as zero. It writes the box to shared memory as a dense image, row after row;
under the 32-, 64- or 128-byte swizzle, image byte ``o`` goes to ``o`` with its 16-byte unit
``o[4:4+s]`` XOR-ed with its 128-byte line ``o[7:7+s]`` (s = 1, 2, 3), so the chunks of the 8
rows of a core matrix spread over 8 groups of banks.

Two panels: the tensor around the box in blocks of 8 rows x 16 bytes (each block labelled
with its first element's coordinates; ``0`` where the box reads past the tensor, grey where
the tensor is outside the box), and the shared image in lines of 128 bytes (the 32 banks),
each 16-byte slot labelled with the box row and 16-byte chunk that lands there. Both colour a
chunk by its column of 16 bytes in the box, so the swizzle shows as the colours' diagonal.
"""

from __future__ import annotations

from tirx.errors import TirxError

from .fragment import Element, Fragment
from .fragview import FragmentView
from .panels import Panels

__all__ = ["show_tma_box", "landing", "SWIZZLE_BITS"]

SWIZZLE_BITS = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
CHUNK, LINE, BLOCK = 16, 128, 8  # bytes of a chunk and of a line; rows of a block
MAX_LINES = 64
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "uint8": 1,
                "float8_e4m3fn": 1, "float8_e5m2": 1, "int32": 4, "uint32": 4}  # fmt: skip


def landing(box: tuple[int, int], element_bytes: int, swizzle: str) -> dict:
    """Where each 16-byte chunk of the box lands: {(box row, chunk): shared byte offset}."""
    s = SWIZZLE_BITS[swizzle]
    row_bytes = box[1] * element_bytes
    out = {}
    for r in range(box[0]):
        for j in range(-(-row_bytes // CHUNK)):
            o = r * row_bytes + j * CHUNK
            out[(r, j)] = o ^ ((o >> 3) & (((1 << s) - 1) << 4)) if s else o
    return out


def _check(shape, box, coords, swizzle, element_bytes):
    if len(shape) != 2 or len(box) != 2 or len(coords) != 2:
        raise TirxError(
            "show_tma_box draws 2-d tensor copies: shape, box and coords of two numbers each",
            hint="for a copy of more dimensions, draw its two innermost ones",
        )
    if swizzle not in SWIZZLE_BITS:
        raise TirxError(f"unknown swizzle {swizzle!r}", hint="none, 32B, 64B or 128B")
    row_bytes = box[1] * element_bytes
    if row_bytes % CHUNK:
        raise TirxError(
            f"a box row of {box[1]} elements is {row_bytes} bytes, not a multiple of 16",
            hint="the ISA's tensor maps take box rows of whole 16-byte units",
        )
    span = (16 << SWIZZLE_BITS[swizzle]) if SWIZZLE_BITS[swizzle] else 0
    if span and row_bytes > span:
        raise TirxError(
            f"a {swizzle} swizzle takes box rows of at most {span} bytes; this one is {row_bytes}",
            hint="narrow the box's inner dimension (or choose a wider swizzle)",
        )


def show_tma_box(shape, box, coords, *, dtype: str = "float16", swizzle: str = "128B",
                 title: str | None = None) -> Panels:  # fmt: skip
    """A 2-d TMA load of a ``box`` (rows, columns) of a global tensor of ``shape`` (rows,
    columns) of ``dtype``, whose first element is at ``coords`` (row, column: the tile form's
    order), into shared memory under ``swizzle`` (none, 32B, 64B, 128B)."""
    if dtype not in _DTYPE_BYTES:
        raise TirxError(f"unknown dtype {dtype!r}", hint=", ".join(_DTYPE_BYTES))
    eb = _DTYPE_BYTES[dtype]
    shape, box, coords = tuple(shape), tuple(box), tuple(int(c) for c in coords)
    _check(shape, box, coords, swizzle, eb)
    per_chunk = CHUNK // eb
    chunks = box[1] // per_chunk
    lands = landing(box, eb, swizzle)
    name = (
        title or f"TMA box {box[0]}x{box[1]} {dtype} at {coords} of a {shape[0]}x{shape[1]} tensor"
    )
    views = [FragmentView(_tensor_panel(shape, box, coords, per_chunk, chunks), max_rows=10**6),
             FragmentView(_shared_panel(box, lands, chunks, swizzle, eb), max_rows=10**6)]  # fmt: skip
    outside = _outside(shape, box, coords)
    notes = [
        f"{box[0] * box[1] * eb} bytes: the complete-tx count the barrier expects "
        "(arrive.expect_tx)",
        f"swizzle {swizzle}: image byte o lands at o ^ ((o >> 3) & "
        f"{((1 << SWIZZLE_BITS[swizzle]) - 1) << 4:#x})" if swizzle != "none"
        else "no swizzle: the box lands as a dense row-major image",
    ]  # fmt: skip
    if outside:
        notes.append(f"{outside} element(s) of the box lie outside the tensor and land as zeros")
    if box[0] > MAX_LINES * LINE // (box[1] * eb):
        notes.append(f"the first {MAX_LINES} lines of shared memory are drawn")
    return Panels(name, views, notes, linked=False)


def hue(key: int) -> int:
    """The colour key of group ``key`` (a chunk column, a core matrix): the lane colours of
    different quads first (eight hues), then their lighter shades."""
    return 4 * (key % 8) + (key // 8) % 4


def _outside(shape, box, coords) -> int:
    rows = sum(1 for r in range(box[0]) if not 0 <= coords[0] + r < shape[0])
    cols = sum(1 for c in range(box[1]) if not 0 <= coords[1] + c < shape[1])
    return rows * box[1] + cols * box[0] - rows * cols


def _tensor_panel(shape, box, coords, per_chunk, chunks) -> Fragment:
    """The tensor around the box, in blocks of 8 rows x 16 bytes."""
    r0, c0 = coords
    # blocks anchored at the box's first element, one more each side where the tensor goes on
    rows = [r for r in range(r0 - BLOCK, r0 + box[0] + BLOCK, BLOCK)
            if r0 <= r < r0 + box[0] or 0 <= r + BLOCK - 1 and r < shape[0]]  # fmt: skip
    cols = [c for c in range(c0 - per_chunk, c0 + box[1] + per_chunk, per_chunk)
            if c0 <= c < c0 + box[1] or 0 <= c + per_chunk - 1 and c < shape[1]]  # fmt: skip
    cells = []
    for R, r in enumerate(rows):
        for C, c in enumerate(cols):
            in_box = r0 <= r < r0 + box[0] and c0 <= c < c0 + box[1]
            in_tensor = 0 <= r < shape[0] and 0 <= c < shape[1]
            j = (c - c0) // per_chunk
            where = f"rows {r}..{r + BLOCK - 1}, columns {c}..{c + per_chunk - 1}"
            if in_box:
                info = f"{where}: in the box (its 16-byte column {j})" + (
                    "" if in_tensor else "; outside the tensor: read as zeros"
                )
                cells.append(Element((R, C), hue(j), None, 0, ((hue(j), None, 0),),
                                     text=f"{r},{c}" if in_tensor else "0", info=info))  # fmt: skip
            else:
                cells.append(Element((R, C), text=f"{r},{c}" if in_tensor else "·",
                                     info=f"{where}: " + ("not in the box" if in_tensor
                                                          else "outside the tensor")))  # fmt: skip
    return Fragment(
        f"global tensor {shape[0]}x{shape[1]}: the box from ({r0}, {c0})", len(rows), len(cols),
        tuple(cells), axes=("rows (8 a block)", "columns (16 bytes a block)"),
        holder="chunk column",
        caption="cell = 8 rows x 16 bytes of the tensor, labelled with its first element; "
        "colour = the box's 16-byte column; grey = outside the box; 0 = read past the tensor",
    )  # fmt: skip


def _shared_panel(box, lands, chunks, swizzle, eb) -> Fragment:
    """The shared image, in lines of 128 bytes of 16-byte slots."""
    at = {off: key for key, off in lands.items()}
    size = box[0] * box[1] * eb
    lines = min(-(-size // LINE), MAX_LINES)
    cells = []
    for line in range(lines):
        for slot in range(LINE // CHUNK):
            off = line * LINE + slot * CHUNK
            key = at.get(off)
            if key is None:
                cells.append(
                    Element((line, slot), text="·", info=f"bytes {off}..{off + 15}: past the box")
                )
                continue
            r, j = key
            cells.append(Element(
                (line, slot), hue(j), None, 0, ((hue(j), None, 0),), text=f"{r}·{j}",
                info=f"bytes {off}..{off + 15} (banks {off // 4 % 32}..{off // 4 % 32 + 3}): box "
                f"row {r}, 16-byte chunk {j} (elements {j * CHUNK // eb}..{(j + 1) * CHUNK // eb - 1})",
            ))  # fmt: skip
    return Fragment(
        f"shared memory ({swizzle} swizzle): {lines} lines of 128 bytes", lines, LINE // CHUNK,
        tuple(cells), axes=("line (128 bytes)", "16-byte slot (4 banks each)"),
        holder="chunk column",
        caption="cell = box row · 16-byte chunk that lands in this slot; colour = the chunk's "
        "column in the box",
    )  # fmt: skip
