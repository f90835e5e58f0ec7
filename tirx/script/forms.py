"""The language forms of TIRx that are calls: conditional values, compile-time values, named
bindings, scalar storage, bit casts, addresses and the thread-index helpers.

Every form here is written with the real TIRx's spelling (``T.if_then_else``, ``T.Select``,
``T.meta_var``, ``T.evaluate``, ``T.bind_``, ``x: T.let = ...``, ``T.local_scalar``,
``T.reinterpret``, ``T.address_of``, ``T.alloc_tensor``, ``T.decl_tensor`` and
``T.cuda.warpgroup_id`` ...) and becomes IR the rest of tirx already has, except
``T.reinterpret``, which is one node (:class:`~tirx.ir.nodes.Reinterpret`). What each one means
on each target is in docs/semantics.md, "Language forms of TIRx".

Entry points: :func:`call_form` (the evaluator's ``T.<key>(...)`` for the keys in
:data:`FORM_KEYS`), :func:`assign_form` (``x = T.meta_var(...)``, ``x = T.bind_(...)``,
``x = T.local_scalar(...)``, which bind a name rather than produce a value to assign) and
:func:`let_form` (``x: T.let = ...``).
"""

from __future__ import annotations

import ast

from ..dtypes import DType, dtype_of
from ..errors import TirxSyntaxError
from ..ir import nodes as ir
from . import tensor as tensor_ops
from .namespace import Intrinsic, ScalarType
from .values import is_number, is_static, kind_of

__all__ = [
    "FORM_KEYS",
    "LetType",
    "call_form",
    "assign_form",
    "let_form",
    "thread_helper",
    "dotted_name",
]

# Thread-index helpers of ``T.cuda``: the warpgroup is 4 consecutive warps (128 threads), as
# the PTX ISA's wgmma defines it; ``linear_thread_id`` and ``thread_rank`` are the thread's
# rank in its block, x fastest (the CUDA programming guide's thread ID).
THREAD_HELPERS = (
    "cuda.warpgroup_id",
    "cuda.warp_in_warpgroup",
    "cuda.thread_in_warpgroup",
    "cuda.linear_thread_id",
    "cuda.thread_rank",
)
FORM_KEYS = frozenset(
    {
        "if_then_else",
        "Select",
        "meta_var",
        "evaluate",
        "bind_",
        "local_scalar",
        "reinterpret",
        "address_of",
        "alloc_tensor",
        "decl_tensor",
        "grid",
        "vectorized",
        *THREAD_HELPERS,
    }
)
# The forms that bind the name they are assigned to (see assign_form).
_BINDING_KEYS = ("meta_var", "bind_", "local_scalar")


class LetType:
    """``T.let`` and ``T.let[T.int32]``: the annotation of an immutable named binding."""

    def __init__(self, dtype: DType | None = None):
        self.dtype = dtype

    def __getitem__(self, ty) -> LetType:
        if isinstance(ty, ScalarType):
            return LetType(ty.dtype)
        if isinstance(ty, str):
            return LetType(dtype_of(ty))
        raise TirxSyntaxError(
            f"T.let[...] takes a scalar type, got {ty!r}", hint="write T.let[T.int32]"
        )

    def __repr__(self) -> str:
        return "T.let" if self.dtype is None else f"T.let[T.{self.dtype.name}]"


# ------------------------------------------------------------------------------ calls


def call_form(ev, key: str, node: ast.Call, name_hint=None):
    """``T.<key>(...)`` for a key of :data:`FORM_KEYS`, evaluated by ``ev`` (an Evaluator)."""
    span = ev.p.span(node)
    if key in THREAD_HELPERS:
        if node.args or node.keywords:
            raise TirxSyntaxError(f"T.{key}() takes no arguments", span, hint=f"write T.{key}()")
        return thread_helper(key, ev.b.launch)
    if key in ("if_then_else", "Select"):
        cond, a, b = _conditional_args(ev, node)
        return _select(ev, cond, a, b, node)
    if key == "meta_var":
        (value,) = ev._args(node, 1, 1, "value")
        return value
    if key == "evaluate":
        (value,) = ev._args(node, 1, 1, "value")
        if isinstance(value, ir.View):
            raise TirxSyntaxError("T.evaluate takes a value, not a tensor", span)
        # Kernel expressions have no side effects: evaluating one for nothing emits nothing,
        # and a call that is a statement (T.ptx[...](...), printf) has emitted itself already.
        return None
    if key == "bind_":
        (value,) = ev._args(node, 1, 1, "value")
        return value  # used as a value, a binding is the value itself (see assign_form)
    if key == "local_scalar":
        return _local_scalar(ev, node, name_hint or "scalar")
    if key == "reinterpret":
        return _reinterpret(ev, node, span)
    if key == "address_of":
        (target,) = ev._args(node, 1, 1, "obj")
        return address_of(target, span)
    if key == "alloc_tensor":
        return _alloc_tensor(ev, node, name_hint)
    if key == "decl_tensor":
        return _decl_tensor(ev, node, span)
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
    if node.keywords and node.keywords[0].arg == "condition":  # T.Select's own spelling
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


def _dtype_arg(v, span) -> DType:
    if isinstance(v, ScalarType):
        return v.dtype
    if isinstance(v, DType):
        return v
    try:
        return dtype_of(v)
    except (ValueError, TypeError, KeyError):
        raise TirxSyntaxError(
            f"expected a dtype, got {kind_of(v)}", span, hint='write a name such as "int32"'
        ) from None


def _local_scalar(ev, node, name: str) -> ir.Var:
    """A one-element local scalar: a kernel variable of ``dtype``, set to ``init`` (zero when
    none is given, so that both targets read the same value before the first write)."""
    span = ev.p.span(node)
    vals = ev._args(node, 0, 2, "dtype", "init")
    dtype = _dtype_arg(vals[0] if vals else "float32", span)
    if dtype.name in ("float16", "bfloat16"):
        raise TirxSyntaxError(
            f"a {dtype.name} local scalar is not supported: scalars compute in float32",
            span,
            hint='use T.local_scalar("float32", ...) and convert when storing',
        )
    init = vals[1] if len(vals) > 1 and vals[1] is not None else 0
    if isinstance(init, ir.View) or not (is_number(init) or isinstance(init, ir.Expr)):
        raise TirxSyntaxError(f"the initial value must be a number, got {kind_of(init)}", span)
    var = ev.b.new_var(name, dtype)
    ev.b.emit(ir.Assign(var, ir.cast(init, dtype), span))
    return var


def _reinterpret(ev, node, span) -> ir.Expr:
    """``T.reinterpret(value, ty=dtype)`` (this TIRx's spelling) or ``T.reinterpret(dtype,
    value)`` (the older one): the same bits read as another type of the same width."""
    vals = [ev.value(a) for a in node.args]
    kw = {k.arg: ev.value(k.value) for k in node.keywords}
    unknown = set(kw) - {"ty", "dtype", "value"}
    if unknown:
        raise TirxSyntaxError(f"unexpected keyword argument {sorted(unknown)[0]!r}", span)
    ty = kw.get("ty", kw.get("dtype"))
    if ty is None and len(vals) == 2 and is_static(vals[0]) and not is_number(vals[0]):
        ty, vals = vals[0], vals[1:]
    if "value" in kw:
        vals.append(kw["value"])
    if ty is None or len(vals) != 1:
        raise TirxSyntaxError(
            "T.reinterpret takes a value and its new type",
            span,
            hint='T.reinterpret(x, ty="uint32")',
        )
    dtype, value = _dtype_arg(ty, span), vals[0]
    if isinstance(value, ir.View) or not (is_number(value) or isinstance(value, ir.Expr)):
        raise TirxSyntaxError(f"T.reinterpret takes a value, got {kind_of(value)}", span)
    value = ir.as_expr(value)
    src = value.dtype
    if "bool" in (src.name, dtype.name) or src.bits != dtype.bits:
        raise TirxSyntaxError(
            f"T.reinterpret keeps the bits, so both types need the same width: "
            f"{src.name} is {src.bits} bits, {dtype.name} {dtype.bits}",
            span,
            hint=f"reinterpret as a {src.bits}-bit type (e.g. "
            f"{_same_width(src)}), or convert the value with T.cast",
        )
    if src == dtype:
        return value
    return ir.Reinterpret(value, dtype)


def _same_width(d: DType) -> str:
    return {8: "uint8", 16: "uint16", 32: "uint32", 64: "uint64"}.get(d.bits, "uint32")


def address_of(target, span) -> ir.Expr:
    """The address of a tensor element (an :class:`~tirx.ir.nodes.AddressOf`, which lowering
    turns into the element's 32-bit shared-window address for shared memory, the form PTX's
    ``[addr]`` operands take, or its 64-bit generic address for a global tensor). A local
    array has no address in registers."""
    if not isinstance(target, ir.ElemLoad):
        raise TirxSyntaxError(
            f"T.address_of takes a tensor element, got {kind_of(target)}",
            span,
            hint="name one element, e.g. T.address_of(A_smem[r, 0])",
        )
    view = target.view
    if view.buffer.scope is ir.Scope.LOCAL:
        raise TirxSyntaxError(
            f"{view.name or view.buffer.name!r} is a local (register) array: it has no address",
            span,
            hint="take the address of a shared or global tensor element",
        )
    dtype = ir.U32 if view.buffer.scope is ir.Scope.SHARED else ir.U64
    return ir.AddressOf(view, target.indices, dtype)


def _alloc_tensor(ev, node, name_hint):
    """``T.alloc_tensor(shape, dtype, scope="local" | "shared" | "shared.dyn", layout=,
    align=)``: ``T.alloc_local`` or ``T.alloc_shared`` chosen by ``scope``."""
    vals = ev._args(node, 2, 5, "shape", "dtype", "scope", "layout", "align")
    shape, dtype = vals[0], vals[1]
    where = vals[2] if len(vals) > 2 else "local"
    layout = vals[3] if len(vals) > 3 else "default"
    align = vals[4] if len(vals) > 4 else 16
    span = ev.p.span(node)
    if where not in ("local", "shared", "shared.dyn"):
        raise TirxSyntaxError(
            f'T.alloc_tensor scope must be "local", "shared" or "shared.dyn", got {where!r}',
            span,
            hint="global tensors are kernel parameters: annotate one with T.Tensor",
        )
    scope = ir.Scope.LOCAL if where == "local" else ir.Scope.SHARED
    return ev.b.alloc(name_hint, shape, dtype, scope, layout, align, span, where == "shared.dyn")


def _decl_tensor(ev, node, span):
    """``T.decl_tensor(data, shape, dtype=None, layout=None)``: a tensor declared over the
    storage of ``data`` (a tensor), seen with another dtype and shape."""
    vals = ev._args(node, 2, 4, "data", "shape", "dtype", "layout")
    data, shape = vals[0], vals[1]
    dtype = vals[2] if len(vals) > 2 else None
    layout = vals[3] if len(vals) > 3 else None
    if not isinstance(data, ir.View):
        raise TirxSyntaxError(
            f"T.decl_tensor declares a tensor over existing storage, got {kind_of(data)}",
            span,
            hint="pass a tensor (a parameter or an allocation); tirx has no raw pointers",
        )
    view = data
    if dtype is not None:
        view = tensor_ops.view_dtype(view, _dtype_arg(dtype, span).name)
    return tensor_ops.view_shape(view, tuple(shape) if isinstance(shape, list) else shape, layout)


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
    ``x = T.bind_(T.local_scalar(...))`` a mutable one of the given dtype. False when the
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
        var = _local_scalar(ev, node_value, target.id)
        b.frames[b.base][target.id] = var
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
