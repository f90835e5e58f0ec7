"""What the raw forms of several families share: calls without operands or with a wait count,
the contract of a group instruction, operands that must not read memory, the register a local
element names, byte offsets of copies' repeats, and the address of an mbarrier operand."""

from __future__ import annotations

import itertools

from ..errors import ContractError
from ..ir import nodes as ir
from ..ir.simplify import static_value
from ..ir.simplify_index import simplify_index
from .core import Contract, Family, OperandSpec, Role
from .shared_rows import element_offset, residue

__all__ = [
    "reads_memory", "local_register", "byte_offset", "repeat_offsets", "group_contract", "no_operands",
    "no_tile_form", "wait_count", "barrier_address", "BARRIER_BYTES", "cluster_address",
    "shared_element",
]  # fmt: skip

BARRIER_BYTES = 8  # an mbarrier object is 8 bytes, 8-byte aligned (PTX ISA, mbarrier)


def shared_element(e):
    """``e`` as the element an address operand names: ``T.address_of(t[i])`` of a shared
    tensor (the real TIRx's spelling of a barrier or buffer operand) is the element ``t[i]``,
    as tirx's own spelling passes it; anything else as it is."""
    if isinstance(e, ir.AddressOf) and e.view.buffer.scope is ir.Scope.SHARED:
        return ir.ElemLoad(e.view, e.indices, e.view.dtype)
    return e


def local_register(e: ir.ElemLoad, address) -> ir.LocalReg | None:
    """The register that ``e``, an element of a local array, names; None when its index is not
    known at compile time (the family says why that is refused)."""
    buf, index = address(e.view, e.indices)
    slot = static_value(index)
    return None if slot is None else ir.LocalReg(buf, slot, e.dtype)


def reads_memory(e) -> bool:
    """Whether a script-level value reads a tensor (such values are not lowered here)."""
    if isinstance(e, (ir.ElemLoad, ir.Load)):
        return True
    if isinstance(e, (ir.BinOp, ir.Cmp, ir.Logic)):
        return reads_memory(e.a) or reads_memory(e.b)
    if isinstance(e, (ir.Cast, ir.Not)):
        return reads_memory(e.value if isinstance(e, ir.Cast) else e.a)
    if isinstance(e, ir.Select):
        return any(reads_memory(x) for x in (e.cond, e.a, e.b))
    return False


def byte_offset(offset, dtype):
    """The byte offset of an element offset in ``dtype`` elements (simplified)."""
    return simplify_index(offset * dtype.bytes)


def repeat_offsets(text: str, dst: ir.View, src: ir.View, unit: str):
    """Per repeat of a copy's tile form (every axis before the last), the byte offsets of its
    first element in ``dst`` and in ``src``; the two views must have the same repeat axes."""
    if dst.shape[:-1] != src.shape[:-1]:
        raise ContractError(
            f"{text}: operands dst and src have different repeat shapes "
            f"{dst.shape[:-1]} vs {src.shape[:-1]}",
            hint=f"the axes before {unit} are repeats, one copy each, and must match",
        )
    for rep in itertools.product(*(range(e) for e in dst.shape[:-1])):
        yield (
            byte_offset(element_offset(dst, (*rep, 0)), dst.dtype),
            byte_offset(element_offset(src, (*rep, 0)), src.dtype),
        )


def group_contract(
    text: str, family: Family, mods: dict, waits: bool, groups: str, min_arch: int = 80
) -> Contract:
    """The contract of a group call: a wait has one immediate operand, the number of the
    thread's newest ``groups`` that may stay pending; a commit (or wait_all) has none."""
    n = OperandSpec(
        "n", Role.IMMEDIATE, "uint32", (), 0,
        about=f"how many of the thread's newest {groups} may stay pending",
    )  # fmt: skip
    return Contract(text, family, (n,) if waits else (), min_arch, tuple(mods.items()))


def no_operands(text: str, op: ir.RawPtx) -> ir.PtxCall:
    """``T.ptx[text]()``: a call without operands (a commit, wait_all, a fence); an operand
    given is a ContractError at it."""
    if op.operands:
        raise ContractError(
            f'T.ptx["{text}"]() takes no operands, got {len(op.operands)}'
        ).with_span(op.operand_spans[0] if op.operand_spans else None)
    return ir.PtxCall(text, (), op.span)


def no_tile_form(contract: Contract, args: str = "") -> ContractError:
    """The error for a tile operation of a form that is only called directly, the hint showing
    the call with ``args``."""
    return ContractError(
        f"{contract.text} has no tile form",
        hint=f'call it directly: T.ptx["{contract.text}"]({args})',
    )


def wait_count(text: str, op: ir.RawPtx, groups: str, example: str) -> ir.PtxCall:
    """``T.ptx[text](n)``: a wait whose one operand, the number of the thread's newest
    ``groups`` that may stay pending, is an immediate of the instruction (PTX gives it no
    further domain than a non-negative integer constant)."""
    if len(op.operands) != 1:
        raise ContractError(
            f'T.ptx["{text}"](n) takes one operand, the number of {groups} that may stay '
            f"pending, got {len(op.operands)}"
        )
    value = op.operands[0]
    span = op.operand_spans[0] if op.operand_spans else None
    n = static_value(value)
    if n is None or (isinstance(value, ir.Expr) and value.dtype.kind == "float"):
        raise ContractError(
            f"{text}: n must be a compile-time int",
            hint=f"the number of pending groups is an immediate in the instruction, e.g. {example}",
        ).with_span(span)
    if not 0 <= n < 2**31:
        raise ContractError(
            f"{text}: n must be a non-negative int, got {n}",
            hint=f"0 waits for every one of the thread's {groups}",
        ).with_span(span)
    return ir.PtxCall(text, (ir.Immediate(n),), op.span)


def barrier_address(text: str, e, span, address) -> ir.AddressOperand:
    """The shared address of the barrier element ``e`` (a ContractError at ``span`` when it is
    not an 8-byte element of a shared tensor, 8-byte aligned)."""
    e = shared_element(e)
    if not (isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.SHARED):
        got = f"{e.view.buffer.scope.value} tensor" if isinstance(e, ir.ElemLoad) else "value"
        raise ContractError(
            f"{text}: the barrier must be an element of a shared tensor (its address), got a {got}",
            hint='allocate the barriers in shared memory: bars = T.alloc_shared((n,), "uint64"); '
            "pass bars[i]",
        ).with_span(span)
    if e.dtype.bytes != BARRIER_BYTES:
        raise ContractError(
            f"{text}: the barrier must be an 8-byte element, got {e.dtype}",
            hint='an mbarrier is one uint64: T.alloc_shared((n,), "uint64")',
        ).with_span(span)
    buf, index = address(e.view, e.indices)
    nbytes = byte_offset(index, e.dtype)
    rem = residue(nbytes, BARRIER_BYTES)
    if buf.align < BARRIER_BYTES or rem:
        where = f"starts {rem} bytes past a multiple of 8" if rem else f"has align={buf.align}"
        raise ContractError(
            f"{text}: the barrier {buf.name!r} {where}; an mbarrier must be 8-byte aligned",
            hint="index a uint64 shared tensor allocated with align >= 8 (the default is 16)",
        ).with_span(span)
    return ir.AddressOperand(ir.SharedAddress(buf, nbytes))


def cluster_address(text: str, e, span, address, what: str = "the address"):
    """A shared::cluster address operand (``mapa``, ``ld``/``st.shared::cluster``, a peer's
    mbarrier): an element of a shared tensor stands for its address in the executing block (as
    a barrier operand does), any other integer value is the address itself (a ``mapa`` result,
    a local register holding one) -- ``AddressOperand(SharedAddress)`` or ``ScalarOperand(u32)``
    (a ContractError at ``span`` for a float or an element of a global tensor)."""
    if isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.SHARED:
        buf, index = address(e.view, e.indices)
        return ir.AddressOperand(ir.SharedAddress(buf, byte_offset(index, e.dtype)))
    if isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.GLOBAL:
        raise ContractError(
            f"{text}: {what} is a shared::cluster address, not an element of the global tensor "
            f"{e.view.buffer.name!r}",
            hint="pass an element of a shared tensor (its address in this block), or the "
            'address T.ptx["mapa.shared::cluster.u32"] wrote for a peer block',
        ).with_span(span)
    if (
        not isinstance(e, (int, ir.Expr))
        or isinstance(e, bool)
        or (isinstance(e, ir.Expr) and e.dtype.kind not in ("int", "uint"))
    ):
        raise ContractError(
            f"{text}: {what} must be a 32-bit shared::cluster address (an integer), got {e!r}",
            hint='e.g. the value T.ptx["mapa.shared::cluster.u32"](peer[0], s[0], rank) wrote '
            "to peer[0], or T.cuda.cvta_generic_to_shared(s.ptr_to([i]))",
        ).with_span(span)
    return ir.ScalarOperand(ir.cast(ir.as_expr(e), ir.U32))
