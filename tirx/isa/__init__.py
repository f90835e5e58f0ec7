"""Instructions as data: one module per instruction family, each declaring its forms (PTX
modifier slots), operands, lane maps and lowering. See :mod:`tirx.isa.core` for the
vocabulary and :mod:`tirx.isa.registry` for the list of families."""

from .core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from .registry import FAMILIES, SPECS, check_complete, lookup, supported_forms

__all__ = [
    "Contract",
    "Family",
    "FamilySpec",
    "ModifierSlot",
    "OperandSpec",
    "Role",
    "FAMILIES",
    "SPECS",
    "check_complete",
    "lookup",
    "supported_forms",
]
