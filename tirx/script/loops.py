"""The loop forms of TIRx: ``T.serial``, ``T.unroll``, ``T.vectorized`` and ``T.grid``.

The real TIRx spells them ``T.serial(start, stop=None, *, step=None, unroll=None,
dtype=None)`` (``T.unroll`` and ``T.vectorized`` alike, without ``unroll=``) and
``T.grid(*extents, dtype=None)``, an extent being a value or a ``(start, extent)`` pair. tirx
also takes the step as a third positional argument (as ``range`` does). Loop variables are
int32; ``dtype="int32"`` is accepted, other loop dtypes are refused.

``for i, j in T.grid(4, 8)`` is the two nested loops ``i`` (outer) and ``j``. A vectorized loop
is a :attr:`~tirx.ir.nodes.LoopKind.VECTORIZED` loop whose extent is a compile-time power of
two; what its body may hold is checked after lowering (tirx/transform/vectorize.py).
"""

from __future__ import annotations

import ast
import contextlib

from ..errors import TirxError, TirxSyntaxError
from ..ir import nodes as ir
from ..ir.simplify import static_value
from . import checks
from .forms import dotted_name
from .namespace import Intrinsic
from .spread import spread

__all__ = ["LOOP_KEYS", "loop_key", "for_form"]

LOOP_KEYS = ("serial", "unroll", "vectorized", "grid")
_KIND = {
    "serial": ir.LoopKind.SERIAL,
    "unroll": ir.LoopKind.UNROLL,
    "vectorized": ir.LoopKind.VECTORIZED,
}


def loop_key(ev, it) -> str | None:
    """The loop form ``it`` (a for-statement's iterator) calls, or None (``range``, ...)."""
    if not isinstance(it, ast.Call) or not dotted_name(it.func):
        return None
    try:
        f = ev.value(it.func)
    except TirxError:
        return None
    return f.key if isinstance(f, Intrinsic) and f.key in LOOP_KEYS else None


def for_form(parser, node: ast.For, key: str):
    """A for-statement over a loop form: a generator yielding the body (see Parser.block)."""
    ev, b, span = parser.ev, parser.b, parser.span(node)
    if node.orelse:
        raise TirxSyntaxError("for ... else is not supported", span)
    if key == "grid":
        ranges = _grid_ranges(ev, node.iter)
        names = _target_names(parser, node.target, len(ranges))
        with contextlib.ExitStack() as stack:
            for name, (start, stop) in zip(names, ranges):
                stack.enter_context(b.loop(name, start, stop, 1, ir.LoopKind.SERIAL, span))
            yield node.body
        return
    if not isinstance(node.target, ast.Name):
        raise TirxSyntaxError(
            "the loop variable must be a single name",
            parser.span(node.target),
            hint="T.grid(...) gives several loop variables: for i, j in T.grid(4, 8)",
        )
    start, stop, step, kind = _range_form(ev, node.iter, key)
    with b.loop(node.target.id, start, stop, step, kind, span):
        yield node.body


def _range_form(ev, call: ast.Call, key: str):
    call = spread(ev, call)
    span = ev.p.span(call)
    allowed = {"step", "dtype"} | ({"unroll"} if key == "serial" else set())
    kw = {}
    for k in call.keywords:
        if k.arg not in allowed:
            hint = None
            if k.arg == "annotations":
                hint = "loop annotations are TVM's own; tirx has T.unroll and T.vectorized"
            raise TirxSyntaxError(f"T.{key} has no argument {k.arg!r}", ev.p.span(k), hint=hint)
        kw[k.arg] = k.value
    if not 1 <= len(call.args) <= 3 or (len(call.args) == 3 and "step" in kw):
        raise TirxSyntaxError(
            f"T.{key}(start, stop=None, *, step=None) takes one to three bounds",
            span,
        )
    _loop_dtype(ev, kw.get("dtype"))
    args = [_bound(ev, a) for a in call.args]
    start, stop = (0, args[0]) if len(args) == 1 else (args[0], args[1])
    step_node = kw.get("step", call.args[2] if len(call.args) == 3 else None)
    step = 1 if step_node is None else static_value(ir.as_expr(_bound(ev, step_node)))
    if step is None or step == 0:
        raise TirxSyntaxError(
            "the loop step must be a nonzero compile-time integer",
            ev.p.span(step_node),
            hint=checks.STEP_HINT,
        )
    kind = _KIND[key]
    if "unroll" in kw:
        flag = ev.const(kw["unroll"])
        if flag is True or (isinstance(flag, int) and not isinstance(flag, bool) and flag > 0):
            kind = ir.LoopKind.UNROLL
        elif flag not in (False, None):
            raise TirxSyntaxError(
                f"unroll= takes True, False or a positive count, got {flag!r}",
                ev.p.span(kw["unroll"]),
            )
    if kind is not ir.LoopKind.SERIAL and (
        static_value(ir.as_expr(start)) is None or static_value(ir.as_expr(stop)) is None
    ):
        raise TirxSyntaxError(
            f"T.{key} needs compile-time loop bounds",
            span,
            hint="use range(...) or T.serial(...) for run-time bounds",
        )
    if kind is ir.LoopKind.VECTORIZED:
        _vector_extent(static_value(ir.as_expr(start)), static_value(ir.as_expr(stop)), step, span)
    return start, stop, step, kind


def _vector_extent(start: int, stop: int, step: int, span) -> None:
    n = stop - start
    if step != 1 or n <= 0 or n & (n - 1) or n > 16:
        raise TirxSyntaxError(
            f"a vectorized loop runs a power of two of consecutive iterations (1 to 16), "
            f"got range({start}, {stop}, {step})",
            span,
            hint="use a power of two: vectorize the innermost 2, 4 or 8 elements (T.vectorized(4)) and loop over "
            "the rest with range(...)",
        )


def _grid_ranges(ev, call: ast.Call) -> list[tuple]:
    call = spread(ev, call)
    span = ev.p.span(call)
    if not call.args:
        raise TirxSyntaxError("T.grid takes one extent per loop", span)
    for k in call.keywords:
        if k.arg != "dtype":
            raise TirxSyntaxError(f"T.grid has no argument {k.arg!r}", ev.p.span(k))
        _loop_dtype(ev, k.value)
    out = []
    for a in call.args:
        if isinstance(a, ast.Tuple):
            if len(a.elts) != 2:
                raise TirxSyntaxError(
                    "a T.grid range is an extent or a (start, extent) pair",
                    ev.p.span(a),
                    hint="write T.grid(n) or T.grid((start, extent)); a step needs T.serial",
                )
            start, extent = (_bound(ev, e) for e in a.elts)
            out.append((start, start + extent))
        else:
            out.append((0, _bound(ev, a)))
    return out


def _target_names(parser, target, count: int) -> list[str]:
    elts = [target] if isinstance(target, ast.Name) else getattr(target, "elts", None)
    if elts is None or not all(isinstance(t, ast.Name) for t in elts) or len(elts) != count:
        got = len(elts) if elts is not None else "a non-name"
        raise TirxSyntaxError(
            f"T.grid with {count} extents needs {count} loop variables, got {got}",
            parser.span(target),
            hint="name one variable per extent: for i, j in T.grid(4, 8)",
        )
    return [t.id for t in elts]


def _bound(ev, node):
    v = ev.scalar(node)
    try:
        return checks.integer_index(v, "a loop bound")
    except TirxError as e:
        raise e.with_span(ev.p.span(node)) from None


def _loop_dtype(ev, node) -> None:
    if node is None:
        return
    d = ev.const(node)
    name = getattr(getattr(d, "dtype", None), "name", d)
    if name != "int32":
        raise TirxSyntaxError(
            f"tirx loop variables are int32, got dtype={name!r}",
            ev.p.span(node),
            hint='drop dtype= or write dtype="int32"',
        )
