"""The tile scheduler of persistent kernels (tirx/examples/tile_scheduler.py) and the persistent
GEMM built on it (tirx/examples/gemm_persistent.py): the grouped order visits every tile
exactly once for many shapes and group sizes (in Python, and as the macro runs on the
simulator, each block taking every grid-th tile), and the persistent GEMM is exact on the
simulator and on the GPU (marked ``gpu``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import tirx
from tirx.examples.gemm_persistent import make_gemm_persistent
from tirx.examples.tile_scheduler import tile_order, tiles_of_block

from .helpers import define

SHAPES = [(1, 1), (1, 7), (7, 1), (3, 5), (7, 5), (8, 8), (16, 9), (13, 11)]
GROUPS = [1, 2, 3, 4, 8, 20]


@pytest.mark.parametrize("tiles_m,tiles_n", SHAPES)
@pytest.mark.parametrize("group", GROUPS)
def test_every_tile_exactly_once(tiles_m, tiles_n, group):
    order = [tile_order(t, tiles_m, tiles_n, group) for t in range(tiles_m * tiles_n)]
    assert sorted(order) == list(itertools.product(range(tiles_m), range(tiles_n)))


@pytest.mark.parametrize("tiles_m,tiles_n", SHAPES)
@pytest.mark.parametrize("group", GROUPS)
def test_the_order_walks_bands_of_group_rows_column_by_column(tiles_m, tiles_n, group):
    order = [tile_order(t, tiles_m, tiles_n, group) for t in range(tiles_m * tiles_n)]
    band = group * tiles_n
    for t, (m, n) in enumerate(order):
        first = t // band * group
        rows = min(group, tiles_m - first)
        assert first <= m < first + rows  # inside its band
        k = t - t // band * band
        assert (m, n) == (first + k % rows, k // rows)  # down a column, then the next one
    if group == 1:
        assert order == sorted(order)  # bands of one row: row-major


def test_the_tiles_of_each_block_cover_the_grid_once():
    for tiles, grid in [(35, 4), (5, 132), (132, 132), (133, 132), (1, 1)]:
        seen = [t for bx in range(grid) for t in tiles_of_block(bx, tiles, grid)]
        assert sorted(seen) == list(range(tiles))
        assert all(t % grid == bx for bx in range(grid) for t in tiles_of_block(bx, tiles, grid))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: tile_order(0, 7, 5, 0), ValueError, "group must be a positive int, got 0"),
        (lambda: tile_order(0, 7, 5, -2), ValueError, "group must be a positive int"),
        (lambda: tile_order(3, 7, 5, 2.5), TypeError, "group must be an int, got 2.5"),
        (lambda: tile_order(3.0, 7, 5, 2), TypeError, "t must be an int"),
        (lambda: tile_order(True, 7, 5, 2), TypeError, "t must be an int, not a bool"),
        (lambda: tile_order(-1, 7, 5, 2), ValueError, "t must be an int of at least 0"),
        (lambda: tile_order(35, 7, 5, 2), ValueError, r"tile 35 of 7 x 5 tiles \(group 2\)"),
        (lambda: tile_order(0, 0, 5, 2), ValueError, "tiles_m must be a positive int"),
        (lambda: tile_order(0, 7, None, 2), TypeError, "tiles_n must be an int"),
        (lambda: tiles_of_block(0, 10, 0), ValueError, "grid must be a positive int, got 0"),
        (lambda: tiles_of_block(-1, 10, 4), ValueError, "bx must be an int of at least 0"),
        (lambda: tiles_of_block(4, 10, 4), ValueError, r"bx must be a block of the grid, 0 .. 3"),
        (lambda: tiles_of_block(0, -1, 4), ValueError, "tiles must be an int of at least 0"),
        (lambda: tiles_of_block(0, 10, 4.0), TypeError, "grid must be an int"),
        (lambda: make_gemm_persistent(64, 64, 16, group=0), ValueError, "group must be a positive"),
        (lambda: make_gemm_persistent(64, 64, 16, group=2.5), TypeError, "group must be an int"),
        (lambda: make_gemm_persistent(0, 64, 16), ValueError, "M must be a positive int"),
    ],
)
def test_arguments_that_are_not_ints_are_refused_by_name(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_numpy_integers_are_taken():
    m, n = tile_order(np.int64(17), np.int32(7), np.int64(5), np.int64(3))
    assert (m, n) == tile_order(17, 7, 5, 3) and type(m) is int and type(n) is int
    assert tiles_of_block(np.int64(1), np.int64(10), np.int32(4)) == [1, 5, 9]
    assert tiles_of_block(3, 0, 4) == []  # no tiles: nothing to do
    want = str(make_gemm_persistent(128, 64, 16, group=2).ir)
    assert str(make_gemm_persistent(np.int64(128), 64, np.int64(16), group=np.int64(2)).ir) == want


RECORD = """
from tirx.examples.tile_scheduler import grouped_tile


@T.function
def record(Out: T.Tensor((TILES, 4), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid="sms", block=32))
    bx = T.cuda.block_idx("x")
    grid = T.cuda.grid_dim("x")
    lane = T.cuda.lane_id()
    for i in range(T.ceildiv(TILES - bx, grid)):
        t = bx + i * grid
        m, n = T.meta_var(grouped_tile(t, TILES_M, TILES_N, GROUP))
        if lane == 0:
            Out[t, 0] = m
            Out[t, 1] = n
            Out[t, 2] = bx
            Out[t, 3] = Out[t, 3] + 1
"""


def record_kernel(tmp_path, tiles_m, tiles_n, group):
    return define(
        RECORD, tmp_path, "record", TILES=tiles_m * tiles_n, TILES_M=tiles_m, TILES_N=tiles_n,
        GROUP=group,
    )  # fmt: skip


def expected_record(tiles_m, tiles_n, group, grid):
    out = np.zeros((tiles_m * tiles_n, 4), np.int32)
    for bx in range(grid):
        for t in tiles_of_block(bx, tiles_m * tiles_n, grid):
            out[t] = (*tile_order(t, tiles_m, tiles_n, group), bx, 1)
    return out


@pytest.mark.parametrize("tiles_m,tiles_n,group,sms", [(7, 5, 3, 4), (3, 5, 8, 2), (4, 4, 2, 20)])
def test_the_macro_on_the_simulator_visits_what_the_python_order_says(
    tmp_path, tiles_m, tiles_n, group, sms
):
    out = np.zeros((tiles_m * tiles_n, 4), np.int32)
    tirx.compile(record_kernel(tmp_path, tiles_m, tiles_n, group), "sim", sms=sms)(out)
    assert np.array_equal(out, expected_record(tiles_m, tiles_n, group, sms))
    assert (out[:, 3] == 1).all()  # each tile once


def gemm_inputs(M, N, K, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-4, 5, (M, K), generator=g).half()
    b = torch.randint(-4, 5, (N, K), generator=g).half()
    return a, b


@pytest.mark.parametrize("M,N,K,group,sms", [(192, 128, 32, 2, 4), (128, 192, 16, 8, 9)])
def test_the_persistent_gemm_is_exact_on_the_simulator(M, N, K, group, sms):
    a, b = gemm_inputs(M, N, K)
    out = torch.zeros(M, N)
    tirx.compile(make_gemm_persistent(M, N, K, group=group), "sim", sms=sms)(a, b, out)
    assert torch.equal(out, a.float() @ b.float().T)


def test_the_persistent_gemm_refuses_sizes_it_does_not_tile():
    with pytest.raises(ValueError, match="multiples of 64"):
        make_gemm_persistent(100, 64, 16)


@pytest.mark.gpu
def test_gpu_visits_the_tiles_as_the_simulator_does(tmp_path):
    from tirx.backend.cuda.driver import multiprocessor_count

    sms = multiprocessor_count(0)
    k = record_kernel(tmp_path, 23, 17, 8)  # more tiles than multiprocessors
    gpu = torch.zeros((23 * 17, 4), dtype=torch.int32, device="cuda")
    tirx.compile(k, "cuda")(gpu)
    sim = np.zeros((23 * 17, 4), np.int32)
    tirx.compile(k, "sim", sms=sms)(sim)
    torch.cuda.synchronize()
    assert np.array_equal(gpu.cpu().numpy(), sim)
    assert np.array_equal(sim, expected_record(23, 17, 8, sms))


@pytest.mark.gpu
def test_gpu_persistent_gemm_is_exact():
    M, N, K = 1024, 512, 128
    a, b = gemm_inputs(M, N, K, seed=2)
    out = torch.zeros(M, N, device="cuda")
    tirx.compile(make_gemm_persistent(M, N, K), "cuda")(a.cuda(), b.cuda(), out)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), a.float() @ b.float().T)
