"""``stmatrix`` in the simulator, written from the PTX ISA ("Warp-level matrix store instruction:
stmatrix", sm_90): ldmatrix's mapping in the other direction. Lane ``8i + r`` supplies the
address of row ``r`` of matrix ``i``; every lane's register ``i`` holds its fragment of matrix
``i`` (:mod:`tirx.sim.fragments`). The rows are written through shared memory's checks; the rows'
bytes are attributed to the lanes that supplied their addresses (so two lanes of one stmatrix
writing the same byte race)."""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.fragments import matrices_of, parse_rows, row_addresses
from ...sim.registers import RegisterVector, RegType, full_warps, record_registers

__all__ = ["parse", "compile_call", "FORMS"]

FORMS = "stmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared{,::cta}.b16"


def parse(text: str):
    """The form ``text`` names (a :class:`~tirx.sim.fragments.MatrixRows`), or None."""
    return parse_rows("stmatrix", text)


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one stmatrix for a set of threads."""
    ins = parse(text)
    if ins is None:
        raise unknown_instruction(stmt, text, FORMS)
    ops = stmt.operands
    if len(ops) != 2:
        raise compiler.error(f"stmatrix takes 2 operands, not {len(ops)}")
    addr_op, reg_op = ops
    if not isinstance(addr_op, ir.AddressOperand):
        raise compiler.error("the shared-memory operand must be an address")
    address = compiler.compile(addr_op.address)
    source = RegisterVector(m, compiler, reg_op, "r", ins.num, False, RegType.B32)
    span, used = stmt.span, ins.used

    def run(idx):
        m.span = span
        warps = full_warps(m, idx, text)
        w = warps.size
        addrs = row_addresses(address, idx, w)
        row_tids = idx.reshape(w, 32)[:, :used].ravel()
        regs = source.read(idx, w)
        rows = matrices_of(regs, ins.trans).reshape(-1, 8)
        m.shared.write_rows(addrs[:, :used].ravel(), rows, row_tids, "stmatrix")
        if m.traces is not None:
            lanes = np.arange(32) < used
            record_registers(m, stmt, [source], [None], {0: regs}, idx, warps, [1], addrs, lanes)

    return run
