"""Views that answer each other's clicks.

:func:`link` joins views explicitly: clicking an element in one outlines the same element
(same logical coordinate, else the same lane and register) in every other and selects its
lane in all of them. Views shown together are joined without asking:

* views displayed by one notebook cell (``display(a, b)``, or a view per output) are linked
  when they draw the same elements (the same logical coordinates). A fragment of the mma D
  operand and ``show_layout`` of a D layout are; the A and B operands of one mma are not
  (their grids are different matrices);
* composite views link their parts themselves (``show_pair`` by register, ``check_layout``'s
  drawing and the machine's answer by element, a ContractError's expected and actual
  fragments by element, in CSS).

An explicit :func:`link` wins: views it joined are left out of the automatic groups.
"""

from __future__ import annotations

import sys

from .model import Cell, Grid

__all__ = ["link", "linkable", "shown"]


def link(*views, _explicit: bool = True) -> None:
    """Make ``views`` answer each other's clicks (see the module docstring)."""
    views = list(views)
    for i, v in enumerate(views):
        if not (hasattr(v, "grid") and hasattr(v, "show")):
            from .args import ArgumentTypeError

            raise ArgumentTypeError(
                f"link joins views; argument {i + 1} is {type(v).__name__} {v!r:.60}",
                hint="pass what show_layout, show_fragment, show_instruction, show_trace or "
                "check_layout returned",
            )

    def on_cell(view, index):
        cell = view.grid.cells[index]
        for other in views:
            j = index if other is view else match(cell, other.grid, view.grid)
            other.show(cell.lane if other.grid.kind != "memory" else None, j)

    for v in views:
        v.on_cell = on_cell
        v.linked = tuple(o for o in views if o is not v)
        if _explicit:
            v.linked_by_hand = True


def match(cell: Cell, grid: Grid, source: Grid | None = None) -> int | None:
    """The index in ``grid`` of ``cell``'s element: the same coordinate (leading dims of
    extent 1 aside, when ``source``, the cell's grid, is given), else the cell holding its
    first register."""
    if source is not None:
        keys = coordinates(grid)
        want = coordinates(source)[source.cells.index(cell)]
        if want in keys:
            return keys.index(want)
    for j, other in enumerate(grid.cells):
        if other.coord == cell.coord:
            return j
    want = cell.copies[0] if cell.copies else None
    for j, other in enumerate(grid.cells):
        if want is not None and want in other.copies:
            return j
    return None


def coordinates(grid: Grid) -> list[tuple[int, ...]]:
    """The cells' coordinates without the leading dims that are 0 in every cell (a
    ``(1, 1, 16, 8)`` view and a ``(16, 8)`` one name their elements alike)."""
    coords = [c.coord for c in grid.cells]
    width = min((len(c) for c in coords), default=0)
    drop = 0
    while drop < width - 2 and all(c[drop] == 0 for c in coords):
        drop += 1
    return [c[drop:] for c in coords]


def linkable(a: Grid, b: Grid) -> bool:
    """Whether two grids draw the same elements: the same logical coordinates, as many.
    (Two views of one register array under different shapes also share their registers, but
    so do any two arrays of the same size: :func:`widgets.show_pair` links those itself.)"""
    return len(a.cells) == len(b.cells) and set(coordinates(a)) == set(coordinates(b))


_SHOWN: dict = {"cell": None, "views": []}  # the views the running notebook cell displayed


def shown(view) -> None:
    """A view is being displayed: link it with the compatible views the same notebook cell
    displayed before it (nothing outside IPython, or for views linked by hand)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is None or getattr(view, "linked_by_hand", False):
        return
    cell = getattr(shell, "execution_count", None)
    if _SHOWN["cell"] != cell:
        _SHOWN.update(cell=cell, views=[])
    views = _SHOWN["views"]
    if any(v is view for v in views):
        return
    views.append(view)
    group = [
        v for v in views if not getattr(v, "linked_by_hand", False) and linkable(v.grid, view.grid)
    ]
    if len(group) > 1:
        link(*group, _explicit=False)
