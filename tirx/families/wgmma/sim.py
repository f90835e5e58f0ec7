"""``wgmma`` statements in the simulator: decode each (the forms, descriptors and fragments
read from the PTX ISA are in :mod:`tirx.families.wgmma.sim_math`) and drive the asynchronous
model of :mod:`tirx.families.wgmma.sim_async` (groups, registers and shared bytes in flight,
fences), checking that whole warpgroups execute each statement with uniform operands.
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.faults import Fault
from .sim_math import WARPGROUP, MmaAsync, decode_descriptor, parse_mma_async

__all__ = ["compile_call", "warpgroups", "IMPLEMENTED"]

FENCE = "wgmma.fence.sync.aligned"
COMMIT = "wgmma.commit_group.sync.aligned"
WAIT = "wgmma.wait_group.sync.aligned"
IMPLEMENTED = (
    "wgmma.mma_async.sync.aligned.m64n{8,16,...,256}k16.f32.{f16,bf16}.{f16,bf16} (same A and B "
    f"type, K-major A and B from shared-memory descriptors), {FENCE}, {COMMIT}, {WAIT}"
)


# ----------------------------------------------------------------------- statements


def warpgroups(m, idx: np.ndarray, text: str) -> np.ndarray:
    """The warpgroups executing (all 128 threads each), or a fault naming a missing thread."""
    groups = idx >> 7
    if idx.size % WARPGROUP == 0 and idx.size:
        g = groups.reshape(-1, WARPGROUP)
        if (g == g[:, :1]).all() and (idx.reshape(-1, WARPGROUP) & 127 == np.arange(128)).all():
            return g[:, 0]
    for g in np.unique(groups).tolist():
        have = idx[groups == g]
        size = min(WARPGROUP, m.T - WARPGROUP * g)
        if size < WARPGROUP:
            raise Fault(
                f"warpgroup-collective {text} in warpgroup {g} (warps {4 * g}..{4 * g + 3}), "
                f"which has only {size} threads (the block size {m.T} is not a multiple of 128)",
                int(have[0]),
                "a warpgroup is 4 whole warps: make the block a multiple of 128 threads",
            )
        if have.size < WARPGROUP:
            missing = int(np.setdiff1d(np.arange(WARPGROUP * g, WARPGROUP * (g + 1)), have)[0])
            raise Fault(
                f"warpgroup-collective {text} executed by {have.size} of 128 threads of "
                f"warpgroup {g}; warp {missing >> 5} lane {missing & 31} is not active "
                f"(divergent control flow)",
                missing,
                "all 128 threads of the warpgroup (warps 4g..4g+3) must execute wgmma together",
            )
    raise AssertionError("unreachable")


def _uniform(values: np.ndarray, idx: np.ndarray, what: str, text: str) -> None:
    """Fault naming the first thread whose ``values`` differ from its warpgroup's first."""
    per = values.reshape(-1, WARPGROUP)
    bad = per != per[:, :1]
    if bad.any():
        g, k = (int(x) for x in np.argwhere(bad)[0])
        tid, first = int(idx[g * WARPGROUP + k]), int(idx[g * WARPGROUP])
        raise Fault(
            f"{text}: thread {tid} (warp {tid >> 5}, lane {tid & 31}) gives {what} "
            f"{_show(per[g, k])}, but thread {first} of its warpgroup gives {_show(per[g, 0])}",
            tid,
            f"every thread of a warpgroup must pass the same {what}",
        )


def _show(v) -> str:
    return f"{int(v):#x}" if isinstance(v, np.unsignedinteger) else str(int(v))


def _immediate(compiler, op, what: str, allowed: tuple[int, ...]) -> int:
    if not isinstance(op, ir.Immediate) or op.value not in allowed:
        raise compiler.error(
            f"{what} must be an integer immediate in {allowed}, not {getattr(op, 'value', op)!r}"
        )
    return op.value


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one ``wgmma.*`` statement."""
    from .sim_async import WgmmaState

    state = m.unit("wgmma", WgmmaState)
    ops, span = stmt.operands, stmt.span
    if text in (FENCE, COMMIT, WAIT):
        n = 0
        if text == WAIT:
            if len(ops) != 1:
                raise compiler.error(f"{text} takes one operand, N")
            n = _immediate(compiler, ops[0], f"{text}'s N", tuple(range(8)))
        elif ops:
            raise compiler.error(f"{text} takes no operands")

        def sync(idx):
            m.span = span
            warpgroups(m, idx, text)
            if text == FENCE:
                state.fence(idx, stmt)
            elif text == COMMIT:
                state.commit(idx, stmt)
            else:
                state.wait(idx, n, stmt)

        return sync
    form = parse_mma_async(text)
    if form is None:
        raise unknown_instruction(stmt, text, IMPLEMENTED)
    return _mma_async(m, compiler, stmt, text, form, state)


def _mma_async(m, compiler, stmt, text: str, form: MmaAsync, state):
    ops, span = stmt.operands, stmt.span
    if len(ops) != 8:
        raise compiler.error(
            f"{text} takes 8 operands (d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, "
            f"imm-trans-a, imm-trans-b), not {len(ops)}"
        )
    d_op = ops[0]
    if not isinstance(d_op, ir.RegVector) or not d_op.is_output:
        raise compiler.error("wgmma.mma_async's d must be an output register vector")
    if len(d_op.regs) != form.registers:
        raise compiler.error(
            f"wgmma.mma_async m64n{form.n}k16 has {form.registers} accumulator registers per "
            f"thread, not {len(d_op.regs)}"
        )
    for what, op in (("a-desc", ops[1]), ("b-desc", ops[2]), ("scale-d", ops[3])):
        if not isinstance(op, ir.ScalarOperand):
            raise compiler.error(f"wgmma.mma_async's {what} must be a scalar operand")
    scale_a = _immediate(compiler, ops[4], "imm-scale-a", (1, -1))
    scale_b = _immediate(compiler, ops[5], "imm-scale-b", (1, -1))
    trans = [_immediate(compiler, ops[k], f"imm-trans-{'ab'[k - 6]}", (0, 1)) for k in (6, 7)]
    if any(trans):
        raise compiler.error(
            "wgmma.mma_async with an MN-major (imm-trans = 1) operand is not modelled by the "
            "simulator: it implements K-major A and B (imm-trans-a = imm-trans-b = 0)"
        )
    acc = state.accumulator(compiler, d_op)
    a_desc, b_desc = compiler.compile(ops[1].value), compiler.compile(ops[2].value)
    scale_d = compiler.compile(ops[3].value)

    def run(idx):
        m.span = span
        groups = warpgroups(m, idx, text)
        k = idx.size
        da = np.broadcast_to(np.asarray(a_desc(idx)), (k,)).astype(np.uint64)
        db = np.broadcast_to(np.asarray(b_desc(idx)), (k,)).astype(np.uint64)
        sd = np.broadcast_to(np.asarray(scale_d(idx)) != 0, (k,))
        _uniform(da, idx, "a-desc", text)
        _uniform(db, idx, "b-desc", text)
        _uniform(sd.astype(np.int64), idx, "scale-d", text)
        for j in range(groups.size):
            tids = idx[j * WARPGROUP : (j + 1) * WARPGROUP]
            descs = (decode_descriptor(da[j * WARPGROUP]), decode_descriptor(db[j * WARPGROUP]))
            state.issue(stmt, form, acc, tids, descs, bool(sd[j * WARPGROUP]), scale_a, scale_b)

    return run
