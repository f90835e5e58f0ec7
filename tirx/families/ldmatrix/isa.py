"""ldmatrix: load 8x8 b16 matrices from shared memory into registers (PTX ISA 9.7.16.6.1;
``ldmatrix`` requires sm_75)."""

from __future__ import annotations

from ...ir.nodes import ExecScope
from ...isa import matrix
from ...isa.core import Family, FamilySpec

__all__ = ["SPEC"]


def _build(text, mods):
    return matrix.build(Family.LDMATRIX, text, mods, 75)


SPEC = FamilySpec(
    Family.LDMATRIX, "ldmatrix", matrix.SLOTS, matrix.reject, _build, matrix.lower,
    "PTX ISA 9.7.16.6.1 (ldmatrix)",
    exec_scope=ExecScope.WARP,
)  # fmt: skip

SPECS = (SPEC,)
