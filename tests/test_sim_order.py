"""Happens-before in the simulator (tirx/sim/order.py, races.py, accesses.py): what an
mbarrier phase, a warp barrier and a CTA barrier order, for whom. Each kernel is built to
break a rule and has a corrected twin: bytes a phase delivers (plain stores released by the
arrivals, a tensor copy's bytes, cp.async completing on the barrier) are seen by the threads
that observed the phase and by threads ordered after one of them (a cta_sync, a warp barrier,
a further arrive/wait chain), by no one else; the planted asynchronous kernels of the parity
suite (tests/async_kernels.py) fault, and their twins run clean."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.async_kernels import ASYNC_CASES
from tests.helpers import define
from tests.test_sim_kernels import LANE, TX, function, gbuf, sbuf, seq, span
from tests.test_sim_wgmma import Gemm, call
from tirx.errors import SimulationError
from tirx.ir import nodes as ir
from tirx.sim import run
from tirx.sim.order import FAR, Order

INIT = 'T.ptx["mbarrier.init.shared::cta.b64"]'
ARRIVE = 'T.ptx["mbarrier.arrive.shared::cta.b64"]'

# warp 0 stores and arrives on bars[0]; warp 1 waits on it and reads; warp 2 {third}
THREE_WARPS = """
@T.function
def kernel(A: T.Tensor((32,), "float32"), Out: T.Tensor((64,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=96))
    tid = T.cuda.thread_idx("x")
    lane = T.cuda.lane_id()
    bars = T.alloc_shared((2,), "uint64")
    s = T.alloc_shared((32,), "float32")
    if tid == 0:
        {INIT}(bars[0], 32)
        {INIT}(bars[1], 32)
    T.cuda.cta_sync()
    if tid < 32:
        s[lane] = A[lane] * 3.0
        {ARRIVE}(bars[0])
    elif tid < 64:
        {second}
        Out[lane] = s[lane]
    else:
        {third}
        Out[32 + lane] = s[31 - lane]
"""
WAIT0 = "T.cuda.mbarrier_wait(bars[0], 0)"
WAIT1 = "T.cuda.mbarrier_wait(bars[1], 0)"


def three_warps(tmp_path, second, third):
    src = THREE_WARPS.format(INIT=INIT, ARRIVE=ARRIVE, second=second, third=third)
    return define(src, tmp_path, "kernel")


def run_three(fn):
    a = np.arange(32, dtype=np.float32) - 7.5
    out = np.full(64, np.nan, np.float32)
    tirx.compile(fn, target="sim")(a, out)
    return a, out


def test_a_warp_that_did_not_wait_is_not_ordered_after_the_arrivals(tmp_path):
    """Warp 1's wait does not order warp 2's reads: the race names warp 2's read and warp
    0's store (before, the first waiter's pass cleared the records for every thread)."""
    fn = three_warps(tmp_path, WAIT0, "pass")
    with pytest.raises(SimulationError, match="shared-memory race") as e:
        run_three(fn)
    msg = e.value.message
    assert "thread 64 (warp 2, lane 0) reads 's'[31] (byte 124" in msg
    assert "which thread 31 (warp 0, lane 31) wrote" in msg
    assert msg.endswith("[block (0, 0, 0), warp 2, lane 0]")


@pytest.mark.parametrize(
    "second, third",
    [
        (WAIT0, WAIT0),  # each consumer warp observes the phase itself
        # release is cumulative: warp 1 observed the phase, then arrives on bars[1]
        (f"{WAIT0}\n        {ARRIVE}(bars[1])", WAIT1),
    ],
    ids=["both-wait", "chain"],
)
def test_its_twins_wait_or_are_ordered_through_a_chain(tmp_path, second, third):
    a, out = run_three(three_warps(tmp_path, second, third))
    np.testing.assert_array_equal(out, np.concatenate([a * 3, (a * 3)[::-1]]))


def test_a_chain_released_before_the_wait_orders_nothing(tmp_path):
    """Warp 1 arrives on bars[1] before it waits on bars[0]: its release carries nothing of
    warp 0's stores, so warp 2 waiting on bars[1] still races with them."""
    second = f"{ARRIVE}(bars[1])\n        {WAIT0}"
    with pytest.raises(SimulationError, match="warp 2.*which thread .* \\(warp 0"):
        run_three(three_warps(tmp_path, second, WAIT1))


# thread 0 loads a box; {wait}; all 128 threads read it
TMA_KERNEL = """
@T.function
def kernel(A: T.Tensor((32, 64), "float16"), Out: T.Tensor((32, 64), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    s = T.alloc_shared((32, 64), "float16", align=128)
    bars = T.alloc_shared((2,), "uint64")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        {INIT}(bars[0], 1)
        {INIT}(bars[1], 1)
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 4096)
        T.cuda.tile.apply(T.ptx[TMA], s[:, :], A[:, :], box=(32, 64), coords=(0, 0), swizzle=0, mbar=bars[0], scope="thread")
    {wait}
    for i in range(16):
        Out[tid // 4, (tid % 4) * 16 + i] = s[tid // 4, (tid % 4) * 16 + i]
"""
TMA = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
ONLY_0 = "if tid == 0:\n        T.cuda.mbarrier_wait(bars[0], 0)"


def tma(tmp_path, wait):
    src = TMA_KERNEL.format(INIT=INIT, wait=wait)
    a = (np.arange(32 * 64) % 89).reshape(32, 64).astype(np.float16)
    out = np.zeros((32, 64), np.float16)
    tirx.compile(define(src, tmp_path, "kernel", TMA=TMA), target="sim")(a, out)
    return a, out


@pytest.mark.parametrize(
    "wait, who",
    [
        (ONLY_0, "thread 1 (warp 0, lane 1)"),  # its own lanes need ordering too
        (ONLY_0 + "\n    T.cuda.warp_sync()", "thread 32 (warp 1, lane 0)"),  # warp 0 only
        ("T.cuda.cta_sync()\n    " + ONLY_0, "thread 1 (warp 0, lane 1)"),  # barrier first
    ],
    ids=["only-thread-0", "warp-sync", "barrier-before-the-wait"],
)
def test_a_tensor_copy_is_seen_only_by_observers_and_threads_ordered_after_them(
    tmp_path, wait, who
):
    with pytest.raises(SimulationError) as e:
        tma(tmp_path, wait)
    msg = e.value.message
    assert f"{who} reads 's'[" in msg
    assert f"the destination of the tensor copy {TMA}" in msg
    assert "whose completion this thread has not observed" in msg
    assert "mbarrier_wait" in e.value.hint


@pytest.mark.parametrize(
    "wait",
    [
        "T.cuda.mbarrier_wait(bars[0], 0)",  # everyone observes the phase
        ONLY_0 + "\n    T.cuda.cta_sync()",  # a barrier after the observer
        # thread 0 observes, then releases to the others through a second barrier object
        ONLY_0 + f"\n        {ARRIVE}(bars[1])\n    T.cuda.mbarrier_wait(bars[1], 0)",
    ],
    ids=["all-wait", "cta-sync-after", "chain"],
)
def test_its_twins(tmp_path, wait):
    a, out = tma(tmp_path, wait)
    np.testing.assert_array_equal(out, a)


def test_warp_barrier_orders_the_lanes_after_their_observer(tmp_path):
    """Lane 0 of each warp waits, then the warp passes a warp barrier: its lanes are ordered
    after lane 0's observation."""
    wait = "if tid % 32 == 0:\n        T.cuda.mbarrier_wait(bars[0], 0)\n    T.cuda.warp_sync()"
    a, out = tma(tmp_path, wait)
    np.testing.assert_array_equal(out, a)


# -------------------------------------------------------------- wgmma's released reads


def wgmma_refill(arriver: int, arrive_after_wait: bool):
    """Warpgroup 0 multiplies from shared memory; thread ``arriver`` of it arrives on an
    mbarrier (after or before the warpgroup's wgmma.wait_group); warpgroup 1 waits on the
    barrier and refills the B stage the multiply read."""
    g = Gemm(n=8, block=256)
    bars = sbuf("bars", (1,), "uint64")
    bar = ir.AddressOperand(ir.SharedAddress(bars, 0))
    me = ir.cmp(ir.CmpOp.EQ, TX, arriver)
    arrive = ir.If(me, call("mbarrier.arrive.shared::cta.b64", bar, line=42), None, span(42))
    mma = [*g.steps["init"], *g.steps["fence"], *g.mmas, *g.steps["commit"]]
    consume = (
        seq(*mma, *g.steps["wait"], arrive)
        if arrive_after_wait
        else seq(*mma, arrive, *g.steps["wait"])
    )
    wait = call(
        "mbarrier.try_wait.parity.shared::cta.b64", bar, ir.ScalarOperand(ir.const(0)), line=49
    )
    produce = seq(wait, ir.Store(g.sb, TX - 128, ir.const(0), ir.I32, span(50)))
    init = ir.If(
        ir.cmp(ir.CmpOp.EQ, TX, 0),
        call("mbarrier.init.shared::cta.b64", bar, ir.ScalarOperand(ir.const(1)), line=8),
        None,
        span(8),
    )
    body = seq(
        *g.steps["copy"],
        *g.steps["proxy"],
        init,
        ir.Barrier("cta", span(9)),
        ir.If(ir.cmp(ir.CmpOp.LT, TX, 128), consume, produce, span(10)),
        ir.If(ir.cmp(ir.CmpOp.LT, TX, 128), seq(*g.steps["out"]), None, span(30)),
    )
    fn = function(
        "pc",
        (g.GA, g.GB, g.Init, g.Out),
        body,
        block=(256, 1, 1),
        allocs=(g.sa, g.sb, g.acc, bars),
        variables=tuple(g.variables),
    )
    a, b, init_ = g.inputs()
    return fn, g.args(a, b, init_), a @ b.T


def test_any_thread_of_the_warpgroup_that_waited_releases_the_tensor_cores_reads():
    """The reads are the tensor core's, observed by every thread whose wait_group covered
    them: an arrive by thread 5 (not only the warpgroup's first) orders the refill after."""
    fn, args, expect = wgmma_refill(5, arrive_after_wait=True)
    run(fn, args)
    assert np.array_equal(args[3].reshape(64, 8), expect)


def test_an_arrive_before_the_wait_group_does_not():
    fn, args, _ = wgmma_refill(5, arrive_after_wait=False)
    with pytest.raises(SimulationError, match=r"the tensor core \(warpgroup 0\) read at line 20"):
        run(fn, args)


# ------------------------------------------------------------------- the clocks alone


def test_release_and_acquire_order_exactly_what_came_before():
    o = Order(64)
    t_before = o.now
    snap = o.release(np.array([3]))  # thread 3 releases its accesses so far
    t_after = o.now
    o.acquire(np.array([40]), snap)
    p = np.array([40, 40, 41])
    who = np.array([3, 3, 3])
    assert o.ordered(p, who, np.array([t_before, t_after, t_before])).tolist() == [
        True,
        False,
        False,
    ]
    assert o.vc[3, 3] == FAR and o.ordered(np.array([3]), np.array([3]), np.array([10**6]))[0]


def test_a_warp_barrier_orders_its_own_lanes_only():
    o = Order(64)
    t = o.now
    o.warp_barrier(np.array([0]))
    assert o.ordered(np.array([5]), np.array([7]), np.array([t]))[0]
    assert not o.ordered(np.array([33]), np.array([7]), np.array([t]))[0]
    assert not o.ordered(np.array([5]), np.array([7]), np.array([o.now]))[0]  # later ones


def test_an_agent_observed_by_one_thread_is_everyones_after_a_cta_barrier():
    o = Order(64)
    agent = o.agent(("unit", 0), "the unit")
    t = o.now
    o.publish(agent, np.array([0]))
    assert o.ordered(np.array([0]), np.array([agent]), np.array([t]))[0]
    assert not o.ordered(np.array([9]), np.array([agent]), np.array([t]))[0]
    o.cta_barrier()
    assert o.ordered(np.array([9]), np.array([agent]), np.array([t]))[0]


# ------------------------------------------------------------- the planted kernels


@pytest.mark.parametrize("case", ASYNC_CASES, ids=lambda c: c.name)
def test_planted_asynchronous_kernels(case):
    """Each fault of tests/async_kernels.py is reported as its kind; each twin runs clean
    (the same table drives the sanitizer parity suite on the GPU)."""
    if case.fault:
        with pytest.raises(SimulationError, match=case.kind.pattern) as e:
            run(case.build(), case.inputs())
        assert "[block (0, 0, 0), warp " in e.value.message
    else:
        run(case.build(), case.inputs())


@pytest.mark.parametrize("sem", ["", ".release.cta", ".relaxed.cta"])
def test_a_relaxed_arrive_releases_nothing(sem):
    """Warp 0 stores and arrives, warp 1 waits and reads: a .relaxed arrive (hand-built IR:
    tirx's contract takes only the release form) counts but orders nothing."""
    out = gbuf("Out", (32,), "int32")
    s, bars = sbuf("s", (32,), "int32"), sbuf("bars", (1,), "uint64")
    bar = ir.AddressOperand(ir.SharedAddress(bars, 0))
    zero = ir.cmp(ir.CmpOp.EQ, TX, 0)
    init = call("mbarrier.init.shared::cta.b64", bar, ir.ScalarOperand(ir.const(32)), line=2)
    produce = seq(
        ir.Store(s, LANE, LANE * 5, ir.I32, span(4)),
        call(f"mbarrier.arrive{sem}.shared::cta.b64", bar, line=5),
    )
    wait = call(
        "mbarrier.try_wait.parity.shared::cta.b64", bar, ir.ScalarOperand(ir.const(0)), line=7
    )
    consume = seq(wait, ir.Store(out, LANE, ir.Load(s, 31 - LANE, ir.I32), ir.I32, span(8)))
    body = seq(
        ir.If(zero, init, None, span(2)),
        ir.Barrier("cta", span(3)),
        ir.If(ir.cmp(ir.CmpOp.LT, TX, 32), produce, consume, span(4)),
    )
    fn = function("relaxed", (out,), body, block=(64, 1, 1), allocs=(s, bars))
    result = np.zeros(32, np.int32)
    if sem == ".relaxed.cta":
        with pytest.raises(SimulationError, match="warp 1.* reads 's'.*line 8.*wrote at line 4"):
            run(fn, [result])
    else:
        run(fn, [result])
        np.testing.assert_array_equal(result, (31 - np.arange(32)) * 5)


def test_accesses_record_each_slot_and_byte_as_pair_by_pair(monkeypatch):
    """``Accesses.record`` keeps a step whose repeated bytes come from different warps as it
    is (each (warp, byte) pair once) and merges pairs only where lanes of one warp repeat a
    byte; the records (mask, time, lane, site) are those of merging every step, over random
    steps of three kinds (lanes of a warp on the same bytes, one lane per warp on the same
    bytes, random bytes), an agent's reads among them."""
    from tirx.sim import accesses as acc
    from tirx.sim.order import Order

    merges = []
    per_pair = acc._per_pair
    monkeypatch.setattr(acc, "_per_pair", lambda *a: merges.append(a) or per_pair(*a))

    class Unmatched:  # a pair scratch that never reads back what was written
        def __setitem__(self, at, order):
            pass

        def __getitem__(self, at):
            return np.full(len(at), -1)

    class Always(acc.Accesses):  # every step with a repeated byte merged pair by pair
        def _pair_scratch(self):
            return Unmatched()

    rng = np.random.default_rng(3)
    order = Order(256)
    fast, merged = acc.Accesses(512, order), Always(512, order)
    counts = {}
    for step in range(60):
        order.now = step + 1
        kind = step % 3
        if kind == 0:  # four lanes of each of 12 warps' threads... on 8 shared bytes
            p = np.repeat(rng.choice(256, 12, replace=False), 4 * 8)
            b = np.tile(rng.integers(0, 512, 8), p.size // 8)
        elif kind == 1:  # one lane of each warp, all on the same 8 bytes
            p = np.repeat(32 * np.arange(8) + rng.integers(0, 32, 8), 8)
            b = np.tile(rng.integers(0, 512, 8), 8)
        else:
            p = np.repeat(rng.choice(256, 48, replace=False), 8)
            b = rng.integers(0, 512, p.size)
        for r in (fast, merged):
            before = len(merges)
            r.record(b.astype(np.int64), p.astype(np.int64), step)
            counts.setdefault((r is fast, kind), []).append(len(merges) - before)
            if step % 7 == 0:
                r.record_agent(np.unique(b)[:5].astype(np.int64), 256 + step % 2, step)
            if step % 13 == 0:
                r.clear()
    for name in ("mask", "time", "lane", "site"):
        assert (getattr(fast, name) == getattr(merged, name)).all(), name
    assert sum(counts[(True, 1)]) == 0 and sum(counts[(False, 1)]) == 20  # kept as they are
    assert sum(counts[(True, 0)]) == 20  # lanes of one warp on one byte: merged


# ------------------------------------------------------- races of one line with itself

SAME_LINE = """
@T.function
def kernel(A: T.Tensor((128,), "float32"), Out: T.Tensor((1,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={block}))
    tid = T.cuda.thread_idx("x")
    s = T.alloc_shared((128,), "float32")
    s[tid] = A[tid]
    {first}
    T.cuda.cta_sync()
{body}
    if tid == 0:
        Out[0] = s[0]
"""


def _same_line_fault(tmp_path, block: int, body: str, first: str = "s[tid + 64] = A[tid + 64]"):
    k = define(SAME_LINE.format(block=block, body=body, first=first), tmp_path, "kernel")
    with pytest.raises(SimulationError) as e:
        tirx.compile(k, "sim")(np.arange(128, dtype=np.float32), np.zeros(1, np.float32))
    return e.value


def test_one_statement_reading_and_writing_an_array_says_read_sync_store(tmp_path):
    """s[tid] = s[tid] + s[tid + 16] by the 32 lanes of a warp: lane 0 reads what lane 16
    stores in the same statement; no barrier fits between line N and line N."""
    body = "    s[tid] = s[tid] + s[tid + 16]"
    err = _same_line_fault(tmp_path, 32, body, "s[tid + 32] = A[tid + 32]")
    assert "read at line" in err.message and "between line" not in err.hint, err.hint
    assert "Read into a variable, synchronize, then store" in err.hint
    assert "T.cuda.warp_sync()" in err.hint  # the threads are of one warp


def test_a_loop_missing_its_barrier_says_end_of_the_loop_body(tmp_path):
    """A tree reduction whose loop lacks its barrier: thread 0 reads at the next level what
    thread 32 wrote at this one, on the same line."""
    body = (
        "    for lvl in T.unroll(6):\n"
        "        stride = 64 >> lvl\n"
        "        if tid < stride:\n"
        "            s[tid] = s[tid] + s[tid + stride]"
    )
    err = _same_line_fault(tmp_path, 128, body, "s[tid] = A[tid]")
    assert "wrote at line" in err.message and "between line" not in err.hint, err.hint
    assert "at the end of the loop body, outside any branch" in err.hint
    assert "T.cuda.cta_sync()" in err.hint  # threads 0 and 32 are in different warps
