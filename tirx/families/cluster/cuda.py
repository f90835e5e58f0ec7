"""Inline PTX for the cluster forms: the barrier (no operands; it orders memory, so the C
compiler must move no access across it), ``mapa`` (a pure address computation) and the
distributed shared-memory ``ld``/``st`` (the address in brackets; they clobber memory: a peer's
bytes change behind the C compiler's back)."""

from __future__ import annotations

from ...backend.cuda.codegen import to_bits16
from ...ir import nodes as ir

__all__ = ["emit"]

_CONSTRAINT = {16: "h", 32: "r", 64: "l"}


def _constraint(dtype) -> str:
    if dtype.name == "float32":
        return "f"
    if dtype.name == "float64":
        return "d"
    return _CONSTRAINT[dtype.bits]


def _address(gen, op) -> str:
    if isinstance(op, ir.AddressOperand):
        return f"(unsigned int)({gen.e(op.address)})"
    return gen.operand(op.value, ir.U32)


def emit(gen, st: ir.PtxCall) -> None:
    """Emit ``st`` through ``gen`` (the codegen's line, expression and operand printers)."""
    text, ops = st.instruction, st.operands
    if text.startswith("barrier.cluster"):
        gen.line(f'asm volatile("{text};" : : : "memory");')
        return
    if text.startswith("mapa"):
        (d,) = ops[0].regs
        out = gen.ref(d.buffer, d.slot, d.dtype)
        a, b = _address(gen, ops[1]), gen.operand(ops[2].value, ir.U32)
        gen.line(f'asm("{text} %0, %1, %2;" : "=r"({out}) : "r"({a}), "r"({b}));')
        return
    if text.startswith("ld."):
        (d,) = ops[0].regs
        out = gen.ref(d.buffer, d.slot, d.dtype)
        a = _address(gen, ops[1])
        con = _constraint(d.dtype)
        gen.line(f'asm volatile("{text} %0, [%1];" : "={con}"({out}) : "r"({a}) : "memory");')
        return
    value = ops[1].value  # st
    a = _address(gen, ops[0])
    con = _constraint(value.dtype)
    if value.dtype.name in ("float16", "bfloat16"):  # held as float in C: store its bits
        v = to_bits16(gen.e(value), value.dtype, value.dtype)
    else:
        v = gen.operand(value, value.dtype)
    gen.line(f'asm volatile("{text} [%0], %1;" : : "r"({a}), "{con}"({v}) : "memory");')
