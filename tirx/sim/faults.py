"""The simulator's internal fault signal.

Memory and instruction code raise :class:`Fault` naming the offending thread (its linear id
in the block); the machine turns it into a :class:`tirx.errors.SimulationError` that adds
the block, warp, lane and the span of the statement being executed.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Fault", "check_aligned", "partial_warp"]


class Fault(Exception):
    def __init__(self, message: str, tid: int, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.tid = int(tid)
        self.hint = hint


def partial_warp(m, idx: np.ndarray):
    """The first warp that threads ``idx`` reach in part, as ``(warp, reached, size, missing)``
    (``missing``: the id of a thread of that warp outside ``idx``), or None."""
    counts = np.bincount(idx >> 5, minlength=m.nwarps)
    sizes = np.minimum(32, m.T - 32 * np.arange(m.nwarps))
    bad = (counts > 0) & (counts != sizes)
    if not bad.any():
        return None
    w = int(np.flatnonzero(bad)[0])
    missing = int(np.setdiff1d(np.arange(32 * w, 32 * w + sizes[w]), idx)[0])
    return w, int(counts[w]), int(sizes[w]), missing


def check_aligned(
    m, idx: np.ndarray, text: str, fix: str = "move it out of divergent code"
) -> None:
    """An ``.aligned`` instruction (``text``): each warp that executes it does so with every one
    of its threads; the first warp that reaches it in part is a fault naming a missing lane."""
    found = partial_warp(m, idx)
    if found is not None:
        w, reached, size, lane = found
        raise Fault(
            f"{text} reached by {reached} of {size} threads of warp {w}; lane {lane % 32} "
            "is elsewhere, and .aligned asks every thread of the warp to execute it together",
            lane,
            fix,
        )
