"""stmatrix: store 8x8 b16 matrices from registers to shared memory (PTX ISA 9.7.16.6.2;
"Requires sm_90 or higher")."""

from __future__ import annotations

from ...ir.nodes import ExecScope
from ...isa import matrix
from ...isa.core import Family, FamilySpec

__all__ = ["SPEC"]


def _build(text, mods):
    return matrix.build(Family.STMATRIX, text, mods, 90)


SPEC = FamilySpec(
    Family.STMATRIX, "stmatrix", matrix.SLOTS, matrix.reject, _build, matrix.lower,
    "PTX ISA 9.7.16.6.2 (stmatrix)",
    exec_scope=ExecScope.WARP,
)  # fmt: skip

SPECS = (SPEC,)
