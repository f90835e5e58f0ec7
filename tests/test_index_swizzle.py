"""Index simplification of XOR swizzles and of indices inside branches on a loop variable.

A swizzled shared tile's address is ``x ^ ((x >> a) & mask)`` (or ``x ^ ((x & mask) << a)``)
over the whole linear offset ``x``; the simplifier takes the terms that are multiples of the
swizzle's period out of the XOR (stage, warp and repeat offsets), so they become additions and
immediates. Checked by enumeration against Python's integers, with twins where the split would
be wrong (a low part that can reach the period) and must not happen; and on the GEMM's machine
code, whose main loop this rule and the branch ranges cut from 399 instructions to 249.
"""

from __future__ import annotations

import itertools
import re

import pytest

import tirx
from tirx.ir import nodes as ir
from tirx.ir.printer import print_expr
from tirx.ir.simplify_index import simplify_index
from tirx.transform.inline_indices import _branch_ranges

from .helpers import define, evaluate

LANE = ir.Special(ir.Builtin.LANE_ID)
S = ir.Var("s")  # a stage index, 0..2
KP = ir.Var("kp")  # an unrolled slice index, 0..1
RANGES = {S: (0, 2), KP: (0, 1)}


def inner(x, shift=3, mask=28):
    return x ^ ((x >> shift) & mask)


def outer(x, shift=3, mask=28):
    return x ^ ((x & mask) << shift)


def xors(e):
    """The XOR nodes of ``e``."""
    out, todo = [], [e]
    while todo:
        x = todo.pop()
        if isinstance(x, ir.BinOp):
            if x.op is ir.Op.BITXOR:
                out.append(x)
            todo += (x.a, x.b)
        elif isinstance(x, ir.Cast):
            todo.append(x.value)
    return out


def mentions(e, name: str) -> bool:
    return name in print_expr(e)


def same_values(a, b):
    for lane, s, kp in itertools.product(range(32), range(3), range(2)):
        env = {"lane": lane, "s": s, "kp": kp}
        assert evaluate(a, env) == evaluate(b, env), (env, print_expr(a), print_expr(b))


# the ldmatrix address of the GEMM's A tile in words: stage, row within the warp tile, chunk
LDSM_A = S * 4096 + KP * 16 + (LANE // 16) * 4 + (LANE % 16) * 32


@pytest.mark.parametrize("form", [inner, outer], ids=["inner", "outer"])
@pytest.mark.parametrize("offset", [0, 8, 520, 1544])
def test_period_multiples_leave_the_swizzle(form, offset):
    e = form(LDSM_A + offset)
    got = simplify_index(e, RANGES)
    same_values(got, e)
    (x,) = xors(got)
    assert not mentions(x, "s")  # the stage offset is an addition outside the XOR
    assert not re.search(r"\b(520|1544)\b", print_expr(x))  # so is the repeat's constant


def test_a_term_that_reaches_past_the_period_is_split():
    # (lane % 16) * 32 reaches 480 >= 256: its bit 8 goes out, ((lane % 16) // 8) * 256
    got = simplify_index(inner(LDSM_A), RANGES)
    outside = print_expr(got).split("^")[0]
    assert "// 8) * 256" in outside or "// 8 * 256" in outside, print_expr(got)


def test_a_low_part_that_can_carry_into_the_swizzle_bits_stays_as_written():
    # kp * 16 + 16 reaches 32 for kp == 1: that carry changes the row bits the XOR reads, so
    # no split is exact; the twin with kp fixed at 0 splits
    e = inner(LDSM_A + 16)
    got = simplify_index(e, RANGES)
    same_values(got, e)
    (x,) = xors(got)
    assert mentions(x, "s")  # not split
    twin = simplify_index(e, {**RANGES, KP: (0, 0)})
    for lane, s in itertools.product(range(32), range(3)):
        env = {"lane": lane, "s": s, "kp": 0}
        assert evaluate(twin, env) == evaluate(e, env)
    (x,) = xors(twin)
    assert not mentions(x, "s")


def test_a_negative_coefficient_or_an_unknown_range_is_left_alone():
    i = ir.Var("i")
    e = inner(i * 4 - LANE)  # i unbounded, a negative term: no provable low part
    got = simplify_index(e, {})
    for iv, lane in itertools.product(range(-40, 40, 7), range(32)):
        env = {"i": iv, "lane": lane}
        assert evaluate(got, env) == evaluate(e, env)


def test_not_a_swizzle_is_not_touched():
    # the XOR's other side does not read the same x: no rule applies
    e = (LDSM_A + 8) ^ (((LDSM_A + 16) >> 3) & 28)
    got = simplify_index(e, RANGES)
    same_values(got, e)
    assert mentions(xors(got)[0], "s")


# -------------------------------------------------------------- ranges inside branches


def test_branch_ranges_narrow_a_loop_variable():
    q = ir.Var("q")
    ranges = {q: (0, 3)}
    then, other = _branch_ranges(ir.cmp(ir.CmpOp.EQ, q, ir.const(3)), ranges)
    assert then[q] == (3, 3) and other[q] == (0, 2)
    then, other = _branch_ranges(ir.cmp(ir.CmpOp.LT, q, ir.const(2)), ranges)
    assert then[q] == (0, 1) and other[q] == (2, 3)
    then, other = _branch_ranges(ir.cmp(ir.CmpOp.GT, ir.const(1), q), ranges)  # 1 > q
    assert then[q] == (0, 0) and other[q] == (1, 3)
    then, other = _branch_ranges(ir.cmp(ir.CmpOp.NE, q, ir.const(1)), ranges)
    assert then is ranges and other[q] == (1, 1)  # q != 1 in the middle: nothing to learn
    # a variable without a known range, or a condition of another shape: nothing changes
    w = ir.Var("w")
    assert _branch_ranges(ir.cmp(ir.CmpOp.EQ, w, ir.const(0)), ranges) == (ranges, ranges)
    assert _branch_ranges(ir.cmp(ir.CmpOp.EQ, q, w), ranges) == (ranges, ranges)


BRANCH = """
@T.function
def kernel(Out: T.Tensor((32, 4), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    for q in T.unroll(4):
        if q < 2:
            Out[tid, (q * 8 + tid % 8) // 16] = q + 1
        else:
            Out[tid, (q * 8 + tid % 8) // 16 + 1] = q + 1
"""


def test_an_index_inside_a_branch_uses_the_branch_range(tmp_path):
    import numpy as np

    exe = tirx.compile(define(BRANCH, tmp_path, "kernel"), "sim")
    text = []

    def walk(s):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, ir.For):
            walk(s.body)
        elif isinstance(s, ir.If):
            walk(s.then_body)
            walk(s.else_body)
        elif isinstance(s, ir.Store):
            text.append(print_expr(s.index))

    walk(exe.lowered.body)
    then, other = text
    assert "//" not in then  # q < 2: (q * 8 + tid % 8) // 16 is 0
    assert "//" not in other  # q in 2..3: q * 8 + tid % 8 lies in [16, 32), its // 16 is 1
    out = np.zeros((32, 4), dtype=np.int32)
    exe(out)
    want = np.zeros((32, 4), dtype=np.int32)
    for q in range(4):
        col = (q * 8 + np.arange(32) % 8) // 16 + (q >= 2)
        want[np.arange(32), col] = q + 1
    assert np.array_equal(out, want)


# ------------------------------------------------------------------ the GEMM's main loop


def _main_loop(sass: str) -> list[str]:
    """The instructions of the K loop: the shortest loop (a label and a backward branch to it)
    that issues mma.sync."""
    loops = []
    for label in re.findall(r"^\s*(\.L_x_\d+):", sass, re.M):
        after = sass.split(f"{label}:", 1)[1]
        if f"BRA `({label})" in after:
            body = after.split(f"BRA `({label})", 1)[0]
            loops.append(re.findall(r"/\*[0-9a-f]+\*/\s+([^;]+);", body))
    return min((b for b in loops if any(i.startswith("HMMA") for i in b)), key=len)


@pytest.mark.parametrize("bn, warps_n", [(128, 2), (256, 4)])
def test_gemm_main_loop_addresses_are_hoisted(bn, warps_n):
    from tirx.examples import gemm_pipelined as gp

    cfg = gp.GemmConfig(bn=bn, warps_n=warps_n)
    exe = tirx.compile(gp.make_gemm_pipelined(1024, 1024, 1024, "float16", cfg), "cuda -arch=sm_90")
    if exe.sass is None:
        pytest.skip("no SASS disassembler (install the sass extra)")
    loop = _main_loop(exe.sass)
    hmma = [i for i in loop if i.startswith("HMMA")]
    ldsm = [i for i in loop if "LDSM" in i]
    assert len(hmma) == 128 and len(ldsm) == 32
    # each warp's fragments: one address register per K slice and operand, the 16-row
    # repeats as immediates (before: every ldmatrix rebuilt its swizzled address, 3-4
    # instructions each)
    assert sum("+0x" in i for i in ldsm) >= 16
    other = [i for i in loop if not re.match(r"(@!?U?P\w+\s+)?(HMMA|LDSM|LDGSTS|LDS\b)", i)]
    assert len(other) <= 80, len(other)  # 219 before the swizzle rule and branch ranges (now 69)
