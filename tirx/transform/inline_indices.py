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

import functools
from dataclasses import replace

from ..ir import nodes as ir
from ..ir.simplify import structural_key
from ..ir.simplify_index import simplify_index
from ..ir.visitor import (
    DESCEND,
    Transformer,
    UnknownNodeError,
    Visitor,
    is_family_node,
    leaf_statement,
)

__all__ = ["inline_indices"]

_PASS_NAME = "the index pass"
_INT_KINDS = ("int", "uint")
# statements with no statement inside and no address to rewrite
_PLAIN = (ir.Break, ir.Continue, ir.Barrier, ir.Printf)


def _plain(s) -> bool:
    return _is_plain(type(s))


@functools.cache
def _is_plain(cls: type) -> bool:
    """One of :data:`_PLAIN`, or a statement node of an instruction family (its catalog row's
    ``nodes``: atomics, votes, CTA reductions, sleeps, clock reads, asserts, register fences,
    pair conversions): its addresses are left as its family's lowering wrote them, and the
    result variable of one that has one is assigned by no Assign, so no use of it is
    substituted. A family node that holds statements, or whose addresses this pass must
    rewrite, needs a rule here."""
    return issubclass(cls, _PLAIN) or leaf_statement(cls)


def inline_indices(fn: ir.Function, body: ir.Stmt) -> ir.Stmt:
    """``body`` (the lowered body of ``fn``) with its addresses substituted and simplified;
    a statement with nothing to rewrite is returned itself."""
    params = {p for p in fn.params if isinstance(p, ir.Var)}
    return _Statements(_assignment_counts(body), params).run(body)


def _assignment_counts(body) -> dict:
    """Var -> how many statements assign it (a loop header counts as one)."""
    counts: dict = {}
    stack = [body]
    while stack:
        s = stack.pop()
        if isinstance(s, ir.Seq):
            stack.extend(s.stmts)
        elif isinstance(s, ir.Assign):
            counts[s.var] = counts.get(s.var, 0) + 1
        elif isinstance(s, ir.For):
            counts[s.var] = counts.get(s.var, 0) + 1
            stack.append(s.body)
        elif isinstance(s, ir.While):
            stack.append(s.body)
        elif isinstance(s, ir.If):
            stack.append(s.then_body)
            if s.else_body is not None:
                stack.append(s.else_body)
        elif not (isinstance(s, (ir.Store, ir.PtxCall)) or _plain(s)):
            raise UnknownNodeError(type(s), _PASS_NAME)
    return counts


class _Statements:
    """The statement walk, over an explicit stack. Each item is ``(stmt, env, ranges)`` --
    ``env``: Var -> its substituted value; ``ranges``: loop Var -> (lo, hi) or None -- or a
    callable run in order (a definition, or the rebuild of a compound statement from the
    results of its bodies)."""

    def __init__(self, counts: dict, params: set):
        self.counts, self.params = counts, params
        # for the whole pass: the structural keys of the subtrees met (the substituted values
        # are shared by every address that reads them), and each address simplified under
        # its ranges (the same address recurs: in the branches of an if, in unrolled copies)
        self.keys: dict = {}
        self.simplified: dict = {}

    def run(self, body):
        out: list = []
        todo: list = [(body, {}, {})]
        while todo:
            item = todo.pop()
            if callable(item):
                item(out)
                continue
            s, env, ranges = item
            if isinstance(s, ir.Seq):
                env = dict(env)  # definitions made in this block end with it
                todo.append(_rebuilt_seq(s))
                for x in reversed(s.stmts):
                    if isinstance(x, ir.Assign):
                        todo.append(self._definition(x, env, ranges))
                    todo.append((x, env, ranges))
            elif isinstance(s, ir.For):
                inner = dict(ranges)
                inner[s.var] = _loop_range(s) if self.counts.get(s.var) == 1 else None
                todo.append(_rebuilt_body(s))
                todo.append((s.body, env, inner))
            elif isinstance(s, ir.While):
                todo.append(_rebuilt_body(s))
                todo.append((s.body, env, ranges))
            elif isinstance(s, ir.If):
                then_ranges, else_ranges = _branch_ranges(s.cond, ranges)
                todo.append(_rebuilt_if(s))
                if s.else_body is not None:
                    todo.append((s.else_body, env, else_ranges))
                todo.append((s.then_body, env, then_ranges))
            else:
                out.append(self.simple(s, env, ranges))
        return out[0]

    def simple(self, s, env, ranges):
        """A statement with no statement inside, its expressions rewritten."""
        if _plain(s):
            return s
        exprs = _Expressions(self, env, ranges)
        if isinstance(s, ir.Assign):
            value = exprs.visit(s.value)
            return s if value is s.value else replace(s, value=value)
        if isinstance(s, ir.Store):
            index, value = exprs.index(exprs.visit(s.index)), exprs.visit(s.value)
            if index is s.index and value is s.value:
                return s
            return replace(s, index=index, value=value)
        if isinstance(s, ir.PtxCall):
            operands = tuple(exprs.visit(o) for o in s.operands)
            if all(a is b for a, b in zip(operands, s.operands, strict=True)):
                return s
            return replace(s, operands=operands)
        raise UnknownNodeError(type(s), _PASS_NAME)

    def _definition(self, a: ir.Assign, env: dict, ranges: dict):
        def define(out):
            v = a.var
            if self.counts.get(v) != 1 or v in self.params or v.dtype.kind not in _INT_KINDS:
                return
            value = _Substitution(self, env, ranges).visit(a.value)
            if value is not None and value.dtype == v.dtype:
                env[v] = value

        return define


def _rebuilt_seq(s: ir.Seq):
    def finish(out):
        n = len(s.stmts)
        stmts = tuple(out[len(out) - n :])
        del out[len(out) - n :]
        same = all(a is b for a, b in zip(stmts, s.stmts, strict=True))
        out.append(s if same else replace(s, stmts=stmts))

    return finish


def _rebuilt_body(s):
    def finish(out):
        body = out.pop()
        out.append(s if body is s.body else replace(s, body=body))

    return finish


def _rebuilt_if(s: ir.If):
    def finish(out):
        orelse = None if s.else_body is None else out.pop()
        then = out.pop()
        same = then is s.then_body and orelse is s.else_body
        out.append(s if same else replace(s, then_body=then, else_body=orelse))

    return finish


class _Substitution(Visitor):
    """``e`` with stable variables replaced by their values, or None when it reads anything
    unstable (loads, selects, comparisons, floats are left as they are)."""

    pass_name = "the index pass's substitution"

    def __init__(self, statements: _Statements, env: dict, ranges: dict):
        self.counts, self.params = statements.counts, statements.params
        self.env, self.ranges = env, ranges

    def leaf(self, value):
        return None

    def enter_Const(self, e):
        return e

    def enter_Special(self, e):
        return e

    def enter_Var(self, e):
        if e in self.env:
            return self.env[e]
        if e in self.ranges and self.counts.get(e) == 1:
            return e  # a loop variable of a loop around the use, never assigned
        if e in self.params and e not in self.counts:
            return e
        return None

    def enter_BinOp(self, e):
        return DESCEND if e.dtype.kind in _INT_KINDS else None

    def leave_BinOp(self, e, a, b):
        return None if a is None or b is None else ir.binop(e.op, a, b)

    def enter_Cast(self, e):
        return DESCEND if e.dtype.kind in _INT_KINDS else None

    def leave_Cast(self, e, inner):
        return None if inner is None else ir.cast(inner, e.dtype)

    def _unstable(self, e):
        return None

    def _default(self, cls):
        unstable = ("Load", "SharedAddress", "GlobalAddress", "Cmp", "Logic", "Not", "Select")
        unstable += ("Reinterpret",)
        # and a family's own expression (a math intrinsic; a warp collective reads other
        # lanes' values)
        if cls.__name__ in unstable or is_family_node(cls):
            return (_Substitution._unstable, None)
        return None


class _Expressions(Transformer):
    """Expressions and PTX operands with every address (a load's index, a shared or global
    address's byte offset) substituted and simplified; an unchanged node is kept."""

    pass_name = _PASS_NAME
    rebuilt = frozenset({"Logic", "Not", "Select", "AddressOperand", "ScalarOperand"})
    rebuilt |= frozenset({"RegVector", "ValueReg", "Reinterpret"})
    rebuilt_family_expressions = True  # a math intrinsic, a warp collective
    kept = frozenset({"Const", "Var", "Special", "Buffer", "LocalReg", "Immediate"})

    def __init__(self, statements: _Statements, env: dict, ranges: dict):
        self.statements = statements
        self.substitution = _Substitution(statements, env, ranges)
        self.bounds = {v: r for v, r in ranges.items() if r is not None}
        self.bounds_key = tuple(self.bounds.items())

    def index(self, e):
        """An address whose parts are rewritten already: substituted, then simplified."""
        full = self.substitution.visit(e) if isinstance(e, ir.Expr) else None
        e = full if full is not None else e
        if not isinstance(e, ir.Expr):
            return e
        known = self.statements
        key = (structural_key(e, known.keys), self.bounds_key)
        out = known.simplified.get(key)
        if out is None:
            out = known.simplified[key] = simplify_index(e, self.bounds, known.keys)
        return out

    def leave_Load(self, e, buffer, index):
        return replace(e, index=self.index(index))

    def leave_SharedAddress(self, e, buffer, byte_offset):
        return replace(e, byte_offset=self.index(byte_offset))

    def leave_GlobalAddress(self, e, buffer, byte_offset):
        return replace(e, byte_offset=self.index(byte_offset))

    def leave_BinOp(self, e, a, b):
        return e if a is e.a and b is e.b else ir.binop(e.op, a, b)

    def leave_Cmp(self, e, a, b):
        return e if a is e.a and b is e.b else ir.cmp(e.op, a, b)

    def leave_Cast(self, e, value):
        return e if value is e.value else ir.cast(value, e.dtype)


# the values of ``v`` for which ``v OP c`` holds, as inclusive bounds, within ``lo..hi``
_HOLDS = {
    ir.CmpOp.EQ: lambda c, lo, hi: (c, c),
    ir.CmpOp.LT: lambda c, lo, hi: (lo, c - 1),
    ir.CmpOp.LE: lambda c, lo, hi: (lo, c),
    ir.CmpOp.GT: lambda c, lo, hi: (c + 1, hi),
    ir.CmpOp.GE: lambda c, lo, hi: (c, hi),
}
_NEGATED = {
    ir.CmpOp.EQ: ir.CmpOp.NE,
    ir.CmpOp.NE: ir.CmpOp.EQ,
    ir.CmpOp.LT: ir.CmpOp.GE,
    ir.CmpOp.GE: ir.CmpOp.LT,
    ir.CmpOp.LE: ir.CmpOp.GT,
    ir.CmpOp.GT: ir.CmpOp.LE,
}
_MIRRORED = {
    ir.CmpOp.EQ: ir.CmpOp.EQ,
    ir.CmpOp.NE: ir.CmpOp.NE,
    ir.CmpOp.LT: ir.CmpOp.GT,
    ir.CmpOp.GT: ir.CmpOp.LT,
    ir.CmpOp.LE: ir.CmpOp.GE,
    ir.CmpOp.GE: ir.CmpOp.LE,
}


def _branch_ranges(cond, ranges: dict) -> tuple[dict, dict]:
    """The loop ranges inside the two branches of ``if cond``: a comparison of a loop
    variable with a constant (``kp == 0``, ``kt < 3``) narrows that variable's range in each
    branch (loop variables are never assigned in their loop, so the fact holds throughout)."""
    if not isinstance(cond, ir.Cmp):
        return ranges, ranges
    op, v, c = cond.op, cond.a, cond.b
    if isinstance(v, ir.Const) and isinstance(c, ir.Var):
        op, v, c = _MIRRORED[op], c, v
    if not (isinstance(v, ir.Var) and isinstance(c, ir.Const)) or ranges.get(v) is None:
        return ranges, ranges
    if isinstance(c.value, bool) or not isinstance(c.value, int):
        return ranges, ranges
    return _narrowed(ranges, v, op, int(c.value)), _narrowed(ranges, v, _NEGATED[op], int(c.value))


def _narrowed(ranges: dict, v, op, c: int) -> dict:
    lo, hi = ranges[v]
    if op is ir.CmpOp.NE:  # only an end can go
        new = (lo + 1, hi) if c == lo else (lo, hi - 1) if c == hi else (lo, hi)
    else:
        a, b = _HOLDS[op](c, lo, hi)
        new = (max(lo, a), min(hi, b))
    if new[0] > new[1] or new == (lo, hi):  # a branch that never runs: nothing to learn
        return ranges
    out = dict(ranges)
    out[v] = new
    return out


def _loop_range(s: ir.For):
    start, stop = s.start, s.stop
    if not (isinstance(start, ir.Const) and isinstance(stop, ir.Const)):
        return None
    lo, hi = int(start.value), int(stop.value)
    if s.step > 0:
        return (lo, hi - 1) if hi > lo else None
    return (hi + 1, lo) if lo > hi else None
