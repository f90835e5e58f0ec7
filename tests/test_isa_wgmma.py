"""The wgmma family (tirx/isa/wgmma.py, wgmma_descriptor.py; tirx/backend/cuda/wgmma.py): the
forms, the raw and tile forms' checks (each fires on a kernel built to break it and stays
silent on its twin), the CUDA of each form, the descriptors the tile form derives (against
the ISA's canonical-layout formulas written here), the sm_90a build, and the GPU results."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

import tirx
from tests.helpers import define
from tests.wgmma_kernels import d_layout, descriptor_kernel, tile_layout, wgmma_kernel
from tirx.errors import ContractError, SimulationError, TirxError, TirxSyntaxError
from tirx.ir import nodes as ir
from tirx.isa import lookup, supported_forms
from tirx.transform.limits import MachineLimitError

MMA = "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t}"
F16_128 = MMA.format(n=128, t="f16")


# ---------------------------------------------------------------------------- the forms


def _isa_forms() -> set[str]:
    """The mma_async texts of the PTX ISA's syntax lines (9.7.15.5.2), written out here: N
    every multiple of 8 to 256 (integer line: 8, 16, 24 and multiples of 16 from 32)."""
    every = range(8, 257, 8)
    integer = [8, 16, 24, *range(32, 257, 16)]
    head = "wgmma.mma_async.sync.aligned.m64n"
    out = {f"{head}{n}k16.{d}.f16.f16" for n in every for d in ("f32", "f16")}
    out |= {f"{head}{n}k16.f32.bf16.bf16" for n in every}
    out |= {f"{head}{n}k8.f32.tf32.tf32" for n in every}
    f8 = ("e4m3", "e5m2")
    out |= {
        f"{head}{n}k32.{d}.{a}.{b}" for n in every for d in ("f32", "f16") for a in f8 for b in f8
    }
    i8 = ("s8", "u8")
    out |= {
        f"{head}{n}k32{sat}.s32.{a}.{b}"
        for n in integer for sat in ("", ".satfinite") for a in i8 for b in i8
    }  # fmt: skip
    return out


def test_forms_are_the_isa_syntax_lines():
    forms = [f for f in supported_forms() if f.startswith("wgmma.")]
    mma = {f for f in forms if ".mma_async." in f}
    assert mma == _isa_forms() and len(mma) == 528
    assert set(forms) - mma == {
        "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned",
        "wgmma.wait_group.sync.aligned",
    }
    c = lookup(F16_128)
    assert c.min_arch == 90 and c.arch_specific
    assert [o.name for o in c.operands] == [
        "D", "A", "B", "scale_d", "scale_a", "scale_b", "trans_a", "trans_b",
    ]  # fmt: skip
    assert c.operand("D").registers == 64 and c.operand("D").atom == (64, 128)


@pytest.mark.parametrize(
    "text, words",
    [
        (MMA.format(n=12, t="f16"), "N is 12"),
        (MMA.format(n=264, t="f16"), "N is 264"),
        ("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.bf16", "same type"),
        ("wgmma.mma_async.sync.aligned.m64n128k16.f16.bf16.bf16", "accumulates in .f32, not .f16"),
        ("wgmma.mma_async.sync.aligned.m64n128k16.f32.tf32.tf32", "K = 8 (m64nNk8), not 16"),
        ("wgmma.mma_async.sync.aligned.m64n128k8.f32.f16.f16", "K = 16 (m64nNk16), not 8"),
        ("wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8", "N is 40"),
        ("wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.s8", "no wgmma line multiplies"),
        ("wgmma.mma_async.sync.aligned.m64n64k16.satfinite.f32.f16.f16", ".satfinite belongs"),
        ("wgmma.mma_async.sync.aligned.m64n64k8.f16.tf32.tf32", "accumulates in .f32, not .f16"),
        ("wgmma.mma_async.sync.aligned.m64n64k256.s32.b1.b1", ".b1 line, K = 256, is not"),
        ("wgmma.mma_async.sp.sync.aligned.m64n128k16.f32.f16.f16", "sparse"),
        ("wgmma.fence.sync.aligned.m64n128k16", "no other modifiers"),
    ],
)
def test_unsupported_spellings_say_why(text, words):
    with pytest.raises(ContractError, match=re.escape(words)):
        lookup(text)
    assert lookup(MMA.format(n=120, t="bf16")).param("n") == 120  # the twin: a real form


def test_accumulator_fragment_is_the_isa_figure():
    """Each thread holds N/2 distinct elements; row 16w + lane/4 + 8h, col 8j + 2(lane%4) + e
    in register 4j + 2h + e (PTX ISA, wgmma register fragments, written out here)."""
    owner = lookup(MMA.format(n=64, t="f16")).operand("D").owner_table()
    for t in range(128):
        w, lane = divmod(t, 32)
        for j in range(8):
            for h in range(2):
                for e in range(2):
                    row, col = 16 * w + lane // 4 + 8 * h, 8 * j + 2 * (lane % 4) + e
                    assert owner[(row, col)] == (t, 4 * j + 2 * h + e)


# ------------------------------------------------------------------- kernels to break

KERNEL = """
from tirx.layout import wid_in_wg, tid_in_wg
N = {n}
D_LAYOUT = {d_layout}
LA = {a_layout}
LB = {b_layout}

@T.function
def kern(A: T.Tensor((64, 64), "{el}"), B: T.Tensor((N, 64), "{el}"), Out: T.Tensor((64, N), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={block}))
    As = T.alloc_shared(({arows}, 64), "{el}", layout=LA, align={align})
    Bs = T.alloc_shared((N, 64), "{el}", layout=LB, align={align})
    acc = T.alloc_local((N // 2,), "float32")
    tid = T.cuda.thread_idx("x")
    As[tid // 2, tid % 2] = A[tid // 2, tid % 2]
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.cta_sync()
    D = acc.view(64, N, layout=D_LAYOUT)
    T.ptx["wgmma.fence.sync.aligned"]()
    for kk in T.unroll(4):
        T.cuda.tile.apply(T.ptx["{text}"], D, {a}, {b}, scope="{scope}"{extra})
    T.ptx["wgmma.commit_group.sync.aligned"]()
    T.ptx["wgmma.wait_group.sync.aligned"]({wait})
    Out[tid // 2, tid % 2] = acc[0]
"""
SW = "ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))"
SWB = "ComposeLayout(3, 3, 3, TileLayout(S[(N, 64)]))"
GOOD = dict(
    n=128, arows=64, el="float16", text=F16_128, block=128, align=1024, scope="warpgroup", wait=0,
    a_layout=SW, b_layout=SWB, d_layout="d_layout(N)", extra="",
    a="As[:, 16 * kk : 16 * kk + 16]", b="Bs[:, 16 * kk : 16 * kk + 16]",
)  # fmt: skip


def _kernel(tmp_path, **change):
    source = KERNEL.format(**{**GOOD, **change})
    return define(source, tmp_path, "kern", d_layout=d_layout)


def _lower(tmp_path, target="sim", **change):
    return tirx.compile(_kernel(tmp_path, **change), target=target)


def test_the_good_kernel_lowers_to_one_call_per_k_slice(tmp_path):
    exe = _lower(tmp_path)
    calls = [n for n in ir_walk(exe.lowered.body) if isinstance(n, ir.PtxCall)]
    mma = [c for c in calls if c.instruction == F16_128]
    assert len(mma) == 1  # inside the unrolled loop
    d, a, b, scale_d, *imms = mma[0].operands
    assert d.is_output and [r.slot for r in d.regs] == list(range(64))
    assert isinstance(a, ir.ScalarOperand) and a.value.dtype == ir.U64
    assert [i.value for i in imms] == [1, 1, 0, 0]
    assert isinstance(scale_d.value, ir.Var) or scale_d.value.dtype == ir.I32


def ir_walk(body):
    from tirx.ir.visitor import walk

    return walk(body)


@pytest.mark.parametrize(
    "change, error, words",
    [
        (dict(scope="warp"), TirxSyntaxError, 'scope="warpgroup"'),
        (dict(block=96), MachineLimitError, "whole warpgroups of 128 threads"),
        (
            dict(
                d_layout="TileLayout(S[(4, 2, 8, N // 8, 4, 2) : (1 @ wid_in_wg, 2, 1 @ laneid, 4, 8 @ laneid, 1)])"
            ),
            ContractError,
            "element (0, 2) belongs to thread 1",
        ),
        (
            dict(
                d_layout="TileLayout(S[(4, 2, 8, N // 8, 4, 2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 0)])"
            ),
            ContractError,
            "registers 0 and 1 both write slot 0",
        ),
        (dict(el="bfloat16"), ContractError, "operand A must be a float16 view"),
        (
            dict(text=MMA.format(n=64, t="f16")),
            ContractError,
            "operand D must be a float32 view of shape (64, 64)",
        ),
        (
            dict(b="Bs[0:64, 16 * kk : 16 * kk + 16]"),
            ContractError,
            "operand B must have shape (128, 16)",
        ),
        (dict(a="As[:, 4 * kk : 4 * kk + 16]"), ContractError, "operand A starts at an offset"),
        (dict(align=128), ContractError, "needs its tile to start on a 1024-byte boundary"),
        (
            dict(a_layout="ComposeLayout(3, 3, 4, TileLayout(S[(64, 64)]))"),
            ContractError,
            "none of the descriptor's",
        ),
        (
            dict(a_layout="TileLayout(S[(64, 64)])", align=16),
            ContractError,
            "element (1, 0) lies 128 bytes",
        ),
        (dict(a_layout="TileLayout(S[(64, 64) : (1, 64)])", align=16), ContractError, "MN-major"),
        (dict(extra=", scale_a=2"), ContractError, "scale_a must be a compile-time 1 or -1"),
        (dict(extra=", trans_b=1"), TirxSyntaxError, "unexpected keyword argument 'trans_b'"),
        (dict(text="wgmma.fence.sync.aligned"), ContractError, "takes 0 operands"),
    ],
)
def test_each_tile_check_fires_at_the_users_line(tmp_path, change, error, words):
    with pytest.raises(error) as info:
        _lower(tmp_path, **change)
    assert words in str(info.value), str(info.value)
    if words == "operand B must have shape (128, 16)":  # rows, not columns, are wrong
        assert info.value.hint == (
            "take 128 rows (the line's N): tile[128 * i : 128 * i + 128, ...], or name the line "
            "whose N is 64 (m64n64)"
        ), info.value.hint
    assert info.value.span is not None and info.value.span.line > 1
    _lower(tmp_path)  # the twin


def _guarded(block: int, guard: bool) -> str:
    """The good kernel with ``block`` threads; warpgroup 0 loads the whole tiles, and with
    ``guard`` only warpgroup 0 multiplies (``if tid < 128``), without it every thread."""
    lines = KERNEL.format(**{**GOOD, "block": block, "extra": ", scale_d=kk"}).splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("    As[tid // 2"))
    loads = [
        "    if tid < 128:",
        "        for i in range(32):",
        "            As[tid // 2, (tid % 2) * 32 + i] = A[tid // 2, (tid % 2) * 32 + i]",
        "        for i in range(64):",
        "            Bs[tid, i] = B[tid, i]",
    ]
    mma = next(i for i, ln in enumerate(lines) if ln.startswith("    D = acc.view"))
    rest = lines[mma:]
    if guard:
        rest = ["    if tid < 128:", *(f"    {ln}" if ln.strip() else ln for ln in rest)]
    return "\n".join([*lines[:first], *loads, *lines[first + 1 : mma], *rest])


def test_a_warp_past_the_last_whole_warpgroup_may_stay_out_of_wgmma(tmp_path):
    """160 threads: warpgroup 0 multiplies, warp 4 (a producer warp's place) does not: built and
    run as with 128 threads. Every thread of 192 executing it is the simulator's fault at the
    wgmma, naming the warpgroup of 64 threads; setmaxnreg still needs whole warpgroups
    (tests/test_setmaxnreg.py)."""
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    b = rng.integers(-3, 4, (128, 64)).astype(np.float16)
    outs = []
    for block in (128, 160):
        k = define(_guarded(block, True), tmp_path, "kern", d_layout=d_layout)
        tirx.compile(k, target="cuda -arch=sm_90")  # NVRTC builds it
        out = np.zeros((64, 128), np.float32)
        tirx.compile(k, target="sim")(a, b, out)
        outs.append(out)
    assert np.array_equal(outs[0], outs[1]) and outs[0].any()
    k = define(_guarded(192, False), tmp_path, "kern", d_layout=d_layout)
    with pytest.raises(SimulationError, match=r"warpgroup 1 \(warps 4..7\), which has only 64"):
        tirx.compile(k, target="sim")(a, b, np.zeros((64, 128), np.float32))


@pytest.mark.gpu
def test_gpu_a_warp_past_the_last_whole_warpgroup_stays_out_as_on_the_simulator(tmp_path):
    import torch

    rng = np.random.default_rng(2)
    a = torch.from_numpy(rng.integers(-3, 4, (64, 64)).astype(np.float16))
    b = torch.from_numpy(rng.integers(-3, 4, (128, 64)).astype(np.float16))
    k = define(_guarded(160, True), tmp_path, "kern", d_layout=d_layout)
    sim = torch.zeros(64, 128)
    tirx.compile(k, target="sim")(a, b, sim)
    gpu = torch.zeros(64, 128, device="cuda")
    tirx.compile(k, target="cuda")(a.cuda(), b.cuda(), gpu)
    torch.cuda.synchronize()
    assert torch.equal(gpu.cpu(), sim) and sim.any()


def test_a_start_in_the_first_rows_of_a_period_and_a_128_aligned_buffer_are_accepted(tmp_path):
    """Starting 8 rows (one swizzle period) into the tile is fine; so is an unswizzled tile of
    core matrices in a 16-aligned buffer."""
    _lower(tmp_path, arows=72, a="As[8:72, 16 * kk : 16 * kk + 16]",
           a_layout="ComposeLayout(3, 3, 3, TileLayout(S[(72, 64)]))")  # fmt: skip


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_100"])
def test_archs_other_than_sm_90_are_refused_naming_sm_90a(tmp_path, arch):
    with pytest.raises(ContractError, match="needs sm_90a") as info:
        _raw(tmp_path, target=f"cuda -arch={arch}")
    assert str(info.value).startswith("wgmma.fence.sync.aligned needs sm_90a")
    assert 'T.ptx["wgmma.fence.sync.aligned"]()' in str(info.value)  # the line, with a caret
    with pytest.raises(ContractError, match="needs sm_90a"):
        _lower(tmp_path, target="cuda -arch=sm_100")
    _raw(tmp_path, target="sim")  # the simulator's sm_90 takes them


def test_sm_90_builds_for_sm_90a_and_the_cache_key_follows(tmp_path):
    _nvrtc()
    from tirx.backend.cuda import build
    from tirx.backend.cuda.nvrtc import command_line, nvrtc_version

    exe = tirx.compile(_kernel(tmp_path), target="cuda -arch=sm_90")
    assert exe.arch == "sm_90a" and exe.target.arch == "sm_90"
    assert exe.nvrtc.options[0] == "--gpu-architecture=sm_90a"
    options = build.nvrtc_options(nvrtc_version())
    assert tuple(exe.nvrtc.options) == command_line("sm_90a", options)
    plain = tirx.compile(descriptor_kernel(), target="cuda -arch=sm_90")  # no wgmma: sm_90
    assert plain.arch == "sm_90" and plain.nvrtc.options[0] == "--gpu-architecture=sm_90"


# --------------------------------------------------------------------------- raw form

RAW = """
@T.function
def raw(Out: T.Tensor((4,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    acc = T.alloc_local((4,), "float32")
    desc = T.alloc_local((2,), "uint64")
    T.ptx["wgmma.fence.sync.aligned"]()
    T.ptx["wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"]({ops})
    T.ptx["wgmma.commit_group.sync.aligned"]()
    T.ptx["wgmma.wait_group.sync.aligned"]({wait})
    Out[0] = acc[0]
"""
RAW_OPS = "acc, desc[0], desc[1], 1, 1, 1, 0, 0"


def _raw(tmp_path, ops=RAW_OPS, wait="1", target="sim"):
    return tirx.compile(define(RAW.format(ops=ops, wait=wait), tmp_path, "raw"), target=target)


@pytest.mark.parametrize(
    "ops, wait, words",
    [
        (RAW_OPS, "8", "n is 8, outside 0..7"),
        (RAW_OPS, "T.cuda.thread_idx('x')", "n must be a compile-time int"),
        ("acc, desc[0], desc[1], 1, 1, 1, 0", "1", "takes 4 accumulator registers"),
        ("desc, desc[0], desc[1], 1, 1, 1, 0, 0", "1", "takes 4 accumulator registers"),
        (
            "acc[0], acc[1], acc[2], acc[2], desc[0], desc[1], 1, 1, 1, 0, 0",
            "1",
            "d2 and d3 are the same",
        ),
        ("acc, desc[0], desc[1], 1, 2, 1, 0, 0", "1", "scale_a must be a compile-time 1 or -1"),
        ("acc, desc[0], desc[1], 1, 1, 1, 0, 2", "1", "trans_b must be a compile-time 0 or 1"),
        ("acc, desc[0], 1.5, 1, 1, 1, 0, 0", "1", "b_desc must be an integer"),
        ("acc, desc[0], T.cuda.thread_idx('x'), 1, 1, 1, 0, 0", "1", "64-bit matrix descriptor"),
        ("acc, desc[0], desc[1], acc[0], 1, 1, 0, 0", "1", "scale_d must be an integer"),
    ],
)
def test_each_raw_check_fires(tmp_path, ops, wait, words):
    with pytest.raises(TirxError) as info:
        _raw(tmp_path, ops, wait)
    assert words in str(info.value), str(info.value)
    _raw(tmp_path)  # the twin


def test_a_tensor_stands_for_its_elements_in_the_raw_form(tmp_path):
    whole = _raw(tmp_path)
    scalars = _raw(tmp_path, "acc[0], acc[1], acc[2], acc[3], desc[0], desc[1], 1, 1, 1, 0, 0")
    assert _mma_line(_cuda(whole)) == _mma_line(_cuda(scalars))


def _cuda(exe):
    from tirx.backend.cuda.codegen import generate

    return generate(exe.lowered)


def _mma_line(source: str) -> str:
    start = source.index('asm volatile("{ .reg .pred tirx_p')
    return source[start : source.index(");", start) + 2]


def test_cuda_text_of_each_form(tmp_path):
    src = _cuda(_raw(tmp_path))
    assert 'asm volatile("wgmma.fence.sync.aligned;" ::: "memory");' in src
    assert 'asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");' in src
    assert 'asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");' in src
    line = _mma_line(src)
    assert (
        "{ .reg .pred tirx_p; setp.ne.b32 tirx_p, %6, 0; wgmma.mma_async.sync.aligned."
        "m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, tirx_p, 1, 1, 0, 0; }" in line
    )
    assert [f'"+f"(acc[{i}])' in line for i in range(4)] == [True] * 4
    assert line.count('"l"(') == 2 and line.count('"r"(') == 1 and "memory" not in line
    tile = _cuda(_lower(tmp_path))
    assert _mma_line(tile).count('"+f"(') == 64


# ------------------------------------------------------------------ descriptors (ISA)

ISA_MODE = {None: 0, 128: 1, 64: 2, 32: 3}  # the descriptor's bits 62-63


def _isa_read(start: int, lbo: int, sbo: int, swizzle: int | None, row: int, k: int) -> int:
    """The byte the hardware reads for element (row, k) of a K-major 16-bit operand, from the
    ISA's canonical layouts and swizzle figures (swizzle: row bytes 128/64/32, or None)."""
    if swizzle is None:
        off = (row % 8) * 16 + (row // 8) * sbo + (k // 8) * lbo + (k % 8) * 2
        return start + off
    off = (row % 8) * swizzle + (row // 8) * sbo + (k // 8) * 16 + (k % 8) * 2
    addr = start + off
    phase_bits = {128: 3, 64: 2, 32: 1}[swizzle]
    chunk = (addr >> 4) & ((1 << phase_bits) - 1)
    phase = (addr >> 7) & ((1 << phase_bits) - 1)
    return addr & ~(((1 << phase_bits) - 1) << 4) | ((chunk ^ phase) << 4)


DESC_KERNEL = """
DL = d_layout(64)

@T.function
def desc(Out: T.Tensor((1,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    pad = T.alloc_shared((64,), "float16", align=1024)
    t = T.alloc_shared({shape}, "float16", layout={layout}, align=1024)
    acc = T.alloc_local((32,), "float32")
    D = acc.view(64, 64, layout=DL)
    T.ptx["wgmma.fence.sync.aligned"]()
    T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"], D, {view},
                      {view}, scope="warpgroup", scale_d=0)
"""


@pytest.mark.parametrize(
    "shape, layout, view, swizzle, start, lbo, sbo",
    [  # (tile shape, layout, the (64, 16) view; expected mode, start byte, LBO, SBO)
        (
            "(64, 64)",
            "ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))",
            "t[:, 48:64]",
            128,
            96,
            16,
            1024,
        ),
        (
            "(64, 32)",
            "ComposeLayout(3, 2, 3, TileLayout(S[(64, 32)]))",
            "t[:, 16:32]",
            64,
            32,
            16,
            512,
        ),
        ("(64, 16)", "ComposeLayout(3, 1, 3, TileLayout(S[(64, 16)]))", "t[:, :]", 32, 0, 16, 256),
        (
            "(2, 64, 16)",
            "TileLayout(S[(2, 8, 8, 2, 8) : (1024, 128, 8, 64, 1)])",
            "t[1]",
            None,
            2048,
            128,
            256,
        ),
        (
            "(64, 16)",
            "TileLayout(S[(8, 8, 2, 8) : (64, 8, 512, 1)])",
            "t[:, :]",
            None,
            0,
            1024,
            128,
        ),
    ],
)
def test_descriptor_values_follow_the_isa_canonical_layouts(
    tmp_path, shape, layout, view, swizzle, start, lbo, sbo
):
    fn = define(DESC_KERNEL.format(shape=shape, layout=layout, view=view), tmp_path, "desc",
                d_layout=d_layout)  # fmt: skip
    exe = tirx.compile(fn, target="sim")
    call = next(n for n in ir_walk(exe.lowered.body) if isinstance(n, ir.PtxCall) and n.operands)
    value = call.operands[1].value  # cast((SharedAddress & 0x3FFFF) >> 4) | fields
    fields = value.b.value
    address = next(n for n in ir_walk(value) if isinstance(n, ir.SharedAddress))
    t = next(b for b in exe.lowered.allocations if b.name == "t")
    base = exe.lowered.shared_offsets[t]
    assert base % 1024 == 0 and address.buffer is t
    assert (
        int(
            address.byte_offset
            if isinstance(address.byte_offset, int)
            else address.byte_offset.value
        )
        == start
    )
    want = (lbo >> 4) << 16 | (sbo >> 4) << 32 | ISA_MODE[swizzle] << 62
    assert fields == want
    # and every element of the view is where the hardware reads it
    tv = _view_of(fn, view)
    for r in range(64):
        for k in range(16):
            assert _tirx_byte(tv, r, k) == _isa_read(start, lbo, sbo, swizzle, r, k)


def _view_of(fn, text):
    """The (64, 16) view the kernel passes (from its script-level TileOp)."""
    op = next(n for n in ir_walk(fn.ir.body) if isinstance(n, ir.TileOp))
    return op.operands[1]


def _tirx_byte(view, r, k):
    from tirx.isa.shared_rows import element_offset

    return int(element_offset(view, (r, k))) * 2


def test_encode_matrix_descriptor_writes_the_isa_bits_in_the_simulator():
    exe = tirx.compile(descriptor_kernel(), target="sim")
    out = np.zeros(2, np.uint64)
    exe(out)
    desc, address = int(out[0]), int(out[1])
    assert desc == ((address & 0x3FFFF) >> 4) | 1 << 16 | 64 << 32 | 1 << 62


@pytest.mark.parametrize(
    "args, words",
    [
        ("desc[0], As[0, 0], 1, 64, 4", "swizzle is 4, outside 0..3"),
        ("desc[0], As[0, 0], 1 << 14, 64, 3", "ldo is 16384"),
        ("As[0, 0], As[0, 0], 1, 64, 3", "desc must be an element of a local uint64"),
        ("desc[0], desc[0], 1, 64, 3", "addr must be an element of a shared tensor"),
        ("desc[0], As[0, 0], 1, 64", "takes five operands"),
    ],
)
def test_encode_matrix_descriptor_checks(tmp_path, args, words):
    source = """
@T.function
def enc(Out: T.Tensor((1,), "uint64")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    As = T.alloc_shared((64, 64), "float16", align=1024)
    desc = T.alloc_local((1,), "uint64")
    T.cuda.wgmma.encode_matrix_descriptor({args})
    Out[0] = desc[0]
"""
    with pytest.raises(TirxSyntaxError, match=re.escape(words)):
        define(source.format(args=args), tmp_path, "enc")
    define(source.format(args="desc.ptr_to([0]), As.ptr_to([0, 0]), 1, 64, 3"), tmp_path, "enc")


# ------------------------------------------------------------------- NVRTC and SASS


def _nvrtc():
    try:
        from tirx.backend.cuda.nvrtc import nvrtc_version

        nvrtc_version()
    except Exception as e:  # no NVRTC library on this machine
        pytest.skip(f"NVRTC is not available: {e}")


@pytest.mark.parametrize("swizzled", [True, False])
def test_nvrtc_builds_sm_90a_with_hgmma_and_no_spills(swizzled):
    _nvrtc()
    exe = tirx.compile(wgmma_kernel(128, "f16", swizzled), target="cuda -arch=sm_90")
    assert exe.arch == "sm_90a"
    assert "serialized" not in exe.nvrtc.log and "Performance Loss" not in exe.nvrtc.log
    assert exe.stats["spill_stores"] == 0 and exe.stats["spill_loads"] == 0
    if exe.sass is None:
        pytest.skip("no disassembler (nvdisasm/cuobjdump) installed")
    hgmma = [ln for ln in exe.sass.splitlines() if "HGMMA.64x128x16.F32" in ln]
    assert len(hgmma) == 4  # one per k16 slice, the loop unrolled
    assert "STL" not in exe.sass and "LDL" not in exe.sass


# ---------------------------------------------------------------- results: GPU, sim

CASES = [(64, "f16", True), (128, "f16", True), (64, "bf16", False), (128, "bf16", True),
         (128, "f16", False)]  # fmt: skip


def _data(n, ab, device):
    import torch

    g = torch.Generator().manual_seed(n + (ab == "bf16"))
    dtype = torch.float16 if ab == "f16" else torch.bfloat16
    a = torch.randint(-3, 4, (64, 64), generator=g).to(dtype)
    b = torch.randint(-3, 4, (n, 64), generator=g).to(dtype)
    out = torch.full((64, n), float("nan"))
    return a.to(device), b.to(device), out.to(device)


@pytest.mark.gpu
@pytest.mark.parametrize("n, ab, swizzled", CASES)
def test_gpu_result_equals_torch(n, ab, swizzled):
    import torch

    exe = tirx.compile(wgmma_kernel(n, ab, swizzled), target="cuda")
    a, b, out = _data(n, ab, "cuda")
    exe(a, b, out)
    torch.cuda.synchronize()
    assert torch.equal(out, a.float() @ b.float().T)


@pytest.mark.gpu
def test_gpu_encode_matrix_descriptor():
    import torch

    exe = tirx.compile(descriptor_kernel(), target="cuda")
    out = torch.zeros(2, dtype=torch.uint64, device="cuda")
    exe(out)
    desc, address = (int(x) for x in out.cpu().tolist())
    assert desc == ((address & 0x3FFFF) >> 4) | 1 << 16 | 64 << 32 | 1 << 62


_SIM = importlib.util.find_spec("tirx.families.wgmma.sim") is not None
needs_sim = pytest.mark.skipif(
    not _SIM, reason="the simulator's wgmma (tirx.families.wgmma.sim) is absent"
)


@needs_sim
@pytest.mark.parametrize("n, ab, swizzled", CASES)
def test_sim_result_equals_torch(n, ab, swizzled):
    exe = tirx.compile(wgmma_kernel(n, ab, swizzled), target="sim")
    a, b, out = _data(n, ab, "cpu")
    exe(a, b, out)
    assert np.array_equal(out.numpy(), (a.float() @ b.float().T).numpy())


@needs_sim
@pytest.mark.gpu
@pytest.mark.parametrize("n, ab, swizzled", CASES[:2])
def test_sim_equals_gpu(n, ab, swizzled):
    import torch

    a, b, out = _data(n, ab, "cpu")
    tirx.compile(wgmma_kernel(n, ab, swizzled), target="sim")(a, b, out)
    ga, gb, gout = a.cuda(), b.cuda(), out.cuda()
    tirx.compile(wgmma_kernel(n, ab, swizzled), target="cuda")(ga, gb, gout)
    torch.cuda.synchronize()
    assert torch.equal(gout.cpu(), out)


def test_layouts_of_the_test_kernels():
    """The unswizzled tile's slices are 128-byte core matrices (what the kernels rely on)."""
    t = tile_layout(64, False)
    assert t.apply(0, 0, 8, shape=(4, 64, 16))["m"] == 64  # second K chunk: 128 bytes on
    assert t.apply(0, 8, 0, shape=(4, 64, 16))["m"] == 128  # next 8 rows: 256 bytes on


def test_d_may_name_threads_by_tid_in_wg(tmp_path):
    layout = (
        "TileLayout(S[(4, 2, 8, N // 8, 4, 2) : (32 @ tid_in_wg, 2, 4 @ tid_in_wg, 4, "
        "1 @ tid_in_wg, 1)])"
    )
    exe = _lower(tmp_path, d_layout=layout)
    call = next(n for n in ir_walk(exe.lowered.body) if getattr(n, "instruction", "") == F16_128)
    assert [r.slot for r in call.operands[0].regs] == list(range(64))
    wrong = layout.replace("32 @ tid_in_wg", "16 @ tid_in_wg")
    with pytest.raises(ContractError, match=r"element \(16, 0\) belongs to thread 32"):
        _lower(tmp_path, d_layout=wrong)


def test_the_flat_spelling_of_the_descriptor_helper(tmp_path):
    source = """
@T.function
def enc(Out: T.Tensor((2,), "uint64")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    As = T.alloc_shared((64, 64), "float16", align=1024)
    desc = T.alloc_local((1,), "uint64")
    T.cuda.wgmma_encode_matrix_descriptor(T.address_of(desc[0]), As[8, 0], 8, 16, 0)
    Out[0] = desc[0]
    Out[1] = T.cast(T.cuda.cvta_generic_to_shared(As.ptr_to([8, 0])), "uint64")
"""
    out = np.zeros(2, np.uint64)
    tirx.compile(define(source, tmp_path, "enc"), target="sim")(out)
    assert int(out[0]) == ((int(out[1]) & 0x3FFFF) >> 4) | 8 << 16 | 16 << 32


def test_the_widgets_draw_wgmma_and_say_the_probes_do_not_run_it():
    """wgmma's accumulator has a picture over its warpgroup (tests/test_widgets_hopper.py has
    the details); the probe kernels of check_layout do not run it."""
    from tirx.errors import TirxError
    from tirx.isa import lookup
    from widgets.families import require_fragment, require_probed

    contract = lookup("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16")
    require_fragment(contract)  # no reason to refuse: the notebook layer draws it
    with pytest.raises(TirxError, match="probes do not run"):
        require_probed(contract)


def test_operand_checks_are_remembered_and_a_bad_operand_still_raises_each_time(
    tmp_path, monkeypatch
):
    """The descriptor's layout part and the accumulator's register slots are checked once per
    distinct operand: lowering the kernel again checks nothing new. A layout that fails is
    reported every time, and the start (not part of what is remembered) is checked per view."""
    from tirx.isa import operands
    from tirx.transform.lower import lower_function

    monkeypatch.setattr(operands, "_PASSED", {})
    lower_function(_kernel(tmp_path).ir, arch=90)
    kinds = sorted(k[0] for k in operands._PASSED)
    assert kinds.count("descriptor") >= 1 and kinds.count("warpgroup") == 1
    lower_function(_kernel(tmp_path).ir, arch=90)
    assert sorted(k[0] for k in operands._PASSED) == kinds
    bad = dict(a_layout="TileLayout(S[(64, 64)])", align=16)  # not a descriptor's layout
    for _ in range(2):
        with pytest.raises(ContractError, match=re.escape("element (1, 0) lies 128 bytes")):
            lower_function(_kernel(tmp_path, **bad).ir, arch=90)
    for _ in range(2):  # the remembered layout, at a start a descriptor cannot take
        with pytest.raises(ContractError, match="starts at 2 bytes past a multiple of 16"):
            lower_function(_kernel(tmp_path, a="As[:, 16 * kk + 1 : 16 * kk + 17]").ir, arch=90)


def test_a_descriptors_byte_offset_is_a_row_term_plus_a_k_term():
    """The descriptor check compares a whole tile in one pass on this: where a descriptor
    reads element (row, k) is place(row, 0) + place(0, k), for every swizzle mode, both
    majors and every element size."""
    from tirx.families.wgmma import isa_descriptor as d

    for place in (d._k_major, d._mn_major):
        for mode in d.Swizzle:
            for eb in (1, 2, 4):
                for lbo, sbo in ((16, 256), (1024, 128), (2048, 4096)):
                    for r in range(0, 256, 3):
                        for k in range(0, 128, 5):
                            got = place(mode, lbo, sbo, r, k, eb)
                            assert got == place(mode, lbo, sbo, r, 0, eb) + place(
                                mode, lbo, sbo, 0, k, eb
                            ), (place.__name__, mode, eb, lbo, sbo, r, k)


def test_register_slots_in_list_passes_are_the_element_by_element_ones(monkeypatch):
    """The accumulator and A-fragment check compares whole fragments in list passes and falls
    back to the element loop only to report; both give the same slots, in the examples'
    kernels (f16 and fp8) and the m64n64 kernel of these tests."""
    from tirx.examples.gemm_fp8 import make_gemm_fp8
    from tirx.examples.gemm_wgmma import make_gemm_wgmma
    from tirx.families.wgmma import isa_fragments as frag
    from tirx.isa import operands
    from tirx.transform.lower import lower_function

    compared = []
    fast = frag._slots

    def both(*args):
        got = fast(*args)
        assert got == frag._slots_checked(*args)
        compared.append(args[1].name)
        return got

    monkeypatch.setattr(frag, "_slots", both)
    monkeypatch.setattr(operands, "_PASSED", {})  # checked here, not remembered from before
    for kernel in (make_gemm_wgmma(256, 128, 256), make_gemm_fp8(256, 256, 256)):
        lower_function(kernel.ir, arch=90)
    kernel = wgmma_kernel(64)
    lower_function(kernel.ir, arch=90)
    assert len(compared) >= 3


def test_separable_owner_columns_are_the_owner_table():
    """Every operand marked owner_separable (its owner a row term plus a column term) builds
    the same owner columns from a row and a column as element by element, in the wgmma forms
    of N = 8, 64 and 256 of every type the registry knows."""
    from tirx.isa import lookup, supported_forms

    checked = 0
    for text in supported_forms():
        if not text.startswith("wgmma.mma_async") or not re.search(r"m64n(8|64|256)k", text):
            continue
        for spec in lookup(text).operands:
            if not spec.owner_separable:
                continue
            items = spec.owner_items
            assert spec.owner_columns == (
                tuple(lane for _, (lane, _) in items),
                tuple(reg for _, (_, reg) in items),
            ), (text, spec.name)
            checked += 1
    assert checked > 10
