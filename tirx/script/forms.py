"""The language forms of TIRx that are calls: conditional values, compile-time values, named
bindings, scalar storage, bit casts, addresses and the thread-index helpers.

Every form here is written with the real TIRx's spelling (``T.if_then_else``, ``T.Select``,
``T.meta_var``, ``T.evaluate``, ``T.bind_``, ``T.tensor_store``, ``x: T.let = ...``, ``T.local_scalar``,
``T.reinterpret``, ``T.address_of``, ``T.alloc_tensor``, ``T.decl_tensor`` and
``T.cuda.warpgroup_id`` ...; the storage forms are in :mod:`tirx.script.storage`) and becomes
IR the rest of tirx already has, except ``T.reinterpret`` and ``T.address_of``, one node each
(:class:`~tirx.ir.nodes.Reinterpret`, :class:`~tirx.ir.nodes.AddressOf`). What each one means
on each target is in docs/semantics.md, "Language forms of TIRx".

Entry points: :func:`call_form` (the evaluator's ``T.<key>(...)`` for the keys in
:data:`FORM_KEYS`), :func:`assign_form` (``x = T.meta_var(...)``, ``x = T.bind_(...)``,
``x = T.local_scalar(...)``, which bind a name rather than produce a value to assign) and
:func:`let_form` (``x: T.let = ...``).
"""

from __future__ import annotations

import ast

from ..dtypes import DType
from ..errors import TirxSyntaxError
from ..ir import nodes as ir
from .namespace import FORM_KEYS, THREAD_HELPERS, Intrinsic, LetType
from .spread import origin
from .values import is_number, kind_of

__all__ = [
    "FORM_KEYS",
    "LetType",
    "call_form",
    "assign_form",
    "let_form",
    "thread_helper",
    "dotted_name",
]

# The forms that bind the name they are assigned to (see assign_form).
_BINDING_KEYS = ("meta_var", "bind_", "local_scalar", "shared_scalar", "alloc_scalar")
_SCALAR_EXAMPLE = {
    "shared_scalar": 'T.shared_scalar("uint64")',
    "alloc_scalar": 'T.alloc_scalar("uint64", scope="shared")',
}


# ------------------------------------------------------------------------------ calls


def call_form(ev, key: str, node: ast.Call, name_hint=None):
    """``T.<key>(...)`` for a key of :data:`FORM_KEYS`, evaluated by ``ev`` (an Evaluator)."""
    span = ev.p.span(node)
    if key in THREAD_HELPERS:
        if node.args or node.keywords:
            raise TirxSyntaxError(f"T.{key}() takes no arguments", span, hint=f"write T.{key}()")
        return thread_helper(key, ev.b.launch)
    if key in ("if_then_else", "Select", "select"):
        cond, a, b = _conditional_args(ev, node)
        return _select(ev, cond, a, b, node)
    if key in ("logical_and", "logical_or", "logical_not", "likely"):
        return _logical(ev, key, node, span)
    if key == "static_assert":
        return _static_assert(ev, node, span)
    if key == "meta_var":
        (value,) = ev._args(node, 1, 1, "value")
        return value
    if key == "evaluate":
        (value,) = ev._args(node, 1, 1, "value")
        if isinstance(value, ir.View):
            raise TirxSyntaxError("T.evaluate takes a value, not a tensor", span)
        # Kernel expressions have no side effects: evaluating one for nothing emits nothing,
        # and a call that acts (T.ptx[...](...), printf, an atomic, which script/effects.py
        # accepts inside this statement) has emitted itself already.
        return None
    if key == "bind_":
        (value,) = ev._args(node, 1, 1, "value")
        return value  # used as a value, a binding is the value itself (see assign_form)
    if key == "tensor_store":
        return _tensor_store(ev, node, span)
    from . import storage  # the storage forms below, loaded at the first

    if key == "local_scalar":
        return storage.local_scalar(ev, node, name_hint or "scalar")
    if key in ("shared_scalar", "alloc_scalar"):
        raise TirxSyntaxError(
            f"T.{key}(...) names a scalar: assign it to a name of its own",
            span,
            hint=f"bar = {_SCALAR_EXAMPLE[key]}, then use bar",
        )
    if key == "reinterpret":
        return storage.reinterpret(ev, node, span)
    if key == "address_of":
        (target,) = ev._args(node, 1, 1, "obj")
        return storage.address_of(target, span)
    if key == "alloc_tensor":
        return storage.alloc_tensor(ev, node, name_hint)
    if key == "decl_tensor":
        return storage.decl_tensor(ev, node, span)
    raise TirxSyntaxError(
        f"T.{key}(...) is only valid as a for-loop iterator",
        span,
        hint=f"write `for i in T.{key}(...):`",
    )


def thread_helper(key: str, launch: ir.LaunchConfig) -> ir.Expr:
    """The value of a ``T.cuda`` thread-index helper, from the thread index and the (static)
    block shape: in a block of (128, 1, 1), ``linear_thread_id`` is ``threadIdx.x``."""
    bx, by, bz = launch.block
    tid = ir.Special(ir.Builtin.THREAD_IDX, 0)
    if by != 1 or bz != 1:
        ty = ir.Special(ir.Builtin.THREAD_IDX, 1)
        tz = ir.Special(ir.Builtin.THREAD_IDX, 2) if bz != 1 else 0
        tid = tid + bx * (ty + by * tz)
    if key in ("cuda.linear_thread_id", "cuda.thread_rank"):
        return tid
    if key == "cuda.warpgroup_id":
        return tid // 128
    if key == "cuda.warp_in_warpgroup":
        return (tid // 32) % 4
    return tid % 128  # cuda.thread_in_warpgroup


def _conditional_args(ev, node):
    names = ("cond", "true_value", "false_value")
    if node.keywords and node.keywords[0].arg == "condition":  # T.Select's and T.select's
        names = ("condition", "true_value", "false_value")
    return ev._args(node, 3, 3, *names)


def _select(ev, cond, a, b, node):
    """``cond ? a : b`` with the usual promotion; a compile-time condition picks a side."""
    for v, what in ((a, "true_value"), (b, "false_value")):
        if isinstance(v, ir.View) or not (is_number(v) or isinstance(v, ir.Expr)):
            raise TirxSyntaxError(
                f"the {what} of a conditional must be a number or a kernel value, got {kind_of(v)}",
                ev.p.span(node),
                hint="index one element of a tensor, e.g. A[i]",
            )
    c = ev._as_condition(cond, node.args[0] if node.args else node)
    if isinstance(c, bool):
        return a if c else b
    a, b = ir.as_expr(a), ir.as_expr(b)
    dtype = a.dtype if a.dtype == b.dtype else ir.promote(a.dtype, b.dtype)
    return ir.Select(c, ir.cast(a, dtype), ir.cast(b, dtype), dtype)


_STORE_PARAMS = ("dest", "indices", "value")


def _tensor_store(ev, node: ast.Call, span):
    """``T.tensor_store(dest, indices, value)``: the statement ``dest[indices] = value``, the
    indices a list or tuple written in the call (``[i, j]``), one per dimension."""
    stmt = getattr(ev.p, "statement", None)
    outer = stmt.value if isinstance(stmt, ast.Expr) else None
    written = origin(node)  # the call as written, where f(*xs) was spread
    wrapped = isinstance(outer, ast.Call) and outer.args == [written] and not outer.keywords
    if wrapped:  # only T.evaluate(T.tensor_store(...)) (a dotted name: evaluating it is pure)
        f = ev.value(outer.func) if dotted_name(outer.func) else None
        wrapped = isinstance(f, Intrinsic) and f.key == "evaluate"
    if not (outer is written or wrapped):
        raise TirxSyntaxError(
            "T.tensor_store(...) is a statement of its own and has no value",
            span,
            hint="write it as a statement of its own: T.tensor_store(A, [i, j], v)",
        )
    args = dict(zip(_STORE_PARAMS, node.args))
    for k in node.keywords:
        if k.arg not in _STORE_PARAMS or k.arg in args:
            what = "given twice" if k.arg in args else "unexpected"
            raise TirxSyntaxError(f"T.tensor_store: {what} argument {k.arg!r}", ev.p.span(k))
        args[k.arg] = k.value
    if len(node.args) > 3 or len(args) != 3:
        raise TirxSyntaxError(
            f"T.tensor_store takes 3 arguments (dest, indices, value), got "
            f"{len(node.args) + len(node.keywords)}",
            span,
            hint="write T.tensor_store(A, [i, j], value)",
        )
    dest = ev.value(args["dest"])
    if not isinstance(dest, ir.View):
        raise TirxSyntaxError(
            f"T.tensor_store stores into a tensor, not {kind_of(dest)}", ev.p.span(args["dest"])
        )
    where = args["indices"]
    if not isinstance(where, (ast.List, ast.Tuple)):
        raise TirxSyntaxError(
            "T.tensor_store's indices are a list written in the call, one per dimension",
            ev.p.span(where),
            hint="write T.tensor_store(A, [i, j], value)",
        )
    if len(where.elts) != len(dest.shape):
        n = len(dest.shape)
        raise TirxSyntaxError(
            f"T.tensor_store: {kind_of(dest)} has {n} dimension{'s' if n != 1 else ''}, got "
            f"{len(where.elts)} ind{'ex' if len(where.elts) == 1 else 'ices'}",
            ev.p.span(where),
            hint="give one index per dimension: T.tensor_store(A, [i, j], value)",
        )
    indices = ev.indices(ast.Tuple(elts=where.elts, ctx=ast.Load()))
    ev.b.store(dest, indices, ev.value(args["value"]), span)
    return None


def _logical(ev, key: str, node, span):
    """``T.logical_and(a, b, ...)``, ``T.logical_or``, ``T.logical_not(x)`` and
    ``T.likely(cond)`` (a branch hint: its condition)."""
    if node.keywords:
        raise TirxSyntaxError(f"T.{key} takes no keyword arguments", span)
    if key in ("logical_and", "logical_or"):
        if not node.args:
            raise TirxSyntaxError(f"T.{key} takes one or more values", span)
        return ev.logic(key == "logical_and", node.args)
    if len(node.args) != 1:
        raise TirxSyntaxError(f"T.{key} takes one value", span)
    c = ev.condition(node.args[0])
    if key == "likely":
        return c
    return (not c) if isinstance(c, bool) else ir.Not(c)


def _static_assert(ev, node, span):
    """``T.static_assert(cond, message="")``: checked while the kernel is read."""
    cond, *rest = ev._args(node, 1, 2, "x", "message")
    message = rest[0] if rest else ""
    if isinstance(cond, ir.Expr) and not isinstance(cond, ir.Const):
        raise TirxSyntaxError(
            "T.static_assert needs a compile-time condition; this one depends on run-time values",
            span,
            hint="check run-time values with an if (and T.cuda.printf or T.cuda.trap)",
        )
    if not ev._as_condition(cond, node.args[0] if node.args else node):
        raise TirxSyntaxError("T.static_assert failed" + (f": {message}" if message else ""), span)
    return None


# -------------------------------------------------------------------------- bindings


def dotted_name(node) -> bool:
    """Whether ``node`` is a plain name or a chain of attributes of one (``T.meta_var``):
    evaluating it looks names up and emits nothing."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _form_key(ev, call) -> str | None:
    if not isinstance(call, ast.Call) or not dotted_name(call.func):
        return None
    try:
        f = ev.const(call.func)
    except Exception:  # noqa: BLE001 - not a form: the ordinary assignment reports it
        return None
    return f.key if isinstance(f, Intrinsic) and f.key in _BINDING_KEYS else None


def assign_form(parser, node: ast.Assign) -> bool:
    """``x = T.meta_var(v)`` binds ``x`` to ``v`` itself, in Python (an IR expression is
    inlined at every use, a tuple may be unpacked: ``a, b = T.meta_var((l, r))``);
    ``x = T.bind_(v)`` binds an immutable kernel variable; ``x = T.local_scalar(...)`` and
    ``x = T.bind_(T.local_scalar(...))`` a mutable one of the given dtype;
    ``x = T.shared_scalar(dtype)`` the element of a one-element shared tensor. False when the
    assignment is none of these."""
    ev, b, span = parser.ev, parser.b, parser.span(node)
    key = _form_key(ev, node.value)
    if key is None:
        return False
    target = node.targets[0]
    inner = node.value.args[0] if node.value.args else None
    if key == "bind_" and _form_key(ev, inner) == "local_scalar":
        key, node_value = "local_scalar", inner
    else:
        node_value = node.value
    if key == "meta_var":
        value = ev.value(node_value)
        _bind_meta(parser, target, value, span)
        return True
    if not isinstance(target, ast.Name):
        raise TirxSyntaxError(f"T.{key} binds one name", parser.span(target))
    if key == "local_scalar":
        from .storage import local_scalar

        var = local_scalar(ev, node_value, target.id)
        b.frames[b.base][target.id] = var
        return True
    if key == "shared_scalar":
        from .storage import shared_scalar

        b.frames[b.base][target.id] = shared_scalar(ev, node_value, target.id)
        return True
    if key == "alloc_scalar":
        from .storage import alloc_scalar

        b.frames[b.base][target.id] = alloc_scalar(ev, node_value, target.id)
        return True
    value = ev.value(node_value)
    if isinstance(value, ir.View) or not (is_number(value) or isinstance(value, ir.Expr)):
        b.bind(target.id, value)  # a tensor or a compile-time object keeps its identity
        return True
    _bind_immutable(b, target.id, ir.as_expr(value), None, span)
    return True


def _bind_meta(parser, target, value, span) -> None:
    b = parser.b
    if isinstance(target, ast.Name):
        b.bind(target.id, value)
        return
    if isinstance(target, (ast.Tuple, ast.List)) and all(
        isinstance(t, ast.Name) for t in target.elts
    ):
        if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
            raise TirxSyntaxError(
                f"cannot unpack {kind_of(value)} into {len(target.elts)} names",
                span,
                hint="give as many names as the value has items",
            )
        for t, v in zip(target.elts, value):
            b.bind(t.id, v)
        return
    raise TirxSyntaxError("T.meta_var binds names", parser.span(target))


def _bind_immutable(b, name: str, value: ir.Expr, dtype: DType | None, span) -> None:
    dtype = dtype or value.dtype
    if dtype.name in ("float16", "bfloat16"):
        dtype = ir.F32  # 16-bit values compute in float32
    var = b.new_var(name, dtype)
    b.emit(ir.Assign(var, ir.cast(value, dtype), span))
    b.frames[b.base][name] = var
    b.immutable.add(var)


def let_form(parser, node: ast.AnnAssign) -> bool:
    """``x: T.let = v`` and ``x: T.let[T.int32] = v``: an immutable kernel variable; False when
    the annotation is not ``T.let``."""
    ann = parser.ev.value(node.annotation)
    if not isinstance(ann, LetType):
        return False
    span = parser.span(node)
    if not isinstance(node.target, ast.Name) or node.value is None:
        raise TirxSyntaxError("a T.let binding needs a name and a value", span)
    value = parser.ev.value(node.value)
    if isinstance(value, ir.View) or not (is_number(value) or isinstance(value, ir.Expr)):
        raise TirxSyntaxError(
            f"T.let binds a kernel value, got {kind_of(value)}",
            span,
            hint="bind tensors and compile-time objects with a plain assignment",
        )
    _bind_immutable(parser.b, node.target.id, ir.as_expr(value), ann.dtype, span)
    return True
