"""The IR node of the float32/float16 pair conversions through element addresses (script.py
beside this): ``T.cuda.float22half2``, ``half8tofloat8`` and ``float8tohalf8``
(:class:`HalfConversion`), statements that, like an atomic, read and write memory at the
addresses of tensor elements. The catalog row names it, so the IR visitor walks it as it walks
the core's node classes (tirx/ir/visitor.py).
"""

from __future__ import annotations

from ...dtypes import StrKind
from ...errors import Span
from ...ir.aligned_access import (
    FLOAT2_BYTES,
    HALF2_BYTES,
    AccessKind,
    AlignedAccess,
    CopyOperand,
)
from ...ir.nodes import Buffer, Expr, Scope, Stmt, View, node

__all__ = ["HalfConversionKind", "HalfConversion", "FLOAT2_BYTES", "HALF2_BYTES"]


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

    def tensor_effects(self) -> tuple[tuple, tuple]:
        """``(read, written)``: the source's tensor is read, the destination's written
        (tirx/signature.py)."""
        return (self.src,), (self.dst,)

    def aligned_accesses(self) -> list[AlignedAccess]:
        """The global operands of the lowered conversion, each with the size of its accesses:
        8 bytes (``float2``) on the float32 side, 4 (``half2``) on the float16 side
        (tirx/ir/aligned_access.py)."""
        found = []
        for buf, nbytes, operand in (
            (self.dst, self.kind.dst_bytes, CopyOperand.DESTINATION),
            (self.src, self.kind.src_bytes, CopyOperand.SOURCE),
        ):
            if isinstance(buf, Buffer) and buf.scope is Scope.GLOBAL:
                kind = AccessKind.CONVERSION
                found.append(AlignedAccess(buf, nbytes, kind, str(self.kind), self.span, operand))
        return found
