"""Value and control-flow semantics of the simulator: arithmetic, conversions, divergence,
thread indices, printf, and what a trace records."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tirx
from tests.helpers import define
from tests.test_sim_kernels import (
    LANE,
    TX,
    function,
    gbuf,
    gemm_kernel,
    integer_matrix,
    seed_kernel,
    seq,
    span,
    var,
)
from tirx.errors import SimulationError
from tirx.ir import nodes as ir
from tirx.sim import run

I32, U32, F32 = ir.I32, ir.U32, ir.F32
dt = ir.dtype_of


def per_thread(make, out_dtype="int32", inputs=(), threads=32):
    """Out[t] = make(*[In_k[t]]) for each thread t; returns Out."""
    ins = [
        gbuf(f"In{k}", a.shape, str(a.dtype) if a.dtype != np.uint16 else "uint16")
        for k, a in enumerate(inputs)
    ]
    out_np = np.dtype(dt(out_dtype).numpy)
    Out = gbuf("Out", (threads,), out_dtype)
    loads = [ir.Load(b, TX, b.dtype) for b in ins]
    fn = function(
        "f", (*ins, Out), ir.Store(Out, TX, make(*loads), dt(out_dtype)), block=(threads, 1, 1)
    )
    out = np.zeros(threads, dtype=out_np)
    run(fn, [*inputs, out])
    return out


# ------------------------------------------------------------------------- integers


def test_floor_division_and_modulo_of_negatives():
    x = np.arange(-16, 16, dtype=np.int32)
    for d in (3, -3, 7):
        q = per_thread(lambda a, d=d: a // d, inputs=[x])
        r = per_thread(lambda a, d=d: a % d, inputs=[x])
        np.testing.assert_array_equal(q, [v // d for v in x.tolist()])
        np.testing.assert_array_equal(r, [v % d for v in x.tolist()])
    divisors = np.where(x == 0, 5, x).astype(np.int32)
    q = per_thread(
        lambda a, b: ir.BinOp(ir.Op.FLOORDIV, ir.const(-7), b, I32), inputs=[x, divisors]
    )
    np.testing.assert_array_equal(q, [-7 // v for v in divisors.tolist()])


def test_integer_true_division_node_truncates_like_c():
    x = np.arange(-16, 16, dtype=np.int32)
    q = per_thread(lambda a: ir.BinOp(ir.Op.DIV, a, ir.const(3), I32), inputs=[x])
    np.testing.assert_array_equal(q, [int(v / 3) for v in x.tolist()])


def test_unsigned_and_narrow_ints_wrap_and_signed_overflow_stops():
    # signed overflow is undefined in C (the GPU's compiler folds around it): a fault, not a wrap
    big = np.full(32, 2**31 - 1, dtype=np.int32)
    with pytest.raises(SimulationError, match="signed integer overflow: 2147483647 \\+ 1"):
        per_thread(lambda a: a + TX, inputs=[big])
    u = per_thread(lambda: ir.cast(TX, "uint32") - ir.const(1, U32), "uint32")
    assert u[0] == 2**32 - 1 and u[5] == 4
    m = per_thread(lambda: ir.cast(TX * 1000, "int8"), "int8")
    np.testing.assert_array_equal(m, (np.arange(32) * 1000).astype(np.int8))
    # C's usual conversions: (tid - 1) < 0u is false for every thread (-1 becomes 2**32 - 1)
    c = per_thread(lambda: ir.cast(ir.Cmp(ir.CmpOp.LT, TX - 1, ir.const(0, U32)), "int32"))
    assert (c == 0).all()


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(-(2**31), 2**31 - 1), min_size=32, max_size=32),
    st.lists(st.integers(-(2**31), 2**31 - 1), min_size=32, max_size=32),
)
def test_int32_arithmetic_matches_c(xs, ys):
    x, y = np.array(xs, dtype=np.int32), np.array(ys, dtype=np.int32)
    y = np.where(y == 0, 1, y).astype(np.int32)

    cases = {
        ir.Op.ADD: lambda a, b: a + b,
        ir.Op.SUB: lambda a, b: a - b,
        ir.Op.MUL: lambda a, b: a * b,
        ir.Op.FLOORDIV: lambda a, b: a // b,
        ir.Op.FLOORMOD: lambda a, b: a % b if not (a == -(2**31) and b == -1) else 2**31,
        ir.Op.BITXOR: lambda a, b: a ^ b,
        ir.Op.MIN: min,
        ir.Op.MAX: max,
    }
    for op, model in cases.items():
        want = [model(a, b) for a, b in zip(xs, y.tolist())]  # exact, in Python's ints
        if all(-(2**31) <= w < 2**31 for w in want):
            got = per_thread(lambda a, b, op=op: ir.BinOp(op, a, b, I32), inputs=[x, y])
            np.testing.assert_array_equal(got, want, err_msg=op.name)
        else:  # C leaves it undefined: the simulator stops (it wrapped before)
            with pytest.raises(SimulationError, match="signed integer overflow"):
                per_thread(lambda a, b, op=op: ir.BinOp(op, a, b, I32), inputs=[x, y])


def test_shifts():
    x = np.arange(-16, 16, dtype=np.int32)
    np.testing.assert_array_equal(per_thread(lambda a: a >> 2, inputs=[x]), x >> 2)  # arithmetic
    u = x.view(np.uint32)
    np.testing.assert_array_equal(
        per_thread(lambda a: a >> ir.const(2, U32), "uint32", [u]), u >> 2
    )
    np.testing.assert_array_equal(per_thread(lambda a: a << 3, inputs=[x]), x << 3)


# ---------------------------------------------------------------------------- floats


def test_float16_rounding_is_nearest_even():
    base = np.float32(1.0)
    ulp = np.float32(2.0**-10)
    values = np.array(
        [
            base + ulp / 2,
            base + 3 * ulp / 2,
            65519.0,
            65520.0,
            -(2.0**-25),
            2.0**-25 * 1.5,
            np.nan,
            -np.inf,
        ]
        + list(np.linspace(-3, 3, 24)),
        dtype=np.float32,
    )
    bits = per_thread(lambda a: ir.cast(a, "float16"), "float16", [values])
    with np.errstate(over="ignore"):
        want = values.astype(np.float16)
    want[np.isnan(want)] = np.uint16(0x7FFF).view(np.float16)  # cvt.rn.f16.f32's NaN
    np.testing.assert_array_equal(bits.view(np.uint16), want.view(np.uint16))
    assert bits[0] == 1.0 and bits[1] == 1.0 + 2 * 2.0**-10 and np.isinf(bits[3])


def test_bfloat16_rounding_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 2**32, size=32, dtype=np.uint32)
    raw[:4] = [0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x00008000]  # ties (even, odd), max, tiny tie
    values = raw.view(np.float32)
    values = np.where(np.isnan(values), np.float32(1.5), values).astype(np.float32)
    got = per_thread(lambda a: ir.cast(a, "bfloat16"), "bfloat16", [values])
    want = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(got, want)


def test_bfloat16_from_an_integer_rounds_through_float32_as_the_c_does(tmp_path):
    """The C converts an integer to bfloat16 as tirx_f2b((float)(x)): two roundings. 2**24 +
    2**16 + 1 is just above a bfloat16 tie, but its float32 is the tie itself, which rounds to
    even (down); a float64 of the same value rounds once (up), through tirx_d2b."""
    k = define(
        """
        @T.function
        def k(A: T.Tensor((2,), "int32"), D: T.Tensor((2,), "float64"),
              B: T.Tensor((2, 2), "bfloat16")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=2))
            i = T.cuda.thread_idx("x")
            B[0, i] = A[i]
            B[1, i] = D[i]
        """,
        tmp_path,
        "k",
    )
    a = np.array([2**24 + 2**16 + 1, -(2**24 + 2**16 + 1)], np.int32)
    b = np.zeros((2, 2), np.uint16)
    tirx.compile(k, target="sim")(a, a.astype(np.float64), b)
    np.testing.assert_array_equal(b, [[0x4B80, 0xCB80], [0x4B81, 0xCB81]])
    src = tirx.compile(k, target="cuda -arch=sm_90").source
    assert "tirx_f2b((float)(A[" in src and "tirx_d2b((double)(D[" in src


def test_bfloat16_from_float64_rounds_once():
    # 1 + 2^-8 + 2^-40 is above the bf16 halfway point; rounding through float32 first
    # would land exactly on the tie and round down to 1.0.
    x = np.full(32, 1 + 2.0**-8 + 2.0**-40, dtype=np.float64)
    got = per_thread(lambda a: ir.cast(a, "bfloat16"), "bfloat16", [x])
    assert (got == 0x3F81).all()


def test_float_to_int_truncates_and_saturates():
    values = np.array([-2.7, -0.5, 0.5, 2.7, 3e9, -3e9, np.nan] + [1.0] * 25, dtype=np.float32)
    got = per_thread(lambda a: ir.cast(a, "int32"), "int32", [values])
    np.testing.assert_array_equal(got[:7], [-2, 0, 0, 2, 2**31 - 1, -(2**31), 0])
    # to 8 and 16 bits through a saturating 32-bit conversion, then the low bits, as the PTX
    # NVRTC makes of it (cvt.rzi.u32.f32, st.u8; tests/test_expression_fuzz.py reads it)
    got = per_thread(lambda a: ir.cast(a, "uint8"), "uint8", [values])
    np.testing.assert_array_equal(got[:7], [0, 0, 0, 2, 3_000_000_000 % 256, 0, 0])
    got = per_thread(lambda a: ir.cast(a, "int16"), "int16", [values])
    np.testing.assert_array_equal(got[:7], [-2, 0, 0, 2, -1, 0, 0])  # INT_MAX's low 16 bits


def test_float_ops_in_float32_and_floor_semantics():
    x = np.linspace(-5, 5, 32).astype(np.float32)
    np.testing.assert_array_equal(
        per_thread(lambda a: a * a + 0.1, "float32", [x]), x * x + np.float32(0.1)
    )
    np.testing.assert_array_equal(
        per_thread(lambda a: a // 2.0, "float32", [x]), np.floor_divide(x, 2)
    )
    np.testing.assert_array_equal(
        per_thread(lambda a: a % 2.0, "float32", [x]), np.mod(x, np.float32(2))
    )
    np.testing.assert_array_equal(per_thread(lambda a: a / 3.0, "float32", [x]), x / np.float32(3))
    halves = np.linspace(-2, 2, 32).astype(np.float16)
    got = per_thread(lambda a: a * 3.0, "float32", [halves])  # f16 load yields f32 values
    np.testing.assert_array_equal(got, halves.astype(np.float32) * 3)


def test_min_max_follow_python_for_nan_and_signed_zero():
    a = np.array([np.nan, 1.0, 0.0, -0.0] * 8, dtype=np.float32)
    b = np.array([1.0, np.nan, -0.0, 0.0] * 8, dtype=np.float32)
    lo = per_thread(lambda x, y: ir.BinOp(ir.Op.MIN, x, y, F32), "float32", [a, b])
    hi = per_thread(lambda x, y: ir.BinOp(ir.Op.MAX, x, y, F32), "float32", [a, b])
    want_lo = np.array([min(x, y) for x, y in zip(a.tolist(), b.tolist())], dtype=np.float32)
    want_hi = np.array([max(x, y) for x, y in zip(a.tolist(), b.tolist())], dtype=np.float32)
    np.testing.assert_array_equal(lo.view(np.uint32), want_lo.view(np.uint32))
    np.testing.assert_array_equal(hi.view(np.uint32), want_hi.view(np.uint32))


# ------------------------------------------------------------------- laziness, control


def test_select_and_logic_evaluate_only_what_c_evaluates():
    small = gbuf("Small", (16,), "int32")
    Out = gbuf("Out", (32,), "int32")
    inside = ir.cmp(ir.CmpOp.LT, TX, 16)
    load = ir.Load(small, TX, I32)
    sel = ir.Select(inside, load, ir.const(-1), I32)
    both = ir.Logic("and", inside, ir.cmp(ir.CmpOp.GT, load, 3))
    either = ir.Logic("or", ir.Not(inside), ir.cmp(ir.CmpOp.GT, load, 3))
    out = np.zeros(32, np.int32)
    data = np.arange(16, dtype=np.int32)
    run(function("s", (small, Out), ir.Store(Out, TX, sel, I32)), [data, out])
    np.testing.assert_array_equal(out, np.r_[data, np.full(16, -1)])
    run(function("s", (small, Out), ir.Store(Out, TX, ir.cast(both, "int32"), I32)), [data, out])
    np.testing.assert_array_equal(out, np.r_[data > 3, np.zeros(16)])
    run(function("s", (small, Out), ir.Store(Out, TX, ir.cast(either, "int32"), I32)), [data, out])
    np.testing.assert_array_equal(out, np.r_[data > 3, np.ones(16)])


def test_divergent_control_flow_matches_a_python_model():
    # acc = 0; for i in range(tid % 7): if i == 2 and tid % 2: continue
    #   acc += i * 10; if acc > 40 + tid: break
    # then: while acc % 3 != 0 and tid % 5 != 0: acc += 1; if tid < 8: acc = -acc else acc += 1000
    Out = gbuf("Out", (64,), "int32")
    acc, i = var("acc"), var("i")

    def eq(a, b):
        return ir.cmp(ir.CmpOp.EQ, a, b)

    body = seq(
        ir.Assign(acc, ir.const(0)),
        ir.For(
            i,
            ir.const(0),
            TX % 7,
            1,
            seq(
                ir.If(ir.Logic("and", eq(i, 2), ir.cmp(ir.CmpOp.NE, TX % 2, 0)), ir.Continue()),
                ir.Assign(acc, acc + i * 10),
                ir.If(ir.cmp(ir.CmpOp.GT, acc, TX + 40), ir.Break()),
            ),
        ),
        ir.While(
            ir.Logic("and", ir.cmp(ir.CmpOp.NE, acc % 3, 0), ir.cmp(ir.CmpOp.NE, TX % 5, 0)),
            ir.Assign(acc, acc + 1),
        ),
        ir.If(ir.cmp(ir.CmpOp.LT, TX, 8), ir.Assign(acc, 0 - acc), ir.Assign(acc, acc + 1000)),
        ir.Store(Out, TX, acc, I32),
    )
    out = np.zeros(64, np.int32)
    run(function("cf", (Out,), body, block=(64, 1, 1), variables=(acc, i)), [out])

    def model(t):
        a = 0
        for k in range(t % 7):
            if k == 2 and t % 2:
                continue
            a += k * 10
            if a > 40 + t:
                break
        while a % 3 != 0 and t % 5 != 0:
            a += 1
        return -a if t < 8 else a + 1000

    np.testing.assert_array_equal(out, [model(t) for t in range(64)])


def test_for_loop_negative_step_and_loop_variable_semantics():
    Out = gbuf("Out", (32,), "int32")
    acc, i = var("acc"), var("i")
    body = seq(
        ir.Assign(acc, ir.const(0)),
        ir.For(
            i, TX, ir.const(-3), -2, seq(ir.Assign(acc, acc * 2 + i), ir.Assign(i, ir.const(100)))
        ),
        ir.Store(Out, TX, acc, I32),
    )
    out = np.zeros(32, np.int32)
    run(function("neg", (Out,), body, variables=(acc, i)), [out])

    def model(t):  # range() semantics: assigning the loop variable does not change the trip
        a = 0
        for k in range(t, -3, -2):
            a = a * 2 + k
        return np.int32(a) if abs(a) < 2**31 else np.int64(a).astype(np.int32)

    np.testing.assert_array_equal(out, [model(t) for t in range(32)])


def test_thread_and_block_indices():
    grid, block = (2, 3, 1), (4, 2, 5)
    n_threads = 40
    kinds = [
        (ir.Builtin.THREAD_IDX, 0),
        (ir.Builtin.THREAD_IDX, 1),
        (ir.Builtin.THREAD_IDX, 2),
        (ir.Builtin.LANE_ID, 0),
        (ir.Builtin.WARP_ID, 0),
        (ir.Builtin.BLOCK_IDX, 0),
        (ir.Builtin.BLOCK_IDX, 1),
        (ir.Builtin.BLOCK_DIM, 2),
        (ir.Builtin.GRID_DIM, 1),
    ]
    Out = gbuf("Out", (6 * n_threads * len(kinds),), "int32")
    linear = ir.Special(ir.Builtin.THREAD_IDX, 0) + 4 * (
        ir.Special(ir.Builtin.THREAD_IDX, 1) + 2 * ir.Special(ir.Builtin.THREAD_IDX, 2)
    )
    blk = ir.Special(ir.Builtin.BLOCK_IDX, 0) + 2 * ir.Special(ir.Builtin.BLOCK_IDX, 1)
    stores = [
        ir.Store(Out, (blk * n_threads + linear) * len(kinds) + k, ir.Special(kind, d), I32)
        for k, (kind, d) in enumerate(kinds)
    ]
    out = np.zeros(6 * n_threads * len(kinds), np.int32)
    run(function("ids", (Out,), seq(*stores), grid=grid, block=block), [out])
    got = out.reshape(6, n_threads, len(kinds))
    t = np.arange(n_threads)
    for b in range(6):
        want = np.stack(
            [
                t % 4,
                t // 4 % 2,
                t // 8,
                t % 32,
                t // 32,
                np.full(40, b % 2),
                np.full(40, b // 2),
                np.full(40, 5),
                np.full(40, 3),
            ],
            axis=1,
        )
        np.testing.assert_array_equal(got[b], want)


def test_scalar_parameters():
    n, scale = var("n"), var("scale", "float32")
    Out = gbuf("Out", (32,), "float32")
    body = ir.If(ir.cmp(ir.CmpOp.LT, TX, n), ir.Store(Out, TX, ir.cast(TX, "float32") * scale, F32))
    out = np.zeros(32, np.float32)
    run(function("p", (n, Out, scale), body), [10, out, 0.5])
    np.testing.assert_array_equal(out, np.where(np.arange(32) < 10, np.arange(32) * 0.5, 0))


# ---------------------------------------------------------------------------- printf


def test_printf_formats_like_c_in_thread_and_block_order():
    x = var("x")
    vals = (
        LANE - 1,
        ir.cast(LANE - 1, "uint32"),
        LANE * 255,
        ir.cast(LANE, "float32") / 3.0,
        ir.cast(LANE + 65, "int8"),
        ir.cast(LANE - 1, "int64"),
    )
    fmt = "b%d t%d: %d %u %#x %5.2f|%-4c|%lld %e 100%%\n"
    args = (ir.Special(ir.Builtin.BLOCK_IDX), TX, *vals, ir.cast(LANE, "float64") * 1e-5)
    body = seq(
        ir.Assign(x, LANE), ir.If(ir.cmp(ir.CmpOp.LT, LANE, 2), ir.Printf(fmt, args, span(3)))
    )
    sink = io.StringIO()
    run(function("p", (), body, grid=(2, 1, 1), variables=(x,)), [], stdout=sink)
    lines = sink.getvalue().splitlines()
    assert lines == [
        "b0 t0: -1 4294967295 0  0.00|A   |-1 0.000000e+00 100%",
        "b0 t1: 0 0 0xff  0.33|B   |0 1.000000e-05 100%",
        "b1 t0: -1 4294967295 0  0.00|A   |-1 0.000000e+00 100%",
        "b1 t1: 0 0 0xff  0.33|B   |0 1.000000e-05 100%",
    ]


def test_printf_argument_count_is_checked():
    from tirx.errors import SimulationError

    with pytest.raises(SimulationError, match="takes 2 arguments"):
        run(function("p", (), ir.Printf("%d %d\n", (LANE,), span(1))), [])
    with pytest.raises(SimulationError, match="%s is not supported"):
        run(function("p", (), ir.Printf("%s\n", (LANE,), span(1))), [])


def test_printf_defaults_to_sys_stdout(capsys):
    run(
        function(
            "p",
            (),
            ir.If(
                ir.cmp(ir.CmpOp.EQ, LANE, 0),
                ir.Printf("hello %o %#o\n", (ir.const(8), ir.const(8))),
            ),
        ),
        [],
    )
    assert capsys.readouterr().out == "hello 10 010\n"


# ---------------------------------------------------------------------------- traces


def test_trace_records_each_instruction_per_warp():
    rng = np.random.default_rng(0)
    a, b = integer_matrix(rng, (16, 16)), integer_matrix(rng, (8, 16))
    out = np.zeros((16, 8), np.float32)
    result = run(seed_kernel(), [a, b, out], trace=True)
    assert [t.instruction.split(".")[0] for t in result.traces] == ["ldmatrix", "ldmatrix", "mma"]
    ld_a, ld_b, mma = result.traces
    assert ld_a.block == (0, 0, 0) and ld_a.warp == 0 and ld_a.span == span(7)
    lane = np.arange(32)
    i = lane // 8
    np.testing.assert_array_equal(ld_a.addresses, ((i % 2) * 8 + lane % 8) * 32 + (i // 2) * 16)
    assert ld_a.address_used.all() and ld_b.address_used.sum() == 16
    (r,) = ld_a.registers
    assert r.role == "r" and r.is_output and r.sources == ("ar[0]", "ar[1]", "ar[2]", "ar[3]")
    halves = a.view(np.uint16)
    # lane 5 holds row 1, columns 2..3 of matrix 0 (rows 0-7, cols 0-7 of A)
    assert r.after[5, 0] == halves[1, 2] | (np.uint32(halves[1, 3]) << 16)
    assert (r.before == 0).all() and np.isnan(r.after_f32).all()
    d, a_op, b_op, c_op = mma.registers
    assert [x.role for x in mma.registers] == ["d", "a", "b", "c"]
    np.testing.assert_array_equal(a_op.before, r.after)
    assert c_op.sources == ("value",) * 4 and (c_op.before_f32 == 0).all()
    g, t = lane // 4, lane % 4
    np.testing.assert_array_equal(d.after_f32[:, 0], out[g, 2 * t])
    np.testing.assert_array_equal(d.after_f32[:, 3], out[g + 8, 2 * t + 1])
    np.testing.assert_array_equal(d.after.view(np.float32), d.after_f32)
    assert d.dtypes == ("float32",) * 4 and a_op.dtypes == ("uint32",) * 4


def test_untraced_run_records_nothing_and_gemm_traces_every_warp():
    rng = np.random.default_rng(1)
    a, b = integer_matrix(rng, (64, 64), -3, 3), integer_matrix(rng, (96, 64), -3, 3)
    out = np.zeros((64, 96), np.float32)
    fn = gemm_kernel(M=64, N=96, K=64)
    assert run(fn, [a, b, out]).traces == []
    np.testing.assert_array_equal(out, a.astype(np.float32) @ b.astype(np.float32).T)
    result = run(fn, [a, b, out], trace=True)
    assert result.blocks == 6
    # per block: 2 k-steps x 2 k16 chunks x (2 ldmatrix + 2 mma), for each of 4 warps
    assert len(result.traces) == 6 * 2 * 2 * 4 * 4
    assert {t.warp for t in result.traces} == {0, 1, 2, 3}
    assert {t.block for t in result.traces} == {(x, y, 0) for x in range(3) for y in range(2)}


# Floats at the edges of every integer type, and past them: NaNs (both signs), infinities,
# negatives (out of range for unsigned types), the powers of two around 2**31, 2**32, 2**63
# and 2**64, values that truncate.
_EDGES = [np.nan, -np.nan, np.inf, -np.inf, -1.0, -0.5, -0.0, 0.75, 255.5, 300.0, -129.0,
          65535.9, 2.0**31, -(2.0**31) - 4096, 2.0**32, 3e9, -3e9, 2.0**63, -(2.0**63),
          2.0**64, 1e30, -1e30, 1e-30, 127.9, -32768.5, 4.5e15, -4.5e15, 1.5, -1.5, 7.0,
          2.0**53 + 1, -(2.0**62)]  # fmt: skip
_INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
CONVERT_SOURCE = (
    "@T.function\n"
    "def k(X: T.Tensor((32,), 'float32'), D: T.Tensor((32,), 'float64'),\n"
    + "".join(f"      O{n}: T.Tensor((2, 32), '{n}'),\n" for n in _INTS)
    + "):\n"
    "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))\n"
    "    i = T.cuda.thread_idx('x')\n"
    + "".join(f"    O{n}[0, i] = T.{n}(X[i])\n    O{n}[1, i] = T.{n}(D[i])\n" for n in _INTS)
)


def _convert_inputs():
    return [np.array(_EDGES, np.float32), np.array(_EDGES, np.float64)] + [
        np.zeros((2, 32), n) for n in _INTS
    ]


def test_float_to_int_at_every_edge(tmp_path):
    """float32 and float64 to each integer type. A NaN gives 0 from a float32 to 32 bits,
    else the integer with only its top bit set (the GPU's answers, tested by the twin below);
    out-of-range values saturate at 32 or 64 bits, and 8- and 16-bit targets keep the low bits
    of that."""
    args = _convert_inputs()
    tirx.compile(define(CONVERT_SOURCE, tmp_path, "k"), target="sim")(*args)
    out = dict(zip(_INTS, args[2:]))
    for row in (0, 1):
        assert out["int64"][row, 0] == out["int64"][row, 1] == -(2**63)
        assert out["uint64"][row, 0] == out["uint64"][row, 1] == 2**63
        assert out["int8"][row, 0] == out["uint16"][row, 0] == 0
        assert out["uint64"][row, 4] == out["uint32"][row, 4] == 0  # -1.0: saturates at 0
        assert out["uint64"][row, 19] == 2**64 - 1 and out["int64"][row, 18] == -(2**63)
        assert out["uint8"][row, 9] == 44 and out["uint8"][row, 14] == 255  # 300, 2**32
    assert out["int32"][0, 0] == out["uint32"][0, 1] == 0  # float32
    assert out["int32"][1, 0] == -(2**31) and out["uint32"][1, 1] == 2**31  # float64
    assert out["int64"][1, 26] == -4_500_000_000_000_000  # float64 keeps what float32 rounds
    # a constant folds to the same answers
    for src, row in (("float32", 0), ("float64", 1)):
        nan = ir.Const(float("nan"), dt(src))
        for name in _INTS:
            assert ir.cast(nan, name).value == out[name][row, 0], (src, name)


@pytest.mark.gpu
def test_gpu_float_to_int_at_every_edge(tmp_path):
    """The same conversions on the GPU: every value equal to the simulator's."""
    import torch

    k = define(CONVERT_SOURCE, tmp_path, "k")
    sim = _convert_inputs()
    tirx.compile(k, target="sim")(*sim)
    gpu = [torch.from_numpy(a).cuda() for a in _convert_inputs()]
    tirx.compile(k, target="cuda")(*gpu)
    torch.cuda.synchronize()
    differ = []
    for name, got, want in zip(_INTS, gpu[2:], sim[2:]):
        got = got.cpu().numpy()
        for row, src in enumerate(("float32", "float64")):
            for lane in np.flatnonzero(got[row] != want[row]):
                differ.append(f"{src} {_EDGES[lane]!r} -> {name}: GPU {got[row, lane]} "
                              f"sim {want[row, lane]}")  # fmt: skip
    assert not differ, "\n".join(differ)


def test_a_float32_nan_an_operation_makes_is_the_canonical_one():
    """The GPU writes 0x7fffffff for a float32 NaN it computes, whatever NaN went in
    (measured on an H100, docs/simulator.md "NaN bits"): 0/0, sqrt(-1), a signalling NaN plus
    1; so copysign(1, 0/0) is +1 (numpy's x86 NaN has its sign bit set: it was -1 here)."""
    zero = np.zeros(32, np.float32)
    snan = np.full(32, np.uint32(0x7F800001), np.uint32).view(np.float32)
    for make, inputs in (
        (lambda a: a / a, [zero]),
        (lambda a: a + ir.const(1.0, F32), [snan]),
        (lambda a: a * ir.const(0.0, F32), [np.full(32, np.inf, np.float32)]),
    ):
        out = per_thread(make, "float32", inputs)
        assert (out.view(np.uint32) == 0x7FFFFFFF).all(), hex(out.view(np.uint32)[0])
