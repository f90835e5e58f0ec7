"""Every simulator check fires on a kernel made to break it, and stays silent on its twin."""

from __future__ import annotations

import numpy as np
import pytest

from tests.planted import PLANTED, copy_kernel, ldmatrix_kernel, race_kernel, simulator_inputs
from tests.test_sim_kernels import (
    LANE,
    TX,
    function,
    gbuf,
    lbuf,
    regs,
    sbuf,
    seed_kernel,
    seq,
    span,
    var,
)
from tests.text_planted import TEXT_CASES
from tirx.errors import SimulationError
from tirx.ir import nodes as ir
from tirx.sim import machine, run

I32, U32, F32 = ir.I32, ir.U32, ir.F32
I64 = ir.dtype_of("int64")
F16 = ir.dtype_of("float16")
LDM4 = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
STM1 = "stmatrix.sync.aligned.m8n8.x1.shared.b16"


def lt(a, b):
    return ir.cmp(ir.CmpOp.LT, a, b)


@pytest.mark.parametrize("case", [*PLANTED, *TEXT_CASES], ids=lambda c: c.name)
def test_planted_table_verdicts(case):
    """Every planted kernel of the shared tables (tests/planted.py, tests/text_planted.py)
    faults with its kind; every twin is clean (the same tables drive
    tests/test_sanitizer_parity.py on the GPU)."""
    if case.fault:
        expect_fault(case.build(), simulator_inputs(case), case.kind.pattern)
    else:
        run(case.build(), simulator_inputs(case))


def expect_fault(fn, args, pattern, *, warp=None, lane=None, line=None, block=None, budget=None):
    with pytest.raises(SimulationError, match=pattern) as info:
        run(fn, args, budget=budget)
    msg = info.value.message
    assert "block (" in msg and "warp" in msg and "lane" in msg, msg
    if block is not None:
        assert f"block {block}" in msg, msg
    if warp is not None:
        assert f"warp {warp}," in msg, msg
    if lane is not None:
        assert msg.endswith(f"lane {lane}]"), msg
    if line is not None:
        assert info.value.span == span(line), info.value.span
    return info.value


# ------------------------------------------------------------------------------ bounds


@pytest.mark.parametrize("scope", ["global", "shared"])
def test_out_of_bounds_read(scope):
    src = np.arange(32, dtype=np.int32)
    dst = np.zeros(32, dtype=np.int32)
    run(copy_kernel(32, 32, 0, scope), [src, dst])  # in bounds: silent
    np.testing.assert_array_equal(dst, src)
    expect_fault(
        copy_kernel(32, 32, 1, scope), [src, dst], "out-of-bounds read", warp=0, lane=31, line=3
    )
    expect_fault(copy_kernel(32, 32, -1, scope), [src, dst], "out-of-bounds", lane=0, line=3)


def test_out_of_bounds_global_write_in_second_block():
    Dst = gbuf("Dst", (48,), "int32")
    idx = ir.Special(ir.Builtin.BLOCK_IDX) * 32 + TX
    fn = function("w", (Dst,), ir.Store(Dst, idx, ir.const(1), I32, span(4)), grid=(2, 1, 1))
    expect_fault(fn, [np.zeros(48, np.int32)], "global 'Dst'", block="(1, 0, 0)", warp=0, lane=16)


def test_out_of_bounds_local_slot():
    src, dst = np.arange(32, dtype=np.int32), np.zeros(32, np.int32)
    run(copy_kernel(32, 32, 1, "local"), [src, dst])
    assert (dst == 7).all()
    expect_fault(copy_kernel(32, 32, 2, "local"), [src, dst], "local 'l': slot 2", lane=0, line=3)


# --------------------------------------------------------------------------- alignment


def test_misaligned_shared_access():
    Out = gbuf("Out", (32,), "uint32")
    s = sbuf("s", (80,), "uint16")
    body = seq(
        ir.Store(s, TX, ir.const(1, "uint16"), ir.dtype_of("uint16")),
        ir.Barrier("cta"),
        ir.Store(Out, TX, ir.Load(s, TX // 2, U32), U32, span(5)),
    )
    fn = function("m", (Out,), body, allocs=(s,))
    run(fn, [np.zeros(32, np.uint32)])  # s at offset 0: aligned
    moved = ir.Function(**{**fn.__dict__, "shared_offsets": {s: 2}, "shared_bytes": 162})
    expect_fault(moved, [np.zeros(32, np.uint32)], "misaligned read of shared 's'", line=5)


def test_misaligned_global_tensor():
    Src, Dst = gbuf("Src", (8,), "uint32"), gbuf("Dst", (8,), "uint32")
    fn = function("g", (Src, Dst), ir.Store(Dst, TX, ir.Load(Src, TX, U32), U32), block=(8, 1, 1))
    raw = np.zeros(40, dtype=np.uint8)
    expect_fault(
        fn, [raw[2:34].view(np.uint32), np.zeros(8, np.uint32)], "misaligned read of global 'Src'"
    )
    run(fn, [raw[4:36].view(np.uint32), np.zeros(8, np.uint32)])


def test_ldmatrix_row_alignment():
    run(ldmatrix_kernel(0), [np.zeros(128, np.uint32)])
    expect_fault(
        ldmatrix_kernel(8), [np.zeros(128, np.uint32)], "not 16-byte aligned", lane=0, line=7
    )


def test_ldmatrix_row_outside_allocation():
    # lane 31's row starts at byte 31*16 + 16 = 512, the end of the 512-byte buffer
    expect_fault(
        ldmatrix_kernel(16), [np.zeros(128, np.uint32)], "outside every shared allocation", lane=31
    )


# ----------------------------------------------------------------------- initialization


def test_uninitialized_shared_read():
    expect_fault(
        ldmatrix_kernel(0, fill=False),
        [np.zeros(128, np.uint32)],
        "nothing wrote in this block",
        lane=0,
    )
    src, dst = np.arange(32, dtype=np.int32), np.zeros(32, np.int32)
    s = sbuf("s", (64,), "int32")
    Src, Dst = gbuf("Src", (32,), "int32"), gbuf("Dst", (32,), "int32")
    body = seq(
        ir.Store(s, TX, ir.Load(Src, TX, I32), I32),
        ir.Barrier("cta"),
        ir.Store(Dst, TX, ir.Load(s, TX + 32, I32), I32, span(9)),
    )
    expect_fault(
        function("u", (Src, Dst), body, allocs=(s,)),
        [src, dst],
        "int32 at 's' byte 128",
        lane=0,
        line=9,
    )


def test_shared_initialization_does_not_carry_over_between_blocks():
    s = sbuf("s", (32,), "int32")
    Dst = gbuf("Dst", (64,), "int32")
    first = ir.cmp(ir.CmpOp.EQ, ir.Special(ir.Builtin.BLOCK_IDX), 0)
    body = seq(
        ir.If(first, ir.Store(s, TX, TX, I32)),
        ir.Barrier("cta"),
        ir.Store(Dst, ir.Special(ir.Builtin.BLOCK_IDX) * 32 + TX, ir.Load(s, TX, I32), I32),
    )
    expect_fault(
        function("b", (Dst,), body, grid=(2, 1, 1), allocs=(s,)),
        [np.zeros(64, np.int32)],
        "nothing wrote",
        block="(1, 0, 0)",
    )


def test_uninitialized_register_read():
    d, a = lbuf("d", 4, "float32"), lbuf("a", 4, "uint32")
    b = lbuf("b", 2, "uint32")
    text = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    zero = ir.RegVector(tuple(ir.ValueReg(ir.const(0.0)) for _ in range(4)), False)
    init = [ir.Store(a, k, ir.const(0, U32), U32) for k in range(4)]
    mma = ir.PtxCall(
        text, (regs(d, range(4), True), regs(a, range(4)), regs(b, range(2)), zero), span(3)
    )
    fn = function("r", (), seq(*init, ir.Store(b, 0, ir.const(0, U32), U32), mma), allocs=(d, a, b))
    expect_fault(
        fn, [], "local 'b' slot 1 as uint32, which this thread never wrote", lane=0, line=3
    )
    ok = function(
        "r",
        (),
        seq(*init, *[ir.Store(b, k, ir.const(0, U32), U32) for k in range(2)], mma),
        allocs=(d, a, b),
    )
    run(ok, [])


def test_registers_named_by_a_constant_slot_fault_as_by_a_computed_one():
    """``x[3]`` (a constant index: the simulator's fixed-slot path) and ``x[i]`` (a computed
    one) give the same faults: a slot read before this thread wrote it, a slot past the
    buffer's end on a read and on a write; the same values where nothing faults."""
    b = lbuf("b", 2, "uint32")
    Out = gbuf("Out", (32,), "uint32")
    two = ir.Load(b, 1, U32)  # the constant slot 1
    i = var("i")
    computed = ir.Load(b, i, U32)  # slot 1 again, through a variable
    for read in (two, computed):
        body = seq(
            ir.Assign(i, ir.const(1)),
            ir.Store(b, 0, ir.const(5, U32), U32, span=span(3)),
            ir.Store(Out, LANE, read, U32, span=span(4)),
        )
        fn = function("u", (Out,), body, allocs=(b,), variables=(i,))
        expect_fault(
            fn,
            [np.zeros(32, np.uint32)],
            "read of local 'b' slot 1 as uint32, which this thread never wrote",
            lane=0,
            line=4,
        )
    for index, what in ((ir.const(2), "read of"), (ir.const(-1), "read of")):
        body = seq(ir.Store(Out, LANE, ir.Load(b, index, U32), U32, span=span(2)))
        expect_fault(
            function("o", (Out,), body, allocs=(b,)),
            [np.zeros(32, np.uint32)],
            f"out-of-bounds {what} local 'b': slot {index.value} as uint32",
            lane=0,
            line=2,
        )
    body = seq(ir.Store(b, 2, ir.const(1, U32), U32, span=span(2)))
    expect_fault(
        function("o", (Out,), body, allocs=(b,)),
        [np.zeros(32, np.uint32)],
        "out-of-bounds write to local 'b': slot 2 as uint32 \\(bytes 8..11\\) but it holds 8 bytes",
        lane=0,
        line=2,
    )
    body = seq(
        ir.Assign(i, ir.const(1)),
        ir.Store(b, 0, LANE * 3, U32),
        ir.Store(b, 1, LANE + 7, U32),
        ir.Store(Out, LANE, ir.Load(b, 0, U32) + ir.Load(b, i, U32) * 100, U32),
    )
    out = np.zeros(32, np.uint32)
    run(function("v", (Out,), body, allocs=(b,), variables=(i,)), [out])
    lanes = np.arange(32, dtype=np.uint32)
    assert (out == lanes * 3 + (lanes + 7) * 100).all()


def _outcome(path, *args):
    """What ``path(*args)`` gives: ``("ok", the bytes it returned)`` or ``("fault", message,
    thread)`` for the simulator fault it raised."""
    from tirx.sim.faults import Fault

    try:
        return ("ok", path(*args).tobytes())
    except Fault as f:
        return ("fault", f.message, f.tid)


def test_the_fixed_slot_path_is_the_index_array_path():
    """``LocalArray.load_slot``/``store_slot`` give what ``load``/``store`` give with every
    thread's index the same slot: values, the written mask, and the fault with its thread."""
    from tirx.sim.memory import LocalArray
    from tirx.sim.numeric import storage_type

    def fixed(arr, slot, bits, d, rows, tids):
        arr.store_slot(slot, bits, d, rows, rows)
        return arr.load_slot(slot, d, tids, tids)

    def indexed(arr, slot, bits, d, rows, tids):
        arr.store(np.full(rows.size, slot, np.int64), bits, d, rows, rows)
        return arr.load(np.full(tids.size, slot, np.int64), d, tids, tids)

    rng = np.random.default_rng(0)
    tids = np.arange(64)
    for d in (U32, F32, F16, ir.dtype_of("int8")):
        arrays = LocalArray("x", 16, 64), LocalArray("x", 16, 64)
        for slot in range(-1, 16 // d.bytes + 1):
            rows = np.sort(rng.choice(64, 40, replace=False))
            bits = rng.integers(0, 100, rows.size).astype(storage_type(d))
            results = [
                _outcome(path, arr, slot, bits, d, rows, tids)
                for arr, path in zip(arrays, (fixed, indexed))
            ]
            assert results[0] == results[1], (d, slot, results)
            assert results[0][0] == "fault"  # 24 of 64 threads never wrote the slot
        assert (arrays[0].data == arrays[1].data).all()
        assert (arrays[0].written == arrays[1].written).all()


def test_a_register_vector_reads_and_writes_as_its_registers_one_by_one():
    """``load_slots``/``store_slots`` (an mma's or ldmatrix's register vector at once) give
    what the slots one after another give: values, written masks, and the first fault
    (the first register in order, its first thread), with slots repeated, out of range,
    partly written."""
    from tirx.sim.memory import LocalArray
    from tirx.sim.numeric import storage_type

    def at_once(arr, slots, bits, d, rows, tids):
        arr.store_slots(slots, bits, d, rows, rows)
        return arr.load_slots(slots, d, tids, tids)

    def one_by_one(arr, slots, bits, d, rows, tids):
        for j, s in enumerate(slots):
            arr.store_slot(s, np.ascontiguousarray(bits[:, j]), d, rows, rows)
        return np.stack([arr.load_slot(s, d, tids, tids) for s in slots], axis=-1)

    rng = np.random.default_rng(1)
    tids = np.arange(64)
    cases = [(0, 1, 2, 3), (3, 1), (2, 2, 0), (1, 4), (-1, 0), (0,)]
    for d in (U32, F32, ir.dtype_of("int32")):
        arrays = LocalArray("v", 16, 64), LocalArray("v", 16, 64)
        for slots in cases:
            for written_by in (64, 50):  # every thread, or some threads only
                rows = np.sort(rng.choice(64, written_by, replace=False))
                bits = rng.integers(0, 100, (rows.size, len(slots))).astype(storage_type(d))
                results = [
                    _outcome(path, arr, slots, bits, d, rows, tids)
                    for arr, path in zip(arrays, (at_once, one_by_one))
                ]
                assert results[0] == results[1], (d, slots, written_by, results)
        assert (arrays[0].data == arrays[1].data).all()
        assert (arrays[0].written == arrays[1].written).all()


# ------------------------------------------------------------------------------- races


def test_read_after_write_race_and_barrier():
    dst = np.zeros(32, np.int32)
    run(race_kernel(0), [dst])  # each thread reads its own write: no race
    err = expect_fault(race_kernel(1), [dst], "shared-memory race", warp=0, lane=0, line=3)
    assert "thread 1 (warp 0, lane 1) wrote" in err.message
    run(race_kernel(1, barrier="cta"), [dst])
    np.testing.assert_array_equal(dst, (np.arange(32) + 1) % 32 * 10)
    run(race_kernel(1, barrier="warp"), [dst])  # one warp: a warp barrier orders it


def test_warp_barrier_does_not_order_other_warps():
    dst = np.zeros(64, np.int32)
    run(race_kernel(32, barrier="cta", threads=64), [dst])
    expect_fault(race_kernel(32, barrier="warp", threads=64), [dst], "race", warp=0, lane=0)
    expect_fault(race_kernel(32, threads=64), [dst], "wrote", warp=0)


def test_write_write_race_in_one_statement():
    s = sbuf("s", (4,), "int32")
    fn = function("ww", (), ir.Store(s, ir.const(0), TX, I32, span(2)), allocs=(s,))
    err = expect_fault(fn, [], "also writes in the same step", line=2)
    # no barrier fits between two threads of one statement (the hint said "put
    # T.cuda.cta_sync() ... between line 2 and line 2"): let one thread write, or each its own
    assert "stores to one address from several threads" in err.message
    assert "between line 2 and line 2" not in err.hint and "cta_sync" not in err.hint
    assert (
        "put line 2 under `if T.cuda.lane_id() == 0:`" in err.hint and "its own address" in err.hint
    )
    only_one = function(
        "ww", (), ir.If(ir.cmp(ir.CmpOp.EQ, TX, 0), ir.Store(s, ir.const(0), TX, I32)), allocs=(s,)
    )
    run(only_one, [])


def test_write_write_race_across_warps_in_one_statement():
    s = sbuf("s", (32,), "int32")
    index = ir.binop(ir.Op.FLOORMOD, TX, ir.const(32))
    fn = function("ww2", (), ir.Store(s, index, TX, I32, span(3)), block=(64, 1, 1), allocs=(s,))
    err = expect_fault(fn, [], "also writes in the same step", line=3)
    assert 'if T.cuda.thread_idx("x") == 0:' in err.hint, err.hint
    assert "cta_sync" not in err.hint


def test_write_after_read_race():
    s = sbuf("s", (1,), "int32")
    Dst = gbuf("Dst", (32,), "int32")
    lane0 = ir.cmp(ir.CmpOp.EQ, TX, 0)
    body = [
        ir.If(lane0, ir.Store(s, ir.const(0), ir.const(5), I32)),
        ir.Barrier("cta"),
        ir.Store(Dst, TX, ir.Load(s, ir.const(0), I32), I32),  # everyone reads
        ir.If(lane0, ir.Store(s, ir.const(0), ir.const(6), I32, span(8))),  # lane 0 overwrites
    ]
    err = expect_fault(
        function("war", (Dst,), seq(*body), allocs=(s,)),
        [np.zeros(32, np.int32)],
        "race",
        lane=0,
        line=8,
    )
    assert "read" in err.message
    fixed = body[:3] + [ir.Barrier("cta"), body[3]]
    run(function("war", (Dst,), seq(*fixed), allocs=(s,)), [np.zeros(32, np.int32)])


def test_ldmatrix_is_no_fence_for_its_own_warp():
    # Each warp reads rows that other lanes of the same warp stored, with no barrier: a race
    # (compute-sanitizer's racecheck reports it as a warp-level RAW hazard).
    err = expect_fault(
        ldmatrix_kernel(0, barrier=None), [np.zeros(128, np.uint32)], "race", warp=0, line=7
    )
    assert "wrote at line 2" in err.message and "at line 7" in err.message, err.message
    assert "between line 2 and line 7" in err.hint, err.hint
    assert "T.cuda.warp_sync()" in err.hint
    run(ldmatrix_kernel(0, barrier="warp"), [np.zeros(128, np.uint32)])
    run(ldmatrix_kernel(0, barrier="cta", threads=64), [np.zeros(256, np.uint32)])


def test_ldmatrix_of_another_warps_rows_needs_a_cta_barrier():
    s_rows = 32
    bad = ldmatrix_kernel(0, threads=64)
    Out, s, r = bad.params[0], bad.allocations[0], bad.allocations[1]
    other = (ir.Special(ir.Builtin.WARP_ID) + 1) % 2 * (s_rows * 8)
    addr = ir.SharedAddress(s, (other + LANE * 8) * 2)
    ldm = ir.PtxCall(LDM4, (regs(r, range(4), True), ir.AddressOperand(addr)), span(7))
    fill = bad.body.stmts[0]
    assert isinstance(fill, ir.For)

    def kernel(barrier):
        stmts = [fill, *([ir.Barrier(barrier, span(5))] if barrier else []), ldm]
        return function(
            "ldm", (Out,), seq(*stmts), block=(64, 1, 1), allocs=(s, r), variables=bad.variables
        )

    err = expect_fault(kernel("warp"), [np.zeros(256, np.uint32)], "race", warp=0, line=7)
    assert "different warps" in err.hint, err.hint
    expect_fault(kernel(None), [np.zeros(256, np.uint32)], "race", warp=0, line=7)
    run(kernel("cta"), [np.zeros(256, np.uint32)])


def _seed_inputs():
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 4, (16, 16)).astype(np.float16)
    b = rng.integers(-4, 4, (8, 16)).astype(np.float16)
    return a, b, np.zeros((16, 8), np.float32)


def test_seed_kernel_without_its_barrier_is_a_race():
    fn = seed_kernel()
    stmts = [x for x in fn.body.stmts if not isinstance(x, ir.Barrier)]
    no_barrier = ir.Function(**{**fn.__dict__, "body": seq(*stmts)})
    err = expect_fault(no_barrier, list(_seed_inputs()), "shared-memory race", warp=0, line=7)
    msg = err.message
    # both lanes, both lines (the copy loop's store at line 3, the ldmatrix at line 7), the fix
    assert "thread 0 (warp 0, lane 0) reads" in msg, msg
    # the same pair compute-sanitizer's racecheck names on the H200 (write thread 1, read 0)
    assert "thread 1 (warp 0, lane 1) wrote at line 3" in msg, msg
    assert err.hint.startswith("put T.cuda.cta_sync() (or T.cuda.warp_sync() within one warp)")
    assert "between line 3 and line 7" in err.hint, err.hint
    for scope in ("warp", "cta"):
        at = next(i for i, x in enumerate(fn.body.stmts) if isinstance(x, ir.Barrier))
        fixed = list(fn.body.stmts)
        fixed[at] = ir.Barrier(scope, span(6))
        a, b, out = _seed_inputs()
        run(ir.Function(**{**fn.__dict__, "body": seq(*fixed)}), [a, b, out])
        np.testing.assert_array_equal(out, a.astype(np.float32) @ b.astype(np.float32).T)


def test_stmatrix_then_ldmatrix_in_one_warp_needs_a_barrier():
    s = sbuf("s", (32 * 8,), "uint16")
    r, q = lbuf("r", 4, "uint32"), lbuf("q", 4, "uint32")
    addr = ir.SharedAddress(s, LANE * 16)
    stm = "stmatrix.sync.aligned.m8n8.x4.shared.b16"

    def kernel(barrier, shift):
        load = ir.SharedAddress(s, (LANE + shift) % 32 * 16)
        body = [
            *[ir.Store(r, k, ir.cast(LANE + 32 * k, "uint32"), U32) for k in range(4)],
            ir.PtxCall(stm, (ir.AddressOperand(addr), regs(r, range(4))), span(3)),
            *([ir.Barrier(barrier, span(4))] if barrier else []),
            ir.PtxCall(LDM4, (regs(q, range(4), True), ir.AddressOperand(load)), span(5)),
        ]
        return function("sl", (), seq(*body), allocs=(s, r, q))

    # lane l's ldmatrix row is the one lane l+1's stmatrix address covered: no fence between
    err = expect_fault(kernel(None, 1), [], "race", lane=0, line=5)
    assert "thread 1 (warp 0, lane 1) wrote at line 3" in err.message, err.message
    run(kernel("warp", 1), [])
    run(kernel("cta", 1), [])
    run(kernel(None, 0), [])  # each lane reloads the row its own address stored


# ---------------------------------------------------------------- arithmetic, control


def test_integer_division_by_zero():
    Dst = gbuf("Dst", (32,), "int32")
    for op in (ir.Op.FLOORDIV, ir.Op.FLOORMOD):
        bad = ir.BinOp(op, ir.const(100), TX - 3, I32)
        expect_fault(
            function("d", (Dst,), ir.Store(Dst, TX, bad, I32, span(6))),
            [np.zeros(32, np.int32)],
            "division by zero",
            lane=3,
            line=6,
        )
    guarded = ir.Select(
        ir.cmp(ir.CmpOp.NE, TX, 3),
        ir.BinOp(ir.Op.FLOORDIV, ir.const(100), TX - 3, I32),
        ir.const(0),
        I32,
    )
    run(function("d", (Dst,), ir.Store(Dst, TX, guarded, I32)), [np.zeros(32, np.int32)])


def test_shift_count_out_of_range():
    Dst = gbuf("Dst", (32,), "int32")
    fn = function(
        "s", (Dst,), ir.Store(Dst, TX, ir.BinOp(ir.Op.SHL, ir.const(1), TX + 1, I32), I32)
    )
    expect_fault(fn, [np.zeros(32, np.int32)], "shift count", lane=31)


@pytest.mark.parametrize(
    "op, start, dtype, shown",
    [
        (ir.Op.ADD, 2**31 - 32, I32, "2147483647 + 1 does not fit in int32"),
        (ir.Op.SUB, -(2**31) + 31, I32, "-2147483648 - 1 does not fit in int32"),
        (ir.Op.MUL, 2**26 - 31, I32, "67108864 * 32 does not fit in int32"),
        (ir.Op.ADD, 2**63 - 32, I64, "9223372036854775807 + 1 does not fit in int64"),
        (ir.Op.MUL, 2**58 - 31, I64, "288230376151711744 * 32 does not fit in int64"),
    ],
)
def test_signed_overflow_stops_the_simulator(op, start, dtype, shown):
    """Signed overflow is undefined in C, and the GPU's compiler uses that (it folds
    ``a + 1 > a`` to true, measured in docs/gpu-runs/sessions.md): the wrapped value the
    simulator computed is not the GPU's, so it stops at the first lane that overflows, as it
    does for a division by zero. Lane 31 tips each one over."""
    Dst = gbuf("Dst", (32,), dtype.name)
    step = ir.Op.SUB if op is ir.Op.SUB else ir.Op.ADD
    x = ir.BinOp(step, ir.const(start, dtype), ir.Cast(TX, dtype), dtype)
    value = ir.BinOp(op, x, ir.const(32 if op is ir.Op.MUL else 1, dtype), dtype)
    err = expect_fault(function("o", (Dst,), ir.Store(Dst, TX, value, dtype, span(4))),
                       [np.zeros(32, dtype.numpy)], "signed integer overflow", lane=31, line=4)  # fmt: skip
    assert shown in err.message, err.message
    assert "a + 1 > a is true there" in err.hint and "uint32" in err.hint


def test_unsigned_wraps_and_int_min_over_minus_one_overflows():
    Dst = gbuf("Dst", (32,), "uint32")
    wraps = ir.BinOp(ir.Op.ADD, ir.const(2**32 - 16, U32), ir.Cast(TX, U32), U32)
    out = np.zeros(32, np.uint32)
    run(function("u", (Dst,), ir.Store(Dst, TX, wraps, U32)), [out])
    assert out.tolist() == [(2**32 - 16 + i) % 2**32 for i in range(32)]
    Dst = gbuf("Dst", (32,), "int32")
    for op in (ir.Op.FLOORDIV, ir.Op.FLOORMOD):
        minus_one = ir.BinOp(ir.Op.SUB, TX, ir.const(32), I32)  # -1 at lane 31
        value = ir.BinOp(op, ir.const(-(2**31)), minus_one, I32)
        err = expect_fault(function("d", (Dst,), ir.Store(Dst, TX, value, I32, span(3))),
                           [np.zeros(32, np.int32)], "signed integer overflow", lane=31, line=3)  # fmt: skip
        assert f"-2147483648 {op.value} -1 does not fit in int32" in err.message, err.message


def test_divergent_barriers():
    Dst = gbuf("Dst", (64,), "int32")
    inside_if = ir.If(lt(TX, 16), ir.Barrier("cta", span(2)))
    expect_fault(
        function("b", (Dst,), inside_if, block=(64, 1, 1)),
        [np.zeros(64, np.int32)],
        "barrier \\(cta\\) reached by 16 of 64",
        warp=0,
        lane=16,
        line=2,
    )
    uniform = ir.If(lt(ir.Special(ir.Builtin.BLOCK_DIM), 100), ir.Barrier("cta"))
    run(function("b", (Dst,), uniform, block=(64, 1, 1)), [np.zeros(64, np.int32)])
    q = var("q")
    loop = ir.For(q, ir.const(0), TX % 2 + 1, 1, ir.Barrier("cta", span(3)))
    expect_fault(
        function("b", (Dst,), loop, block=(64, 1, 1), variables=(q,)),
        [np.zeros(64, np.int32)],
        "reached by 32 of 64",
        lane=0,
        line=3,
    )
    warp_split = ir.If(lt(TX, 48), ir.Barrier("warp", span(4)))
    expect_fault(
        function("b", (Dst,), warp_split, block=(64, 1, 1)),
        [np.zeros(64, np.int32)],
        "barrier \\(warp\\) reached by 16 of 32 lanes of warp 1",
        warp=1,
        lane=16,
        line=4,
    )
    whole_warps = ir.If(lt(TX, 32), ir.Barrier("warp"))
    run(function("b", (Dst,), whole_warps, block=(64, 1, 1)), [np.zeros(64, np.int32)])


def test_collective_with_missing_lanes():
    expect_fault(
        ldmatrix_kernel(0, guard=lt(LANE, 31)),
        [np.zeros(128, np.uint32)],
        "executed by 31 of 32 lanes",
        warp=0,
        lane=31,
        line=7,
    )
    # whole warps may skip it together
    run(ldmatrix_kernel(0, threads=64, guard=lt(TX, 32)), [np.zeros(256, np.uint32)])


def test_collective_in_a_partial_warp():
    fn = ldmatrix_kernel(0, threads=64)
    fn = ir.Function(**{**fn.__dict__, "launch": ir.LaunchConfig((1, 1, 1), (48, 1, 1))})
    expect_fault(fn, [np.zeros(256, np.uint32)], "has only 16 threads", warp=1, lane=0)


def test_infinite_loop_is_reported(monkeypatch):
    monkeypatch.setattr(machine, "MAX_LOOP_ITERATIONS", 1000)
    fn = function("w", (), ir.While(ir.const(True), ir.Seq(()), span(5)))
    expect_fault(fn, [], "infinite loop", line=5)


def test_unlowered_and_script_level_input_is_rejected():
    fn = seed_kernel()
    with pytest.raises(SimulationError, match="not lowered"):
        run(ir.Function(**{**fn.__dict__, "lowered": False}), [])
    view = ir.View(fn.params[0], F16, (16, 16), None)
    Dst = gbuf("Dst", (32,), "float32")
    bad = function("e", (Dst,), ir.Store(Dst, TX, ir.ElemLoad(view, (0, 0), F16), F32, span(2)))
    with pytest.raises(SimulationError, match="ElemLoad") as info:
        run(bad, [np.zeros(32, np.float32)])
    assert info.value.span == span(2)
    dangling = function("e", (Dst,), ir.Store(Dst, TX, ir.Load(fn.params[0], 0, F16), F32))
    with pytest.raises(SimulationError, match="neither a parameter nor an allocation"):
        run(dangling, [np.zeros(32, np.float32)])
