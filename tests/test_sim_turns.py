"""Warpgroups that take turns through mbarriers inside one branch (CUTLASS's ordered sequence
barrier, FlashAttention-3's scheduler written with mbarriers): a branch holding an mbarrier
wait whose barrier or phase differs between threads runs one strand per warpgroup
(tirx/sim/strands.py, ``varying_wait``), so warpgroup 1 waits on its barrier while
warpgroup 2, in the same branch, goes on to arrive there. A wait every thread of the branch
makes on the same barrier keeps the branch whole, as before."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import define
from tests.test_named_barrier import run_turns as run
from tests.test_named_barrier import turns_model
from tirx.errors import SimulationError
from tirx.ir import nodes as ir
from tirx.sim.strands import varying_vars

TURNS = """
@T.function
def turns(A: T.Tensor((128,), "int32"), Out: T.Tensor((4, 256), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
    h = T.alloc_shared((128,), "int32")
    turn = T.alloc_shared((2,), "uint64")
    tid = T.cuda.thread_idx("x")
    wg = T.cuda.warpgroup_id()
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](turn[0], 128)
        T.ptx["mbarrier.init.shared::cta.b64"](turn[1], 128)
    if wg == 0:
        h[tid] = A[tid]
    T.cuda.cta_sync()
    if wg > 0:
        c = wg - 1
        i = tid % 128
        if c == 1:
            FIRST
        for j in range(4):
            T.cuda.mbarrier_wait(turn[c], j % 2)
            UPDATE
            Out[j, tid - 128] = h[i]
            if j < 3 or c == 0:
                T.ptx["mbarrier.arrive.shared::cta.b64"](turn[1 - c])
"""
FIRST = 'T.ptx["mbarrier.arrive.shared::cta.b64"](turn[0])'
UPDATE = "h[i] = h[i] * 2 + c"


def turns(tmp_path, first=FIRST, update=UPDATE, source=TURNS):
    return define(source.replace("FIRST", first).replace("UPDATE", update), tmp_path, "turns")


def test_warpgroups_take_turns_through_mbarriers_inside_one_branch(tmp_path):
    a, out = run(turns(tmp_path))
    assert np.array_equal(out, turns_model(a))


def test_a_turn_never_given_is_a_deadlock(tmp_path):
    with pytest.raises(SimulationError, match="deadlock") as info:
        run(turns(tmp_path, first="pass"))
    assert "turn" in str(info.value)


def test_a_turn_handed_over_before_the_update_is_a_race(tmp_path):
    early = 'T.ptx["mbarrier.arrive.shared::cta.b64"](turn[1 - c])\n            h[i] = h[i] * 2 + c'
    source = TURNS.replace(
        '            if j < 3 or c == 0:\n                T.ptx["mbarrier.arrive.shared::cta.b64"](turn[1 - c])\n',
        "",
    )
    with pytest.raises(SimulationError, match="shared-memory race"):
        run(turns(tmp_path, update=early, source=source))


def test_the_wrong_parity_is_reported_not_taken_for_a_turn(tmp_path):
    source = TURNS.replace(
        "T.cuda.mbarrier_wait(turn[c], j % 2)", "T.cuda.mbarrier_wait(turn[c], (j + 1) % 2)"
    )
    with pytest.raises(SimulationError):
        run(turns(tmp_path, source=source))


def test_which_variables_differ_between_threads():
    """The analysis behind the split: thread indices, what is computed from them, what is
    assigned under a condition that differs and the counter of a loop whose bounds differ;
    not a loop counter with uniform bounds or a value computed from parameters."""
    tid = ir.Special(ir.Builtin.THREAD_IDX)
    n, a, b, c, d, j, k = (ir.Var(x) for x in "nabcdjk")
    body = ir.Seq(
        (
            ir.Assign(a, tid // 128),  # a thread index
            ir.Assign(b, n * 2),  # a parameter: the same everywhere
            ir.If(
                ir.cmp(ir.CmpOp.EQ, a, 1), ir.Assign(c, ir.as_expr(1)), ir.Assign(c, ir.as_expr(0))
            ),
            ir.For(j, ir.as_expr(0), ir.as_expr(4), 1, ir.Assign(d, j + b)),  # uniform loop
            ir.For(k, ir.as_expr(0), c + 0, 1, ir.Assign(d, ir.as_expr(0))),  # bound varies
        )
    )
    varying = varying_vars(body)
    assert {a, c, k, d} <= varying
    assert b not in varying and j not in varying and n not in varying


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("pingpong", [False, True])
def test_a_wait_on_the_same_barrier_keeps_a_branch_whole(pingpong, persistent):
    """The attention kernel's consumers wait on the stage's barrier with a phase every
    consumer thread computes alike (and, with ping-pong, each warpgroup in a branch of its
    own): judged as the simulator judges a branch (by the branch's own assignments: the
    producer and the consumers each count the ring's steps and the tiles' key counts), no
    branch that holds a wait is split, and the simulator runs them as before."""
    from types import SimpleNamespace

    from tirx.examples import attention_wgmma as aw
    from tirx.ir.visitor import walk
    from tirx.sim.strands import holds_wait, splits_by_warpgroup
    from tirx.transform.lower import lower_function

    cfg = aw.WgmmaAttentionConfig(pingpong=pingpong, persistent=persistent)
    fn = lower_function(aw.make_attention(1, 1, 1, 128, 256, 64, "float16", True, cfg).ir, arch=90)
    splits = splits_by_warpgroup(SimpleNamespace(fn=fn, _holds_wait={}))
    branches = [
        b
        for n in walk(fn.body)
        if isinstance(n, ir.If)
        for b in (n.then_body, n.else_body)
        if b is not None and holds_wait(b, None)
    ]
    assert branches and not any(splits(b) for b in branches)


def test_a_variable_is_judged_inside_a_branch_by_the_branchs_own_assignments():
    """``st`` is assigned in both branches of ``if tid < 32``: after the branches meet it
    differs between threads, but inside each branch it is one value (a producer's and the
    consumers' stage index), so a wait on ``full[st]`` there splits nothing."""
    tid = ir.Special(ir.Builtin.THREAD_IDX)
    st, k, c = ir.Var("st"), ir.Var("k"), ir.Var("c")
    producer = ir.Assign(st, ir.as_expr(k % 2))
    consumer = ir.Seq((ir.Assign(c, tid - 32), ir.Assign(st, ir.as_expr(k % 2))))
    body = ir.For(
        k, ir.as_expr(0), ir.as_expr(4), 1, ir.If(ir.cmp(ir.CmpOp.LT, tid, 32), producer, consumer)
    )
    whole = varying_vars(body)
    assert st in whole and c in whole and k not in whole
    assert st not in varying_vars(consumer, whole) and c in varying_vars(consumer, whole)


def test_a_variable_every_assignment_of_which_one_branch_holds_is_one_value():
    """``ring`` is set to 0 and counted up in a loop, both inside ``if tid == 0`` (a
    persistent kernel's producer): the branch's condition differs between threads, but every
    thread that has ``ring`` took it, so ``ring`` is one value; ``x``, set under ``tid == 0``
    and again under ``tid == 1``, is not."""
    tid = ir.Special(ir.Builtin.THREAD_IDX)
    ring, i, n, x = ir.Var("ring"), ir.Var("i"), ir.Var("n"), ir.Var("x")
    count = ir.For(i, ir.as_expr(0), ir.as_expr(4), 1, ir.Assign(ring, ir.as_expr(ring + n)))
    body = ir.Seq(
        (
            ir.Assign(n, ir.as_expr(3)),
            ir.If(ir.cmp(ir.CmpOp.EQ, tid, 0), ir.Seq((ir.Assign(ring, ir.as_expr(0)), count))),
            ir.If(ir.cmp(ir.CmpOp.EQ, tid, 0), ir.Assign(x, ir.as_expr(0))),
            ir.If(ir.cmp(ir.CmpOp.EQ, tid, 1), ir.Assign(x, ir.as_expr(1))),
        )
    )
    varying = varying_vars(body)
    assert ring not in varying and n not in varying and x in varying
