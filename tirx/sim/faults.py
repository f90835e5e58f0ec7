"""The simulator's internal fault signal.

Memory and instruction code raise :class:`Fault` naming the offending thread (its linear id
in the block); the machine turns it into a :class:`tirx.errors.SimulationError` that adds
the block, warp, lane and the span of the statement being executed.
"""

from __future__ import annotations

__all__ = ["Fault"]


class Fault(Exception):
    def __init__(self, message: str, tid: int, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.tid = int(tid)
        self.hint = hint
