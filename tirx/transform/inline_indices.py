"""The index pass: every address of a lowered function rewritten in terms of loop variables
and thread indices, then simplified.

A kernel names its index arithmetic (``idx = tid + 128 * q``, ``row = bm * 64 + ...``); the
lowering then splits ``idx`` again through the layouts (``idx // 8``, ``idx % 8``). Seen
through the name, ``(tid + 128 * q) // 8`` cannot become ``tid // 8 + 16 * q``, so every copy
keeps its own division and its own 64-bit address. This pass substitutes a variable's value
into the addresses that use it, where that is exact:

* the variable is assigned exactly once in the function, to an integer value without loads;
* the value's variables are themselves stable: loop variables of loops around the assignment
  that the body never assigns, parameters never assigned, or variables substituted this way;
* the use comes after the assignment in the same block (or nested in a later statement of
  it), so whenever the use runs the assignment has run with the same operands.

Then each address is simplified (tirx/transform/simplify_index.py) knowing the ranges of the
loops around it: ``(tid + 128 * q) // 8 -> tid // 8 + q * 16``, and a constant offset per
unrolled copy becomes part of the address. Assignments stay (other uses may need them).
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from .simplify_index import simplify_index

__all__ = ["inline_indices"]


def inline_indices(fn: ir.Function, body: ir.Stmt) -> ir.Stmt:
    """``body`` (the lowered body of ``fn``) with its addresses substituted and simplified."""
    counts: dict = {}
    _count(body, counts)
    params = {p for p in fn.params if isinstance(p, ir.Var)}
    return _Pass(counts, params).stmt(body, {}, {})


def _count(s, counts) -> None:
    if isinstance(s, ir.Seq):
        for x in s.stmts:
            _count(x, counts)
    elif isinstance(s, ir.Assign):
        counts[s.var] = counts.get(s.var, 0) + 1
    elif isinstance(s, ir.For):
        counts[s.var] = counts.get(s.var, 0) + 1
        _count(s.body, counts)
    elif isinstance(s, ir.While):
        _count(s.body, counts)
    elif isinstance(s, ir.If):
        _count(s.then_body, counts)
        if s.else_body is not None:
            _count(s.else_body, counts)


class _Pass:
    def __init__(self, counts: dict, params: set):
        self.counts, self.params = counts, params

    # ---------------------------------------------------------------- statements

    def stmt(self, s, env: dict, ranges: dict):
        """``env``: Var -> its substituted value; ``ranges``: loop Var -> (lo, hi) or None."""
        if isinstance(s, ir.Seq):
            env = dict(env)  # definitions made in this block end with it
            out = []
            for x in s.stmts:
                out.append(self.stmt(x, env, ranges))
                if isinstance(x, ir.Assign):
                    self.define(x, env, ranges)
            return replace(s, stmts=tuple(out))
        if isinstance(s, ir.Assign):
            return replace(s, value=self.expr(s.value, env, ranges))
        if isinstance(s, ir.Store):
            return replace(
                s,
                index=self.index(s.index, env, ranges),
                value=self.expr(s.value, env, ranges),
            )
        if isinstance(s, ir.For):
            inner = dict(ranges)
            inner[s.var] = _loop_range(s) if self.counts.get(s.var) == 1 else None
            return replace(s, body=self.stmt(s.body, env, inner))
        if isinstance(s, ir.While):
            return replace(s, body=self.stmt(s.body, env, ranges))
        if isinstance(s, ir.If):
            orelse = None if s.else_body is None else self.stmt(s.else_body, env, ranges)
            return replace(s, then_body=self.stmt(s.then_body, env, ranges), else_body=orelse)
        if isinstance(s, ir.PtxCall):
            return replace(s, operands=tuple(self.operand(o, env, ranges) for o in s.operands))
        if isinstance(s, (ir.Break, ir.Continue, ir.Barrier, ir.Printf)):
            return s
        raise TypeError(f"the index pass does not know {type(s).__name__}")

    def define(self, a: ir.Assign, env: dict, ranges: dict) -> None:
        v = a.var
        if self.counts.get(v) != 1 or v in self.params or v.dtype.kind not in ("int", "uint"):
            return
        value = self.substitute(a.value, env, ranges)
        if value is not None and value.dtype == v.dtype:
            env[v] = value

    def substitute(self, e, env, ranges):
        """``e`` with stable variables replaced, or None when it reads anything unstable."""
        if isinstance(e, (ir.Const, ir.Special)):
            return e
        if isinstance(e, ir.Var):
            if e in env:
                return env[e]
            if e in ranges and self.counts.get(e) == 1:
                return e  # a loop variable of a loop around the use, never assigned
            if e in self.params and e not in self.counts:
                return e
            return None
        if isinstance(e, ir.BinOp) and e.dtype.kind in ("int", "uint"):
            a, b = self.substitute(e.a, env, ranges), self.substitute(e.b, env, ranges)
            if a is None or b is None:
                return None
            return ir.binop(e.op, a, b)
        if isinstance(e, ir.Cast) and e.dtype.kind in ("int", "uint"):
            inner = self.substitute(e.value, env, ranges)
            return None if inner is None else ir.cast(inner, e.dtype)
        return None  # loads, selects, comparisons, floats: left as they are

    # --------------------------------------------------------------- expressions

    def index(self, e, env, ranges):
        e = self.expr(e, env, ranges)
        full = self.substitute(e, env, ranges) if isinstance(e, ir.Expr) else None
        bounds = {v: r for v, r in ranges.items() if r is not None}
        return simplify_index(full if full is not None else e, bounds)

    def expr(self, e, env, ranges):
        if isinstance(e, ir.Load):
            return replace(e, index=self.index(e.index, env, ranges))
        if isinstance(e, (ir.SharedAddress, ir.GlobalAddress)):
            return replace(e, byte_offset=self.index(e.byte_offset, env, ranges))
        if isinstance(e, ir.BinOp):
            return ir.binop(e.op, self.expr(e.a, env, ranges), self.expr(e.b, env, ranges))
        if isinstance(e, ir.Cmp):
            return ir.cmp(e.op, self.expr(e.a, env, ranges), self.expr(e.b, env, ranges))
        if isinstance(e, ir.Logic):
            return replace(e, a=self.expr(e.a, env, ranges), b=self.expr(e.b, env, ranges))
        if isinstance(e, ir.Not):
            return replace(e, a=self.expr(e.a, env, ranges))
        if isinstance(e, ir.Select):
            return replace(
                e,
                cond=self.expr(e.cond, env, ranges),
                a=self.expr(e.a, env, ranges),
                b=self.expr(e.b, env, ranges),
            )
        if isinstance(e, ir.Cast):
            return ir.cast(self.expr(e.value, env, ranges), e.dtype)
        if isinstance(e, (ir.Const, ir.Var, ir.Special)) or not isinstance(e, ir.Expr):
            return e
        raise TypeError(f"the index pass does not know {type(e).__name__}")

    def operand(self, op, env, ranges):
        if isinstance(op, ir.AddressOperand):
            return ir.AddressOperand(self.expr(op.address, env, ranges))
        if isinstance(op, ir.ScalarOperand):
            return ir.ScalarOperand(self.expr(op.value, env, ranges))
        if isinstance(op, ir.RegVector):
            regs = tuple(
                ir.ValueReg(self.expr(r.value, env, ranges)) if isinstance(r, ir.ValueReg) else r
                for r in op.regs
            )
            return ir.RegVector(regs, op.is_output)
        return op  # Immediate


def _loop_range(s: ir.For):
    start, stop = s.start, s.stop
    if not (isinstance(start, ir.Const) and isinstance(stop, ir.Const)):
        return None
    lo, hi = int(start.value), int(stop.value)
    if s.step > 0:
        return (lo, hi - 1) if hi > lo else None
    return (hi + 1, lo) if lo > hi else None
