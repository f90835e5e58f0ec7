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


def element_address(ev, arg, what: str):
    """``(view, indices)`` of an address argument: ``A.ptr_to([i, ...])`` or
    ``T.address_of(A[i, ...])``."""
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute):
        attr = arg.func.attr
        if attr == "ptr_to" and len(arg.args) == 1 and not arg.keywords:
            view = ev.value(arg.func.value)
            if isinstance(view, ir.View):
                items = arg.args[0]
                elts = items.elts if isinstance(items, (ast.List, ast.Tuple)) else [items]
                idx = [checks.integer_index(ev.scalar(e), "an index") for e in elts]
                return _checked(ev, view, idx, arg)
        if attr == "address_of" and _is_namespace(ev, arg.func.value):
            if len(arg.args) == 1 and not arg.keywords and isinstance(arg.args[0], ast.Subscript):
                view = ev.value(arg.args[0].value)
                if isinstance(view, ir.View):
                    return _checked(ev, view, ev.indices(arg.args[0].slice), arg)
            if len(arg.args) == 1 and not arg.keywords and isinstance(arg.args[0], ast.Name):
                cell = ev.value(arg.args[0])  # a name that stands for an element (T.shared_scalar)
                if isinstance(cell, ir.ElemLoad):
                    return _checked(ev, cell.view, list(cell.indices), arg)
    raise TirxSyntaxError(
        f"{what} must be the address of one tensor element",
        ev.p.span(arg),
        hint=f"write {ADDRESS_FORMS}",
    )


def _checked(ev, view, idx, arg):
    if len(idx) != len(view.shape) or any(isinstance(i, slice) for i in idx):
        raise TirxSyntaxError(
            f"the address needs one index per dimension of {view.name!r} {view.shape}, "
            f"got {len(idx)}",
            ev.p.span(arg),
            hint=f"write {ADDRESS_FORMS}",
        )
    if view.buffer.scope is ir.Scope.LOCAL:
        raise TirxSyntaxError(
            f"{view.name!r} is a local (register) array: it has no address other threads see",
            ev.p.span(arg),
            hint="atomics and shared addresses need a global tensor or T.alloc_shared storage",
        )
    return view, tuple(idx)
