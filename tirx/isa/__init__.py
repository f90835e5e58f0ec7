"""The contract vocabulary: families, modifier slots, operand specs, lane-map builders, the
registry and the generated docs. Each family declares its forms in its own folder,
``tirx/families/<family>/isa.py`` (see :mod:`tirx.catalog`); see :mod:`tirx.isa.core` for the
vocabulary and :mod:`tirx.isa.registry` for how a text finds its family."""

from .core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from .registry import check_complete, lookup, spec_of, supported_forms

__all__ = [
    "Contract",
    "Family",
    "FamilySpec",
    "ModifierSlot",
    "OperandSpec",
    "Role",
    "check_complete",
    "lookup",
    "spec_of",
    "supported_forms",
]


def __getattr__(name):
    if name in ("FAMILIES", "SPECS"):  # every family's contract, imported on first use
        from . import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
