"""The layout algebra of tirx: where each element of a tile lives.

A :class:`TileLayout` maps a logical coordinate to a point on named axes (thread axes such as
``laneid`` and the memory axis ``m``); a :class:`ComposeLayout` adds an XOR swizzle on ``m``.
Build layouts with the spec syntax::

    from tirx.layout import *
    TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])
    ComposeLayout(3, 3, 3, TileLayout(S[8, 64]))

This package depends on nothing in tirx but :mod:`tirx.errors`. See ``docs/layouts.md``.
"""

from .axes import Axis, AxisKind, bx, by, bz, laneid, m, tid_in_wg, tx, warpid, wgid, wid_in_wg
from .spec import Iter, LayoutSpec, R, S
from .swizzle import ComposeLayout
from .tile import TileLayout, transpose

__all__ = [
    "TileLayout",
    "ComposeLayout",
    "S",
    "R",
    "Iter",
    "Axis",
    "AxisKind",
    "LayoutSpec",
    "transpose",
    "laneid",
    "warpid",
    "tx",
    "bx",
    "by",
    "bz",
    "wgid",
    "tid_in_wg",
    "wid_in_wg",
    "m",
]
