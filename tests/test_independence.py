"""The simulator is an independent oracle: corrupt the compiler's lowered program and the
simulated result stops matching torch. (If the simulator read the compiler's own tables, a
consistent corruption would go unnoticed.)"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import tirx
from tirx import sim
from tirx.ir import nodes as ir


def _seed_lowered():
    from tirx.examples.warp_matmul import warp_matmul

    return tirx.compile(warp_matmul, target="sim").lowered


def _replace_calls(fn, change):
    """A copy of ``fn`` with ``change(index, call)`` applied to its PTX calls in order."""
    counter = iter(range(1000))

    def walk(s):
        if isinstance(s, ir.Seq):
            return ir.Seq(tuple(walk(x) for x in s.stmts), s.span)
        if isinstance(s, ir.For):
            return dataclasses.replace(s, body=walk(s.body))
        if isinstance(s, ir.PtxCall):
            return change(next(counter), s)
        return s

    return dataclasses.replace(fn, body=walk(fn.body))


def _run(fn):
    rng = np.random.default_rng(3)
    a = torch.from_numpy(rng.integers(-4, 5, (16, 16)).astype(np.float16))
    b = torch.from_numpy(rng.integers(-4, 5, (8, 16)).astype(np.float16))
    out = torch.zeros(16, 8)
    sim.run(fn, [a.numpy(), b.numpy(), out.numpy()])
    return out, a.float() @ b.float().T


def test_the_untouched_lowering_is_exact():
    out, ref = _run(_seed_lowered())
    assert torch.equal(out, ref)


def _swap_first_two(regs: ir.RegVector) -> ir.RegVector:
    r = list(regs.regs)
    r[0], r[1] = r[1], r[0]
    return ir.RegVector(tuple(r), regs.is_output)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_swapping_two_register_slots_is_caught(which):
    def change(i, call):
        if i != which:
            return call
        ops = list(call.operands)
        ops[0] = _swap_first_two(ops[0])  # ldmatrix results / mma D
        return ir.PtxCall(call.instruction, tuple(ops), call.span)

    out, ref = _run(_replace_calls(_seed_lowered(), change))
    assert not torch.equal(out, ref)


def test_moving_a_row_address_is_caught():
    def change(i, call):
        if i != 0:
            return call
        addr = call.operands[1].address
        moved = ir.SharedAddress(addr.buffer, addr.byte_offset + 32)  # two rows down
        return ir.PtxCall(call.instruction, (call.operands[0], ir.AddressOperand(moved)), call.span)

    out, ref = _run(_replace_calls(_seed_lowered(), change))
    assert not torch.equal(out, ref)


def test_a_wrong_lane_in_the_contract_table_is_caught_by_the_checker(monkeypatch):
    """Tables that disagree with the ISA about lanes reject the (correct) seed layouts."""
    from tirx.isa import fragments, registry

    monkeypatch.setattr(registry, "CONTRACTS", {})
    monkeypatch.setattr(fragments, "b_words", lambda c: (4 * c[0] + (c[1] + 1) % 4, c[1] // 4))
    from tirx.examples.warp_matmul import warp_matmul

    with pytest.raises(tirx.ContractError, match="operand B"):
        tirx.compile(warp_matmul, target="sim")


def test_a_wrong_register_order_in_the_contract_table_is_caught_by_the_simulator(monkeypatch):
    """Swapping B's two native registers in the table is self-consistent for the checker
    (any slot assignment is legal), so it compiles, but the emitted mma now reads B's k halves
    in the wrong order: only an independent simulator notices."""
    from tirx.isa import fragments, registry

    monkeypatch.setattr(registry, "CONTRACTS", {})
    monkeypatch.setattr(fragments, "b_words", lambda c: (4 * c[0] + c[1] % 4, 1 - c[1] // 4))
    out, ref = _run(_seed_lowered())
    assert not torch.equal(out, ref)
