"""``ldmatrix`` in the simulator, written from the PTX ISA ("Warp-level matrix load instruction:
ldmatrix"): for ``.x1``/``.x2``/``.x4``, lanes 0-7 / 0-15 / 0-31 supply the row addresses, lane
``8i + r`` the address of row ``r`` of matrix ``i``, each row 8 consecutive 16-bit elements (16
bytes); every lane receives its fragment of matrix ``i`` in its ``i``-th destination register
(:mod:`tirx.sim.fragments`). The rows are read through shared memory's checks (bounds,
alignment, initialization, races: ldmatrix is no fence)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.fragments import words_of
from ...sim.memory import as_index
from ...sim.registers import RegisterVector, RegType, full_warps, record_registers

__all__ = ["LdMatrix", "parse", "compile_call", "FORMS"]

FORMS = "ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared{,::cta}.b16"
_TEXT = re.compile(r"ldmatrix\.sync\.aligned\.m8n8\.x(1|2|4)(\.trans)?\.shared(::cta)?\.b16")


@dataclass(frozen=True)
class LdMatrix:
    """``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``: 8x8 matrices of b16."""

    num: int
    trans: bool


def parse(text: str) -> LdMatrix | None:
    m = _TEXT.fullmatch(text.strip())
    return LdMatrix(int(m.group(1)), m.group(2) is not None) if m else None


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
    span, used = stmt.span, 8 * ins.num

    def run(idx):
        m.span = span
        warps = full_warps(m, idx, text)
        w = warps.size
        before = [out.peek(idx, w)] if m.traces is not None else None
        addrs = np.broadcast_to(as_index(address(idx), idx.size), idx.size).reshape(w, 32)
        addrs = addrs.astype(np.uint32).astype(np.int64)
        row_tids = idx.reshape(w, 32)[:, :used].ravel()
        rows = m.shared.read_rows(addrs[:, :used].ravel(), row_tids, "ldmatrix")
        out.write(idx, words_of(rows.reshape(w, ins.num, 8, 8), ins.trans))
        if m.traces is not None:
            lanes = np.arange(32) < used
            record_registers(m, stmt, [out], before, {}, idx, warps, [0], addrs, lanes)

    return run
