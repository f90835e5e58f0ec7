"""The simulator's TMA tensor reductions (tirx/families/tma/sim_reduce.py, through
sim_store.py): every .redOp and element type of the PTX ISA's table against an exact model of
the ISA's arithmetic (tests/tma_store_model.py), 16-bit adds rounded once, f32 adds keeping
subnormals, min/max of special values, a grid of blocks summing into one tile; and the same
kernels on the GPU, bit-equal to the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from .tma_store_kernels import (
    REDUCE,
    bits,
    box_kernel,
    expected_store,
    ints,
    on_gpu_and_sim,
    run_sim,
    storage,
)

# ---------------------------------------------------------------------------- reductions

# (redOp, element type) as the PTX ISA's table has them for cp.reduce.async.bulk.tensor
COMBOS = [
    *(("add", t) for t in ("uint32", "int32", "uint64", "float32", "float16", "bfloat16")),
    *((op, t) for op in ("min", "max") for t in ("uint32", "int32", "uint64", "int64", "float16")),
    ("min", "bfloat16"), ("max", "bfloat16"), ("inc", "uint32"), ("dec", "uint32"),
    *((op, t) for op in ("and", "or", "xor") for t in ("uint32", "int32", "uint64")),
]  # fmt: skip


def _values(dtype: str, shape, seed: int):
    """Storage values to reduce: wide-ranging integers (wrapping sums), floats with fractions
    (sums that round)."""
    rng = np.random.default_rng(seed)
    if dtype in ("float16", "float32"):
        v = rng.integers(-2000, 2000, size=shape) / rng.choice([1, 3, 7, 64, 1000], size=shape)
        return v.astype(dtype)
    if dtype == "bfloat16":
        import torch

        v = rng.integers(-2000, 2000, size=shape) / rng.choice([1, 3, 7, 64], size=shape)
        return torch.tensor(v, dtype=torch.float32).to(torch.bfloat16)
    info = np.iinfo(dtype)
    wide = rng.integers(info.min // 2, info.max // 2, size=shape, dtype=dtype) * 2 + 1
    if dtype.startswith("uint"):  # small counters (for inc and dec) among wide values
        small = rng.integers(0, 40, size=shape).astype(dtype)
        return np.where(rng.random(shape) < 0.5, small, wide)
    return wide


def _reduce_kernel(tmp_path, op, dtype, grid=2, coords=(8, 0)):
    esize = {"16": 2, "32": 4, "64": 8}[dtype[-2:]]
    box = (16, 128 // esize)
    k, _ = box_kernel(
        tmp_path, box=box, shape=(32, box[1]), coords=coords, swizzle=0, dtype=dtype,
        grid=grid, text=REDUCE.format(op=op),
    )  # fmt: skip
    return k, box


@pytest.mark.parametrize("op, dtype", COMBOS)
def test_reductions_follow_the_isa_arithmetic(tmp_path, op, dtype):
    grid = 2  # two blocks reduce into the same tile, one after the other
    k, box = _reduce_kernel(tmp_path, op, dtype, grid)
    a = _values(dtype, (grid * box[0], box[1]), 1)
    c = _values(dtype, (32, box[1]), 2)
    want = storage(c).copy()
    for b in range(grid):
        tile = storage(a)[b * box[0] : (b + 1) * box[0]]
        want = expected_store(want, tile, (8, 0), op, dtype)
    run_sim(k, a, c)
    got = storage(c)
    assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_sixteen_bit_adds_round_once(tmp_path):
    # 2049 is not a float16; 2048 + 1 rounds to even (2048), 2048 + 3 to 2052: one rounding of
    # the exact sum, not of a float32 sum rounded again
    k, box = _reduce_kernel(tmp_path, "add", "float16", grid=1, coords=(0, 0))
    a = np.ones((16, 64), dtype=np.float16)
    a[0, :4] = [1, 3, 0.5, 1.5]
    c = np.full((32, 64), 2048, dtype=np.float16)
    run_sim(k, a, c)
    assert c[0, :4].tolist() == [2048, 2052, 2048, 2050]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sixteen_bit_nan_sums_are_the_canonical_nan(tmp_path, dtype):
    # the H200 writes 0x7fff for every NaN sum (docs/gpu-runs/tma-store.md), not the operand's
    # payload nor a quiet 0x7e00/0x7fc0
    import torch

    k, box = _reduce_kernel(tmp_path, "add", dtype, grid=1, coords=(0, 0))
    tdt = getattr(torch, dtype)
    a = torch.ones(box, dtype=tdt)
    c = torch.zeros((32, box[1]), dtype=tdt)
    c[0, :3] = torch.tensor([float("nan"), float("inf"), 1.0])
    a[0, :3] = torch.tensor([2.0, float("-inf"), float("nan")])
    c[0, 3] = 5.0
    run_sim(k, a, c)
    got = c.view(torch.int16)[0, :4].numpy().view(np.uint16).tolist()
    five_plus_one = torch.tensor([6.0], dtype=tdt).view(torch.int16).numpy().view(np.uint16)
    assert got == [0x7FFF, 0x7FFF, 0x7FFF, int(five_plus_one[0])]


def test_f32_adds_keep_subnormals(tmp_path):
    # what an H100 does (docs/simulator.md, "TMA tensor stores"): subnormal inputs count and
    # subnormal results are kept, unlike atom.add.f32's flush
    k, box = _reduce_kernel(tmp_path, "add", "float32", grid=1, coords=(0, 0))
    tiny = np.float32(2.0**-126)
    sub = np.float32(2.0**-149)
    a = np.zeros((16, 32), dtype=np.float32)
    c = np.zeros((32, 32), dtype=np.float32)
    cases = [  # (tensor, box element, result)
        (tiny / 2, tiny, tiny * np.float32(1.5)),  # a subnormal input counts
        (tiny * 1.5, -tiny, tiny / 2),  # a subnormal result is kept
        (-tiny, sub, -(tiny - sub)),  # the GPU's 0x807fffff
        (-tiny * 1.5, tiny * 1.5, 0.0),  # x + -x is +0
        (np.float32(-0.0), np.float32(-0.0), -0.0),  # -0 + -0 is -0
        (np.float32(1.0), tiny / 4, 1.0),  # below half an ulp of 1: rounded away
    ]
    for i, (x, y, _) in enumerate(cases):
        c[0, i], a[0, i] = x, y
    run_sim(k, a, c)
    got = c[0, : len(cases)]
    want = np.array([r for *_, r in cases], dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_a_grid_of_blocks_sums_into_one_tile(tmp_path):
    grid = 4
    k, box = _reduce_kernel(tmp_path, "add", "int32", grid, coords=(0, 0))
    a = ints((grid * 16, 32), np.int32, 7, -(2**30), 2**30) * 2  # sums that wrap
    c = np.zeros((32, 32), dtype=np.int32)
    run_sim(k, a, c)
    total = a.reshape(grid, 16, 32).astype(np.int64).sum(axis=0)
    want = ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
    assert np.array_equal(c[:16], want) and not c[16:].any()


SPECIAL = [np.nan, 0.0, -0.0, 1.0, -np.inf, np.inf, -2.5, 65504.0]


@pytest.mark.parametrize("op", ["min", "max"])
def test_sixteen_bit_min_and_max_of_special_values(tmp_path, op):
    # the ISA's min/max: a NaN operand gives the other operand (two NaNs: the canonical NaN,
    # 0x7fff), -0 is below +0
    k, box = _reduce_kernel(tmp_path, op, "float16", grid=1, coords=(0, 0))
    pairs = [(x, y) for x in SPECIAL for y in SPECIAL]
    a = np.zeros(box, dtype=np.float16)
    c = np.zeros((32, 64), dtype=np.float16)
    a.reshape(-1)[: len(pairs)] = [y for _, y in pairs]
    c.reshape(-1)[: len(pairs)] = [x for x, _ in pairs]
    run_sim(k, a, c)
    for i, (x, y) in enumerate(pairs):
        got = c.reshape(-1)[i]
        if np.isnan(x) and np.isnan(y):
            assert got.view(np.uint16) == 0x7FFF
            continue
        if np.isnan(x) or np.isnan(y):
            want = y if np.isnan(x) else x
        elif x == y == 0:
            want = (
                (-0.0 if (np.signbit(x) or np.signbit(y)) else 0.0)
                if op == "min"
                else (0.0 if not (np.signbit(x) and np.signbit(y)) else -0.0)
            )
        else:
            want = min(x, y) if op == "min" else max(x, y)
        assert np.float16(want).view(np.uint16) == got.view(np.uint16), (x, y, got)


@pytest.mark.gpu
@pytest.mark.parametrize("op, dtype", COMBOS)
def test_gpu_reductions_equal_the_simulator(tmp_path, op, dtype):
    """Two blocks reduce into one tile. The simulator runs block 0 first; on the GPU either
    block's reduction may reach an element first, and for a float add (the rounding) and for
    inc and dec (the wrap at the bound) the order decides the result: each element must be
    what one of the two orders gives (the ISA's model); for the other operations the orders
    agree."""
    k, box = _reduce_kernel(tmp_path, op, dtype, grid=2)
    a, c = _values(dtype, (2 * box[0], box[1]), 1), _values(dtype, (32, box[1]), 2)
    (_, sim_c), (_, gpu_c) = on_gpu_and_sim(k, a, c)
    tiles = [storage(a)[b * box[0] : (b + 1) * box[0]] for b in range(2)]

    def reduced(order):
        out = storage(c).copy()
        for b in order:
            out = expected_store(out, tiles[b], (8, 0), op, dtype)
        return bits(out)

    first, second = reduced((0, 1)), reduced((1, 0))
    assert np.array_equal(bits(sim_c), first)
    got = bits(gpu_c)
    assert np.all((got == first) | (got == second))
    if op in ("inc", "dec") or (op == "add" and dtype.startswith(("float", "bfloat"))):
        assert not np.array_equal(first, second)  # the data tells the two orders apart
    else:
        assert np.array_equal(first, second)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["min", "max", "add"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_sixteen_bit_special_values_equal_the_simulator(tmp_path, op, dtype):
    import torch

    k, box = _reduce_kernel(tmp_path, op, dtype, grid=1, coords=(0, 0))
    pairs = [(x, y) for x in SPECIAL for y in SPECIAL]
    a = torch.zeros(box, dtype=torch.float32)
    c = torch.zeros((32, box[1]), dtype=torch.float32)
    a.view(-1)[: len(pairs)] = torch.tensor([y for _, y in pairs])
    c.view(-1)[: len(pairs)] = torch.tensor([x for x, _ in pairs])
    tdt = torch.float16 if dtype == "float16" else torch.bfloat16
    a, c = a.to(tdt), c.to(tdt)
    (_, sim_c), (_, gpu_c) = on_gpu_and_sim(k, a, c)
    assert np.array_equal(bits(gpu_c), bits(sim_c))


@pytest.mark.gpu
def test_gpu_f32_adds_of_tiny_values_equal_the_simulator(tmp_path):
    k, box = _reduce_kernel(tmp_path, "add", "float32", grid=1, coords=(0, 0))
    tiny = np.float32(2.0**-149) * np.arange(1, 33, dtype=np.float32)  # subnormals
    a = np.tile(tiny, (16, 1)).astype(np.float32)
    c = np.zeros((32, 32), dtype=np.float32)
    c[:16] = np.float32(2.0**-126) * np.linspace(-1, 1, 32, dtype=np.float32)
    (_, sim_c), (_, gpu_c) = on_gpu_and_sim(k, a, c)
    assert np.array_equal(bits(gpu_c), bits(sim_c))


@pytest.mark.gpu
def test_gpu_grid_sum_equals_the_simulator(tmp_path):
    k, _ = _reduce_kernel(tmp_path, "add", "int32", 4, coords=(0, 0))
    a = ints((64, 32), np.int32, 7, -(2**30), 2**30) * 2
    (_, sim_c), (_, gpu_c) = on_gpu_and_sim(k, a, np.zeros((32, 32), dtype=np.int32))
    assert np.array_equal(gpu_c, sim_c)
