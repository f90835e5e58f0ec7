"""Pure drawing: a :class:`~widgets.model.Grid` as a text table, a matplotlib Figure (Agg, no
pyplot state) or an SVG string. No widgets, no IPython; tests call these directly.

Every renderer takes the same options and computes each cell's look with :func:`cell_styles`:

* ``color_by``: ``"lane"`` (one colour per lane), ``"slot"`` (one per register slot) or
  ``"bank"`` (one per shared-memory bank); the default suits the grid's kind;
* ``lane``: highlight the cells this lane holds (others fade); for memory grids it selects a bank;
* ``labels``: replace the cell texts (trace values, say);
* ``marks``: indices of cells to flag (a probe's disagreements), ``focus``: one cell to outline.
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass

from .model import Grid, fade, lane_color, slot_color, text_color

__all__ = ["CellStyle", "cell_styles", "text_table", "figure", "svg", "legend_text"]

MARK_COLOR = "#d62728"


@dataclass(frozen=True)
class CellStyle:
    fill: str
    ink: str
    label: str
    highlighted: bool = False  # the selected lane (or bank) holds it
    marked: bool = False
    focused: bool = False


def default_color_by(grid: Grid) -> str:
    return "bank" if grid.kind == "memory" else "lane"


def cell_styles(
    grid: Grid, *, color_by=None, lane=None, labels=None, marks=(), focus=None, only=None
) -> list[CellStyle]:
    """The look of every cell, in the grid's order (of the cells ``only`` lists, in its order,
    when given: a widget asks for the cells it shows)."""
    color_by = color_by or default_color_by(grid)
    marks = set(marks)
    out = []
    cells = grid.cells
    for i in range(len(cells)) if only is None else only:
        cell = cells[i]
        if color_by == "bank":
            key = grid.bank(cell)
            fill = lane_color(key)
        elif color_by == "slot":
            fill = slot_color(cell.slot)
        else:
            fill = lane_color(cell.lane)
        if lane is None:
            hit = False
        elif grid.kind == "memory":
            hit = grid.bank(cell) == lane
        else:
            hit = lane in cell.lanes
        if lane is not None and not hit:
            fill = fade(fill, 0.82)
        label = labels[i] if labels is not None else grid.label(cell)
        out.append(
            CellStyle(
                fill, text_color(fill), label, hit, i in marks, focus is not None and i == focus
            )
        )
    return out


def legend_text(grid: Grid, color_by=None) -> str:
    """One line saying what the cells and colours mean."""
    color_by = color_by or default_color_by(grid)
    if grid.legend:
        what = grid.legend
    elif grid.kind == "memory":
        what = f"cell = element address; colour = bank ({grid.element_bytes}-byte elements)"
    elif grid.kind == "addresses":
        what = "cell = the lane that supplies this row's address"
    else:
        what = f"cell = {''.join(a + '/' for a in grid.thread_axes)}lane:{grid.slot_name}"
        what += "; colour = " + ("register slot" if color_by == "slot" else "lane")
    if grid.replicated:
        what += "; ×n = the element has n copies (first shown)"
    return what


def text_table(grid: Grid, *, lane=None, labels=None, marks=(), color_by=None) -> str:
    """The grid as aligned text. ``[x]`` marks the selected lane's cells, ``!x`` flagged ones."""
    styles = cell_styles(grid, color_by=color_by, lane=lane, labels=labels, marks=marks)
    texts = []
    for s in styles:
        t = s.label
        if s.marked:
            t = "!" + t
        if s.highlighted:
            t = f"[{t}]"
        texts.append(t)
    width = max(max((len(t) for t in texts), default=1), len(str(grid.cols - 1))) + 1
    head_w = max((len(grid.row_label(r)) for r in range(grid.rows)), default=0) + 1
    lines = [grid.title, legend_text(grid, color_by)]
    lines.append(" " * head_w + "".join(f"{c:>{width}}" for c in range(grid.cols)))
    for r in range(grid.rows):
        if r and grid.block_rows > 1 and r % grid.block_rows == 0:
            lines.append(" " * head_w + "-" * (width * grid.cols))
        row = texts[r * grid.cols : (r + 1) * grid.cols]
        lines.append(f"{grid.row_label(r):>{head_w}}" + "".join(f"{t:>{width}}" for t in row))
    if marks:
        lines.append(f"! = {len(set(marks))} element(s) where the drawing and the machine disagree")
    return "\n".join(lines)


# ----------------------------------------------------------------------- matplotlib


def _cell_size(grid: Grid, styles) -> tuple[float, float]:
    longest = max((len(s.label) for s in styles), default=3)
    return max(0.42, 0.085 * longest + 0.16), 0.3


def figure(
    grid: Grid, *, lane=None, labels=None, marks=(), color_by=None, focus=None, title=None,
    note: str = "",
):  # fmt: skip
    """A matplotlib Figure (Agg canvas). Each cell is a Rectangle with ``gid`` ``cell-<i>`` and
    a Text with the same gid, so tests can read colours and labels back. ``note`` is printed
    under the legend (a check's verdict, say)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    styles = cell_styles(
        grid, color_by=color_by, lane=lane, labels=labels, marks=marks, focus=focus
    )
    cw, ch = _cell_size(grid, styles)
    width = max(cw * grid.cols + 0.9, 3.0)
    heading = title or grid.title
    if lane is not None:
        heading += f"  (bank {lane})" if grid.kind == "memory" else f"  (lane {lane})"
    per_line = int(width * 13)  # characters of 6.5-8 pt text per line
    heading = textwrap.fill(heading, per_line)
    footer = "\n".join(_phrases(legend_text(grid, color_by), per_line)
                       + (_phrases(note, per_line) if note else []))  # fmt: skip
    top = 0.35 + 0.14 * heading.count("\n") + 0.2
    bottom = 0.15 + 0.12 * (footer.count("\n") + 1)
    height = ch * grid.rows + top + bottom
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes(
        (0.55 / width, bottom / height, cw * grid.cols / width, ch * grid.rows / height)
    )
    ax.set_xlim(0, grid.cols)
    ax.set_ylim(grid.rows, 0)
    ax.set_xticks([c + 0.5 for c in range(grid.cols)], [str(c) for c in range(grid.cols)])
    ax.set_yticks(
        [r + 0.5 for r in range(grid.rows)], [grid.row_label(r) for r in range(grid.rows)]
    )
    ax.xaxis.tick_top()
    ax.tick_params(length=0, labelsize=7)
    for spine in ax.spines.values():
        spine.set_visible(False)
    for i, s in enumerate(styles):
        r, c = divmod(i, grid.cols)
        edge = MARK_COLOR if s.marked else ("#000000" if s.focused or s.highlighted else "#ffffff")
        lw = 2.2 if s.marked or s.focused else (1.2 if s.highlighted else 0.6)
        ax.add_patch(
            Rectangle((c, r), 1, 1, facecolor=s.fill, edgecolor=edge, linewidth=lw, gid=f"cell-{i}")
        )
        ax.text(
            c + 0.5, r + 0.5, ("✗" if s.marked else "") + s.label, ha="center", va="center",
            fontsize=7, color=s.ink, fontweight="bold" if s.highlighted else "normal",
            gid=f"cell-{i}",
        )  # fmt: skip
    if grid.block_rows > 1:
        for r in range(grid.block_rows, grid.rows, grid.block_rows):
            ax.axhline(r, color="#222222", linewidth=2.5, zorder=5)
    fig.text(0.5, 1 - 0.08 / height, heading, fontsize=8, ha="center", va="top")
    fig.text(0.01, 0.06 / height, footer, fontsize=6.5, color="#444444", va="bottom")
    return fig


def _phrases(sentence: str, width: int) -> list[str]:
    """Lines broken between the sentence's ``;`` phrases, never inside a word."""
    from .picture import legend_lines

    return legend_lines(sentence, width)


# ----------------------------------------------------------------------- SVG


def svg(grid: Grid, *, lane=None, labels=None, marks=(), color_by=None, focus=None) -> str:
    """A self-contained SVG. Each cell is a ``<rect class="tirx-cell">`` with ``data-lane``,
    ``data-slot`` and ``data-coord`` attributes."""
    styles = cell_styles(
        grid, color_by=color_by, lane=lane, labels=labels, marks=marks, focus=focus
    )
    longest = max((len(s.label) for s in styles), default=3)
    cw, ch = max(34, 7 * longest + 12), 20
    left = 8 + 7 * max((len(grid.row_label(r)) for r in range(grid.rows)), default=0)
    top = 18
    w, h = left + cw * grid.cols + 4, top + ch * grid.rows + 18
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="tirx-grid" width="{w}" height="{h}" '
        f'font-family="monospace" font-size="11">'
    ]
    for c in range(grid.cols):
        out.append(f'<text x="{left + c * cw + cw / 2}" y="12" text-anchor="middle">{c}</text>')
    for r in range(grid.rows):
        out.append(
            f'<text x="{left - 4}" y="{top + r * ch + 14}" text-anchor="end">'
            f"{html.escape(grid.row_label(r))}</text>"
        )
    for i, (cell, s) in enumerate(zip(grid.cells, styles)):
        r, c = divmod(i, grid.cols)
        x, y = left + c * cw, top + r * ch
        stroke = MARK_COLOR if s.marked else ("#000" if s.focused or s.highlighted else "#fff")
        sw = 2.5 if s.marked or s.focused else (1.5 if s.highlighted else 1)
        coord = ",".join(map(str, cell.coord))
        out.append(
            f'<rect class="tirx-cell" data-index="{i}" data-coord="{coord}" '
            f'data-lane="{"" if cell.lane is None else cell.lane}" '
            f'data-slot="{"" if cell.slot is None else cell.slot}" x="{x}" y="{y}" '
            f'width="{cw}" height="{ch}" fill="{s.fill}" stroke="{stroke}" stroke-width="{sw}">'
            f"<title>{coord}: {html.escape(grid.label(cell))}</title></rect>"
        )
        weight = ' font-weight="bold"' if s.highlighted else ""
        out.append(
            f'<text x="{x + cw / 2}" y="{y + 14}" text-anchor="middle" fill="{s.ink}"{weight}>'
            f"{'✗' if s.marked else ''}{html.escape(s.label)}</text>"
        )
    if grid.block_rows > 1:
        for r in range(grid.block_rows, grid.rows, grid.block_rows):
            y = top + r * ch
            out.append(
                f'<line x1="{left}" x2="{left + cw * grid.cols}" y1="{y}" y2="{y}" '
                'stroke="#333" stroke-width="2"/>'
            )
    out.append(
        f'<text x="2" y="{h - 4}" fill="#555" font-size="10">'
        f"{html.escape(legend_text(grid, color_by))}</text>"
    )
    out.append("</svg>")
    return "".join(out)
