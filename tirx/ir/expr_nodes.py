"""Expression nodes of three construct families, kept beside :mod:`tirx.ir.nodes`, which
imports them, so they are node classes like its own (the visitor walks them; ``ir.MathCall``
names them): the math and bit intrinsics (``T.exp``, ``T.clz``, tirx/families/math/script.py),
the language forms ``T.reinterpret`` and ``T.address_of`` (tirx/script/forms.py, storage.py)
and the warp collectives (shuffles, votes, warp reductions; tirx/families/warp_collectives/script.py);
and ``T.cuda.cvta_generic_to_shared``'s element address (:class:`ElemSharedAddress`), which
the CTA operations lower (tirx/families/cta_ops/lower.py) and wgmma's descriptors take."""

from __future__ import annotations

from ..dtypes import DType, StrKind
from ..errors import Span
from .math_ops import MathOp
from .nodes import U32, Builtin, Expr, View, node

__all__ = [
    "MathOp", "MathCall", "Reinterpret", "AddressOf", "WarpOp", "WarpCollective", "ElemSharedAddress",
    "CLUSTER_BUILTINS", "SREG_ONLY", "UNDIMENSIONED",
]  # fmt: skip

# The thread-block cluster registers (``Special`` kinds; sm_90 on), those a kernel reads through
# ``T.cuda.mov_sreg`` only, and the registers without a dimension.
CLUSTER_BUILTINS = frozenset(b for b in Builtin if b.name.startswith("CLUSTER_"))
SREG_ONLY = frozenset({Builtin.CLUSTER_COUNT, Builtin.CLUSTER_CTA_RANK, Builtin.CLUSTER_SIZE})
UNDIMENSIONED = frozenset(
    {Builtin.LANE_ID, Builtin.WARP_ID, Builtin.CLUSTER_CTA_RANK, Builtin.CLUSTER_SIZE}
)


# ------------------------------------------------- math and bit intrinsics (T.exp, T.clz, ...)


@node
class MathCall(Expr):
    """``op(*args)``: a math or bit intrinsic on scalar values; ``dtype`` is the result's
    (float32 for 16-bit float operands, which compute as float32)."""

    op: MathOp
    args: tuple[Expr, ...]
    dtype: DType


# ------------------------------------------------------ language forms (T.reinterpret, ...)


@node
class Reinterpret(Expr):
    """``T.reinterpret(value, ty=dtype)``: the bits of ``value`` read as ``dtype``, a type of
    the same width (both levels; C: ``__float_as_uint`` and the like, simulator: a numpy view)."""

    value: Expr
    dtype: DType


@node
class AddressOf(Expr):
    """Script level: ``T.address_of(view[indices])``. Lowering makes it a
    :class:`SharedAddress` (``dtype`` uint32) or a :class:`GlobalAddress` (uint64)."""

    view: View
    indices: tuple[Expr | int, ...]
    dtype: DType


# ------------------------------------------------------------------ warp collectives
# Lanes evaluate them together; tirx/families/warp_collectives/script.py builds them, tirx/families/warp_collectives/sim.py
# defines them (docs/semantics.md, "Warp collectives").


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


# ------------------------------------------- T.cuda.cvta_generic_to_shared of a tensor element


@node
class ElemSharedAddress(Expr):
    """Script level: ``T.cuda.cvta_generic_to_shared`` of ``view[indices]``; lowered to a
    :class:`SharedAddress`."""

    view: View
    indices: tuple[Expr | int, ...]
    dtype: DType = U32
