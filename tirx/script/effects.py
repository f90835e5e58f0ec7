"""Where a call that acts may stand: the rule the families' statement calls share (the atomics,
votes and reductions of ``cta_ops``, the sleep, clock and assert of ``thread_ops``).

Such a call emits a statement when it is evaluated, and one that has a value writes it into a
fresh variable. So that it acts exactly once, where it is written, it must be the whole
statement (bare, or wrapped in ``T.evaluate(...)`` as the real TIRx writes a call whose value
it drops) or the whole right side of an assignment (``old = T.cuda.atomic_add(...)``), not
part of a larger expression (which an ``a if c else b`` or ``and`` would evaluate on both
sides).
"""

from __future__ import annotations

import ast

from ..errors import TirxError, TirxSyntaxError
from .forms import dotted_name
from .namespace import Intrinsic
from .spread import origin

__all__ = ["statement_position", "unwrap_evaluate"]


def statement_position(ev, key: str, node: ast.Call) -> bool:
    """Refuse the call ``T.<key>(...)`` (``node``) anywhere but as a statement (bare or
    wrapped in ``T.evaluate``) or a whole right side; True when its value is dropped (an
    expression statement)."""
    stmt = getattr(ev.p, "statement", None)
    node = origin(node)  # the call as written, where f(*xs) was spread
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is node:
        return False
    if isinstance(stmt, ast.Expr) and unwrap_evaluate(ev, stmt.value) is node:
        return True
    raise TirxSyntaxError(
        f"T.{key}(...) acts when it runs, so it must be a statement of its own (bare or in "
        "T.evaluate(...)) or the whole right side of an assignment",
        ev.p.span(node),
        hint=f"assign it first, e.g. r = T.{key}(...), then use r in the expression",
    )


def unwrap_evaluate(ev, expr):
    """The expression that a statement ``T.evaluate(x)`` (or ``T.evaluate(T.evaluate(x))``)
    evaluates: ``x``; any other expression itself. The real TIRx writes an atomic whose old
    value it discards as ``T.evaluate(T.cuda.atomic_add(...))``, which acts once, where it
    stands, exactly as the bare call does."""
    while isinstance(expr, ast.Call) and _is_evaluate(ev, expr.func):
        if len(expr.args) + len(expr.keywords) != 1 or any(k.arg != "value" for k in expr.keywords):
            break  # a wrong call: T.evaluate's own argument check reports it
        expr = expr.args[0] if expr.args else expr.keywords[0].value
    return expr


def _is_evaluate(ev, func) -> bool:
    if not dotted_name(func):
        return False
    try:
        f = ev.const(func)
    except TirxError:  # not a compile-time name: not T.evaluate
        return False
    return isinstance(f, Intrinsic) and f.key == "evaluate"
