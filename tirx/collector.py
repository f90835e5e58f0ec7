"""The cyclic garbage collector held off while tirx builds a kernel or simulates one.

Parsing, lowering and code generation allocate tens of thousands of short-lived objects (IR
nodes, tuples, dictionaries); reference counting frees nearly all of them, and the few cycles
they leave are a few hundred objects. Yet every 700 net allocations (CPython's default) start
a collection: a cold compile of the seed kernel ran ten of the youngest generation and one of
the next, which found about 150 objects (what they cost: docs/performance.md). A simulator
run (``tirx.sim.run``) is the same: it compiles the function into closures and executes it,
and one run of an attention head started about 70 collections. :func:`paused` turns the
collector off around such work and back on after it; what it would have found is collected at
its next pass.

Only a collector that was on is turned off, and it is turned back on only by the call that
turned it off: a program that runs with the collector off keeps it off. (The switch is the
process's: a thread that calls ``gc.disable()`` while another thread is inside :func:`paused`
finds it turned back on when that call ends.)"""

from __future__ import annotations

import gc

__all__ = ["paused"]


class paused:  # noqa: N801 - used as a context manager, like a function
    """``with paused(): ...``: the block runs with the cyclic collector off."""

    __slots__ = ("_was_on",)

    def __enter__(self) -> None:
        self._was_on = gc.isenabled()
        if self._was_on:
            gc.disable()

    def __exit__(self, *exc) -> None:
        if self._was_on:
            gc.enable()
