"""CUDA C++ for the single-thread operations (the statements this family's script module builds).

No header is needed: ``__nanosleep`` (sm_70+, every architecture tirx targets) and ``clock64``
are NVRTC builtins, and the assert's ``trap`` and the register fence are inline asm. The ``asm`` is ``volatile`` so
that the compiler neither drops it (it has no outputs) nor moves it out of its ``if``.
"""

from __future__ import annotations

from ...ir import nodes as ir
from .nodes import AssertTrap, Assume, Clock, NanoSleep, RegisterFence

__all__ = [
    "visit_NanoSleep",
    "visit_Clock",
    "visit_AssertTrap",
    "visit_Assume",
    "visit_RegisterFence",
]


def _emit_nano_sleep(em, st: NanoSleep) -> None:
    em.mark(st.span)
    em.line(f"__nanosleep({em.operand(st.duration, ir.U32)});")


def _emit_clock(em, st: Clock) -> None:
    em.mark(st.span)
    em.line(f"{st.result.name} = clock64();" if st.result is not None else "(void)clock64();")


def _emit_assert_trap(em, st: AssertTrap) -> None:
    em.mark(st.span)
    em.line(f'if (!({em.e(st.cond)})) asm volatile("trap;");')


def _emit_assume(em, st: Assume) -> None:
    em.mark(st.span)
    em.line(f"__builtin_assume({em.e(st.cond)});")


def _emit_register_fence(em, st: RegisterFence) -> None:
    em.mark(st.span)
    constraint = "+f" if st.target.dtype.name == "float32" else "+r"
    em.line(f'asm volatile("" : "{constraint}"({em.e(st.target)}) :: "memory");')


# the codegen emitter's rules for the statements (the clock writes only its ``result``)
visit_NanoSleep = _emit_nano_sleep
visit_Clock = _emit_clock
visit_AssertTrap = _emit_assert_trap
visit_Assume = _emit_assume
visit_RegisterFence = _emit_register_fence
