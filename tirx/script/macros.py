"""``@T.macro`` and ``@T.inline``: Python functions whose body is kernel code, expanded at
each call site inside a ``@T.function``.

A macro's body is parsed like a kernel's, where it is called, with its parameters bound to the
call's arguments (tensors, kernel values and Python values alike; defaults and keywords as
Python binds them). Expansion is *hygienic*: the body sees its parameters, its own names and
the names of the place it was defined (module globals, closure), never the caller's local
names, and the variables it makes are its own (C names are made unique). ``T.macro`` reads its
closure as it was when decorated, ``T.inline`` as it is at each call. A last top-level
``return value`` gives the call its value; a ``return`` anywhere else is refused.

Errors in a macro's body point at the macro's own line, and their message names the call.
"""

from __future__ import annotations

import ast
import inspect

from ..errors import TirxError, TirxSyntaxError

__all__ = ["Macro", "macro", "inline", "expand"]


class Macro:
    """A function decorated with ``@T.macro`` (``late_binding`` False) or ``@T.inline``."""

    def __init__(self, function, late_binding: bool, hygienic: bool = True):
        if not inspect.isfunction(function):
            raise TirxSyntaxError(f"@T.macro decorates a Python function, got {function!r}")
        if not hygienic:
            raise TirxSyntaxError(
                "tirx macros are always hygienic",
                hint="pass the caller's values to the macro as arguments",
            )
        self.function = function
        self.late_binding = late_binding
        self.closure = None if late_binding else _closure(function)
        self.__name__ = function.__name__
        self.__doc__ = function.__doc__

    def __call__(self, *args, **kwargs):
        raise TirxSyntaxError(
            f"the macro {self.__name__!r} can only be called inside a @T.function kernel body"
        )

    def __repr__(self) -> str:
        return f"<tirx {'inline' if self.late_binding else 'macro'} {self.__name__}>"

    def scope(self) -> dict:
        """The names the body may resolve outside itself."""
        scope = dict(self.function.__globals__)
        scope.update(self.closure if self.closure is not None else _closure(self.function))
        return scope


def _closure(function) -> dict:
    out = {}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # a cell not yet assigned
            pass
    return out


def _decorator(late_binding: bool):
    def decorate(function=None, **options):
        unknown = set(options) - {"hygienic"}
        if unknown:
            raise TirxSyntaxError(f"unknown macro option {sorted(unknown)[0]!r}")
        hygienic = options.get("hygienic", True)
        if function is None:
            return lambda f: Macro(f, late_binding, hygienic)
        return Macro(function, late_binding, hygienic)

    return decorate


macro = _decorator(late_binding=False)
inline = _decorator(late_binding=True)


def _definition(m: Macro, lines: list[str] | None = None) -> ast.FunctionDef:
    """The ``def`` of ``m``, from ``lines`` (its file's) or else as linecache has its file now."""
    from . import parser as parser_mod  # (the parser imports this module)

    if lines is None:
        lines = parser_mod._source_lines(m.function)
    found = parser_mod._lookup_def(m.function, lines) if lines is not None else None
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
    from .statements import _is_docstring, _mutable_names

    # A kernel the front-end cache found is parsed (later) from what its fingerprints were
    # computed from at decoration: the macro's scope and file text as they were then.
    snapshot = p.macro_snapshots.get(id(m))
    scope, lines = (snapshot[1], snapshot[2]) if snapshot and snapshot[0] is m else (None, None)
    fdef = _definition(m, lines)
    body = list(fdef.body)
    if body and _is_docstring(body[0]):
        body = body[1:]
    result = body.pop() if body and isinstance(body[-1], ast.Return) else None
    saved = (p.filename, p.scope, p.free_names, b.mutable_names, b.base, b.loop_depth)
    p.filename = m.function.__code__.co_filename
    p.scope = m.scope() if scope is None else scope
    p.free_names = {}  # the macro's own names, resolved in its scope: logged per macro below
    b.mutable_names = _mutable_names(fdef)
    b.frames.append(dict(bound.arguments))
    b.base = len(b.frames) - 1
    b.loop_depth = 0
    try:
        p.block(body)
        value = None
        if result is not None and result.value is not None:
            value = ev.value(result.value)
    except TirxError as e:
        if e.hint is None and _callers_name(e, b):
            e = e._with(
                hint="a macro sees its parameters and the names where it is defined, "
                "not the caller's variables: pass the value as an argument"
            )
        raise _called_from(e, m, call_span) from None
    finally:
        # every expansion's names, for the front-end cache (see Parser.macro_names)
        p.macro_names.setdefault(id(m), (m, {}))[1].update(p.free_names)
        b.frames.pop()
        p.filename, p.scope, p.free_names, b.mutable_names, b.base, b.loop_depth = saved
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
