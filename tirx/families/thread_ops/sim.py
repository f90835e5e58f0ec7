"""The simulator's single-thread operations, written from the CUDA Programming Guide ("Time
Function", "Nanosleep Function", "Assertion") and the PTX ISA ("nanosleep", "trap").

* ``nano_sleep``: suspends the thread for a while, a scheduling hint with no effect on what a
  kernel computes. The simulator evaluates the duration (its loads are checked as the GPU's
  would run) and goes on at once.
* ``clock64``: on the GPU the SM's cycle counter, which no two runs read alike. The simulator
  has no cycles; it gives a deterministic count that has the property kernels rely on, that
  two reads by one thread never go backwards: the number of clock reads plus the number of
  loop iterations this block's machine has executed so far in the run (the count goes on
  from block to block, as an SM's counter does). Every thread of one execution of a read
  gets the same value; a later read is larger by at least one, and by more when loops ran
  between. It measures nothing: elapsed "time" between two reads says how much looping lay
  between them, not how long it took.
* ``trap_when_assert_failed``: a thread whose condition is false executes ``trap``, which on
  the GPU stops the kernel (the launch fails with "unspecified launch failure"). The
  simulator stops with a :class:`~tirx.errors.SimulationError` at the assert's line naming
  the first thread (lowest linear id among those executing it) whose condition is false.
* ``T.assume``: on the GPU the compiler takes the condition as true and may optimize on it;
  where it is false, what follows is undefined behaviour, with no error at run time. The
  simulator checks it, as the assert above, and stops at its line naming the first thread
  where it is false (nothing a test on the GPU would ever show).
* ``T.assume_aligned(tensor, n)``: the same check of "the address of the tensor's first
  element is a multiple of n", told with the address the simulator's tensor has (the caller's
  array, at its address in this process: a slice of an array at an odd offset fails here as
  on the GPU).
* ``wgmma.noop_barrier``: an empty asm; it constrains the compiler, not the GPU, which
  executes nothing for it. The simulator does nothing either: the register is not read (a
  fence on an accumulator a wgmma still writes is no read of it).
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...sim.expr import to_bool
from ...sim.faults import Fault
from .nodes import AssertTrap, Assume, Clock, NanoSleep, RegisterFence

__all__ = [
    "compile_NanoSleep",
    "compile_Clock",
    "compile_AssertTrap",
    "compile_Assume",
    "compile_RegisterFence",
]

_ASSUME_HINT = (
    "the GPU runs on as if it held, with undefined results (no error): fix the code that "
    "breaks the assumption, or drop the T.assume"
)
_HINT = (
    "on the GPU that thread executes trap and the launch fails (unspecified launch failure); "
    "print the condition's inputs with T.cuda.printf before the assert to see why it fails"
)


class _Clock:
    """The machine's clock-read count (a unit of the machine, ``thread_ops``): it is not reset
    when a new block starts, so reads never go backwards within a run."""

    def __init__(self, machine):
        self.reads = 0

    def reset(self) -> None:
        pass

    def finish_block(self) -> None:
        pass


def compile_NanoSleep(machine, s: NanoSleep):
    duration = machine.compiler.compile(s.duration)
    span, m = s.span, machine

    def run(idx):
        m.span = span
        duration(idx)  # evaluated as the GPU does (a load in it is checked), then no wait
        return idx

    return run


def compile_Clock(machine, s: Clock):
    out = machine.variable(s.result) if s.result is not None else None
    span, m = s.span, machine

    def run(idx):
        m.span = span
        clock = m.unit("thread_ops", _Clock)
        clock.reads += 1
        if out is not None:
            out[idx] = np.uint64(m.iterations + clock.reads)
        return idx

    return run


def compile_AssertTrap(machine, s: AssertTrap):
    return _checked(machine, s, "trap_when_assert_failed", "so it traps", _HINT)


def compile_Assume(machine, s: Assume):
    if s.aligned:
        return _aligned(machine, s)
    name = "T.assume_always" if s.always else "T.assume"
    return _checked(machine, s, name, "though the compiler was told it holds",
                    _ASSUME_HINT.replace("T.assume", name))  # fmt: skip


def _aligned(machine, s: Assume):
    """``T.assume_aligned``: the address of the tensor's first element (``cond`` is ``(address
    & (n - 1)) == 0``, families/thread_ops/script.py) must be a multiple of ``n``. A shared
    tensor's address is only known modulo the shared array's own alignment (the largest
    buffer alignment, at least 128: backend/cuda/codegen.py), where the simulator's array
    starts at 0: beyond it the assumption is not known to hold, and is refused."""
    target, n = s.cond.a.a, s.aligned  # lowered: a GlobalAddress or a SharedAddress
    address = machine.compiler.compile(target)
    name = target.buffer.name
    if isinstance(target, ir.SharedAddress):
        known = max([128, *(b.align for b in machine.fn.shared_offsets)])
        hint = (f"allocate the tensor with align={n} (T.alloc_shared(..., align={n})) and take "
                f"a view at a multiple of {n} bytes, or drop the T.assume_aligned")  # fmt: skip
    else:
        known = None
        hint = ("the GPU runs on as if it were aligned, with undefined results (no error): pass "
                "a tensor whose storage starts aligned (a fresh allocation or a copy, not a "
                "slice at an odd offset), or drop the T.assume_aligned")  # fmt: skip
    span, m = s.span, machine

    def run(idx):
        m.span = span
        at = np.broadcast_to(address(idx), (idx.size,)).astype(np.int64)
        if known is not None and n > known:
            raise Fault(f"T.assume_aligned: '{name}' is in shared memory, which is aligned to "
                        f"{known} bytes, so its start is not known to be a multiple of {n}",
                        int(idx[0]), hint)  # fmt: skip
        off = at % n != 0
        if off.any():
            where = (
                f"{int(at[off][0])} bytes into the shared memory"
                if known
                else (f"at {int(at[off][0]):#x}")
            )
            raise Fault(f"T.assume_aligned: '{name}' starts {where}, not a multiple of {n} "
                        f"bytes, though the compiler was told it is",
                        int(idx[off][0]), hint)  # fmt: skip
        return idx

    return run


def _checked(machine, s, what: str, so: str, hint: str):
    """A statement whose condition must hold in every thread that executes it."""
    cond = to_bool(machine.compiler.compile(s.cond), s.cond.dtype)
    span, m = s.span, machine

    def run(idx):
        m.span = span
        holds = np.broadcast_to(cond(idx), (idx.size,))
        if not holds.all():
            failing = idx[~holds]
            first = int(failing[0])
            more = failing.size - 1
            others = f" (and in {more} more of the {idx.size} threads executing it)" if more else ""
            raise Fault(f"{what}: the condition is false in thread {first}{others}, {so}",
                        first, hint)  # fmt: skip
        return idx

    return run


def compile_RegisterFence(machine, s: RegisterFence):
    span, m = s.span, machine

    def run(idx):
        m.span = span
        return idx

    return run
