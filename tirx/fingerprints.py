"""Fingerprints: a value the front-end cache (tirx/frontend_cache.py) depends on, described
completely as a Python literal, so that equal fingerprints mean equal values for every parse.

* None, bool, int, float and str by type and value; tuples, lists and dicts by their items.
* tirx's enums by class and member; tirx's classes, functions and modules by where they live
  (checked: the name resolves to that very object).
* the ``T`` namespace, its parts and members (intrinsics, scalar types) and the ``S``/``R``
  spec builders by their place (tirx's own objects, made at import, holding nothing a user
  sets).
* tirx's frozen dataclasses with value equality (layouts, specs, axes, dtypes,
  ``T.Tensor(...)`` annotations, launch configs, PTX instruction names) by class and the
  fingerprints of all their fields.
* a ``@T.macro`` / ``@T.inline`` (:class:`~tirx.script.macros.Macro`) by what its expansion
  depends on, given the names its body resolved in a parse (:class:`MacroNames`, recorded per
  macro code): the digest of its def's text (:func:`macro_code`: its file's text as linecache
  has it, the file's name, the first line, its qualified name, macro or inline), its
  parameter defaults, and the fingerprints of those names' values in its own scope
  (``Macro.scope()``: module globals and closure, for ``T.macro`` the closure of decoration,
  for ``T.inline`` the closure now), so nested macros too. A macro met again in the same
  fingerprint is named by its first place: a kernel may compare macros with ``==``, which is
  identity, so which of them are one object is part of the value. A macro that no parse
  expanded (no names recorded for its code) is just "a macro": nothing of it reached the IR.
  Not inside a dataclass's fields.

Anything else has none, and a kernel that reads it is never cached: a user's function or
object (its code is outside the key), numpy scalars, other modules, sets (their order is
hash-seeded).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import sys
import types

from .files import sha256
from .layout.spec import R, S
from .script import namespace
from .script.evaluator import BUILTINS
from .script.macros import Macro
from .script.source import source_lines

__all__ = ["MacroNames", "fingerprint", "macro_code", "resolved", "snapshot"]

_BUDGET = 50_000  # items one fingerprint may visit; a bigger value is not worth a cache entry


class _Unfit(Exception):
    """A value without a fingerprint (raised through the recursion)."""


_ATOMS = frozenset({type(None), bool, int, float, str})
_NAMESPACE = namespace.__name__


class MacroNames:
    """The macro part of one fingerprint: ``names``, code digest -> the names the bodies of
    macros with that code resolved (from a parse or an entry); ``reached`` collects, per
    macro expanded there (by id), ``(macro, scope, lines, names)`` as the fingerprint read
    them."""

    __slots__ = ("names", "reached")

    def __init__(self, names: dict[str, tuple[str, ...]]):
        self.names = names
        self.reached: dict[int, tuple] = {}


def fingerprint(value, macros: MacroNames | None = None) -> tuple | None:
    """``value`` described completely as a Python literal (the rules are in the module
    docstring), or None when it cannot be. Macros have one only with ``macros``, the names
    their bodies resolved."""
    budget = _BUDGET
    memo: dict[int, tuple] = {}  # id -> fingerprint of the dataclasses seen (axes recur)
    order: dict[int, int] = {}  # id -> index of each macro reached, in the order reached

    def fp(v, mutable: bool, data: bool = False) -> tuple:
        # ``mutable``: lists and dicts are accepted (not inside dataclass fields, where the
        # copy made for a later parse, snapshot, would not reach them, nor in a macro's
        # defaults). ``data``: inside a dataclass, whose memo would hide a macro's aliasing.
        nonlocal budget
        budget -= 1
        if budget < 0:
            raise _Unfit
        t = type(v)
        if t in _ATOMS:
            return (t.__name__, v)
        if t is tuple or (t is list and mutable):
            return (t.__name__, *[fp(x, mutable, data) for x in v])
        if t is dict and mutable:
            return ("dict", *[(fp(k, True), fp(x, True)) for k, x in v.items()])
        if t is Macro and macros is not None and not data:
            return fp_macro(v)
        fields = _frozen_fields(t)
        if fields is not None:
            known = memo.get(id(v))
            if known is None:
                known = memo[id(v)] = (
                    "data", t.__module__, t.__qualname__,
                    *[fp(getattr(v, f), False, True) for f in fields],
                )  # fmt: skip
            return known
        if t.__module__ == _NAMESPACE or v is S or v is R:
            place = _place(v)
            if place is not None:
                return ("T", place)
        if isinstance(v, enum.Enum) and _is_tirx(t.__module__):
            return ("enum", t.__module__, t.__qualname__, v.name)
        if isinstance(v, type) or t is types.FunctionType:
            if _is_tirx(v.__module__) and _resolve(v.__module__, v.__qualname__) is v:
                return ("ref", v.__module__, v.__qualname__)
        elif t is types.ModuleType and _is_tirx(v.__name__) and sys.modules.get(v.__name__) is v:
            return ("module", v.__name__)
        raise _Unfit

    def fp_macro(m: Macro) -> tuple:
        # A macro reached again is named by its first place: a kernel may compare macros
        # with == (identity), so which of them are one object is part of the fingerprint.
        index = order.get(id(m))
        if index is not None:
            return ("macro again", index)
        order[id(m)] = len(order)
        code, lines = macro_code(m)
        names = macros.names.get(code) if code is not None else None
        if names is None:  # never expanded: its code and scope are not part of the parse
            return ("macro",)
        scope = m.scope()
        macros.reached[id(m)] = (m, scope, lines, names)
        f = m.function
        return (
            "macro", code, fp(f.__defaults__, False),
            fp(tuple((f.__kwdefaults__ or {}).items()), False),
            fp((names, resolved(names, scope)), True),
        )  # fmt: skip

    try:
        return fp(value, True)
    except Exception:  # noqa: BLE001 - _Unfit, RecursionError, or a value's own code raising
        return None


_TEXTS: dict[str, tuple[list, str]] = {}  # file name -> (linecache's lines, sha256 of them)


def macro_code(m: Macro) -> tuple[str | None, list | None]:
    """``(code digest, lines)`` of macro ``m``: sha256 hex digest of what its ``def``'s text
    is, as a kernel's key covers it (its file's full text as linecache has it now, the file's
    name, the def's first line, its qualified name and name) and of ``T.macro`` or
    ``T.inline``; and those lines. ``(None, None)`` without readable source."""
    f = m.function
    lines = source_lines(f)
    if lines is None:
        return None, None
    code = f.__code__
    memo = _TEXTS.get(code.co_filename)
    if memo is None or memo[0] is not lines:  # linecache's list is new when the file is
        if len(_TEXTS) >= 16:
            _TEXTS.clear()
        memo = _TEXTS[code.co_filename] = (lines, sha256("".join(lines).encode()).hexdigest())
    text = repr(
        ("tirx-macro", code.co_filename, memo[1], code.co_firstlineno, f.__qualname__,
         f.__name__, m.late_binding)
    )  # fmt: skip
    return sha256(text.encode()).hexdigest(), lines


def _is_tirx(module) -> bool:
    return isinstance(module, str) and module.split(".", 1)[0] in ("tirx", "tvm_tirx")


def _resolve(module: str, qualname: str):
    """The object ``module.qualname`` names now, or None."""
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


@functools.cache
def _frozen_fields(cls) -> tuple[str, ...] | None:
    """The field names of ``cls`` when it is a frozen dataclass of tirx with value equality,
    defined at module level; else None."""
    if (
        "__dataclass_params__" not in vars(cls)
        or not cls.__dataclass_params__.frozen
        or cls.__eq__ is object.__eq__
        or not _is_tirx(cls.__module__)
        or _resolve(cls.__module__, cls.__qualname__) is not cls
    ):
        return None
    return tuple(f.name for f in dataclasses.fields(cls))


def _place(v) -> str | None:
    """Where ``v`` lives when it is one of tirx's namespace objects: ``T``, its parts
    (``T.cuda``, ``T.cuda.tile``, ``T.ptx``) and members (intrinsics, scalar types), ``S`` and
    ``R``; checked (the place names ``v`` itself), else None. Each object says its own place
    (a table of them all would cost a cold compile its making)."""
    if v is S or v is R:
        return "S" if v is S else "R"
    if isinstance(v, namespace.Intrinsic):
        place = f"T.{v.key}"
    elif isinstance(v, namespace.ScalarType):
        place = f"T.{v.dtype.name}"
    else:
        place = getattr(v, "_place", None)
        if not isinstance(place, str):
            return None
    head, *parts = place.split(".")
    obj = namespace.T if head == "T" else None
    for part in parts:
        obj = getattr(obj, part, None)
    return place if obj is v else None


def resolved(names: tuple[str, ...], scope: dict) -> tuple:
    """What ``names`` resolve to: ``scope``, else the builtins a kernel may name, else
    nothing."""
    return tuple(
        (1, scope[n]) if n in scope else (0, "builtin" if n in BUILTINS else "undefined")
        for n in names
    )


def snapshot(value):
    """``value`` with the lists and dicts in it copied (tuples holding them rebuilt)."""
    t = type(value)
    if t is list:
        return [snapshot(v) for v in value]
    if t is dict:
        return {k: snapshot(v) for k, v in value.items()}
    if t is tuple:
        items = tuple(snapshot(v) for v in value)
        return value if all(a is b for a, b in zip(items, value)) else items
    return value
