"""movmatrix in the simulator, written from the PTX ISA ("Warp-level matrix transpose
instruction: movmatrix"): "Move a row-major matrix across all threads in a warp, reading
elements from source a, and writing the transposed elements to destination d." The source
fragment is ldmatrix's: lane ``l`` holds row ``l // 4``, elements ``2 (l % 4)`` and
``2 (l % 4) + 1``, of the 8x8 b16 matrix (:mod:`tirx.sim.fragments`); the destination holds the
transposed matrix in the same fragment. All 32 lanes of a warp execute it together."""

from __future__ import annotations

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.fragments import matrices_of, words_of
from ...sim.registers import RegisterVector, RegType, full_warps, record_registers

__all__ = ["compile_call", "FORMS", "transpose"]

FORMS = "movmatrix.sync.aligned.m8n8.trans.b16"


def transpose(words):
    """The registers ``uint32 [W, 32, 1]`` that hold the transposes of the matrices ``words``
    hold: each warp's matrix read row-major from the fragment, written back transposed."""
    matrices = matrices_of(words, trans=False)  # [W, 1, 8, 8]
    return words_of(matrices.transpose(0, 1, 3, 2), trans=False)


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one movmatrix for a set of threads."""
    if text != FORMS:
        raise unknown_instruction(stmt, text, FORMS)
    ops = stmt.operands
    if len(ops) != 2:
        raise compiler.error(f"movmatrix takes 2 operands (d, a), not {len(ops)}")
    d = RegisterVector(m, compiler, ops[0], "d", 1, True, RegType.B32)
    a = RegisterVector(m, compiler, ops[1], "a", 1, False, RegType.B32)
    span = stmt.span

    def run(idx):
        m.span = span
        warps = full_warps(m, idx, text)
        w = warps.size
        before = [d.peek(idx, w), None] if m.traces is not None else None
        words = a.read(idx, w)
        d.write(idx, transpose(words))
        if m.traces is not None:
            record_registers(m, stmt, [d, a], before, {1: words}, idx, warps, [0, 1])

    return run
