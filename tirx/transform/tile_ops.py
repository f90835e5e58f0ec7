"""Lower ``T.cuda.tile.apply`` tile operations: find the instruction's contract, check what is
common to every family (scope, target arch, operand count), and hand the operands to the
family's own lowering (:mod:`tirx.isa`), which checks each against the ISA's fragments and
emits per-lane PTX calls. Errors that name an operand get that operand's span."""

from __future__ import annotations

import re

from ..errors import ContractError, TirxSyntaxError
from ..ir import nodes as ir
from ..isa import Contract, lookup
from ..isa.operands import check_register_operand
from ..isa.registry import SPECS
from .cp_async import is_cp_async, lower_cp_async_tile

__all__ = ["lower_tile_op", "check_register_operand"]


def lower_tile_op(op: ir.TileOp, arch: int) -> list[ir.Stmt]:
    if is_cp_async(op.instruction):
        return lower_cp_async_tile(op, arch)
    contract = lookup(op.instruction)
    scope = SPECS[contract.family].exec_scope
    if op.scope is not scope:
        raise TirxSyntaxError(
            f"scope={op.scope!r} is not supported for {contract.family.value}",
            hint=f'these instructions are {scope.value}-collective: use scope="{scope.value}"',
        )
    if arch < contract.min_arch:
        raise ContractError(
            f"{contract.text} needs sm_{contract.min_arch} or newer; the target is sm_{arch}",
            hint=f'compile with target="cuda -arch=sm_{max(contract.min_arch, 80)}" or newer',
        )
    if len(op.operands) != len(contract.operands):
        names = ", ".join(o.name for o in contract.operands)
        raise ContractError(
            f"{contract.text} takes {len(contract.operands)} operands ({names}), "
            f"got {len(op.operands)}"
        )
    try:
        return SPECS[contract.family].lower(contract, op)
    except ContractError as e:
        index = _operand_index(contract, e)
        if index is not None and index < len(op.operand_spans):
            raise e.with_span(op.operand_spans[index]) from None
        raise


def _operand_index(contract: Contract, e: ContractError) -> int | None:
    """Which operand an error names (its message says "operand NAME")."""
    for i, spec in enumerate(contract.operands):
        if re.search(rf"operand {spec.name}\b", e.message):
            return i
    return None
