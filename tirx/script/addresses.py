"""Addresses of tensor elements in kernel code: ``A.ptr_to([i, ...])`` and
``T.address_of(A[i, ...])``, as atomics, shared-window addresses, mbarrier waits and tile
operation parameters take them."""

from __future__ import annotations

import ast

from ..errors import TirxSyntaxError
from ..ir import nodes as ir
from . import checks
from .namespace import T

__all__ = ["element_address", "ADDRESS_FORMS"]

ADDRESS_FORMS = "A.ptr_to([i, ...]) or T.address_of(A[i, ...])"


def _is_namespace(ev, value_node) -> bool:
    try:
        return ev.value(value_node) is T
    except TirxSyntaxError:
        return False


def element_address(ev, arg, what: str, local: bool = False):
    """``(view, indices)`` of an address argument: ``A.ptr_to([i, ...])`` or
    ``T.address_of(A[i, ...])`` (``A[i]`` a name that stands for an element too: a
    ``T.shared_scalar`` cell). ``what`` names the argument in the errors; ``local``: a local
    (register) array is taken too (its address never leaves its thread)."""
    span = ev.p.span(arg)
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute):
        attr, one = arg.func.attr, len(arg.args) == 1 and not arg.keywords
        if attr == "ptr_to" and one:
            view = ev.value(arg.func.value)
            if isinstance(view, ir.View):
                items = arg.args[0]
                elts = items.elts if isinstance(items, (ast.List, ast.Tuple)) else [items]
                idx = [checks.integer_index(ev.scalar(e), "an index") for e in elts]
                return _checked(view, idx, what, span, local)
        if attr == "address_of" and one and _is_namespace(ev, arg.func.value):
            target = ev.value(arg.args[0])
            if isinstance(target, ir.ElemLoad):
                return _checked(target.view, list(target.indices), what, span, local)
            raise TirxSyntaxError(
                f"{what}: T.address_of takes one tensor element, got "
                f"{'a tensor region' if isinstance(target, ir.View) else 'a value'}",
                span,
                hint=f"write {ADDRESS_FORMS}",
            )
    value = ev.value(arg)
    if isinstance(value, ir.ElemLoad):
        given = f"{_name(value.view)}[...] is an element's value, not its address"
    elif isinstance(value, ir.View):
        given = f"{_name(value)} is a tensor, not the address of one of its elements"
    elif isinstance(value, ir.Expr):
        given = "a kernel value is not an address tirx can follow (an address kept in a "
        given += "variable names no tensor)"
    else:
        given = f"{type(value).__name__} {value!r} is not an address"[:120]
    raise TirxSyntaxError(
        f"{what} must be an element address: {given} (it takes the address of one tensor element)",
        span,
        hint=f"write {ADDRESS_FORMS}",
    )


def _name(view: ir.View) -> str:
    return repr(view.name or view.buffer.name)


def _checked(view, idx, what: str, span, local: bool):
    if len(idx) != len(view.shape) or any(isinstance(i, slice) for i in idx):
        raise TirxSyntaxError(
            f"{what} needs one index per dimension of {_name(view)} {view.shape}, got {len(idx)}",
            span,
            hint=f"write {ADDRESS_FORMS}",
        )
    if view.buffer.scope is ir.Scope.LOCAL and not local:
        raise TirxSyntaxError(
            f"{view.name!r} is a local (register) array: it has no address other threads see",
            span,
            hint="atomics and shared addresses need a global tensor or T.alloc_shared storage",
        )
    return view, tuple(idx)
