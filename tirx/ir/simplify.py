"""Small algebra on integer expressions: linear normal forms, static values, non-negativity.

Enough to decide that ``(k + 1) * 16 - k * 16`` is the constant 16 (a region's extent) and
that ``lane // 4`` needs no floor correction in C (its operands are non-negative). Both are
folds over :mod:`tirx.ir.visitor` (no recursion, any depth); an expression class neither
knows raises :class:`~tirx.ir.visitor.UnknownNodeError`.
"""

from __future__ import annotations

import enum

from ..dtypes import DType, DTypeKind, is_float
from .nodes import BinOp, Const, Expr, Load, Op, Var
from .visitor import DESCEND, Visitor, is_family_node

__all__ = ["static_value", "linear_form", "is_nonnegative", "structural_key"]

# Opaque values (loaded, compared or computed): atoms of a linear form (keyed by
# structural_key), never provably >= 0 unless unsigned; addresses likewise.
_OPAQUE = frozenset(
    {
        "Load",
        "ElemLoad",
        "Cmp",
        "Logic",
        "Not",
        "Select",
        "Reinterpret",
    }
)  # and a family's own expressions (the math intrinsics, the warp collectives): is_family_node
_ADDRESSES = frozenset({"SharedAddress", "GlobalAddress"})
_ATOMS = _OPAQUE | _ADDRESSES | {"Var", "Special", "Cast"}  # linear_form's atoms
_LINEAR_OPS = (Op.ADD, Op.SUB, Op.MUL)


class _LinearForm(Visitor):
    """Results: ``(terms, const)``, or None for a float expression."""

    pass_name = "the linear-form analysis"

    def __init__(self, keys: dict | None = None):
        self.keys: dict = {} if keys is None else keys  # structural_key's memo

    def leaf(self, value):
        return {}, int(value)

    def enter_Const(self, e):
        return None if is_float(e.dtype) else ({}, int(e.value))

    def enter_BinOp(self, e):
        if is_float(e.dtype):
            return None
        return DESCEND if e.op in _LINEAR_OPS else ({structural_key(e, self.keys): (e, 1)}, 0)

    def leave_BinOp(self, e, la, lb):
        if la is None or lb is None:
            return None
        (ta, ca), (tb, cb) = la, lb
        if e.op is Op.MUL:
            if not ta:
                return _scale(tb, cb, ca)
            if not tb:
                return _scale(ta, ca, cb)
            return {structural_key(e, self.keys): (e, 1)}, 0
        sign = 1 if e.op is Op.ADD else -1
        terms = dict(ta)
        for k, (atom, coef) in tb.items():
            old = terms.get(k, (atom, 0))[1]
            terms[k] = (atom, old + sign * coef)
        return {k: v for k, v in terms.items() if v[1]}, ca + sign * cb

    def _atom(self, e):
        return None if is_float(e.dtype) else ({structural_key(e, self.keys): (e, 1)}, 0)

    def _default(self, cls):
        atom = cls.__name__ in _ATOMS or is_family_node(cls)
        return (_LinearForm._atom, None) if atom else None


def linear_form(e, keys: dict | None = None) -> tuple[dict[int, tuple[Expr, int]], int] | None:
    """``e`` as ``sum(coef * atom) + const`` over non-linear atoms (keyed by
    :func:`structural_key`, so ``(i % 8) * 8 + 8 - (i % 8) * 8`` is the constant 8).

    Returns None for float expressions. ``keys``: a memo of structural keys the caller keeps
    for several calls (see :func:`structural_key`).
    """
    if isinstance(e, (bool, int)):
        return {}, int(e)
    return _LinearForm(keys).visit(e)


def structural_key(e, memo: dict | None = None) -> tuple:
    """A hashable key equal for expressions that compute the same value by the same tree
    (``lane % 8`` built twice has one key). Variables, buffers and loads are keyed by the
    object: two loads of one address are the same value within one expression, which has no
    side effects. Built by recursion for a tree up to 48 levels deep, and over an explicit
    stack (children's keys first) for a deeper one, so a sum of thousands of terms needs no
    deep recursion.

    ``memo`` (a dict the caller owns, for one pass) remembers the key of every compound node
    met, by ``id``: a node is immutable, and the memo holds the node itself beside its key, so
    the id is not reused while the entry lives. A pass that keys many trees sharing subtrees
    (the index simplifier) then walks each subtree once."""
    try:
        return _child_key(e, memo, _RECURSE + 1)
    except (TooDeep, RecursionError):  # (the latter where the caller is deep already)
        pass  # keyed over the stack below (what the recursion memoized is kept)
    out: list = []  # keys of finished nodes, in the order their parents read them
    todo: list = [e]  # nodes to key; (node, its field values, how many are Expr) once its
    # children's keys are on out
    pop, push, extend, kinds = todo.pop, todo.append, todo.extend, _KINDS
    while todo:
        x = pop()
        if type(x) is tuple:
            key = _assembled(x, out)
            out.append(key)
            if memo is not None:
                memo[id(x[0])] = (x[0], key)
            continue
        kind = kinds.get(type(x)) or _kind(type(x))
        known = _known_key(x, kind, memo)
        if known is not None:
            out.append(known)
        else:
            values = [x.index] if kind is _LOAD else [getattr(x, n) for n in kind]
            below = [v for v in values if isinstance(v, Expr)]
            push((x, values, len(below)))
            below.reverse()  # the first field's key reaches out first
            extend(below)
    return out[0]


_CONST, _OBJECT, _LOAD = "const", "object", "load"
_RECURSE = 48  # the levels :func:`_key` recurses before the explicit stack takes over


class TooDeep(Exception):
    """Raised by an analysis that recurses (structural keys here, index ranges in
    :mod:`~tirx.ir.simplify_index`) past its depth: the caller takes its work-stack way."""


def _key(x, kind, memo: dict | None, depth: int) -> tuple:
    """:func:`structural_key` of compound node ``x`` (of ``kind``) by recursion, the same key
    as the explicit stack's, in a fraction of its time for the small trees of an index; raises
    :class:`TooDeep` past ``depth`` levels."""
    if depth == 0:
        raise TooDeep
    if type(x) is BinOp:  # most nodes of an index: the parts the loop below would make
        a, b = _child_key(x.a, memo, depth), _child_key(x.b, memo, depth)
        key = ("BinOp", x.op, a, b, x.dtype.name)
    elif kind is _LOAD:
        i = x.index
        if isinstance(i, Expr):
            index = _child_key(i, memo, depth)
        else:
            index = structural_key(as_expr_key(i))
        key = ("load", id(x.buffer), x.dtype.name, index)
    else:
        parts: list = [type(x).__name__]
        for name in kind:
            v = getattr(x, name)
            parts.append(_child_key(v, memo, depth) if isinstance(v, Expr) else _field_key(v))
        key = tuple(parts)
    if memo is not None:
        memo[id(x)] = (x, key)
    return key


def _child_key(v, memo: dict | None, depth: int) -> tuple:
    """The key of ``v``: a constant's or an object's at once, a compound node's from ``memo``
    or by :func:`_key` with ``depth - 1`` levels left."""
    kind = _KINDS.get(type(v)) or _kind(type(v))
    known = _known_key(v, kind, memo)
    return known if known is not None else _key(v, kind, memo, depth - 1)


def _known_key(x, kind, memo: dict | None) -> tuple | None:
    """The key of ``x`` (of ``kind``) found without looking below it: a constant's, an
    object's, or a compound node's in ``memo``; None otherwise."""
    if kind is _CONST:
        return ("const", x.value, x.dtype.name)
    if kind is _OBJECT:
        return ("obj", id(x))
    if memo is not None:
        known = memo.get(id(x))
        if known is not None and known[0] is x:
            return known[1]
    return None


def _field_key(v):
    """The key part of a field value that is not an expression."""
    t = type(v)
    if t in _PLAIN:
        return v
    if t is DType:
        return v.name
    if isinstance(v, (int, float, bool, str)):
        return v
    if hasattr(v, "name") and hasattr(v, "bits"):  # a DType
        return v.name
    return ("obj", id(v)) if not isinstance(v, enum.Enum) else v


_KINDS: dict[type, object] = {}  # class -> _CONST, _OBJECT, _LOAD or its field names


def _kind(cls: type):
    if issubclass(cls, Const):
        kind = _CONST
    elif issubclass(cls, Var) or not hasattr(cls, "__dataclass_fields__"):
        kind = _OBJECT  # a variable, or no dataclass (an int, a buffer's name): the object
    elif issubclass(cls, Load):
        kind = _LOAD
    else:
        kind = tuple(cls.__dataclass_fields__)
    _KINDS[cls] = kind
    return kind


_PLAIN = frozenset({int, float, bool, str, type(None)})  # field values keyed as they are


def _assembled(item: tuple, out: list) -> tuple:
    """The key of ``item``'s node, from its field values and (the last ``count`` entries of
    ``out``, which it removes) the keys of those that are expressions."""
    x, values, count = item
    kind = _KINDS[type(x)]
    if kind is _LOAD:
        i = values[0]
        index = out.pop() if count else structural_key(as_expr_key(i))
        return ("load", id(x.buffer), x.dtype.name, index)
    at = len(out) - count
    parts: list = [type(x).__name__]
    for v in values:
        if isinstance(v, Expr):
            parts.append(out[at])
            at += 1
        else:
            parts.append(_field_key(v))
    if count:
        del out[-count:]
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


_NONNEG_OPS = (Op.ADD, Op.MUL, Op.FLOORDIV, Op.FLOORMOD, Op.MIN, Op.MAX, Op.SHR, Op.BITAND)


class _NonNegative(Visitor):
    """Results: whether the expression is provably >= 0 (see :func:`is_nonnegative`)."""

    pass_name = "the non-negativity analysis"

    def __init__(self, nonneg_vars: frozenset):
        self.nonneg_vars = nonneg_vars

    def leaf(self, value):
        return value >= 0

    def _unsigned(self, e) -> bool:
        return e.dtype.kind is DTypeKind.UINT

    def enter_Const(self, e):
        return e.value >= 0

    def enter_Special(self, e):
        return True

    def enter_Var(self, e):
        return self._unsigned(e) or e in self.nonneg_vars

    def enter_Cast(self, e):
        if self._unsigned(e):
            return True
        return DESCEND if e.dtype.bits >= e.value.dtype.bits else False

    def leave_Cast(self, e, value):
        return value

    def enter_BinOp(self, e):
        if self._unsigned(e):
            return True
        return DESCEND if e.op in _NONNEG_OPS else False

    def leave_BinOp(self, e, a, b):
        if e.op is Op.FLOORMOD:
            return b
        if e.op is Op.BITAND:
            return a or b
        return a and b

    def _default(self, cls):
        opaque = cls.__name__ in _OPAQUE or cls.__name__ in _ADDRESSES or is_family_node(cls)
        return (_NonNegative._unsigned, None) if opaque else None


def is_nonnegative(e, nonneg_vars: frozenset = frozenset()) -> bool:
    """True when ``e`` is provably >= 0 (thread indices, unsigned values, known loop vars)."""
    if isinstance(e, int):
        return e >= 0
    if type(e) is Const:
        return e.value >= 0
    return _NonNegative(nonneg_vars).visit(e)
