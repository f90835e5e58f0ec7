"""Refusals whose message or hint names the fix that works (each case was met by a user: the
earlier words pointed at a fix that compiled wrong, or at none).

Each case is a whole kernel with one mistake, the error class it raises, a fragment of its
message and a fragment of its hint; some have a twin, written as the hint says, that compiles.
"""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.helpers import caret_line, define

CON, LAY, SYN = tirx.ContractError, tirx.LayoutError, tirx.TirxSyntaxError

_ST_X2 = """
L = TileLayout(S[(2, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])

@T.function
def k(Out: T.Tensor((16, 8), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    o = T.alloc_shared((16, 8), "float16", align=16)
    acc = T.alloc_local((4,), "float32")
    h = T.alloc_local((4,), "float16")
    for r in range(4):
        acc[r] = T.float32(lane * 4 + r)
        h[r] = T.cast(acc[r], "float16")
    T.cuda.tile.apply(T.ptx["stmatrix.sync.aligned.m8n8.x2.shared.b16"],
        o.view("uint32").rearrange("(h r) w -> h r w", h=2),
        {regs}.view(2, 8, 4, layout=L), scope="warp")
"""

# ldmatrix.x2 of a shared tile ``b`` (made by ``tile``) into registers ``r``
_LDMATRIX = """
L = TileLayout(S[(2, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])

@T.function
def k(Out: T.Tensor((16, 8), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    {tile}
    r = T.alloc_local((2,), "{rtype}")
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x2{trans}.shared.b16"],
        {regs}.view(2, 8, 4, layout=L), b.view("uint32").view(2, 8, 4), scope="warp")
"""

_LD_X2 = _LDMATRIX.format(
    tile='b = T.alloc_shared({shape}, "{dtype}", align=16)',
    rtype="uint32",
    trans=".trans",
    regs="r",
)

_ST_TRANS = """
L = TileLayout(S[(1, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])

@T.function
def k(Out: T.Tensor((16, 8), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    b = T.alloc_shared({shape}, "{dtype}", align=16)
    r = T.alloc_local((1,), "uint32")
    T.cuda.tile.apply(T.ptx["stmatrix.sync.aligned.m8n8.x1.trans.shared.b16"],
        b.view("uint32").view(1, 8, 4), r.view(1, 8, 4, layout=L), scope="warp")
"""

_PITCH = """
L = TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])

@T.function
def k(Out: T.Tensor((16, 16), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    a = T.alloc_shared((16, {cols}), "float16")
    r = T.alloc_local((4,), "uint32")
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"], r.view(4, 8, 4, layout=L),
        a.view("uint32")[:, 0:8].rearrange("(g r) (c w) -> (c g) r w", g=2, c=2, w=4), scope="warp")
"""

_START = """
L = TileLayout(S[(2, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])

@T.function
def k(Out: T.Tensor((16, 16), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    a = T.alloc_shared((16, 16), "float16", align=16)
    r = T.alloc_local((2,), "uint32")
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"], r.view(2, 8, 4, layout=L),
        a.view("uint32")[0:16, 2:6].rearrange("(g r) w -> g r w", g=2), scope="warp")
"""

_SPLIT = """
LOAD = TileLayout(S[(2, 2, 8, 4) : (2, 1, 4 @ laneid, 1 @ laneid)])

@T.function
def k(Out: T.Tensor((16, 16), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    b = T.alloc_shared((16, 16), "float16", align=16)
    r = T.alloc_local((4,), "uint32")
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"], r.view({shape}, layout=LOAD),
        b.view("uint32").rearrange("(nt row) (kh w) -> (nt kh) row w", nt=2, kh=2), scope="warp")
"""

_S8 = """
D = TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
AW = TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
BW = TileLayout(S[(1, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)])

@T.function
def k(Out: T.Tensor((16, 8), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    ar = T.alloc_local((16,), "int8")
    br = T.alloc_local((2,), "uint32")
    dr = T.alloc_local((4,), "int32")
    T.cuda.tile.apply(T.ptx["mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"],
        dr.view(1, 1, 16, 8, layout=D), ar.view(1, 1, 16, 32, layout=AW.unpack({n})),
        br.view(1, 1, 8, 8, layout=BW), T.int32(0), scope="warp")
"""

_CTA = """
@T.function
def k(A: T.Tensor((96,), "float32"), O: T.Tensor((1,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={threads}))
    tid = T.cuda.thread_idx("x")
    sc = T.alloc_shared((4,), "float32")
    s1 = T.cuda.cta_sum(A[tid % 96], {warps}, sc)
"""

_TMA = """
M, BK = 64, 32
TMA = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
SW64 = ComposeLayout(3, 2, 3, TileLayout(S[64, BK]))

@T.function
def k(A: T.Tensor((M, BK), "bfloat16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    a_s = T.alloc_shared((M, BK), "bfloat16", layout=SW64, align={align}, scope="shared.dyn")
    bar = T.alloc_shared((1,), "uint64")
    T.cuda.tile.apply(T.ptx[TMA], a_s[:, :], A[:, :], box=(M, BK), coords=(0, 0),
                      swizzle={swizzle}, mbar=bar[0], scope="thread")
"""

# an e4m3 tile laid out with a 2-byte type's 16-byte unit (per_element 3, not 4)
_TMA_FP8 = """
TMA = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
SW = ComposeLayout(3, 3, 3, TileLayout(S[64, 128]))

@T.function
def k(A: T.Tensor((64, 128), "float8_e4m3fn")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    a_s = T.alloc_shared((64, 128), "float8_e4m3fn", layout=SW, align=1024, scope="shared.dyn")
    bar = T.alloc_shared((1,), "uint64")
    T.cuda.tile.apply(T.ptx[TMA], a_s[:, :], A[:, :], box=(64, 128), coords=(0, 0),
                      swizzle=3, mbar=bar[0], scope="thread")
"""

# mma.sync's A words packed from a register array of ``held`` values
_HELD_MMA = """
D = TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
AW = TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
BW = TileLayout(S[(1, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)])

@T.function
def k(Out: T.Tensor((16, 8), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    ah = T.alloc_local((8,), "{held}")
    br = T.alloc_local((2,), "uint32")
    dr = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"],
        dr.view(1, 1, 16, 8, layout=D), ah.view("uint32").view(1, 1, 16, 8, layout=AW),
        br.view(1, 1, 8, 8, layout=BW), T.float32(0), scope="warp")
"""

# wgmma's register A (the rs form) packed from a register array of ``held`` values
_HELD_RS = """
from tirx.layout import wid_in_wg
ACC = TileLayout(S[(4, 2, 8, 1, 4, 2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)])
AW = TileLayout(S[(4, 2, 8, 2, 4) : (1 @ wid_in_wg, 1, 4 @ laneid, 2, 1 @ laneid)])
SW = ComposeLayout(3, 1, 3, TileLayout(S[(8, 16)]))

@T.function
def k(Out: T.Tensor((64, 8), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    b_s = T.alloc_shared((8, 16), "float16", layout=SW, align=256)
    acc = T.alloc_local((4,), "float32")
    a_r = T.alloc_local((8,), "{held}")
    T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"],
        acc.view(64, 8, layout=ACC), a_r.view("uint32").view(64, 8, layout=AW), b_s[:, :],
        scope="warpgroup", scale_d=0)
"""

# a region of a dimension the layout splits (2 x 32), its start a loop variable's multiple
_SPLIT_REGION = """
@T.function
def k(Out: T.Tensor((8, 64), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    s = T.alloc_shared((8, 64), "float32", layout=TileLayout(S[(8, 2, 32) : (32, 256, 1)]))
    for kk in T.unroll({n}):
        v = s[:, {extent} * kk : {extent} * kk + {extent}]
        Out[0, kk] = v[0, 1]
"""

SM90 = "cuda -arch=sm_90a"

# (id, source, target, error class, caret fragment, message fragment, hint fragment)
CASES = [
    (
        "stmatrix-f32-registers",
        _ST_X2.format(regs="acc"),
        SM90,
        CON,
        "acc.view(2, 8, 4",
        "must be viewed as uint32",
        'convert acc into a float16/bfloat16 buffer first (h = T.alloc_local(..., "float16")',
    ),
    (
        "stmatrix-u32-view-of-f32",
        _ST_X2.format(regs='acc.view("uint32")'),
        SM90,
        CON,
        'acc.view("uint32")',
        "is a uint32 view of float32 buffer 'acc'",
        "stmatrix moves 16-bit elements (.b16)",
    ),
    (
        "ldmatrix-trans-int8",
        _LD_X2.format(dtype="int8", shape=(32, 8)),
        SM90,
        CON,
        'b.view("uint32")',
        ".trans on int8 buffer 'b'",
        "store 8-bit B as N×K (K-major) and load it without .trans",
    ),
    (
        "stmatrix-trans-fp8",
        _ST_TRANS.format(dtype="float8_e4m3fn", shape=(8, 16)),
        SM90,
        CON,
        'b.view("uint32")',
        ".trans on float8_e4m3fn buffer 'b'",
        ".trans transposes 16-bit elements",
    ),
    (
        "row-pitch-40-bytes",
        _PITCH.format(cols=20),
        SM90,
        CON,
        'a.view("uint32")',
        "row (0, 1) starts at byte 40, not a multiple of 16",
        "the row pitch of 'a' (40 bytes) must be a multiple of 16: no region start aligns "
        "every row; pad the rows (e.g. allocate it as (16, 24))",
    ),
    (
        "row-start-misaligned",
        _START,
        SM90,
        CON,
        'a.view("uint32")',
        "not a multiple of 16",
        "move the region start by whole rows",
    ),
    (
        "ldmatrix-split-matrix-axis",
        _SPLIT.format(shape="2, 2, 8, 4"),
        SM90,
        CON,
        "T.cuda.tile.apply",
        "must have shape (*repeat, 4, 8, 4), got (2, 2, 8, 4)",
        "view the registers with the 4 matrices on one axis (not (2, 2)), e.g. "
        ".view(4, 8, 4, layout=...), keeping the layout's iters",
    ),
    (
        "s8-elements-unpack-2",
        _S8.format(n=2),
        SM90,
        LAY,
        "ar.view(1, 1, 16, 32",
        "describes 256 elements but the shape (1, 1, 16, 32) has 512",
        "pack 4 to a 32-bit register, not 2 as 16-bit elements do: the element layout of "
        "the registers' word layout is word_layout.unpack(4)",
    ),
    (
        "cta-sum-three-warps",
        _CTA.format(threads=96, warps=3),
        "sim",
        SYN,
        "T.cuda.cta_sum",
        "num_warps is 3 (the block's 96 threads), not a power of two",
        "power-of-two number of whole warps",
    ),
    (
        "cta-sum-wrong-count",
        _CTA.format(threads=128, warps=2),
        "sim",
        SYN,
        "T.cuda.cta_sum",
        "num_warps is 2, but the block has 128 threads (4 warps)",
        "num_warps = threads // 32",
    ),
    (
        "tma-64b-rows-told-swizzle-3",
        _TMA.format(swizzle=3, align=1024),
        SM90,
        CON,
        "a_s[:, :]",
        "where the box image has byte 576 (swizzle=3)",
        "the tile's layout is the box image of swizzle=2: pass swizzle=2",
    ),
    (
        "tma-64b-rows-told-swizzle-3-below-its-alignment",
        _TMA.format(swizzle=3, align=512),
        SM90,
        CON,
        "a_s[:, :]",
        "where the box image has byte 576 (swizzle=3)",
        "the tile's layout is the box image of swizzle=2: pass swizzle=2",
    ),
    (
        "tma-fp8-tile-told-its-per-element",
        _TMA_FP8,
        SM90,
        CON,
        "a_s[:, :]",
        "where the box image has byte",
        "ComposeLayout(4, 3, 3, TileLayout(S[box])) of 128-byte rows (4: 16 bytes are 16 "
        "elements of 1 byte, log2)",
    ),
    (
        "mma-words-of-bfloat16-told-f16",
        _HELD_MMA.format(held="bfloat16"),
        SM90,
        CON,
        'ah.view("uint32")',
        "'ah' holds bfloat16 values, but the instruction multiplies float16",
        "convert the values to float16 before packing them into words",
    ),
    (
        "wgmma-rs-words-of-bfloat16-told-f16",
        _HELD_RS.format(held="bfloat16"),
        SM90,
        CON,
        'a_r.view("uint32")',
        "operand A: 'a_r' holds bfloat16 values, but the instruction multiplies float16",
        "convert the values to float16 before packing them into words",
    ),
    (
        "wgmma-rs-words-of-float32-told-f16",
        _HELD_RS.format(held="float32"),
        SM90,
        CON,
        'a_r.view("uint32")',
        "'a_r' holds float32 values, but the instruction multiplies float16",
        "convert the values to float16",
    ),
    (
        "region-across-a-split-dimension",
        _SPLIT_REGION.format(n=1, extent=48),
        SM90,
        LAY,
        "s[:, 48 * kk : 48 * kk + 48]",
        "region of extent 48 at start 48 * kk does not follow the layout's split of dimension 1",
        "splits this dimension into 2 x 32",
    ),
    (
        "tma-swizzled-told-none",
        _TMA.format(swizzle=0, align=1024),
        SM90,
        CON,
        "a_s[:, :]",
        "where the box image has byte",
        "the tile's layout is the box image of swizzle=2: pass swizzle=2",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_refusal_names_the_fix(case, tmp_path):
    _, source, target, cls, caret, message, hint = case
    with pytest.raises(tirx.TirxError) as info:
        tirx.compile(define(source, tmp_path, "k"), target)
    err = info.value
    assert isinstance(err, cls), f"{type(err).__name__}: {err}"
    assert message in err.message, str(err)
    assert err.hint and hint in err.hint, str(err)
    assert caret in caret_line(str(err)), str(err)


# (id, source, target): written as the hints above say
TWINS = [
    ("stmatrix-f16-registers", _ST_X2.format(regs='h.view("uint32")'), SM90),
    ("ldmatrix-trans-f16", _LD_X2.format(dtype="float16", shape=(16, 8)), SM90),
    ("stmatrix-trans-bf16", _ST_TRANS.format(dtype="bfloat16", shape=(8, 8)), SM90),
    ("row-pitch-48-bytes", _PITCH.format(cols=24), SM90),
    ("ldmatrix-merged-matrix-axis", _SPLIT.format(shape="4, 8, 4"), SM90),
    ("s8-elements-unpack-4", _S8.format(n=4), SM90),
    ("tma-64b-rows-swizzle-2", _TMA.format(swizzle=2, align=1024), SM90),
    (
        "tma-fp8-tile-per-element-4",
        _TMA_FP8.replace("ComposeLayout(3, 3, 3", "ComposeLayout(4, 3, 3"),
        SM90,
    ),
    ("mma-words-of-float16", _HELD_MMA.format(held="float16"), SM90),
    ("mma-words-packed-by-hand", _HELD_MMA.format(held="uint32"), SM90),
    ("wgmma-rs-words-of-float16", _HELD_RS.format(held="float16"), SM90),
    (
        "region-of-a-loop-variable-start-on-a-split-dimension",
        _SPLIT_REGION.format(n=4, extent=16),
        SM90,
    ),
]


@pytest.mark.parametrize("case", TWINS, ids=[c[0] for c in TWINS])
def test_the_hinted_twin_compiles(case, tmp_path):
    _, source, target = case
    tirx.compile(define(source, tmp_path, "k"), target)


_WARP_SUM = """
@T.function
def k(A: T.Tensor((20,), "float32"), Out: T.Tensor((1,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    if lane < 20:
        v = T.cuda.{op}(A[lane])
        if lane == 0:
            Out[0] = v
"""


@pytest.mark.parametrize(
    "op, neutral", [("warp_sum", "0 for a sum"), ("warp_max", "-inf"), ("warp_min", "+inf")]
)
def test_a_divergent_warp_reduction_is_told_it_has_no_mask(op, neutral, tmp_path):
    exe = tirx.compile(define(_WARP_SUM.format(op=op), tmp_path, "k"), "sim")
    with pytest.raises(tirx.SimulationError) as info:
        exe(np.ones(20, np.float32), np.zeros(1, np.float32))
    err = info.value
    assert "does not execute it (divergent control flow)" in err.message, str(err)
    assert f"{op} has no mask" in err.hint, str(err)
    assert "call it where the whole warp is converged (outside the branch)" in err.hint
    assert f"the neutral value ({neutral}" in err.hint
    assert "__activemask" not in err.hint


def test_int32_registers_of_packed_bytes_may_be_loaded_through_a_uint32_view(tmp_path):
    # an int8 mma's fragments hold four 8-bit elements per register and may be declared int32:
    # ldmatrix (no .trans) moves them as 16-bit pairs, which is right for packed bytes
    src = _LDMATRIX.format(tile='b = T.alloc_shared((8, 32), "int8", align=16)', rtype="int32",
                           trans="", regs='r.view("uint32")')  # fmt: skip
    kernel = define(src, tmp_path, "k")
    assert "ldmatrix" in tirx.compile(kernel, "cuda -arch=sm_90").source


_POOL_TRANS = _LDMATRIX.format(
    tile='pool = T.alloc_shared((256,), "uint8", align=16)\n    b = pool.view("float16").view(16, 8)',
    rtype="uint32", trans=".trans", regs="r",
)  # fmt: skip
_TF32_WORDS = _LDMATRIX.format(tile='b = T.alloc_shared((16, 4), "float32", align=16)',
                               rtype="float32", trans="", regs='r.view("uint32")')  # fmt: skip


@pytest.mark.parametrize("src", [_POOL_TRANS, _TF32_WORDS], ids=["byte-pool-trans", "tf32-words"])
def test_sixteen_bit_data_in_a_byte_pool_and_32_bit_words_are_not_refused(src, tmp_path):
    # a float16 tile viewed out of a uint8 pool may be transposed (its elements are 16-bit);
    # float32 data into float32 registers without .trans moves whole words (tf32 operands)
    assert "ldmatrix" in tirx.compile(define(src, tmp_path, "k"), "cuda -arch=sm_90").source


_INIT_THEN_SPLIT = """
@T.function
def k(A: T.Tensor((128,), "float32"), Out: T.Tensor((128,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
    tid = T.cuda.thread_idx("x")
    s = T.alloc_shared((128,), "float32")
    full = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](full[0], 1)
    {sync}
    if tid < 128:
        if tid == 0:
            for i in range(128):
                s[i] = A[i] * 2.0
            T.ptx["mbarrier.arrive.shared::cta.b64"](full[0])
    else:
        T.cuda.mbarrier_wait(full[0], 0)
        Out[tid - 128] = s[tid - 128]
"""


def test_a_barrier_used_before_a_barrier_orders_its_init_is_told_to_sync_after_the_init(tmp_path):
    # the hint said to wait on the barrier (the very wait reported), "not T.cuda.cta_sync()"
    a = np.arange(128, dtype=np.float32)
    bad = define(_INIT_THEN_SPLIT.format(sync="pass"), tmp_path, "k")
    with pytest.raises(tirx.SimulationError, match="reads 'full'\\[0\\]") as info:
        tirx.compile(bad, "sim")(a, np.zeros(128, np.float32))
    err = info.value
    assert err.hint.startswith("put T.cuda.cta_sync() after the mbarrier.init at line 12"), err.hint
    assert "cluster" not in err.hint  # one block: no peers to order it for
    good = define(_INIT_THEN_SPLIT.format(sync="T.cuda.cta_sync()"), tmp_path, "k")
    out = np.zeros(128, np.float32)
    tirx.compile(good, "sim")(a, out)
    assert (out == 2 * a).all()


_CLUSTER_INIT = """
@T.function
def k(X: T.Tensor((2, 128), "float32"), Out: T.Tensor((128,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128, cluster=2))
    tid = T.cuda.thread_idx("x")
    r = T.cuda.mov_sreg(32, "cluster_ctarank")
    s = T.alloc_shared((128,), "float32")
    bar = T.alloc_shared((1,), "uint64")
    d = T.alloc_local((1,), "uint32")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bar[0], 128)
    {sync}
    if r == 1:
        T.ptx["mapa.shared::cluster.u32"](d[0], s[tid], 0)
        T.ptx["st.shared::cluster.f32"](d[0], X[1, tid] * T.float32(2))
        T.ptx["mapa.shared::cluster.u32"](d[0], bar[0], 0)
        T.ptx["mbarrier.arrive.release.cluster.shared::cluster.b64"](d[0])
    else:
        T.cuda.mbarrier_wait_acquire_cluster(bar[0], 0)
        Out[tid] = X[0, tid] + s[tid]
    T.cuda.cluster_sync()
"""


def test_in_a_cluster_the_init_hint_names_the_cluster_barrier_too(tmp_path):
    """A peer block arrives on the barrier too: the local race's hint (a CTA barrier after the
    init) also says cluster_sync() orders it for the peers, the barrier the twin uses."""
    x = np.arange(256, dtype=np.float32).reshape(2, 128)
    bad = define(_CLUSTER_INIT.format(sync="pass"), tmp_path, "k")
    with pytest.raises(tirx.SimulationError) as info:
        tirx.compile(bad, "sim")(x, np.zeros(128, np.float32))
    assert info.value.hint.startswith("put T.cuda.cta_sync() after the mbarrier.init at line")
    assert "T.cuda.cluster_sync() there orders it before theirs as well" in info.value.hint
    good = define(_CLUSTER_INIT.format(sync="T.cuda.cluster_sync()"), tmp_path, "k")
    out = np.zeros(128, np.float32)
    tirx.compile(good, "sim")(x, out)
    assert (out == x[0] + 2 * x[1]).all()
