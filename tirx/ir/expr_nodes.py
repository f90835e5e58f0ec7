"""Expression nodes kept beside :mod:`tirx.ir.nodes`, which imports them, so they are node
classes like its own (the visitor walks them; ``ir.AddressOf`` names them): the language forms
``T.reinterpret`` and ``T.address_of`` (tirx/script/forms.py, storage.py), and
``T.cuda.cvta_generic_to_shared``'s element address (:class:`ElemSharedAddress`), which the CTA
operations lower (tirx/families/cta_ops/lower.py) and wgmma's descriptors take. The math
intrinsics' and the warp collectives' nodes are their families' (tirx/families/math/nodes.py,
tirx/families/warp_collectives/nodes.py)."""

from __future__ import annotations

from ..dtypes import DType
from .nodes import U32, Builtin, Expr, View, node

__all__ = [
    "Reinterpret", "AddressOf", "ElemSharedAddress",
    "CLUSTER_BUILTINS", "SREG_ONLY", "UNDIMENSIONED",
]  # fmt: skip

# The thread-block cluster registers (``Special`` kinds; sm_90 on), those a kernel reads through
# ``T.cuda.mov_sreg`` only, and the registers without a dimension.
CLUSTER_BUILTINS = frozenset(b for b in Builtin if b.name.startswith("CLUSTER_"))
SREG_ONLY = frozenset({Builtin.CLUSTER_COUNT, Builtin.CLUSTER_CTA_RANK, Builtin.CLUSTER_SIZE})
UNDIMENSIONED = frozenset(
    {Builtin.LANE_ID, Builtin.WARP_ID, Builtin.CLUSTER_CTA_RANK, Builtin.CLUSTER_SIZE}
)


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


# ------------------------------------------- T.cuda.cvta_generic_to_shared of a tensor element


@node
class ElemSharedAddress(Expr):
    """Script level: ``T.cuda.cvta_generic_to_shared`` of ``view[indices]``; lowered to a
    :class:`SharedAddress`."""

    view: View
    indices: tuple[Expr | int, ...]
    dtype: DType = U32
