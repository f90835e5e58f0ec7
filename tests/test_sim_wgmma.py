"""wgmma in the simulator: descriptors and shared layouts, the product, and the asynchronous
model (groups, in-flight registers and shared bytes, wgmma.fence, the proxy fence).

Kernels are hand-built lowered IR in the form of the wgmma interface (docs/simulator.md,
"wgmma"): every check fires on a kernel built to break it and stays silent on its twin. The
shared layouts the tests fill are computed here from the ISA's pictures (chunk permutations
of rows), independently of the simulator's address-bit formulas.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_sim_kernels import TX, function, gbuf, lbuf, sbuf, seq, span, var
from tirx.errors import SimulationError
from tirx.families.wgmma.sim_forms import parse_mma_async
from tirx.families.wgmma.sim_layout import (
    Descriptor,
    Swizzle,
    decode_descriptor,
    operand_chunks,
    swizzle_address,
)
from tirx.ir import nodes as ir
from tirx.sim import run

I32, U64, F32 = ir.I32, ir.U64, ir.F32
FENCE = "wgmma.fence.sync.aligned"
COMMIT = "wgmma.commit_group.sync.aligned"
WAIT = "wgmma.wait_group.sync.aligned"
WIDTH = {Swizzle.NONE: 16, Swizzle.B128: 128, Swizzle.B64: 64, Swizzle.B32: 32}
MODE_BITS = {Swizzle.NONE: 0, Swizzle.B128: 1, Swizzle.B64: 2, Swizzle.B32: 3}


def encode(start, lbo, sbo, mode=Swizzle.NONE, base=0) -> int:
    """The descriptor, as the ISA's "Matrix Descriptor Format" table lays out its fields."""
    enc = lambda x: (x & 0x3FFFF) >> 4  # noqa: E731  (the table's matrix-descriptor-encode)
    return enc(start) | enc(lbo) << 16 | enc(sbo) << 32 | base << 49 | MODE_BITS[mode] << 62


def place(rows: int, kdim: int, mode: Swizzle, lbo: int = 128):
    """Byte offset of each element ``(r, k)`` (16-bit) of a K-major tile of ``rows x kdim``
    in the canonical layout of ``mode``, from the ISA's figures: without swizzle, core matrices
    (8 rows x 8 elements, 128 contiguous bytes) at ``(r // 8) * SBO + (k // 8) * LBO``; with a
    swizzle of W bytes, atoms of 8 rows x W bytes one after another, row ``r`` of an atom at
    ``r * W`` with its 16-byte chunks permuted: chunk ``c`` goes to ``c ^ r`` (128B),
    ``c ^ (r // 2)`` (64B), ``c ^ (r // 4)`` (32B). Returns (offsets, SBO, LBO)."""
    r = np.arange(rows)[:, None]
    k = np.arange(kdim)[None, :]
    if mode is Swizzle.NONE:
        sbo = (kdim // 8) * lbo if lbo >= 128 else 128
        off = (r // 8) * sbo + (k // 8) * lbo + (r % 8) * 16 + (k % 8) * 2
        return off, sbo, lbo
    w = WIDTH[mode]
    assert kdim * 2 == w
    phase = {Swizzle.B128: r % 8, Swizzle.B64: (r % 8) // 2, Swizzle.B32: (r % 8) // 4}[mode]
    chunk = (k * 2) // 16 ^ phase
    off = (r // 8) * (8 * w) + (r % 8) * w + chunk * 16 + (k * 2) % 16
    return off, 8 * w, 0


# ------------------------------------------------------------------------ pure semantics


def test_descriptor_fields_decode_as_the_isa_table_lays_them_out():
    rng = np.random.default_rng(1)
    for _ in range(200):
        start, lbo, sbo = (int(x) * 16 for x in rng.integers(0, 1 << 14, 3))
        mode = list(Swizzle)[rng.integers(0, 4)]
        base = int(rng.integers(0, 8))
        d = decode_descriptor(encode(start, lbo, sbo, mode, base) | 0b11 << 14 | 0b11 << 46)
        assert d == Descriptor(start, lbo, sbo, base, mode)
    # bits outside the fields are ignored; the start wraps at 18 bits (256 KiB)
    assert decode_descriptor(encode(0x40010, 0, 0)).start == 0x10


@pytest.mark.parametrize(
    "mode, kstep",
    [
        (mode, k)
        for mode in Swizzle
        for k in range(2 if mode is Swizzle.NONE else WIDTH[mode] // 32)
    ],
)
def test_operand_chunks_follow_the_canonical_layouts(mode, kstep):
    """Each 16-byte chunk the simulator reads for rows x k16 at k offset 16*kstep is where the
    ISA's picture puts elements 8c..8c+7 of that row (every swizzle mode, every k step of the
    atom)."""
    kdim = WIDTH[mode] // 2 if mode is not Swizzle.NONE else 32
    base = 2048
    off, sbo, lbo = place(128, kdim, mode)
    start = base + (32 * kstep if mode is not Swizzle.NONE else (2 * kstep) * lbo)
    chunks = operand_chunks(Descriptor(start, lbo, sbo, 0, mode), 128)
    for c in range(2):
        k0 = 16 * kstep + 8 * c
        assert (chunks[:, c] == base + off[:, k0]).all()
        for e in range(8):  # the 8 elements of a chunk are contiguous
            assert (base + off[:, k0 + e] == chunks[:, c] + 2 * e).all()


def test_swizzle_is_the_xor_of_the_row_phase_bits_and_base_offset_moves_the_phase():
    addr = np.arange(0, 4096, 16, dtype=np.int64)
    for mode, bits in ((Swizzle.B128, 3), (Swizzle.B64, 2), (Swizzle.B32, 1)):
        expect = addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)
        assert (swizzle_address(addr, mode) == expect).all()
        # a pattern starting at P (a multiple of 128, off its boundary) with base offset
        # (P >> 7) & 7 is the aligned pattern moved to P
        for p in (128, 384, 640, 896):
            moved = swizzle_address(addr + p, mode, base_offset=(p >> 7) & 7)
            assert (moved == swizzle_address(addr, mode) + p).all()
        assert not (swizzle_address(addr + 384, mode) == swizzle_address(addr, mode) + 384).all()
    assert (swizzle_address(addr, Swizzle.NONE, 5) == addr).all()


def test_forms_parse_and_others_are_not_implemented():
    assert parse_mma_async("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16").n == 128
    assert parse_mma_async("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16").registers == 4
    assert parse_mma_async("wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16").registers == 16
    fp8 = parse_mma_async("wgmma.mma_async.sync.aligned.m64n24k32.f16.e5m2.e4m3")
    assert (fp8.k, fp8.a, fp8.b, fp8.acc) == (32, "e5m2", "e4m3", "f16")
    sat = parse_mma_async("wgmma.mma_async.sync.aligned.m64n240k32.satfinite.s32.u8.s8")
    assert sat.satfinite and sat.integer and sat.immediates(False) == ()
    assert parse_mma_async("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32").immediates(
        True
    ) == ("imm-scale-a", "imm-scale-b")
    for bad in (
        "wgmma.mma_async.sync.aligned.m64n12k16.f32.f16.f16",
        "wgmma.mma_async.sync.aligned.m64n264k16.f32.f16.f16",
        "wgmma.mma_async.sync.aligned.m64n64k16.f16.bf16.bf16",
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.bf16",
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.tf32.tf32",
        "wgmma.mma_async.sync.aligned.m64n64k8.f16.tf32.tf32",
        "wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8",
        "wgmma.mma_async.sync.aligned.m64n64k32.satfinite.f32.e4m3.e4m3",
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.s8",
        "wgmma.mma_async.sync.aligned.m64n64k256.s32.b1.b1",
    ):
        assert parse_mma_async(bad) is None, bad


# ------------------------------------------------------------------------ kernels


def mma_text(n, element="f16"):
    return f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{element}.{element}"


def desc_expr(buf, start_byte, lbo, sbo, mode=Swizzle.NONE, base=0):
    """A uint64 descriptor whose start is the run-time shared address of ``buf`` + bytes."""
    addr = ir.Cast(ir.SharedAddress(buf, start_byte), U64)
    return ((addr & ir.const(0x3FFFF, U64)) >> ir.const(4, U64)) | ir.const(
        encode(0, lbo, sbo, mode, base), U64
    )


def copy_in(dst, src, words, line, threads=128):
    """dst[TX + threads q] = src[TX + threads q] (int32 words)."""
    q = var("q_" + dst.name)
    i = TX + threads * q
    return ir.For(
        q,
        ir.const(0),
        ir.const(words // threads),
        1,
        ir.Store(dst, i, ir.Load(src, i, I32), I32, span(line)),
        span=span(line),
    ), q


def acc_out(acc, out, n, line):
    """Out[row, col] = acc[r] by the ISA's accumulator fragment map."""
    r = var("r")
    w, lane = (TX // 32) % 4, TX % 32
    j, h, e = r // 4, (r // 2) % 2, r % 2
    row = 16 * w + lane // 4 + 8 * h
    col = 8 * j + 2 * (lane % 4) + e
    body = ir.Store(out, row * n + col, ir.Load(acc, r, F32), F32, span(line))
    return ir.For(r, ir.const(0), ir.const(n // 2), 1, body, span=span(line)), r


def mma_call(n, acc, a_desc, b_desc, scale_d=1, line=20, element="f16", sa=1, sb=1, slots=None):
    slots = range(n // 2) if slots is None else slots
    d = ir.RegVector(tuple(ir.LocalReg(acc, s, F32) for s in slots), True)
    sd = scale_d if isinstance(scale_d, ir.Expr) else ir.const(scale_d)
    ops = (
        d,
        ir.ScalarOperand(a_desc),
        ir.ScalarOperand(b_desc),
        ir.ScalarOperand(sd),
        ir.Immediate(sa),
        ir.Immediate(sb),
        ir.Immediate(0),
        ir.Immediate(0),
    )
    return ir.PtxCall(mma_text(n, element), ops, span(line))


def call(text, *ops, line):
    return ir.PtxCall(text, tuple(ops), span(line))


class Gemm:
    """One warpgroup: copy the A and B tiles (already in their shared layout) into shared
    memory, fence the proxy, barrier, wgmma.fence, mma_async, commit, wait, write D.

    ``steps`` maps a step name to its statements; a test replaces or reorders steps to break
    the kernel. Lines: copies 2-3, proxy fence 4, barrier 5, acc init 6, wgmma.fence 7,
    mma 20, commit 21, wait 22, acc out 30."""

    def __init__(
        self, n=8, mode=Swizzle.NONE, element="f16", scale_d=0, k_steps=1, block=128, a_shift=0
    ):
        self.n, self.mode, self.element, self.scale_d = n, mode, element, scale_d
        kdim = 16 * k_steps if mode is Swizzle.NONE else WIDTH[mode] // 2
        self.kdim = kdim
        self.a_off, a_sbo, a_lbo = place(64, kdim, mode)
        self.a_off = self.a_off + a_shift  # a pattern off its boundary: base offset
        self.b_off, b_sbo, b_lbo = place(n, kdim, mode)
        unit = max(1024, 4 * block)  # whole swizzle atoms, whole copy rounds
        a_bytes = -(-int(self.a_off.max() + 2) // unit) * unit
        b_bytes = -(-int(self.b_off.max() + 2) // unit) * unit
        dt = "float16" if element == "f16" else "bfloat16"
        self.GA, self.GB = (
            gbuf("GA", (a_bytes // 4,), "int32"),
            gbuf("GB", (b_bytes // 4,), "int32"),
        )
        self.Out = gbuf("Out", (64 * n,), "float32")
        self.Init = gbuf("Init", (64 * n,), "float32")
        self.sa, self.sb = (
            sbuf("sa", (a_bytes // 4,), "int32"),
            sbuf("sb", (b_bytes // 4,), "int32"),
        )
        self.acc = lbuf("acc", n // 2, "float32")
        self.dt = dt
        self.variables = []
        copy_a, qa = copy_in(self.sa, self.GA, a_bytes // 4, 2, block)
        copy_b, qb = copy_in(self.sb, self.GB, b_bytes // 4, 3, block)
        init, ri = self._init(6)
        out, ro = acc_out(self.acc, self.Out, n, 30)
        self.variables += [qa, qb, ri, ro]
        steps = k_steps if mode is Swizzle.NONE else kdim // 16
        a_step = 32 if mode is not Swizzle.NONE else 2 * a_lbo
        b_step = 32 if mode is not Swizzle.NONE else 2 * b_lbo
        base = (a_shift >> 7) & 7
        # per k step: (A start byte in sa, A's other fields, B start byte in sb, B's fields)
        self.descriptors = [
            (
                a_shift + s * a_step,
                encode(0, a_lbo, a_sbo, mode, base),
                s * b_step,
                encode(0, b_lbo, b_sbo, mode),
            )
            for s in range(steps)
        ]
        self.mmas = [
            mma_call(
                n,
                self.acc,
                desc_expr(self.sa, a0, a_lbo, a_sbo, mode, base),
                desc_expr(self.sb, b0, b_lbo, b_sbo, mode),
                scale_d=scale_d if s == 0 else 1,
                line=20 + s,
                element=element,
            )
            for s, (a0, _, b0, _) in enumerate(self.descriptors)
        ]
        self.steps = {
            "copy": [copy_a, copy_b],
            "proxy": [call("fence.proxy.async.shared::cta", line=4)],
            "barrier": [ir.Barrier("cta", span(5))],
            "init": [init],
            "fence": [call(FENCE, line=7)],
            "mma": self.mmas,
            "commit": [call(COMMIT, line=40)],
            "wait": [call(WAIT, ir.Immediate(0), line=41)],
            "out": [out],
        }
        self.block = block

    def _init(self, line):
        r = var("ri")
        w, lane = (TX // 32) % 4, TX % 32
        j, h, e = r // 4, (r // 2) % 2, r % 2
        idx = (16 * w + lane // 4 + 8 * h) * self.n + 8 * j + 2 * (lane % 4) + e
        body = ir.Store(self.acc, r, ir.Load(self.Init, idx, F32), F32, span(line))
        return ir.For(r, ir.const(0), ir.const(self.n // 2), 1, body, span=span(line)), r

    def function(self, order=None, **replace):
        steps = dict(self.steps, **replace)
        order = order or list(steps)
        body = seq(*[s for name in order for s in steps[name]])
        return function(
            "wg",
            (self.GA, self.GB, self.Init, self.Out),
            body,
            block=(self.block, 1, 1),
            allocs=(self.sa, self.sb, self.acc),
            variables=tuple(self.variables),
        )

    def inputs(self, seed=0, lo=-3, hi=4):
        rng = np.random.default_rng(seed)
        a = rng.integers(lo, hi, (64, self.kdim)).astype(np.float32)
        b = rng.integers(lo, hi, (self.n, self.kdim)).astype(np.float32)
        init = rng.integers(-8, 9, (64, self.n)).astype(np.float32)
        return a, b, init

    def args(self, a, b, init):
        bits = {"float16": lambda x: x.astype(np.float16).view(np.uint16)}
        if self.dt == "float16":
            ab, bb = bits["float16"](a), bits["float16"](b)
        else:
            ab = (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
            bb = (b.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        ga = np.zeros(self.GA.shape[0] * 2, np.uint16)
        gb = np.zeros(self.GB.shape[0] * 2, np.uint16)
        ga[self.a_off // 2] = ab
        gb[self.b_off // 2] = bb
        out = np.zeros(64 * self.n, np.float32)
        return [ga.view(np.int32), gb.view(np.int32), init.ravel().copy(), out]

    def run(self, a, b, init, fn=None, **kw):
        args = self.args(a, b, init)
        result = run(fn or self.function(), args, **kw)
        return args[3].reshape(64, self.n), result


def fault(fn, args, pattern):
    with pytest.raises(SimulationError, match=pattern) as info:
        run(fn, args)
    return info.value


# ------------------------------------------------------------------------ products


@pytest.mark.parametrize("n", [8, 128])
@pytest.mark.parametrize("element", ["f16", "bf16"])
def test_integer_products_equal_numpy(n, element):
    g = Gemm(n=n, element=element)
    a, b, init = g.inputs(seed=n)
    out, _ = g.run(a, b, init)
    assert np.array_equal(out, a @ b.T)


@pytest.mark.parametrize("mode", [Swizzle.B128, Swizzle.B64, Swizzle.B32])
def test_each_swizzle_mode_reads_its_canonical_layout(mode):
    """k16 steps across a whole swizzle atom (start advanced by 32 bytes a step) sum to the
    product over the atom's K."""
    g = Gemm(n=16, mode=mode)
    a, b, init = g.inputs(seed=3)
    out, _ = g.run(a, b, init)
    assert np.array_equal(out, a @ b.T)


def test_a_pattern_off_its_boundary_reads_with_its_base_offset():
    """The 128-byte atoms of A start 384 bytes past a 1024-byte boundary, the descriptor's
    base offset is (384 >> 7) & 7 = 3: the product is right; with base offset 0 it is not."""
    g = Gemm(n=16, mode=Swizzle.B128, a_shift=384)
    a, b, init = g.inputs(seed=8)
    out, _ = g.run(a, b, init)
    assert np.array_equal(out, a @ b.T)
    wrong = [
        ir.PtxCall(
            m.instruction,
            (
                m.operands[0],
                ir.ScalarOperand(m.operands[1].value & ir.const(~(7 << 49) & (2**64 - 1), U64)),
                *m.operands[2:],
            ),
            m.span,
        )
        for m in g.mmas
    ]
    out, _ = g.run(a, b, init, g.function(mma=wrong))
    assert not np.array_equal(out, a @ b.T)


def test_no_swizzle_with_two_k_steps_follows_lbo():
    g = Gemm(n=16, k_steps=2)
    a, b, init = g.inputs(seed=4)
    out, _ = g.run(a, b, init)
    assert np.array_equal(out, a @ b.T)


def test_scale_d_zero_ignores_the_accumulator_and_one_adds_it():
    a_b_init = None
    for scale_d in (0, 1):
        g = Gemm(n=16, scale_d=scale_d)
        a_b_init = a_b_init or g.inputs(seed=5)
        a, b, init = a_b_init
        out, _ = g.run(a, b, init)
        assert np.array_equal(out, a @ b.T + (init if scale_d else 0))


def test_run_time_scale_d_and_negation():
    g = Gemm(n=8, scale_d=1)
    a, b, init = g.inputs(seed=6)
    m = g.mmas[0]
    for sa, sb, sd in ((-1, 1, 2), (1, -1, 0), (-1, -1, 1)):
        ops = list(m.operands)
        ops[4], ops[5] = ir.Immediate(sa), ir.Immediate(sb)
        ops[3] = ir.ScalarOperand(TX // 1024 + sd)  # a run-time value, equal in every thread
        neg = ir.PtxCall(m.instruction, tuple(ops), m.span)
        out, _ = g.run(a, b, init, g.function(mma=[neg]))
        assert np.array_equal(out, sa * sb * (a @ b.T) + (init if sd else 0))


# ------------------------------------------------------------------------ collective checks


def test_a_missing_warp_of_the_warpgroup_is_a_fault_and_the_whole_group_is_silent():
    g = Gemm(n=8)
    a, b, init = g.inputs()
    for limit, ok in ((96, False), (128, True)):
        guarded = [ir.If(ir.cmp(ir.CmpOp.LT, TX, limit), seq(*g.mmas), None, span(19))]
        fn = g.function(mma=guarded)
        if ok:
            out, _ = g.run(a, b, init, fn)
            assert np.array_equal(out, a @ b.T)
        else:
            e = fault(fn, g.args(a, b, init), r"96 of 128 threads of warpgroup 0; warp 3 lane 0")
            assert e.span.line == 20


def test_a_block_smaller_than_a_warpgroup_is_a_fault():
    g = Gemm(n=8, block=64)
    fault(g.function(), g.args(*g.inputs()), r"only 64 threads .*not a multiple of 128")


def test_descriptors_and_scale_d_must_agree_within_the_warpgroup():
    g = Gemm(n=8)
    a, b, init = g.inputs()
    m = g.mmas[0]
    odd = ir.cmp(ir.CmpOp.EQ, TX, 37)
    for pos, what in ((1, "a-desc"), (2, "b-desc"), (3, "scale-d")):
        ops = list(m.operands)
        v = ops[pos].value
        bump = ir.Select(odd, ir.const(1, v.dtype), ir.const(0, v.dtype), v.dtype)
        ops[pos] = ir.ScalarOperand(v + bump)
        fn = g.function(mma=[ir.PtxCall(m.instruction, tuple(ops), m.span)])
        e = fault(fn, g.args(a, b, init), rf"thread 37 \(warp 1, lane 5\) gives {what}")
        assert "thread 0 of its warpgroup" in str(e)
    out, _ = g.run(a, b, init)  # the twin: every thread passes the same values
    assert np.array_equal(out, a @ b.T)


def test_operand_rows_outside_shared_memory_are_a_fault():
    g = Gemm(n=8)
    m = g.mmas[0]
    ops = list(m.operands)
    ops[2] = ir.ScalarOperand(ops[2].value + ir.const(1 << 12, U64))  # start + 64 KiB
    fn = g.function(mma=[ir.PtxCall(m.instruction, tuple(ops), m.span)])
    fault(fn, g.args(*g.inputs()), r"wgmma.mma_async B \(b-desc\) row .* outside every shared")


# ------------------------------------------------------------------------ the async model


def test_reading_the_accumulator_before_the_wait_is_a_fault():
    g = Gemm(n=8)
    args = g.args(*g.inputs())
    order = ["copy", "proxy", "barrier", "init", "fence", "mma", "commit", "out", "wait"]
    e = fault(g.function(order), args, r"reads 'acc' slot 0 at line 30, .*mma_async at line 20")
    assert "in flight" in str(e) and "[block (0, 0, 0), warp 0, lane 0]" in str(e)
    no_commit = ["copy", "proxy", "barrier", "init", "fence", "mma", "wait", "out"]
    fault(g.function(no_commit), g.args(*g.inputs()), r"in flight")  # wait covers no group
    out, _ = g.run(*g.inputs())
    a, b, _ = g.inputs()
    assert np.array_equal(out, a @ b.T)


def test_writing_a_stage_the_tensor_core_still_reads_is_a_fault():
    g = Gemm(n=8)
    a, b, init = g.inputs()
    refill, _ = copy_in(g.sb, g.GB, g.sb.shape[0], 50)
    g.variables.append(refill.var)
    early = g.function(
        ["copy", "proxy", "barrier", "init", "fence", "mma", "commit", "refill", "wait", "out"],
        refill=[refill],
    )
    e = fault(
        early,
        g.args(a, b, init),
        r"writes 'sb' byte 0 .* at line 50, which the wgmma.mma_async at line 20",
    )
    assert "no wgmma.wait_group has covered" in str(e)
    late = g.function(
        ["copy", "proxy", "barrier", "init", "fence", "mma", "commit", "wait", "refill", "out"],
        refill=[refill],
    )
    out, _ = g.run(a, b, init, late)  # its own warpgroup, after its wait: ordered
    assert np.array_equal(out, a @ b.T)


def test_another_warpgroup_needs_a_barrier_after_the_wait_to_reuse_the_stage():
    g = Gemm(n=8, block=256)
    a, b, init = g.inputs()
    first = ir.cmp(ir.CmpOp.LT, TX, 128)
    only_first = lambda *s: ir.If(first, seq(*s), None, span(19))  # noqa: E731
    q = var("qq")
    refill = ir.If(
        ir.cmp(ir.CmpOp.GE, TX, 128),
        ir.For(
            q,
            ir.const(0),
            ir.const(2),
            1,
            ir.Store(g.sb, TX - 128 + 128 * q, ir.const(0), I32, span(50)),
            span=span(50),
        ),
        None,
        span(50),
    )
    g.variables.append(q)
    steps = dict(
        fence=[only_first(*g.steps["fence"])],
        mma=[only_first(*g.mmas)],
        commit=[only_first(*g.steps["commit"])],
        wait=[only_first(*g.steps["wait"])],
        out=[only_first(*g.steps["out"])],
        init=[only_first(*g.steps["init"])],
    )
    order = ["copy", "proxy", "barrier", "init", "fence", "mma", "commit", "wait", "refill", "out"]
    fn = g.function(order, refill=[refill], **steps)
    fault(
        fn,
        g.args(a, b, init),
        r"thread 128 .* writes 'sb' byte 0 .*at line 50, which the tensor core \(warpgroup 0\) read at line 20",
    )
    order.insert(order.index("refill"), "sync")
    fn = g.function(order, refill=[refill], sync=[ir.Barrier("cta", span(45))], **steps)
    out, _ = g.run(a, b, init, fn)
    assert np.array_equal(out, a @ b.T)


def test_wgmma_fence_is_required_before_the_first_mma_and_after_register_writes():
    g = Gemm(n=8, scale_d=1)
    a, b, init = g.inputs()
    e = fault(g.function(fence=[]), g.args(a, b, init), r"first of warpgroup 0 and no wgmma.fence")
    assert e.span.line == 20
    late_init = ["copy", "proxy", "barrier", "fence", "init", "mma", "commit", "wait", "out"]
    e = fault(
        g.function(late_init),
        g.args(a, b, init),
        r"accumulator acc\[0\] .* written at line 6 after this thread's last wgmma.fence",
    )
    assert "between line 6 and line 20" in e.hint
    out, _ = g.run(a, b, init)
    assert np.array_equal(out, a @ b.T + init)


def test_chained_mma_asyncs_into_the_same_accumulator_need_no_fence_between():
    g = Gemm(n=16, mode=Swizzle.B128)  # four k16 steps, one group
    a, b, init = g.inputs(seed=9)
    out, _ = g.run(a, b, init)
    assert np.array_equal(out, a @ b.T)
    # reading the result of the first and accumulating again needs a fence in between
    first, rest = g.mmas[0], g.mmas[1:]
    read_back, _ = acc_out(g.acc, g.Out, g.n, 31)
    steps = dict(
        mma=[first, call(COMMIT, line=23), call(WAIT, ir.Immediate(0), line=24), read_back, *rest]
    )
    g.variables.append(read_back.var)
    fault(g.function(**steps), g.args(a, b, init), r"acc\[0\] .* read at line 31")
    steps["mma"].insert(4, call(FENCE, line=32))
    out, _ = g.run(a, b, init, g.function(**steps))
    assert np.array_equal(out, a @ b.T)


def test_generic_stores_need_a_proxy_fence_before_the_tensor_core_reads_them():
    g = Gemm(n=8)
    a, b, init = g.inputs()
    e = fault(
        g.function(proxy=[]),
        g.args(a, b, init),
        r"may read stale bytes: the wgmma.mma_async at line 20 reads 'sa' byte 0 .* stored at line 2",
    )
    assert "fence.proxy.async.shared::cta" in e.hint
    # the fence without the barrier: the race rules of shared memory
    fault(
        g.function(barrier=[]),
        g.args(a, b, init),
        r"shared-memory race: thread 0 .* reads 'sa' byte \d+ .*at line 20, which thread \d+ .* wrote at line 2",
    )
    out, _ = g.run(a, b, init)  # the twin: fence, then barrier
    assert np.array_equal(out, a @ b.T)


def test_landed_cp_async_bytes_count_as_generic_stores():
    """A tile brought by cp.async (generic proxy) needs the proxy fence after its wait too."""
    g = Gemm(n=8)
    a, b, init = g.inputs()
    copy = ir.PtxCall(
        "cp.async.cg.shared.global",
        (
            ir.AddressOperand(ir.SharedAddress(g.sa, TX * 16)),
            ir.AddressOperand(ir.GlobalAddress(g.GA, TX * 16)),
            ir.Immediate(16),
        ),
        span(8),
    )
    assert g.GA.shape[0] == 128 * 4  # one 16-byte chunk per thread
    landed = [copy, call("cp.async.wait_all", line=9), g.steps["copy"][1]]
    e = fault(g.function(copy=landed, proxy=[]), g.args(a, b, init), r"stale bytes.*'sa' byte 0")
    assert "stored at line 8" in str(e)
    out, _ = g.run(a, b, init, g.function(copy=landed))
    assert np.array_equal(out, a @ b.T)


def test_wait_group_one_retires_only_the_older_of_two_groups():
    """Two mma_asyncs into separate accumulators, one group each: wait_group 1 frees the
    first's registers and leaves the second's in flight."""
    g = Gemm(n=8)
    a, b, init = g.inputs()
    g.acc = lbuf("acc", 8, "float32")
    g2 = lbuf("acc2", 4, "float32")
    m = g.mmas[0]
    one = mma_call(8, g.acc, m.operands[1].value, m.operands[2].value, scale_d=0, line=20)
    two = mma_call(8, g2, m.operands[1].value, m.operands[2].value, scale_d=0, line=25)
    out_one, r1 = acc_out(g.acc, g.Out, 8, 30)
    r2 = var("r2")
    read_two = ir.For(
        r2,
        ir.const(0),
        ir.const(4),
        1,
        ir.Store(g.Out, TX * 0 + r2, ir.Load(g2, r2, F32), F32, span(33)),
        span=span(33),
    )
    g.variables += [r1, r2]
    steps = dict(
        init=[],
        mma=[
            one,
            call(COMMIT, line=21),
            two,
            call(COMMIT, line=26),
            call(WAIT, ir.Immediate(1), line=27),
        ],
        commit=[],
        wait=[],
        out=[out_one],
        late=[read_two],
    )
    fn = function(
        "wg",
        (g.GA, g.GB, g.Init, g.Out),
        seq(
            *[
                s
                for name in ("copy", "proxy", "barrier", "fence", "mma", "out", "late")
                for s in dict(g.steps, **steps)[name]
            ]
        ),
        block=(128, 1, 1),
        allocs=(g.sa, g.sb, g.acc, g2),
        variables=tuple(g.variables),
    )
    e = fault(fn, g.args(a, b, init), r"reads 'acc2' slot 0 at line 33, .*mma_async at line 25")
    assert "in flight" in str(e)  # the first group's registers (line 30) were free already
    steps["late"] = [call(WAIT, ir.Immediate(0), line=32), read_two]
    body = [
        s
        for name in ("copy", "proxy", "barrier", "fence", "mma", "out", "late")
        for s in dict(g.steps, **steps)[name]
    ]
    twin = function(
        "wg",
        fn.params,
        seq(*body),
        block=(128, 1, 1),
        allocs=fn.allocations,
        variables=fn.variables,
    )
    run(twin, g.args(a, b, init))


def test_traces_show_mma_commit_wait_and_fence():
    g = Gemm(n=8)
    _, result = g.run(*g.inputs(), trace=True)
    events = [(c.event, c.warp) for c in result.copies if c.instruction.startswith("wgmma")]
    kinds = [e for e, w in events if w == 0]
    assert kinds == ["fence", "mma_async", "commit_group", "wait_group"]
    assert {w for _, w in events} == {0, 1, 2, 3}
    commit = next(c for c in result.copies if c.event == "commit_group")
    wait = next(c for c in result.copies if c.event == "wait_group")
    assert (commit.group == 0).all() and (wait.completed == 1).all()


def test_pending_mma_asyncs_do_not_leak_into_the_next_block():
    g = Gemm(n=8)
    a, b, init = g.inputs()
    fn = g.function(["copy", "proxy", "barrier", "init", "fence", "mma", "commit"])
    fn = function(
        "wg",
        fn.params,
        fn.body,
        grid=(2, 1, 1),
        block=(128, 1, 1),
        allocs=fn.allocations,
        variables=fn.variables,
    )
    run(fn, g.args(a, b, init))  # the second block starts with nothing in flight


def test_a_stage_two_warpgroups_read_stays_in_flight_until_both_waited():
    """Both warpgroups read one B tile; the second waits and writes it while the first has
    not waited: the fault names the first warpgroup's mma_async."""
    g = Gemm(n=8, block=256)
    a, b, init = g.inputs()
    second = lambda *s: ir.If(ir.cmp(ir.CmpOp.GE, TX, 128), seq(*s), None, span(44))  # noqa: E731
    store = ir.Store(g.sb, TX - 128, ir.const(0), I32, span(50))
    steps = dict(wait=[second(*g.steps["wait"], store)], out=[])
    e = fault(
        g.function(**steps), g.args(a, b, init), r"thread 128 .* writes 'sb' byte 0 .*line 50"
    )
    assert "mma_async at line 20 (warpgroup 0)" in str(e)


# ------------------------------------------------------------------------ on the H200

_CUDA = r"""
extern "C" __global__ void __launch_bounds__(128) wg(
    const unsigned* ga, const unsigned* gb, const float* init, float* out,
    const unsigned long long* adesc, const unsigned long long* bdesc,
    const unsigned* aoff, const unsigned* boff, int steps, int scale_d0) {
    __shared__ __align__(1024) unsigned s[AW + BW];
    int t = threadIdx.x, w = t / 32, lane = t % 32;
    for (int i = t; i < AW; i += 128) s[i] = ga[i];
    for (int i = t; i < BW; i += 128) s[AW + i] = gb[i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    float d[R];
#pragma unroll
    for (int i = 0; i < R; ++i)
        d[i] = init[(16 * w + lane / 4 + 8 * ((i / 2) % 2)) * N + 8 * (i / 4) + 2 * (lane % 4) + i % 2];
    unsigned base = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    for (int k = 0; k < steps; ++k) {
        unsigned long long da = adesc[k] | (((base + aoff[k]) & 0x3FFFF) >> 4);
        unsigned long long db = bdesc[k] | (((base + 4 * AW + boff[k]) & 0x3FFFF) >> 4);
        int sd = (k > 0) || scale_d0;
        asm volatile(MMA : OUTS : "l"(da), "l"(db), "r"(sd) : "memory");
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
    for (int i = 0; i < R; ++i)
        out[(16 * w + lane / 4 + 8 * ((i / 2) % 2)) * N + 8 * (i / 4) + 2 * (lane % 4) + i % 2] = d[i];
}
"""


def wgmma_source(g: Gemm, sa=1, sb=1) -> str:
    """The CUDA kernel running ``g``'s mma_asyncs as inline PTX (independent of tirx's code
    generator): the same shared bytes, the same descriptor fields."""
    r = g.n // 2
    regs = ", ".join(f"%{i}" for i in range(r))
    mma = (
        f'"{{ .reg .pred p; setp.ne.b32 p, %{r + 2}, 0; '
        f'{mma_text(g.n, g.element)} {{{regs}}}, %{r}, %{r + 1}, p, {sa}, {sb}, 0, 0; }}"'
    )
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(r))
    defs = {"AW": g.GA.shape[0], "BW": g.GB.shape[0], "R": r, "N": g.n, "MMA": mma, "OUTS": outs}
    head = "".join(f"#define {k} {v}\n" for k, v in defs.items())
    return head + _CUDA


def on_gpu(g: Gemm, a, b, init, sa=1, sb=1):
    cp = pytest.importorskip("cupy")
    module, errors = None, []
    for arch in ("-arch=sm_90a", "--gpu-architecture=sm_90a"):  # wgmma needs the sm_90a target
        try:
            module = cp.RawModule(code=wgmma_source(g, sa, sb), options=(arch,))
            module.get_function("wg")
            break
        except Exception as e:  # noqa: BLE001  (cupy's compile errors have no common base)
            module = None
            errors.append(f"{arch}: {e}")
    assert module is not None, "\n".join(errors)
    ga, gb, init_flat, out = (cp.asarray(x) for x in g.args(a, b, init))
    desc = np.array(g.descriptors, dtype=object)
    args = (
        cp.asarray(desc[:, 1].astype(np.uint64)),
        cp.asarray(desc[:, 3].astype(np.uint64)),
        cp.asarray(desc[:, 0].astype(np.uint32)),
        cp.asarray(desc[:, 2].astype(np.uint32)),
        np.int32(len(g.descriptors)),
        np.int32(g.scale_d),
    )
    module.get_function("wg")((1,), (128,), (ga, gb, init_flat, out, *args))
    cp.cuda.runtime.deviceSynchronize()
    return cp.asnumpy(out).reshape(64, g.n)


GPU_CASES = [
    dict(n=8),
    dict(n=16, k_steps=2),
    dict(n=256, element="bf16", scale_d=1),
    dict(n=64, mode=Swizzle.B128),
    dict(n=32, mode=Swizzle.B64, element="bf16"),
    dict(n=16, mode=Swizzle.B32, scale_d=1),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(GPU_CASES)))
def test_wgmma_agrees_with_hardware(case):
    """Integer-valued data: the simulator equals the H200 bit for bit, each swizzle mode."""
    g = Gemm(**GPU_CASES[case])
    a, b, init = g.inputs(seed=40 + case)
    sim, _ = g.run(a, b, init)
    np.testing.assert_array_equal(sim, a @ b.T + (init if g.scale_d else 0))
    np.testing.assert_array_equal(on_gpu(g, a, b, init), sim)


@pytest.mark.gpu
def test_negation_agrees_with_hardware():
    g = Gemm(n=8, scale_d=1)
    a, b, init = g.inputs(seed=50)
    m = g.mmas[0]
    ops = list(m.operands)
    ops[4], ops[5] = ir.Immediate(-1), ir.Immediate(1)
    sim, _ = g.run(a, b, init, g.function(mma=[ir.PtxCall(m.instruction, tuple(ops), m.span)]))
    np.testing.assert_array_equal(on_gpu(g, a, b, init, sa=-1, sb=1), sim)


@pytest.mark.gpu
def test_base_offset_agrees_with_hardware():
    """The simulator's reading of the base offset (the row phase counts from the pattern's
    start) against the H200, for 128-byte atoms 384 bytes past a 1024-byte boundary."""
    g = Gemm(n=16, mode=Swizzle.B128, a_shift=384)
    a, b, init = g.inputs(seed=51)
    sim, _ = g.run(a, b, init)
    np.testing.assert_array_equal(on_gpu(g, a, b, init), sim)


def pipeline(refill_after_wait: bool):
    """A two-stage pipeline over K = 64 (four k16 steps): cp.async brings step k+1 into the
    other stage while the tensor core works on step k, and wgmma.wait_group(1) keeps one
    mma_async in flight. The refill of stage (k+1) % 2 is safe only after the wait that
    retires mma k-1, which read it."""
    steps, n = 4, 8
    a_img, b_img = 2048, 256  # bytes of one k step's A (64 x 16) and B (8 x 16) in shared
    GA, GB = gbuf("GA", (steps * a_img // 4,), "int32"), gbuf("GB", (steps * b_img // 4,), "int32")
    Out, Init = gbuf("Out", (64 * n,), "float32"), gbuf("Init", (1,), "float32")
    sa, sb = sbuf("sa", (2 * a_img // 4,), "int32"), sbuf("sb", (2 * b_img // 4,), "int32")
    acc = lbuf("acc", n // 2, "float32")
    k = var("k")

    def load(step, line):
        stage = step % 2
        copy_a = ir.PtxCall(
            "cp.async.cg.shared.global",
            (
                ir.AddressOperand(ir.SharedAddress(sa, stage * a_img + TX * 16)),
                ir.AddressOperand(ir.GlobalAddress(GA, step * a_img + TX * 16)),
                ir.Immediate(16),
            ),
            span(line),
        )
        copy_b = ir.PtxCall(
            "cp.async.cg.shared.global",
            (
                ir.AddressOperand(ir.SharedAddress(sb, stage * b_img + TX * 16)),
                ir.AddressOperand(ir.GlobalAddress(GB, step * b_img + TX * 16)),
                ir.Immediate(16),
            ),
            span(line),
        )
        return seq(
            copy_a,
            ir.If(ir.cmp(ir.CmpOp.LT, TX, b_img // 16), copy_b, None, span(line)),
            call("cp.async.commit_group", line=line),
        )

    refill = ir.If(ir.cmp(ir.CmpOp.LT, k + 1, steps), load(k + 1, 12), None, span(12))
    mma = mma_call(
        n,
        acc,
        desc_expr(sa, (k % 2) * a_img, 128, 256),
        desc_expr(sb, (k % 2) * b_img, 128, 256),
        scale_d=k,
        line=16,
    )
    wait_one = call(WAIT, ir.Immediate(1), line=18)
    ready = [
        call("cp.async.wait_group", ir.Immediate(0), line=13),
        call("fence.proxy.async.shared::cta", line=14),
        ir.Barrier("cta", span(14)),
    ]
    tensor = [call(FENCE, line=15), mma, call(COMMIT, line=17), wait_one]
    body = [*ready, *tensor, refill] if refill_after_wait else [refill, *ready, *tensor]
    out, r = acc_out(acc, Out, n, 30)
    fn = function(
        "pipe",
        (GA, GB, Init, Out),
        seq(
            load(ir.const(0), 10),
            ir.For(k, ir.const(0), ir.const(steps), 1, seq(*body), span=span(11)),
            call(WAIT, ir.Immediate(0), line=20),
            out,
        ),
        block=(128, 1, 1),
        allocs=(sa, sb, acc),
        variables=(k, r),
    )
    rng = np.random.default_rng(12)
    a = rng.integers(-3, 4, (64, 16 * steps)).astype(np.float32)
    b = rng.integers(-3, 4, (n, 16 * steps)).astype(np.float32)
    a_off, _, _ = place(64, 16, Swizzle.NONE)
    b_off, _, _ = place(n, 16, Swizzle.NONE)
    ga, gb = np.zeros(steps * a_img // 2, np.uint16), np.zeros(steps * b_img // 2, np.uint16)
    for s in range(steps):
        ga[(s * a_img + a_off) // 2] = a[:, 16 * s : 16 * s + 16].astype(np.float16).view(np.uint16)
        gb[(s * b_img + b_off) // 2] = b[:, 16 * s : 16 * s + 16].astype(np.float16).view(np.uint16)
    args = [
        ga.view(np.int32),
        gb.view(np.int32),
        np.zeros(1, np.float32),
        np.zeros(64 * n, np.float32),
    ]
    return fn, args, a @ b.T


def test_a_pipeline_refilling_a_stage_the_tensor_core_still_reads_is_caught():
    fn, args, _ = pipeline(refill_after_wait=False)
    e = fault(fn, args, r"writes 'sa' byte 0 .*at line 12, which the wgmma.mma_async at line 16")
    assert "no wgmma.wait_group has covered" in str(e)
    fn, args, expect = pipeline(refill_after_wait=True)
    run(fn, args)
    assert np.array_equal(args[3].reshape(64, 8), expect)


def producer_consumer(producer_waits: bool):
    """Warpgroup 0 multiplies, waits for its mma_async and releases the B stage through an
    mbarrier (thread 0 arrives); warpgroup 1 waits on the barrier and refills the stage."""
    g = Gemm(n=8, block=256)
    bars = sbuf("bars", (1,), "uint64")
    bar = ir.AddressOperand(ir.SharedAddress(bars, 0))
    tid = TX
    consumer = ir.cmp(ir.CmpOp.LT, tid, 128)
    first = ir.cmp(ir.CmpOp.EQ, tid, 0)
    arrive = ir.If(first, call("mbarrier.arrive.shared::cta.b64", bar, line=42), None, span(42))
    consume = seq(
        *g.steps["init"], *g.steps["fence"], *g.mmas, *g.steps["commit"], *g.steps["wait"], arrive
    )
    refill = ir.Store(g.sb, tid - 128, ir.const(0), I32, span(50))
    wait = call(
        "mbarrier.try_wait.parity.shared::cta.b64", bar, ir.ScalarOperand(ir.const(0)), line=49
    )
    produce = seq(wait, refill) if producer_waits else refill
    init = ir.If(
        first,
        call("mbarrier.init.shared::cta.b64", bar, ir.ScalarOperand(ir.const(1)), line=8),
        None,
        span(8),
    )
    body = seq(
        *g.steps["copy"],
        *g.steps["proxy"],
        init,
        ir.Barrier("cta", span(9)),
        ir.If(consumer, consume, produce, span(10)),
        ir.If(consumer, seq(*g.steps["out"]), None, span(30)),
    )
    fn = function(
        "pc",
        (g.GA, g.GB, g.Init, g.Out),
        body,
        block=(256, 1, 1),
        allocs=(g.sa, g.sb, g.acc, bars),
        variables=tuple(g.variables),
    )
    a, b, init = g.inputs()
    return fn, g.args(a, b, init), a @ b.T


def test_an_mbarrier_release_after_the_wait_orders_the_refill_by_another_warpgroup():
    fn, args, _ = producer_consumer(producer_waits=False)
    fault(
        fn,
        args,
        r"thread 128 .* writes 'sb' byte 0 .*line 50, which the tensor core \(warpgroup 0\) read at line 20",
    )
    fn, args, expect = producer_consumer(producer_waits=True)
    run(fn, args)
    assert np.array_equal(args[3].reshape(64, 8), expect)


def test_an_in_flight_accumulator_may_only_chain_into_the_same_registers():
    g = Gemm(n=16)
    a, b, init = g.inputs()
    m = g.mmas[0]
    shuffled = list(m.operands)
    regs = list(shuffled[0].regs)
    regs[0], regs[1] = regs[1], regs[0]
    shuffled[0] = ir.RegVector(tuple(regs), True)
    other = ir.PtxCall(m.instruction, tuple(shuffled), span(21))
    e = fault(g.function(mma=[m, other]), g.args(a, b, init), r"acc\[1\] is in flight .*line 20")
    assert e.span.line == 21
    again = list(m.operands)
    again[3] = ir.ScalarOperand(ir.const(1))
    chained = ir.PtxCall(m.instruction, tuple(again), span(21))
    out, _ = g.run(a, b, init, g.function(mma=[m, chained]))  # the same registers: a chain
    assert np.array_equal(out, 2 * (a @ b.T))


def test_accumulating_into_never_written_registers_is_a_fault():
    g = Gemm(n=8, scale_d=1)
    e = fault(g.function(init=[]), g.args(*g.inputs()), r"reads accumulator acc\[0\], which this")
    assert "scale-d = 0" in e.hint
    g0 = Gemm(n=8, scale_d=0)  # the twin: scale-d = 0 reads nothing
    out, _ = g0.run(*g0.inputs(), fn=g0.function(init=[]))
    a, b, _ = g0.inputs()
    assert np.array_equal(out, a @ b.T)


@pytest.mark.parametrize("text", [FENCE, COMMIT, WAIT])
def test_fence_commit_and_wait_are_warpgroup_collective_too(text):
    g = Gemm(n=8)
    ops = (ir.Immediate(0),) if text == WAIT else ()
    half = ir.If(ir.cmp(ir.CmpOp.LT, TX, 64), call(text, *ops, line=44), None, span(44))
    e = fault(g.function(extra=[half]), g.args(*g.inputs()), r"64 of 128 threads .*warp 2 lane 0")
    assert e.span.line == 44
