"""The script side of the cluster family: ``T.cuda.cluster_sync()``."""

from __future__ import annotations

import ast

from ...errors import TirxSyntaxError
from ...ir import nodes as ir

__all__ = ["parse_call", "ARRIVE", "WAIT"]

ARRIVE = "barrier.cluster.arrive.aligned"
WAIT = "barrier.cluster.wait.aligned"


def parse_call(ev, key: str, node: ast.Call, name_hint=None) -> None:
    """``T.cuda.cluster_sync()``, as the real TIRx spells it: every thread of every block of the
    cluster arrives at the cluster barrier and waits for the others -- ``barrier.cluster.
    arrive.aligned`` then ``barrier.cluster.wait.aligned`` (release and acquire, the defaults),
    so every check and the simulator's model are those two forms'."""
    span = ev.p.span(node)
    if node.args or node.keywords:
        raise TirxSyntaxError(
            "T.cuda.cluster_sync() takes no arguments",
            span,
            hint='write T.cuda.cluster_sync(), or the two halves T.ptx["barrier.cluster.arrive"]() '
            'and T.ptx["barrier.cluster.wait"]() to do work in between',
        )
    ev.b.emit(ir.RawPtx(ARRIVE, (), span, ()))
    ev.b.emit(ir.RawPtx(WAIT, (), span, ()))
