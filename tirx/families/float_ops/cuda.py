"""CUDA for the register-only float instructions: one ``asm`` statement per call, ``d`` an
``"=f"`` output and each input an ``"f"`` operand (a local register or a float32 value).

Not ``asm volatile`` and no ``"memory"`` clobber: the result depends on the operands alone, so
the C compiler may schedule the instruction like arithmetic, share two identical ones, or drop
one whose result is never read. (The inputs are read before ``d`` is written, so ``d`` may be
an input's register.)"""

from __future__ import annotations

from ...ir import nodes as ir

__all__ = ["emit"]


def _input(gen, reg) -> str:
    if isinstance(reg, ir.LocalReg):
        return gen.ref(reg.buffer, reg.slot, reg.dtype)
    return gen.operand(reg.value, ir.F32)


def emit(gen, st: ir.PtxCall) -> None:
    """Emit ``st`` through ``gen`` (the codegen's line and operand printers)."""
    (d,) = st.operands[0].regs
    out = gen.ref(d.buffer, d.slot, d.dtype)
    ins = [_input(gen, op.regs[0]) for op in st.operands[1:]]
    places = ", ".join(f"%{i}" for i in range(len(ins) + 1))
    inputs = ", ".join(f'"f"({x})' for x in ins)
    gen.line(f'asm("{st.instruction} {places};" : "=f"({out}) : {inputs});')
