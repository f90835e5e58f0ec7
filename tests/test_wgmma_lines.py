"""wgmma's lines and forms end to end (tests/wgmma_lines.py): every type line, both forms
(A from shared memory, A from registers), MN-major 16-bit operands, the negating immediates
and scale-d, each kernel run by the simulator against numpy on exactly representable data,
its CUDA, its sm_90a build (no spills; SASS with the instruction of the right kind and
operands) and, marked ``gpu``, the H200 against the simulator bit for bit. Also FlashAttention-
3's chain (P from the S accumulator as the rs form's A, V as an MN-major B) and a view that
starts inside a swizzle period."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import tirx
from tests.wgmma_lines import BYTES, ELEMENT, chain_kernel, d_layout, line_kernel

TORCH = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
    "int8": torch.int8, "uint8": torch.uint8,
}  # fmt: skip

# (n, A type, B type, accumulator, options): one per form class
CASES = [
    (64, "f16", "f16", "f32", {}),
    (64, "f16", "f16", "f16", {}),
    (64, "bf16", "bf16", "f32", dict(scale_d0=0)),
    (32, "tf32", "tf32", "f32", {}),
    (64, "e4m3", "e5m2", "f32", {}),
    (64, "e5m2", "e5m2", "f16", dict(scale_b=-1)),
    (64, "s8", "u8", "s32", {}),
    (48, "u8", "u8", "s32", dict(sat=True)),
    (64, "f16", "f16", "f32", dict(rs=True)),
    (64, "e4m3", "e4m3", "f32", dict(rs=True, scale_a=-1)),
    (32, "tf32", "tf32", "f32", dict(rs=True)),
    (64, "s8", "s8", "s32", dict(rs=True)),
    (64, "f16", "f16", "f32", dict(trans_a=True, trans_b=True)),
    (128, "bf16", "bf16", "f32", dict(trans_b=True)),
    (64, "f16", "f16", "f16", dict(trans_a=True, trans_b=True, swizzled=False)),
    (16, "bf16", "bf16", "f32", dict(trans_b=True, swizzled=False)),
    (64, "f16", "f16", "f32", dict(rs=True, trans_b=True, scale_a=-1, scale_b=-1)),
    (32, "e4m3", "e4m3", "f32", dict(swizzled=False)),
    (16, "tf32", "tf32", "f32", dict(swizzled=False)),
    (256, "f16", "f16", "f32", dict(scale_a=-1, scale_d0=0)),
]


def _id(case):
    n, a, b, acc, kw = case
    return f"m64n{n}.{acc}.{a}.{b}" + "".join(f"-{k}={v}" for k, v in sorted(kw.items()))


def inputs(case, seed=0, device="cpu"):
    """A, B (integer-valued, within every type's exact range), Init and Out as torch tensors,
    and the exact expected Out (float64 or int64 values; .f16 results as halves)."""
    n, a, b, acc, kw = case
    g = torch.Generator().manual_seed(seed + n)
    kt = 128 // BYTES[a]
    low = {"u8": 0}
    av = torch.randint(low.get(a, -3), 4, (64, kt), generator=g)
    bv = torch.randint(low.get(b, -3), 4, (n, kt), generator=g)
    init = torch.randint(-8, 9, (64, n), generator=g)
    ref = (av.long() @ bv.long().T) * kw.get("scale_a", 1) * kw.get("scale_b", 1)
    ref = ref + (init if kw.get("scale_d0", 1) else 0)
    if acc == "f16":
        init_t = init.half().view(torch.int32).view(torch.uint32)
    elif acc == "s32":
        init_t = init.int()
    else:
        init_t = init.float()
    args = [av.to(TORCH[ELEMENT[a]]), bv.to(TORCH[ELEMENT[b]]), init_t, torch.zeros_like(init_t)]
    return [x.to(device) for x in args], ref


def result(case, out: torch.Tensor) -> torch.Tensor:
    """Out as int64 values (.f16 words unpacked to halves)."""
    if case[3] == "f16":
        out = out.cpu().view(torch.int32).view(torch.float16)
    return out.cpu().double().round().long()


def run_sim(case, seed=0):
    n, a, b, acc, kw = case
    args, ref = inputs(case, seed)
    tirx.compile(line_kernel(n, a, b, acc, **kw), target="sim")(*args)
    return args[3], ref


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_the_simulator_computes_each_form_exactly(case):
    out, ref = run_sim(case)
    assert torch.equal(result(case, out), ref)


def test_satfinite_clamps_and_the_plain_integer_form_wraps():
    """u8 x u8 sums up to 128 · 255 · 255 plus an Init near the int32 limit: .satfinite
    clamps to 2^31 - 1, the plain form wraps (two's complement), as the ISA says."""
    for sat in (True, False):
        case = (16, "u8", "u8", "s32", dict(sat=sat))
        args, _ = inputs(case)
        args[0].fill_(255)
        args[1].fill_(255)
        args[2].fill_(2**31 - 1000)
        tirx.compile(line_kernel(16, "u8", "u8", "s32", sat=sat), target="sim")(*args)
        exact = 128 * 255 * 255 + 2**31 - 1000
        want = 2**31 - 1 if sat else exact - 2**32
        assert (args[3] == want).all()


def test_tf32_operands_drop_their_low_mantissa_bits_in_both_forms():
    """1 + 2^-12 is not a tf32 value: the tensor core reads 1 (tirx/sim/tf32.py)."""
    for rs in (False, True):
        case = (8, "tf32", "tf32", "f32", dict(rs=rs, scale_d0=0))
        args, _ = inputs(case)
        args[0].fill_(1 + 2**-12)
        args[1].fill_(1.0)
        tirx.compile(line_kernel(8, "tf32", "tf32", "f32", rs=rs, scale_d0=0), target="sim")(*args)
        assert (args[3] == 32.0).all()  # 32 products of 1 · 1


def test_fp8_values_are_decoded_exactly():
    """Powers of two across e4m3's and e5m2's ranges and subnormals multiply exactly."""
    case = (8, "e4m3", "e5m2", "f32", dict(scale_d0=0))
    args, _ = inputs(case)
    a = torch.zeros(64, 128)
    b = torch.zeros(8, 128)
    a[:, 0], b[:, 0] = 2.0**-9, 2.0**-16  # the smallest subnormals of both formats
    a[:, 1], b[:, 1] = 448.0, 57344.0  # the largest finite values
    a[:, 2], b[:, 2] = -1.75, 3.0
    args[0], args[1] = a.to(torch.float8_e4m3fn), b.to(torch.float8_e5m2)
    tirx.compile(line_kernel(8, "e4m3", "e5m2", "f32", scale_d0=0), target="sim")(*args)
    want = np.float32(2.0**-25 + 448.0 * 57344.0 - 5.25)
    assert (args[3].numpy() == want).all()


# ------------------------------------------------------------------ CUDA and the build


def _cuda(fn):
    from tirx.backend.cuda.codegen import generate

    return generate(tirx.compile(fn, target="sim").lowered)


def _mma_asm(source: str) -> str:
    start = source.index('asm volatile("{ .reg .pred tirx_p')
    return source[start : source.index(");", start) + 2]


@pytest.mark.parametrize(
    "case, text, pieces",
    [
        (
            (64, "f16", "f16", "f16", {}),
            "m64n64k16.f16.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
            "%14, %15}, %16, %17, tirx_p, 1, 1, 0, 0;",
            ['"+r"(acc_r[0])', '"l"(', '"r"(('],
        ),
        (
            (8, "e4m3", "e4m3", "f32", dict(rs=True, scale_a=-1)),
            "m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, tirx_p, -1, 1;",
            ['"+f"(acc_r[0])', '"r"(reinterpret_cast<unsigned int*>(a_el)['],
        ),
        (
            (8, "s8", "u8", "s32", dict(sat=True)),
            "m64n8k32.satfinite.s32.s8.u8 {%0, %1, %2, %3}, %4, %5, tirx_p;",
            ['"+r"(acc_r[0])'],
        ),
        (
            (64, "bf16", "bf16", "f32", dict(trans_a=True, trans_b=True)),
            "m64n64k16.f32.bf16.bf16 {%0,",
            [", tirx_p, 1, 1, 1, 1; }"],
        ),
        (
            (64, "f16", "f16", "f32", dict(rs=True, trans_b=True)),
            "{%32, %33, %34, %35}, %36, tirx_p, 1, 1, 1; }",
            [],
        ),
    ],
)
def test_the_cuda_of_each_form_class(case, text, pieces):
    n, a, b, acc, kw = case
    asm = _mma_asm(_cuda(line_kernel(n, a, b, acc, **kw)))
    assert text in asm, asm
    for piece in pieces:
        assert piece in asm, asm


def _nvrtc():
    try:
        from tirx.backend.cuda.nvrtc import nvrtc_version

        nvrtc_version()
    except Exception as e:  # no NVRTC library on this machine
        pytest.skip(f"NVRTC is not available: {e}")


BUILDS = [
    ((64, "f16", "f16", "f16", {}), "HGMMA.64x64x16.F16 R24, gdesc[UR4], R24"),
    ((32, "tf32", "tf32", "f32", {}), "HGMMA.64x32x8.F32.TF32 R24, gdesc[UR4], R24"),
    ((64, "e4m3", "e5m2", "f32", {}), "QGMMA.64x64x32.F32.E4M3.E5M2 R24, gdesc[UR4], R24"),
    ((48, "u8", "u8", "s32", dict(sat=True)), "IGMMA.64x48x32.U8.U8.SAT R24, gdesc[UR4], R24"),
    ((64, "f16", "f16", "f32", dict(rs=True)), r"HGMMA.64x64x16.F32 R24, R\d+, gdesc\[UR4\], R24"),
    ((64, "s8", "s8", "s32", dict(rs=True)), r"IGMMA.64x64x32.S8.S8 R24, R\d+, gdesc\[UR4\], R24"),
    ((64, "f16", "f16", "f32", dict(trans_a=True, trans_b=True)), "gdesc[UR4].tnspA.tnspB, R24"),
    ((64, "f16", "f16", "f32", dict(scale_a=-1, scale_b=-1)), "gdesc[UR4].negA.negB, R24"),
]


@pytest.mark.parametrize("case, sass", BUILDS, ids=[_id(c) for c, _ in BUILDS])
def test_each_form_class_builds_for_sm_90a_without_spills(case, sass):
    _nvrtc()
    n, a, b, acc, kw = case
    exe = tirx.compile(line_kernel(n, a, b, acc, **kw), target="cuda -arch=sm_90")
    assert exe.arch == "sm_90a"
    assert exe.stats["spill_stores"] == 0 and exe.stats["spill_loads"] == 0
    if exe.sass is None:
        pytest.skip("no disassembler (nvdisasm/cuobjdump) installed")
    mma = [ln for ln in exe.sass.splitlines() if "GMMA." in ln]
    assert len(mma) == 4 and all(re.search(sass, ln) or sass in ln for ln in mma), mma
    assert "STL" not in exe.sass and "LDL" not in exe.sass


# ------------------------------------------------------------- FlashAttention-3's chain


def _chain_inputs(d, seed=0):
    g = torch.Generator().manual_seed(seed + d)
    q, k = (torch.randint(-1, 2, (64, 64), generator=g).half() for _ in range(2))
    v = torch.randint(-1, 2, (64, d), generator=g).half()
    ref = (q.float() @ k.float().T).half().float() @ v.float()
    return [q, k, v, torch.zeros(64, d)], ref


@pytest.mark.parametrize("d", [64, 128])
def test_p_from_the_s_accumulator_is_the_rs_forms_a(d):
    args, ref = _chain_inputs(d)
    tirx.compile(chain_kernel(d), target="sim")(*args)
    assert torch.equal(args[3], ref)


def test_the_chain_keeps_p_in_registers():
    """The conversion packs S's registers pairwise (F2FP) into the very registers the rs
    HGMMAs read; nothing goes to local memory."""
    _nvrtc()
    exe = tirx.compile(chain_kernel(64), target="cuda -arch=sm_90")
    assert exe.stats["spill_stores"] == 0 and exe.stats["stack_bytes"] == 0
    if exe.sass is None:
        pytest.skip("no disassembler (nvdisasm/cuobjdump) installed")
    packs = [ln for ln in exe.sass.splitlines() if "F2FP.F16.F32.PACK_AB" in ln]
    rs = [ln for ln in exe.sass.splitlines() if re.search(r"HGMMA.*R\d+, gdesc.*tnspB", ln)]
    assert len(packs) == 16 and len(rs) == 4
    written = {re.search(r"PACK_AB (R\d+)", ln).group(1) for ln in packs}
    assert {re.search(r"R24, (R\d+),", ln).group(1) for ln in rs} <= written


# ----------------------------------------------------------------------- on the H200


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_the_gpu_equals_the_simulator(case):
    n, a, b, acc, kw = case
    sim, ref = run_sim(case, seed=7)
    args, _ = inputs(case, seed=7, device="cuda")
    tirx.compile(line_kernel(n, a, b, acc, **kw), target="cuda")(*args)
    torch.cuda.synchronize()
    same = args[3].cpu().view(torch.int32).equal(sim.view(torch.int32))
    assert same and torch.equal(result(case, sim), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
def test_the_gpu_runs_the_chain_as_the_simulator(d):
    args, ref = _chain_inputs(d, seed=3)
    gpu = [x.cuda() for x in args]
    tirx.compile(chain_kernel(d), target="cuda")(*gpu)
    torch.cuda.synchronize()
    assert torch.equal(gpu[3].cpu(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("rs", [False, True])
def test_tf32_with_full_mantissas_follows_the_truncation_on_the_gpu(rs):
    """Random 23-bit mantissas: the H200 against the simulator's truncated operands (equal up
    to the accumulation's own rounding), and farther from operands rounded to nearest."""
    case = (64, "tf32", "tf32", "f32", dict(rs=rs, scale_d0=0))
    args, _ = inputs(case, seed=11)
    g = torch.Generator().manual_seed(5)
    args[0] = torch.rand(64, 32, generator=g) + 0.5
    args[1] = torch.rand(64, 32, generator=g) + 0.5
    sim_args = [x.clone() for x in args]
    tirx.compile(line_kernel(*case[:4], **case[4]), target="sim")(*sim_args)
    gpu = [x.cuda() for x in args]
    tirx.compile(line_kernel(*case[:4], **case[4]), target="cuda")(*gpu)
    torch.cuda.synchronize()
    out, sim = gpu[3].cpu().double(), sim_args[3].double()
    bits = lambda t: (t.view(torch.int32) + 0x1000) & ~0x1FFF  # noqa: E731  (round half away)
    nearest = (
        bits(args[0]).view(torch.float32).double() @ bits(args[1]).view(torch.float32).double().T
    )
    assert ((out - sim).abs() / sim.abs()).max() < 1e-5
    assert ((out - sim).abs()).max() < ((out - nearest).abs()).max()


# ------------------------------------------------------------------ the fragment identity

THREADS = (0, 1, 2, 3, 4, 5, 31, 32, 33, 65, 127)


def identity_table(j: int = 1) -> str:
    """docs/attention.md's table for wgmma: for some threads of the warpgroup, the (row, key)
    of the S accumulator's slots of k16 slice ``j`` (tirx's layout), the (row, keys) of P's
    words there (the layout packed two halves a word, as ``.view("uint32")`` does), and of
    the rs form's A registers 0-3 by the ISA's figure (thread 32w + 4g + t: row 16w + g +
    8 (r % 2), keys 16 j + 2t + 8 (r // 2) and the next)."""
    acc = d_layout(64)
    words = acc.pack(2)
    held, in_words = {}, {}
    for row, key in itertools.product(range(64), range(64)):
        at = acc.apply(row, key, shape=(64, 64))
        held[32 * at["wid_in_wg"] + at["laneid"], at["m"]] = f"{row},{key}"
    for row, w in itertools.product(range(64), range(32)):
        at = words.apply(row, w, shape=(64, 32))
        in_words[32 * at["wid_in_wg"] + at["laneid"], at["m"]] = f"{row},{2 * w}:{2 * w + 1}"
    lines = [
        f"| thread | S accumulator, slots {8 * j}–{8 * j + 7}: (row, key) | P's words "
        f"{4 * j}–{4 * j + 3}: (row, keys) | rs A registers 0–3 (ISA) |",
        "|---|---|---|---|",
    ]
    for t in THREADS:
        w, g, t4 = t // 32, t % 32 // 4, t % 4
        isa = []
        for r in range(4):
            key = 16 * j + 2 * t4 + 8 * (r // 2)
            isa.append(f"{16 * w + g + 8 * (r % 2)},{key}:{key + 1}")
        lines.append(
            f"| {t} | {' '.join(held[t, m] for m in range(8 * j, 8 * j + 8))} "
            f"| {' '.join(in_words[t, m] for m in range(4 * j, 4 * j + 4))} | {' '.join(isa)} |"
        )
    return "\n".join(lines)


def test_p_s_words_are_the_rs_a_registers_for_every_thread_and_slice():
    acc = d_layout(64)
    words = acc.pack(2)
    for row, w in itertools.product(range(64), range(32)):
        at = words.apply(row, w, shape=(64, 32))
        thread, slot = 32 * at["wid_in_wg"] + at["laneid"], at["m"]
        j, word = divmod(w, 8)
        # the ISA: register r of thread 32w' + 4g + t holds row 16w' + g + 8 (r % 2),
        # word t + 4 (r // 2) of the slice
        r = (row % 16) // 8 + 2 * (word // 4)
        assert (thread, slot) == (32 * (row // 16) + 4 * (row % 8) + word % 4, 4 * j + r)


def test_the_docs_table_of_the_wgmma_identity_is_current():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "attention.md").read_text()
    assert identity_table() in doc
