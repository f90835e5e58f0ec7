"""IR nodes of the CTA operations and atomics (tirx/families/cta_ops/script.py): ``T.cuda.atomic_add``
/ ``atomic_cas``, ``thread_fence``, ``syncthreads_and`` / ``_or``, ``cta_reduce`` and
``cvta_generic_to_shared``. :mod:`tirx.ir.nodes` imports them, so they are node classes like
its own (the visitor walks them; ``ir.Atomic`` names them).

A statement with a ``result`` writes that fresh variable (the call's value); the call itself
is the whole statement or the whole right side of an assignment.

Beside them, the memory-to-memory conversions between float32 and float16 pairs through element
addresses (tirx/families/half_conversions/script.py): ``T.cuda.float22half2``,
``half8tofloat8`` and ``float8tohalf8`` (:class:`HalfConversion`), statements that, like an
atomic, read and write memory at the addresses of tensor elements.
"""

from __future__ import annotations

from ..dtypes import DType, StrKind
from ..errors import Span
from .nodes import U32, Buffer, Expr, Stmt, Var, View, node

__all__ = [
    "AtomicKind",
    "ElemAtomic",
    "Atomic",
    "ThreadFence",
    "VoteKind",
    "VotingBarrier",
    "ReduceKind",
    "CtaReduce",
    "ElemSharedAddress",
    "HalfConversionKind",
    "HalfConversion",
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


@node
class ElemSharedAddress(Expr):
    """Script level: ``T.cuda.cvta_generic_to_shared`` of ``view[indices]``; lowered to a
    :class:`SharedAddress`."""

    view: View
    indices: tuple[Expr | int, ...]
    dtype: DType = U32


class HalfConversionKind(StrKind):
    """Which conversion a :class:`HalfConversion` is (the ``T.cuda`` name, as the real TIRx
    spells it): float32 pairs (``float2``, 8-byte accesses) to float16 pairs (``half2``,
    4-byte accesses), or back; one pair, or four in a row."""

    FLOAT2_TO_HALF2 = "float22half2"  # one float2 read, one half2 written
    HALF8_TO_FLOAT8 = "half8tofloat8"  # four half2 read, four float2 written, pair by pair
    FLOAT8_TO_HALF8 = "float8tohalf8"  # four float2 read, four half2 written, pair by pair

    @property
    def pairs(self) -> int:
        """How many pairs it converts (accesses per side)."""
        return 1 if self is HalfConversionKind.FLOAT2_TO_HALF2 else 4

    @property
    def float_source(self) -> bool:
        """Whether the float32 side is the source (else it is the destination)."""
        return self is not HalfConversionKind.HALF8_TO_FLOAT8

    @property
    def src_bytes(self) -> int:
        """Bytes of one source access: a float2 from the float32 side, else a half2."""
        return FLOAT2_BYTES if self.float_source else HALF2_BYTES

    @property
    def dst_bytes(self) -> int:
        """Bytes of one destination access."""
        return HALF2_BYTES if self.float_source else FLOAT2_BYTES


#: bytes of one access of each side: a float2 (two float32), a half2 (two float16)
FLOAT2_BYTES, HALF2_BYTES = 8, 4


@node
class HalfConversion(Stmt):
    """One thread converts ``kind.pairs`` float32 pairs at one address into float16 pairs at
    another, or back, through memory (docs/semantics.md, "Math and bit intrinsics").

    Script level: ``dst`` and ``src`` are the Views whose elements the addresses name and
    ``dst_at`` / ``src_at`` the elements' indices. Lowered: ``dst`` and ``src`` are their
    Buffers and ``dst_at`` / ``src_at`` hold one expression each, the element's byte offset
    from the buffer's start. ``operand_spans`` are the spans of the destination and source
    arguments (for errors about one of them)."""

    kind: HalfConversionKind
    dst: View | Buffer
    dst_at: tuple[Expr | int, ...]
    src: View | Buffer
    src_at: tuple[Expr | int, ...]
    span: Span | None = None
    operand_spans: tuple[Span | None, ...] = ()
