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

Nothing here recurses in Python: statements run from an explicit stack and expressions go
through :mod:`tirx.ir.visitor`, so an ``elif`` chain or a sum as deep as CPython compiles
passes without a recursion limit.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from ..ir.simplify_index import simplify_index
from ..ir.visitor import DESCEND, Transformer, Visitor

__all__ = ["inline_indices"]


def inline_indices(fn: ir.Function, body: ir.Stmt) -> ir.Stmt:
    """``body`` (the lowered body of ``fn``) with its addresses substituted and simplified."""
    counts: dict = {}
    _count(body, counts)
    params = {p for p in fn.params if isinstance(p, ir.Var)}
    return _Pass(counts, params).stmt(body, {}, {})


def _count(body, counts) -> None:
    """How many times each variable is assigned (a loop counts for its variable)."""
    todo = [body]
    while todo:
        s = todo.pop()
        if isinstance(s, ir.Seq):
            todo.extend(reversed(s.stmts))
        elif isinstance(s, ir.Assign):
            counts[s.var] = counts.get(s.var, 0) + 1
        elif isinstance(s, ir.For):
            counts[s.var] = counts.get(s.var, 0) + 1
            todo.append(s.body)
        elif isinstance(s, ir.While):
            todo.append(s.body)
        elif isinstance(s, ir.If):
            if s.else_body is not None:
                todo.append(s.else_body)
            todo.append(s.then_body)


class _Pass:
    def __init__(self, counts: dict, params: set):
        self.counts, self.params = counts, params

    # ---------------------------------------------------------------- statements

    def stmt(self, root, env: dict, ranges: dict):
        """``root`` rewritten. ``env``: Var -> its substituted value; ``ranges``: loop Var ->
        (lo, hi) or None. A compound statement's step (:meth:`_steps`) yields each child with
        the env and ranges it is seen with and receives it rewritten; this loop runs the steps
        from its own stack, in program order."""
        stack = [self._steps(root, env, ranges)]
        sent = None
        while True:
            try:
                child = stack[-1].send(sent)
            except StopIteration as done:
                stack.pop()
                if not stack:
                    return done.value
                sent = done.value
                continue
            stack.append(self._steps(*child))
            sent = None

    def _steps(self, s, env: dict, ranges: dict):
        if isinstance(s, ir.Seq):
            env = dict(env)  # definitions made in this block end with it
            out = []
            for x in s.stmts:
                out.append((yield x, env, ranges))
                if isinstance(x, ir.Assign):
                    self.define(x, env, ranges)
            return replace(s, stmts=tuple(out))
        if isinstance(s, ir.For):
            inner = dict(ranges)
            inner[s.var] = _loop_range(s) if self.counts.get(s.var) == 1 else None
            return replace(s, body=(yield s.body, env, inner))
        if isinstance(s, ir.While):
            return replace(s, body=(yield s.body, env, ranges))
        if isinstance(s, ir.If):
            then = yield s.then_body, env, ranges
            orelse = None if s.else_body is None else (yield s.else_body, env, ranges)
            return replace(s, then_body=then, else_body=orelse)
        return self.simple(s, env, ranges)

    def simple(self, s, env: dict, ranges: dict):
        """A statement with no statements inside, rewritten."""
        if isinstance(s, ir.Assign):
            return replace(s, value=self.expr(s.value, env, ranges))
        if isinstance(s, ir.Store):
            return replace(
                s,
                index=self.index(s.index, env, ranges),
                value=self.expr(s.value, env, ranges),
            )
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
        return _Substitute(self, env, ranges).visit(e)

    # --------------------------------------------------------------- expressions

    def index(self, e, env, ranges):
        return self.finish_index(self.expr(e, env, ranges), env, ranges)

    def finish_index(self, e, env, ranges):
        """An index whose own loads and addresses are rewritten: substituted, simplified."""
        full = self.substitute(e, env, ranges) if isinstance(e, ir.Expr) else None
        bounds = {v: r for v, r in ranges.items() if r is not None}
        return simplify_index(full if full is not None else e, bounds)

    def expr(self, e, env, ranges):
        if not isinstance(e, ir.Expr):
            return e
        return _Rewrite(self, env, ranges).visit(e)

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


class _Substitute(Visitor):
    """``_Pass.substitute`` as a fold: a node's result is its substituted copy, or None when
    it reads anything unstable (loads, selects, comparisons, floats are left as they are)."""

    pass_name = "the index pass (substitution)"

    def __init__(self, owner: _Pass, env: dict, ranges: dict):
        self.owner, self.env, self.ranges = owner, env, ranges

    def _default(self, cls):
        return (_nothing, None)

    def enter_Const(self, e):
        return e

    enter_Special = enter_Const

    def enter_Var(self, e):
        if e in self.env:
            return self.env[e]
        counts = self.owner.counts
        if e in self.ranges and counts.get(e) == 1:
            return e  # a loop variable of a loop around the use, never assigned
        if e in self.owner.params and e not in counts:
            return e
        return None

    def enter_BinOp(self, e):
        return DESCEND if e.dtype.kind in ("int", "uint") else None

    def leave_BinOp(self, e, a, b):
        return None if a is None or b is None else ir.binop(e.op, a, b)

    enter_Cast = enter_BinOp

    def leave_Cast(self, e, value):
        return None if value is None else ir.cast(value, e.dtype)


def _nothing(self, node):
    return None


class _Rewrite(Transformer):
    """``_Pass.expr``: every load's index and every address's byte offset rewritten by
    :meth:`_Pass.finish_index` (after its own loads), the rest rebuilt around them."""

    pass_name = "the index pass"
    rebuilt = frozenset({"Logic", "Not", "Select"})
    kept = frozenset({"Const", "Var", "Special", "Buffer"})

    def __init__(self, owner: _Pass, env: dict, ranges: dict):
        self.owner, self.env, self.ranges = owner, env, ranges

    def leave_Load(self, e, buffer, index):
        return replace(e, index=self.owner.finish_index(index, self.env, self.ranges))

    def leave_SharedAddress(self, e, buffer, byte_offset):
        offset = self.owner.finish_index(byte_offset, self.env, self.ranges)
        return replace(e, byte_offset=offset)

    leave_GlobalAddress = leave_SharedAddress

    def leave_BinOp(self, e, a, b):
        return ir.binop(e.op, a, b)

    def leave_Cmp(self, e, a, b):
        return ir.cmp(e.op, a, b)

    def leave_Cast(self, e, value):
        return ir.cast(value, e.dtype)


def _loop_range(s: ir.For):
    start, stop = s.start, s.stop
    if not (isinstance(start, ir.Const) and isinstance(stop, ir.Const)):
        return None
    lo, hi = int(start.value), int(stop.value)
    if s.step > 0:
        return (lo, hi - 1) if hi > lo else None
    return (hi + 1, lo) if lo > hi else None
