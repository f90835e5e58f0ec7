"""``ldmatrix`` in the simulator, written from the PTX ISA ("Warp-level matrix load instruction:
ldmatrix"): for ``.x1``/``.x2``/``.x4``, lanes 0-7 / 0-15 / 0-31 supply the row addresses, lane
``8i + r`` the address of row ``r`` of matrix ``i``, each row 8 consecutive 16-bit elements (16
bytes); every lane receives its fragment of matrix ``i`` in its ``i``-th destination register
(:mod:`tirx.sim.fragments`). The rows are read through shared memory's checks (bounds,
alignment, initialization, races: ldmatrix is no fence)."""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.fragments import parse_rows, row_addresses, words_of
from ...sim.registers import RegisterVector, RegType, full_warps, record_registers

__all__ = ["parse", "compile_call", "FORMS"]

FORMS = "ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared{,::cta}.b16"


def parse(text: str):
    """The form ``text`` names (a :class:`~tirx.sim.fragments.MatrixRows`), or None."""
    return parse_rows("ldmatrix", text)


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one ldmatrix for a set of threads."""
    ins = parse(text)
    if ins is None:
        raise unknown_instruction(stmt, text, FORMS)
    ops = stmt.operands
    if len(ops) != 2:
        raise compiler.error(f"ldmatrix takes 2 operands, not {len(ops)}")
    reg_op, addr_op = ops
    if not isinstance(addr_op, ir.AddressOperand):
        raise compiler.error("the shared-memory operand must be an address")
    address = compiler.compile(addr_op.address)
    out = RegisterVector(m, compiler, reg_op, "r", ins.num, True, RegType.B32)
    span, used = stmt.span, ins.used

    def run(idx):
        m.span = span
        warps = full_warps(m, idx, text)
        w = warps.size
        before = [out.peek(idx, w)] if m.traces is not None else None
        addrs = row_addresses(address, idx, w)
        row_tids = idx.reshape(w, 32)[:, :used].ravel()
        rows = m.shared.read_rows(addrs[:, :used].ravel(), row_tids, "ldmatrix")
        out.write(idx, words_of(rows.reshape(w, ins.num, 8, 8), ins.trans))
        if m.traces is not None:
            lanes = np.arange(32) < used
            record_registers(m, stmt, [out], before, {}, idx, warps, [0], addrs, lanes)

    return run
