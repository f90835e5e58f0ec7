"""The clickable grid inside every view: one small custom widget (anywidget) drawing plain DOM.

The front end (``cellgrid.js``) draws one ``<button>`` per cell shown, in a CSS grid, with the
row and column labels beside it, and keeps one delegated handler for the whole grid: a click
sends the kernel one message, the cell's position (``{"click": k}``). The model holds the
grid's state: each button's label and tooltip, its look as an index into a *palette* of style
texts, the gaps before block rows and columns, and the hover groups. The front end applies a
change by comparing it with what it drew, so a click that changes a few cells (a lane's, the
clicked one) rewrites the inline style of those buttons only and the browser restyles those
alone. A grid is two widget models (this one and the box around it) plus a "columns"
selector when it has pages.

The grid this replaces was an ipywidgets ``ToggleButtons`` coloured by a ``<style>`` of rules
like ``.g button:is(:nth-child(3),:nth-child(9)) {...}``: every click sent a new style text,
and the browser matched every button against every rule again, a cost that grew with the
square of the cells (about 60 ms of style recalculation for a page of 512 cells of wgmma's
accumulator, out of the 200 ms a click took).

A grid wider than a notebook column (:data:`WIDTH` px) is shown a page of columns at a time
(a "columns" selector); the front end holds buttons for the page shown only, relabelled when
another page is chosen, and every cell keeps its index in the whole grid. A grid of more than
:data:`MAX_CELLS` cells (a wgmma accumulator of 64 x 256) takes pages of at most that many.

Hovering a cell (or reaching it with the keyboard) outlines every cell of the same lane
(copies included) in the front end alone; the tooltip is the cell's formula. Tab reaches one
cell of a grid, the arrow keys move between its cells, and Enter or Space clicks one. A press
on a cell is kept from the notebook around it: JupyterLab would otherwise activate and focus
the notebook cell, which restyles the whole notebook.
"""

from __future__ import annotations

import functools
import html
import itertools
import math
from pathlib import Path

from . import draw
from .geometry import WIDTH, page_columns
from .model import Grid

__all__ = ["CellGrid", "CELL_HEIGHT", "WIDTH", "hover_groups", "look_text", "page_columns"]

CELL_HEIGHT = 22  # px
BLOCK_GAP = 5  # extra px above the first row of each block
MAX_CELLS = 1024  # buttons one grid may hold; a larger grid holds one page of them
GAP_TOP, GAP_LEFT = 1, 2  # a button's gaps, as the model sends them
_ids = itertools.count()
SCRIPT = Path(__file__).with_name("cellgrid.js")


@functools.cache
def _model_class():
    """The widget class (made on first use: importing :mod:`widgets` imports no ipywidgets)."""
    import anywidget
    import traitlets as t

    class Cells(anywidget.AnyWidget):
        _esm = SCRIPT.read_text()
        # lists of plain values, one per button shown (no per-element trait: a click sends
        # the looks of a page of up to 1024 cells, validated here as one list)
        labels = t.List().tag(sync=True)
        tips = t.List().tag(sync=True)
        gaps = t.List().tag(sync=True)
        palette = t.List().tag(sync=True)
        looks = t.List().tag(sync=True)
        groups = t.List().tag(sync=True)
        width = t.Int(40).tag(sync=True)
        ncols = t.Int(1).tag(sync=True)
        tracks = t.Unicode("").tag(sync=True)
        head = t.Unicode("").tag(sync=True)
        rows = t.Unicode("").tag(sync=True)

    return Cells


def look_text(style) -> str:
    """A cell's look as the inline style its button gets (a click's focus drawn dark)."""
    return _look_text(style.fill, style.ink, style.highlighted, style.marked, style.focused)


@functools.lru_cache(maxsize=1024)  # a few hundred looks: 32 lanes, faded or not, ...
def _look_text(fill: str, ink: str, highlighted: bool, marked: bool, focused: bool) -> str:
    if focused:
        fill, ink = "#222222", "#ffffff"
    text = f"background:{fill};color:{ink}"
    if highlighted or marked:
        text += ";font-weight:bold"
    if marked:
        text += f";box-shadow:inset 0 0 0 2px {draw.MARK_COLOR}"
    elif highlighted:
        text += ";box-shadow:inset 0 0 0 1px #000000"
    return text


class CellGrid:
    """Cells of ``grid`` drawn with ``styles(only=indices)``, the looks of those cells (see
    :func:`widgets.draw.cell_styles`; ``styles()``: every cell's); ``on_click(index)`` runs
    when a cell is clicked. The grid asks for the looks of the cells it shows only.

    Optional: ``block_cols`` (a gap before every block of that many columns), ``row_labels``
    and ``tooltips`` (replacing the grid's own), ``hover`` (groups of cell indices outlined
    together on hover; default: the cells of each lane)."""

    def __init__(self, grid: Grid, styles, on_click, *, block_cols: int = 0, row_labels=None,
                 tooltips=None, hover=None):  # fmt: skip
        import ipywidgets as w

        self.grid = grid
        self.styles_of = styles
        self.on_click = on_click
        self.block_cols = block_cols
        self.names = list(row_labels or [grid.row_label(r) for r in range(grid.rows)])
        self.tips = list(tooltips) if tooltips is not None else None
        self.hover = hover_groups(grid) if hover is None else [list(g) for g in hover]
        self.uid = f"tirx-g{next(_ids)}"
        every = styles()
        longest = max((len(s.label) + s.marked for s in every), default=3)
        self.width = max(40, round(6.7 * longest) + 8)  # 11 px monospace: 6.6 px a character
        self.label_width = 8 + 7 * max((len(n) for n in self.names), default=0)
        self.page_cols = page_columns(grid.cols, self.width + 1, self.label_width, block_cols)
        self.windowed = len(grid.cells) > MAX_CELLS  # pages of at most MAX_CELLS cells
        if self.windowed:
            fit = max(MAX_CELLS // grid.rows, 1)
            unit = block_cols if block_cols and block_cols <= fit else 8 if fit >= 8 else 1
            self.page_cols = max(min(self.page_cols, fit) // unit * unit, 1)
        self.pages = math.ceil(grid.cols / self.page_cols)
        self.page = 0
        self.styles = [every[i] for i in self.buttons]  # the looks of the buttons shown
        self.cells = _model_class()(**self._page_state(), **self._looks())
        self.cells.add_class(self.uid)
        self.cells.on_msg(self._message)
        parts = [self.cells]
        if self.pages > 1:
            self.pager = w.Dropdown(
                options=[(self._page_name(p), p) for p in range(self.pages)], value=0,
                description="columns", layout=w.Layout(width="190px"),
            )  # fmt: skip
            self.pager.add_class("tirx-pager")
            self.pager.observe(lambda ch: self.set_page(ch["new"]), names="value")
            parts.insert(0, self.pager)
        self.widget = w.VBox(parts)
        self.widget.add_class("tirx-grid")

    # ---------------------------------------------------------------- updates

    @property
    def buttons(self) -> list[int]:
        """The cell index of each button, in order: the shown page's cells."""
        return _buttons(self.grid.rows, self.grid.cols, self._shown())

    def update(self, page: int | None = None) -> None:
        """Repaint, showing ``page`` (default: the page shown): one message, the looks (with
        the labels when one changed, the whole page's state on a new page)."""
        page = self.page if page is None else min(max(int(page), 0), self.pages - 1)
        turn = page != self.page
        self.page = page
        before, self.styles = self.styles, self.styles_of(only=self.buttons)
        state = {}
        if turn:
            state = self._page_state()
            if self.pager.value != page:
                self.pager.value = page  # its observer finds the page shown already
        elif any(a.label != b.label or a.marked != b.marked
                 for a, b in zip(self.styles, before)):  # fmt: skip
            state = {"labels": self._labels()}
        state.update(self._looks())
        with self.cells.hold_sync():
            for name, value in state.items():
                setattr(self.cells, name, value)

    def click(self, index: int) -> None:
        """What a click on cell ``index`` does: the front end's message, sent from here."""
        self.set_page(self.page_of(index))
        self._message(self.cells, {"click": self.buttons.index(index)}, [])

    def set_page(self, page: int) -> None:
        """Show the ``page``-th page of columns (and select it in the selector)."""
        if int(page) != self.page:
            self.update(page)

    def page_of(self, index: int) -> int:
        """The page of columns that shows cell ``index``."""
        return (index % self.grid.cols) // self.page_cols

    def hover_of(self, index: int) -> list[int]:
        """The cells outlined while cell ``index`` is hovered (its lanes' cells, copies
        included), read from the groups the front end is given."""
        buttons = self.buttons
        k = buttons.index(index)
        found = {j for group in self.cells.groups if len(group) > 1 and k in group for j in group}
        return sorted(buttons[j] for j in found)

    def painted(self) -> list[str]:
        """The inline style of each button, as the front end draws it."""
        palette = self.cells.palette
        return [palette[k] for k in self.cells.looks]

    def _message(self, _widget, content, _buffers) -> None:
        k = content.get("click") if isinstance(content, dict) else None
        if isinstance(k, int) and 0 <= k < len(self.cells.labels):
            self.on_click(self.buttons[k])

    # ---------------------------------------------------------------- pieces

    def _page_state(self) -> dict:
        """What the front end needs to lay out the shown page (sent again on a page change)."""
        return dict(
            labels=self._labels(), tips=self._tooltips(), gaps=self._gaps(),
            groups=self._hover_groups(), width=self.width, ncols=len(self._shown()),
            tracks=self._tracks(), head=self._header(), rows=self._row_labels(),
        )  # fmt: skip

    def _looks(self) -> dict:
        """The buttons' looks: a palette of style texts and each button's entry in it."""
        palette: dict[str, int] = {}
        looks = [palette.setdefault(look_text(s), len(palette)) for s in self.styles]
        return dict(palette=list(palette), looks=looks)

    def _page_name(self, page: int) -> str:
        first = page * self.page_cols
        last = min(first + self.page_cols, self.grid.cols) - 1
        return f"{first}–{last} of {self.grid.cols}"

    def _shown(self) -> range:
        first = self.page * self.page_cols
        return range(first, min(first + self.page_cols, self.grid.cols))

    def _labels(self) -> list[str]:
        return [("✗" if s.marked else "") + s.label for s in self.styles]

    def _tooltips(self) -> list[str]:
        if self.tips is not None:
            return [self.tips[i] for i in self.buttons]
        cells = self.grid.cells
        return [f"{cells[i].coord}: {self.grid.label(cells[i])}" for i in self.buttons]

    def _block_col_start(self, col: int) -> bool:
        first = self._shown().start
        return col > first and self.block_cols > 0 and col % self.block_cols == 0

    def _block_start(self, row: int) -> bool:
        return row > 0 and self.grid.block_rows > 1 and row % self.grid.block_rows == 0

    def _gaps(self) -> list[int]:
        cols = self.grid.cols
        return [GAP_TOP * self._block_start(i // cols) + GAP_LEFT * self._block_col_start(i % cols)
                for i in self.buttons]  # fmt: skip

    def _tracks(self) -> str:
        """Column widths; a block's first column is wider by the gap its margin takes."""
        shown = self._shown()
        if not self.block_cols:
            return f"repeat({len(shown)},{self.width}px)"
        return " ".join(f"{self.width + BLOCK_GAP * self._block_col_start(c)}px"
                        for c in shown)  # fmt: skip

    def _hover_groups(self) -> list[list[int]]:
        """The hover groups by button position (the shown page's buttons)."""
        where = {i: k for k, i in enumerate(self.buttons)}
        return [[where[i] for i in group if i in where] for group in self.hover]

    def _header(self) -> str:
        cols = "".join(
            f'<div style="width:{self.width}px;text-align:center'
            f'{f";margin-left:{BLOCK_GAP}px" if self._block_col_start(c) else ""}">{c}</div>'
            for c in self._shown()
        )
        return (
            f'<div style="display:flex;gap:1px;margin-left:{self.label_width}px;'
            f'font-size:11px;line-height:16px">{cols}</div>'
        )

    def _row_labels(self) -> str:
        rows = []
        for r in range(self.grid.rows):
            top = 1 + (BLOCK_GAP if self._block_start(r) else 0) if r else 0
            rows.append(
                f'<div style="height:{CELL_HEIGHT}px;margin-top:{top}px;display:flex;'
                f'align-items:center;justify-content:flex-end;padding-right:6px">'
                f"{html.escape(self.names[r])}</div>"
            )
        return (
            f'<div style="width:{self.label_width}px;font-size:11px;'
            f'box-sizing:border-box">{"".join(rows)}</div>'
        )


@functools.lru_cache(maxsize=64)
def _buttons(rows: int, cols: int, shown: range) -> list[int]:
    return [r * cols + c for r in range(rows) for c in shown]


def hover_groups(grid: Grid) -> list[list[int]]:
    """For each lane (each bank of a memory grid), the indices of the cells it holds."""
    groups: dict[int, list[int]] = {}
    for i, cell in enumerate(grid.cells):
        keys = [grid.bank(cell)] if grid.kind == "memory" else sorted(cell.lanes)
        for key in keys:
            if key is not None:
                groups.setdefault(key, []).append(i)
    return [groups[k] for k in sorted(groups)]
