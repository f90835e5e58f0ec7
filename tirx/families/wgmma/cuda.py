"""Inline PTX for the wgmma forms (docs/instructions.md), which the generic operand printer of
:mod:`tirx.backend.cuda.codegen` cannot spell: mma_async's accumulator is read and written in
place (``"+f"`` for .f32 registers, ``"+r"`` for .s32 and .f16x2 ones), A is a 64-bit
descriptor (``"l"``) or four .b32 registers (``"r"``), and scale-d is a predicate, made from
the integer operand inside the asm's own braces (``setp.ne.b32``) so that the asm may appear
any number of times. fence, commit_group and wait_group clobber memory: they order the tensor
core's shared-memory reads and register writes against the accesses around them, which the C
compiler must not move across."""

from __future__ import annotations

from ...ir import nodes as ir

__all__ = ["emit"]


def emit(gen, st: ir.PtxCall) -> None:
    """Emit ``st`` through ``gen`` (the codegen's line, expression and operand printers)."""
    text = st.instruction
    if not text.startswith("wgmma.mma_async"):
        imm = [str(op.value) for op in st.operands]  # wait_group's N
        body = f"{text} {', '.join(imm)};" if imm else f"{text};"
        gen.line(f'asm volatile("{body}" ::: "memory");')
        return
    d, a, b_desc, scale_d, *imms = st.operands
    con = "+f" if d.regs[0].dtype.name == "float32" else "+r"
    outs = [f'"{con}"({gen.ref(r.buffer, r.slot, r.dtype)})' for r in d.regs]
    n = len(outs)
    ins = []
    if isinstance(a, ir.RegVector):  # rs: A's four .b32 registers
        ins += [f'"r"({gen.ref(r.buffer, r.slot, ir.U32)})' for r in a.regs]
        a_text = "{" + ", ".join(f"%{n + i}" for i in range(len(a.regs))) + "}"
    else:
        ins.append(f'"l"({gen.operand(a.value, ir.U64)})')
        a_text = f"%{n}"
    ins += [
        f'"l"({gen.operand(b_desc.value, ir.U64)})',
        f'"r"({gen.operand(scale_d.value, ir.I32)})',
    ]
    b_at, p_at = n + len(ins) - 2, n + len(ins) - 1
    regs = ", ".join(f"%{i}" for i in range(n))
    tail = "".join(f", {op.value}" for op in imms)
    asm = (
        f"{{ .reg .pred tirx_p; setp.ne.b32 tirx_p, %{p_at}, 0; "
        f"{text} {{{regs}}}, {a_text}, %{b_at}, tirx_p{tail}; }}"
    )
    gen.line(f'asm volatile("{asm}"')
    for i in range(0, n, 8):
        sep = ":" if i == 0 else " "
        gen.line(f"    {sep} {', '.join(outs[i : i + 8])}{',' if i + 8 < n else ''}")
    for i in range(0, len(ins), 4):
        sep = ":" if i == 0 else " "
        gen.line(f"    {sep} {', '.join(ins[i : i + 4])}{',' if i + 4 < len(ins) else ''}")
    gen.lines[-1] += ");"
