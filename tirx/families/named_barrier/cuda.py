"""Inline PTX for the named barriers: the barrier and the count as ``r`` operands (ptxas takes a
register or an immediate for either), and a memory clobber -- the barrier orders memory, so
the C compiler moves no access across it."""

from __future__ import annotations

from ...ir import nodes as ir

__all__ = ["emit"]


def emit(gen, st: ir.PtxCall) -> None:
    """Emit ``st`` through ``gen`` (the codegen's line and operand printers)."""
    values = [gen.operand(op.value, ir.U32) for op in st.operands]
    places = ", ".join(f"%{i}" for i in range(len(values)))
    inputs = ", ".join(f'"r"({v})' for v in values)
    gen.line(f'asm volatile("{st.instruction} {places};" : : {inputs} : "memory");')
