"""Lowering of the float32/float16 pair conversions: each element address becomes its buffer
and the element's byte offset from the buffer's start, and what is known at compile time is
checked at the user's line.

The accesses are the C's (docs/semantics.md): the float32 side is read or written as
``float2`` (8 bytes, at an address that is a multiple of 8), the float16 side as ``half2``
(4 bytes, a multiple of 4); the eight-element forms make four such accesses per side, one
after another. Shared allocations start at multiples of 16 and local arrays are declared
``__align__(16)``, so an element address is aligned when its offset is; a global tensor's data
pointer is checked by the launcher and the simulator (tirx/ir/aligned_access.py). Here:

* an offset provably not a multiple of its access size (from its linear form, seeing through
  variables assigned once) is a misaligned access on every run: an error;
* a compile-time offset whose accesses leave the buffer is an error;
* an eight-element conversion whose source and destination bytes overlap (compile-time offsets
  of one buffer) is an error: the C reads and writes them pair by pair through pointers of
  different types, which the compiler may reorder. ``float22half2`` reads its float2 before it
  writes, so it may write over its own source.

Offsets known only at run time are the simulator's to check.
"""

from __future__ import annotations

from ...errors import TirxSyntaxError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...isa.shared_rows import residue
from .nodes import FLOAT2_BYTES, HalfConversion

__all__ = ["leave_HalfConversion"]


def leave_HalfConversion(lowerer, s: HalfConversion, dst, dst_at, src, src_at):
    """``s`` with each operand as (buffer, byte offset), after the compile-time checks."""
    if isinstance(s.dst, ir.Buffer):  # lowered already
        return s
    dspan, sspan = s.operand_spans or (None, None)
    kind = s.kind
    dbytes, sbytes = kind.dst_bytes, kind.src_bytes
    sides = []
    for view, at, size, span, role in (
        (dst, dst_at, dbytes, dspan, "destination"),
        (src, src_at, sbytes, sspan, "source"),
    ):
        buf, index = lowerer.address(view, at, lowered=True)
        offset = ir.as_expr(index) * view.dtype.bytes
        _check(s, view, buf, offset, size, role, span or s.span)
        sides.append((buf, offset, size))
    (dbuf, doff, _), (sbuf, soff, _) = sides
    if kind.pairs > 1 and dbuf is sbuf:
        d0, s0 = static_value(doff), static_value(soff)
        if d0 is not None and s0 is not None:
            if d0 < s0 + kind.pairs * sbytes and s0 < d0 + kind.pairs * dbytes:
                raise TirxSyntaxError(
                    f"T.cuda.{kind}'s source (bytes {s0}..{s0 + kind.pairs * sbytes - 1}) and "
                    f"destination (bytes {d0}..{d0 + kind.pairs * dbytes - 1}) overlap in "
                    f"{dbuf.name!r}",
                    s.span,
                    hint="the C converts pair by pair through pointers the compiler takes as "
                    "distinct: convert into other storage (another tensor or a local array)",
                )
    return HalfConversion(kind, dbuf, (doff,), sbuf, (soff,), s.span, s.operand_spans)


def _check(s, view, buf: ir.Buffer, offset, size: int, role: str, span) -> None:
    kind = s.kind
    pair = "float2" if size == FLOAT2_BYTES else "half2"
    name = view.name or buf.name
    rem = residue(offset, size)
    if rem:
        elems = size // view.dtype.bytes
        which = (
            f"an element whose index (in storage) is a multiple of {elems}"
            if elems > 1
            else f"an element at a multiple of {size} bytes"
        )
        raise TirxSyntaxError(
            f"T.cuda.{kind}'s {role} is misaligned: each {pair} access is {size} bytes and must "
            f"start at a multiple of {size}, but the address of this {view.dtype} element of "
            f"{name!r} is {rem} past one",
            span,
            hint=f"pass the address of {which} (a {pair} is two "
            f"{'float32' if size == FLOAT2_BYTES else 'float16'}, {size}-byte aligned)",
        )
    start = static_value(offset)
    total = kind.pairs * size
    if start is not None and not 0 <= start <= buf.nbytes - total:
        raise TirxSyntaxError(
            f"T.cuda.{kind}'s {role} lies outside {buf.scope.value} {buf.name!r}: its "
            f"{kind.pairs} {pair} access{'es cover' if kind.pairs > 1 else ' covers'} bytes "
            f"{start}..{start + total - 1}, and it holds {buf.nbytes} bytes",
            span,
            hint=f"the address must leave {total} bytes of {buf.name!r} from the element on",
        )
