"""The IR node of the warp collectives (script.py beside this: shuffles, votes, ``elect_sync``,
warp reductions): :class:`WarpCollective`, an expression the lanes of a warp evaluate together
(sim.py defines them; docs/semantics.md, "Warp collectives"), its ops (:class:`WarpOp`) and the
facts about them every stage reads: the ``T.cuda`` spelling of each, and the groups they fall
in. The catalog row names the node, so the IR visitor walks it as it walks the core's node
classes (tirx/ir/visitor.py)."""

from __future__ import annotations

from ...dtypes import DType, StrKind
from ...errors import Span
from ...ir.nodes import Expr, node

__all__ = ["WarpOp", "WarpCollective", "CUDA_NAME", "SHUFFLES", "REDUCTIONS", "REDUX", "MASKED"]


class WarpOp(StrKind):  # by the PTX instruction each T.cuda spelling is
    SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_BFLY = "shfl.idx", "shfl.up", "shfl.down", "shfl.bfly"
    BALLOT, ANY, ACTIVEMASK, ELECT = "vote.ballot", "vote.any", "activemask", "elect"
    SUM, MAX, MIN = "sum", "max", "min"  # warp_reduce: a butterfly of xor shuffles
    REDUX_ADD, REDUX_MIN = "redux.add", "redux.min"  # redux.sync.{add,min}.u32


@node
class WarpCollective(Expr):
    """Operands by op, None where it has none: shuffles all four (``lane``: source lane,
    delta or lane mask); ballot/any mask and predicate (``value``); elect mask; warp_reduce
    value and width (a Const); redux mask and value."""

    op: WarpOp
    mask: Expr | None
    value: Expr | None
    lane: Expr | None
    width: Expr | None
    dtype: DType
    span: Span | None = None


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
    raise RuntimeError("CUDA_NAME must name every WarpOp")
