"""Swizzled (ComposeLayout) shared memory as operands: regions and views keep the swizzle,
ldmatrix/stmatrix/cp.async rows are checked after it, and the per-lane addresses apply it."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import tirx
from tirx.errors import ContractError, SimulationError
from tirx.ir import nodes as ir
from tirx.isa.shared_rows import element_offset
from tirx.layout import ComposeLayout, S, TileLayout, laneid
from tirx.script.tensor import make_buffer, rearrange, region, view_dtype

from .helpers import caret_line, define

PLAIN = TileLayout(S[16, 64])
SWIZZLE_128B = ComposeLayout(3, 3, 3, TileLayout(S[16, 64]))  # f16 rows of 128 bytes
LOAD_X4 = TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])


# ------------------------------------------------------------------- region addressing


@pytest.mark.parametrize("layout", [PLAIN, SWIZZLE_128B], ids=["plain", "swizzled"])
def test_region_addresses_are_the_full_tensors(layout):
    """Every element of every region (and of its u32 view) sits where the whole tensor's
    layout puts it: the region's start is added before the swizzle."""
    _, full = make_buffer("a", (16, 64), "float16", ir.Scope.SHARED, layout)
    for r0, c0 in itertools.product(range(0, 16, 4), range(0, 64, 8)):
        sub = region(full, [slice(r0, r0 + 4), slice(c0, c0 + 8)])
        assert isinstance(sub.layout, type(layout))
        for i, j in itertools.product(range(4), range(8)):
            want = layout.apply(r0 + i, c0 + j, shape=(16, 64))["m"]
            assert element_offset(sub, (i, j)) == want
        words = view_dtype(sub, "uint32")
        for i, j in itertools.product(range(4), range(4)):
            want = layout.apply(r0 + i, c0 + 2 * j, shape=(16, 64))["m"]
            assert element_offset(words, (i, j)) * 2 == want


def test_rearranged_region_of_a_swizzled_tensor():
    _, full = make_buffer("a", (16, 64), "float16", ir.Scope.SHARED, SWIZZLE_128B)
    w = view_dtype(full, "uint32")
    tile = rearrange(
        region(w, [slice(None), slice(8, 16)]),
        "(group row) (chunk word) -> (chunk group) row word",
        group=2,
        chunk=2,
    )
    for i, row, word in itertools.product(range(4), range(8), range(4)):
        r, c = (i % 2) * 8 + row, 8 + (i // 2) * 4 + word
        assert (
            element_offset(tile, (i, row, word)) * 2
            == SWIZZLE_128B.apply(r, 2 * c, shape=(16, 64))["m"]
        )


# ------------------------------------------------------------- ldmatrix over a swizzle

LDMATRIX = """
@T.function
def kernel(A: T.Tensor((16, 64), "float16"), Out: T.Tensor((32, 4), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 64), "float16", layout=layout)
    for q in range(32):
        i = lane + 32 * q
        a[i // 64, i % 64] = A[i // 64, i % 64]
    T.cuda.cta_sync()
    w = a.view("uint32")[:, {start} : {start} + 8].rearrange(
        "(group row) (chunk word) -> (chunk group) row word", group=2, chunk=2, word=4
    )
    ar = T.alloc_local((4,), "uint32")
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        ar.view(4, 8, 4, layout=load), w, scope="warp",
    )
    for r in range(4):
        Out[lane, r] = ar[r]
"""


def ldmatrix_kernel(tmp_path, layout, start="8 * k", k=0):
    src = LDMATRIX.format(start=start)
    return define(src, tmp_path, "kernel", layout=layout, load=LOAD_X4, k=k)


def expected_x4(a: np.ndarray, k: int) -> np.ndarray:
    """ldmatrix.x4 from the PTX ISA: word w of row r of matrix i goes to lane 4r + w,
    register i; matrix i is rows 8(i%2).., u32 columns 8k + 4(i//2).. of the tile."""
    words = a.view(np.uint32)  # (16, 32)
    out = np.zeros((32, 4), np.uint32)
    for i, r, w in itertools.product(range(4), range(8), range(4)):
        out[4 * r + w, i] = words[8 * (i % 2) + r, 8 * k + 4 * (i // 2) + w]
    return out


@pytest.mark.parametrize("k", range(4))
def test_swizzled_ldmatrix_gives_the_same_registers(tmp_path, k):
    a = (np.arange(16 * 64) % 2039).astype(np.float16).reshape(16, 64)
    results = []
    for layout in (PLAIN, SWIZZLE_128B):
        exe = tirx.compile(ldmatrix_kernel(tmp_path, layout, k=k), "sim")
        out = np.zeros((32, 4), np.uint32)
        exe(a, out)
        results.append(out)
    assert np.array_equal(results[0], expected_x4(a, k))
    assert np.array_equal(results[1], results[0])


def test_swizzled_ldmatrix_address_xors_per_lane(tmp_path):
    exe = tirx.compile(ldmatrix_kernel(tmp_path, SWIZZLE_128B, k=1), "cuda -arch=sm_80")
    (line,) = [ln for ln in exe.source.splitlines() if 'asm volatile("ldmatrix' in ln]
    address = line.split('"r"(')[-1]
    assert "tirx_tid & 31" in address and "^" in address  # lane-dependent XOR
    plain = tirx.compile(ldmatrix_kernel(tmp_path, PLAIN, k=1), "cuda -arch=sm_80")
    (line,) = [ln for ln in plain.source.splitlines() if 'asm volatile("ldmatrix' in ln]
    assert "^" not in line


def test_swizzled_rows_split_by_a_small_unit(tmp_path):
    # a swizzle of 8-byte units moves the two halves of a 16-byte row apart
    bad = ComposeLayout(2, 3, 3, TileLayout(S[16, 64]))
    with pytest.raises(ContractError, match="is not 16 contiguous bytes .*after the swizzle") as e:
        tirx.compile(ldmatrix_kernel(tmp_path, bad, k=2), "sim")
    assert caret_line(str(e.value)).startswith("ar.view(4, 8, 4, layout=load), w")
    tirx.compile(ldmatrix_kernel(tmp_path, SWIZZLE_128B, k=2), "sim")  # the twin


def test_a_chunk_unit_swizzle_of_halves_names_per_element(tmp_path):
    """Notebook 1's chunk-counting swizzle, ComposeLayout(0, ...), on a float16 tile: the
    uint32 view would split its 1-element unit. The error names per_element (16-byte chunks
    of float16 are 2**3 elements) and where the layout was built, not "pack by at most 1"."""
    chunks = ComposeLayout(0, 3, 3, TileLayout(S[16, 64]))  # BUILT_HERE
    with pytest.raises(tirx.LayoutError) as e:
        tirx.compile(ldmatrix_kernel(tmp_path, chunks), "sim")
    err = e.value
    assert "cannot view float16 as uint32 (2 elements per uint32)" in err.message
    assert "units of 2**per_element = 2**0 = 1 element (per_element=0)" in err.message
    assert "pack by at most" not in str(err)
    assert "16-byte chunks of float16 (an ldmatrix row) are 8 = 2**3 elements" in err.hint
    assert "per_element=3: ComposeLayout(3, 3, 3, ...)" in err.hint
    assert caret_line(str(err)).startswith('w = a.view("uint32")')
    assert "BUILT_HERE" in str(err).split("the layout was defined here:")[1]
    tirx.compile(ldmatrix_kernel(tmp_path, SWIZZLE_128B), "sim")  # the twin, per_element=3


def test_run_time_start_must_be_provably_aligned(tmp_path):
    src = LDMATRIX.replace(
        'Out: T.Tensor((32, 4), "uint32")', 'Out: T.Tensor((32, 4), "uint32"), c: T.int32'
    )
    with pytest.raises(ContractError, match="alignment to 16 bytes cannot be proven"):
        tirx.compile(
            define(src.format(start="c"), tmp_path, "kernel", layout=SWIZZLE_128B, load=LOAD_X4),
            "sim",
        )
    twin = define(src.format(start="8 * c"), tmp_path, "kernel", layout=SWIZZLE_128B, load=LOAD_X4)
    exe = tirx.compile(twin, "sim")
    a = (np.arange(16 * 64) % 2039).astype(np.float16).reshape(16, 64)
    out = np.zeros((32, 4), np.uint32)
    exe(a, out, 2)
    assert np.array_equal(out, expected_x4(a, 2))


def test_run_time_start_with_a_small_unit(tmp_path):
    src = LDMATRIX.replace(
        'Out: T.Tensor((32, 4), "uint32")', 'Out: T.Tensor((32, 4), "uint32"), c: T.int32'
    )
    bad = ComposeLayout(2, 3, 3, TileLayout(S[16, 64]))
    with pytest.raises(ContractError, match="span several swizzle units of 8 bytes"):
        tirx.compile(
            define(src.format(start="8 * c"), tmp_path, "kernel", layout=bad, load=LOAD_X4), "sim"
        )


# ------------------------------------------------------------ stmatrix into a swizzle

STMATRIX = """
@T.function
def kernel(Out: T.Tensor((16, 64), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 64), "float16", layout=layout)
    for q in range(32):
        i = lane + 32 * q
        a[i // 64, i % 64] = T.float16(0)
    ar = T.alloc_local((4,), "uint32")
    for r in range(4):
        ar[r] = T.uint32(lane * 4 + r)
    T.cuda.cta_sync()
    w = a.view("uint32")[:, 8:16].rearrange(
        "(group row) (chunk word) -> (chunk group) row word", group=2, chunk=2, word=4
    )
    T.cuda.tile.apply(
        T.ptx["stmatrix.sync.aligned.m8n8.x4.shared.b16"],
        w, ar.view(4, 8, 4, layout=load), scope="warp",
    )
    T.cuda.cta_sync()
    for q in range(32):
        i = lane + 32 * q
        Out[i // 64, i % 64] = a[i // 64, i % 64]
"""


def test_swizzled_stmatrix_destination(tmp_path):
    outs = []
    for layout in (PLAIN, SWIZZLE_128B):
        exe = tirx.compile(define(STMATRIX, tmp_path, "kernel", layout=layout, load=LOAD_X4), "sim")
        out = np.zeros((16, 64), np.float16)
        exe(out)
        outs.append(out.view(np.uint16))
    assert np.array_equal(outs[0], outs[1])
    words = outs[0].view(np.uint32)
    for i, r, w in itertools.product(range(4), range(8), range(4)):
        assert words[8 * (i % 2) + r, 8 + 4 * (i // 2) + w] == (4 * r + w) * 4 + i


# -------------------------------------------------------------- cp.async into a swizzle

CP_ASYNC = """
@T.function
def kernel(A: T.Tensor((16, 64), "float16"), Out: T.Tensor((16, 64), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 64), "float16", layout=layout)
    for q in range(4):
        c = lane + 32 * q
        T.cuda.tile.apply(
            T.ptx["cp.async.cg.shared.global"],
            a[c // 8, {dst} : {dst} + {n}], A[c // 8, {dst} : {dst} + {n}],
            scope="thread", chunk_bytes=16,
        )
    T.ptx["cp.async.commit_group"]()
    T.ptx["cp.async.wait_group"](0)
    T.cuda.cta_sync()
    for q in range(32):
        i = lane + 32 * q
        Out[i // 64, i % 64] = a[i // 64, i % 64]
"""


def cp_async_kernel(tmp_path, layout, dst="(c % 8) * 8", n=8):
    return define(CP_ASYNC.format(dst=dst, n=n), tmp_path, "kernel", layout=layout)


def test_cp_async_into_a_swizzle_generates_xored_addresses(tmp_path):
    exe = tirx.compile(cp_async_kernel(tmp_path, SWIZZLE_128B), "cuda -arch=sm_80")
    (copy,) = [ln for ln in exe.source.splitlines() if 'asm volatile("cp.async.cg' in ln]
    shared, global_ = copy.split('"r"(')[1].split('"l"(')
    assert "^" in shared and "^" not in global_  # the swizzle is on the shared side only
    assert re.search(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16;", exe.ptx)


def test_cp_async_misaligned_in_a_swizzle_and_twin(tmp_path):
    with pytest.raises(ContractError, match="operand dst: row .* cannot be proven|past a multiple"):
        tirx.compile(cp_async_kernel(tmp_path, SWIZZLE_128B, dst="(c % 8) * 8 + 4"), "sim")
    tirx.compile(cp_async_kernel(tmp_path, SWIZZLE_128B), "sim")


def test_cp_async_into_a_swizzle_on_the_simulator(tmp_path):
    a = (np.arange(16 * 64) % 2039).astype(np.float16).reshape(16, 64)
    exe = tirx.compile(cp_async_kernel(tmp_path, SWIZZLE_128B), "sim")
    out = np.zeros_like(a)
    try:
        exe(a, out)
    except SimulationError as e:
        if "unknown PTX instruction" in str(e):
            pytest.skip("this simulator does not model cp.async yet")
        raise
    assert np.array_equal(out, a)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", [PLAIN, SWIZZLE_128B], ids=["plain", "swizzled"])
def test_swizzled_operands_on_the_gpu(tmp_path, layout):
    import torch

    a = (torch.arange(16 * 64) % 2039).to(torch.float16).reshape(16, 64)
    exe = tirx.compile(cp_async_kernel(tmp_path, layout), "cuda")
    out = torch.zeros_like(a, device="cuda")
    exe(a.cuda(), out)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), a)
    for k in range(4):
        ld = tirx.compile(ldmatrix_kernel(tmp_path, layout, k=k), "cuda")
        regs = torch.zeros((32, 4), dtype=torch.uint32, device="cuda")
        ld(a.cuda(), regs)
        torch.cuda.synchronize()
        assert np.array_equal(regs.cpu().numpy(), expected_x4(a.numpy(), k))


# ------------------------------------------------------------------------ bank view


def test_ldmatrix_bank_conflicts_of_a_tile():
    from widgets.banks import element_banks, ldmatrix_banks

    plain, swizzled = ldmatrix_banks(PLAIN), ldmatrix_banks(SWIZZLE_128B)
    assert (plain.matrices, plain.wavefronts, plain.worst) == (16, 128, 8)  # rows 128 B apart
    assert (swizzled.wavefronts, swizzled.worst) == (16, 1)  # the 128-byte swizzle: none
    assert ldmatrix_banks(TileLayout(S[16, 16])).worst == 2  # rows 32 B apart
    banks = element_banks(SWIZZLE_128B)
    # one 16-byte column of 8 rows covers all 32 banks once
    assert sorted({banks[r, c] for r in range(8) for c in range(8, 16)}) == list(range(32))


def test_bank_picture_and_show_layout_summary():
    from widgets import show_layout
    from widgets.banks import draw_banks

    fig = draw_banks(PLAIN)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("8x") == 16 and "worst 8-way bank conflict" in fig.axes[0].get_title()
    assert "8x" not in [t.get_text() for t in draw_banks(SWIZZLE_128B).axes[0].texts]
    assert "ldmatrix over 16 8x8 matrices: 16 wavefronts" in show_layout(SWIZZLE_128B).summary


def test_named_region_starts_are_seen_through(tmp_path):
    src = CP_ASYNC.replace(
        "        T.cuda.tile.apply(", "        col = {col}\n        T.cuda.tile.apply("
    ).replace("a[c // 8, {dst} : {dst} + {n}], A[c // 8, {dst} : {dst} + {n}]",
              "a[c // 8, col : col + 8], A[c // 8, col : col + 8]")  # fmt: skip
    good = define(src.format(col="(c % 8) * 8"), tmp_path, "kernel", layout=SWIZZLE_128B)
    exe = tirx.compile(good, "cuda -arch=sm_80")
    assert "cp.async.cg.shared.global" in exe.ptx
    bad = define(src.format(col="(c % 8) * 4"), tmp_path, "kernel", layout=SWIZZLE_128B)
    with pytest.raises(ContractError, match="cannot be proven"):
        tirx.compile(bad, "cuda -arch=sm_80")
