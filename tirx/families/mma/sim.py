"""``mma.sync`` in the simulator: the operands gathered for whole warps and the product computed
as the PTX ISA defines it (:mod:`tirx.families.mma.sim_math`, written from the ISA's fragment
descriptions). Lowered operands, PTX order: ``D`` (output registers), ``A``, ``B``, ``C`` (input
registers, or values for C), with the register counts of :meth:`Mma.regs`."""

from __future__ import annotations

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.registers import RegisterVector, RegType, full_warps, record_registers
from .sim_math import Element, Mma, mma_compute, parse_mma

__all__ = ["compile_call", "FORMS"]

FORMS = (
    "mma.sync.aligned.m16n8k{8,16}.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (same A and B type), "
    "mma.sync.aligned.m16n8k{8,16}.row.col.f16.f16.f16.f16, "
    "mma.sync.aligned.m16n8k{4,8}.row.col.f32.tf32.tf32.f32, "
    "mma.sync.aligned.m16n8k{16,32}.row.col[.satfinite].s32.{s8,u8}.{s8,u8}.s32"
)
_ACCUMULATOR = {Element.F32: RegType.F32, Element.S32: RegType.S32, Element.F16: RegType.B32}


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one mma for a set of threads."""
    ins: Mma | None = parse_mma(text)
    if ins is None:
        raise unknown_instruction(stmt, text, FORMS)
    ops = stmt.operands
    if len(ops) != 4:
        raise compiler.error(f"mma takes 4 operands (D, A, B, C), not {len(ops)}")
    acc = _ACCUMULATOR[ins.c]
    vectors = [
        RegisterVector(m, compiler, ops[0], "d", ins.regs("d"), True, acc),
        RegisterVector(m, compiler, ops[1], "a", ins.a_regs, False, RegType.B32),
        RegisterVector(m, compiler, ops[2], "b", ins.b_regs, False, RegType.B32),
        RegisterVector(m, compiler, ops[3], "c", ins.regs("c"), False, acc),
    ]
    d, a, b, c = vectors
    span = stmt.span

    def run(idx):
        m.span = span
        warps = full_warps(m, idx, text)
        w = warps.size
        before = [d.peek(idx, w), None, None, None] if m.traces is not None else None
        a_bits, b_bits, c_bits = a.read(idx, w), b.read(idx, w), c.read(idx, w)
        d.write(idx, mma_compute(ins, a_bits, b_bits, c_bits))
        if m.traces is not None:
            inputs = {1: a_bits, 2: b_bits, 3: c_bits}
            record_registers(m, stmt, vectors, before, inputs, idx, warps, [0, 1, 2, 3])

    return run
