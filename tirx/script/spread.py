"""``f(*xs)`` and ``f(**kw)`` in a kernel: a compile-time sequence or dict spread into a call.

The parser evaluates Python values of the enclosing scope at parse time (a shape kept in a
tuple, a layout, sizes in a dict), so a call may spread one: ``*xs`` where ``xs`` is a Python
tuple or list stands for its items as positional arguments, ``**kw`` where ``kw`` is a dict
with string keys for its items as keyword arguments, exactly as if each were written out.
Anything else (a tensor, a kernel value) is refused at the ``*``, naming what it is.

:func:`spread` returns the call with those arguments written out: a new ``ast.Call`` whose
spread arguments are :class:`Spread` nodes holding the values (the evaluator's ``ex_Spread``
returns them), located at the ``*xs`` they came from, so every call handler reads them as
ordinary arguments. The call's own node is kept as ``spread_from``: the checks that a call is
a whole statement compare nodes by identity (:func:`origin`).
"""

from __future__ import annotations

import ast

from ..errors import TirxSyntaxError
from .refusals import CONSTRUCTS, DOUBLE_STAR
from .values import kind_of

__all__ = ["Spread", "spread", "origin"]


class Spread(ast.expr):
    """One argument spread from ``*xs`` or ``**kw``: its compile-time value, already evaluated."""

    _fields = ()

    def __init__(self, value, at: ast.AST):
        super().__init__()
        self.value = value
        ast.copy_location(self, at)


def _written(value, at: ast.AST) -> ast.expr:
    """``value`` as the argument written out: a tuple or list as a tuple or list display of
    its items (``T.grid(*((2, 2), 3))`` is ``T.grid((2, 2), 3)``, where a pair is read from
    the display), anything else a :class:`Spread` of the value."""
    if isinstance(value, (tuple, list)):
        kind = ast.Tuple if isinstance(value, tuple) else ast.List
        node = kind(elts=[_written(v, at) for v in value], ctx=ast.Load())
        return ast.copy_location(node, at)
    return Spread(value, at)


def origin(node):
    """The call as written, for a call :func:`spread` rewrote (``node`` itself otherwise)."""
    return getattr(node, "spread_from", node)


def spread(ev, node: ast.Call) -> ast.Call:
    """``node`` with its ``*xs`` and ``**kw`` arguments written out (``node`` itself when it
    has none); a TirxSyntaxError at one that is not a compile-time tuple, list or dict."""
    starred = any(isinstance(a, ast.Starred) for a in node.args)
    if not starred and all(k.arg is not None for k in node.keywords):
        return node
    args = []
    for a in node.args:
        if not isinstance(a, ast.Starred):
            args.append(a)
            continue
        items = ev.value(a.value)
        if not isinstance(items, (tuple, list)):
            what, instead = CONSTRUCTS["Starred"]
            raise TirxSyntaxError(
                f"{what} is not part of the kernel language unless x is a compile-time tuple "
                f"or list: {ast.unparse(a.value)} is {kind_of(items)}",
                ev.p.span(a),
                hint=instead,
            )
        args += [_written(item, a) for item in items]
    keywords, named = [], set()
    for k in node.keywords:
        if k.arg is not None:
            items = [(k.arg, k.value)]
        else:
            # a dict literal is not kernel language: the same refusal, at the **
            literal = isinstance(k.value, ast.Dict)
            values = None if literal else ev.value(k.value)
            if not isinstance(values, dict) or not all(isinstance(n, str) for n in values):
                what = "a dict literal in the kernel" if literal else kind_of(values)
                raise TirxSyntaxError(
                    f"{DOUBLE_STAR[0]} is not part of the kernel language unless x is a "
                    f"compile-time dict with string keys: {ast.unparse(k.value)} is {what}",
                    ev.p.span(k),
                    hint=DOUBLE_STAR[1] + ", or f(**kw) of a dict kw defined outside the kernel",
                )
            items = [(n, Spread(v, k)) for n, v in values.items()]
        for name, value in items:
            if name in named:
                raise TirxSyntaxError(f"argument {name!r} given twice", ev.p.span(k))
            named.add(name)
            keywords.append(ast.copy_location(ast.keyword(arg=name, value=value), k))
    out = ast.copy_location(ast.Call(func=node.func, args=args, keywords=keywords), node)
    out.spread_from = origin(node)
    return out
