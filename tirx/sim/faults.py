"""The simulator's internal fault signal.

Memory and instruction code raise :class:`Fault` naming the offending thread (its linear id
in the block); the machine turns it into a :class:`tirx.errors.SimulationError` that adds
the block, warp, lane and the span of the statement being executed.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Fault", "check_aligned", "partial_warp", "cta_barrier_fault", "warp_barrier_fault"]


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


_BARRIER_FIX = "every thread must reach the same barrier; move it out of divergent code"


def cta_barrier_fault(m, idx: np.ndarray) -> Fault:
    """A CTA barrier that threads ``idx``, not the whole block, reached."""
    missing = int(np.setdiff1d(m.all, idx)[0])
    hint = _BARRIER_FIX
    if partial_warp(m, idx) is None:  # whole warps stay away
        hint += (
            " (on the GPU a barrier waits only for threads that have not exited, so warps "
            "that skip it and exit without reaching another barrier release it; the simulator, "
            "which runs the block in lockstep, takes that for a kernel's one CTA barrier "
            "outside loops only, where the warps that skip it can reach no other)"
        )
    return Fault(
        f"barrier (cta) reached by {idx.size} of {m.T} threads; thread {missing} is elsewhere "
        "(divergent control flow)",
        missing,
        hint,
    )


def warp_barrier_fault(m, idx: np.ndarray) -> Fault | None:
    """A warp barrier that part of a warp reached (None where every warp is whole)."""
    found = partial_warp(m, idx)
    if found is None:
        return None
    w, reached, size, missing = found
    return Fault(
        f"barrier (warp) reached by {reached} of {size} lanes of warp {w}; lane {missing % 32} "
        "is elsewhere (divergent control flow)",
        missing,
        _BARRIER_FIX + " (lanes meeting at two different T.cuda.warp_sync() lines is legal on "
        "sm_70 and later, which the simulator, running a warp's branches one after the other, "
        "does not model: put one T.cuda.warp_sync() after the branch)",
    )
