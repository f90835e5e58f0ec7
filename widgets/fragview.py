"""``show_fragment``: the element-level picture as a view (``link``, for views that answer
each other's clicks, lives in :mod:`widgets.linking` and is re-exported here).

A :class:`FragmentView` has the faces of every view (``str`` text, ``_repr_html_`` an SVG
whose hover outlines the lane's cells and shows the cell's formula, ``figure()``, the widget)
plus the file forms in one call each: ``view.svg(path)``, ``view.png(path, dpi=200)``,
``view.tikz(path)`` or ``view.save("a.svg" | "a.png" | "a.tex")``.
"""

from __future__ import annotations

import html

from . import faces, geometry, picture, tikz
from . import fragment as F
from .linking import link
from .model import Cell, Grid
from .views import GridView

__all__ = ["FragmentView", "link"]


def _grid_of(frag: F.Fragment) -> Grid:
    """The fragment as a :class:`~widgets.model.Grid`, so the widget machinery draws it."""
    memory = frag.kind is F.FragmentKind.MEMORY
    cells = []
    for e in frag.elements:
        if memory:
            cells.append(Cell(e.coord, None, e.address, ((None, e.address),)))
        else:
            copies = tuple((lane, reg) for lane, reg, _ in e.copies) or ((e.lane, e.register),)
            cells.append(Cell(e.coord, e.lane, e.register, copies, e.threads))
    br = frag.block_rows
    shape = (frag.rows // br, br, frag.cols) if frag.rows % br == 0 else (frag.rows, frag.cols)
    kind = "memory" if memory else "registers"
    return Grid(frag.title, shape, tuple(cells), kind=kind, slot_name="register",
                element_bytes=max(frag.element_bits // 8, 1))  # fmt: skip


class FragmentView(GridView):
    """A :class:`~widgets.fragment.Fragment` as a view (click a cell: its lane lights up and
    the formula shows; hover: the lane's cells are outlined)."""

    def __init__(self, frag: F.Fragment, *, lane=None, marks=(), labels=None, summary="",
                 page: int = 0, width: float = geometry.WIDTH,
                 max_rows: int = geometry.MAX_ROWS):  # fmt: skip
        self.fragment = frag
        self.page = page  # the page of columns the pictures show (a wide fragment's)
        self.wrap = width  # px the pictures may take before they wrap into bands
        self.max_rows = max_rows  # rows the bands may stack before they go to pages
        color_by = "slot" if frag.kind is F.FragmentKind.THREADS else None
        super().__init__(_grid_of(frag), color_by=color_by, lane=lane, marks=marks,
                         labels=labels or [frag.label(e) for e in frag.elements],
                         summary=summary)  # fmt: skip

    def __str__(self) -> str:
        out = F.text(self.fragment, lane=self.lane, marks=self.marks)
        return out + (f"\n{self.summary}" if self.summary else "")

    def _options(self, page=None) -> dict:
        page = self.page if page is None else page
        return dict(
            lane=self.lane,
            marks=self.marks,
            labels=self.labels,
            page=page,
            width=self.wrap,
            max_rows=self.max_rows,
        )

    @property
    def pages(self) -> int:
        """How many pages of columns the pictures of this fragment have (1: it wraps whole)."""
        looks = picture.looks(self.fragment)
        return geometry.page_count(self.fragment, looks, self.wrap, self.max_rows)

    def svg(self, path=None, *, hover: bool = True, page=None) -> str:
        """The SVG picture (also written to ``path``); ``page``: another page of columns."""
        return picture.svg(self.fragment, note=self.summary, hover=hover, path=path,
                           **self._options(page))  # fmt: skip

    def png(self, path=None, *, dpi: int = 200, page=None) -> bytes:
        """PNG bytes at ``dpi`` (≥ 150; also written to ``path``)."""
        return picture.png(self.fragment, dpi=dpi, path=path, note=self.summary,
                           **self._options(page))  # fmt: skip

    def tikz(self, path=None, *, standalone: bool = False, page=None) -> str:
        """TikZ source (``standalone``: a whole document; also written to ``path``)."""
        return tikz.tikz(self.fragment, standalone=standalone, path=path,
                         **self._options(page))  # fmt: skip

    def save(self, path, *, page=None):
        """Write the picture; the suffix (.svg, .png, .tex) picks the form."""
        return picture.save(self.fragment, path, **self._options(page))

    def figure(self, page=None):
        return picture.figure(self.fragment, note=self.summary, **self._options(page))

    def _repr_html_(self) -> str:
        return f'<div class="tirx-view tirx-fragment-view">{self.svg()}</div>'

    def still(self) -> str:
        """The shown page as a coloured text table that survives sanitizing."""
        frag = self.fragment
        cells = picture.looks(frag, lane=self.lane, marks=self.marks, labels=self.labels)
        g = geometry.geometry(frag, cells, page=self.page, width=self.wrap,
                              max_rows=self.max_rows)  # fmt: skip
        cols = g.shown
        rows = [
            (str(r), [(("✗" if cells[i].marked else "") + cells[i].label, cells[i].fill,
                       cells[i].ink) for i in (r * frag.cols + c for c in cols)])
            for r in range(frag.rows)
        ]  # fmt: skip
        foot = list(g.legend)
        return faces.coloured_text(frag.title, [str(c) for c in cols], rows, foot)

    def _select_name(self) -> str:
        return "bank" if self.grid.kind == "memory" else self.fragment.holder

    def formula(self, index: int) -> str:
        return self.fragment.describe(index)

    def _info_text(self) -> str:
        parts = [html.escape(self.fragment.legend())]
        if self.summary:
            parts.append(html.escape(self.summary))
        if self.focus is not None and self.explain:
            parts.append(f"<pre>{html.escape(self.formula(self.focus))}</pre>")
        return "<br>".join(parts)

    def _cellgrid_options(self) -> dict:
        frag = self.fragment
        return dict(
            block_cols=frag.block_cols if frag.block_cols < frag.cols else 0,
            row_labels=[str(r) for r in range(frag.rows)],
            tooltips=[frag.describe(i) for i in range(len(frag.elements))],
        )

    def thread_major(self) -> FragmentView:
        """The same fragment lane by lane (row = lane, cell = the coordinate it holds)."""
        return FragmentView(F.thread_major(self.fragment))
