"""Unrolling the ``T.unroll`` loops whose tile operations (or raw ``T.ptx`` calls) pick
registers by the loop variable.

An instruction names its registers at compile time, so a register operand of a tile operation
must start at a compile-time slot (tirx/isa/operands.py). In

    for kq in T.unroll(KQ):
        T.cuda.tile.apply(T.ptx[mma], acc_view, q.view(1, KQ, 16, 8, layout=L)[:, kq : kq + 1], ...)

the slot depends on ``kq``, which is a compile-time value in each copy of an unrolled loop (as
does the register of ``T.ptx["ex2.approx.ftz.f32"](s[j], s[j])`` in a loop over ``j``).
Such a loop is expanded before it is lowered: one copy of its body per iteration, the loop
variable replaced by the iteration's value (folded), so every copy's register views start at
a known slot. A variable the body assigns once from the loop variables (``i = 4 * ni + e``,
then ``s[i]``) counts as they do: in each copy it is a constant after its assignment, and is
folded there. Only these loops are expanded; any other ``T.unroll`` loop stays a loop in the
IR (``#pragma unroll`` in CUDA), as before.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from ..ir.simplify import static_value
from ..ir.visitor import Transformer, rebuild, walk

__all__ = ["picks_registers", "unrolled"]


def picks_registers(loop: ir.For) -> bool:
    """Whether ``loop`` is a ``T.unroll`` loop with a tile operation in its body whose
    register operand's first slot depends on the loop variable, or a raw ``T.ptx`` call whose
    register operand (an element of a local array) is indexed by it."""
    if loop.kind is not ir.LoopKind.UNROLL:
        return False
    varying = _varying(loop)

    def uses_var(e) -> bool:
        return isinstance(e, ir.Expr) and any(n in varying for n in walk(e))

    for node in walk(loop.body):
        if isinstance(node, ir.TileOp):
            for v in node.operands:
                if (
                    isinstance(v, ir.View)
                    and v.buffer.scope is ir.Scope.LOCAL
                    and uses_var(v.elem_offset)
                ):
                    return True
        elif isinstance(node, ir.RawPtx):
            for e in node.operands:
                if (
                    isinstance(e, ir.ElemLoad)
                    and e.view.buffer.scope is ir.Scope.LOCAL
                    and (uses_var(e.view.elem_offset) or any(map(uses_var, e.indices)))
                ):
                    return True
    return False


def _varying(loop: ir.For) -> set:
    """The loop variable and the variables the body assigns from it (``i = 4 * ni + e``),
    directly or through one another."""
    varying = {loop.var}
    assigns = [n for n in walk(loop.body) if isinstance(n, ir.Assign)]
    grew = True
    while grew:
        grew = False
        for a in assigns:
            if a.var not in varying and any(n in varying for n in walk(a.value)):
                varying.add(a.var)
                grew = True
    return varying


def unrolled(loop: ir.For) -> ir.Seq:
    """The copies of ``loop``'s body, one per iteration, the variable replaced by its value
    (``T.unroll`` bounds are compile-time: the parser checks them). In each copy, a variable
    the body assigns once, at its top level, from what is then a constant (``i = 2 * a + e``)
    is replaced by that constant in the statements after it, so a register it indexes is
    known too (the assignment stays, for a use after the loop)."""
    start, stop = static_value(loop.start), static_value(loop.stop)
    values = range(start, stop, loop.step)
    counts: dict = {}
    for n in walk(loop.body):
        if isinstance(n, ir.Assign):
            counts[n.var] = counts.get(n.var, 0) + 1
    once = {v for v, c in counts.items() if c == 1}
    copies = tuple(
        _fold_once_assigned(
            _Substitute({loop.var: ir.const(i, loop.var.dtype)}).visit(loop.body), once
        )
        for i in values
    )
    return ir.Seq(copies, loop.span)


def _fold_once_assigned(body: ir.Stmt, once: set) -> ir.Stmt:
    """``body`` with each variable of ``once`` that its top level assigns a constant replaced
    by the constant in the statements after the assignment."""
    if not isinstance(body, ir.Seq):
        return body
    known: dict = {}  # var -> the constant it holds from here on
    out = []
    for st in body.stmts:
        if known:
            st = _Substitute(known).visit(st)
        if isinstance(st, ir.Assign) and st.var in once:
            v = static_value(st.value)
            if v is not None:
                known = {**known, st.var: ir.const(v, st.var.dtype)}
        out.append(st)
    if all(a is b for a, b in zip(out, body.stmts)):
        return body
    return ir.Seq(tuple(out), body.span)


class _Substitute(Transformer):
    """Every node rebuilt with each variable of ``values`` replaced by its constant;
    arithmetic refolded."""

    pass_name = "unrolling"

    def __init__(self, values: dict):
        self.values = values

    def _default(self, cls):
        if cls in (ir.Buffer, ir.Const, ir.Special):
            return (_keep, None)
        return (None, _rebuild)

    def enter_Var(self, e):
        return self.values.get(e, e)

    def leave_BinOp(self, e, a, b):
        return e if a is e.a and b is e.b else ir.binop(e.op, a, b)

    def leave_Cmp(self, e, a, b):
        return e if a is e.a and b is e.b else ir.cmp(e.op, a, b)

    def leave_Cast(self, e, value):
        return e if value is e.value else ir.cast(value, e.dtype)

    def leave_TileOp(self, s, *children):
        # the keyword parameters (cp.async's src_size, pred) are values outside the fields
        # the visitor walks
        params = tuple((k, self.visit(v) if isinstance(v, ir.Expr) else v) for k, v in s.params)
        out = rebuild(s, children)
        same = all(a[1] is b[1] for a, b in zip(params, s.params))
        return out if same else replace(out, params=params)


def _keep(self, node):
    return node


def _rebuild(self, node, *values):
    return rebuild(node, values)
