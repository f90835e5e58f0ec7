"""Element-level fragment pictures: a layout or an instruction operand on its logical matrix.

The PTX ISA draws a fragment as the matrix a programmer thinks in (16 x 16 halves for an f16
``A`` operand), each element labelled with the lane that holds it and its place in that lane's
fragment: ``T5:a2`` is element 2 of lane 5's ``A`` fragment (register 1, half 0). A
:class:`Fragment` is that picture computed once: the elements of a whole tile in picture order,
the tile cut into blocks (one instruction's atom each: repeats and warp splits become a grid of
blocks, not a column), the axis names, and what the cells mean. :mod:`widgets.picture` and
:mod:`widgets.tikz` draw it; :func:`text` prints it.

Registers hold 32-bit words; ``element_bits`` (16 for f16/bf16, 8 for s8, 32 for f32/tf32)
says how many elements share one word, so the same code draws every element width.
"""

from __future__ import annotations

import enum
import functools
import itertools
import math
from dataclasses import dataclass

from tirx.errors import LayoutError

from . import args
from .model import Grid, layout_grid

__all__ = [
    "FragmentKind",
    "Element",
    "Fragment",
    "layout_fragment",
    "compose",
    "unpack",
    "block_labels",
    "as_2d",
    "coords",
    "thread_major",
    "bank_fragment",
    "text",
]

WORD_BITS = 32
BANKS = 32


class FragmentKind(enum.Enum):
    REGISTERS = "registers"  # cells are lane:element
    MEMORY = "memory"  # cells are shared-memory elements, coloured by bank
    ADDRESSES = "addresses"  # cells name the lane that supplies the row's address
    THREADS = "threads"  # thread-major: row = lane, column = its fragment element


@dataclass(frozen=True)
class Element:
    """One cell of the picture.

    ``coord`` is the element's logical coordinate (elements, not words); ``lane``/``register``/
    ``part`` say who holds the first copy (``part``: which element of the 32-bit register);
    ``copies`` lists ``(lane, register, part)`` of every copy; ``threads`` names thread axes
    other than the lane (a warp, say). Memory cells have ``address`` (in elements) instead.
    """

    coord: tuple[int, ...]
    lane: int | None = None
    register: int | None = None
    part: int = 0
    copies: tuple[tuple[int | None, int | None, int], ...] = ()
    threads: tuple[tuple[str, int], ...] = ()
    address: int | None = None
    text: str = ""  # the cell's label, when a picture names its cells itself
    info: str = ""  # what hovering or clicking the cell explains, likewise

    @property
    def lanes(self) -> frozenset[int]:
        return frozenset(lane for lane, _, _ in self.copies if lane is not None)


@dataclass(frozen=True)
class Fragment:
    """A picture of ``rows x cols`` cells in row-major order, cut into blocks of
    ``block = (block_rows, block_cols)``. ``axes`` names the picture's row and column axes;
    ``block_labels`` names the block rows and block columns (``"M1"``, ``"N0"``); ``prefix`` starts a fragment
    element's name (``a`` for an ``A`` operand: ``T5:a2``)."""

    title: str
    rows: int
    cols: int
    elements: tuple[Element, ...]
    kind: FragmentKind = FragmentKind.REGISTERS
    block: tuple[int, int] = (0, 0)
    axes: tuple[str, str] = ("row", "column")
    block_labels: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # (down, across)
    prefix: str = "v"
    element_bits: int = 16
    about: str = ""
    formula: str = ""
    holder: str = "lane"  # who holds a cell: a lane of a warp, or a thread of a warpgroup
    caption: str = ""  # what the cells and colours mean, when the picture says it itself
    key: tuple[tuple[str, str], ...] = ()  # a colour key: (colour, text) swatches, and its name
    key_name: str = ""
    unit_bits: int = WORD_BITS  # what one register index holds: a 32-bit word, or one slot

    @functools.cached_property
    def replicated(self) -> bool:
        """Whether an element has more than one copy (read once: a click says the legend)."""
        return any(len(e.copies) > 1 for e in self.elements)

    @property
    def per_register(self) -> int:
        return max(self.unit_bits // self.element_bits, 1)

    @property
    def block_rows(self) -> int:
        return self.block[0] or self.rows

    @property
    def block_cols(self) -> int:
        return self.block[1] or self.cols

    def at(self, row: int, col: int) -> Element:
        return self.elements[row * self.cols + col]

    def index_of(self, coord) -> int | None:
        """The cell index of the element with logical ``coord``."""
        coord = tuple(coord)
        for i, e in enumerate(self.elements):
            if e.coord == coord:
                return i
        return None

    def name(self, register: int | None, part: int) -> str:
        """A fragment element's ISA name: ``a2`` is register 1, half 0 for 16-bit elements."""
        if register is None:
            return "-"
        return f"{self.prefix}{register * self.per_register + part}"

    def label(self, e: Element) -> str:
        """The text in a cell: ``T5:a2``, ``W1/T5:a2``, an address with its bank, or a lane."""
        if e.text:
            return e.text
        if self.kind is FragmentKind.MEMORY:
            return f"{e.address}"
        if self.kind is FragmentKind.ADDRESSES:
            return "-" if e.lane is None else f"T{e.lane}"
        if self.kind is FragmentKind.THREADS:
            return "-" if not e.coord else ",".join(map(str, e.coord))
        text = f"T{'-' if e.lane is None else e.lane}:{self.name(e.register, e.part)}"
        if e.threads:
            text = "/".join(f"{n[0].upper()}{v}" for n, v in e.threads) + "/" + text
        if len(e.copies) > 1:
            text += f"×{len(e.copies)}"
        return text

    def bank(self, e: Element) -> int | None:
        """The bank (32 banks of 4 bytes) of a memory element's first byte."""
        if e.address is None:
            return None
        return (e.address * self.element_bits // 8 // 4) % BANKS

    def describe(self, index: int) -> str:
        """What hovering or clicking cell ``index`` explains."""
        e = self.elements[index]
        if e.info:
            return e.info
        where = f"element {e.coord}"
        if self.kind is FragmentKind.MEMORY:
            return f"{where}: address {e.address}, bank {self.bank(e)}"
        if self.kind is FragmentKind.ADDRESSES:
            return f"{where}: its row's address comes from lane {e.lane}"
        if self.kind is FragmentKind.THREADS:
            return f"lane {e.lane} element {self.name(e.register, e.part)}: {e.coord}"
        held = ", ".join(
            f"{self.holder} {lane} register {reg}"
            + (f" part {part}" if self.per_register > 1 else "")
            for lane, reg, part in e.copies
        )
        out = f"{where} = {self.label(e).split('×')[0]}: {held}"
        if self.formula and "word" in self.formula and self.per_register > 1:
            n = self.per_register
            out += f"\nword = column // {n}, part = column % {n}; element = {n}·register + part"
        return out + (f"\n{self.formula}" if self.formula else "")

    @property
    def _unit(self) -> str:
        return "32-bit register" if self.unit_bits == WORD_BITS else f"{self.unit_bits}-bit slot"

    def legend(self) -> str:
        """What the cells and colours mean, one sentence."""
        if self.caption:
            return self.caption
        if self.kind is FragmentKind.MEMORY:
            return (
                f"cell = element address ({self.element_bits}-bit elements); "
                "colour = shared-memory bank"
            )
        if self.kind is FragmentKind.ADDRESSES:
            return "cell = the lane that supplies this row's address"
        if self.kind is FragmentKind.THREADS:
            return f"row = lane; cell = the {self.axes[1]} each element of the lane's fragment is"
        who = self.holder
        out = (
            f"cell = T<{who}>:{self.prefix}<i> (element i of the {who}'s fragment, "
            f"{self.per_register} per {self._unit}); colour = {who}"
        )
        if who == "thread":
            out += "; thread = 32·warp + lane, a band of rows per warp"
        if self.replicated:
            out += "; ×n = n copies"
        return out


# ------------------------------------------------------------------------- composition


def block_grid(lead: tuple[int, ...]) -> tuple[int, int]:
    """How leading (repeat) dims tile the picture: the last goes across, the rest down."""
    if not lead:
        return 1, 1
    return math.prod(lead[:-1]), lead[-1]


def compose(cells: dict, shape: tuple[int, ...]):
    """Picture order of element coordinates of ``shape`` (``(*lead, rows, cols)``): blocks of
    ``rows x cols``, leading dims tiled by :func:`block_grid`. Returns (rows, cols, order)."""
    lead, (br, bc) = shape[:-2], shape[-2:]
    down, across = block_grid(lead)
    order = []
    for R in range(down * br):
        for C in range(across * bc):
            b = (R // br) * across + C // bc
            rest, lead_coord = b, []
            for extent in reversed(lead):
                lead_coord.append(rest % extent)
                rest //= extent
            order.append(cells[(*reversed(lead_coord), R % br, C % bc)])
    return down * br, across * bc, tuple(order)


def block_labels(lead: tuple[int, ...], names: tuple[str, ...]):
    """Names of the block rows and block columns (``(("M0", "M1"), ("N0", "N1"))``)."""
    if not lead or math.prod(lead) == 1:
        return (), ()
    names = names if len(names) == len(lead) else tuple(f"dim {i} = " for i in range(len(lead)))
    down = tuple(
        " ".join(f"{n}{c}" for n, c in zip(names[:-1], combo) if len(names) > 1)
        for combo in coords(lead[:-1])
    )
    across = tuple(f"{names[-1]}{c}" for c in range(lead[-1]))
    return (down if len(lead) > 1 else ()), across


def as_2d(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (1, *shape) if len(shape) == 1 else shape


def unpack(grid: Grid, per: int) -> dict:
    """Element coordinate -> Element, splitting each word cell into ``per`` elements."""
    cells = {}
    for cell in grid.cells:
        coord = cell.coord if len(cell.coord) > 1 else (0, *cell.coord)  # a 1-D shape: one row
        for part in range(per):
            ecoord = (*coord[:-1], coord[-1] * per + part)
            if grid.kind == "memory":
                addr = None if cell.slot is None else cell.slot * per + part
                cells[ecoord] = Element(ecoord, address=addr)
            else:
                copies = tuple((lane, slot, part) for lane, slot in cell.copies)
                cells[ecoord] = Element(ecoord, cell.lane, cell.slot, part, copies, cell.threads)
    return cells


def layout_fragment(layout, shape=None, *, element_bits: int = 32, unit_bits: int = 32,
                    title=None, axes=None, prefix: str = "v", repeat_names=()) -> Fragment:  # fmt: skip
    """``layout`` over ``shape`` drawn in elements of ``element_bits``.

    ``unit_bits`` is what one step of the layout's ``m`` axis holds: 32 for a register layout
    over u32 words (then each word is drawn as ``32 // element_bits`` elements side by side),
    or ``element_bits`` for a layout already over elements (an f32 accumulator, a shared tile).
    Leading dims beyond the last two are tiled as blocks (last one across, the rest down).
    """
    layout = args.layout(layout)
    check_bits(element_bits, unit_bits)
    per = unit_bits // element_bits
    args.bound(layout, per)
    grid = layout_grid(layout, shape, title=title, dtype_bytes=max(unit_bits // 8, 1))
    shape = as_2d(grid.shape)
    eshape = (*shape[:-1], shape[-1] * per)
    rows, cols, order = compose(unpack(grid, per), eshape)
    kind = FragmentKind.MEMORY if grid.kind == "memory" else FragmentKind.REGISTERS
    return Fragment(
        title or repr(layout), rows, cols, order, kind, eshape[-2:],
        axes or ("row", "column" if per == 1 else f"column ({element_bits}-bit elements)"),
        block_labels(eshape[:-2], tuple(repeat_names)), prefix,
        element_bits, unit_bits=unit_bits,
    )  # fmt: skip


def check_bits(element_bits, unit_bits=WORD_BITS, allowed=(8, 16, 32)) -> None:
    """A LayoutError unless ``element_bits`` is one of ``allowed`` and divides ``unit_bits``
    (8, 16 or 32)."""
    ok = all(isinstance(b, int) and not isinstance(b, bool) for b in (element_bits, unit_bits))
    if (
        not ok
        or unit_bits not in (8, 16, 32)
        or element_bits not in allowed
        or unit_bits % element_bits
    ):
        widths = ", ".join(map(str, allowed[:-1])) + " or " * (len(allowed) > 1) + str(allowed[-1])
        raise LayoutError(
            f"cannot draw {element_bits!r}-bit elements in {unit_bits!r}-bit units",
            hint=f"element_bits is {widths} and divides unit_bits (8, 16 or 32)",
        )


def coords(shape):
    """Every coordinate of ``shape``, row-major."""
    return itertools.product(*(range(e) for e in shape))


# ------------------------------------------------------------------------- other views


def thread_major(frag: Fragment) -> Fragment:
    """The lane-major view of a register fragment: row ``l`` lists lane ``l``'s elements in
    fragment order (``a0, a1, ...``), each cell the logical coordinate it holds."""
    if frag.kind is not FragmentKind.REGISTERS:
        raise LayoutError(
            "a thread-major view needs a register fragment (lanes and registers)",
            hint="draw a register layout or an instruction's register operand",
        )
    held: dict[tuple[int, int], Element] = {}
    for e in frag.elements:
        for lane, reg, part in e.copies:
            if lane is None or reg is None:
                continue
            k = reg * frag.per_register + part
            held.setdefault((lane, k), Element(e.coord, lane, reg, part, ((lane, reg, part),)))
    lanes = sorted({lane for lane, _ in held})
    width = max(k for _, k in held) + 1
    rows = range(max(lanes) + 1) if lanes else range(0)
    order = tuple(
        held.get((lane, k), Element((), lane, None, 0, ())) for lane in rows for k in range(width)
    )
    return Fragment(
        f"{frag.title} · by thread", len(rows), width, order, FragmentKind.THREADS, (0, 0),
        ("lane", "coordinate"), ((), ()), frag.prefix, frag.element_bits, frag.about, frag.formula,
        unit_bits=frag.unit_bits,
    )  # fmt: skip


def bank_fragment(layout, shape=None, *, element_bits: int = 16, title=None) -> Fragment:
    """A shared-memory layout over ``shape`` (in elements of ``element_bits``), each cell its
    element address, coloured by the bank of its first byte."""
    frag = layout_fragment(
        layout, shape, element_bits=element_bits, unit_bits=element_bits, title=title
    )
    if frag.kind is not FragmentKind.MEMORY:
        raise LayoutError(
            "a bank view needs a shared-memory layout (the m axis only)",
            hint="pass the layout of the shared tile, not a register layout",
        )
    return frag


def bank_conflicts(frag: Fragment) -> int:
    """The worst n-way conflict when one column's elements are read together."""
    worst = 1
    for col in range(frag.cols):
        words: dict[int, set[int]] = {}
        for row in range(frag.rows):
            e = frag.at(row, col)
            word = e.address * frag.element_bits // 8 // 4
            words.setdefault(word % BANKS, set()).add(word)
        worst = max(worst, *(len(w) for w in words.values()))
    return worst


# ------------------------------------------------------------------------- text


def text(frag: Fragment, *, lane=None, marks=()) -> str:
    """The picture as aligned text with block borders (``|`` and ``-``); ``[x]`` marks the
    selected lane's cells, ``!x`` flagged ones."""
    marks = set(marks)
    texts = []
    for i, e in enumerate(frag.elements):
        t = frag.label(e)
        if frag.kind is FragmentKind.MEMORY:
            t += f"/b{frag.bank(e)}"
        if i in marks:
            t = "!" + t
        if lane is not None and lane in e.lanes:
            t = f"[{t}]"
        texts.append(t)
    width = max(max((len(t) for t in texts), default=1), len(str(frag.cols - 1))) + 1
    head = max(len(str(frag.rows - 1)), 1) + 1
    bc, br = frag.block_cols, frag.block_rows

    def line(cells):
        out = []
        for c, t in enumerate(cells):
            out.append((" |" if c and c % bc == 0 else "") + f"{t:>{width}}")
        return "".join(out)

    lines = [frag.title, frag.legend(), f"rows: {frag.axes[0]}; columns: {frag.axes[1]}"]
    down, across = frag.block_labels
    if across:
        lines.append(
            f"blocks: across {', '.join(across)}" + (f"; down {', '.join(down)}" if down else "")
        )
    lines.append(" " * head + line([str(c) for c in range(frag.cols)]))
    rule = " " * head + "-" * len(line([""] * frag.cols))
    for r in range(frag.rows):
        if r and r % br == 0:
            lines.append(rule)
        lines.append(f"{r:>{head}}" + line(texts[r * frag.cols : (r + 1) * frag.cols]))
    return "\n".join(lines)
