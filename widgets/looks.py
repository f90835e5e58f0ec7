"""What every cell of a fragment picture looks like (fill, ink, label, highlight, mark), the same
in every output form (matplotlib, SVG, TikZ)."""

from __future__ import annotations

from dataclasses import dataclass

from .fragment import Fragment, FragmentKind
from .model import fade, lane_color, slot_color, text_color

__all__ = ["MARK_COLOR", "CellLook", "color_key", "looks"]

MARK_COLOR = "#d62728"


@dataclass(frozen=True)
class CellLook:
    fill: str
    ink: str
    label: str
    highlighted: bool = False
    marked: bool = False


def color_key(frag: Fragment, e) -> int | None:
    """What picks a cell's colour: the bank (memory), the register (thread-major), the lane."""
    if frag.kind is FragmentKind.MEMORY:
        return frag.bank(e)
    if frag.kind is FragmentKind.THREADS:
        return e.register
    return e.lane


def looks(frag: Fragment, *, lane=None, marks=(), labels=None) -> list[CellLook]:
    """Every cell's colours and text; ``lane`` highlights what it holds (a bank for memory)."""
    marks = set(marks)
    out = []
    for i, e in enumerate(frag.elements):
        key = color_key(frag, e)
        fill = slot_color(key) if frag.kind is FragmentKind.THREADS else lane_color(key)
        if not e.copies and frag.kind is FragmentKind.THREADS:
            fill = "#f2f2f2"
        hit = lane is not None and (
            frag.bank(e) == lane if frag.kind is FragmentKind.MEMORY else lane in e.lanes
        )
        if lane is not None and not hit:
            fill = fade(fill, 0.82)
        label = labels[i] if labels is not None else frag.label(e)
        out.append(CellLook(fill, text_color(fill), label, hit, i in marks))
    return out
