"""``PtxCall`` statements: each is executed by the simulator module of its instruction's family
(``tirx/families/<family>/sim.py``'s ``compile_call(machine, compiler, call, text)``), found
through :mod:`tirx.catalog` and imported at the family's first statement."""

from __future__ import annotations

from .. import catalog
from ..errors import SimulationError
from ..ir import nodes as ir

__all__ = ["compile_ptx", "unknown_instruction"]


def compile_ptx(m, compiler, stmt: ir.PtxCall):
    """The closure that executes ``stmt`` for a set of threads."""
    text = stmt.instruction.strip()
    row = catalog.row_of_ptx(text)
    compile_call = catalog.rule(row, "sim", "compile_call") if row is not None else None
    if compile_call is None:
        families = ", ".join(p for r in catalog.ROWS if "sim" in r.stages for p in r.ptx)
        raise SimulationError(
            f"unknown PTX instruction {text!r}",
            stmt.span,
            f"the simulator runs the instructions of the families {families} "
            "(every form: docs/instructions.md)",
        )
    return compile_call(m, compiler, stmt, text)


def unknown_instruction(stmt: ir.PtxCall, text: str, forms: str) -> SimulationError:
    """The error for a text of a family that is not one of the forms its simulator module runs
    (``forms``, spelled as the PTX ISA spells them)."""
    return SimulationError(
        f"unknown PTX instruction {text!r}", stmt.span, f"the simulator implements {forms}"
    )
