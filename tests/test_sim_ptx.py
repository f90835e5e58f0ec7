"""Each PTX instruction form against a numpy model of the PTX ISA's description.

The models here are deliberately written as plain loops over lanes and elements, straight
from the ISA's sentences, so they share no code with the vectorized implementation.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_sim_kernels import LANE, function, gbuf, lbuf, regs, sbuf, seq, span, var
from tirx.errors import SimulationError
from tirx.families.ldmatrix.sim import parse as parse_ldmatrix
from tirx.families.mma.sim_math import Element, Mma, fragment, parse_mma
from tirx.families.stmatrix.sim import parse as parse_stmatrix
from tirx.ir import nodes as ir
from tirx.sim import run


def parse_instruction(text: str):
    """The simulator's reading of a warp-matrix text (None: not a form it runs)."""
    return parse_mma(text) or parse_ldmatrix(text) or parse_stmatrix(text)


U16, U32, F32 = ir.dtype_of("uint16"), ir.U32, ir.F32
ROWS = 64  # rows of 16 bytes in the test's shared buffer


# ------------------------------------------------------------------------ ISA models


def isa_ldmatrix(rows16: np.ndarray, num: int, trans: bool) -> np.ndarray:
    """rows16[lane] = the 8 halves at lane's address. Returns words[lane, i]."""
    words = np.zeros((32, num), dtype=np.uint32)
    for lane in range(32):
        for i in range(num):
            m = rows16[8 * i : 8 * i + 8]  # matrix i: row r from lane 8i + r
            g, t = lane // 4, lane % 4
            if trans:
                lo, hi = m[2 * t][g], m[2 * t + 1][g]
            else:
                lo, hi = m[g][2 * t], m[g][2 * t + 1]
            words[lane, i] = int(lo) | (int(hi) << 16)
    return words


def isa_stmatrix(words: np.ndarray, num: int, trans: bool) -> np.ndarray:
    """words[lane, i] → matrices[i, row, col] of 16-bit values."""
    mats = np.zeros((num, 8, 8), dtype=np.uint16)
    for lane in range(32):
        for i in range(num):
            g, t = lane // 4, lane % 4
            lo, hi = int(words[lane, i]) & 0xFFFF, int(words[lane, i]) >> 16
            if trans:
                mats[i][2 * t][g], mats[i][2 * t + 1][g] = lo, hi
            else:
                mats[i][g][2 * t], mats[i][g][2 * t + 1] = lo, hi
    return mats


def isa_mma(k: int, a_regs, b_regs, c, decode) -> np.ndarray:
    """m16n8k{k}: a_regs[lane, k/4], b_regs[lane, k/8] u32, c[lane, 4] → d[lane, 4]."""
    A, B, C = np.zeros((16, k)), np.zeros((k, 8)), np.zeros((16, 8))
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(k // 2):  # a_i: register i // 2, low half when i is even
            half = (int(a_regs[lane, i // 2]) >> (16 * (i % 2))) & 0xFFFF
            row = g if (i < 2 or 4 <= i < 6) else g + 8
            col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
            A[row, col] = decode(half)
        for i in range(k // 4):
            half = (int(b_regs[lane, i // 2]) >> (16 * (i % 2))) & 0xFFFF
            row = t * 2 + (i & 1) + (8 if i >= 2 else 0)
            B[row, g] = decode(half)
        for i in range(4):
            C[g if i < 2 else g + 8, t * 2 + (i & 1)] = c[lane, i]
    D = A @ B + C
    d = np.zeros((32, 4), dtype=np.float32)
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(4):
            d[lane, i] = D[g if i < 2 else g + 8, t * 2 + (i & 1)]
    return d


def f16_decode(h: int) -> float:
    return float(np.array(h, dtype=np.uint16).view(np.float16))


def bf16_decode(h: int) -> float:
    return float(np.array(h << 16, dtype=np.uint32).view(np.float32))


# -------------------------------------------------------------------------- kernels


def matrix_kernel(op: str, num: int, trans: bool, slots):
    """ldmatrix/stmatrix with row addresses from a permutation table Perm[lane]."""
    Src, Perm = gbuf("Src", (ROWS * 8,), "uint16"), gbuf("Perm", (32,), "int32")
    Regs, Out = gbuf("Regs", (32 * num,), "uint32"), gbuf("Out", (ROWS * 8,), "uint16")
    s = sbuf("s", (ROWS * 8,), "uint16")
    r = lbuf("r", 4, "uint32")
    q, x, i = var("q"), var("x"), var("i")
    addr = ir.SharedAddress(s, ir.Load(Perm, LANE, ir.I32) * 16)
    text = f"{op}.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16"

    def each(body, n=ROWS * 8 // 32):
        return ir.For(q, ir.const(0), ir.const(n), 1, seq(ir.Assign(x, LANE + 32 * q), body))

    reg_vec = regs(r, slots[:num], output=op == "ldmatrix")
    if op == "ldmatrix":
        body = seq(
            each(ir.Store(s, x, ir.Load(Src, x, U16), U16)),
            ir.Barrier("cta"),
            ir.PtxCall(text, (reg_vec, ir.AddressOperand(addr)), span(5)),
            *[ir.Store(Regs, LANE * num + k, ir.Load(r, slots[k], U32), U32) for k in range(num)],
        )
    else:
        body = seq(
            each(ir.Store(s, x, ir.const(0, U16), U16)),
            ir.Barrier("warp"),  # the zero fill by other lanes, before stmatrix overwrites it
            *[ir.Store(r, slots[k], ir.Load(Regs, LANE * num + k, U32), U32) for k in range(num)],
            ir.PtxCall(text, (ir.AddressOperand(addr), reg_vec), span(5)),
            ir.Barrier("cta"),
            each(ir.Store(Out, x, ir.Load(s, x, U16), U16)),
        )
    return function(op, (Src, Perm, Regs, Out), body, allocs=(s, r), variables=(q, x, i))


def mma_kernel(k: int, ab: str, c_from_regs: bool = True):
    Ain, Bin = gbuf("Ain", (32, k // 4), "uint32"), gbuf("Bin", (32, k // 8), "uint32")
    Cin, Dout = gbuf("Cin", (32, 4), "float32"), gbuf("Dout", (32, 4), "float32")
    a, b, c, d = (
        lbuf("a", 4, "uint32"),
        lbuf("b", 2, "uint32"),
        lbuf("c", 4, "float32"),
        lbuf("d", 4, "float32"),
    )
    loads = [ir.Store(a, j, ir.Load(Ain, LANE * (k // 4) + j, U32), U32) for j in range(k // 4)] + [
        ir.Store(b, j, ir.Load(Bin, LANE * (k // 8) + j, U32), U32) for j in range(k // 8)
    ]
    loads += [ir.Store(c, j, ir.Load(Cin, LANE * 4 + j, F32), F32) for j in range(4)]
    c_op = (
        regs(c, range(4))
        if c_from_regs
        else ir.RegVector(tuple(ir.ValueReg(ir.const(1.5)) for _ in range(4)), False)
    )
    text = f"mma.sync.aligned.m16n8k{k}.row.col.f32.{ab}.{ab}.f32"
    body = seq(
        *loads,
        ir.PtxCall(
            text, (regs(d, range(4), True), regs(a, range(k // 4)), regs(b, range(k // 8)), c_op)
        ),
        *[ir.Store(Dout, LANE * 4 + j, ir.Load(d, j, F32), F32) for j in range(4)],
    )
    return function("mma", (Ain, Bin, Cin, Dout), body, allocs=(a, b, c, d))


# ---------------------------------------------------------------------------- tests


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_matches_isa(num, trans):
    rng = np.random.default_rng(10 * num + trans)
    src = rng.integers(0, 2**16, size=ROWS * 8, dtype=np.uint16)
    perm = rng.permutation(ROWS)[:32].astype(np.int32)  # rows anywhere, in any order
    out_regs = np.zeros(32 * num, dtype=np.uint32)
    slots = [3, 0, 2, 1]
    run(
        matrix_kernel("ldmatrix", num, trans, slots),
        [src, perm, out_regs, np.zeros(ROWS * 8, np.uint16)],
    )
    rows16 = src.reshape(ROWS, 8)[perm]
    np.testing.assert_array_equal(out_regs.reshape(32, num), isa_ldmatrix(rows16, num, trans))


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_matches_isa(num, trans):
    rng = np.random.default_rng(100 + 10 * num + trans)
    words = rng.integers(0, 2**32, size=32 * num, dtype=np.uint32)
    perm = rng.permutation(ROWS)[:32].astype(np.int32)
    out = np.zeros(ROWS * 8, dtype=np.uint16)
    run(
        matrix_kernel("stmatrix", num, trans, [1, 3, 0, 2]),
        [np.zeros(ROWS * 8, np.uint16), perm, words, out],
    )
    expected = np.zeros((ROWS, 8), dtype=np.uint16)
    mats = isa_stmatrix(words.reshape(32, num), num, trans)
    for i in range(num):
        for row in range(8):
            expected[perm[8 * i + row]] = mats[i][row]
    np.testing.assert_array_equal(out.reshape(ROWS, 8), expected)


def test_ldmatrix_x1_ignores_addresses_of_upper_lanes():
    # Lanes 8..31 supply addresses outside the allocation: x1 must not use them.
    rng = np.random.default_rng(5)
    src = rng.integers(0, 2**16, size=ROWS * 8, dtype=np.uint16)
    perm = np.concatenate([np.arange(8), np.full(24, 10_000)]).astype(np.int32)
    out_regs = np.zeros(32, dtype=np.uint32)
    run(
        matrix_kernel("ldmatrix", 1, False, [0]),
        [src, perm, out_regs, np.zeros(ROWS * 8, np.uint16)],
    )
    np.testing.assert_array_equal(
        out_regs.reshape(32, 1), isa_ldmatrix(src.reshape(ROWS, 8)[:8], 1, False)
    )


@pytest.mark.parametrize("k", [8, 16])
@pytest.mark.parametrize("ab", ["f16", "bf16"])
def test_mma_matches_isa_exactly_on_integers(k, ab):
    rng = np.random.default_rng(k + (ab == "bf16"))
    vals = rng.integers(-16, 16, size=(32, k // 2)).astype(np.float32)
    if ab == "f16":
        halves = vals.astype(np.float16).view(np.uint16)
        decode = f16_decode
    else:
        halves = (vals.view(np.uint32) >> 16).astype(np.uint16)
        decode = bf16_decode
    a_regs = halves[:, 0::2].astype(np.uint32) | (halves[:, 1::2].astype(np.uint32) << 16)
    b_vals = rng.integers(-16, 16, size=(32, k // 4)).astype(np.float32)
    bh = (
        b_vals.astype(np.float16).view(np.uint16)
        if ab == "f16"
        else (b_vals.view(np.uint32) >> 16).astype(np.uint16)
    )
    b_regs = bh[:, 0::2].astype(np.uint32) | (bh[:, 1::2].astype(np.uint32) << 16)
    c = rng.integers(-100, 100, size=(32, 4)).astype(np.float32)
    d = np.zeros((32, 4), dtype=np.float32)
    run(mma_kernel(k, ab), [a_regs, b_regs, c, d])
    np.testing.assert_array_equal(d, isa_mma(k, a_regs, b_regs, c, decode))


@pytest.mark.parametrize("k", [8, 16])
def test_mma_random_halves_one_rounding(k):
    rng = np.random.default_rng(7 + k)
    a_regs = rng.integers(0, 2**32, size=(32, k // 4), dtype=np.uint32) & np.uint32(0x3BFF3BFF)
    b_regs = rng.integers(0, 2**32, size=(32, k // 8), dtype=np.uint32) & np.uint32(0x3BFF3BFF)
    c = rng.standard_normal((32, 4)).astype(np.float32)
    d = np.zeros((32, 4), dtype=np.float32)
    run(mma_kernel(k, "f16"), [a_regs, b_regs, c, d])
    np.testing.assert_array_equal(d, isa_mma(k, a_regs, b_regs, c, f16_decode))


def test_mma_value_operand_for_c():
    a_regs = np.full((32, 4), 0x3C003C00, dtype=np.uint32)  # all ones (f16 1.0)
    b_regs = np.full((32, 2), 0x40004000, dtype=np.uint32)  # all twos
    d = np.zeros((32, 4), dtype=np.float32)
    run(
        mma_kernel(16, "f16", c_from_regs=False), [a_regs, b_regs, np.zeros((32, 4), np.float32), d]
    )
    np.testing.assert_array_equal(d, np.full((32, 4), 16 * 2 + 1.5, dtype=np.float32))


def test_fragment_tables_cover_each_element_once():
    for text in MMA_FORMS:
        op = parse_instruction(text)
        for role, (nr, nc) in {"a": (16, op.k), "b": (op.k, 8), "c": (16, 8)}.items():
            rows, cols = fragment(op, role)
            assert sorted(zip(rows.ravel(), cols.ravel())) == [
                (r, c) for r in range(nr) for c in range(nc)
            ], (text, role)


def test_parse_instruction_forms():
    assert parse_instruction("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32") == Mma(
        8, Element.BF16, Element.BF16, Element.F32
    )
    sat = parse_instruction("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32")
    assert sat == Mma(32, Element.U8, Element.S8, Element.S32, True)
    assert (sat.a_regs, sat.b_regs, sat.regs("c")) == (4, 2, 4)
    f16 = parse_instruction("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16")
    assert (f16.a_regs, f16.b_regs, f16.regs("d")) == (2, 1, 2)
    tf32 = parse_instruction("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32")
    assert (tf32.a_regs, tf32.b_regs, tf32.regs("c")) == (2, 1, 4)
    assert parse_instruction("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16").trans
    assert parse_instruction("stmatrix.sync.aligned.m8n8.x2.shared::cta.b16").num == 2
    for bad in (
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.bf16.f32",  # mixed A/B types
        "mma.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32",
        "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f32",  # ptxas: D must be C's type
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16",
        "mma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f16",  # bf16 accumulates in f32
        "mma.sync.aligned.m16n8k16.row.col.satfinite.f32.f16.f16.f32",
        "mma.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32",
        "mma.sync.aligned.m16n8k8.row.col.s32.s8.s8.s32",
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s4.s32",
        "ldmatrix.sync.aligned.m8n8.x3.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b8",
        "add.s32",
    ):
        assert parse_instruction(bad) is None


def test_unknown_instruction_is_rejected_with_its_span():
    fn = function("f", (), ir.PtxCall("add.s32", (), span(42)))
    with pytest.raises(SimulationError, match="unknown PTX instruction") as info:
        run(fn, [])
    assert info.value.span == span(42)


def test_mma_operand_count_and_register_width_are_checked():
    d, a = lbuf("d", 4, "float32"), lbuf("a", 4, "uint16")
    text = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    bad_width = ir.PtxCall(
        text, (regs(d, range(4), True), regs(a, range(4)), regs(a, range(2)), regs(d, range(4)))
    )
    with pytest.raises(SimulationError, match="32-bit"):
        run(function("f", (), bad_width, allocs=(d, a)), [])
    few = ir.PtxCall(text, (regs(d, range(4), True),))
    with pytest.raises(SimulationError, match="4 operands"):
        run(function("f", (), few, allocs=(d, a)), [])


# ------------------------------------------------------- the rest of the mma.sync family
#
# A second, loop-by-loop model of the ISA's fragment sentences for the tf32, int8 and
# f16-accumulate forms (register counts from the ISA's operand tables).

MMA_FORMS = [
    "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32",
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16",
    "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
    "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32",
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    *[
        f"mma.sync.aligned.m16n8k{k}.row.col{sat}.s32.{a}.{b}.s32"
        for k in (16, 32)
        for sat in ("", ".satfinite")
        for a in ("s8", "u8")
        for b in ("s8", "u8")
    ],
]
NEW_FORMS = [t for t in MMA_FORMS if "f32.f16.f16.f32" not in t and "bf16" not in t]


def _field(reg: int, i: int, bits: int) -> int:
    return (int(reg) >> (bits * i)) & ((1 << bits) - 1)


def _int8(v: int, signed: bool) -> int:
    return v - 256 if signed and v >= 128 else v


def isa_new_mma(text: str, a_regs, b_regs, c_regs) -> np.ndarray:
    """D registers [32, nd] (uint32) of one new form, by loops over the ISA's formulas."""
    parts = text.split(".")
    k = int(parts[3].split("k")[1])
    dtype, atype, btype, ctype = parts[-4:]
    A = np.zeros((16, k), dtype=object)
    B = np.zeros((k, 8), dtype=object)
    C = np.zeros((16, 8), dtype=object)
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        if atype == "tf32":  # one element per .b32 register; the low 13 bits are ignored
            for i in range(k // 2):
                row = g if i in (0, 2) else g + 8
                col = t if i < 2 else t + 4
                bits = int(a_regs[lane, i]) & 0xFFFFE000
                A[row, col] = float(np.array(bits, np.uint32).view(np.float32))
            for i in range(k // 4):
                bits = int(b_regs[lane, i]) & 0xFFFFE000
                B[t if i == 0 else t + 4, g] = float(np.array(bits, np.uint32).view(np.float32))
        elif atype in ("s8", "u8"):  # four elements per register, low byte first
            for i in range(k // 2):
                row = g if (i < 4 or 8 <= i < 12) else g + 8
                col = t * 4 + (i & 3) + (16 if i >= 8 else 0)
                A[row, col] = _int8(_field(a_regs[lane, i // 4], i % 4, 8), atype == "s8")
            for i in range(k // 4):
                row = t * 4 + (i & 3) + (16 if i >= 4 else 0)
                B[row, g] = _int8(_field(b_regs[lane, i // 4], i % 4, 8), btype == "s8")
        else:  # f16: two halves per register
            for i in range(k // 2):
                row = g if (i < 2 or 4 <= i < 6) else g + 8
                col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
                A[row, col] = f16_decode(_field(a_regs[lane, i // 2], i % 2, 16))
            for i in range(k // 4):
                row = t * 2 + (i & 1) + (8 if i >= 2 else 0)
                B[row, g] = f16_decode(_field(b_regs[lane, i // 2], i % 2, 16))
        for i in range(4):
            row, col = (g if i < 2 else g + 8), t * 2 + (i & 1)
            if ctype == "s32":
                C[row, col] = int(np.array(c_regs[lane, i], np.uint32).view(np.int32))
            elif ctype == "f32":
                C[row, col] = float(np.array(c_regs[lane, i], np.uint32).view(np.float32))
            else:
                C[row, col] = f16_decode(_field(c_regs[lane, i // 2], i % 2, 16))
    D = A.dot(B) + C
    nd = 2 if dtype == "f16" else 4
    d = np.zeros((32, nd), dtype=np.uint32)
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(4):
            v = D[g if i < 2 else g + 8, t * 2 + (i & 1)]
            if dtype == "s32":
                v = int(v)
                if "satfinite" in text:
                    v = min(max(v, -(2**31)), 2**31 - 1)
                d[lane, i] = v & 0xFFFFFFFF
            elif dtype == "f32":
                d[lane, i] = np.array(float(v), np.float32).view(np.uint32)
            else:
                h = int(np.array(float(v), np.float16).view(np.uint16))
                d[lane, i // 2] |= np.uint32(h << (16 * (i % 2)))
    return d


def raw_mma_kernel(text: str, c_value=None):
    """One warp: registers from global uint32 arrays (or a scalar C), the mma, D out."""
    op = parse_instruction(text)
    na, nb, nc, nd = op.a_regs, op.b_regs, op.regs("c"), op.regs("d")
    Ain, Bin = gbuf("Ain", (32, na), "uint32"), gbuf("Bin", (32, nb), "uint32")
    Cin, Dout = gbuf("Cin", (32, nc), "uint32"), gbuf("Dout", (32, nd), "uint32")
    a, b, c, d = (lbuf(n, 4, "uint32") for n in "abcd")
    loads = [
        ir.Store(dst, j, ir.Load(src, LANE * n + j, U32), U32)
        for dst, src, n in ((a, Ain, na), (b, Bin, nb), (c, Cin, nc))
        for j in range(n)
    ]
    c_op = (
        regs(c, range(nc))
        if c_value is None
        else ir.RegVector(tuple(ir.ValueReg(c_value) for _ in range(nc)), False)
    )
    call = ir.PtxCall(
        text, (regs(d, range(nd), True), regs(a, range(na)), regs(b, range(nb)), c_op), span(4)
    )
    stores = [ir.Store(Dout, LANE * nd + j, ir.Load(d, j, U32), U32) for j in range(nd)]
    return function("mma", (Ain, Bin, Cin, Dout), seq(*loads, call, *stores), allocs=(a, b, c, d))


def _f16_words(vals) -> np.ndarray:
    h = np.asarray(vals).astype(np.float16).view(np.uint16).astype(np.uint32)
    return h[..., 0::2] | (h[..., 1::2] << np.uint32(16))


def mma_inputs(text: str, rng, *, near_limit=False):
    """Register bits for one warp: integer-valued floats, random int8 bytes and s32 C."""
    op = parse_instruction(text)
    na, nb, nc = op.a_regs, op.b_regs, op.regs("c")
    if op.a is Element.TF32:
        a = rng.integers(-8, 9, (32, na)).astype(np.float32).view(np.uint32)
        b = rng.integers(-8, 9, (32, nb)).astype(np.float32).view(np.uint32)
        a |= rng.integers(0, 1 << 13, a.shape, dtype=np.uint32) * (a != 0)  # low bits: ignored
    elif op.integer:
        a = rng.integers(0, 2**32, (32, na), dtype=np.uint64).astype(np.uint32)
        b = rng.integers(0, 2**32, (32, nb), dtype=np.uint64).astype(np.uint32)
    else:
        a = _f16_words(rng.integers(-4, 5, (32, 2 * na)))
        b = _f16_words(rng.integers(-4, 5, (32, 2 * nb)))
    if op.integer:
        lo, hi = (2**31 - 2_000_000, 2**31) if near_limit else (-(2**20), 2**20)
        c = rng.integers(lo, hi, (32, nc)) * rng.choice([-1, 1], (32, nc))
        c = c.astype(np.int64).astype(np.int32).view(np.uint32)
    elif op.c is Element.F16:
        c = _f16_words(rng.integers(-64, 65, (32, 2 * nc)))
    else:
        c = rng.integers(-64, 65, (32, nc)).astype(np.float32).view(np.uint32)
    return a, b, c


@pytest.mark.parametrize("text", NEW_FORMS, ids=lambda t: t[len("mma.sync.aligned.") :])
def test_new_mma_forms_match_the_isa_loops(text):
    rng = np.random.default_rng(len(text) + sum(map(ord, text)))
    for near_limit in (False, True):
        a, b, c = mma_inputs(text, rng, near_limit=near_limit)
        d = np.zeros((32, parse_instruction(text).regs("d")), np.uint32)
        run(raw_mma_kernel(text), [a, b, c, d])
        np.testing.assert_array_equal(d, isa_new_mma(text, a, b, c))


def test_int8_mma_wraps_and_satfinite_clamps():
    ones = np.full((32, 4), 0x7F7F7F7F, np.uint32)  # every s8 element 127
    c = np.full((32, 4), 2**31 - 100, np.uint32)  # 32 * 127 * 127 more overflows int32
    for sat, expect in (("", 2**31 - 100 + 32 * 127 * 127 - 2**32), (".satfinite", 2**31 - 1)):
        text = f"mma.sync.aligned.m16n8k32.row.col{sat}.s32.s8.s8.s32"
        d = np.zeros((32, 4), np.uint32)
        run(raw_mma_kernel(text), [ones, ones[:, :2].copy(), c, d])
        assert (d.view(np.int32) == expect).all(), (sat, d.view(np.int32)[0])
    neg = np.full((32, 4), 0x81818181, np.uint32)  # s8 -127 against u8 129
    d = np.zeros((32, 4), np.uint32)
    text = "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32"
    run(raw_mma_kernel(text), [neg, neg[:, :2].copy(), (-c.view(np.int32)).view(np.uint32), d])
    assert (d.view(np.int32) == -(2**31)).all()


def test_tf32_operands_ignore_the_low_13_mantissa_bits():
    text = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
    one = np.float32(1.0).view(np.uint32)
    # A: 1 + 2^-10 + (low bits 0x1FFF: just under 2^-10 more); B: a single 1.0 (b0 of lane 0)
    a = np.zeros((32, 4), np.uint32)
    a[0, 0] = one | 0x2000 | 0x1FFF
    b = np.zeros((32, 2), np.uint32)
    b[0, 0] = one | 0x1000  # 1 + 2^-11 exactly: rounding to nearest would keep 1 + 2^-10
    d = np.zeros((32, 4), np.uint32)
    run(raw_mma_kernel(text), [a, b, np.zeros((32, 4), np.uint32), d])
    assert d.view(np.float32)[0, 0] == np.float32(1 + 2**-10)  # truncated, both operands


@pytest.mark.parametrize(
    "text, value, expect",
    [
        ("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32", ir.const(-7), -7),
        ("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32", ir.const(3.9, "float32"), 3),
        ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", ir.const(2), 2.0),
        ("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16", ir.const(0x3C00BC00, "uint32"), None),
    ],
)
def test_scalar_c_converts_like_an_assignment_to_its_register_type(text, value, expect):
    op = parse_instruction(text)
    a, b = np.zeros((32, op.a_regs), np.uint32), np.zeros((32, op.b_regs), np.uint32)
    d = np.zeros((32, op.regs("d")), np.uint32)
    run(raw_mma_kernel(text, c_value=value), [a, b, np.zeros((32, 4), np.uint32), d])
    if op.c is Element.S32:
        assert (d.view(np.int32) == expect).all()
    elif op.c is Element.F32:
        assert (d.view(np.float32) == expect).all()
    else:  # f16x2 bits pass unchanged: low half -1.0, high half 1.0
        assert (d == 0x3C00BC00).all()
