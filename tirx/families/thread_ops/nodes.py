"""IR nodes of the single-thread operations (script.py beside this): ``T.cuda.nano_sleep``,
``T.cuda.clock64``, ``T.cuda.trap_when_assert_failed``, ``T.assume`` and
``T.cuda.wgmma.noop_barrier``. The catalog row names them, so the IR visitor walks them as it
walks the core's node classes (tirx/ir/visitor.py).

Each one is a statement that concerns only the thread that executes it: no other thread waits
for it or sees it. ``Clock``'s ``result`` is a fresh variable written by nothing else; the call
is the whole statement or the whole right side of an assignment, as the CTA operations' are
(tirx/families/cta_ops/nodes.py).
"""

from __future__ import annotations

from ...errors import Span
from ...ir.nodes import Expr, Stmt, Var, node

__all__ = ["NanoSleep", "Clock", "AssertTrap", "Assume", "RegisterFence"]


@node
class NanoSleep(Stmt):
    """``__nanosleep(duration)`` (PTX ``nanosleep.u32``, sm_70+): the thread is suspended for
    about ``duration`` nanoseconds (uint32; the GPU picks a time in ``[0, 2 * duration]``, at
    most about a millisecond). A scheduling hint for spin-wait loops: nothing a kernel computes
    depends on it."""

    duration: Expr
    span: Span | None = None


@node
class Clock(Stmt):
    """``clock64()``: ``result`` (uint64, or None when the value is dropped) receives the
    SM's 64-bit cycle counter as this thread reads it. On the GPU, two reads by one thread
    never go backwards; reads by threads of different SMs are not comparable."""

    result: Var | None = None
    span: Span | None = None


@node
class AssertTrap(Stmt):
    """``if (!(cond)) asm volatile("trap;");``: a device-side assert. A thread whose ``cond``
    (bool) is false executes ``trap``, which stops the whole kernel with an error (the launch
    fails with "unspecified launch failure", and the CUDA context is unusable afterwards)."""

    cond: Expr
    span: Span | None = None


@node
class Assume(Stmt):
    """``__builtin_assume(cond)`` (``T.assume``): the compiler may take ``cond`` (bool) as true
    here and optimize on it; where it is false, what the thread does next is undefined. Nothing
    is executed for it on the GPU."""

    cond: Expr
    span: Span | None = None
    #: ``T.assume_aligned(tensor, n)``: ``n`` (bytes), and ``cond`` is ``(address & (n - 1))
    #: == 0`` of the tensor's first element's address; 0 for a plain ``T.assume``
    aligned: int = 0
    #: written ``T.assume_always(cond)`` (the promise holds for the rest of the scope); the
    #: same statement for the compiler and the simulator, named as written in what they print
    always: bool = False


@node
class RegisterFence(Stmt):
    """``asm volatile("" : "+r"(x) :: "memory")`` (``"+f"`` for a float32): an empty asm
    that, for the compiler, reads and writes the register ``target`` (a 32-bit element of a
    local tensor, an ``ElemLoad`` naming it, or a scalar variable) and touches memory. No
    instruction is emitted; the compiler may not move the register's other uses, nor memory
    accesses, across it. Wgmma kernels put one on each accumulator register beside
    ``wgmma.fence`` / ``wgmma.wait_group``, so that no use of a register an ``mma_async``
    writes is moved into the instruction's flight. ``target`` is not read at run time."""

    target: Expr
    span: Span | None = None
