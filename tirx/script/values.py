"""What the evaluator needs to know of a value: compile-time or run-time, a number, a kind to
name in a message, a place in the ``T`` namespace.

A *compile-time* value is any Python object the parser computes itself (an int, a layout, a
dtype name, a tuple); a *run-time* value is an IR expression (:class:`~tirx.ir.nodes.Expr`)
or a tensor view (:class:`~tirx.ir.nodes.View`).
"""

from __future__ import annotations

from ..ir import nodes as ir

__all__ = ["is_number", "is_static", "compile_time_callable", "kind_of", "VIEW_METHODS"]

# what a tensor view answers as an attribute or a method (for "did you mean" hints)
VIEW_METHODS = ("view", "rearrange", "permute", "shape", "dtype", "layout")


def is_number(v) -> bool:
    """A compile-time number (bool, int or float)."""
    return isinstance(v, (bool, int, float))


def is_static(v) -> bool:
    """A compile-time value: anything but an IR expression or a tensor view."""
    return not isinstance(v, (ir.Expr, ir.View))


def compile_time_callable(f) -> bool:
    """Whether a kernel may call ``f`` at compile time: the layout constructors and the
    ``T`` namespace's own helpers, nothing else of Python."""
    mod = getattr(f, "__module__", "") or ""
    owner = getattr(f, "__self__", None)
    if owner is not None:
        mod = type(owner).__module__ if not isinstance(owner, type) else owner.__module__
    return mod.startswith("tirx.layout") or mod.startswith("tirx.script.namespace")


def kind_of(v) -> str:
    """What ``v`` is, for a message: "a tensor", "a kernel value" or its type and repr."""
    if isinstance(v, ir.View):
        return "a tensor"
    if isinstance(v, ir.Expr):
        return "a kernel value"
    return f"{type(v).__name__} {v!r}"[:80]
