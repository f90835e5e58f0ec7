"""Inline PTX for the mbarrier forms (``tirx/isa/mbarrier.py``), which the generic operand
printer of :mod:`tirx.backend.cuda.codegen` cannot spell: the arrive's sink result ``_``, a
wait's ``.pred`` result (turned into 1/0 in a local ``uint32`` by ``selp``), and the waiting
form, a C loop around one test (a ``do``/``while`` in C, not PTX labels, so that a kernel may
inline the wait any number of times without duplicate labels). Every one clobbers memory: a
barrier orders the accesses around it, so the C compiler must not move them across."""

from __future__ import annotations

from ...ir import nodes as ir

__all__ = ["emit"]


def emit(gen, st: ir.PtxCall) -> None:
    """Emit ``st`` through ``gen`` (the codegen's line, expression and operand printers)."""
    text = st.instruction
    done = None
    ins = []  # (constraint, C expression), in order
    for op in st.operands:
        if isinstance(op, ir.RegVector):
            (reg,) = op.regs
            done = gen.ref(reg.buffer, reg.slot, reg.dtype)
        elif isinstance(op, ir.AddressOperand):
            ins.append(("r", f"(unsigned int)({gen.e(op.address)})"))
        else:
            ins.append(("r", gen.operand(op.value, ir.U32)))
    first = 1 if text.startswith(("mbarrier.test_wait", "mbarrier.try_wait")) else 0
    args = [f"[%{first}]", *(f"%{first + i}" for i in range(1, len(ins)))] if ins else []
    in_s = ", ".join(f'"{c}"({x})' for c, x in ins)
    if first:  # a wait: its predicate, as 1 or 0
        asm = (
            f"{{ .reg .pred tirx_p; {text} tirx_p, {', '.join(args)}; selp.u32 %0, 1, 0, tirx_p; }}"
        )
        if done is not None:
            gen.line(f'asm volatile("{asm}" : "=r"({done}) : {in_s} : "memory");')
            return
        gen.line("{")
        gen.line("  unsigned int tirx_mbar_done;")
        gen.line("  do {")
        gen.line(f'    asm volatile("{asm}" : "=r"(tirx_mbar_done) : {in_s} : "memory");')
        gen.line("  } while (!tirx_mbar_done);")
        gen.line("}")
        return
    if text.startswith("mbarrier.arrive"):
        args = ["_", *args]
    body = f"{text} {', '.join(args)};" if args else f"{text};"
    gen.line(f'asm volatile("{body}" : : {in_s} : "memory");')
