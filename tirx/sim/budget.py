"""The simulator's time budget and progress reports, so runaway work stays interactive.

A run that has used more than its budget of wall-clock seconds stops with a
:class:`tirx.errors.SimulationError` at the statement it was executing (a loop that never
ends, a grid of ``1 << 40`` blocks). The budget is ``tirx.sim.run(..., budget=seconds)``,
else ``$TIRX_SIM_BUDGET`` (``tirx.config.sim_budget``), else :data:`DEFAULT_SECONDS`; ``0``
means no limit. While a run lasts longer than :data:`PROGRESS_SECONDS`, a line on stderr
every :data:`PROGRESS_SECONDS` says how far it got (a notebook shows it under the cell).
"""

from __future__ import annotations

import sys
import time

from .faults import Fault

__all__ = ["Budget", "DEFAULT_SECONDS", "PROGRESS_SECONDS", "check_budget"]

#: The default budget of one run, in seconds of wall-clock time.
DEFAULT_SECONDS = 20.0
#: How often a long run reports progress on stderr, in seconds.
PROGRESS_SECONDS = 5.0

_HINT = (
    "a loop that never ends, or a problem too large for the CPU simulator? Shrink it, or "
    'raise the budget: exe(*args, budget=seconds) for a kernel compiled with target="sim", '
    "tirx.sim.run(..., budget=seconds), or TIRX_SIM_BUDGET=seconds (0: no limit)"
)


def check_budget(seconds) -> None:
    """Refuse a budget that is not None or a number of seconds >= 0 (infinity: no limit, as 0)."""
    if seconds is None:
        return
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"budget must be a number of seconds (0: no limit), got {seconds!r}")
    if not seconds >= 0:  # negative, or NaN
        raise ValueError(f"budget must be a number of seconds >= 0 (0: no limit), got {seconds!r}")


class Budget:
    """Wall-clock accounting for one run of ``name`` over ``blocks`` blocks."""

    def __init__(self, name: str, blocks: int, seconds: float | None, stream=None):
        self.name = name
        self.blocks = blocks
        self.seconds = seconds if seconds and seconds > 0 else None
        self.stream = stream
        self.start = time.perf_counter()
        self.next_report = self.start + PROGRESS_SECONDS
        self.done = 0  # blocks finished
        self.where = (0, 0, 0)

    def check(self, tid: int = 0) -> None:
        """Raise a Fault (naming thread ``tid``) when the budget is spent; report progress."""
        now = time.perf_counter()
        if now < self.next_report and (self.seconds is None or now - self.start <= self.seconds):
            return
        used = now - self.start
        if self.seconds is not None and used > self.seconds:
            raise Fault(
                f"the simulation of '{self.name}' used its budget of {self.seconds:g} s "
                f"({self.done} of {self.blocks} blocks finished, now in block {self.where})",
                tid,
                _HINT,
            )
        self.next_report = now + PROGRESS_SECONDS
        stream = self.stream if self.stream is not None else sys.stderr
        share = f" ({100 * self.done / self.blocks:.2g}%)" if self.blocks else ""
        limit = f" of {self.seconds:g} s" if self.seconds is not None else ""
        stream.write(
            f"tirx.sim: '{self.name}' running {used:.0f} s{limit}: {self.done} of "
            f"{self.blocks} blocks finished{share}, now in block {self.where}\n"
        )
        stream.flush()
