"""CUDA for movmatrix: its operands are single ``.b32`` registers (``d, a``), not the braced
vectors the generic operand printer writes for ldmatrix's and mma's register lists."""

from __future__ import annotations

from ...ir import nodes as ir

__all__ = ["emit"]


def emit(gen, st: ir.PtxCall) -> None:
    """Emit ``st`` through ``gen`` (the codegen's line and operand printers)."""
    (d,), (a,) = (op.regs for op in st.operands)
    out = gen.ref(d.buffer, d.slot, d.dtype)
    src = (
        gen.ref(a.buffer, a.slot, a.dtype)
        if isinstance(a, ir.LocalReg)
        else gen.operand(a.value, ir.U32)
    )
    gen.line(f'asm volatile("{st.instruction} %0, %1;" : "=r"({out}) : "r"({src}));')
