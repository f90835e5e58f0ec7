"""``wgmma`` statements in the simulator: decode each (the forms, descriptors, layouts and
fragments read from the PTX ISA are in :mod:`tirx.families.wgmma.sim_forms`, ``sim_layout``
and ``sim_math``) and drive the asynchronous
model of :mod:`tirx.families.wgmma.sim_async` (groups, registers and shared bytes in flight,
fences), checking that whole warpgroups execute each statement with uniform operands.
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.faults import Fault
from .sim_forms import WARPGROUP, MmaAsync, parse_mma_async
from .sim_layout import decode_descriptor

__all__ = ["compile_call", "warpgroups", "IMPLEMENTED"]

FENCE = "wgmma.fence.sync.aligned"
COMMIT = "wgmma.commit_group.sync.aligned"
WAIT = "wgmma.wait_group.sync.aligned"
IMPLEMENTED = (
    "wgmma.mma_async.sync.aligned.m64nNkK{.satfinite}.D.A.B, ss (A and B from shared-memory "
    "descriptors, K- or MN-major) and rs (A from registers): m64nNk16.{f32,f16}.f16.f16, "
    "m64nNk16.f32.bf16.bf16, m64nNk8.f32.tf32.tf32, m64nNk32.{f32,f16}.{e4m3,e5m2}.{e4m3,e5m2}, "
    f"m64nNk32{{.satfinite}}.s32.{{s8,u8}}.{{s8,u8}}; {FENCE}, {COMMIT}, {WAIT}"
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
    registers_a = len(ops) > 1 and isinstance(ops[1], ir.RegVector)
    names = form.immediates(registers_a)
    if len(ops) != 4 + len(names):
        a = "a" if registers_a else "a-desc"
        raise compiler.error(
            f"{text} takes {4 + len(names)} operands (d, {a}, b-desc, scale-d"
            f"{''.join(', ' + x for x in names)}), not {len(ops)}"
        )
    d_op = ops[0]
    if not isinstance(d_op, ir.RegVector) or not d_op.is_output:
        raise compiler.error("wgmma.mma_async's d must be an output register vector")
    if len(d_op.regs) != form.registers:
        raise compiler.error(
            f"wgmma.mma_async m64n{form.n}k{form.k}.{form.acc} has {form.registers} accumulator "
            f"registers per thread, not {len(d_op.regs)}"
        )
    if registers_a and (ops[1].is_output or len(ops[1].regs) != 4):
        raise compiler.error("wgmma.mma_async's a must be four input registers")
    wanted = (("b-desc", ops[2]), ("scale-d", ops[3]))
    if not registers_a:
        wanted = (("a-desc", ops[1]), *wanted)
    for what, op in wanted:
        if not isinstance(op, ir.ScalarOperand):
            raise compiler.error(f"wgmma.mma_async's {what} must be a scalar operand")
    values = {"imm-scale-a": 1, "imm-scale-b": 1, "imm-trans-a": 0, "imm-trans-b": 0}
    for name, op in zip(names, ops[4:]):
        values[name] = _immediate(compiler, op, name, (1, -1) if "scale" in name else (0, 1))
    trans = (bool(values["imm-trans-a"]), bool(values["imm-trans-b"]))
    acc = state.registers(compiler, d_op, "accumulator")
    a_regs = state.registers(compiler, ops[1], "A") if registers_a else None
    a_desc = None if registers_a else compiler.compile(ops[1].value)
    b_desc = compiler.compile(ops[2].value)
    scale_d = compiler.compile(ops[3].value)
    sa, sb = values["imm-scale-a"], values["imm-scale-b"]

    def run(idx):
        m.span = span
        groups = warpgroups(m, idx, text)
        k = idx.size
        db = np.broadcast_to(np.asarray(b_desc(idx)), (k,)).astype(np.uint64)
        sd = np.broadcast_to(np.asarray(scale_d(idx)) != 0, (k,))
        da = None
        if a_desc is not None:
            da = np.broadcast_to(np.asarray(a_desc(idx)), (k,)).astype(np.uint64)
            _uniform(da, idx, "a-desc", text)
        _uniform(db, idx, "b-desc", text)
        _uniform(sd.astype(np.int64), idx, "scale-d", text)
        for j in range(groups.size):
            first = j * WARPGROUP
            tids = idx[first : first + WARPGROUP]
            descs = (
                decode_descriptor(da[first]) if da is not None else None,
                decode_descriptor(db[first]),
            )
            state.issue(stmt, form, (acc, a_regs), tids, descs, trans, bool(sd[first]), sa, sb)

    return run
