"""Raw wgmma descriptors against the layout their shared buffer was declared with
(tirx/families/wgmma/script.py, ``_against_layout``): a ``T.cuda.wgmma.encode_matrix_descriptor``
of a buffer declared with a hardware swizzle (``ComposeLayout``, as TMA's ``swizzle=`` fills
it) is refused at its line where the swizzle argument names another mode, the buffer is
aligned below the swizzle's period, or the start lies inside the swizzle's 8-row pattern, each
where it is known at compile time; the right call compiles and simulates the product."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tirx
from tirx import T
from tirx.layout import ComposeLayout, S, TileLayout

M, N, BK = 64, 64, 64
WG = f"wgmma.mma_async.sync.aligned.m64n{N}k16.f32.bf16.bf16"


def make(swizzle=3, align=1024, row0=0, run_time_swizzle=False, start=None):
    """A (64, 64) x (64, 64)^T bf16 product through raw descriptors of 128-byte-swizzled
    tiles, A's rows stored from ``row0`` of its (row0 + 64)-row tile (whole 8-row groups),
    its descriptor starting at row ``start`` (default ``row0``)."""
    rows = M + -(-row0 // 8) * 8
    start = row0 if start is None else start
    sw_a = ComposeLayout(3, 3, 3, TileLayout(S[rows, BK]))
    sw_b = ComposeLayout(3, 3, 3, TileLayout(S[N, BK]))

    @T.function
    def k(
        A: T.Tensor((M, BK), "bfloat16"),
        B: T.Tensor((N, BK), "bfloat16"),
        Out: T.Tensor((M, N), "float32"),
        sw: T.int32,
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        tid = T.cuda.thread_idx("x")
        lane = T.cuda.lane_id()
        w = T.cuda.warp_id()
        a_s = T.alloc_shared((rows, BK), "bfloat16", layout=sw_a, align=align, scope="shared.dyn")
        b_s = T.alloc_shared((N, BK), "bfloat16", layout=sw_b, align=align, scope="shared.dyn")
        acc = T.alloc_local((N // 2,), "float32")
        ad = T.alloc_local((1,), "uint64")
        bd = T.alloc_local((1,), "uint64")
        for r in range(M // 2):
            a_s[row0 + r * 2 + tid // 64, tid % 64] = A[r * 2 + tid // 64, tid % 64]
            b_s[r * 2 + tid // 64, tid % 64] = B[r * 2 + tid // 64, tid % 64]
        T.ptx["fence.proxy.async.shared::cta"]()
        T.cuda.cta_sync()
        T.ptx["wgmma.fence.sync.aligned"]()
        for kk in T.unroll(BK // 16):
            if run_time_swizzle:
                T.cuda.wgmma.encode_matrix_descriptor(ad[0], a_s[start, kk * 16], 1, 64, sw)
            else:
                T.cuda.wgmma.encode_matrix_descriptor(ad[0], a_s[start, kk * 16], 1, 64, swizzle)
            T.cuda.wgmma.encode_matrix_descriptor(bd[0], b_s[0, kk * 16], 1, 64, 3)
            T.ptx[WG](acc, ad[0], bd[0], kk, 1, 1, 0, 0)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        for i in T.unroll(N // 2):
            Out[16 * w + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2] = (
                acc[i]
            )

    return k


def _product_error(kernel, sw=3) -> float:
    torch.manual_seed(0)
    a = torch.randn(M, BK).to(torch.bfloat16)
    b = torch.randn(N, BK).to(torch.bfloat16)
    out = torch.zeros(M, N)
    tirx.compile(kernel, "sim")(a, b, out, sw)
    ref = a.double().numpy() @ b.double().numpy().T
    return float(np.abs(out.numpy() - ref).max())


@pytest.mark.parametrize("row0", [0, 8])
def test_the_right_raw_descriptors_compile_and_simulate_the_product(row0):
    k = make(row0=row0)
    assert _product_error(k) < 1e-4
    assert tirx.compile(k, "cuda -arch=sm_90a").cubin[:4] == b"\x7fELF"


def _refused(**kw) -> tirx.ContractError:
    with pytest.raises(tirx.ContractError) as info:  # where the kernel is parsed
        tirx.compile(make(**kw), "sim")
    err = info.value  # at the user's line, which the message quotes
    assert "encode_matrix_descriptor(ad[0]" in str(err), str(err)
    return err


@pytest.mark.parametrize("swizzle, says", [(2, "64-byte"), (1, "32-byte"), (0, "no swizzle")])
def test_a_swizzle_argument_other_than_the_buffers_is_refused_at_its_line(swizzle, says):
    err = _refused(swizzle=swizzle)
    assert "'a_s' is laid out with the 128-byte swizzle" in err.message, str(err)
    assert f"swizzle argument {swizzle} says {says}" in err.message, str(err)
    assert "pass swizzle 3" in err.hint, str(err)


def test_a_buffer_aligned_below_the_swizzle_period_is_refused_at_its_line():
    err = _refused(align=128)
    assert "allocated with align=128" in err.message, str(err)
    assert "1024-byte boundary" in err.message, str(err)
    assert "align=1024" in err.hint, str(err)


def test_a_start_inside_the_swizzle_pattern_is_refused_where_it_is_known():
    """A start at row 3 of the 8-row pattern (a compile-time element): its address after the
    swizzle is not the tile's address, which the hardware swizzles again."""
    rows = 72
    sw = ComposeLayout(3, 3, 3, TileLayout(S[rows, BK]))
    with pytest.raises(tirx.ContractError) as info:

        @T.function
        def k(Out: T.Tensor((1,), "uint64")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
            a_s = T.alloc_shared((rows, BK), "bfloat16", layout=sw, align=1024)
            ad = T.alloc_local((1,), "uint64")
            T.cuda.wgmma.encode_matrix_descriptor(ad[0], a_s[3, 16], 1, 64, 3)
            Out[0] = ad[0]

        tirx.compile(k, "sim")
    err = info.value
    assert "a_s[3, 16]" in str(err), str(err)
    assert "128-byte line 3 of the 128-byte swizzle's 1024-byte pattern" in err.message, str(err)
    assert "row 0 of every 8 rows of 128 bytes" in err.hint and "tile form" in err.hint, str(err)


def test_a_start_row_inside_the_pattern_is_refused_with_a_loop_column():
    """``a_s[3, 16 * kk]`` in the K loop, as kernels write it: the column moves the address
    within the row only, so the start's line is known (it ran clean and wrong before)."""
    err = _refused(row0=3)
    assert "a_s[start, kk * 16]" in str(err), str(err)
    assert "128-byte line 3 of the 128-byte swizzle's 1024-byte pattern" in err.message, str(err)


def _sixty_four_byte(row: int):
    """A raw descriptor of a 64-byte-swizzled bf16 tile (rows of 64 bytes, two to a 128-byte
    line) starting at ``row``, its column a loop variable."""
    sw = ComposeLayout(3, 2, 3, TileLayout(S[72, 32]))

    @T.function
    def k(Out: T.Tensor((2,), "uint64")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        a_s = T.alloc_shared((72, 32), "bfloat16", layout=sw, align=512)
        ad = T.alloc_local((1,), "uint64")
        for kk in T.unroll(2):
            T.cuda.wgmma.encode_matrix_descriptor(ad[0], a_s[row, kk * 16], 1, 32, 2)
            Out[kk] = ad[0]

    return k


@pytest.mark.parametrize("row", [0, 1, 8, 9])
def test_the_first_line_of_a_64_byte_pattern_holds_two_rows(row):
    """Rows 0 and 1 of each 8 share the pattern's first 128-byte line, which the swizzle
    leaves in place: both are starts the hardware reads as the tile's."""
    out = torch.zeros(2, dtype=torch.uint64)
    tirx.compile(_sixty_four_byte(row), "sim")(out)
    start = [(int(d) & 0x3FFF) << 4 for d in out.tolist()]
    assert start == [row * 64, row * 64 + 32], start


@pytest.mark.parametrize("row, line", [(2, 1), (3, 1), (6, 3)])
def test_a_64_byte_pattern_refuses_the_rows_of_its_other_lines(row, line):
    with pytest.raises(tirx.ContractError) as info:
        tirx.compile(_sixty_four_byte(row), "sim")
    err = info.value
    assert f"line {line} of the 64-byte swizzle's 512-byte pattern" in err.message, str(err)
    assert "rows 0-1 of every 8 rows of 64 bytes" in err.hint, str(err)


def test_rows_past_the_tile_into_the_next_allocation_are_reported():
    """A start 8 rows into a 64-row tile: the operand's last 8 rows are the next allocation's
    bytes, which the GPU reads without a fault (a wrong product, which ran clean before)."""
    with pytest.raises(tirx.SimulationError) as info:
        _product_error(make(start=8))
    err = info.value
    assert "A (a-desc) starts in 'a_s' but a row of it lies in another allocation, 'b_s'[" in (
        err.message
    ), str(err)
    assert "start row" in err.hint and "SBO" in err.hint, str(err)


def test_what_is_not_known_at_compile_time_is_not_refused():
    """A run-time swizzle argument (here the right one) and a start whose row phase depends
    on an unrolled index are left alone: no error without knowing."""
    assert _product_error(make(run_time_swizzle=True), sw=3) < 1e-4
