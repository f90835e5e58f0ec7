"""A :class:`~widgets.fragment.Fragment` as SVG (crisp anywhere), PNG (matplotlib, any dpi)
and, through :mod:`widgets.tikz`, TikZ. One geometry serves all three, so they agree.

The SVG is interactive without JavaScript: hovering a cell outlines every cell its lane holds
(copies included, via CSS ``:has``) and shows the cell's formula in the status line; every
cell is a ``<rect class="tirx-el">`` with ``data-index``, ``data-lane``, ``data-coord``.
"""

from __future__ import annotations

import html
import itertools
import textwrap
from dataclasses import dataclass
from pathlib import Path

from .fragment import Fragment
from .looks import MARK_COLOR, CellLook, color_key, looks  # noqa: F401 - the picture's vocabulary

__all__ = [
    "CellLook", "looks", "legend_lines", "svg", "png", "figure", "save", "linked_style",
    "MARK_COLOR", "LINK_COLOR",
]  # fmt: skip

_ids = itertools.count()


def legend_lines(sentence: str, width: int) -> list[str]:
    """``sentence`` in lines of at most ``width`` characters, broken between its ``;``
    phrases where possible and never inside a word."""
    lines: list[str] = []
    for phrase in sentence.split("; "):
        if lines and len(lines[-1]) + 2 + len(phrase) <= width:
            lines[-1] += "; " + phrase
        else:
            if lines:
                lines[-1] += ";"
            lines.extend(textwrap.wrap(phrase, max(width, 20), break_long_words=False) or [""])
    return lines


@dataclass(frozen=True)
class Geometry:
    cw: float
    ch: float
    left: float
    top: float
    width: float
    height: float
    title: tuple[str, ...]
    legend: tuple[str, ...]
    char: float = 6.6  # px per character of 11 px monospace


def geometry(frag: Fragment, cell_looks, note: str = "") -> Geometry:
    longest = max((len(s.label) + s.marked for s in cell_looks), default=3)
    cw, ch, char = max(28.0, 6.6 * longest + 10), 20.0, 6.6
    down, across = frag.block_labels
    left = 22 + char * max(len(str(frag.rows - 1)), max((len(d) for d in down), default=0)) + 8
    grid_w = cw * frag.cols
    per_line = max(int((left + grid_w) / 6.0), 40)
    # the title is 12 px bold monospace, about 7.3 px a character: wrapped to fit the picture
    per_title = max(int((left + grid_w - 4) / 7.4), 20)
    title = tuple(textwrap.wrap(frag.title, per_title, break_long_words=False)) or ("",)
    legend = legend_lines(frag.legend() + (f"; {note}" if note else ""), per_line)
    top = 8 + 15 * len(title) + 16 + (14 if across else 0) + 14
    height = top + ch * frag.rows + 10 + 13 * (len(legend) + 1)
    return Geometry(cw, ch, left, top, left + grid_w + 8, height, title, tuple(legend), char)


def _block_edges(frag: Fragment):
    rows = [r for r in range(frag.block_rows, frag.rows, frag.block_rows)]
    cols = [c for c in range(frag.block_cols, frag.cols, frag.block_cols)]
    return rows, cols


# ----------------------------------------------------------------------- SVG


def svg(frag: Fragment, *, lane=None, marks=(), labels=None, note: str = "", hover=True,
        path=None) -> str:  # fmt: skip
    """The picture as a self-contained SVG string (also written to ``path`` if given)."""
    cells = looks(frag, lane=lane, marks=marks, labels=labels)
    g = geometry(frag, cells, note)
    uid = f"tirx-f{next(_ids)}"
    e = html.escape
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="tirx-fragment {uid}" '
        f'width="{g.width:.0f}" height="{g.height:.0f}" viewBox="0 0 {g.width:.0f} '
        f'{g.height:.0f}" font-family="DejaVu Sans Mono, monospace" font-size="11">',
        f'<rect width="{g.width:.0f}" height="{g.height:.0f}" fill="#ffffff"/>',
    ]
    if hover:
        out.append(_hover_style(frag, uid))
    y = 8
    for line in g.title:
        y += 15
        out.append(f'<text x="{g.width / 2:.1f}" y="{y}" text-anchor="middle" font-size="12" '
                   f'font-weight="bold">{e(line)}</text>')  # fmt: skip
    grid_w = g.cw * frag.cols
    out.append(f'<text x="{g.left + grid_w / 2:.1f}" y="{y + 15}" text-anchor="middle" '
               f'font-style="italic" fill="#333">{e(frag.axes[1])} →</text>')  # fmt: skip
    down, across = frag.block_labels
    for i, name in enumerate(across):
        x = g.left + (i + 0.5) * frag.block_cols * g.cw
        out.append(f'<text x="{x:.1f}" y="{y + 29}" text-anchor="middle" font-weight="bold" '
                   f'fill="#333">{e(name)}</text>')  # fmt: skip
    for c in range(frag.cols):
        x = g.left + (c + 0.5) * g.cw
        out.append(f'<text x="{x:.1f}" y="{g.top - 4}" text-anchor="middle" fill="#555" '
                   f'font-size="9">{c}</text>')  # fmt: skip
    mid = g.top + g.ch * frag.rows / 2
    out.append(f'<text transform="translate(12 {mid:.1f}) rotate(-90)" text-anchor="middle" '
               f'font-style="italic" fill="#333">← {e(frag.axes[0])}</text>')  # fmt: skip
    for r in range(frag.rows):
        out.append(f'<text x="{g.left - 4:.1f}" y="{g.top + r * g.ch + 14:.1f}" '
                   f'text-anchor="end" fill="#555" font-size="9">{r}</text>')  # fmt: skip
    for i, name in enumerate(down):
        yy = g.top + (i + 0.5) * frag.block_rows * g.ch
        out.append(f'<text x="{g.left - 24:.1f}" y="{yy:.1f}" text-anchor="end" '
                   f'font-weight="bold" fill="#333">{e(name)}</text>')  # fmt: skip
    focusable = ' tabindex="-1"' if hover else ""  # a click focuses the cell (linked_style)
    for i, (el, s) in enumerate(zip(frag.elements, cells)):
        r, c = divmod(i, frag.cols)
        x, yy = g.left + c * g.cw, g.top + r * g.ch
        lanes = " ".join(f"l{lane}" for lane in sorted(el.lanes))
        stroke, sw = (MARK_COLOR, 2.5) if s.marked else (
            ("#000", 1.6) if s.highlighted else ("#fff", 0.8))  # fmt: skip
        coord = ",".join(map(str, el.coord))
        out.append(
            f'<g class="tirx-c c{i} {lanes}"{focusable}><rect class="tirx-el" data-index="{i}" '
            f'data-coord="{coord}" data-lane="{"" if el.lane is None else el.lane}" '
            f'x="{x:.1f}" y="{yy:.1f}" width="{g.cw:.1f}" height="{g.ch:.1f}" fill="{s.fill}" '
            f'stroke="{stroke}" stroke-width="{sw}"><title>{e(frag.describe(i))}</title></rect>'
            f'<text x="{x + g.cw / 2:.1f}" y="{yy + 14:.1f}" text-anchor="middle" '
            f'fill="{s.ink}"{" font-weight=" + chr(34) + "bold" + chr(34) if s.highlighted else ""}'
            f' pointer-events="none">{"✗" if s.marked else ""}{e(s.label)}</text></g>'
        )
    rows, cols = _block_edges(frag)
    bottom = g.top + g.ch * frag.rows
    for r in rows:
        yy = g.top + r * g.ch
        out.append(f'<line x1="{g.left}" x2="{g.left + grid_w:.1f}" y1="{yy:.1f}" y2="{yy:.1f}" '
                   'stroke="#222" stroke-width="2.5"/>')  # fmt: skip
    for c in cols:
        x = g.left + c * g.cw
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{g.top}" y2="{bottom:.1f}" '
                   'stroke="#222" stroke-width="2.5"/>')  # fmt: skip
    out.append(f'<rect x="{g.left}" y="{g.top}" width="{grid_w:.1f}" height="{g.ch * frag.rows}"'
               ' fill="none" stroke="#222" stroke-width="1.5"/>')  # fmt: skip
    yy = bottom + 8
    for line in g.legend:
        yy += 13
        out.append(f'<text x="6" y="{yy:.1f}" fill="#444" font-size="10">{e(line)}</text>')
    if hover:
        yy += 13
        for i in range(len(frag.elements)):
            tip = frag.describe(i).splitlines()[0]
            out.append(f'<text class="tirx-tip t{i}" x="6" y="{yy:.1f}" fill="#000" '
                       f'font-size="10" display="none">{e(tip)}</text>')  # fmt: skip
    out.append("</svg>")
    text = "".join(out)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def _hover_style(frag: Fragment, uid: str) -> str:
    """CSS that outlines the hovered lane's cells and shows the hovered cell's status line."""
    lanes = sorted({lane for el in frag.elements for lane in el.lanes})
    rules = [f".{uid} .tirx-c:hover rect{{stroke:#000;stroke-width:2.5}}",
             f".{uid} .tirx-c:focus{{outline:none}}"]  # fmt: skip
    for lane in lanes:
        rules.append(
            f".{uid}:has(.l{lane}:hover) .l{lane} rect{{stroke:#000;stroke-width:2;"
            "stroke-dasharray:none}"
        )
    rules.append(
        "".join(f".{uid}:has(.c{i}:hover) .t{i}," for i in range(len(frag.elements)))[:-1]
        + "{display:inline}"
    )
    return f"<style>{''.join(rules)}</style>"


LINK_COLOR = "#1f5fbf"


def linked_style(scope: str, count: int) -> str:
    """CSS that links pictures of the same ``count`` elements inside an element of class
    ``scope``: clicking element ``i`` in one (it takes focus) outlines element ``i`` in all
    of them, without JavaScript."""
    rules = "".join(
        f".{scope}:has(.c{i}:focus) .c{i} rect{{stroke:{LINK_COLOR};stroke-width:3.5}}"
        for i in range(count)
    )
    return f"<style>{rules}</style>"


# ----------------------------------------------------------------------- PNG


def figure(frag: Fragment, *, lane=None, marks=(), labels=None, note: str = ""):
    """The picture as a matplotlib Figure (Agg canvas, no pyplot state), laid out in the
    SVG's geometry (1 px of the SVG = 1/100 inch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    cells = looks(frag, lane=lane, marks=marks, labels=labels)
    g = geometry(frag, cells, note)
    fig = Figure(figsize=(g.width / 100, g.height / 100), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, g.width)
    ax.set_ylim(g.height, 0)
    ax.axis("off")
    pt = 72 / 100  # points per SVG px

    def put(x, y, s, size=11, **kw):
        ax.text(x, y, s, fontsize=size * pt, family="monospace", **kw)

    y = 8
    for line in g.title:
        y += 15
        put(g.width / 2, y, line, 12, ha="center", va="baseline", weight="bold")
    grid_w = g.cw * frag.cols
    put(g.left + grid_w / 2, y + 15, f"{frag.axes[1]} →", ha="center", style="italic")
    down, across = frag.block_labels
    for i, name in enumerate(across):
        put(g.left + (i + 0.5) * frag.block_cols * g.cw, y + 29, name, ha="center", weight="bold")
    for c in range(frag.cols):
        put(g.left + (c + 0.5) * g.cw, g.top - 4, str(c), 9, ha="center", color="#555")
    put(12, g.top + g.ch * frag.rows / 2, f"← {frag.axes[0]}", ha="center", va="center",
        rotation=90, style="italic")  # fmt: skip
    for r in range(frag.rows):
        put(g.left - 4, g.top + r * g.ch + 14, str(r), 9, ha="right", color="#555")
    for i, name in enumerate(down):
        put(g.left - 24, g.top + (i + 0.5) * frag.block_rows * g.ch, name, ha="right",
            weight="bold")  # fmt: skip
    for i, s in enumerate(cells):
        r, c = divmod(i, frag.cols)
        x, yy = g.left + c * g.cw, g.top + r * g.ch
        edge, lw = (MARK_COLOR, 2.0) if s.marked else (
            ("#000", 1.2) if s.highlighted else ("#fff", 0.6))  # fmt: skip
        ax.add_patch(Rectangle((x, yy), g.cw, g.ch, facecolor=s.fill, edgecolor=edge,
                               linewidth=lw, gid=f"cell-{i}"))  # fmt: skip
        put(x + g.cw / 2, yy + 14, ("✗" if s.marked else "") + s.label, ha="center",
            color=s.ink, weight="bold" if s.highlighted else "normal")  # fmt: skip
    rows, cols = _block_edges(frag)
    bottom = g.top + g.ch * frag.rows
    for r in rows:
        ax.plot([g.left, g.left + grid_w], [g.top + r * g.ch] * 2, color="#222", lw=2.5 * pt)
    for c in cols:
        ax.plot([g.left + c * g.cw] * 2, [g.top, bottom], color="#222", lw=2.5 * pt)
    ax.add_patch(Rectangle((g.left, g.top), grid_w, bottom - g.top, fill=False,
                           edgecolor="#222", linewidth=1.5 * pt))  # fmt: skip
    yy = bottom + 8
    for line in g.legend:
        yy += 13
        put(6, yy, line, 10, color="#444")
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
