"""The integer variables a kernel assigns exactly once, to a value of constants, variables and
thread indices only, with that value: what an analysis may see through (the lowering's
:func:`tirx.isa.shared_rows.residue`; the simulator's bounds, :mod:`tirx.sim.bounds`)."""

from __future__ import annotations

from . import nodes as ir
from .visitor import DESCEND, Visitor, Walker, leaf_statement

__all__ = ["single_assignments"]


def single_assignments(body) -> dict:
    """Var -> value for the integer variables assigned exactly once in ``body``, to a value
    built of constants, variables and thread indices only."""
    walker = _Assignments()
    walker.run(body)
    counts, values = walker.counts, walker.values
    return {
        v: e
        for v, e in values.items()
        if counts[v] == 1 and v.dtype.kind in ("int", "uint") and _pure(e)
    }


class _Assignments(Walker):
    """How often each variable is assigned, and its last value, over the statements."""

    pass_name = "lowering (its single-assignment analysis)"

    def __init__(self):
        self.counts: dict = {}
        self.values: dict = {}

    def visit_Seq(self, s):
        return s.stmts

    def visit_Assign(self, s):
        self.counts[s.var] = self.counts.get(s.var, 0) + 1
        self.values[s.var] = s.value

    def visit_For(self, s):
        self.counts[s.var] = self.counts.get(s.var, 0) + 2  # a loop variable takes many values
        return (s.body,)

    def visit_While(self, s):
        return (s.body,)

    def visit_If(self, s):
        return (s.then_body, s.else_body)  # the walker skips a missing else

    def _no_assignment(self, s):
        return None

    def _default(self, cls):
        leaves = ("Store", "ElemStore", "Break", "Continue", "Barrier", "Printf", "TileOp")
        if cls.__name__ in (*leaves, "RawPtx", "PtxCall"):
            return (_Assignments._no_assignment,)
        # an instruction family's statement (its catalog row's ``nodes``: atomics, votes, CTA
        # reductions, a sleep, a clock read, an assert, a register fence, a pair conversion)
        # has no statement inside and assigns only a fresh result variable of its own, which
        # no Assign sets; a family node that holds statements needs its own visit_ rule here
        if leaf_statement(cls):
            return (_Assignments._no_assignment,)
        return None


class _Pure(Visitor):
    """Whether an expression is built of constants, variables and thread indices only."""

    pass_name = "the purity analysis"

    def _yes(self, e):
        return True

    def _no(self, e):
        return False

    enter_Const = enter_Var = enter_Special = _yes

    def enter_BinOp(self, e):
        return DESCEND

    def leave_BinOp(self, e, a, b):
        return a and b

    def enter_Cast(self, e):
        return DESCEND

    def leave_Cast(self, e, value):
        return value

    def _default(self, cls):
        return (_Pure._no, None) if issubclass(cls, ir.Expr) else None


def _pure(e) -> bool:
    return _Pure().visit(e)
