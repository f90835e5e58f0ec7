"""The script side of the named barriers: ``T.cuda.warpgroup_sync(i)``."""

from __future__ import annotations

import ast

from ...errors import TirxSyntaxError
from ...ir import nodes as ir

__all__ = ["parse_call", "WARPGROUP_THREADS"]

WARPGROUP_THREADS = 128


def parse_call(ev, key: str, node: ast.Call, name_hint=None) -> None:
    """``T.cuda.warpgroup_sync(i)``, as the real TIRx spells it: the four warps of the calling
    warpgroup meet at named barrier ``i`` -- ``bar.sync i, 128`` (docs/instructions.md), so
    every check and the simulator's model are that form's. Each warpgroup that meets on its own
    takes its own barrier (``T.cuda.warpgroup_sync(1 + T.cuda.warpgroup_id())``): barrier 0 is
    ``T.cuda.cta_sync()``'s."""
    span = ev.p.span(node)
    if len(node.args) != 1 or node.keywords:
        raise TirxSyntaxError(
            "T.cuda.warpgroup_sync takes one operand, the named barrier (1 .. 15)",
            span,
            hint="T.cuda.warpgroup_sync(1 + T.cuda.warpgroup_id()): one barrier per warpgroup",
        )
    (bar_node,) = node.args
    bar = ir.as_expr(ev.scalar(bar_node))
    count = ir.as_expr(WARPGROUP_THREADS)
    ev.b.emit(ir.RawPtx("bar.sync", (bar, count), span, (ev.p.span(bar_node), span)))
