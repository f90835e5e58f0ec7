"""Inline PTX for the wgmma forms (``tirx/isa/wgmma.py``), which the generic operand printer of
:mod:`tirx.backend.cuda.codegen` cannot spell: mma_async's accumulator is read and written in
place (N/2 ``"+f"`` operands), its descriptors are 64-bit (``"l"``) and its scale-d is a
predicate, made from the integer operand inside the asm's own braces (``setp.ne.b32``) so
that the asm may appear any number of times. fence, commit_group and wait_group clobber
memory: they order the tensor core's shared-memory reads and register writes against the
accesses around them, which the C compiler must not move across."""

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
    d, a_desc, b_desc, scale_d, *imms = st.operands
    outs = [f'"+f"({gen.ref(r.buffer, r.slot, r.dtype)})' for r in d.regs]
    n = len(outs)
    ins = [
        f'"l"({gen.operand(a_desc.value, ir.U64)})',
        f'"l"({gen.operand(b_desc.value, ir.U64)})',
        f'"r"({gen.operand(scale_d.value, ir.I32)})',
    ]
    regs = ", ".join(f"%{i}" for i in range(n))
    tail = ", ".join(str(op.value) for op in imms)
    asm = (
        f"{{ .reg .pred tirx_p; setp.ne.b32 tirx_p, %{n + 2}, 0; "
        f"{text} {{{regs}}}, %{n}, %{n + 1}, tirx_p, {tail}; }}"
    )
    gen.line(f'asm volatile("{asm}"')
    for i in range(0, n, 8):
        sep = ":" if i == 0 else " "
        gen.line(f"    {sep} {', '.join(outs[i : i + 8])}{',' if i + 8 < n else ''}")
    gen.line(f"    : {', '.join(ins)});")
