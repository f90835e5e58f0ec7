"""Hand-built lowered kernels for the simulator tests, and their end-to-end results.

The builders write the lowered IR directly (what tirx's lowering would produce for the seed
guide's ``warp_matmul`` and for a small tiled GEMM), so these tests need nothing but the IR
node classes. Other ``test_sim*`` files import the builders from here.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from tirx.errors import Span
from tirx.ir import nodes as ir
from tirx.sim import run

I32, U32, F32 = ir.I32, ir.U32, ir.F32
F16 = ir.dtype_of("float16")
BF16 = ir.dtype_of("bfloat16")
LANE = ir.Special(ir.Builtin.LANE_ID)
WARP = ir.Special(ir.Builtin.WARP_ID)
TX = ir.Special(ir.Builtin.THREAD_IDX, 0)
BX = ir.Special(ir.Builtin.BLOCK_IDX, 0)
BY = ir.Special(ir.Builtin.BLOCK_IDX, 1)

MMA_K16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def span(line: int) -> Span:
    return Span("<sim-test>", line, 0)


def gbuf(name, shape, dtype) -> ir.Buffer:
    n = int(np.prod(shape))
    return ir.Buffer(name, ir.dtype_of(dtype), ir.Scope.GLOBAL, tuple(shape), None, n)


def sbuf(name, shape, dtype) -> ir.Buffer:
    n = int(np.prod(shape))
    return ir.Buffer(name, ir.dtype_of(dtype), ir.Scope.SHARED, tuple(shape), None, n)


def lbuf(name, n, dtype) -> ir.Buffer:
    return ir.Buffer(name, ir.dtype_of(dtype), ir.Scope.LOCAL, (n,), None, n)


def var(name, dtype="int32") -> ir.Var:
    return ir.Var(name, ir.dtype_of(dtype))


def seq(*stmts) -> ir.Seq:
    return ir.Seq(tuple(stmts))


def regs(buf, slots, output=False, dtype=None) -> ir.RegVector:
    dtype = dtype or buf.dtype
    return ir.RegVector(tuple(ir.LocalReg(buf, s, dtype) for s in slots), output)


def zeros_c(n=4) -> ir.RegVector:
    return ir.RegVector(tuple(ir.ValueReg(ir.const(0.0)) for _ in range(n)), False)


def function(name, params, body, *, grid=(1, 1, 1), block=(32, 1, 1), allocs=(), variables=()):
    offsets, total = {}, 0
    for b in allocs:
        if b.scope is ir.Scope.SHARED:
            total = -(-total // 16) * 16
            offsets[b] = total
            total += b.nbytes
    return ir.Function(
        name,
        tuple(params),
        body,
        ir.LaunchConfig(tuple(grid), tuple(block)),
        allocations=tuple(allocs),
        variables=tuple(variables),
        lowered=True,
        shared_offsets=offsets,
        shared_bytes=total,
    )


def copy_loop(q, idx, n_iter, dst, src, index_of, stride=32, lane=LANE, line=1):
    """for q in range(n_iter): idx = lane + stride*q; dst[idx] = src[index_of(idx)]."""
    return ir.For(
        q,
        ir.const(0),
        ir.const(n_iter),
        1,
        seq(
            ir.Assign(idx, lane + stride * q, span(line)),
            ir.Store(dst, idx, ir.Load(src, index_of(idx), src.dtype), dst.dtype, span(line + 1)),
        ),
        span=span(line),
    )


def seed_kernel(ab="float16"):
    """The seed guide's warp_matmul: Out(16x8, f32) = A(16x16) @ B(8x16).T, one warp."""
    A, B, Out = gbuf("A", (16, 16), ab), gbuf("B", (8, 16), ab), gbuf("Out", (16, 8), "float32")
    a, b = sbuf("a", (16, 16), ab), sbuf("b", (8, 16), ab)
    ar, br, dr = lbuf("ar", 4, "uint32"), lbuf("br", 2, "uint32"), lbuf("dr", 4, "float32")
    lane, q, index, r = var("lane"), var("q"), var("index"), var("r")
    i = lane // 8
    a_addr = ir.SharedAddress(a, ((i % 2) * 8 + lane % 8) * 32 + (i // 2) * 16)
    lb = lane % 16
    b_addr = ir.SharedAddress(b, (lb % 8) * 32 + (lb // 8) * 16)
    kind = "bf16" if ab == "bfloat16" else "f16"
    body = seq(
        ir.Assign(lane, LANE, span(1)),
        copy_loop(q, index, 8, a, A, lambda x: x, lane=lane, line=2),
        copy_loop(q, index, 4, b, B, lambda x: x, lane=lane, line=4),
        ir.Barrier("cta", span(6)),
        ir.PtxCall(
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
            (regs(ar, range(4), True), ir.AddressOperand(a_addr)),
            span(7),
        ),
        ir.PtxCall(
            "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
            (regs(br, range(2), True), ir.AddressOperand(b_addr)),
            span(8),
        ),
        ir.PtxCall(
            f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32",
            (regs(dr, range(4), True), regs(ar, range(4)), regs(br, range(2)), zeros_c()),
            span(9),
        ),
        ir.For(
            r,
            ir.const(0),
            ir.const(4),
            1,
            ir.Store(
                Out,
                (lane // 4 + 8 * (r // 2)) * 8 + 2 * (lane % 4) + r % 2,
                ir.Load(dr, r, F32),
                F32,
                span(11),
            ),
            span=span(10),
        ),
    )
    return function(
        "warp_matmul",
        (A, B, Out),
        body,
        allocs=(a, b, ar, br, dr),
        variables=(lane, q, index, r),
    )


def gemm_kernel(M=128, N=128, K=128, bm=32, bn=32, bk=32):
    """Out(MxN, f32) = A(MxK) @ B(NxK).T with 4 warps per block, each a 16x16 tile."""
    assert bm == 32 and bn == 32 and bk % 16 == 0
    A, B, Out = (
        gbuf("A", (M, K), "float16"),
        gbuf("B", (N, K), "float16"),
        gbuf("Out", (M, N), "float32"),
    )
    As, Bs = sbuf("As", (bm, bk), "float16"), sbuf("Bs", (bn, bk), "float16")
    af, bf, acc = lbuf("af", 4, "uint32"), lbuf("bf", 4, "uint32"), lbuf("acc", 8, "float32")
    tid, lane, w, k0, kk, q, e, j, r = (var(n) for n in "tid lane w k0 kk q e j r".split())
    wm, wn = w // 2, w % 2
    i = lane // 8
    row_bytes = bk * 2
    a_addr = ir.SharedAddress(
        As, (wm * 16 + (i % 2) * 8 + lane % 8) * row_bytes + (kk * 16 + (i // 2) * 8) * 2
    )
    b_addr = ir.SharedAddress(
        Bs, (wn * 16 + (i // 2) * 8 + lane % 8) * row_bytes + (kk * 16 + (i % 2) * 8) * 2
    )
    copy = ir.For(
        q,
        ir.const(0),
        ir.const(bm * bk // 128),
        1,
        seq(
            ir.Assign(e, tid + 128 * q),
            ir.Store(As, e, ir.Load(A, (BY * bm + e // bk) * K + k0 + e % bk, F16), F16, span(20)),
            ir.Store(Bs, e, ir.Load(B, (BX * bn + e // bk) * K + k0 + e % bk, F16), F16, span(21)),
        ),
    )
    mmas = [
        ir.PtxCall(
            MMA_K16,
            (
                regs(acc, range(4 * jj, 4 * jj + 4), True),
                regs(af, range(4)),
                regs(bf, (2 * jj, 2 * jj + 1)),
                regs(acc, range(4 * jj, 4 * jj + 4)),
            ),
            span(30 + jj),
        )
        for jj in range(2)
    ]
    inner = ir.For(
        kk,
        ir.const(0),
        ir.const(bk // 16),
        1,
        seq(
            ir.PtxCall(
                "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                (regs(af, range(4), True), ir.AddressOperand(a_addr)),
                span(25),
            ),
            ir.PtxCall(
                "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                (regs(bf, range(4), True), ir.AddressOperand(b_addr)),
                span(26),
            ),
            *mmas,
        ),
    )
    body = seq(
        ir.Assign(tid, TX),
        ir.Assign(lane, LANE),
        ir.Assign(w, WARP),
        ir.For(r, ir.const(0), ir.const(8), 1, ir.Store(acc, r, ir.const(0.0), F32)),
        ir.For(
            k0,
            ir.const(0),
            ir.const(K),
            bk,
            seq(copy, ir.Barrier("cta", span(22)), inner, ir.Barrier("cta", span(40))),
        ),
        ir.For(
            j,
            ir.const(0),
            ir.const(2),
            1,
            ir.For(
                r,
                ir.const(0),
                ir.const(4),
                1,
                ir.Store(
                    Out,
                    (BY * bm + wm * 16 + lane // 4 + 8 * (r // 2)) * N
                    + BX * bn
                    + wn * 16
                    + j * 8
                    + 2 * (lane % 4)
                    + r % 2,
                    ir.Load(acc, 4 * j + r, F32),
                    F32,
                    span(50),
                ),
            ),
        ),
    )
    return function(
        "gemm",
        (A, B, Out),
        body,
        grid=(N // bn, M // bm, 1),
        block=(128, 1, 1),
        allocs=(As, Bs, af, bf, acc),
        variables=(tid, lane, w, k0, kk, q, e, j, r),
    )


def integer_matrix(rng, shape, lo=-8, hi=8, dtype=np.float16):
    return rng.integers(lo, hi, size=shape).astype(dtype)


# ------------------------------------------------------------------------------ tests


def test_seed_kernel_matches_numpy_exactly():
    rng = np.random.default_rng(0)
    a = integer_matrix(rng, (16, 16))
    b = integer_matrix(rng, (8, 16))
    out = np.full((16, 8), np.nan, dtype=np.float32)
    run(seed_kernel(), [a, b, out])
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.astype(np.float64).T)


def test_seed_kernel_random_halves_close_to_float64():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((8, 16)).astype(np.float16)
    out = np.zeros((16, 8), dtype=np.float32)
    run(seed_kernel(), [a, b, out])
    ref = (a.astype(np.float64) @ b.astype(np.float64).T).astype(np.float32)
    np.testing.assert_array_equal(out, ref)  # one rounding of an exact sum


def test_seed_kernel_accepts_torch_tensors_in_place():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-4, 4, (16, 16), generator=g).to(torch.float16)
    b = torch.randint(-4, 4, (8, 16), generator=g).to(torch.float16)
    out = torch.zeros((16, 8), dtype=torch.float32)
    run(seed_kernel(), [a, b, out])
    assert torch.equal(out, a.float() @ b.float().T)


def test_seed_kernel_bf16_with_torch():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(2)
    a = torch.randint(-100, 100, (16, 16), generator=g).to(torch.bfloat16)
    b = torch.randint(-100, 100, (8, 16), generator=g).to(torch.bfloat16)
    out = torch.zeros((16, 8), dtype=torch.float32)
    run(seed_kernel("bfloat16"), [a, b, out])
    assert torch.equal(out, a.double().matmul(b.double().T).float())


def test_seed_kernel_repeated_runs_give_the_same_product():
    # its speed is a benchmark (benchmarks/sim_speed.py), not a test
    rng = np.random.default_rng(0)
    a, b = integer_matrix(rng, (16, 16)), integer_matrix(rng, (8, 16))
    fn = seed_kernel()
    want = a.astype(np.float64) @ b.astype(np.float64).T
    for _ in range(3):
        out = np.zeros((16, 8), dtype=np.float32)
        run(fn, [a, b, out])
        np.testing.assert_array_equal(out, want)


def test_gemm_128_matches_numpy():
    # its speed is a benchmark (benchmarks/sim_speed.py), not a test
    rng = np.random.default_rng(3)
    a = integer_matrix(rng, (128, 128), -4, 4)
    b = integer_matrix(rng, (128, 128), -4, 4)
    out = np.zeros((128, 128), dtype=np.float32)
    run(gemm_kernel(), [a, b, out])
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.astype(np.float64).T)


def test_printf_sink_is_per_run():
    x = var("x")
    fn = function(
        "p",
        (),
        seq(
            ir.Assign(x, LANE * 2),
            ir.If(ir.cmp(ir.CmpOp.LT, LANE, 3), ir.Printf("lane %d x=%d\n", (LANE, x))),
        ),
        variables=(x,),
    )
    sink = io.StringIO()
    run(fn, [], stdout=sink)
    assert sink.getvalue() == "lane 0 x=0\nlane 1 x=2\nlane 2 x=4\n"
