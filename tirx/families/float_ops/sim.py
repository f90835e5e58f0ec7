"""The register-only float instructions in the simulator, written from the PTX ISA (9.7.3,
"Floating Point Instructions"); their values are :mod:`.sim_values`'s.

Each thread executes its own instruction on its own registers: ``d`` (a local float32 slot) is
written with the value of ``a`` (and ``b``), which are read first, so ``d`` may be one of them.
An input is a float32 register's bits or a value converted to float32.
"""

from __future__ import annotations

import re

import numpy as np

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.registers import RegisterVector, RegType
from .sim_values import approx, minmax

__all__ = ["compile_call", "FORMS"]

FORMS = "{ex2,lg2,sin,cos,rcp,rsqrt}.approx[.ftz].f32, tanh.approx.f32, {max,min}[.ftz][.NaN].f32"

_APPROX = re.compile(r"(ex2|lg2|sin|cos|rcp|rsqrt)\.approx(\.ftz)?\.f32|(tanh)\.approx\.f32")
_MINMAX = re.compile(r"(max|min)(\.ftz)?(\.NaN)?\.f32")


def _function(text: str):
    """The function of float32 inputs that ``text`` computes, and its operand count."""
    form = _APPROX.fullmatch(text)
    if form is not None:
        op, ftz = form.group(1) or form.group(3), form.group(2) is not None
        return (lambda a: approx(op, a, ftz)), 1
    form = _MINMAX.fullmatch(text)
    if form is not None:
        op, ftz, nan = form.group(1), form.group(2) is not None, form.group(3) is not None
        return (lambda a, b: minmax(op, a, b, ftz, nan)), 2
    return None, 0


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one instruction for a set of threads."""
    f, arity = _function(text)
    if f is None:
        raise unknown_instruction(stmt, text, FORMS)
    ops = stmt.operands
    if len(ops) != arity + 1:
        raise compiler.error(f"{text} takes {arity + 1} operands, not {len(ops)}")
    (d,) = RegisterVector(m, compiler, ops[0], "d", 1, True, RegType.F32).regs
    ins = [
        RegisterVector(m, compiler, op, name, 1, False, RegType.F32).regs[0]
        for op, name in zip(ops[1:], "ab")
    ]
    span = stmt.span

    def run(idx):
        m.span = span
        values = [r.read(idx).view(np.float32) for r in ins]
        d.write(idx, f(*values).view(np.uint32))

    return run
