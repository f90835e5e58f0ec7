"""Python that is not kernel language, named in the user's words, with what to write instead.

The parser accepts an explicit list of statements and expressions (its ``stmt_<Kind>`` and
``ex_<Kind>`` handlers) and refuses every other construct through :func:`refusal`, which names
it as a Python programmer would ("an f-string", "a list comprehension", never ``JoinedStr``)
and says what a kernel writes instead. :data:`CONSTRUCTS` covers every statement and
expression class of Python 3.10 to 3.12 that the parser has no handler for; the operators
(:data:`OPERATORS`) are named by their spelling; the builtins a kernel does not have get a
pointer to what it has (:func:`builtin_hint`). ``tests/test_refusals.py`` checks the tables
against every AST class of those versions.
"""

from __future__ import annotations

import ast
import builtins
import os

from ..errors import Span, TirxSyntaxError, did_you_mean

__all__ = [
    "python_failure",
    "CONSTRUCTS",
    "OPERATORS",
    "DOUBLE_STAR",
    "refusal",
    "operator_name",
    "operator_hint",
    "builtin_hint",
    "undefined_name",
    "constant_kind",
]

_PRINTF = 'T.cuda.printf("x = %d\\n", x) prints kernel values'
_LOOP = "write a loop (for i in range(n), T.unroll(n) or T.grid(...))"
_OUTSIDE = "compute it in Python outside the kernel and use the captured value"
_MACRO = "define a @T.macro (or @T.inline) outside the kernel and call it"
_NO_EXCEPTIONS = "exceptions do not exist on the GPU; use an if (and T.cuda.printf to report)"

# AST class name -> (the construct in words, what to write instead). Names, not classes: the
# table holds the classes of every supported Python version whichever one runs.
CONSTRUCTS: dict[str, tuple[str, str]] = {
    # statements
    "FunctionDef": ("a nested function", _MACRO),
    "AsyncFunctionDef": ("an async function", _MACRO),
    "ClassDef": ("a class definition", "define classes outside the kernel"),
    "Return": ("return", "kernels write their results into tensor parameters; "
               "put the rest of the kernel under an if"),
    "Delete": ("del", "kernel variables live until the kernel ends; just stop using it"),
    "TypeAlias": ("a type alias (type X = ...)", "define it outside the kernel"),
    "AsyncFor": ("async for", "loops iterate over range(...), T.serial(...) or T.unroll(...)"),
    "With": ("a with-statement", "a kernel has no context managers: write the statements "
             "without the with"),
    "AsyncWith": ("async with", "a kernel has no context managers: write the statements "
                  "without the with"),
    "Match": ("match", "use if/elif/else"),
    "Raise": ("raise", _NO_EXCEPTIONS),
    "Try": ("try/except", _NO_EXCEPTIONS),
    "TryStar": ("try/except*", _NO_EXCEPTIONS),
    "Assert": ("assert", "use an if and T.cuda.printf to report a condition"),
    "Import": ("import", "import at module level; the kernel can use captured names"),
    "ImportFrom": ("import", "import at module level; the kernel can use captured names"),
    "Global": ("global", "kernels cannot write Python variables; write results to a tensor"),
    "Nonlocal": ("nonlocal", "kernels cannot write Python variables; write results to a tensor"),
    # expressions
    "NamedExpr": ("an assignment expression (:=, the walrus operator)",
                  "assign on a line of its own first (y = ...), then use y"),
    "Lambda": ("a lambda", _MACRO),
    "Dict": ("a dict literal", f"kernels have no dicts: {_OUTSIDE}"),
    "Set": ("a set literal", f"kernels have no sets: {_OUTSIDE}"),
    "ListComp": ("a list comprehension", f"{_LOOP}, or {_OUTSIDE}"),
    "SetComp": ("a set comprehension", f"{_LOOP}, or {_OUTSIDE}"),
    "DictComp": ("a dict comprehension", f"{_LOOP}, or {_OUTSIDE}"),
    "GeneratorExp": ("a generator expression", f"{_LOOP}, or {_OUTSIDE}"),
    "Await": ("await", "kernels are not coroutines; write a plain def"),
    "Yield": ("yield", "kernels write their results into tensor parameters"),
    "YieldFrom": ("yield from", "kernels write their results into tensor parameters"),
    "JoinedStr": ("an f-string", f"kernels have no strings: {_PRINTF}"),
    "FormattedValue": ("an f-string field", f"kernels have no strings: {_PRINTF}"),
    "Starred": ("a starred expression (*x)", "write each value out: f(a, b) for f(*xs)"),
}  # fmt: skip

# ``f(**kwargs)``: a keyword without a name (not a class of its own).
DOUBLE_STAR = ("a dict unpacked into a call (**x)", "pass each keyword argument by name: f(n=1)")

# Operator classes -> their spelling.
OPERATORS: dict[str, str] = {
    "Add": "+", "Sub": "-", "Mult": "*", "MatMult": "@", "Div": "/", "Mod": "%", "Pow": "**",
    "LShift": "<<", "RShift": ">>", "BitOr": "|", "BitXor": "^", "BitAnd": "&", "FloorDiv": "//",
    "Invert": "~", "Not": "not", "UAdd": "+", "USub": "-", "And": "and", "Or": "or",
    "Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=", "Is": "is",
    "IsNot": "is not", "In": "in", "NotIn": "not in",
}  # fmt: skip

# What a kernel writes instead of an operator that works on compile-time values only.
_OPERATOR_HINTS = {
    "Pow": "for kernel values use T.pow(x, y), or multiply (x * x)",
    "MatMult": "a kernel multiplies matrices with mma tile operations "
    '(T.cuda.tile.apply(T.ptx["mma.sync..."], ...))',
    "In": "compare with == and combine with or: x == 1 or x == 2",
    "NotIn": "compare with != and combine with and: x != 1 and x != 2",
}


def refusal(node: ast.AST, span: Span | None) -> TirxSyntaxError:
    """The error for a construct the parser has no handler for."""
    name = type(node).__name__
    what, instead = CONSTRUCTS.get(name, (f"this Python construct ({name})", ""))
    return TirxSyntaxError(f"{what} is not part of the kernel language", span, hint=instead or None)


def operator_name(op: ast.AST) -> str:
    """``op`` as the user wrote it (``**``, ``not in``)."""
    return OPERATORS.get(type(op).__name__, type(op).__name__)


def operator_hint(op: ast.AST) -> str | None:
    """What to write instead of ``op`` on kernel values, where tirx has something."""
    return _OPERATOR_HINTS.get(type(op).__name__)


def constant_kind(value) -> str:
    """A constant the language has no values of, in words."""
    if value is Ellipsis:
        return "... (Ellipsis)"
    if isinstance(value, bytes):
        return "a bytes literal"
    if isinstance(value, complex):
        return "a complex number"
    return f"the constant {value!r}"


_CONVERT = "convert with a dtype: T.int32(x), T.float32(x) (or T.cast(x, dtype))"
_ITERATE = "loops iterate over range(...), T.serial(...), T.unroll(...) or T.grid(...)"
_NO_STRINGS = f"kernels have no strings; {_PRINTF}"
_INTROSPECT = "inspect values in Python outside the kernel and use the captured result"
# Builtins a user reaches for -> what a kernel has instead. (range, min, max, abs and len are
# kernel builtins: tirx.script.evaluator.BUILTINS.)
_BUILTINS = {
    "print": _PRINTF.replace(" prints", " to print") + " (C's printf conversions)",
    "int": _CONVERT,
    "float": _CONVERT,
    "bool": "compare instead: x != 0",
    "round": "T.round(x) rounds half away from zero, T.nearbyint(x) half to even",
    "pow": "T.pow(x, y), or x ** n with compile-time operands",
    "divmod": "x // d and x % d",
    "sum": "add in a loop (s += ...), or T.cuda.warp_sum(x) over a warp",
    "any": "combine conditions with or (T.cuda.any_sync(mask, x) over a warp)",
    "all": "combine conditions with and",
    "enumerate": _ITERATE,
    "zip": _ITERATE,
    "reversed": _ITERATE + ": range(n - 1, -1, -1)",
    "sorted": _OUTSIDE,
    "map": _ITERATE,
    "filter": _ITERATE + " with an if inside",
    "iter": _ITERATE,
    "next": _ITERATE,
    "list": "kernel arrays are tensors: T.alloc_local((n,), dtype)",
    "tuple": "write the tuple: (a, b)",
    "dict": f"kernels have no dicts: {_OUTSIDE}",
    "set": f"kernels have no sets: {_OUTSIDE}",
    "frozenset": f"kernels have no sets: {_OUTSIDE}",
    "str": _NO_STRINGS,
    "repr": _NO_STRINGS,
    "format": _NO_STRINGS,
    "chr": _NO_STRINGS,
    "ord": _NO_STRINGS,
    "hex": _NO_STRINGS + " (%x prints hexadecimal)",
    "bin": _NO_STRINGS,
    "oct": _NO_STRINGS + " (%o prints octal)",
    "isinstance": _INTROSPECT,
    "type": _INTROSPECT,
    "getattr": "write the attribute: x.name",
    "hasattr": _INTROSPECT,
    "id": _INTROSPECT,
    "hash": _INTROSPECT,
    "callable": _INTROSPECT,
    "slice": "write the slice in brackets: t[a:b]",
}


def builtin_hint(name: str) -> tuple[str, str] | None:
    """``(message, hint)`` for a name that is a Python builtin but not a kernel one; None for
    other names."""
    if not hasattr(builtins, name) or name.startswith("_"):
        return None
    value = getattr(builtins, name)
    if isinstance(value, type) and issubclass(value, BaseException):
        return f"the Python exception {name} is not available in a kernel", _NO_EXCEPTIONS
    hint = _BUILTINS.get(name) or (
        "kernels call range, min, max, abs, len and the T.* intrinsics; " + _OUTSIDE
    )
    return f"the Python builtin {name}() is not available in a kernel", hint


def undefined_name(name: str, span: Span | None, known, ended=None) -> TirxSyntaxError:
    """The error for a name neither the kernel nor its scope defines (``known``: the names
    they do): a Python builtin the kernel language lacks is pointed at what it has, any other
    name at the closest known one. ``ended``: ``(what, span)`` of the run-time branch or loop
    body that bound it and has ended."""
    if ended is not None:
        what, where = ended
        at = f" at line {where.line}" if where is not None else ""
        if where is not None and (span is None or where.file != span.file):
            at += f" of {os.path.basename(where.file)}"  # not the file the use is in
        if what.endswith("variable"):
            return TirxSyntaxError(
                f"name {name!r} is not defined here: it is the loop variable of the `for` "
                f"loop{at}, visible only inside the loop (as in C)",
                span,
                hint=f"assign its last value to a variable inside the loop (last = {name}), or "
                "use the loop's bounds",
            )
        loop = "loop" in what
        return TirxSyntaxError(
            f"name {name!r} is not defined here: it was bound inside the {what}{at}, and a "
            f"tensor or other compile-time value bound inside a run-time "
            f"{'loop' if loop else 'branch'} is visible only there",
            span,
            hint=(
                f"bind {name!r} before the loop"
                if loop
                else f"allocate {name!r} once before the `if` and fill it in the branches (both "
                "branches are built when the condition is a run-time value); a condition known "
                "when the kernel is built (a Python value) builds only the taken branch, whose "
                "names stay visible after the `if`"
            ),
        )
    builtin = builtin_hint(name)
    if builtin is not None:
        return TirxSyntaxError(builtin[0], span, hint=builtin[1])
    hint = did_you_mean(name, [n for n in known if not n.startswith("_")])
    return TirxSyntaxError(f"name {name!r} is not defined", span, hint=hint)


def python_failure(e: Exception, span) -> TirxSyntaxError:
    """The error for a Python exception raised while evaluating the user's expression (a
    compile-time computation on Python values, or a bad operand type), at its ``span``."""
    if isinstance(e, ZeroDivisionError):
        return TirxSyntaxError(
            f"division by zero in a constant expression ({e})",
            span,
            hint="the divisor is a constant zero here; guard it, or take the value from a "
            "tensor so that the kernel computes it (a float divided by zero is then an "
            "infinity or NaN, as on the GPU)",
        )
    return TirxSyntaxError(str(e), span)
