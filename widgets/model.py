"""What a picture shows, computed once and drawn many ways: a grid of logical elements, each with
its owner (lane, register slot) or its memory address.

A :class:`Grid` comes from a layout (:func:`layout_grid`) or from an instruction's fragment
table (:func:`contract_grid`). The logical tensor of shape ``(..., rows, cols)`` is drawn as
``prod(shape[:-1])`` rows by ``shape[-1]`` columns; the leading dimensions stack blocks of
``shape[-2]`` rows. Colours live here too, so every renderer agrees on them.
"""

from __future__ import annotations

import colorsys
import functools
import itertools
import math
from dataclasses import dataclass

from tirx.errors import LayoutError

from . import args
from .args import parse_layout
from .families import require_drawable, require_fragment

__all__ = [
    "Cell",
    "Grid",
    "layout_grid",
    "contract_grid",
    "layout_formula",
    "lane_color",
    "slot_color",
    "fade",
    "text_color",
    "parse_layout",
]


@dataclass(frozen=True)
class Cell:
    """One logical element: where its first copy lives and where every copy lives.

    ``lane`` is None for a memory layout (then ``slot`` is the element address); ``copies``
    lists ``(lane, slot)`` of every copy, the first being ``(lane, slot)``.
    """

    coord: tuple[int, ...]
    lane: int | None
    slot: int | None
    copies: tuple[tuple[int | None, int | None], ...] = ()
    threads: tuple[tuple[str, int], ...] = ()  # thread axes other than laneid, first copy

    @property
    def lanes(self) -> frozenset[int]:
        return frozenset(lane for lane, _ in self.copies if lane is not None)


@dataclass(frozen=True)
class Grid:
    """The cells of a logical tensor in row-major order, with what to call the slot.

    ``kind``: ``"registers"`` (cells are lane:slot), ``"memory"`` (cells are addresses) or
    ``"addresses"`` (the lane that supplies each row's address; no slot).
    """

    title: str
    shape: tuple[int, ...]
    cells: tuple[Cell, ...]
    kind: str = "registers"
    slot_name: str = "slot"
    element_bytes: int = 2
    note: str = ""
    legend: str = ""  # what a cell shows, where not the default of its kind (a trace's values)

    @property
    def cols(self) -> int:
        return self.shape[-1]

    @property
    def rows(self) -> int:
        return len(self.cells) // self.cols

    @property
    def block_rows(self) -> int:
        """Rows per block (a separator is drawn between blocks)."""
        return self.shape[-2] if len(self.shape) >= 2 else 1

    def cell(self, row: int, col: int) -> Cell:
        return self.cells[row * self.cols + col]

    def row_label(self, row: int) -> str:
        lead = self.shape[:-1]
        if not lead:
            return ""
        coord = _unravel(row, lead)
        keep = [c for c, e in zip(coord, lead) if e > 1] or [coord[-1]]
        return ",".join(str(c) for c in keep)

    def label(self, cell: Cell) -> str:
        """The text drawn in a cell: ``lane:slot``, an address, or a lane."""
        if self.kind == "memory":
            text = str(cell.slot)
        elif self.kind == "addresses" or cell.slot is None:
            text = "-" if cell.lane is None else str(cell.lane)
        else:
            text = f"{'-' if cell.lane is None else cell.lane}:{cell.slot}"
            if cell.threads:  # other thread axes (a warp, say) before the lane: "1/5:3"
                text = "/".join(str(v) for _, v in cell.threads) + "/" + text
        if len(cell.copies) > 1:
            text += f"×{len(cell.copies)}"
        return text

    def bank(self, cell: Cell) -> int | None:
        """The shared-memory bank (32 banks of 4 bytes) of a memory cell's first byte."""
        if self.kind != "memory" or cell.slot is None:
            return None
        return (cell.slot * self.element_bytes // 4) % 32

    def owned_by(self, lane: int) -> list[int]:
        """Indices of the cells that ``lane`` holds (any copy)."""
        return [i for i, c in enumerate(self.cells) if lane in c.lanes]

    @property
    def thread_axes(self) -> tuple[str, ...]:
        """Thread axes other than laneid that the cells name (shown before the lane)."""
        return tuple(name for name, _ in self.cells[0].threads) if self.cells else ()

    @property
    def has_lanes(self) -> bool:
        return any(c.lane is not None for c in self.cells)

    @property
    def replicated(self) -> bool:
        return any(len(c.copies) > 1 for c in self.cells)

    def bank_conflicts(self) -> int:
        """For a memory grid: the worst n-way bank conflict when the rows of one column are
        read together (distinct 4-byte words of one column that share a bank)."""
        if self.kind != "memory":
            return 0
        worst = 1
        for col in range(self.cols):
            words: dict[int, set[int]] = {}
            for row in range(self.rows):
                cell = self.cell(row, col)
                word = cell.slot * self.element_bytes // 4
                words.setdefault(word % 32, set()).add(word)
            worst = max(worst, max(len(w) for w in words.values()))
        return worst


def _unravel(index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for extent in reversed(shape):
        out.append(index % extent)
        index //= extent
    return tuple(reversed(out))


def _all_coords(shape: tuple[int, ...]):
    return itertools.product(*(range(e) for e in shape))


def _layout_shape(layout, shape) -> tuple[int, ...]:
    if shape is None:
        tile = getattr(layout, "tile_layout", layout)
        shape = tuple(it.extent for it in tile.shard) or (1,)
    shape = args.shape(shape)
    if math.prod(shape) != layout.size():
        raise LayoutError(
            f"shape {shape} has {math.prod(shape)} elements but the layout has {layout.size()}",
            hint="pass shape= with the tensor's logical shape (its product is layout.size())",
        )
    return shape


def layout_grid(layout, shape=None, *, title: str | None = None, dtype_bytes: int = 2) -> Grid:
    """Every element of ``layout`` over ``shape``: owner lane and slot, or address.

    A layout touching ``laneid`` (or ``tx``) is a register layout; one on ``m`` only is a
    memory layout whose cells are element addresses (``dtype_bytes`` sets the bank view).
    A picture over :data:`widgets.args.MAX_CELLS` elements is refused before any work.
    """
    layout = args.layout(layout)
    dtype_bytes = args.dtype_bytes(dtype_bytes)
    args.bound(layout)
    shape = _layout_shape(layout, shape)
    axes = layout.axes()
    memory = not (axes - {"m"})
    cells = []
    for coord in _all_coords(shape):
        points = layout.apply_all(*coord, shape=shape)
        copies = tuple((_lane_of(p), p.get("m")) for p in points)
        others = tuple(sorted((k, v) for k, v in points[0].items() if k not in ("m", "laneid")))
        lane, slot = copies[0]
        cells.append(Cell(coord, lane, slot, copies, others))
    kind = "memory" if memory else "registers"
    return Grid(
        title or repr(layout),
        shape,
        tuple(cells),
        kind=kind,
        slot_name="address" if memory else "slot",
        element_bytes=dtype_bytes,
    )


def _lane_of(point: dict) -> int | None:
    if "laneid" in point:
        return point["laneid"]
    if "tx" in point:
        return point["tx"] % 32
    return None


def contract_grid(contract, operand: str, spec=None) -> Grid:
    """An instruction operand's canonical fragment, from the contract's owner table (of
    ``spec``, another form of the operand, when given: wgmma's A in registers)."""
    require_fragment(contract)
    spec = spec or contract.operand(operand)
    require_drawable(contract, spec)
    title = f"{contract.text} · {spec.name}"
    if spec.owner is None:  # the shared side of ldmatrix/stmatrix: who supplies each row
        cells = tuple(
            Cell(c, 8 * c[0] + c[1], None, ((8 * c[0] + c[1], None),))
            for c in _all_coords(spec.atom)
        )
        return Grid(title, spec.atom, cells, kind="addresses", slot_name="-", note=spec.about)
    table = spec.owner_table()
    cells = tuple(Cell(c, *table[c], (table[c],)) for c in _all_coords(spec.atom))
    return Grid(title, spec.atom, cells, slot_name="register", note=spec.about)


# ------------------------------------------------------------------------- formulas


def layout_formula(layout, coord, shape) -> str:
    """How ``layout`` maps ``coord`` of ``shape``, step by step (SPEC §2), as plain text."""
    shape = tuple(shape)
    tile = getattr(layout, "tile_layout", layout)
    flat = 0
    for c, e in zip(coord, shape):
        flat = flat * e + c
    extents = [it.extent for it in tile.shard]
    pieces, rest = [], flat
    for i in range(len(extents) - 1, -1, -1):
        if i == 0:
            pieces.append(rest)
        else:
            pieces.append(rest % extents[i])
            rest //= extents[i]
    pieces.reverse()
    lines = [
        f"element {tuple(coord)} of shape {shape}",
        f"flat index f = {flat}",
        f"split over extents {tuple(extents)} → {tuple(pieces)}",
    ]
    offsets = tile.offsets()
    sums: dict[str, list[str]] = {}
    totals: dict[str, int] = {}
    for it, piece in zip(tile.shard, pieces):
        if it.extent == 1 or it.stride == 0:
            continue
        name = it.axis.name
        sums.setdefault(name, []).append(f"{piece}·{it.stride}")
        totals[name] = totals.get(name, 0) + piece * it.stride
    for name, value in offsets.items():
        if value:
            sums.setdefault(name, []).append(f"{value} (offset)")
            totals[name] = totals.get(name, 0) + value
    for name in sorted(sums, key=lambda n: (n == "m", n)):
        lines.append(f"{name} = {' + '.join(sums[name])} = {totals[name]}")
    if tile is not layout:  # a swizzle on m
        base = totals.get("m", 0)
        lines.append(f"swizzle m: {base} → {layout.swizzle(base)}")
    copies = layout.apply_all(*coord, shape=shape)
    if len(copies) > 1:
        lines.append("copies: " + ", ".join(_point_text(p) for p in copies))
    return "\n".join(lines)


def _point_text(point: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(point.items(), key=lambda kv: kv[0] == "m"))


# ------------------------------------------------------------------------- colours
# (each a pure function of a few hundred possible arguments, cached: a click repaints every
# cell of a grid, 4096 of a wgmma accumulator)

# Lanes of one quad (g = lane // 4) share a hue and differ in lightness, so the 8 groups of the
# mma fragment tables read at a glance and all 32 lanes stay distinct.
_GROUP_HUES = (0.58, 0.08, 0.33, 0.0, 0.76, 0.12, 0.9, 0.48)
_QUAD_LIGHTNESS = (0.42, 0.55, 0.68, 0.8)
_SLOT_COLORS = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7",
    "#9c755f", "#bab0ac",
)  # fmt: skip


def _hex(rgb) -> str:
    return "#" + "".join(f"{round(max(0.0, min(1.0, x)) * 255):02x}" for x in rgb)


@functools.lru_cache(maxsize=4096)
def lane_color(lane: int | None) -> str:
    """One colour per lane 0..31 (``#rrggbb``); grey for None."""
    if lane is None:
        return "#d9d9d9"
    hue = _GROUP_HUES[(lane // 4) % 8] + 0.013 * (lane // 32)
    light = _QUAD_LIGHTNESS[lane % 4]
    return _hex(colorsys.hls_to_rgb(hue % 1.0, light, 0.62 if lane % 4 < 3 else 0.7))


@functools.lru_cache(maxsize=4096)
def slot_color(slot: int | None) -> str:
    """One colour per register slot (or bank), distinct for the first ten."""
    if slot is None:
        return "#d9d9d9"
    if slot < len(_SLOT_COLORS):
        return _SLOT_COLORS[slot]
    return lane_color(slot % 32)


@functools.lru_cache(maxsize=4096)
def fade(color: str, amount: float = 0.8) -> str:
    """``color`` mixed with white (``amount`` 1 is white)."""
    rgb = [int(color[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    return _hex([x + (1 - x) * amount for x in rgb])


@functools.lru_cache(maxsize=4096)
def text_color(background: str) -> str:
    """Black or white, whichever has the higher contrast with ``background`` (the WCAG ratio
    of relative luminances, so a mid green gets black: white on it reads at under 3:1)."""
    lum = relative_luminance(background)
    return "#000000" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "#ffffff"


def relative_luminance(color: str) -> float:
    """The WCAG 2 relative luminance of ``#rrggbb``."""

    def linear(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(color[i : i + 2], 16) / 255) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def register_notes(entries, holder: str = "lane") -> str:
    """What no warp can hold, said under a register layout's picture: two elements in one
    lane's register slot, lanes past 31. ``entries``: ``(coord, other thread axes, lane,
    slot's name)`` for every copy of every element; "" when there is nothing to say."""
    owners: dict = {}
    for coord, threads, lane, slot in entries:  # (a replica's copies are one element's)
        owners.setdefault((threads, lane, slot), dict.fromkeys(()))[coord] = None
    notes = []
    clash = next(((key, coords) for key, coords in owners.items() if len(coords) > 1), None)
    if clash is not None:
        (_, lane, slot), coords = clash[0], list(clash[1])
        notes.append(
            f"elements {coords[0]} and {coords[1]} share lane {lane}'s {slot} (one slot: "
            "writing one overwrites the other)"
        )
    lanes = [lane for _, _, lane, _ in entries if lane is not None]
    if holder == "lane" and lanes and max(lanes) > 31:
        past = [lane for lane in lanes if lane > 31]
        notes.append(f"lanes {min(past)}..{max(past)} are past a warp's 32")
    return "; ".join(notes)
