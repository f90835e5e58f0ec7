"""Index arithmetic that works on ints and on symbolic coordinates alike.

The compiler applies layouts to run-time indices (a lane id, a loop variable): IR expression
objects that overload ``+ - * // % << >> & ^`` with ints. These helpers therefore only use
those operators on a coordinate, never ``int()``, ``bool()``, comparisons, hashing or
branching on its value, and always keep the coordinate on the left of an operator. They fold
what is known statically (the layout's own integers, and coordinates that are Python ints) so
the expressions stay tidy: no ``* 1``, no ``+ 0``, no ``// 1`` or ``% 1``.
"""

from __future__ import annotations

import operator

from ..errors import LayoutError

__all__ = ["coordinate", "check_range", "is_zero", "add", "scale", "flatten", "split"]

_NOT_COORDINATES = (bool, float, complex, str, bytes, list, tuple, dict, set, type(None))
_INDEX_OPS = ("__add__", "__mul__", "__floordiv__", "__mod__")


def coordinate(value: object) -> object:
    """Check one coordinate: a Python int (numpy ints become ints) or a symbolic expression."""
    kind = type(value)
    if isinstance(value, _NOT_COORDINATES) or not all(hasattr(kind, op) for op in _INDEX_OPS):
        raise LayoutError(
            f"a layout coordinate must be an integer or an index expression, got {value!r}",
            hint="pass one integer (or index expression) per dimension",
        )
    if not isinstance(value, int) and hasattr(kind, "__index__"):
        return operator.index(value)
    return value


def is_zero(value: object) -> bool:
    """True only for a Python int equal to zero (a symbolic value is never inspected)."""
    return isinstance(value, int) and value == 0


def add(a: object, b: object) -> object:
    """``a + b``, skipping zeros and keeping a symbolic operand on the left."""
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    if isinstance(a, int) and not isinstance(b, int):
        return b + a
    return a + b


def scale(a: object, k: int) -> object:
    """``a * k`` for an integer ``k``, skipping ``* 1`` and folding ``* 0``."""
    if k == 0 or is_zero(a):
        return 0
    if k == 1:
        return a
    return a * k


def flatten(coord: tuple, shape: tuple[int, ...]) -> object:
    """The row-major linear index of ``coord`` in ``shape``."""
    flat: object = 0
    for c, d in zip(coord, shape):
        flat = add(scale(flat, d), c)
    return flat


def split(flat: object, extents: tuple[int, ...]) -> list:
    """Split ``flat`` over ``extents`` innermost-first; the outermost piece is not reduced."""
    pieces: list = [0] * len(extents)
    for i in range(len(extents) - 1, 0, -1):
        e = extents[i]
        if e == 1:
            continue  # x % 1 == 0 and x // 1 == x
        pieces[i] = flat % e
        flat = flat // e
    if extents:
        pieces[0] = flat
    return pieces


_RANGE = {  # what an out-of-range value is, and what its extent is
    "index": ("linear index {c}", "the layout has {e} elements"),
    "iters": ("value {c} for shard iter {k}", "that iter has extent {e}"),
    "shape": ("coordinate {c} of dimension {k}", "dimension {k} of shape {shape} has extent {e}"),
}


def check_range(coord: tuple, extents: tuple[int, ...], form: str) -> None:
    """A LayoutError for an integer coordinate outside ``[0, extent)``: the map is defined only
    there (past the end it would give another element's place). ``form``: a linear index
    (``"index"``), one value per shard iter (``"iters"``) or a coordinate of a shape
    (``"shape"``, ``extents``). A symbolic coordinate is assumed in range (its value is not
    known here)."""
    for k, (c, e) in enumerate(zip(coord, extents)):
        if isinstance(c, int) and not 0 <= c < e:
            what, extent_is = _RANGE[form]
            raise LayoutError(
                f"apply: {what.format(c=c, k=k)} is out of range: "
                f"{extent_is.format(k=k, e=e, shape=tuple(extents))} (0 to {e - 1})",
                hint="a point outside the tile belongs to no element: past the end the map "
                "gives another element's place (check for an off-by-one)",
            )
