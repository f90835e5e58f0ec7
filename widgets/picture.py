"""A :class:`~widgets.fragment.Fragment` as SVG (crisp anywhere), PNG (matplotlib, any dpi)
and, through :mod:`widgets.tikz`, TikZ. One geometry serves all three, so they agree.

The SVG is interactive without JavaScript: hovering a cell outlines every cell its lane holds
(copies included, via CSS ``:has``) and shows the cell's formula in the status line; every
cell is a ``<rect class="tirx-el">`` with ``data-index``, ``data-lane``, ``data-coord``.
"""

from __future__ import annotations

import html
import itertools
from dataclasses import dataclass
from pathlib import Path

from .fragment import Fragment
from .geometry import MAX_ROWS, WIDTH, Geometry, block_edges, geometry, legend_lines  # noqa: F401
from .looks import MARK_COLOR, CellLook, color_key, looks  # noqa: F401 - the picture's vocabulary
from .model import lane_color, text_color

__all__ = [
    "CellLook", "looks", "legend_lines", "svg", "png", "figure", "save", "linked_style",
    "MARK_COLOR", "LINK_COLOR", "geometry", "Geometry",
]  # fmt: skip

_ids = itertools.count()


# ----------------------------------------------------------------------- SVG


def svg(frag: Fragment, *, lane=None, marks=(), labels=None, note: str = "", hover=True,
        path=None, page: int = 0, width: float = WIDTH, max_rows: int = MAX_ROWS,
        cell_looks=None) -> str:  # fmt: skip
    """The picture as a self-contained SVG string (also written to ``path`` if given): page
    ``page`` of a fragment too wide and too tall to wrap whole (:mod:`widgets.geometry`),
    at most ``width`` px wide. ``cell_looks`` (a view's own colours) replaces the looks."""
    cells = cell_looks or looks(frag, lane=lane, marks=marks, labels=labels)
    g = geometry(frag, cells, note, page, width, max_rows)
    uid = f"tirx-f{next(_ids)}"
    e = html.escape
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="tirx-fragment {uid}" '
        f'width="{g.width:.0f}" height="{g.height:.0f}" viewBox="0 0 {g.width:.0f} '
        f'{g.height:.0f}" font-family="DejaVu Sans Mono, monospace" font-size="11">',
        f'<rect width="{g.width:.0f}" height="{g.height:.0f}" fill="#ffffff"/>',
    ]
    # the cells' texts are centred and let the pointer through to their cell
    out.append(f"<style>.{uid} .tirx-c text{{text-anchor:middle;pointer-events:none}}</style>")
    if hover:
        out.append(_hover_style(frag, uid, g))
    for t in _labels(frag, g):
        out.append(_svg_text(t))
    focusable = ' tabindex="-1"' if hover else ""  # a click focuses the cell (linked_style)
    # a cell's tooltip is its own line of the explanation; the rule every cell shares (the
    # ISA's formula) is said once, in the legend, not in each of hundreds of cells
    tips = [frag.describe(i).splitlines()[0] if frag.formula else frag.describe(i)
            for i in range(len(frag.elements))]  # fmt: skip
    for i, (el, s) in enumerate(zip(frag.elements, cells)):
        at = g.xy(i, frag.cols)
        if at is None:
            continue
        x, yy = at
        lanes = " ".join(f"l{lane}" for lane in sorted(el.lanes))
        stroke, sw = (MARK_COLOR, 2.5) if s.marked else (
            ("#000", 1.6) if s.highlighted else ("#fff", 0.8))  # fmt: skip
        coord = ",".join(map(str, el.coord))
        out.append(
            f'<g class="tirx-c c{i} {coord_class(el.coord)} {lanes}"{focusable}>'
            f'<rect class="tirx-el" data-index="{i}" '
            f'data-coord="{coord}" data-lane="{"" if el.lane is None else el.lane}" '
            f'x="{_n(x)}" y="{_n(yy)}" width="{_n(g.cw)}" height="{_n(g.ch)}" fill="{s.fill}" '
            f'stroke="{stroke}" stroke-width="{sw}"><title>{e(tips[i])}</title></rect>'
            f'<text x="{_n(x + g.cw / 2)}" y="{_n(yy + 14)}"'
            f"{'' if s.ink in ('#000', '#000000') else f' fill={chr(34)}{s.ink}{chr(34)}'}"
            f"{' font-weight=' + chr(34) + 'bold' + chr(34) if s.highlighted else ''}>"
            f"{'✗' if s.marked else ''}{e(s.label)}</text></g>"
        )
    for x1, y1, x2, y2, width in _edges(frag, g):
        out.append(f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y1:.1f}" y2="{y2:.1f}" '
                   f'stroke="#222" stroke-width="{width}"/>')  # fmt: skip
    for x, y, fill, ink, text in key_swatches(frag, g):
        out.append(f'<rect class="tirx-key" x="{x}" y="{y:.1f}" width="22" height="16" '
                   f'fill="{fill}"/><text x="{x + 11}" y="{y + 12:.1f}" text-anchor="middle" '
                   f'font-size="9" fill="{ink}">{text}</text>')  # fmt: skip
    yy = g.bands[-1].top + g.ch * frag.rows + 8 + g.key + 13 * len(g.legend)
    if hover and _status_line(frag, g):
        yy += 13
        for i in range(len(frag.elements)):
            if g.xy(i, frag.cols) is None:
                continue
            tip = frag.describe(i).splitlines()[0]
            out.append(f'<text class="tirx-tip t{i}" x="6" y="{yy:.1f}" fill="#000" '
                       f'font-size="10" display="none">{e(tip)}</text>')  # fmt: skip
    out.append("</svg>")
    text = "".join(out)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


@dataclass(frozen=True)
class Label:
    """A text of the picture (title, axis, block and index labels, legend), in SVG px."""

    x: float
    y: float
    text: str
    size: float = 11
    anchor: str = "middle"
    bold: bool = False
    italic: bool = False
    color: str = "#000"
    rotate: bool = False


def _labels(frag: Fragment, g: Geometry) -> list[Label]:
    """Every text but the cells': title, axis names, block names, row and column numbers
    (again over each band) and the legend."""
    out, y = [], 8
    for line in g.title:
        y += 15
        out.append(Label(g.width / 2, y, line, 12, bold=True))
    grid_w = g.cw * max(len(b.cols) for b in g.bands)
    out.append(Label(g.left + grid_w / 2, y + 15, f"{frag.axes[1]} →", italic=True, color="#333"))
    down, across = frag.block_labels
    bc = frag.block_cols
    for band in g.bands:
        x0 = g.left - band.cols.start * g.cw  # where column 0 would be
        for i, name in enumerate(across):
            lo, hi = max(i * bc, band.cols.start), min((i + 1) * bc, band.cols.stop)
            if lo < hi:
                out.append(Label(x0 + (lo + hi) / 2 * g.cw, band.top - 18, name, bold=True,
                                 color="#333"))  # fmt: skip
        for c in band.cols:
            out.append(Label(x0 + (c + 0.5) * g.cw, band.top - 4, str(c), 9, color="#555"))
        mid = band.top + g.ch * frag.rows / 2
        out.append(Label(12, mid, f"← {frag.axes[0]}", italic=True, color="#333", rotate=True))
        for r in range(frag.rows):
            out.append(Label(g.left - 4, band.top + r * g.ch + 14, str(r), 9, "end",
                             color="#555"))  # fmt: skip
        for i, name in enumerate(down):
            yy = band.top + (i + 0.5) * frag.block_rows * g.ch
            out.append(Label(g.left - 24, yy, name, anchor="end", bold=True, color="#333"))
    yy = g.bands[-1].top + g.ch * frag.rows + 8 + g.key
    if g.key:
        out.append(Label(6, yy - 8, frag.key_name or "bank", 10, "start", color="#444"))
    for line in g.legend:
        yy += 13
        out.append(Label(6, yy, line, 10, "start", color="#444"))
    return out


def key_swatches(frag: Fragment, g: Geometry) -> list[tuple[float, float, str, str, str]]:
    """The colour key of a picture whose colours are not written in its cells (a bank view:
    32 swatches, each its bank's colour and number): (x, y, fill, ink, text), 22 x 16 px."""
    if not g.key:
        return []
    y = g.bands[-1].top + g.ch * frag.rows + 10
    x0 = 6 + 6 * max(len(frag.key_name), 4) + 10
    if frag.key:
        return [
            (x0 + 23 * i, y, fill, text_color(fill), text)
            for i, (fill, text) in enumerate(frag.key)
        ]
    return [(x0 + 23 * b, y, lane_color(b), text_color(lane_color(b)), str(b)) for b in range(32)]


def _svg_text(t: Label) -> str:
    where = (f'transform="translate({t.x:g} {t.y:.1f}) rotate(-90)"' if t.rotate
             else f'x="{t.x:.1f}" y="{t.y:.1f}"')  # fmt: skip
    style = "".join([
        f' text-anchor="{t.anchor}"' if t.anchor != "start" else "",
        f' font-size="{t.size:g}"' if t.size != 11 else "",
        ' font-weight="bold"' if t.bold else "", ' font-style="italic"' if t.italic else "",
        f' fill="{t.color}"' if t.color != "#000" else "",
    ])  # fmt: skip
    return f"<text {where}{style}>{html.escape(t.text)}</text>"


def _edges(frag: Fragment, g: Geometry) -> list[tuple[float, float, float, float, float]]:
    """The thick lines between blocks and each band's frame: (x1, y1, x2, y2, width)."""
    out = []
    for band in g.bands:
        rows, cols = block_edges(frag, band.cols)
        right = g.left + g.cw * len(band.cols)
        bottom = band.top + g.ch * frag.rows
        out += [(g.left, band.top + r * g.ch, right, band.top + r * g.ch, 2.5) for r in rows]
        for c in cols:
            x = g.left + (c - band.cols.start) * g.cw
            out.append((x, band.top, x, bottom, 2.5))
        out += [
            (g.left, band.top, right, band.top, 1.5),
            (right, band.top, right, bottom, 1.5),
            (g.left, bottom, right, bottom, 1.5),
            (g.left, band.top, g.left, bottom, 1.5),
        ]
    return out


def _hover_style(frag: Fragment, uid: str, g: Geometry) -> str:
    """CSS that outlines the hovered lane's cells and shows the hovered cell's status line."""
    shown = [i for i in range(len(frag.elements)) if g.xy(i, frag.cols) is not None]
    lanes = sorted({lane for i in shown for lane in frag.elements[i].lanes})
    rules = [f".{uid} .tirx-c:hover rect{{stroke:#000;stroke-width:2.5}}",
             f".{uid} .tirx-c:focus{{outline:none}}"]  # fmt: skip
    for lane in lanes:
        rules.append(
            f".{uid}:has(.l{lane}:hover) .l{lane} rect{{stroke:#000;stroke-width:2;"
            "stroke-dasharray:none}"
        )
    if not _status_line(frag, g):
        return f"<style>{''.join(rules)}</style>"
    rules.append(
        "".join(f".{uid}:has(.c{i}:hover) .t{i}," for i in shown)[:-1] + "{display:inline}"
    )
    return f"<style>{''.join(rules)}</style>"


LINK_COLOR = "#1f5fbf"


STATUS_CELLS = 256  # a picture of more cells says what a cell is in its tooltip only


def _status_line(frag: Fragment, g: Geometry) -> bool:
    """Whether the picture has a status line that a hovered cell writes its meaning into (a
    picture of up to STATUS_CELLS cells shown; a larger one relies on the tooltips)."""
    shown = len(g.shown) * frag.rows
    return shown <= STATUS_CELLS


def _n(value: float) -> str:
    """A coordinate as short as it reads: ``53`` for 53.0, ``404.8``."""
    return f"{value:.1f}".removesuffix(".0")


def coord_class(coord) -> str:
    """The class naming an element's logical coordinate in every picture (``x3_1``;
    ``m1`` for -1), so pictures of different shapes can link the same element."""
    return "x" + "_".join(f"m{-c}" if c < 0 else str(c) for c in coord)


def linked_style(scope: str, count: int = 0, coords=()) -> str:
    """CSS that links the pictures inside an element of class ``scope``, without JavaScript:
    clicking element ``i`` of one (it takes focus) outlines element ``i`` in all of them
    (``count`` elements), or, given ``coords``, the element of the same coordinate."""
    keys = [f"c{i}" for i in range(count)] + [coord_class(c) for c in coords]
    rules = "".join(
        f".{scope}:has(.{k}:focus) .{k} rect{{stroke:{LINK_COLOR};stroke-width:3.5}}" for k in keys
    )
    return f"<style>{rules}</style>"


# ----------------------------------------------------------------------- PNG


def figure(frag: Fragment, *, lane=None, marks=(), labels=None, note: str = "", page: int = 0,
           width: float = WIDTH, max_rows: int = MAX_ROWS, cell_looks=None):  # fmt: skip
    """The picture as a matplotlib Figure (Agg canvas, no pyplot state), laid out in the
    SVG's geometry (1 px of the SVG = 1/100 inch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    cells = cell_looks or looks(frag, lane=lane, marks=marks, labels=labels)
    g = geometry(frag, cells, note, page, width, max_rows)
    fig = Figure(figsize=(g.width / 100, g.height / 100), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, g.width)
    ax.set_ylim(g.height, 0)
    ax.axis("off")
    pt = 72 / 100  # points per SVG px
    align = {"middle": "center", "end": "right", "start": "left"}

    def put(x, y, s, size=11, **kw):
        ax.text(x, y, s, fontsize=size * pt, family="monospace", **kw)

    for t in _labels(frag, g):
        put(t.x, t.y, t.text, t.size, ha=align[t.anchor], color=t.color,
            weight="bold" if t.bold else "normal", style="italic" if t.italic else "normal",
            rotation=90 if t.rotate else 0, va="center" if t.rotate else "baseline")  # fmt: skip
    for i, s in enumerate(cells):
        at = g.xy(i, frag.cols)
        if at is None:
            continue
        x, yy = at
        edge, lw = (MARK_COLOR, 2.0) if s.marked else (
            ("#000", 1.2) if s.highlighted else ("#fff", 0.6))  # fmt: skip
        ax.add_patch(Rectangle((x, yy), g.cw, g.ch, facecolor=s.fill, edgecolor=edge,
                               linewidth=lw, gid=f"cell-{i}"))  # fmt: skip
        put(x + g.cw / 2, yy + 14, ("✗" if s.marked else "") + s.label, ha="center",
            color=s.ink, weight="bold" if s.highlighted else "normal")  # fmt: skip
    for x1, y1, x2, y2, width in _edges(frag, g):
        ax.plot([x1, x2], [y1, y2], color="#222", lw=width * pt, solid_capstyle="projecting")
    for x, y, fill, ink, text in key_swatches(frag, g):
        ax.add_patch(Rectangle((x, y), 22, 16, facecolor=fill, edgecolor="none"))
        put(x + 11, y + 12, text, 9, ha="center", color=ink)
    return fig


def png(frag: Fragment, *, dpi: int = 200, path=None, **options) -> bytes:
    """The picture as PNG bytes at ``dpi`` (at least 150; also written to ``path``)."""
    import io

    if dpi < 150:
        from tirx.errors import TirxError

        raise TirxError(f"dpi={dpi} draws cell text too small to read", hint="use dpi=150 or more")
    buf = io.BytesIO()
    figure(frag, **options).savefig(buf, format="png", dpi=dpi)
    data = buf.getvalue()
    if path is not None:
        Path(path).write_bytes(data)
    return data


def save(frag: Fragment, path, **options) -> Path:
    """Write the picture to ``path``; the suffix picks the form: .svg, .png or .tex."""
    from . import tikz

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".svg":
        svg(frag, path=path, hover=options.pop("hover", False), **options)
    elif suffix == ".png":
        png(frag, path=path, **options)
    elif suffix in (".tex", ".tikz"):
        tikz.tikz(frag, path=path, **options)
    else:
        from tirx.errors import TirxError

        raise TirxError(
            f"cannot tell the picture format of {str(path)!r}",
            hint="name the file .svg, .png or .tex",
        )
    return path
