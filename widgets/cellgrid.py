"""The clickable grid inside every view, built from stock ipywidgets and a few models only.

One ``ToggleButtons`` holds every cell (its buttons are laid out as a CSS grid), one ``HTML``
carries a ``<style>`` block with the cells' colours, and two more ``HTML`` widgets hold the
row and column labels. Repainting (a new lane, say) sends one message: the new style text.
A grid of 128 cells is therefore 5 widget models, not hundreds of Buttons: the front end
renders it at once, and no output can race ahead of its many models.

A grid wider than a notebook column (:data:`WIDTH` px) is shown a page of columns at a time
(a "columns" selector; every cell keeps its index, the other pages' buttons are hidden), so
its cells keep their size and nothing scrolls sideways. A grid of more than :data:`MAX_CELLS`
cells (a wgmma accumulator of 64 x 256) has buttons for the page shown only, relabelled when
another page is chosen; its cells still answer clicks by their index in the whole grid.

Hovering a cell outlines every cell of the same lane (copies included) and costs no message
to the kernel: the frame's small handler (:data:`FRONT`) names the hovered cell's groups in
the grid's ``data-hover`` attribute and one CSS rule per group outlines its cells; the tooltip
is the cell's formula. (The first version did it with CSS ``:has`` rules alone, which the
browser re-evaluated for every button whenever JupyterLab restyled the notebook: 1.1 of the
1.2 s such a restyle took in a notebook of seventeen grids.)

A press on a cell is kept from the notebook around it (:data:`FRONT`), and the
style text is written for a page with many grids. It is two ``<style>`` blocks: the
frame (the grid's tracks, the cell size, block gaps, the page shown, the hover rules), sent
again only for another page, and the looks (each cell's colours), which a click or a lane
change replaces; every rule of the looks ends in the buttons' class, so a new text restyles
the buttons only. Cells that look alike share one rule (``:is(:nth-child(3),
:nth-child(9))``), and the hover rules end in the buttons' class too, so the browser checks
them against buttons only: JupyterLab restyles the whole notebook when a click focuses it,
and with one rule per cell and rules that end in ``:is(...)`` alone, that restyle grew with
every grid on the page (hundreds of ms in a notebook of nine grids).
"""

from __future__ import annotations

import html
import itertools
import math

from . import draw
from .geometry import WIDTH, page_columns
from .model import Grid

__all__ = ["CellGrid", "CELL_HEIGHT", "WIDTH", "hover_groups", "page_columns"]

CELL_HEIGHT = 22  # px
BLOCK_GAP = 5  # extra px above the first row of each block
BUTTON = ".widget-toggle-button"
MAX_CELLS = 1024  # buttons one grid may hold; a larger grid holds one page of them
_ids = itertools.count()
# The grid's one piece of script, installed once per grid by the frame's HTML (an empty
# image's error handler: ipywidgets' HTML runs no script). A mouse press on a cell stays with
# the grid: JupyterLab would otherwise activate and focus the notebook cell around it,
# restyling the whole notebook twice (2 x 70 ms in a notebook of nine grids); the click goes
# on to the button. Hovering a cell writes its hover groups (the frame's data-groups, one
# entry per button) into the cells' data-hover, which the frame's CSS outlines.
FRONT = (
    '<img hidden alt="" src="" onerror="var g=this.closest(\'.tirx-grid\');'
    "if(g&amp;&amp;!g.tirxQuiet){g.tirxQuiet=1;g.addEventListener('mousedown',function(e){"
    "if(e.button===0&amp;&amp;e.target.closest('.tirx-cells')){e.stopPropagation();"
    "e.preventDefault();}});g.addEventListener('mouseover',function(e){"
    "var b=e.target.closest('.widget-toggle-button'),c=g.querySelector('.tirx-cells'),"
    "s=g.querySelector('.tirx-hover-groups');if(!b||!c||!s)return;"
    "var k=Array.prototype.indexOf.call(b.parentNode.children,b);"
    "c.setAttribute('data-hover',(s.dataset.groups.split(' ')[k]||'').replace(/,/g,' '));});"
    "g.addEventListener('mouseleave',function(){var c=g.querySelector('.tirx-cells');"
    "if(c)c.removeAttribute('data-hover');});}\">"
)


class CellGrid:
    """Cells of ``grid`` drawn with ``styles`` (see :func:`widgets.draw.cell_styles`);
    ``on_click(index)`` runs when a cell is clicked.

    Optional: ``block_cols`` (a gap before every block of that many columns), ``row_labels``
    and ``tooltips`` (replacing the grid's own), ``hover`` (groups of cell indices outlined
    together on hover; default: the cells of each lane)."""

    def __init__(self, grid: Grid, styles, on_click, *, block_cols: int = 0, row_labels=None,
                 tooltips=None, hover=None):  # fmt: skip
        import ipywidgets as w

        self.grid = grid
        self.styles = list(styles)
        self.on_click = on_click
        self.block_cols = block_cols
        self.names = list(row_labels or [grid.row_label(r) for r in range(grid.rows)])
        self.tips = list(tooltips) if tooltips is not None else None
        self.hover = hover_groups(grid) if hover is None else [list(g) for g in hover]
        self.uid = f"tirx-g{next(_ids)}"
        longest = max((len(s.label) + s.marked for s in self.styles), default=3)
        self.width = max(40, round(6.7 * longest) + 8)  # 11 px monospace: 6.6 px a character
        self.label_width = 8 + 7 * max((len(n) for n in self.names), default=0)
        self.page_cols = page_columns(grid.cols, self.width + 1, self.label_width, block_cols)
        self.windowed = len(grid.cells) > MAX_CELLS  # buttons for the shown page only
        if self.windowed:
            fit = max(MAX_CELLS // grid.rows, 1)
            unit = block_cols if block_cols and block_cols <= fit else 8 if fit >= 8 else 1
            self.page_cols = max(min(self.page_cols, fit) // unit * unit, 1)
        self.pages = math.ceil(grid.cols / self.page_cols)
        self.page = self._shown_page = 0
        self.frame = w.HTML(self._frame_text(), layout=w.Layout(margin="0"))
        self.css = w.HTML(self._css_text(), layout=w.Layout(margin="0"))
        self.cells = w.ToggleButtons(
            options=self._options(), value=None, tooltips=self._tooltips(),
            layout=w.Layout(margin="0", width="max-content"),
        )  # fmt: skip
        self.cells.add_class("tirx-cells")
        self.cells.add_class(self.uid)
        self.cells.observe(self._clicked, names="index")
        self.header = w.HTML(self._header(), layout=w.Layout(margin="0"))
        rows = w.HTML(self._row_labels(), layout=w.Layout(margin="0"))
        parts = [self.frame, self.css, self.header, w.HBox([rows, self.cells])]
        if self.pages > 1:
            self.pager = w.Dropdown(
                options=[(self._page_name(p), p) for p in range(self.pages)], value=0,
                description="columns", layout=w.Layout(width="190px"),
            )  # fmt: skip
            self.pager.add_class("tirx-pager")
            self.pager.observe(lambda ch: self.set_page(ch["new"]), names="value")
            parts.insert(1, self.pager)
        self.widget = w.VBox(parts)
        self.widget.add_class("tirx-grid")

    # ---------------------------------------------------------------- updates

    @property
    def buttons(self) -> list[int]:
        """The cell index of each button, in order: every cell, or the shown page's."""
        if not self.windowed:
            return list(range(len(self.styles)))
        cols, g = self._shown(), self.grid
        return [r * g.cols + c for r in range(g.rows) for c in cols]

    def update(self, styles) -> None:
        """Repaint with new styles; relabels the buttons only when a label changed."""
        styles = list(styles)
        relabel = [s.label for s in styles] != [s.label for s in self.styles] or [
            s.marked for s in styles
        ] != [s.marked for s in self.styles]
        self.styles = styles
        if relabel:
            self._relabel()
        self.css.value = self._css_text()

    def _relabel(self) -> None:
        with self.cells.hold_sync():
            self.cells.options = self._options()
            self.cells.tooltips = self._tooltips()

    def click(self, index: int) -> None:
        """What a click on cell ``index`` does (the front end sets the same trait)."""
        if self.windowed:
            self.set_page(self.page_of(index))
            index = self.buttons.index(index)
        self.cells.index = index

    def set_page(self, page: int) -> None:
        """Show the ``page``-th page of columns (and select it in the selector)."""
        page = min(max(int(page), 0), self.pages - 1)
        if self.pages > 1 and self.pager.value != page:
            self.pager.value = page  # comes back here through the observer
            return
        if page == self.page and getattr(self, "_shown_page", None) == page:
            return
        self.page = self._shown_page = page
        self.header.value = self._header()
        self.frame.value = self._frame_text()
        if self.windowed:
            self._relabel()
            self.css.value = self._css_text()

    def page_of(self, index: int) -> int:
        """The page of columns that shows cell ``index``."""
        return (index % self.grid.cols) // self.page_cols

    def _clicked(self, change) -> None:
        index = change["new"]
        if index is None:
            return
        self.cells.index = None  # so the same cell can be clicked again
        self.on_click(self.buttons[index] if self.windowed else index)

    # ---------------------------------------------------------------- pieces

    def _page_name(self, page: int) -> str:
        first = page * self.page_cols
        last = min(first + self.page_cols, self.grid.cols) - 1
        return f"{first}–{last} of {self.grid.cols}"

    def _shown(self) -> range:
        first = self.page * self.page_cols
        return range(first, min(first + self.page_cols, self.grid.cols))

    def _options(self):
        return [(("✗" if self.styles[i].marked else "") + self.styles[i].label, k)
                for k, i in enumerate(self.buttons)]  # fmt: skip

    def _tooltips(self):
        if self.tips is not None:
            return [self.tips[i] for i in self.buttons]
        cells = self.grid.cells
        return [f"{cells[i].coord}: {self.grid.label(cells[i])}" for i in self.buttons]

    def _block_col_start(self, col: int) -> bool:
        first = self._shown().start
        return col > first and self.block_cols > 0 and col % self.block_cols == 0

    def _block_start(self, row: int) -> bool:
        return row > 0 and self.grid.block_rows > 1 and row % self.grid.block_rows == 0

    def _frame_text(self) -> str:
        """What stays while cells are clicked: tracks, cell size, gaps, page, hover."""
        u, g = self.uid, self.grid
        rules = [
            f".{u} > div {{display:grid;grid-template-columns:{self._tracks()};gap:1px}}",
            f".{u} {BUTTON} {{width:{self.width}px;height:{CELL_HEIGHT}px;margin:0;"
            "padding:0 2px;font-size:11px;font-family:monospace;border-radius:2px;"
            "box-shadow:none;opacity:1}",
        ]
        gaps: dict[str, list[int]] = {}
        for k, i in enumerate(self.buttons):
            gap = ""
            if self._block_start(i // g.cols):
                gap += f"margin-top:{BLOCK_GAP}px;"
            if self._block_col_start(i % g.cols):
                gap += f"margin-left:{BLOCK_GAP}px;"
            if gap:
                gaps.setdefault(gap, []).append(k)
        rules += [f".{u} {BUTTON}{_nth(cells)} {{{rule}}}" for rule, cells in gaps.items()]
        if self.pages > 1 and not self.windowed:
            shown = ",".join(f":nth-child({g.cols}n+{c + 1})" for c in self._shown())
            rules.append(f".{u} {BUTTON}:not({shown}) {{display:none}}")
        rules.extend(self._hover_rules())
        return f"<style>{''.join(rules)}</style>{self._groups_html()}{FRONT}"

    def _css_text(self) -> str:
        """The cells' looks, one rule per look."""
        looks: dict[str, list[int]] = {}
        for k, i in enumerate(self.buttons):
            s = self.styles[i]
            fill, ink = ("#222222", "#ffffff") if s.focused else (s.fill, s.ink)
            rule = f"background:{fill};color:{ink}"
            if s.highlighted or s.marked:
                rule += ";font-weight:bold"
            if s.marked:
                rule += f";box-shadow:inset 0 0 0 2px {draw.MARK_COLOR}"
            elif s.highlighted:
                rule += ";box-shadow:inset 0 0 0 1px #000000"
            looks.setdefault(rule, []).append(k)
        rules = [f".{self.uid} {BUTTON}{_nth(cells)} {{{rule}}}" for rule, cells in looks.items()]
        return f"<style>{''.join(rules)}</style>"

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

    def _groups_html(self) -> str:
        """Each button's hover groups (``3`` or ``3,7``; ``-`` for none), for the handler."""
        of: list[list[int]] = [[] for _ in self.buttons]
        for n, group in enumerate(self._hover_groups()):
            for k in group:
                of[k].append(n)
        text = " ".join(",".join(map(str, gs)) or "-" for gs in of)
        return f'<span hidden class="tirx-hover-groups" data-groups="{text}"></span>'

    def _hover_rules(self) -> list[str]:
        """Hovering any cell of a group outlines the whole group (a lane and its copies)."""
        u, rules = self.uid, []
        for n, group in enumerate(self._hover_groups()):
            if len(group) < 2:
                continue
            rules.append(
                f'.{u}[data-hover~="{n}"] > div > {BUTTON}{_nth(group)}'
                "{outline:2px solid #111111;outline-offset:-2px;z-index:1}"
            )
        rules.append(f".{u} {BUTTON}:hover{{filter:brightness(0.92)}}")
        return rules

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
            f'<div class="tirx-rows" style="width:{self.label_width}px;font-size:11px;'
            f'box-sizing:border-box">{"".join(rows)}</div>'
        )


def _nth(cells) -> str:
    """A selector suffix matching the buttons of ``cells`` (0-based indices)."""
    return ":is(" + ",".join(f":nth-child({i + 1})" for i in cells) + ")"


def hover_groups(grid: Grid) -> list[list[int]]:
    """For each lane (each bank of a memory grid), the indices of the cells it holds."""
    groups: dict[int, list[int]] = {}
    for i, cell in enumerate(grid.cells):
        keys = [grid.bank(cell)] if grid.kind == "memory" else sorted(cell.lanes)
        for key in keys:
            if key is not None:
                groups.setdefault(key, []).append(i)
    return [groups[k] for k in sorted(groups)]
