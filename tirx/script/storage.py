"""The storage forms of TIRx: ``T.local_scalar``, ``T.shared_scalar``, ``T.reinterpret``, ``T.address_of``,
``T.alloc_tensor`` and ``T.decl_tensor`` (called from :mod:`tirx.script.forms`; their meaning
on each target is in docs/semantics.md, "Language forms of TIRx")."""

from __future__ import annotations

from ..dtypes import DType, dtype_of
from ..errors import TirxSyntaxError
from ..ir import nodes as ir
from . import tensor as tensor_ops
from .namespace import ScalarType
from .values import is_number, is_static, kind_of

__all__ = [
    "local_scalar", "shared_scalar", "reinterpret", "address_of", "alloc_tensor", "decl_tensor",
    "dtype_arg",
]  # fmt: skip


def dtype_arg(v, span) -> DType:
    if isinstance(v, ScalarType):
        return v.dtype
    if isinstance(v, DType):
        return v
    try:
        return dtype_of(v)
    except (ValueError, TypeError, KeyError) as e:
        # a misspelt name is told with the names there are (dtype_of's message)
        what = str(e) if isinstance(v, str) else f"expected a dtype, got {kind_of(v)}"
        raise TirxSyntaxError(what, span, hint='write a name such as "int32"') from None


def local_scalar(ev, node, name: str) -> ir.Var:
    """A one-element local scalar: a kernel variable of ``dtype``, set to ``init`` (zero when
    none is given, so that both targets read the same value before the first write)."""
    span = ev.p.span(node)
    vals = ev._args(node, 0, 2, "dtype", "init")
    dtype = dtype_arg(vals[0] if vals else "float32", span)
    init = vals[1] if len(vals) > 1 and vals[1] is not None else 0
    return _local_scalar(ev, name, dtype, init, span, "local_scalar")


def _local_scalar(ev, name: str, dtype, init, span, key: str) -> ir.Var:
    if dtype.name in ("float16", "bfloat16"):
        raise TirxSyntaxError(
            f"a {dtype.name} local scalar is not supported: scalars compute in float32",
            span,
            hint=f'use T.{key}("float32", ...) and convert when storing',
        )
    if isinstance(init, ir.View) or not (is_number(init) or isinstance(init, ir.Expr)):
        raise TirxSyntaxError(f"the initial value must be a number, got {kind_of(init)}", span)
    var = ev.b.new_var(name, dtype)
    ev.b.emit(ir.Assign(var, ir.cast(init, dtype), span))
    return var


def shared_scalar(ev, node, name: str) -> ir.ElemLoad:
    """``x = T.shared_scalar(dtype)``: a one-element shared tensor that the name ``x`` stands
    for, as the real TIRx's mutable scalar cell: reading ``x`` loads the element, ``x = v``
    stores into it, and ``x`` (or ``T.address_of(x)``) where an instruction takes a shared
    address is the element's (``bar = T.shared_scalar("uint64")`` is an mbarrier). Not
    initialized, as any shared memory."""
    span = ev.p.span(node)
    vals = ev._args(node, 0, 1, "dtype")
    return _shared_cell(ev, name, dtype_arg(vals[0] if vals else "float32", span), span)


def _shared_cell(ev, name: str, dtype, span) -> ir.ElemLoad:
    if dtype.name == "bool":
        raise TirxSyntaxError(
            "a bool shared scalar is not supported", span, hint='use "int32" (0 or 1)'
        )
    view = ev.b.alloc(name, (1,), dtype, ir.Scope.SHARED, "default", max(16, dtype.bytes), span)
    ev.b.cells.add(view.buffer)
    return ir.ElemLoad(view, (0,), view.dtype)


def alloc_scalar(ev, node, name: str):
    """``x = T.alloc_scalar(dtype, scope)``, the real TIRx's scalar of a memory scope:
    ``"shared"`` is ``T.shared_scalar(dtype)`` (a shared cell, not initialized), ``"local"``
    ``T.local_scalar(dtype)`` (a kernel variable, zero until written). The real TIRx's default
    scope, ``"global"``, would be a global allocation made inside the kernel, which tirx has
    not: global memory comes in through the kernel's tensor parameters."""
    span = ev.p.span(node)
    vals = ev._args(node, 0, 2, "dtype", "scope")
    dtype = dtype_arg(vals[0] if vals else "float32", span)
    scope = vals[1] if len(vals) > 1 else "global"
    if scope == "shared":
        return _shared_cell(ev, name, dtype, span)
    if scope == "local":
        return _local_scalar(ev, name, dtype, 0, span, "alloc_scalar")
    raise TirxSyntaxError(
        f'T.alloc_scalar\'s scope must be "shared" or "local", got {scope!r}'
        + (" (the default)" if len(vals) < 2 else ""),
        span,
        hint=f'T.alloc_scalar("{dtype.name}", "shared") for a cell every thread of the block '
        f'sees, "local" for a variable of each thread; global memory comes in as a tensor '
        "parameter",
    )


def reinterpret(ev, node, span) -> ir.Expr:
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
    dtype, value = dtype_arg(ty, span), vals[0]
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


def alloc_tensor(ev, node, name_hint):
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


def decl_tensor(ev, node, span):
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
        view = tensor_ops.view_dtype(view, dtype_arg(dtype, span).name)
    return tensor_ops.view_shape(view, tuple(shape) if isinstance(shape, list) else shape, layout)
