"""Small algebra on integer expressions: linear normal forms, static values, non-negativity.

Enough to decide that ``(k + 1) * 16 - k * 16`` is the constant 16 (a region's extent) and
that ``lane // 4`` needs no floor correction in C (its operands are non-negative).
"""

from __future__ import annotations

import enum

from ..dtypes import is_float
from .nodes import BinOp, Cast, Const, Expr, Load, Op, Special, Var

__all__ = ["static_value", "linear_form", "is_nonnegative", "structural_key"]


def linear_form(e) -> tuple[dict[int, tuple[Expr, int]], int] | None:
    """``e`` as ``sum(coef * atom) + const`` over non-linear atoms (keyed by
    :func:`structural_key`, so ``(i % 8) * 8 + 8 - (i % 8) * 8`` is the constant 8).

    Returns None for float expressions.
    """
    if isinstance(e, bool):
        return {}, int(e)
    if isinstance(e, int):
        return {}, e
    if is_float(e.dtype):
        return None
    if isinstance(e, Const):
        return {}, int(e.value)
    if isinstance(e, BinOp) and e.op in (Op.ADD, Op.SUB, Op.MUL):
        la, lb = linear_form(e.a), linear_form(e.b)
        if la is None or lb is None:
            return None
        (ta, ca), (tb, cb) = la, lb
        if e.op is Op.MUL:
            if not ta:
                return _scale(tb, cb, ca)
            if not tb:
                return _scale(ta, ca, cb)
            return {id(e): (e, 1)}, 0
        sign = 1 if e.op is Op.ADD else -1
        terms = dict(ta)
        for k, (atom, coef) in tb.items():
            old = terms.get(k, (atom, 0))[1]
            terms[k] = (atom, old + sign * coef)
        return {k: v for k, v in terms.items() if v[1]}, ca + sign * cb
    return {structural_key(e): (e, 1)}, 0


def structural_key(e) -> tuple:
    """A hashable key equal for expressions that compute the same value by the same tree
    (``lane % 8`` built twice has one key). Variables, buffers and loads are keyed by the
    object: two loads of one address are the same value within one expression, which has no
    side effects."""
    if isinstance(e, Const):
        return ("const", e.value, e.dtype.name)
    if isinstance(e, (Var, Load)) or not hasattr(e, "__dataclass_fields__"):
        if isinstance(e, Load):
            return ("load", id(e.buffer), e.dtype.name, structural_key(as_expr_key(e.index)))
        return ("obj", id(e))
    parts = [type(e).__name__]
    for name in e.__dataclass_fields__:
        v = getattr(e, name)
        if isinstance(v, Expr):
            parts.append(structural_key(v))
        elif isinstance(v, (int, float, bool, str)) or v is None:
            parts.append(v)
        elif hasattr(v, "name") and hasattr(v, "bits"):  # a DType
            parts.append(v.name)
        else:
            parts.append(("obj", id(v)) if not isinstance(v, enum.Enum) else v)
    return tuple(parts)


def as_expr_key(v):
    return v if isinstance(v, Expr) else Const(v)


def _scale(terms, c, factor):
    return {k: (a, coef * factor) for k, (a, coef) in terms.items() if coef * factor}, c * factor


def static_value(e) -> int | None:
    """The integer value of ``e`` if it is a compile-time constant, else None."""
    if isinstance(e, bool):
        return int(e)
    if isinstance(e, int):
        return e
    if isinstance(e, Const) and not is_float(e.dtype):
        return int(e.value)
    if not isinstance(e, Expr):
        return None
    form = linear_form(e)
    if form is None or form[0]:
        return None
    return form[1]


def is_nonnegative(e, nonneg_vars: frozenset = frozenset()) -> bool:
    """True when ``e`` is provably >= 0 (thread indices, unsigned values, known loop vars)."""
    if isinstance(e, int):
        return e >= 0
    if isinstance(e, Const):
        return e.value >= 0
    if e.dtype.kind == "uint":
        return True
    if isinstance(e, Special):
        return True
    if isinstance(e, Var):
        return e in nonneg_vars
    if isinstance(e, Cast):
        return e.dtype.bits >= e.value.dtype.bits and is_nonnegative(e.value, nonneg_vars)
    if isinstance(e, Load):
        return False
    if isinstance(e, BinOp) and e.op in (
        Op.ADD,
        Op.MUL,
        Op.FLOORDIV,
        Op.FLOORMOD,
        Op.MIN,
        Op.MAX,
        Op.SHR,
        Op.BITAND,
    ):
        if e.op is Op.FLOORMOD:
            return is_nonnegative(e.b, nonneg_vars)
        if e.op is Op.BITAND:
            return is_nonnegative(e.a, nonneg_vars) or is_nonnegative(e.b, nonneg_vars)
        return is_nonnegative(e.a, nonneg_vars) and is_nonnegative(e.b, nonneg_vars)
    return False
