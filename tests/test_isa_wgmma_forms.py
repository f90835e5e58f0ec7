"""The checks of wgmma's new forms (tirx/families/wgmma): the rs form's A registers, the
types of each line, MN-major views, a view starting inside a swizzle period (accepted: the
descriptor's base offset concerns the pattern's start), a global operand, and the raw form of
every line: each check fires on a kernel built to break it, at the user's line, and stays
silent on its twin; every raw call the lowering accepts runs in the simulator, on every
target the same way."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import tirx
from tests.helpers import define
from tests.wgmma_lines import d_layout, offset_kernel, words_layout
from tirx.errors import ContractError, SimulationError, TirxError, TirxSyntaxError
from tirx.ir import nodes as ir
from tirx.ir.visitor import walk

# ------------------------------------------------------------- a start inside a period


@pytest.mark.parametrize("r0, swizzle", [(3, 128), (1, 64), (5, 32), (8, 128)])
def test_a_view_may_start_inside_a_swizzle_period(r0, swizzle):
    """Rows r0 .. r0 + 63 of a period-aligned tile: base offset 0, the start r0 rows into the
    tile, and the product exact (the row phase comes from the address)."""
    exe = tirx.compile(offset_kernel(r0, swizzle), target="sim")
    call = next(
        n for n in walk(exe.lowered.body)
        if isinstance(n, ir.PtxCall) and n.instruction.startswith("wgmma.mma")
    )  # fmt: skip
    fields = call.operands[1].value.b.value
    assert (fields >> 49) & 7 == 0 and fields >> 62 == {128: 1, 64: 2, 32: 3}[swizzle]
    kt = swizzle // 2
    g = torch.Generator().manual_seed(r0 + swizzle)
    a = torch.randint(-3, 4, (64 + r0, kt), generator=g).half()
    b = torch.randint(-3, 4, (8, kt), generator=g).half()
    out = torch.zeros(64, 8)
    exe(a, b, out)
    assert torch.equal(out, a[r0:].float() @ b.float().T)


@pytest.mark.gpu
@pytest.mark.parametrize("r0, swizzle", [(3, 128), (1, 64), (5, 32)])
def test_a_view_starting_inside_a_swizzle_period_agrees_with_hardware(r0, swizzle):
    """Settles the reading of docs/simulator.md ("Base offset") for starts inside a period:
    with base offset 0 the H200 reads the rows where the simulator does."""
    kt = swizzle // 2
    g = torch.Generator().manual_seed(r0)
    a = torch.randint(-3, 4, (64 + r0, kt), generator=g).half()
    b = torch.randint(-3, 4, (8, kt), generator=g).half()
    sim, gpu = torch.zeros(64, 8), torch.zeros(64, 8, device="cuda")
    tirx.compile(offset_kernel(r0, swizzle), target="sim")(a, b, sim)
    tirx.compile(offset_kernel(r0, swizzle), target="cuda")(a.cuda(), b.cuda(), gpu)
    torch.cuda.synchronize()
    assert torch.equal(gpu.cpu(), sim)


# ------------------------------------------------------------------------ tile checks

TILE = """
from tirx.layout import wid_in_wg
TEXT = "{text}"

@T.function
def kern(G: T.Tensor((64, {kt}), "{ea}"), Out: T.Tensor((1,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    As = T.alloc_shared((64, {kt}), "{ea}", layout={la}, align=1024)
    Bs = T.alloc_shared(({n}, {kt}), "{eb}", layout={lb}, align=1024)
    acc = T.alloc_local(({regs},), "{ed}")
    a = T.alloc_local((4,), "uint32")
    T.ptx["wgmma.fence.sync.aligned"]()
    T.cuda.tile.apply(T.ptx[TEXT], {d}, {a}, {b}, scope="warpgroup", scale_d=0{extra})
"""
F16 = dict(
    text="wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", kt=64, ea="float16",
    eb="float16", ed="float32", n=64, regs=32,
    la="ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))",
    lb="ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))",
    d="acc.view(64, 64, layout=DL)", a="As[:, 0:16]", b="Bs[:, 0:16]", extra="",
)  # fmt: skip
RS = dict(F16, a="a.view(64, 8, layout=WL)")
FP8 = dict(
    F16, text="wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2", kt=128,
    ea="float8_e4m3fn", eb="float8_e5m2",
    la="ComposeLayout(4, 3, 3, TileLayout(S[(64, 128)]))",
    lb="ComposeLayout(4, 3, 3, TileLayout(S[(64, 128)]))", a="As[:, 0:32]", b="Bs[:, 0:32]",
)  # fmt: skip
INT = dict(FP8, text="wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8", ea="int8", eb="int8",
           ed="int32")  # fmt: skip
H16 = dict(F16, text="wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16", ed="uint32",
           regs=16, d="acc.view(64, 32, layout=WL32)")  # fmt: skip


def _tile(tmp_path, base, target="sim", **change):
    fn = define(
        TILE.format(**{**base, **change}), tmp_path, "kern",
        DL=d_layout(64), WL=words_layout(8), WL32=words_layout(32),
    )  # fmt: skip
    return tirx.compile(fn, target=target)


@pytest.mark.parametrize("base", [F16, RS, FP8, INT, H16], ids=["ss", "rs", "fp8", "int", "h16"])
def test_the_twins_lower(tmp_path, base):
    _tile(tmp_path, base)


WL_BAD = "TileLayout(S[(4, 2, 8, 2, 4) : (1 @ wid_in_wg, 1, 1 @ laneid, 2, 8 @ laneid)])"


@pytest.mark.parametrize(
    "base, change, error, words",
    [
        (RS, dict(a=f"a.view(64, 8, layout={WL_BAD})"), ContractError,
         "operand A: element (0, 1) belongs to thread 1 of the warpgroup"),
        (RS, dict(a='a.view("float16").view(64, 16, layout=DL16)'), TirxError, "operand A must "
         "be a uint32 view (32-bit words) of shape (64, 8)"),
        (RS, dict(a="a.view(64, 8, layout=WL)", d="acc.view(64, 64, layout=DL)",
                  text="wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16", ed="uint32"),
         ContractError, "operand D must be a uint32 view (32-bit words) of shape (64, 32)"),
        (INT, dict(extra=", scale_a=-1"), TirxSyntaxError, "integer wgmma has no imm-scale-a"),
        (FP8, dict(b="Bs[:, 0:32]", eb="float8_e4m3fn"), ContractError,
         "operand B must be a float8_e5m2 view (the instruction's .e5m2)"),
        (FP8, dict(la="TileLayout(S[(64, 128) : (1, 64)])"), ContractError,
         "MN-major (consecutive rows are adjacent in memory); this type's wgmma takes K-major"),
        (F16, dict(a="G[:, 0:16]"), ContractError, "operand A must be in shared memory (or, for "
         "A, a register view), got global tensor 'G'"),
        (F16, dict(b="G[:, 0:16]"), ContractError, "operand B must be in shared memory"),
        (F16, dict(lb="ComposeLayout(3, 3, 3, TileLayout(S[(64, 64) : (1, 128)]))"),
         ContractError, "element (0, 1) lies 256 bytes from the view's origin (before any "
         "swizzle), but an MN-major descriptor"),
        (F16, dict(a="As[:, 0:8]"), ContractError, "operand A must have shape (64, 16)"),
        (INT, dict(a="As[:, 0:16]"), ContractError, "tile[:, 32 * k : 32 * k + 32]"),
    ],
)  # fmt: skip
def test_each_check_of_the_new_forms_fires_at_the_users_line(tmp_path, base, change, error, words):
    with pytest.raises(error) as info:
        fn = define(
            TILE.format(**{**base, **change}), tmp_path, "kern", DL=d_layout(64),
            WL=words_layout(8), WL32=words_layout(32), DL16=d_layout(16),
        )  # fmt: skip
        tirx.compile(fn, target="sim")
    assert words in str(info.value), str(info.value)
    assert info.value.span is not None and "T.cuda.tile.apply" in str(info.value)


def test_an_mn_major_tile_is_derived_with_trans_and_its_strides(tmp_path):
    """B stored K-line by K-line (64 rows of one K in 128 bytes, 128-byte swizzle): MN-major,
    imm-trans-b 1, SBO the 1024 bytes between 8-K groups."""
    exe = _tile(tmp_path, F16, lb="ComposeLayout(3, 3, 3, TileLayout(S[(64, 64) : (1, 64)]))",
                b="Bs[:, 0:16]")  # fmt: skip
    call = next(n for n in walk(exe.lowered.body) if getattr(n, "instruction", "").endswith("f16"))
    assert [op.value for op in call.operands[4:]] == [1, 1, 0, 1]
    fields = call.operands[2].value.b.value
    assert (fields >> 32) & 0x3FFF == 1024 >> 4 and fields >> 62 == 1


# ------------------------------------------------------------------------- raw forms

RAW = """
@T.function
def raw(A: T.Tensor((64, {kt}), "{ea}"), B: T.Tensor((64, {kt}), "{eb}"), Out: T.Tensor((128, {nd}), "{ed}")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    As = T.alloc_shared((64, {kt}), "{ea}", layout=ComposeLayout({e}, 3, 3, TileLayout(S[(64, {kt})])), align=1024)
    Bs = T.alloc_shared((64, {kt}), "{eb}", layout=ComposeLayout({e}, 3, 3, TileLayout(S[(64, {kt})])), align=1024)
    acc = T.alloc_local(({nd},), "{ed}")
    a = T.alloc_local((4,), "uint32")
    desc = T.alloc_local((2,), "uint64")
    tid = T.cuda.thread_idx("x")
    for i in range({kt} // 2):
        As[(tid + 128 * i) // {kt}, (tid + 128 * i) % {kt}] = A[(tid + 128 * i) // {kt}, (tid + 128 * i) % {kt}]
    for i in range({kt} // 2):
        Bs[(tid + 128 * i) // {kt}, (tid + 128 * i) % {kt}] = B[(tid + 128 * i) // {kt}, (tid + 128 * i) % {kt}]
    for r in range(4):
        a[r] = T.cast(tid * 4 + r, "uint32")
    T.cuda.wgmma.encode_matrix_descriptor(desc[0], As[0, 0], 1, 64, 3)
    T.cuda.wgmma.encode_matrix_descriptor(desc[1], Bs[0, 0], 1, 64, 3)
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.cta_sync()
    T.ptx["wgmma.fence.sync.aligned"]()
    T.ptx["{text}"](acc, {ops})
    T.ptx["wgmma.commit_group.sync.aligned"]()
    T.ptx["wgmma.wait_group.sync.aligned"](0)
    for r in range({nd}):
        Out[tid, r] = acc[r]
"""
LINES = {  # text, element dtypes, chunk log2, accumulator dtype, registers, immediates ss / rs
    "f16": ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", "float16", "float16", 3,
            "float32", 4, 4, 3),
    "h16": ("wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16", "float16", "float16", 3,
            "uint32", 2, 4, 3),
    "tf32": ("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32", "float32", "float32", 2,
             "float32", 4, 2, 2),
    "fp8": ("wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e4m3", "float8_e5m2",
            "float8_e4m3fn", 4, "float32", 4, 2, 2),
    "int": ("wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.u8.s8", "uint8", "int8", 4,
            "int32", 4, 0, 0),
}  # fmt: skip
TORCH = {"float16": torch.float16, "float32": torch.float32, "float8_e5m2": torch.float8_e5m2,
         "float8_e4m3fn": torch.float8_e4m3fn, "uint8": torch.uint8, "int8": torch.int8, "int32": torch.int32}  # fmt: skip


def _raw(tmp_path, line: str, ops: str, target="sim"):
    text, ea, eb, e, ed, nd, _, _ = LINES[line]
    kt = 128 * 8 // (8 * {"float16": 2, "float32": 4}.get(ea, 1))
    src = RAW.format(text=text, ea=ea, eb=eb, e=e, ed=ed, nd=nd, kt=kt, ops=ops)
    return tirx.compile(define(src, tmp_path, "raw"), target=target), kt


def _combinations(line: str, rs: bool):
    n_imm = LINES[line][7 if rs else 6]
    names = ("scale_a", "scale_b", "trans_a", "trans_b") if n_imm == 4 else ("scale_a", "scale_b")
    if rs and n_imm == 3:
        names = ("scale_a", "scale_b", "trans_b")
    values = [(1, -1) if n.startswith("scale") else (0, 1) for n in names[:n_imm]]
    return list(itertools.product(*values))


def _args(line: str, kt: int, seed=0):
    _, ea, eb, _, ed, nd, _, _ = LINES[line]
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0 if ea == "uint8" else -3, 4, (64, kt), generator=g)
    b = torch.randint(-3, 4, (64, kt), generator=g)
    out = torch.zeros(128, nd, dtype=torch.uint32 if ed == "uint32" else TORCH.get(ed))
    return [a.to(TORCH[ea]), b.to(TORCH[eb]), out], a, b


@pytest.mark.parametrize("line", list(LINES))
@pytest.mark.parametrize("rs", [False, True], ids=["ss", "rs"])
def test_every_raw_immediate_the_lowering_accepts_runs_in_the_simulator(tmp_path, line, rs):
    """Issue: no raw call may compile for the GPU that the simulator refuses. Every
    immediate value each line has (1/-1 scales, 0/1 trans) lowers the same on both targets
    and runs; the K-major ones equal numpy."""
    k = {"f16": 16, "h16": 16, "tf32": 8}.get(line, 32)
    for imms in _combinations(line, rs):
        ops = ("a, " if rs else "desc[0], ") + "desc[1], 0" + "".join(f", {v}" for v in imms)
        exe, kt = _raw(tmp_path, line, ops)
        cuda = _raw(tmp_path, line, ops, target="cuda -arch=sm_90")[0] if _has_nvrtc() else None
        args, a, b = _args(line, kt)
        exe(*args)
        assert cuda is None or cuda.arch == "sm_90a"
        names = ("scale_a", "scale_b", "trans_a", "trans_b")[: len(imms)]
        if rs:
            names = ("scale_a", "scale_b", "trans_b")[: len(imms)]
        given = dict(zip(names, imms))
        if rs or given.get("trans_a") or given.get("trans_b") or line in ("h16",):
            continue
        want = (
            (a[:, :k].long() @ b[:, :k].long().T)
            * given.get("scale_a", 1)
            * given.get("scale_b", 1)
        )
        out = args[2].double().numpy()
        t = np.arange(128)[:, None]
        i = np.arange(4)[None, :]
        rows = 16 * (t // 32) + (t % 32) // 4 + 8 * ((i // 2) % 2)
        cols = 2 * (t % 4) + i % 2
        assert (out == want.numpy()[rows, cols]).all()


def _has_nvrtc() -> bool:
    try:
        from tirx.backend.cuda.nvrtc import nvrtc_version

        nvrtc_version()
        return True
    except Exception:  # no NVRTC library on this machine
        return False


@pytest.mark.parametrize("target", ["sim", "cuda -arch=sm_90"])
@pytest.mark.parametrize(
    "line, ops, words",
    [
        ("int", "desc[0], desc[1], 0, 1, 1", "takes 4 accumulator registers (or one local "
         "int32 tensor of 4 elements), then a_desc, b_desc, scale_d (7 operands), or A in four "
         "32-bit registers: a0, a1, a2, a3, b_desc, scale_d (10 operands); got 9"),
        ("tf32", "desc[0], desc[1], 0, 1, 1, 0, 0", "scale_a, scale_b (9 operands), or A in"),
        ("f16", "a, desc[1], 0, 1, 1, 2", "trans_b must be a compile-time 0 or 1, got 2"),
        ("f16", "a, desc[1], 0, 1, 1, 0, 0", "(13 operands); got 14"),
        ("fp8", "desc[0], desc[1], 0, 1, 0", "scale_b must be a compile-time 1 or -1, got 0"),
        ("f16", "desc[0], desc[0], desc[1], desc[1], desc[1], 0, 1, 1, 0", "the A registers "
         "must be elements of a local uint32 or int32 or float32 tensor (they are read), got a "
         "uint64 element"),
    ],
)  # fmt: skip
def test_raw_calls_are_refused_alike_on_every_target(tmp_path, target, line, ops, words):
    if target.startswith("cuda") and not _has_nvrtc():
        pytest.skip("NVRTC is not available")
    with pytest.raises(ContractError) as info:
        _raw(tmp_path, line, ops, target=target)
    assert words in str(info.value), str(info.value)
    assert info.value.span is not None


def test_an_f16_accumulator_is_uint32_words_in_the_raw_form(tmp_path):
    with pytest.raises(ContractError, match="local uint32 or int32 tensor"):
        src = RAW.format(
            text=LINES["h16"][0], ea="float16", eb="float16", e=3, ed="float32", nd=2, kt=64,
            ops="desc[0], desc[1], 0, 1, 1, 0, 0",
        )  # fmt: skip
        tirx.compile(define(src, tmp_path, "raw"), target="sim")


def test_the_rs_raw_form_reads_a_as_b32_registers(tmp_path):
    exe, _ = _raw(tmp_path, "fp8", "a, desc[1], 0, -1, 1")
    call = next(
        n for n in walk(exe.lowered.body) if getattr(n, "instruction", "") == LINES["fp8"][0]
    )
    a = call.operands[1]
    assert isinstance(a, ir.RegVector) and not a.is_output
    assert [r.dtype for r in a.regs] == [ir.U32] * 4 and [r.slot for r in a.regs] == [0, 1, 2, 3]
    from tirx.backend.cuda.codegen import generate

    src = generate(exe.lowered)
    assert "{%4, %5, %6, %7}, %8, tirx_p, -1, 1; }" in src and '"r"(a[0])' in src


def test_an_a_register_written_after_the_fence_is_a_fault(tmp_path):
    """wgmma.fence orders a thread's register accesses before the mma_async that reads them
    as A: writing A's registers after it is a fault naming the write; the twin is silent."""
    late = RAW.replace(
        '    T.ptx["wgmma.fence.sync.aligned"]()\n', ""
    ).replace('    T.ptx["{text}"](acc, {ops})', '    T.ptx["wgmma.fence.sync.aligned"]()\n'
              '    a[0] = a[1]\n    T.ptx["{text}"](acc, {ops})')  # fmt: skip
    text, ea, eb, e, ed, nd, _, _ = LINES["f16"]
    src = late.format(
        text=text, ea=ea, eb=eb, e=e, ed=ed, nd=nd, kt=64, ops="a, desc[1], 0, 1, 1, 0"
    )
    exe = tirx.compile(define(src, tmp_path, "raw"), target="sim")
    args, _, _ = _args("f16", 64)
    with pytest.raises(SimulationError, match=r"A register a\[0\] .* written at line \d+ after"):
        exe(*args)
    _raw(tmp_path, "f16", "a, desc[1], 0, 1, 1, 0")[0](*_args("f16", 64)[0])
