"""Expanding a ``@T.macro`` / ``@T.inline`` call: its body parsed where it is called (see
:mod:`tirx.script.macros`), hygienically, with its parameters bound to the call's arguments.
A macro may call itself (directly or through others) while a compile-time condition bounds the
recursion; one whose expansions nest deeper than :data:`MAX_DEPTH` is refused, naming the cycle,
at the call that would go deeper."""

from __future__ import annotations

import ast
import inspect

from ..errors import TirxError, TirxSyntaxError
from .macros import Macro
from .source import is_docstring, lookup_def, mutable_names, source_lines

__all__ = ["expand", "MAX_DEPTH"]

#: macro expansions nested deeper than this are taken for a recursion that never ends
MAX_DEPTH = 32


def _definition(m: Macro, lines: list[str] | None = None) -> ast.FunctionDef:
    """The ``def`` of ``m``, from ``lines`` (its file's) or else as linecache has its file now."""
    if lines is None:
        lines = source_lines(m.function)
    found = lookup_def(m.function, lines) if lines is not None else None
    if found is None:
        raise TirxSyntaxError(
            f"cannot read the source of the macro {m.__name__!r}",
            hint="define macros in a file or a notebook cell",
        )
    return found[0]


def expand(ev, m: Macro, node: ast.Call):
    """Parse the body of ``m`` at the call ``node`` (evaluated by ``ev``); its return value."""
    p, b = ev.p, ev.b
    call_span = p.span(node)
    args = [ev.value(a) for a in node.args]
    kwargs = {k.arg: ev.value(k.value) for k in node.keywords}
    if any(k is None for k in kwargs):
        raise TirxSyntaxError("**arguments are not supported in a macro call", call_span)
    try:
        bound = inspect.signature(m.function).bind(*args, **kwargs)
    except TypeError as e:
        raise TirxSyntaxError(
            f"{m.__name__}(): {e}",
            call_span,
            hint=f"call it as {m.__name__}{inspect.signature(m.function)}",
        ) from None
    bound.apply_defaults()
    if len(p.expanding) >= MAX_DEPTH:  # a macro that keeps calling itself
        raise _endless(p.expanding, m, call_span)

    # A kernel the front-end cache found is parsed (later) from what its fingerprints were
    # computed from at decoration: the macro's scope and file text as they were then.
    snapshot = p.macro_snapshots.get(id(m))
    scope, lines = (snapshot[1], snapshot[2]) if snapshot and snapshot[0] is m else (None, None)
    fdef = _definition(m, lines)
    body = list(fdef.body)
    if body and is_docstring(body[0]):
        body = body[1:]
    result = body.pop() if body and isinstance(body[-1], ast.Return) else None
    saved = (p.filename, p.scope, p.free_names, b.mutable_names, b.base, b.loop_depth, p.called)
    p.filename = m.function.__code__.co_filename
    p.scope = m.scope() if scope is None else scope
    p.free_names = {}  # the macro's own names, resolved in its scope: logged per macro below
    b.mutable_names = mutable_names(fdef)
    b.frames.append(dict(bound.arguments))
    b.base = len(b.frames) - 1
    b.loop_depth = 0
    p.expanding.append(m)
    p.called = (m.__name__, call_span)  # the body's spans name the call (run-time reports)
    try:
        p.block(body)
        value = None
        if result is not None and result.value is not None:
            value = ev.value(result.value)
    except TirxError as e:
        if _callers_name(e, b):  # this hint, not the closest names'
            e = e._with(
                hint="a macro sees its parameters and the names where it is defined, "
                "not the caller's variables: pass the value as an argument"
            )
        raise _called_from(e, m, call_span) from None
    finally:
        p.expanding.pop()
        # every expansion's names, for the front-end cache (see Parser.macro_names)
        p.macro_names.setdefault(id(m), (m, {}))[1].update(p.free_names)
        b.frames.pop()
        p.filename, p.scope, p.free_names, b.mutable_names, b.base, b.loop_depth, p.called = saved
    return value


def _callers_name(e: TirxError, b) -> bool:
    """Whether ``e`` is "name 'x' is not defined" for a name the caller has."""
    if not e.message.startswith("name '") or not e.message.endswith("is not defined"):
        return False
    name = e.message.split("'")[1]
    return any(name in frame for frame in b.frames[: b.base])


def _called_from(e: TirxError, m: Macro, call_span) -> TirxError:
    """``e`` (raised in the body of ``m``) also showing the call, innermost call first."""
    if e.span is None:
        return e.with_span(call_span)
    return e._with(context=(*e.context, (f"in the macro {m.__name__!r}, called here:", call_span)))


def _endless(expanding: list, m: Macro, call_span) -> TirxSyntaxError:
    """The error for a recursion of macros that nests past :data:`MAX_DEPTH`: the cycle is the
    expansions since ``m`` was last entered."""
    start = max(i for i, x in enumerate(expanding) if x is m) if m in expanding else 0
    chain = " -> ".join(x.__name__ for x in (*expanding[start:], m))
    return TirxSyntaxError(
        f"the macro {m.__name__!r} calls itself without end ({chain}, nested {MAX_DEPTH} deep): "
        "macros are expanded in place at compile time",
        call_span,
        hint="bound the recursion by a compile-time condition (an int argument that shrinks), "
        "or write the repetition as a loop (range, T.unroll or T.serial) inside one macro",
    )
