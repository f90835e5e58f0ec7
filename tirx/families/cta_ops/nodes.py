"""IR nodes of the CTA operations and atomics (script.py beside this): ``T.cuda.atomic_add``
/ ``atomic_cas``, ``thread_fence``, ``syncthreads_and`` / ``_or`` and ``cta_reduce``. The
catalog row names them, so the IR visitor walks them as it walks the core's node classes
(tirx/ir/visitor.py); ``T.cuda.cvta_generic_to_shared``'s node, ``ElemSharedAddress``, is a core
expression (tirx/ir/expr_nodes.py), since wgmma's descriptors take one too.

A statement with a ``result`` writes that fresh variable (the call's value); the call itself
is the whole statement or the whole right side of an assignment.
"""

from __future__ import annotations

from ...dtypes import DType, StrKind
from ...errors import Span
from ...ir.nodes import Buffer, Expr, Stmt, Var, View, node

__all__ = [
    "AtomicKind",
    "ElemAtomic",
    "Atomic",
    "ThreadFence",
    "VoteKind",
    "VotingBarrier",
    "ReduceKind",
    "CtaReduce",
]


class AtomicKind(StrKind):
    """The read-modify-write an atomic performs (CUDA ``atomicAdd`` / ``atomicCAS``)."""

    ADD = "add"  # operands (value,): the element becomes old + value
    CAS = "cas"  # operands (compare, value): the element becomes value when old == compare


@node
class ElemAtomic(Stmt):
    """Script level: an atomic update of ``view[indices]``; ``result`` (or None when the value
    is dropped) receives the element's old value."""

    kind: AtomicKind
    view: View
    indices: tuple[Expr | int, ...]
    operands: tuple[Expr, ...]
    result: Var | None = None
    span: Span | None = None


@node
class Atomic(Stmt):
    """Lowered: an atomic update of ``((dtype*)buffer)[index]`` (global or shared)."""

    kind: AtomicKind
    buffer: Buffer
    index: Expr | int
    operands: tuple[Expr, ...]
    dtype: DType
    result: Var | None = None
    span: Span | None = None

    def tensor_effects(self) -> tuple[tuple[Buffer, ...], tuple[Buffer, ...]]:
        """``(read, written)``: an atomic reads and writes its buffer (tirx/signature.py)."""
        return (self.buffer,), (self.buffer,)


@node
class ThreadFence(Stmt):
    """``__threadfence()`` (``fence.sc.gpu``): this thread's memory accesses before it are
    seen by every thread of the GPU before its accesses after it."""

    span: Span | None = None


class VoteKind(StrKind):
    AND = "and"  # __syncthreads_and: nonzero when the predicate holds in every thread
    OR = "or"  # __syncthreads_or: nonzero when it holds in any thread


@node
class VotingBarrier(Stmt):
    """``__syncthreads_and`` / ``_or``: a CTA barrier whose ``result`` (int32) is the vote."""

    syncs_cta = True  # a barrier of every thread of the CTA, as ``ir.Barrier`` of CTA scope

    kind: VoteKind
    predicate: Expr
    result: Var | None = None
    span: Span | None = None


class ReduceKind(StrKind):
    SUM = "sum"
    MAX = "max"
    MIN = "min"


@node
class CtaReduce(Stmt):
    """``T.cuda.cta_reduce(value, op, num_warps, scratch)``: every thread of the CTA gets the
    reduction of ``value`` over all threads. Script level: ``scratch`` is a shared View;
    lowered: ``scratch`` is the shared Buffer and ``offset`` the element index of its first
    slot (``num_warps`` slots of the value's dtype). See docs/semantics.md for the steps."""

    kind: ReduceKind
    value: Expr
    num_warps: int
    scratch: View | Buffer
    offset: Expr | int = 0
    result: Var | None = None
    span: Span | None = None
