"""The clickable grid inside every view, built from stock ipywidgets and a few models only.

One ``ToggleButtons`` holds every cell (its buttons are laid out as a CSS grid), one ``HTML``
carries a ``<style>`` block with each cell's colours, and two more ``HTML`` widgets hold the
row and column labels. Repainting (a new lane, say) sends one message: the new style text.
A grid of 128 cells is therefore 5 widget models, not hundreds of Buttons: the front end
renders it at once, and no output can race ahead of its many models.

Hovering a cell outlines every cell of the same lane (copies included) with CSS ``:has``
rules only, so it costs no message to the kernel; the tooltip is the cell's formula.
"""

from __future__ import annotations

import html
import itertools

from . import draw
from .model import Grid

__all__ = ["CellGrid", "CELL_HEIGHT", "hover_groups"]

CELL_HEIGHT = 22  # px
BLOCK_GAP = 5  # extra px above the first row of each block
_ids = itertools.count()


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
        self.css = w.HTML(self._css_text(), layout=w.Layout(margin="0"))
        self.cells = w.ToggleButtons(
            options=self._options(), value=None, tooltips=self._tooltips(),
            layout=w.Layout(margin="0", width="max-content"),
        )  # fmt: skip
        self.cells.add_class("tirx-cells")
        self.cells.add_class(self.uid)
        self.cells.observe(self._clicked, names="index")
        header = w.HTML(self._header(), layout=w.Layout(margin="0"))
        rows = w.HTML(self._row_labels(), layout=w.Layout(margin="0"))
        self.widget = w.VBox([self.css, header, w.HBox([rows, self.cells])])
        self.widget.add_class("tirx-grid")

    # ---------------------------------------------------------------- updates

    def update(self, styles) -> None:
        """Repaint with new styles; relabels the buttons only when a label changed."""
        styles = list(styles)
        relabel = [s.label for s in styles] != [s.label for s in self.styles] or [
            s.marked for s in styles
        ] != [s.marked for s in self.styles]
        self.styles = styles
        if relabel:
            self.cells.options = self._options()
            self.cells.tooltips = self._tooltips()
        self.css.value = self._css_text()

    def click(self, index: int) -> None:
        """What a click on cell ``index`` does (the front end sets the same trait)."""
        self.cells.index = index

    def _clicked(self, change) -> None:
        index = change["new"]
        if index is None:
            return
        self.cells.index = None  # so the same cell can be clicked again
        self.on_click(index)

    # ---------------------------------------------------------------- pieces

    def _options(self):
        return [(("✗" if s.marked else "") + s.label, i) for i, s in enumerate(self.styles)]

    def _tooltips(self):
        if self.tips is not None:
            return self.tips
        return [f"{c.coord}: {self.grid.label(c)}" for c in self.grid.cells]

    def _block_col_start(self, col: int) -> bool:
        return col > 0 and self.block_cols > 0 and col % self.block_cols == 0

    def _block_start(self, row: int) -> bool:
        return row > 0 and self.grid.block_rows > 1 and row % self.grid.block_rows == 0

    def _css_text(self) -> str:
        u, g = self.uid, self.grid
        rules = [
            f".{u} > div {{display:grid;grid-template-columns:{self._tracks()};gap:1px}}",
            f".{u} .widget-toggle-button {{width:{self.width}px;height:{CELL_HEIGHT}px;margin:0;"
            "padding:0 2px;font-size:11px;font-family:monospace;border-radius:2px;"
            "box-shadow:none;opacity:1}",
        ]
        for i, s in enumerate(self.styles):
            fill, ink = ("#222222", "#ffffff") if s.focused else (s.fill, s.ink)
            rule = f"background:{fill};color:{ink}"
            if s.highlighted or s.marked:
                rule += ";font-weight:bold"
            if s.marked:
                rule += f";box-shadow:inset 0 0 0 2px {draw.MARK_COLOR}"
            elif s.highlighted:
                rule += ";box-shadow:inset 0 0 0 1px #000000"
            if self._block_start(i // g.cols):
                rule += f";margin-top:{BLOCK_GAP}px"
            if self._block_col_start(i % g.cols):
                rule += f";margin-left:{BLOCK_GAP}px"
            rules.append(f".{u} .widget-toggle-button:nth-child({i + 1}) {{{rule}}}")
        rules.extend(self._hover_rules())
        return f"<style>{''.join(rules)}</style>"

    def _tracks(self) -> str:
        """Column widths; a block's first column is wider by the gap its margin takes."""
        if not self.block_cols:
            return f"repeat({self.grid.cols},{self.width}px)"
        return " ".join(f"{self.width + BLOCK_GAP * self._block_col_start(c)}px"
                        for c in range(self.grid.cols))  # fmt: skip

    def _hover_rules(self) -> list[str]:
        """Hovering any cell of a group outlines the whole group (a lane and its copies)."""
        u, rules = self.uid, []
        for group in self.hover:
            if len(group) < 2:
                continue
            kids = ",".join(f":nth-child({i + 1})" for i in group)
            rules.append(
                f".{u} > div:has(> :is({kids}):hover) > :is({kids})"
                "{outline:2px solid #111111;outline-offset:-2px;z-index:1}"
            )
        rules.append(f".{u} .widget-toggle-button:hover{{filter:brightness(0.92)}}")
        return rules

    def _header(self) -> str:
        cols = "".join(
            f'<div style="width:{self.width}px;text-align:center'
            f'{f";margin-left:{BLOCK_GAP}px" if self._block_col_start(c) else ""}">{c}</div>'
            for c in range(self.grid.cols)
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


def hover_groups(grid: Grid) -> list[list[int]]:
    """For each lane (each bank of a memory grid), the indices of the cells it holds."""
    groups: dict[int, list[int]] = {}
    for i, cell in enumerate(grid.cells):
        keys = [grid.bank(cell)] if grid.kind == "memory" else sorted(cell.lanes)
        for key in keys:
            if key is not None:
                groups.setdefault(key, []).append(i)
    return [groups[k] for k in sorted(groups)]
