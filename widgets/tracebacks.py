"""A tirx error raised by a user's code in an ordinary cell, shown from the user's side.

Outside ``%%tirx`` (which prints its own short form), a mistake found deep in the compiler
(a layout that does not fit, a contract the operand breaks, a fault the simulator finds) came
after tens of lines of tirx's own frames. The handler that ``%load_ext tirx`` registers
(:func:`widgets.errorview.install`) shows a :class:`tirx.TirxError` with the frames of tirx and
of the notebook layer left out: the user's own lines first, then the message, its place in
the kernel and its hint, then a note saying how many frames were left out and that ``%tb``
shows them all. Only TirxErrors are trimmed: anything else is a bug, and keeps every frame.
"""

from __future__ import annotations

import os
import types

__all__ = ["own_frames", "trimmed", "HIDDEN_NOTE"]

HIDDEN_NOTE = "({n} frame(s) inside tirx hidden; %tb shows the whole traceback)"


def _roots() -> tuple[str, ...]:
    import tirx
    import widgets

    return tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (tirx, widgets))


def own_frames(tb) -> bool:
    """Whether traceback entry ``tb`` runs code of tirx or of the notebook layer."""
    name = os.path.abspath(tb.tb_frame.f_code.co_filename)
    return name.startswith(_roots())


def trimmed(tb) -> tuple[types.TracebackType | None, int]:
    """``tb`` without tirx's own entries, and how many were left out; (tb, 0) when nothing of
    the user's would remain."""
    kept, hidden = [], 0
    while tb is not None:
        if own_frames(tb):
            hidden += 1
        else:
            kept.append(tb)
        tb = tb.tb_next
    if not kept or not hidden:
        return (kept[0] if kept else None) if not hidden else None, 0
    out = None
    for entry in reversed(kept):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out, hidden
