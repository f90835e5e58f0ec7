"""Two layouts over one register file, side by side: the seed guide's lesson.

The ldmatrix view ``(4, 8, 4)`` and the mma view ``(1, 1, 16, 8)`` of the same ``ar`` registers
name the same 128 words differently. Both pictures colour a cell by its register slot and
label it ``lane:slot``, so a slot's colour marks the same registers on both sides; selecting a
lane highlights its registers in both, and clicking a cell outlines the same register (lane,
slot) on the other side and explains both mappings.
"""

from __future__ import annotations

import html

from . import args
from .model import layout_grid
from .views import LayoutView

__all__ = ["PairView", "show_pair"]


class PairView:
    """Two :class:`~widgets.views.LayoutView`\\ s of one register file, coloured by slot."""

    def __init__(self, left, right, *, left_shape=None, right_shape=None, titles=(None, None),
                 lane=None):  # fmt: skip
        self.left = LayoutView(left, left_shape, title=titles[0], lane=lane, color_by="slot")
        self.right = LayoutView(right, right_shape, title=titles[1], lane=lane, color_by="slot")
        for side in (self.left, self.right):
            if side.grid.kind != "registers":
                raise _not_registers(side)
            side.show_controls = False
            side.editable = False  # the whole layout text, wrapped, not a clipped edit box
            side.explain = False  # the pair explains a click once, for both sides
            side.on_cell = self._on_cell
        self.lane = lane
        self._widget = None

    @property
    def registers(self) -> tuple[frozenset, frozenset]:
        """The (lane, slot) registers each side covers."""
        return tuple(frozenset(c for cell in v.grid.cells for c in cell.copies)
                     for v in (self.left, self.right))  # fmt: skip

    def summary(self) -> str:
        a, b = self.registers
        if a == b:
            return f"both views cover the same {len(a)} registers (lane, slot)"
        return (
            f"the views cover different registers: {len(a - b)} only on the left, "
            f"{len(b - a)} only on the right"
        )

    def match(self, index: int, source, target) -> int | None:
        """The cell of ``target`` holding the register of ``source``'s cell ``index``."""
        want = source.grid.cells[index].copies[0]
        for j, cell in enumerate(target.grid.cells):
            if want in cell.copies:
                return j
        return None

    def __str__(self) -> str:
        return f"{self.left}\n\n{self.right}\n{self.summary()}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return (
            '<div class="tirx-pair" style="display:flex;gap:24px;align-items:flex-start">'
            f"{self.left._repr_html_()}{self.right._repr_html_()}</div>"
            f"<div>{html.escape(self.summary())}</div>"
        )

    def still(self) -> str:
        return self.left.still() + self.right.still() + f"<div>{html.escape(self.summary())}</div>"

    def _panels(self):
        from .panels import Panels

        return Panels(self.summary(), [self.left, self.right], linked=False)

    def figure(self):
        """The two sides' pictures side by side (matplotlib, Agg)."""
        return self._panels().figure()

    def png(self, path=None, *, dpi: int = 150) -> bytes:
        """The two sides' pictures side by side as PNG bytes."""
        return self._panels().png(path, dpi=dpi)

    def _repr_mimebundle_(self, include=None, exclude=None):
        from . import faces

        return faces.bundle(self, include, exclude)

    def _ipython_display_(self):
        from . import faces

        faces.show(self)

    @property
    def widget(self):
        if self._widget is None:
            import ipywidgets as w

            self._lane = w.Dropdown(
                options=[("all", -1)] + [(str(i), i) for i in range(32)],
                value=-1 if self.lane is None else self.lane,
                description="lane", layout=w.Layout(width="150px"),
            )  # fmt: skip
            self._lane.add_class("tirx-lane")
            self._lane.observe(
                lambda ch: (
                    None if self._quiet else self.set_lane(None if ch["new"] == -1 else ch["new"])
                ),
                names="value",
            )
            self._info = w.HTML(html.escape(self.summary()))
            self._info.add_class("tirx-info")
            gap = w.HTML('<div style="width:24px"></div>')
            sides = w.HBox([self.left.widget, gap, self.right.widget],
                           layout=w.Layout(flex_flow="row wrap", align_items="flex-start"))  # fmt: skip
            self._widget = w.VBox([self._lane, sides, self._info])
        return self._widget

    _quiet = False

    def set_lane(self, lane) -> None:
        lane = args.lane(lane)
        self.lane = lane
        value = -1 if lane is None else lane
        if self._widget is not None and self._lane.value != value:
            self._lane.value = value  # comes back through the observer
            return
        for side in (self.left, self.right):
            side.set_lane(lane)

    def _on_cell(self, view, index: int) -> None:
        other = self.right if view is self.left else self.left
        j = self.match(index, view, other)
        lane = view.grid.cells[index].lane
        self.lane = lane
        if self._widget is not None and self._lane.value != (-1 if lane is None else lane):
            self._quiet = True  # the sides are repainted once each, below
            try:
                self._lane.value = -1 if lane is None else lane
            finally:
                self._quiet = False
        view.show(lane, index)
        other.show(lane, j)
        lane, slot = view.grid.cells[index].copies[0]
        lines = [f"register: lane {lane}, slot {slot}", view.formula(index)]
        lines.append(other.formula(j) if j is not None else "not in the other view")
        if self._widget is not None:
            self._info.value = f"<pre>{html.escape(chr(10).join(lines))}</pre>"


def _not_registers(view):
    from tirx.errors import LayoutError

    return LayoutError(
        f"show_pair draws register layouts; {view.layout!r} has no lane axis",
        hint="pass two layouts over one register array (laneid and m axes)",
    )


def show_pair(left, right, *, left_shape=None, right_shape=None, titles=(None, None), lane=None):
    """Two layouts of one register file side by side (colour = register slot)."""
    left, right = args.layout(left, "left"), args.layout(right, "right")
    if not isinstance(titles, (tuple, list)) or len(titles) != 2:
        raise args.ArgumentTypeError(f"titles must be two titles (left, right), got {titles!r}",
                                     hint="titles=('ldmatrix view', 'mma view')")  # fmt: skip
    titles = tuple(args.text(t, "titles") for t in titles)
    lane = args.lane(lane)
    layout_grid(left, left_shape)  # raise shape errors before building anything
    return PairView(left, right, left_shape=left_shape, right_shape=right_shape, titles=titles,
                    lane=lane)  # fmt: skip
