"""The simulator's TMA tensor store and reduction (tirx/families/tma/sim_store.py, sim_reduce.py;
the groups tirx/sim/bulk_groups.py): where a stored box lands (every swizzle, the image bytes
against the PTX ISA's formula written out here, elements outside the tensor not written), the
reductions' arithmetic against an exact model, a grid of blocks reducing into one tile, a
loop that loads with TMA, computes and stores with TMA through two stages; each fault of the
model on a kernel built to break it, with its corrected twin; and the same kernels on the GPU,
bit-equal to the simulator."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx.errors import SimulationError

from .tma_store_kernels import (
    LOAD,
    REDUCE,
    STORE,
    box_kernel,
    expected_store,
    line,
    pipeline_expected,
    pipeline_kernel,
)

FENCE = 'T.ptx["fence.proxy.async.shared::cta"]()'


def _ints(shape, dtype, seed=0, low=-1000, high=1000):
    rng = np.random.default_rng(seed)
    return rng.integers(low, high, size=shape).astype(dtype)


def _run(kernel, *arrays):
    tirx.compile(kernel, target="sim")(*arrays)


def _fails(tmp_path, pattern, **kw):
    k, src = box_kernel(tmp_path, **kw)
    a = _ints((64, 64), np.float16)
    with pytest.raises(SimulationError, match=pattern) as e:
        _run(k, a, np.zeros((128, 128), dtype=np.float16))
    return e.value, src


def _image(storage: np.ndarray, swizzle: int) -> np.ndarray:
    """The box image the copy engine reads from shared ``storage`` (its bytes in address
    order), from the PTX ISA: image byte ``o`` is the byte at ``o`` with the 16-byte unit
    number's low ``swizzle`` bits XOR-ed with the 128-byte row number's."""
    raw = storage.reshape(-1).view(np.uint8)
    out = np.empty_like(raw)
    mask = (1 << swizzle) - 1
    for o in range(raw.size):
        unit, row = (o >> 4) & 7, (o >> 7) & 7
        out[o] = raw[(o & ~0x70) | ((((unit ^ row) & mask) | (unit & ~mask)) << 4)]
    return out.view(storage.dtype).reshape(storage.shape)


# ------------------------------------------------------------------------------- stores


@pytest.mark.parametrize("swizzle", [0, 1, 2, 3])
def test_a_stored_box_lands_at_its_coordinates(tmp_path, swizzle):
    box = (64, 64) if swizzle in (0, 3) else (64, 16 << swizzle >> 1)
    k, _ = box_kernel(tmp_path, box=box, coords=(64, 32), swizzle=swizzle)
    a = _ints(box, np.float16, swizzle)
    c = np.full((128, 128), 7, dtype=np.float16)
    want = expected_store(c, a, (64, 32))
    _run(k, a, c)
    assert np.array_equal(c.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("swizzle", [1, 2, 3])
def test_the_engine_reads_the_swizzled_image(tmp_path, swizzle):
    # the tile's raw storage (address order) holds A; the engine reads the image the ISA says
    box = (64, 64) if swizzle == 3 else (64, 16 << swizzle >> 1)
    raw = f"raw = s.view({box[0]}, {box[1]}, layout=TileLayout(S[({box[0]}, {box[1]})]))"
    k, _ = box_kernel(tmp_path, box=box, coords=(0, 0), swizzle=swizzle, prologue=raw, target="raw")
    a = _ints(box, np.float16, 10 + swizzle)
    c = np.zeros((128, 128), dtype=np.float16)
    _run(k, a, c)
    image = _image(a, swizzle)
    assert np.array_equal(c[: box[0], : box[1]], image)
    assert not np.array_equal(image, a)  # the swizzle moved something


@pytest.mark.parametrize("coords", [(64, 32), (-8, -16), (100, 120)])
def test_elements_outside_the_tensor_are_not_written(tmp_path, coords):
    k, _ = box_kernel(tmp_path, shape=(100, 72), coords=coords, swizzle=3)
    a = _ints((64, 64), np.float16, 3)
    c = np.full((100, 72), -5, dtype=np.float16)
    want = expected_store(c, a, coords)
    _run(k, a, c)
    assert np.array_equal(c, want)


def test_a_store_and_a_reduction_of_one_tile_in_one_group(tmp_path):
    red = 'T.cuda.tile.apply(T.ptx[RED], C[:, :], s[:, :], box=(64, 64), coords=(0, 64), swizzle=3, scope="thread")'
    names = dict(RED=REDUCE.format(op="add"))
    k, _ = box_kernel(tmp_path, names, coords=(64, 0), after_store=red)
    a = _ints((64, 64), np.float16, 4, -100, 100)
    c = _ints((128, 128), np.float16, 5, -100, 100)
    want = expected_store(c, a, (64, 0))
    want = expected_store(want, a, (0, 64), "add", "float16")
    _run(k, a, c)
    assert np.array_equal(c, want)


# ---------------------------------------------------------------------------- reductions

# (redOp, element type) as the PTX ISA's table has them for cp.reduce.async.bulk.tensor
COMBOS = [
    *(("add", t) for t in ("uint32", "int32", "uint64", "float32", "float16", "bfloat16")),
    *((op, t) for op in ("min", "max") for t in ("uint32", "int32", "uint64", "int64", "float16")),
    ("min", "bfloat16"), ("max", "bfloat16"), ("inc", "uint32"), ("dec", "uint32"),
    *((op, t) for op in ("and", "or", "xor") for t in ("uint32", "int32", "uint64", "int64")),
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


def _storage(x) -> np.ndarray:
    """numpy storage values of a numpy array or a torch bfloat16 tensor."""
    if isinstance(x, np.ndarray):
        return x
    import torch

    return x.view(torch.int16).numpy().view(np.uint16)


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
    want = _storage(c).copy()
    for b in range(grid):
        tile = _storage(a)[b * box[0] : (b + 1) * box[0]]
        want = expected_store(want, tile, (8, 0), op, dtype)
    _run(k, a, c)
    got = _storage(c)
    assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_sixteen_bit_adds_round_once(tmp_path):
    # 2049 is not a float16; 2048 + 1 rounds to even (2048), 2048 + 3 to 2052: one rounding of
    # the exact sum, not of a float32 sum rounded again
    k, box = _reduce_kernel(tmp_path, "add", "float16", grid=1, coords=(0, 0))
    a = np.ones((16, 64), dtype=np.float16)
    a[0, :4] = [1, 3, 0.5, 1.5]
    c = np.full((32, 64), 2048, dtype=np.float16)
    _run(k, a, c)
    assert c[0, :4].tolist() == [2048, 2052, 2048, 2050]


def test_f32_adds_flush_subnormals(tmp_path):
    # tirx's reading (docs/simulator.md): subnormal inputs and results become zeros of their
    # sign, as atom.add.f32 and cp.reduce.async.bulk's .add.f32 do
    k, box = _reduce_kernel(tmp_path, "add", "float32", grid=1, coords=(0, 0))
    tiny = np.float32(2.0**-126)
    a = np.zeros((16, 32), dtype=np.float32)
    c = np.zeros((32, 32), dtype=np.float32)
    cases = [  # (tensor, box element, result)
        (tiny / 2, tiny, tiny),  # a subnormal input counts as zero
        (tiny * 1.5, -tiny, 0.0),  # a subnormal result is flushed ...
        (-tiny * 1.5, tiny, -0.0),  # ... to a zero of its sign
        (np.float32(1.0), tiny / 4, 1.0),
    ]
    for i, (x, y, _) in enumerate(cases):
        c[0, i], a[0, i] = x, y
    _run(k, a, c)
    got = c[0, : len(cases)]
    want = np.array([r for *_, r in cases], dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


# -------------------------------------------------------------------------- the pipeline


def test_load_compute_store_through_two_stages_is_exact(tmp_path):
    K = 4
    a = _ints((K * 64, 64), np.float16, 6, -500, 500)
    c = np.zeros_like(a)
    k, _ = pipeline_kernel(tmp_path, K)
    _run(k, a, c)
    assert np.array_equal(c, pipeline_expected(a))


def test_a_grid_of_blocks_sums_into_one_tile(tmp_path):
    grid = 4
    k, box = _reduce_kernel(tmp_path, "add", "int32", grid, coords=(0, 0))
    a = _ints((grid * 16, 32), np.int32, 7, -(2**30), 2**30) * 2  # sums that wrap
    c = np.zeros((32, 32), dtype=np.int32)
    _run(k, a, c)
    total = a.reshape(grid, 16, 32).astype(np.int64).sum(axis=0)
    want = ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
    assert np.array_equal(c[:16], want) and not c[16:].any()


@pytest.mark.parametrize("corrupt", ["coordinates", "swizzle"])
def test_a_corrupted_lowering_is_caught(tmp_path, corrupt):
    # the simulator reads the lowered program's operands, not the contract: swap the store's
    # two coordinates, or change its map's swizzle, and the result stops matching the model
    import dataclasses

    from tirx import sim
    from tirx.ir import nodes as ir
    from tirx.ir.tensor_map import fields_count

    def walk(st):
        if isinstance(st, ir.Seq):
            return ir.Seq(tuple(walk(x) for x in st.stmts), st.span)
        if isinstance(st, (ir.For, ir.If)):
            body = "body" if isinstance(st, ir.For) else "then_body"
            return dataclasses.replace(st, **{body: walk(getattr(st, body))})
        return change(st) if isinstance(st, ir.PtxCall) else st

    k, _ = box_kernel(tmp_path, coords=(64, 0))
    lowered = tirx.compile(k, target="sim").lowered

    def change(call):
        if call.instruction != STORE:
            return call
        ops = list(call.operands)
        if corrupt == "coordinates":
            first = 1 + fields_count(2)
            ops[first], ops[first + 1] = ops[first + 1], ops[first]
        else:
            ops[1 + fields_count(2) - 2] = ir.Immediate(2)  # the swizzle field
        return dataclasses.replace(call, operands=tuple(ops))

    a, c = _ints((64, 64), np.float16, 17), np.zeros((128, 128), dtype=np.float16)
    want = expected_store(c, a, (64, 0))
    good = c.copy()
    sim.run(lowered, [a, good])
    assert np.array_equal(good, want)
    sim.run(dataclasses.replace(lowered, body=walk(lowered.body)), [a, c])
    assert not np.array_equal(c, want)


# ---------------------------------------------------------------------------- the faults


def test_a_missing_fence(tmp_path):
    err, src = _fails(tmp_path, "the copy engine may read stale bytes", fence="pass")
    assert "fence.proxy.async.shared::cta between the stores and the tensor store" in err.message
    assert f"at line {line(src, 'fill')}" in err.message
    assert f"{STORE} at line {line(src, 'store')}" in err.message
    assert "fence.proxy.async.shared::cta" in err.hint and "cta_sync" in err.hint


def test_a_fence_by_some_of_the_writers_only(tmp_path):
    fence = f"if tid < 64:\n        {FENCE}"
    _fails(tmp_path, "the copy engine may read stale bytes", fence=fence)


@pytest.mark.xfail(
    strict=True,
    reason="needs the fence-before-barrier order of tirx/sim/proxy.py's reader check (branch "
    "simasync); the tensor store calls AsyncProxy.stale, which sees only whether a fence came",
)
def test_a_fence_after_the_barrier(tmp_path):
    _fails(tmp_path, "stale", fence="pass", sync=f"T.cuda.cta_sync()\n    {FENCE}")


def test_no_barrier_between_the_writers_and_the_store(tmp_path):
    err, src = _fails(tmp_path, "shared-memory race", sync="pass")
    assert f"at line {line(src, 'store')}" in err.message
    assert f"at line {line(src, 'fill')}" in err.message


def test_writing_the_source_before_the_read_wait(tmp_path):
    err, src = _fails(
        tmp_path, "whose reads of it are not known to be done",
        after_commit="s[0, 3] = T.float16(0)",
    )  # fmt: skip
    assert f"at line {line(src, 'after commit')}" in err.message
    assert f"the source of the {STORE} at line {line(src, 'store')} issued by thread 0" in (
        err.message
    )
    assert "wait_group.read" in err.hint


def test_another_thread_reusing_the_source_before_the_read_wait(tmp_path):
    err, src = _fails(
        tmp_path, "the source of the", wait_read="pass", wait_full="pass",
        tail="if tid == 40:\n        s[1, 8] = T.float16(0)",
    )  # fmt: skip
    assert f"at line {line(src, 'tail')}" in err.message and "warp 1, lane 8" in err.message


def test_reusing_the_source_needs_a_barrier_after_the_read_wait(tmp_path):
    reuse = "if tid == 40:\n        s[1, 8] = T.float16(0)"
    err, src = _fails(tmp_path, "shared-memory race", tail=reuse)
    assert f"which thread 0 (warp 0, lane 0) read at line {line(src, 'wait read')}" in err.message
    k, _ = box_kernel(tmp_path, tail="T.cuda.cta_sync()\n    " + reuse)  # the twin
    a, c = _ints((64, 64), np.float16, 8), np.zeros((128, 128), dtype=np.float16)
    _run(k, a, c)
    assert np.array_equal(c[64:, :64], a)  # the store took the bytes before the reuse


def test_a_missing_commit(tmp_path):
    err, src = _fails(tmp_path, "never committed", commit="pass")
    assert f"the block exits while the {STORE} at line {line(src, 'store')}" in err.message
    _fails(tmp_path, "not known to be done", commit="pass", after_read="s[0, 0] = T.float16(1)")


def test_missing_waits(tmp_path):
    err, src = _fails(tmp_path, "the block exits while", wait_read="pass", wait_full="pass")
    assert "commit_group" in err.hint and "wait_group.read" in err.hint
    k, _ = box_kernel(tmp_path, wait_read="pass")  # the full wait also covers the reads
    a, c = _ints((64, 64), np.float16, 9), np.zeros((128, 128), dtype=np.float16)
    _run(k, a, c)
    assert np.array_equal(c[64:, :64], a)


@pytest.mark.parametrize(
    "where, change",
    [
        ("after read", dict(after_read="x = C[70, 5]")),
        ("after store", dict(after_store="C[127, 63] = T.float16(1)")),
        ("tail", dict(tail="x = C[64, 0]", wait_full="pass")),
    ],
)
def test_accessing_the_destination_before_the_full_wait(tmp_path, where, change):
    err, src = _fails(tmp_path, "the destination of the", **change)
    assert f"at line {line(src, where)}" in err.message
    assert f"{STORE} at line {line(src, 'store')}" in err.message and "wait_group" in err.hint


def test_the_destination_is_readable_after_the_full_wait(tmp_path):
    k, _ = box_kernel(tmp_path, after_full="x = C[70, 5]\n        C[0, 0] = x")
    a, c = _ints((64, 64), np.float16, 11), np.zeros((128, 128), dtype=np.float16)
    _run(k, a, c)
    assert c[0, 0] == a[6, 5]


AGAIN = (  # a second copy of the tile, overlapping the first one's destination
    'T.cuda.tile.apply(T.ptx[TEXT], C[:, :], s[:, :], box=(64, 64), coords=(96, 32), swizzle=3, scope="thread")'
)


def test_a_second_store_onto_pending_bytes(tmp_path):
    _fails(tmp_path, "is still writing", after_store=AGAIN)


def test_two_pending_reductions_may_overlap(tmp_path):
    k, _ = box_kernel(tmp_path, text=REDUCE.format(op="add"), coords=(64, 0), after_store=AGAIN)
    a = _ints((64, 64), np.float16, 12, -50, 50)
    c = _ints((128, 128), np.float16, 13, -50, 50)
    want = expected_store(c, a, (64, 0), "add", "float16")
    want = expected_store(want, a, (96, 32), "add", "float16")
    _run(k, a, c)
    assert np.array_equal(c, want)


def test_a_tensor_load_of_bytes_a_store_has_not_written(tmp_path):
    load = (
        'T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 8192)\n        '
        "T.cuda.tile.apply(T.ptx[LOAD], s2[:, :], C[:, :], box=(64, 64), coords=(64, 0), "
        'swizzle=3, mbar=bars[0], scope="thread")'
    )
    names = dict(LOAD=LOAD)
    k, src = box_kernel(tmp_path, names, after_read=load)
    a, c = _ints((64, 64), np.float16, 14), np.zeros((128, 128), dtype=np.float16)
    with pytest.raises(SimulationError, match="tensor load read of global 'C'") as e:
        _run(k, a, c)
    assert f"the destination of the {STORE} at line {line(src, 'store')}" in e.value.message
    twin = load + "\n        T.cuda.mbarrier_wait(bars[0], 0)"
    k, _ = box_kernel(tmp_path, names, after_full=twin)
    _run(k, a, c)


@pytest.mark.parametrize("text", [STORE, REDUCE.format(op="add")])
def test_a_misaligned_data_pointer_is_refused(tmp_path, text):
    k, _ = box_kernel(tmp_path, text=text)
    base = np.zeros(128 * 128 + 8, dtype=np.float16)
    with pytest.raises(SimulationError, match="multiple of 16"):
        _run(k, _ints((64, 64), np.float16), base[1 : 1 + 128 * 128].reshape(128, 128))


def test_pipeline_faults_and_twins(tmp_path):
    a = _ints((4 * 64, 64), np.float16, 15, -500, 500)

    def fails(pattern, **changes):
        k, src = pipeline_kernel(tmp_path, 4, **changes)
        with pytest.raises(SimulationError, match=pattern) as e:
            _run(k, a, np.zeros_like(a))
        return e.value, src

    # a stage refilled while the store issued from it two iterations ago may still read it
    err, src = fails("whose reads of it are not known to be done", keep="2")
    assert f"at line {line(src, 'compute')}" in err.message
    assert f"{STORE} at line {line(src, 'store')}" in err.message
    # never committed: no wait covers the store, the stage's refill is the same fault
    fails("whose reads of it are not known to be done", commit="pass")
    fails("the copy engine may read stale bytes", fence="pass")
    # the twin without the barrier after the read wait is correct too: thread 0's next
    # arrive on the load's mbarrier (after its wait, in program order) orders its wait before
    # the other threads' writes, which come after their mbarrier wait
    k, _ = pipeline_kernel(tmp_path, 4, reuse_sync="pass")
    c = np.zeros_like(a)
    _run(k, a, c)
    assert np.array_equal(c, pipeline_expected(a))


@pytest.mark.xfail(
    strict=True,
    reason="needs the fence-before-barrier order of tirx/sim/proxy.py's reader check (branch "
    "simasync)",
)
def test_pipeline_with_the_fence_after_the_barrier(tmp_path):
    a = _ints((4 * 64, 64), np.float16, 16)
    k, _ = pipeline_kernel(tmp_path, 4, fence="pass", late_fence=FENCE)
    with pytest.raises(SimulationError, match="stale"):
        _run(k, a, np.zeros_like(a))


def test_the_trace_shows_the_store(tmp_path):
    from tirx import sim

    k, _ = box_kernel(tmp_path)
    a, c = _ints((64, 64), np.float16), np.zeros((128, 128), dtype=np.float16)
    result = sim.run(tirx.compile(k, target="sim").lowered, [a, c], trace=True)
    events = [(t.event, t.instruction) for t in result.copies]
    assert ("copy", STORE) in events
    (copy,) = [t for t in result.copies if t.instruction == STORE]
    assert copy.nbytes[0] == 8192 and copy.active.sum() == 1
    assert [e for e, _ in events[-3:]] == ["commit_group", "wait_group", "wait_group"]


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
    _run(k, a, c)
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


# ---------------------------------------------------------------------------------- GPU


def _on_gpu_and_sim(kernel, *arrays):
    """Run ``kernel`` on the simulator and on the GPU over copies of ``arrays`` (numpy arrays
    or CPU torch tensors); the outputs of both, as numpy storage values."""
    import torch

    def copy(x):
        return x.copy() if isinstance(x, np.ndarray) else x.clone()

    sim_args = [copy(x) for x in arrays]
    tirx.compile(kernel, target="sim")(*sim_args)
    gpu_args = [
        (torch.from_numpy(copy(x)) if isinstance(x, np.ndarray) else copy(x)).cuda() for x in arrays
    ]
    tirx.compile(kernel, target="cuda")(*gpu_args)
    torch.cuda.synchronize()
    gpu = [_storage(g.cpu() if g.dtype == torch.bfloat16 else g.cpu().numpy()) for g in gpu_args]
    return [_storage(x) for x in sim_args], gpu


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(f"u{x.itemsize}")


@pytest.mark.gpu
@pytest.mark.parametrize("swizzle", [0, 1, 2, 3])
def test_gpu_stored_boxes_equal_the_simulator(tmp_path, swizzle):
    box = (64, 64) if swizzle in (0, 3) else (64, 16 << swizzle >> 1)
    k, _ = box_kernel(tmp_path, box=box, coords=(64, 32), swizzle=swizzle)
    a, c = _ints(box, np.float16, swizzle), np.full((128, 128), 7, dtype=np.float16)
    (_, sim_c), (_, gpu_c) = _on_gpu_and_sim(k, a, c)
    assert np.array_equal(_bits(gpu_c), _bits(sim_c))
    assert np.array_equal(sim_c, expected_store(c, a, (64, 32)))


@pytest.mark.gpu
@pytest.mark.parametrize("coords", [(64, 32), (-8, -16)])
def test_gpu_leaves_elements_outside_the_tensor_alone(tmp_path, coords):
    k, _ = box_kernel(tmp_path, shape=(100, 72), coords=coords, swizzle=3)
    a, c = _ints((64, 64), np.float16, 3), np.full((100, 72), -5, dtype=np.float16)
    (_, sim_c), (_, gpu_c) = _on_gpu_and_sim(k, a, c)
    assert np.array_equal(_bits(gpu_c), _bits(sim_c))


@pytest.mark.gpu
@pytest.mark.parametrize("op, dtype", COMBOS)
def test_gpu_reductions_equal_the_simulator(tmp_path, op, dtype):
    k, box = _reduce_kernel(tmp_path, op, dtype, grid=2)
    a, c = _values(dtype, (2 * box[0], box[1]), 1), _values(dtype, (32, box[1]), 2)
    (_, sim_c), (_, gpu_c) = _on_gpu_and_sim(k, a, c)
    assert np.array_equal(_bits(gpu_c), _bits(sim_c))


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
    (_, sim_c), (_, gpu_c) = _on_gpu_and_sim(k, a, c)
    assert np.array_equal(_bits(gpu_c), _bits(sim_c))


@pytest.mark.gpu
def test_gpu_f32_adds_of_tiny_values_equal_the_simulator(tmp_path):
    k, box = _reduce_kernel(tmp_path, "add", "float32", grid=1, coords=(0, 0))
    tiny = np.float32(2.0**-149) * np.arange(1, 33, dtype=np.float32)  # subnormals
    a = np.tile(tiny, (16, 1)).astype(np.float32)
    c = np.zeros((32, 32), dtype=np.float32)
    c[:16] = np.float32(2.0**-126) * np.linspace(-1, 1, 32, dtype=np.float32)
    (_, sim_c), (_, gpu_c) = _on_gpu_and_sim(k, a, c)
    assert np.array_equal(_bits(gpu_c), _bits(sim_c))


@pytest.mark.gpu
def test_gpu_pipeline_equals_the_simulator(tmp_path):
    a = _ints((4 * 64, 64), np.float16, 6, -500, 500)
    k, _ = pipeline_kernel(tmp_path, 4)
    (_, sim_c), (_, gpu_c) = _on_gpu_and_sim(k, a, np.zeros_like(a))
    assert np.array_equal(_bits(gpu_c), _bits(sim_c))
    assert np.array_equal(sim_c, pipeline_expected(a))


@pytest.mark.gpu
def test_gpu_grid_sum_equals_the_simulator(tmp_path):
    k, _ = _reduce_kernel(tmp_path, "add", "int32", 4, coords=(0, 0))
    a = _ints((64, 32), np.int32, 7, -(2**30), 2**30) * 2
    (_, sim_c), (_, gpu_c) = _on_gpu_and_sim(k, a, np.zeros((32, 32), dtype=np.int32))
    assert np.array_equal(gpu_c, sim_c)


COPY_KERNEL = """
@T.function
def kernel(A: T.Tensor((128, 64), "float16"), C: T.Tensor((128, 64), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
    s = T.alloc_shared((64, 64), "float16", layout=LAYOUT, align=1024)
    bars = T.alloc_shared((1,), "uint64")
    bx = T.cuda.block_idx("x")
    if T.cuda.thread_idx("x") == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 8192)
        T.cuda.tile.apply(T.ptx[LOAD], s[:, :], A[:, :], box=(64, 64), coords=(bx * 64, 0), swizzle=3, mbar=bars[0], scope="thread")
        T.cuda.mbarrier_wait(bars[0], 0)
        T.cuda.tile.apply(T.ptx[TEXT], C[:, :], s[:, :], box=(64, 64), coords=(64 - bx * 64, 0), swizzle=3, scope="thread")
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group"](0)
"""


@pytest.mark.parametrize("text", [STORE, REDUCE.format(op="add")])
def test_a_box_the_async_proxy_wrote_needs_no_fence(tmp_path, text):
    # a tensor load's bytes are the async proxy's: storing them again needs no proxy fence
    from .helpers import define
    from .tma_store_kernels import tile_layout

    k = define(
        COPY_KERNEL, tmp_path, "kernel", LOAD=LOAD, TEXT=text, LAYOUT=tile_layout(64, 64, 3, 16)
    )
    a = _ints((128, 64), np.float16, 18, -100, 100)
    c = _ints((128, 64), np.float16, 19, -100, 100)
    want = np.concatenate([a[64:], a[:64]])
    if text != STORE:
        want = (c.astype(np.float32) + want).astype(np.float16)
    _run(k, a, c)
    assert np.array_equal(c, want)
