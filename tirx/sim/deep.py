"""Expressions too tall for nested closures, evaluated on an explicit stack.

The expression compiler (:mod:`tirx.sim.expr`) turns a node into a closure over its
children's closures, which costs a few Python frames per level when it runs. Past
:data:`~tirx.sim.expr.MAX_CLOSURE_HEIGHT` levels a node becomes a *step* instead: a generator
``step(idx)`` that yields ``(child, idx')`` to ask for a child's value on the threads
``idx'`` and returns the node's value. :func:`drive` runs the steps from its own stack, so a
sum of thousands of terms, or a chain of thousands of conditionals, evaluates with the
recursion limit untouched. The semantics are the closures': the same children in the same
order on the same threads (``and``/``or`` and ``Select`` still evaluate a side only on the
threads that choose it).
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir
from .numeric import compute_type, convert

__all__ = ["tall_step", "drive"]


def drive(compiler, step, idx: np.ndarray) -> np.ndarray:
    """The value of a tall node (its ``step``) on the threads ``idx``, without recursion."""
    stack = [step(idx)]
    value = None
    while True:
        try:
            child, child_idx = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            value = done.value
            if not stack:
                return value
            continue
        tall = compiler._tall.get(id(child))
        if tall is not None and tall[0] is child:
            stack.append(tall[1](child_idx))
            value = None
        else:
            value = compiler._memo[id(child)][1](child_idx)


def _as_bool(dtype):
    if dtype.kind == "bool":
        return lambda v: v
    return lambda v: np.not_equal(v, 0)


def _as_type(src, dst):
    # the same rule as tirx.sim.expr.converted
    if src == dst or (compute_type(src) == compute_type(dst) and dst.bits >= 32):
        return lambda v: v
    return lambda v: convert(v, dst)


def tall_step(compiler, e: ir.Expr, method, kids: list):
    """The driver step of the tall node ``e`` (``method`` is its closure builder, ``kids`` its
    child expressions in field order)."""
    if isinstance(e, ir.Logic):
        return _logic_step(compiler, e)
    if isinstance(e, ir.Select):
        return _select_step(e)
    return _plain_step(compiler, e, method, kids)


def _plain_step(compiler, e, method, kids):
    """A node that evaluates every child on all its threads (arithmetic, comparison, cast,
    load): the children first, in field order, into slots; then the node's own closure, built
    over closures that read the slots."""
    slots = [[None] for _ in kids]
    holes = {id(k): _reader(s) for k, s in zip(kids, slots, strict=True)}
    saved, compiler._holes = compiler._holes, holes
    try:
        combine = method(e)
    finally:
        compiler._holes = saved
    order = tuple(zip(kids, slots, strict=True))

    def step(idx):
        for kid, slot in order:
            slot[0] = yield kid, idx
        value = combine(idx)
        for _, slot in order:
            slot[0] = None  # hold no thread arrays between runs
        return value

    return step


def _reader(slot: list):
    return lambda idx: slot[0]


def _logic_step(compiler, e: ir.Logic):
    if e.op not in ("and", "or"):
        raise compiler.error(f"unknown logical operator {e.op!r}")
    ta, tb = _as_bool(e.a.dtype), _as_bool(e.b.dtype)
    is_and = e.op == "and"

    def step(idx):
        a = ta((yield e.a, idx))
        go = a if is_and else ~a  # threads that evaluate the right operand
        if np.ndim(go) == 0:
            return tb((yield e.b, idx)) if go else a
        if go.all():
            return np.broadcast_to(tb((yield e.b, idx)), go.shape)
        if not go.any():
            return a
        out = a.copy()
        out[go] = tb((yield e.b, idx[go]))
        return out

    return step


def _select_step(e: ir.Select):
    d = e.dtype
    tc = _as_bool(e.cond.dtype)
    ta, tb = _as_type(e.a.dtype, d), _as_type(e.b.dtype, d)
    ct = compute_type(d)

    def step(idx):
        c = tc((yield e.cond, idx))
        if np.ndim(c) == 0:
            return ta((yield e.a, idx)) if c else tb((yield e.b, idx))
        if c.all():
            return ta((yield e.a, idx))
        if not c.any():
            return tb((yield e.b, idx))
        out = np.empty(c.shape, dtype=ct)
        out[c] = ta((yield e.a, idx[c]))
        out[~c] = tb((yield e.b, idx[~c]))
        return out

    return step
