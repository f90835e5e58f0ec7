"""A :class:`~widgets.fragment.Fragment` as TikZ, for papers and slides (as CuTe's
``print_latex`` does for its layouts): one ``tikzpicture`` with a colour per lane, the cell
labels in typewriter type, block borders and axis names. ``standalone=True`` wraps it in a
document that ``pdflatex`` compiles as is.
"""

from __future__ import annotations

from pathlib import Path

from .fragment import Fragment
from .geometry import MAX_ROWS, WIDTH, columns, geometry
from .looks import MARK_COLOR, looks

__all__ = ["tikz", "tex"]


def tex(text: str) -> str:
    """``text`` safe inside ``\\texttt{}``."""
    out = []
    for ch in text:
        if ch in "#$%&_{}":
            out.append("\\" + ch)
        elif ch == "×":
            out.append("$\\times$")
        elif ch == "→":
            out.append("$\\rightarrow$")
        elif ch == "✗":
            out.append("$\\times$")
        elif ch == "~":
            out.append("\\textasciitilde{}")
        elif ch == "\\":
            out.append("\\textbackslash{}")
        else:
            out.append(ch)
    return "".join(out)


def tikz(frag: Fragment, *, lane=None, marks=(), labels=None, standalone: bool = False,
         cell_width: float = 1.1, path=None, page: int = 0, width: float = WIDTH,
         max_rows: int = MAX_ROWS) -> str:  # fmt: skip
    """The picture as TikZ source (also written to ``path``). One cell is ``cell_width`` by
    0.5 cm; row 0 is at the top, as in the PTX ISA's figures. A fragment the notebook shows
    in pages (:mod:`widgets.geometry`) is written a page at a time too: the columns of page
    ``page``, side by side (a page is as wide as a column of text allows)."""
    cells = looks(frag, lane=lane, marks=marks, labels=labels)
    shown = geometry(frag, cells, page=page, width=width, max_rows=max_rows).shown
    if len(shown) < frag.cols:
        keep = [i for i in range(len(cells)) if i % frag.cols in shown]
        frag = columns(frag, shown)
        cells = [cells[i] for i in keep]
    colors = {s.fill for s in cells}
    names = {c: f"tirx{i}" for i, c in enumerate(sorted(colors))}
    w, h = cell_width, 0.5
    lines = [f"% {frag.title}", f"% {frag.legend()}"]
    lines += [f"\\definecolor{{{n}}}{{HTML}}{{{c[1:].upper()}}}" for c, n in names.items()]
    lines.append(f"\\definecolor{{tirxmark}}{{HTML}}{{{MARK_COLOR[1:].upper()}}}")
    lines.append(
        f"\\begin{{tikzpicture}}[x={w}cm,y=-{h}cm,every node/.style={{font=\\tiny\\ttfamily}}]"
    )
    for i, s in enumerate(cells):
        r, c = divmod(i, frag.cols)
        draw = "tirxmark,very thick" if s.marked else ("black,thick" if s.highlighted else "white")
        lines.append(
            f"\\filldraw[fill={names[s.fill]},draw={draw}] ({c},{r}) rectangle ++(1,1) "
            f"node[pos=.5,text={'white' if s.ink == '#ffffff' else 'black'}] "
            f"{{{tex(('✗' if s.marked else '') + s.label)}}};"
        )
    for r in range(frag.block_rows, frag.rows, frag.block_rows):
        lines.append(f"\\draw[line width=1.2pt] (0,{r}) -- ({frag.cols},{r});")
    for c in range(frag.block_cols, frag.cols, frag.block_cols):
        lines.append(f"\\draw[line width=1.2pt] ({c},0) -- ({c},{frag.rows});")
    lines.append(f"\\draw[line width=0.8pt] (0,0) rectangle ({frag.cols},{frag.rows});")
    for c in range(frag.cols):
        lines.append(f"\\node[above] at ({c + 0.5},0) {{{c}}};")
    for r in range(frag.rows):
        lines.append(f"\\node[left] at (0,{r + 0.5}) {{{r}}};")
    lines.append(f"\\node[above=8pt] at ({frag.cols / 2},0) {{\\itshape {tex(frag.axes[1])}}};")
    lines.append(
        f"\\node[left=12pt,rotate=90,anchor=south] at (0,{frag.rows / 2}) "
        f"{{\\itshape {tex(frag.axes[0])}}};"
    )
    lines.append("\\end{tikzpicture}")
    text = "\n".join(lines) + "\n"
    if standalone:
        text = (
            "\\documentclass[tikz,border=4pt]{standalone}\n\\usepackage{xcolor}\n"
            f"\\begin{{document}}\n{text}\\end{{document}}\n"
        )
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
