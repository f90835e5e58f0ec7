"""Address arithmetic of views: the memory offset of a coordinate, as tidy expressions.

``layout.apply(*coord, shape=...)`` flattens the coordinate and splits it again, which is
right but reads badly once the coordinate is symbolic. Here each dimension is mapped through
its own layout iters (``layout.group(shape)``), so a row-major ``(16, 8)`` view gives
``8 * i + j`` rather than ``((i * 8 + j) // 8 % 16) * 8 + ...``. Both are checked equal by tests.
"""

from __future__ import annotations

from ..errors import LayoutError
from .simplify import static_value

__all__ = ["dim_offsets", "view_offset"]


def dim_offsets(iters, c) -> dict:
    """Per-axis contribution of coordinate ``c`` of one dimension made of ``iters``."""
    out: dict = {}
    inner = 1
    for k, it in enumerate(reversed(iters)):
        piece = c if inner == 1 else c // inner
        if k != len(iters) - 1:
            piece = piece % it.extent
        term = piece if it.stride == 1 else piece * it.stride
        name = it.axis.name
        out[name] = term if name not in out else out[name] + term
        inner *= it.extent
    return out


def view_offset(layout, shape, coords) -> dict:
    """``{axis: value}`` of ``coords`` under ``layout`` over ``shape`` (offsets included).

    Swizzled layouts go through their own ``apply`` (the swizzle is not per-dimension).
    """
    from ..layout import TileLayout

    if not isinstance(layout, TileLayout):
        return dict(layout.apply(*coords, shape=tuple(shape)))
    if len(coords) != len(shape):
        raise LayoutError(f"{len(coords)} coordinates for a shape of rank {len(shape)}")
    grouped, seps = layout.group(tuple(shape))
    shard = list(grouped.shard)
    total: dict = {}
    for d, c in enumerate(coords):
        for name, term in dim_offsets(shard[seps[d] : seps[d + 1]], c).items():
            total[name] = term if name not in total else total[name] + term
    for name, value in dict(grouped.offset).items():
        if static_value(value) != 0:
            total[name] = value if name not in total else total[name] + value
    return total
