"""Interactive views: ipywidgets wired to the pure drawings of :mod:`widgets.draw`.

Every view is an object with three faces:

* ``str(view)``: the text table (stable, what nbval compares);
* ``view._repr_html_()``: a static SVG picture (nbviewer, exported HTML);
* the widget (``view.widget``): a lane selector, a clickable grid of cells (clicking picks the
  cell's lane and shows how the layout maps it) and whatever the view adds.

Displayed in Jupyter, a view sends all three and the front end shows the richest it can.
"""

from __future__ import annotations

import html

from tirx.errors import TirxError

from . import args, banks, draw, faces, picture
from .cellgrid import CellGrid
from .geometry import geometry
from .gridpicture import grid_fragment, grid_looks
from .linking import shown
from .model import Grid, layout_formula, layout_grid, parse_layout, register_notes

__all__ = ["GridView", "LayoutView", "show_layout"]

_ALL = -1  # the selector's "all" entry (a Dropdown value of None would mean "no selection")
COLOR_BY = ("lane", "slot", "bank")  # what a grid's colours may show (widgets.draw)


class GridView:
    """A grid with a lane selector, click-to-explain, and static fallbacks."""

    def __init__(self, grid: Grid, *, color_by=None, lane=None, labels=None, marks=(),
                 summary: str = ""):  # fmt: skip
        self.grid = grid
        self.color_by = args.choice(color_by, "color_by", COLOR_BY) if color_by else None
        self.lane = args.lane(lane, count=self._lane_count() or 32, what=self._holder())
        self.labels = labels
        self.marks = tuple(marks)
        self.summary = summary
        self.focus = None
        self.on_cell = None  # a callback (view, index) that replaces the default click action
        self.show_controls = True
        self.explain = True  # show the clicked cell's formula below the grid (a pair does it once)
        self._widget = None

    # ---------------------------------------------------------------- static faces

    def __str__(self) -> str:
        text = draw.text_table(
            self.grid, lane=self.lane, labels=self.labels, marks=self.marks,
            color_by=self.color_by,
        )  # fmt: skip
        return text + (f"\n{self.summary}" if self.summary else "")

    def __repr__(self) -> str:
        return str(self)

    def _picture(self):
        """The current picture as a fragment and its looks (:mod:`widgets.gridpicture`)."""
        styles = self._styles()
        infos = [self.formula(i) for i in range(len(self.grid.cells))]
        return grid_fragment(self.grid, styles, infos, self.color_by), grid_looks(styles)

    page = 0  # the page of columns the pictures show (a grid too wide to wrap whole)

    @property
    def pages(self) -> int:
        frag, looks = self._picture()
        return geometry(frag, looks).pages

    def svg(self, path=None, *, hover: bool = True, page=None) -> str:
        """The SVG picture (wrapped into bands when wide, a page of them, ``page``, when they
        would stack too tall; also written to ``path``)."""
        frag, looks = self._picture()
        page = self.page if page is None else page
        return picture.svg(frag, cell_looks=looks, note=self.summary, hover=hover, path=path,
                           page=page)  # fmt: skip

    def _repr_html_(self) -> str:
        return f'<div class="tirx-view">{self.svg()}</div>'

    def figure(self):
        """The current picture as a matplotlib Figure (Agg)."""
        frag, looks = self._picture()
        return picture.figure(frag, cell_looks=looks, note=self.summary)

    def png(self, path=None, *, dpi: int = 150) -> bytes:
        """PNG bytes at ``dpi`` (≥ 150; also written to ``path``)."""
        frag, looks = self._picture()
        return picture.png(frag, cell_looks=looks, note=self.summary, dpi=dpi, path=path)

    def still(self) -> str:
        """The picture as a coloured text table that survives sanitizing (:mod:`widgets.faces`)."""
        g, styles = self.grid, self._styles()
        rows = [
            (g.row_label(r), [(s.label, s.fill, s.ink) for s in styles[r * g.cols : (r + 1) * g.cols]])
            for r in range(g.rows)
        ]  # fmt: skip
        foot = [draw.legend_text(g, self.color_by)] + ([self.summary] if self.summary else [])
        return faces.coloured_text(g.title, [str(c) for c in range(g.cols)], rows, foot)

    linked: tuple = ()  # the views a click here also lights (widgets.linking)
    linked_by_hand = False  # joined by an explicit link(): left out of the automatic groups

    def _repr_mimebundle_(self, include=None, exclude=None):
        shown(self)  # views one notebook cell shows together answer each other's clicks
        return faces.bundle(self, include, exclude)

    def _ipython_display_(self):
        shown(self)
        faces.show(self)

    def formula(self, index: int) -> str:
        """What clicking cell ``index`` explains (overridden by views that know more)."""
        cell = self.grid.cells[index]
        return f"element {cell.coord}: {self.grid.label(cell)}"

    # ---------------------------------------------------------------- the widget

    @property
    def widget(self):
        if self._widget is None:
            self._widget = self._build()
        return self._widget

    def _build(self):
        import ipywidgets as w

        self._title = w.HTML(f"<b>{html.escape(self.grid.title)}</b>")
        self._title.add_class("tirx-title")
        self._lane = w.Dropdown(
            options=self._lane_options(), value=_ALL if self.lane is None else self.lane,
            description=self._select_name(),
            layout=w.Layout(width="150px"),
        )  # fmt: skip
        self._lane.add_class("tirx-lane")
        self._lane.observe(self._on_lane, names="value")
        self._info = w.HTML(self._info_text())
        self._info.add_class("tirx-info")
        self._grid_box = w.VBox()
        self._grid_box.add_class("tirx-grid-box")
        self._fill_grid()
        controls = [w.HBox([self._lane, *self._controls()])] if self.show_controls else []
        return w.VBox([self._title, *controls, *self._extra(), self._grid_box, self._info])

    def _controls(self) -> list:
        return []

    def _extra(self) -> list:
        return []

    def _select_name(self) -> str:
        if self.grid.kind == "memory":
            return "bank"
        return "thread" if self._lane_count() > 32 else "lane"

    def _holder(self) -> str:
        """What ``lane=`` picks here: a lane, a warpgroup's thread, or a bank."""
        return self._select_name()

    def _lane_count(self) -> int:
        """32 lanes (or banks); a warpgroup's operands name its 128 threads."""
        if self.grid.kind == "memory":
            return 32
        lanes = [lane for c in self.grid.cells for lane in c.lanes]
        return 0 if not lanes else 32 * (max(lanes) // 32 + 1)

    def _lane_options(self):
        return [("all", _ALL)] + [(str(i), i) for i in range(self._lane_count())]

    def _info_text(self) -> str:
        parts = [html.escape(draw.legend_text(self.grid, self.color_by))]
        if self.summary:
            parts.append(html.escape(self.summary))
        if self.focus is not None and self.explain:
            parts.append(f"<pre>{html.escape(self.formula(self.focus))}</pre>")
        return "<br>".join(parts)

    def _fill_grid(self) -> None:
        self._cellgrid = CellGrid(self.grid, self._styles, self._on_cell,
                                  **self._cellgrid_options())  # fmt: skip
        self._grid_box.children = [self._cellgrid.widget]

    def _cellgrid_options(self) -> dict:
        """Extra CellGrid options (column blocks, row labels, tooltips) a view may give."""
        return dict(tooltips=[self.formula(i) for i in range(len(self.grid.cells))])

    def _styles(self, only=None):
        return draw.cell_styles(
            self.grid, color_by=self.color_by, lane=self.lane, labels=self.labels,
            marks=self.marks, focus=self.focus, only=only,
        )  # fmt: skip

    def cell_styles(self):
        """How every cell looks now (colour, text, highlight, mark, focus)."""
        return self._styles()

    def click(self, index: int) -> None:
        """Click cell ``index`` of the live widget, as a user would."""
        n = len(self.grid.cells)
        index = args.integer(index, "the cell index", f"an int in 0..{n - 1}")
        if not 0 <= index < n:
            raise args.ArgumentError(
                f"cell {index} is not in this picture: it has cells 0..{n - 1}",
                hint="cells are numbered row by row from 0",
            )
        _ = self.widget  # builds it
        self._cellgrid.click(index)

    def _restyle(self) -> None:
        if not hasattr(self, "_cellgrid"):
            return
        self._cellgrid.update()

    _quiet = False  # set while the view moves its own selector (no second repaint)

    def _on_lane(self, change) -> None:
        if self._quiet:
            return
        self.lane = None if change["new"] == _ALL else change["new"]
        self._restyle()

    def set_lane(self, lane) -> None:
        """Highlight what ``lane`` holds (a bank for memory grids); None shows all."""
        lane = args.lane(lane, count=self._lane_count() or 32, what=self._holder())
        self.show(lane, self.focus)

    def set_focus(self, index) -> None:
        """Outline cell ``index`` and explain it below the grid."""
        self.show(self.lane, index)

    def show(self, lane, focus) -> None:
        """Select ``lane`` and outline cell ``focus`` with one repaint (what a click does):
        the selector follows, the page of columns that holds the cell is shown, and the
        cell is explained below the grid."""
        self.lane, self.focus = lane, focus
        if hasattr(self, "_lane"):
            value = _ALL if lane is None else lane
            if self._lane.value != value and value in dict(self._lane.options).values():
                self._quiet = True
                try:
                    self._lane.value = value
                finally:
                    self._quiet = False
        cells = getattr(self, "_cellgrid", None)
        if cells is not None:  # one message: the looks, and the page that shows the cell
            cells.update(None if focus is None else cells.page_of(focus))
        if hasattr(self, "_info"):
            self._info.value = self._info_text()

    def _on_cell(self, index: int) -> None:
        """A click on a cell: pick its lane (or bank) and explain the cell."""
        if self.on_cell is not None:
            self.on_cell(self, index)
            return
        cell = self.grid.cells[index]
        self.show(self.grid.bank(cell) if self.grid.kind == "memory" else cell.lane, index)

    def redraw(self, grid: Grid | None = None) -> None:
        """Show ``grid`` (or the current one again) in the live widget."""
        if grid is not None:
            self.grid = grid
            self.focus = None
        if self._widget is not None:
            self._title.value = f"<b>{html.escape(self.grid.title)}</b>"
            self._lane.options = self._lane_options()
            self._lane.description = self._select_name()
            self._fill_grid()
            self._info.value = self._info_text()


class LayoutView(GridView):
    """``show_layout``: a layout over a logical shape, with an editable layout box."""

    def __init__(self, layout, shape=None, *, title=None, lane=None, color_by=None,
                 dtype_bytes: int = 2):  # fmt: skip
        self.layout = layout
        self.title = args.text(title, "title")
        self.dtype_bytes = args.dtype_bytes(dtype_bytes)
        grid = layout_grid(layout, shape, title=title, dtype_bytes=dtype_bytes)
        self.shape = grid.shape
        super().__init__(grid, color_by=color_by, lane=lane, summary=self._summary(grid, layout))
        self.error = ""

    @staticmethod
    def _summary(grid: Grid, layout=None) -> str:
        if grid.kind == "memory":
            line = f"worst column bank conflict: {grid.bank_conflicts()}-way"
            ldmatrix = banks.summary(layout, grid.shape, grid.element_bytes) if layout else ""
            return f"{line}; {ldmatrix}" if ldmatrix else line  # widgets/banks.py
        entries = [
            (c.coord, c.threads, lane, f"{grid.slot_name} {slot}")
            for c in grid.cells
            for lane, slot in c.copies or ((c.lane, c.slot),)
        ]
        return register_notes(entries)

    def formula(self, index: int) -> str:
        return layout_formula(self.layout, self.grid.cells[index].coord, self.shape)

    def set_layout(self, text_or_layout) -> bool:
        """Redraw with a new layout (text or object); on a bad layout keep the old picture and
        set ``self.error`` to a readable message. Returns True when the layout was accepted."""
        try:
            layout = (
                parse_layout(text_or_layout) if isinstance(text_or_layout, str)
                else text_or_layout
            )  # fmt: skip
            grid = layout_grid(layout, self.shape, title=self.title, dtype_bytes=self.dtype_bytes)
        except TirxError as e:
            self.error = str(e)
        else:
            self.error = ""
            self.layout = layout
            self.summary = self._summary(grid, layout)
            if grid.kind == "memory" and self.color_by not in (None, "bank"):
                self.color_by = None
            self.lane = None
            self.redraw(grid)
            if self._widget is not None:
                self._lane.value = _ALL
        if self._widget is not None:
            self._error.value = (
                f'<pre style="color:#b00020">{html.escape(self.error)}</pre>' if self.error else ""
            )
        return not self.error

    editable = True  # an edit box for the layout (a pair shows the text, wrapped, instead)

    def _extra(self) -> list:
        import ipywidgets as w

        text = repr(self.layout)
        if text.startswith("TileLayout(") and text.endswith(")"):
            text = text[len("TileLayout(") : -1]
        if not self.editable:
            self._error = w.HTML("")
            shown = w.HTML(f'<code style="white-space:normal;overflow-wrap:anywhere">'
                           f"{html.escape(text)}</code>")  # fmt: skip
            shown.add_class("tirx-layout-text")
            return [shown]
        self._text = w.Text(value=text, description="layout", continuous_update=False,
                            layout=w.Layout(width="95%"))  # fmt: skip
        self._text.add_class("tirx-layout-text")
        self._text.observe(lambda ch: self.set_layout(ch["new"]), names="value")
        self._error = w.HTML("")
        self._error.add_class("tirx-error")
        return [self._text, self._error]

    def _controls(self) -> list:
        import ipywidgets as w

        if self.grid.kind == "memory":
            return []
        toggle = w.ToggleButtons(options=["lane", "slot"], value=self.color_by or "lane",
                                 description="colour by")  # fmt: skip
        toggle.style.button_width = "60px"

        def change(ch):
            self.color_by = ch["new"]
            self._restyle()
            self._info.value = self._info_text()

        toggle.observe(change, names="value")
        return [toggle]


def show_layout(layout, shape=None, *, title=None, lane=None, color_by=None, dtype_bytes=2):
    """A layout over a logical ``shape`` (default: its shard extents): cells coloured by lane
    and labelled ``lane:slot`` (register layouts) or by bank and labelled with the address
    (memory layouts, ``dtype_bytes`` per element: 1, 2, 4 or 8). ``layout`` may be spec
    text. ``lane`` (0..31) highlights one lane (a bank of a memory layout); ``color_by`` is
    ``"lane"``, ``"slot"`` or ``"bank"``. A layout over more than 16384 elements is refused
    (show one tile of it)."""
    layout = args.layout(layout)
    return LayoutView(layout, shape, title=title, lane=lane, color_by=color_by,
                      dtype_bytes=dtype_bytes)  # fmt: skip
