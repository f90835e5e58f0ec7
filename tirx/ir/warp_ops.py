"""Facts about the warp-collective ops (:class:`~tirx.ir.nodes.WarpOp`) that every stage
reads: the ``T.cuda`` spelling of each, and the groups they fall in."""

from __future__ import annotations

from .nodes import WarpOp

__all__ = ["CUDA_NAME", "SHUFFLES", "REDUCTIONS", "REDUX", "MASKED"]

#: the ``T.cuda.<name>`` each op is written as (warp_reduce's op is its second argument)
CUDA_NAME = {
    WarpOp.SHFL_IDX: "__shfl_sync",
    WarpOp.SHFL_UP: "__shfl_up_sync",
    WarpOp.SHFL_DOWN: "__shfl_down_sync",
    WarpOp.SHFL_BFLY: "__shfl_xor_sync",
    WarpOp.BALLOT: "ballot_sync",
    WarpOp.ANY: "any_sync",
    WarpOp.ACTIVEMASK: "__activemask",
    WarpOp.ELECT: "elect_sync",
    WarpOp.SUM: "warp_sum",
    WarpOp.MAX: "warp_max",
    WarpOp.MIN: "warp_min",
    WarpOp.REDUX_ADD: "reduce_add_sync_u32",
    WarpOp.REDUX_MIN: "reduce_min_sync_u32",
}
SHUFFLES = frozenset({WarpOp.SHFL_IDX, WarpOp.SHFL_UP, WarpOp.SHFL_DOWN, WarpOp.SHFL_BFLY})
#: the butterfly reductions of ``warp_reduce`` (over the full mask)
REDUCTIONS = frozenset({WarpOp.SUM, WarpOp.MAX, WarpOp.MIN})
REDUX = frozenset({WarpOp.REDUX_ADD, WarpOp.REDUX_MIN})
#: the ops with a mask operand (all but activemask and the butterflies)
MASKED = frozenset(WarpOp) - REDUCTIONS - {WarpOp.ACTIVEMASK}

if set(CUDA_NAME) != set(WarpOp):  # a new op without its name would print as nothing
    raise RuntimeError("tirx.ir.warp_ops.CUDA_NAME must name every WarpOp")
