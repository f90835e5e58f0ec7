"""Where a layout object was built in the user's code, for "the layout was defined here".

A contract error on a tile operand names the operand's use; the layout passed there may have
been built anywhere: at module level, in an earlier notebook cell, in a kernel factory's
caller. The object itself remembers the place: each :class:`~tirx.layout.TileLayout` and
:class:`~tirx.layout.ComposeLayout` notes, when it is made, the first frame outside this
package (a layout made by another layout's method, ``pack`` or ``canonicalize``, is made
where that method was called). A layout made by tirx's own code (``tirx.examples`` excepted:
it is user code) has no place: it was not written by the user. The kernel parser marks a
layout built by a call in kernel source at that call (:func:`mark_built`).

The place is an attribute outside the dataclass fields: equality, hashing, fingerprints and
the serialized IR ignore it.
"""

from __future__ import annotations

import sys

from ..errors import Span

__all__ = ["note_built", "mark_built", "built_at"]

_KEY = "built_at"
_SKIPPED = ("tirx.layout", "functools")  # functools: a cached_property (the canonical form)


def note_built(layout, skip: int = 0) -> None:
    """Record on ``layout`` the first caller of its constructor outside ``tirx.layout``, when
    that caller is user code. Called from the constructor itself; ``skip``: the frames between
    it and its caller (1 for a ``__post_init__``, under the dataclass's ``__init__``)."""
    frame = sys._getframe(2 + skip)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_SKIPPED):
        frame = frame.f_back
    if frame is None:
        return
    module = frame.f_globals.get("__name__", "") or ""
    if (module == "tirx" or module.startswith("tirx.")) and not module.startswith("tirx.examples"):
        return
    layout.__dict__[_KEY] = (frame.f_code.co_filename, frame.f_lineno)  # picklable, cheap


def mark_built(layout, span: Span | None) -> None:
    """Record ``span`` as where ``layout`` was built, unless it already has a place."""
    if span is not None and isinstance(getattr(layout, "__dict__", None), dict):
        layout.__dict__.setdefault(_KEY, span)


def built_at(layout) -> Span | None:
    """Where ``layout`` was built in user code (the call that made it), or None."""
    where = getattr(layout, "__dict__", {}).get(_KEY)
    if where is None or isinstance(where, Span):
        return where
    return Span(*where)  # the line of the call that made it (the column is not kept)
