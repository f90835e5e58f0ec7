"""Expressions taller than the simulator's closure nest run on its explicit-stack driver
(tirx/sim/deep.py) with the closures' semantics: same values, same faults, and ``and``/``or``
and ``Select`` evaluating a side only on the threads that choose it."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tests.test_sim_checks import expect_fault
from tests.test_sim_kernels import LANE, function, gbuf, span
from tirx.ir import nodes as ir
from tirx.sim import run
from tirx.sim.expr import MAX_CLOSURE_HEIGHT

I32 = ir.I32
N = 3000  # far taller than MAX_CLOSURE_HEIGHT and than the recursion limit


def _sum(n: int) -> ir.Expr:
    e = LANE
    for _ in range(n - 1):
        e = e + LANE
    return e


def _store(value: ir.Expr):
    out = gbuf("out", (32,), "int32")
    body = ir.Store(out, LANE, value, I32, span(3))
    return function("deep", (out,), body), np.full(32, -7, np.int32)


def test_the_sums_are_taller_than_the_closure_nest():
    assert N > 10 * MAX_CLOSURE_HEIGHT and N > sys.getrecursionlimit()


def test_a_tall_sum_has_the_value_of_a_short_one():
    fn, out = _store(_sum(N))
    run(fn, [out])
    assert out.tolist() == [N * lane for lane in range(32)]


def test_a_fault_deep_inside_is_reported_at_its_thread():
    # (lane + ... + lane) // lane faults on lane 0 alone, found by the driver
    fn, out = _store(ir.binop(ir.Op.FLOORDIV, _sum(N), LANE))
    expect_fault(fn, [out], "integer division by zero", lane=0, line=3)


@pytest.mark.parametrize("guarded", [True, False])
def test_and_evaluates_its_tall_right_side_only_where_the_left_holds(guarded):
    right = ir.cmp(ir.CmpOp.GT, ir.binop(ir.Op.FLOORDIV, _sum(N), LANE), 0)
    left = ir.cmp(ir.CmpOp.NE, LANE, 0) if guarded else ir.cmp(ir.CmpOp.GE, LANE, 0)
    fn, out = _store(ir.Select(ir.Logic("and", left, right), ir.const(1), ir.const(0), I32))
    if not guarded:  # lane 0 reaches the division: the twin that must fault
        expect_fault(fn, [out], "integer division by zero", lane=0)
        return
    run(fn, [out])
    assert out.tolist() == [0] + [1] * 31


@pytest.mark.parametrize("guarded", [True, False])
def test_select_evaluates_each_tall_side_on_the_threads_that_choose_it(guarded):
    quotient = ir.binop(ir.Op.FLOORDIV, _sum(N), LANE)  # faults on lane 0
    cond = ir.cmp(ir.CmpOp.EQ, LANE, 0) if guarded else ir.cmp(ir.CmpOp.EQ, LANE, 99)
    fn, out = _store(ir.Select(cond, ir.binop(ir.Op.MIN, _sum(N), ir.const(5)), quotient, I32))
    if not guarded:
        expect_fault(fn, [out], "integer division by zero", lane=0)
        return
    run(fn, [out])
    assert out.tolist() == [0] + [N] * 31


def test_a_chain_of_tall_conditionals_walks_to_its_end():
    e = ir.const(-1)
    for i in reversed(range(N)):  # lane == i ? i * 10 : (...)
        e = ir.Select(ir.cmp(ir.CmpOp.EQ, LANE, i), ir.const(i * 10), e, I32)
    fn, out = _store(e)
    run(fn, [out])
    assert out.tolist() == [10 * lane for lane in range(32)]
