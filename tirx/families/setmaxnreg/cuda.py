"""CUDA for setmaxnreg: the count is an immediate of the instruction's text, and the asm clobbers
memory, so that the C compiler keeps the accesses of each warpgroup role on their side of it
(the registers above a ``.dec`` count are gone afterwards; those an ``.inc`` adds hold nothing
before it). The kernel's ``__launch_bounds__(threads, 1)``, which gives ptxas the register count
at entry that setmaxnreg needs, is codegen's, from ``Function.launch_registers``."""

from __future__ import annotations

from ...ir import nodes as ir

__all__ = ["emit"]


def emit(gen, st: ir.PtxCall) -> None:
    """Emit ``st`` through ``gen`` (the codegen's line printer)."""
    (count,) = st.operands
    gen.line(f'asm volatile("{st.instruction} {int(count.value)};" ::: "memory");')
