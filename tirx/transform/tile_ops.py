"""Lower ``T.cuda.tile.apply`` tile operations: find the instruction's contract, check what is
common to every family (scope, target arch, operand count), and hand the operands to the
family's own lowering (:mod:`tirx.isa`), which checks each against the ISA's fragments (or,
for cp.async, its memory chunks) and emits PTX calls. Errors that name an operand get that
operand's span."""

from __future__ import annotations

import re

from ..errors import ContractError, TirxSyntaxError, layout_definition
from ..ir import nodes as ir
from ..isa import lookup
from ..isa.operands import check_register_operand
from ..isa.registry import check_arch, spec_of
from ..layout.origin import built_at

__all__ = ["lower_tile_op", "check_register_operand"]


def lower_tile_op(op: ir.TileOp, arch: int) -> list[ir.Stmt]:
    contract = lookup(op.instruction)
    spec = spec_of(contract.family)
    scope = spec.exec_scope
    if op.scope != scope:
        raise TirxSyntaxError(
            f"scope={op.scope!r} is not supported for {contract.family.value}",
            hint=_scope_hint(scope),
        )
    check_arch(contract, arch)
    operands = contract.tile_operands
    if len(op.operands) != len(operands):
        names = ", ".join(o.name for o in operands)
        raise ContractError(
            f"{contract.text} takes {len(operands)} operands ({names}), got {len(op.operands)}"
        )
    try:
        return spec.lower(contract, op)
    except ContractError as e:
        index = _operand_index(operands, e)
        if index is not None and index < len(op.operand_spans):
            span = op.operand_spans[index]
            if not getattr(e, "about_layout", True):
                raise e.with_span(span) from None
            built = built_at(getattr(op.operands[index], "layout", None))
            raise e.with_span(span).with_definition(layout_definition(span, built=built)) from None
        raise


def _scope_hint(scope: ir.ExecScope) -> str:
    if scope is ir.ExecScope.THREAD:
        return 'each thread issues its own instructions: use scope="thread"'
    return f'these instructions are {scope.value}-collective: use scope="{scope.value}"'


def _operand_index(operands, e: ContractError) -> int | None:
    """Which operand an error names (its message says "operand NAME")."""
    for i, spec in enumerate(operands):
        if re.search(rf"operand {spec.name}\b", e.message):
            return i
    return None
