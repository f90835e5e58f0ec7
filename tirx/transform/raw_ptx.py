"""Lower raw ``T.ptx["..."](*operands)`` calls: scalar operands in PTX order, checked against
the instruction's contract for count, role and dtype (lanes are the caller's business here).
A family with its own raw lowering (``FamilySpec.lower_raw``: cp.async, whose operands are
addresses and immediates) gets the call after the common arch check."""

from __future__ import annotations

from ..errors import ContractError, TirxSyntaxError
from ..ir import nodes as ir
from ..isa import Role, lookup
from ..isa.registry import check_arch, spec_of

__all__ = ["lower_raw_ptx", "operand_counts"]


def operand_counts(contract) -> list[tuple]:
    """``[(spec, scalar operand count)]`` in PTX order."""
    out = []
    for spec in contract.operands:
        if spec.role is Role.SHARED:
            out.append((spec, 1))
        else:
            out.append((spec, spec.registers))
    return out


def lower_raw_ptx(op: ir.RawPtx, arch: int, address) -> ir.PtxCall:
    """``address(view, indices) -> (buffer, index)`` is the lowerer's element addressing."""
    contract = lookup(op.instruction)
    check_arch(contract, arch)
    own = spec_of(contract.family).lower_raw
    if own is not None:
        return own(contract, op, address, arch)
    counts = operand_counts(contract)
    total = sum(n for _, n in counts)
    if len(op.operands) != total:
        shape = ", ".join(f"{s.name}: {n}" for s, n in counts)
        raise ContractError(
            f'T.ptx["{contract.text}"] takes {total} scalar operands ({shape}), '
            f"got {len(op.operands)}"
        )
    spans = list(op.operand_spans) + [None] * total
    groups, k = [], 0
    for spec, n in counts:
        items = []
        for _ in range(n):
            e, span = op.operands[k], spans[k]
            k += 1
            try:
                items.append(_operand(contract, spec, e, address))
            except (ContractError, TirxSyntaxError) as err:
                raise err.with_span(span) from None
        if spec.role is Role.SHARED:
            groups.append(ir.AddressOperand(items[0]))
        else:
            groups.append(ir.RegVector(tuple(items), spec.role is Role.REG_OUT))
    return ir.PtxCall(contract.text, tuple(groups), op.span)


def _operand(contract, spec, e, address):
    where = f"{contract.text}: operand {spec.name}"
    if spec.role is Role.SHARED:
        from ..isa.raw_forms import shared_element

        e = shared_element(e)
        if not (isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.SHARED):
            raise ContractError(f"{where} must be an element of a shared tensor (its address)")
        buf, index = address(e.view, e.indices)
        return ir.SharedAddress(buf, index * e.dtype.bytes)
    is_reg = isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.LOCAL
    if is_reg and e.dtype.name == spec.dtype:
        from ..isa.raw_forms import local_register  # loads with the first such operand

        reg = local_register(e, address)
        if reg is None:
            raise ContractError(f"{where}: a register operand needs a compile-time index")
        return reg
    if spec.role is Role.REG_OUT:
        raise ContractError(
            f"{where} must be an element of a local {spec.dtype} buffer (it is written), "
            f"got {'a ' + str(e.dtype) + ' element' if is_reg else 'a value'}"
        )
    return ir.ValueReg(ir.cast(e, spec.dtype))
