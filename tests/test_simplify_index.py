"""Index simplification: the algebra (checked against Python's floor arithmetic by
enumeration), the pass that substitutes named indices, and what it buys on the GPU code."""

from __future__ import annotations

import contextlib
import itertools
import random
import re
import sys

import numpy as np
import pytest

import tirx
from tirx.dtypes import dtype_of
from tirx.ir import nodes as ir
from tirx.ir import simplify
from tirx.ir.printer import print_expr
from tirx.ir.simplify_index import simplify_index, value_range
from tirx.isa import shared_rows

from .helpers import define, evaluate

LANE = ir.Special(ir.Builtin.LANE_ID)
Q = ir.Var("q")
I = ir.Var("i")


def ops(e) -> int:
    if isinstance(e, ir.BinOp):
        return 1 + ops(e.a) + ops(e.b)
    return 0


CASES = [
    ((I // 16) * 16 + I % 16, "i"),
    (I // 8 % 2 * 8 + I // 16 * 16 + I % 8, "i"),
    (I // 4 % 2 * 4 + I // 8 * 8 + I % 4 + 1, "i + 1"),
    (I // 8 % 2 * 8 + I % 8, "i % 16"),
    ((LANE // 4 + 8 * (Q // 2)) * 8 + (2 * (LANE % 4) + Q % 2), None),
    ((LANE + 32 * Q) // 16, "q * 2 + T.cuda.lane_id() // 16"),
    ((LANE % 8 + 8 * Q) // 8, "q"),
    ((LANE % 8 + 8 * Q) % 8, "T.cuda.lane_id() % 8"),
    ((I + 3) * 4 + 5 - I * 4, "17"),
    (I // 2 // 4, "i // 8"),
    (I % 12 % 4, "i % 4"),
]


@pytest.mark.parametrize("e, want", CASES, ids=[print_expr(c[0]) for c in CASES])
def test_rules(e, want):
    got = simplify_index(e, {Q: (0, 7)})
    if want is not None:
        assert print_expr(got) == want
    assert ops(got) <= ops(e)
    for lane, q, i in itertools.product(range(0, 32, 3), range(8), range(-70, 70, 9)):
        env = {"lane": lane, "q": q, "i": i}
        assert evaluate(got, env) == evaluate(e, env)


def random_index(rng: random.Random, depth: int):
    """A random index in the shape layouts produce: sums of scaled splits of thread and loop
    values and named indices."""
    if depth == 0:
        return rng.choice([LANE, Q, I, ir.const(rng.randint(0, 9))])
    kind = rng.choice(["add", "sub", "mul", "div", "mod", "pair"])
    a = random_index(rng, depth - 1)
    if kind == "pair":  # a split layouts make: (a // c) * c * k + (a % c) * k
        c, k = rng.choice([2, 4, 8, 16]), rng.choice([1, 2, 3])
        return (a // c) * (c * k) + (a % c) * k
    if kind in ("div", "mod"):
        c = rng.choice([1, 2, 3, 4, 8, 16])
        return a // c if kind == "div" else a % c
    b = random_index(rng, depth - 1) if kind != "mul" else ir.const(rng.randint(-3, 8))
    return {"add": a + b, "sub": a - b, "mul": a * b}[kind]


def test_random_indices_keep_their_values():
    rng = random.Random(20261201)
    points = [
        {"lane": lane, "q": q, "i": i}
        for lane, q, i in itertools.product(range(0, 32, 5), range(0, 8, 3), range(-40, 41, 9))
    ]
    smaller = 0
    for _ in range(120):
        e = random_index(rng, rng.randint(1, 4))
        got = simplify_index(e, {Q: (0, 7)})
        smaller += ops(got) < ops(e)
        for env in points:
            assert evaluate(got, env) == evaluate(e, env), (print_expr(e), print_expr(got))
    assert smaller > 30  # it does something


def test_ranges():
    assert value_range(LANE % 8 * 4 + 3) == (3, 31)
    assert value_range(Q * 16 + LANE // 8, {Q: (0, 7)}) == (0, 115)
    assert value_range(I % 5) == (0, 4)
    assert value_range(I + 1) is None


def test_dtypes_are_not_mixed():
    w = ir.Var("w", dtype_of("int64"))
    e = ir.cast(I * 3, "int64") + w * 2 - w * 2
    got = simplify_index(e)
    assert print_expr(got).count("w") == 0 and got.dtype.name == "int64"
    for i in range(-5, 5):
        assert evaluate(got, {"i": i, "w": 7}) == 3 * i


# ----------------------------------------------------------------------- the pass


def stores(fn):
    out = []

    def walk(s):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, (ir.For, ir.While)):
            walk(s.body)
        elif isinstance(s, ir.If):
            walk(s.then_body)
            if s.else_body is not None:
                walk(s.else_body)
        elif isinstance(s, ir.Store):
            out.append(s)

    walk(fn.body)
    return out


PASS = """
@T.function
def kernel(A: T.Tensor((64, 8), "int32"), Out: T.Tensor((64, 8), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    for q in T.unroll(16):
        idx = tid + 32 * q
        Out[idx // 8, idx % 8] = A[idx // 8, idx % 8]
    last = 0
    for q2 in range(2):
        last = tid + 32 * q2
    Out[last // 8, last % 8] = 7
    k = tid
    if tid < 4:
        k = tid + 1
    Out[k // 8 + 60, k % 8] = 9
"""


def test_named_index_is_substituted_and_simplified(tmp_path):
    exe = tirx.compile(define(PASS, tmp_path, "kernel"), "sim")
    first = stores(exe.lowered)[0]
    assert print_expr(first.index) == 'T.cuda.thread_idx("x") + q * 32'
    # `last` and `k` are assigned twice: their stores keep the variables
    text = [print_expr(s.index) for s in stores(exe.lowered)]
    assert any("last" in t for t in text) and any("k" in t for t in text)
    a = np.arange(512, dtype=np.int32).reshape(64, 8)
    out = np.zeros_like(a)
    exe(a, out)
    want = a.copy()
    want.reshape(-1)[32 + np.arange(32)] = 7  # last = tid + 32 after the loop
    k = np.arange(32) + (np.arange(32) < 4)
    want[k // 8 + 60, k % 8] = 9
    assert np.array_equal(out, want)


def test_the_cuda_target_runs_the_same_simplified_ir(tmp_path):
    kernel = define(PASS, tmp_path, "kernel")
    sim, cuda = tirx.compile(kernel, "sim"), tirx.compile(kernel, "cuda -arch=sm_90")
    assert [print_expr(s.index) for s in stores(sim.lowered)] == [
        print_expr(s.index) for s in stores(cuda.lowered)
    ]
    assert "Out[(((int)threadIdx.x) + (q * 32))] = A[(((int)threadIdx.x) + (q * 32))];" in (
        cuda.source
    )


# ---------------------------------------------------------------- what the GPU code gets


def test_seed_kernel_registers_on_sm90():
    from tirx.examples.warp_matmul import warp_matmul

    exe = tirx.compile(warp_matmul, "cuda -arch=sm_90")
    assert exe.stats["registers"] <= 26  # 38 before index simplification; the real TIRx: 26
    assert "a[index] = A[index];" in exe.source  # (index // 16) * 16 + index % 16 folded


def test_gemm_inner_loop_has_no_per_element_64bit_addresses():
    from tirx.examples.gemm import make_gemm

    exe = tirx.compile(make_gemm(256, 256, 256), "cuda -arch=sm_90")
    if exe.sass is None:
        pytest.skip("no SASS disassembler (install the sass extra)")
    loop = exe.sass.split(".L_x_0:", 1)[1].split("BRA", 1)[0]
    loads = len(re.findall(r"\bLDG\.", loop))
    wide = len(re.findall(r"\bIMAD\.WIDE\b", loop))
    assert loads >= 16  # the K step's global loads are in the loop
    assert wide * 4 <= loads  # one 64-bit base per tensor and step, immediates for the rest
    assert exe.stats["registers"] <= 56  # 72 before


# ------------------------------------------------------------------ no recursion


@contextlib.contextmanager
def _little_stack(frames: int = 150):
    """Python's recursion limit set a few frames above the caller's depth: a walk that
    recursed once per term of a long sum would raise RecursionError."""
    depth, f = 0, sys._getframe()
    while f is not None:
        depth, f = depth + 1, f.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _long_sum(term, n: int):
    """``term + term + ... + term`` (n terms), nested as the parser builds it."""
    e = term
    for _ in range(n - 1):
        e = ir.BinOp(ir.Op.ADD, e, term, term.dtype)
    return e


def test_long_sums_are_simplified_without_recursion():
    n = 2000
    deep = _long_sum(LANE, n)
    with _little_stack():
        bounds = value_range(deep)
        mod = simplify_index(ir.BinOp(ir.Op.FLOORMOD, deep, ir.const(32), deep.dtype))
        div = simplify_index(ir.BinOp(ir.Op.FLOORDIV, deep * 8, ir.const(8), deep.dtype))
    assert bounds == (0, 31 * n)
    for lane in range(32):
        assert evaluate(mod, {"lane": lane}) == (n * lane) % 32
        assert evaluate(div, {"lane": lane}) == n * lane


def test_structural_keys_of_long_sums_need_no_recursion():
    with _little_stack():
        simplify.structural_key(_long_sum(LANE % 8, 2000))  # built without recursion
    # (comparing keys nests as deep as the sum in CPython's tuple comparison: kept short)
    n = 200
    one, twin = _long_sum(LANE % 8, n), _long_sum(LANE % 8, n)
    other = ir.BinOp(ir.Op.ADD, _long_sum(LANE % 8, n - 1), LANE % 4, LANE.dtype)
    assert simplify.structural_key(one) == simplify.structural_key(twin)
    assert simplify.structural_key(one) != simplify.structural_key(other)
    load = ir.Load(ir.Buffer("b", LANE.dtype, ir.Scope.SHARED, (8,), None, 8), 3, LANE.dtype)
    # a load with a constant index is keyed as one with that index written as a Const
    assert simplify.structural_key(load) == simplify.structural_key(
        ir.Load(load.buffer, ir.Const(3), LANE.dtype)
    )


def test_row_residues_see_through_long_definitions():
    # col = lane*8 + lane*8 + ... : a multiple of 8 wherever it is read
    col = ir.Var("col")
    body = ir.Seq((ir.Assign(col, _long_sum(LANE * 8, 2000)),))
    fn = ir.Function("k", (), body, ir.LaunchConfig((1, 1, 1), (32, 1, 1)))
    with _little_stack(), shared_rows.known_definitions(fn):
        assert shared_rows.residue(col + 4, 8) == 4
        assert shared_rows.residue(col + LANE, 8) is None


def _row_view(offset, row_stride: int, rows: int = 4):
    """A float16 view of ``rows`` rows of 8 elements, ``row_stride`` apart, at ``offset``."""
    from tirx.layout import S, TileLayout

    buf = ir.Buffer("s", dtype_of("float16"), ir.Scope.SHARED, (64, 64), None, 16)
    layout = TileLayout(S[(rows, 8) : (row_stride, 1)])
    return ir.View(buf, dtype_of("float16"), (rows, 8), layout, offset)


@pytest.mark.parametrize(
    ("offset", "row_stride", "error"),
    [
        (LANE * 64, 64, None),  # every row 16-byte aligned, at a run-time start
        (LANE * 64 + 8, 64, None),
        (LANE * 64, 68, "row (1,) starts at 8 bytes past a multiple of 16"),  # the stride breaks it
        (LANE * 64 + 2, 64, "row (0,) starts at 4 bytes past a multiple of 16"),
        (LANE * 4, 64, None),  # the start's alignment is not known: left to run time
    ],
)
def test_rows_at_a_run_time_start_are_checked_as_each_row_alone_would_be(offset, row_stride, error):
    """check_rows proves the run-time start's remainder once and adds each row's constant
    offset; the verdict is the one the row-by-row analysis gives."""
    from tirx.errors import ContractError

    need = shared_rows.RowCheck("ldmatrix", 16, 16)
    view = _row_view(offset, row_stride)
    per_row = [shared_rows.residue(offset + i * row_stride, 8) for i in range(4)]
    if error is None:
        shared_rows.check_rows(view, need)
        assert all(r in (0, None) for r in per_row)
    else:
        with pytest.raises(ContractError, match=re.escape(error)):
            shared_rows.check_rows(view, need)
        assert any(r not in (0, None) for r in per_row)
