"""A word-level :class:`~widgets.model.Grid` (``show_layout``, ``show_pair``, a trace or a
check) drawn by the fragment pictures' renderer, so every static face wraps, keeps a bank key
and reads at 100 % like the element pictures (:mod:`widgets.geometry`): the grid becomes a
:class:`~widgets.fragment.Fragment` whose cells carry the view's own labels and explanations,
drawn in the view's own colours."""

from __future__ import annotations

from .draw import CellStyle, legend_text
from .fragment import Element, Fragment, FragmentKind
from .looks import CellLook
from .model import Grid

__all__ = ["grid_fragment", "grid_looks"]

_KIND = {"memory": FragmentKind.MEMORY, "addresses": FragmentKind.ADDRESSES}


def grid_fragment(grid: Grid, styles: list[CellStyle], infos=None, color_by=None) -> Fragment:
    """``grid`` as a fragment: cell ``i`` labelled ``styles[i].label`` and explained by
    ``infos[i]`` (default: its coordinate and label)."""
    memory = grid.kind == "memory"
    elements = []
    for i, (cell, s) in enumerate(zip(grid.cells, styles)):
        info = infos[i] if infos is not None else f"element {cell.coord}: {s.label}"
        copies = tuple((lane, slot, 0) for lane, slot in cell.copies)
        elements.append(
            Element(
                cell.coord,
                None if memory else cell.lane,
                None if memory else cell.slot,
                0,
                () if memory else copies,
                cell.threads,
                cell.slot if memory else None,
                s.label,
                info,
            )  # fmt: skip
        )
    block = (grid.block_rows if len(grid.shape) > 2 else 0, 0)
    return Fragment(
        grid.title, grid.rows, grid.cols, tuple(elements), _KIND.get(grid.kind, FragmentKind.REGISTERS),
        block, element_bits=8 * grid.element_bytes, caption=legend_text(grid, color_by),
    )  # fmt: skip


def grid_looks(styles: list[CellStyle]) -> list[CellLook]:
    """The view's cell styles as the picture's looks (a focused cell drawn dark, as the
    widget draws it)."""
    return [
        CellLook("#222222", "#ffffff", s.label, True, s.marked) if s.focused
        else CellLook(s.fill, s.ink, s.label, s.highlighted, s.marked)
        for s in styles
    ]  # fmt: skip
