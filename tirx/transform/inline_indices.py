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

Then each address is simplified (tirx/ir/simplify_index.py) knowing the ranges of the
loops around it: ``(tid + 128 * q) // 8 -> tid // 8 + q * 16``, and a constant offset per
unrolled copy becomes part of the address. Assignments stay (other uses may need them).
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from ..ir.simplify_index import simplify_index

__all__ = ["inline_indices"]


def inline_indices(fn: ir.Function, body: ir.Stmt) -> ir.Stmt:
    """``body`` (the lowered body of ``fn``) with its addresses substituted and simplified."""
    counts: dict = {}
    _count(body, counts)
    params = {p for p in fn.params if isinstance(p, ir.Var)}
    return _Pass(counts, params).stmt(body, {}, {})


def _count(body, counts) -> None:
    todo = [body]  # a work list, not recursion: elif chains nest thousands deep
    while todo:
        s = todo.pop()
        if isinstance(s, ir.Seq):
            todo.extend(s.stmts)
        elif isinstance(s, ir.Assign):
            counts[s.var] = counts.get(s.var, 0) + 1
        elif isinstance(s, ir.For):
            counts[s.var] = counts.get(s.var, 0) + 1
            todo.append(s.body)
        elif isinstance(s, ir.While):
            todo.append(s.body)
        elif isinstance(s, ir.If):
            todo.append(s.then_body)
            if s.else_body is not None:
                todo.append(s.else_body)


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
        if isinstance(s, ir.If):  # an elif chain as a loop over its links
            links = [s]
            while isinstance(links[-1].else_body, ir.If):
                links.append(links[-1].else_body)
            tail = links[-1].else_body
            out = None if tail is None else self.stmt(tail, env, ranges)
            for link in reversed(links):
                then = self.stmt(link.then_body, env, ranges)
                out = replace(link, then_body=then, else_body=out)
            return out
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
        """``e`` with stable variables replaced, or None when it reads anything unstable
        (children first from a work stack: no recursion at any depth)."""
        out: dict = {}
        todo = [e]
        while todo:
            x = todo[-1]
            if id(x) in out:
                todo.pop()
                continue
            kids = _substituted_children(x)
            pending = [k for k in kids if id(k) not in out]
            if pending:
                todo.extend(pending)
                continue
            todo.pop()
            out[id(x)] = self._substitute_one(x, [out[id(k)] for k in kids], env, ranges)
        return out[id(e)]

    def _substitute_one(self, e, kids, env, ranges):
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
        if any(k is None for k in kids) or not kids:
            return None  # loads, selects, comparisons, floats: left as they are
        if isinstance(e, ir.BinOp):
            return ir.binop(e.op, *kids)
        return ir.cast(kids[0], e.dtype)

    # --------------------------------------------------------------- expressions

    def index(self, e, env, ranges):
        e = self.expr(e, env, ranges)
        if _deeper_than(e, _MAX_SIMPLIFIED_DEPTH):
            return e  # no real address is this deep; the simplifier recurses
        full = self.substitute(e, env, ranges) if isinstance(e, ir.Expr) else None
        bounds = {v: r for v, r in ranges.items() if r is not None}
        return simplify_index(full if full is not None else e, bounds)

    def expr(self, e, env, ranges):
        """``e`` with its addresses rewritten (children first from a work stack: an
        expression as deep as CPython compiles needs no recursion)."""
        out: dict = {}
        todo = [e]
        while todo:
            x = todo[-1]
            if id(x) in out:
                todo.pop()
                continue
            fields = _REWRITTEN.get(type(x), ())
            pending = [getattr(x, f) for f in fields if id(getattr(x, f)) not in out]
            if pending:
                todo.extend(pending)
                continue
            todo.pop()
            out[id(x)] = self._expr_one(x, [out[id(getattr(x, f))] for f in fields], env, ranges)
        return out[id(e)]

    def _expr_one(self, e, kids, env, ranges):
        if isinstance(e, ir.Load):
            return replace(e, index=self.index(e.index, env, ranges))
        if isinstance(e, (ir.SharedAddress, ir.GlobalAddress)):
            return replace(e, byte_offset=self.index(e.byte_offset, env, ranges))
        if isinstance(e, ir.BinOp):
            return ir.binop(e.op, *kids)
        if isinstance(e, ir.Cmp):
            return ir.cmp(e.op, *kids)
        if isinstance(e, (ir.Logic, ir.Not, ir.Select)):
            return replace(e, **dict(zip(_REWRITTEN[type(e)], kids, strict=True)))
        if isinstance(e, ir.Cast):
            return ir.cast(kids[0], e.dtype)
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


#: The expression fields the pass rewrites, per node class (the rest are leaves to it).
_REWRITTEN = {
    ir.BinOp: ("a", "b"),
    ir.Cmp: ("a", "b"),
    ir.Logic: ("a", "b"),
    ir.Not: ("a",),
    ir.Select: ("cond", "a", "b"),
    ir.Cast: ("value",),
}
_MAX_SIMPLIFIED_DEPTH = 200


def _substituted_children(e) -> tuple:
    if isinstance(e, ir.BinOp) and e.dtype.kind in ("int", "uint"):
        return (e.a, e.b)
    if isinstance(e, ir.Cast) and e.dtype.kind in ("int", "uint"):
        return (e.value,)
    return ()


def _deeper_than(e, limit: int) -> bool:
    todo, seen = [(e, 1)], {}
    while todo:
        x, depth = todo.pop()
        if depth > limit:
            return True
        if seen.get(id(x), 0) >= depth:
            continue  # a shared subexpression, already walked from this deep
        seen[id(x)] = depth
        todo.extend((getattr(x, f), depth + 1) for f in _REWRITTEN.get(type(x), ()))
    return False


def _loop_range(s: ir.For):
    start, stop = s.start, s.stop
    if not (isinstance(start, ir.Const) and isinstance(stop, ir.Const)):
        return None
    lo, hi = int(start.value), int(stop.value)
    if s.step > 0:
        return (lo, hi - 1) if hi > lo else None
    return (hi + 1, lo) if lo > hi else None
