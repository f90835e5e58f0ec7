"""The variable-write analyses of codegen: which statement assigns which variable, and which
integer variables are provably never negative (so ``//`` and ``%`` on them may be C's ``/``
and ``%``). They must see every write of a variable, so a statement class they do not know
raises."""

from __future__ import annotations

from ... import catalog
from ...dtypes import DTypeKind
from ...ir import nodes as ir
from ...ir.simplify import is_nonnegative
from ...ir.visitor import UnknownNodeError, children

__all__ = ["statements", "assigns", "nonneg_vars"]

# Statement classes that never assign a variable (the others: Assign, For), for the analyses
# that must see every write of a variable; a statement class in neither set raises.
_NO_VAR_WRITES = frozenset(
    {"Seq", "If", "While", "Store", "Barrier", "Printf", "PtxCall", "Break", "Continue"}
)


def statements(root):
    """Every statement under ``root``, with the variable each one assigns (or None); a
    statement class not known to assign or not to assign raises (these analyses must see
    every write of a variable)."""
    todo = [root]
    while todo:
        st = todo.pop()
        name = type(st).__name__
        if isinstance(st, (ir.Assign, ir.For)):
            yield st, st.var
        elif catalog.row_of_node(name) is not None:  # a family's statement (an atomic, a
            yield st, getattr(st, "result", None)  # vote): it writes only its result, if any
        elif name in _NO_VAR_WRITES:
            yield st, None
        else:
            raise UnknownNodeError(type(st), "codegen's variable-write analysis")
        todo.extend(reversed([c for c in children(st) if isinstance(c, ir.Stmt)]))


def assigns(stmt, var) -> bool:
    """Whether ``stmt`` assigns ``var`` anywhere (including as an inner loop's variable)."""
    return any(v is var for _, v in statements(stmt))


def nonneg_vars(fn: ir.Function) -> frozenset:
    """Variables provably never negative (greatest fixed point over their assignments)."""
    assigns: dict = {}
    loops: dict = {}
    for st, var in statements(fn.body):
        if isinstance(st, ir.Assign):
            assigns.setdefault(var, []).append(st.value)
        elif isinstance(st, ir.For):
            loops.setdefault(var, []).append(st)
    cand = set(assigns) | set(loops)
    cand = {v for v in cand if v.dtype.kind in (DTypeKind.INT, DTypeKind.UINT)}
    while True:
        frozen = frozenset(cand)
        keep = set()
        for v in cand:
            ok = all(is_nonnegative(x, frozen) for x in assigns.get(v, []))
            ok = ok and all(
                lp.step > 0 and is_nonnegative(lp.start, frozen) for lp in loops.get(v, [])
            )
            if ok:
                keep.add(v)
        if keep == cand:
            return frozenset(keep)
        cand = keep
