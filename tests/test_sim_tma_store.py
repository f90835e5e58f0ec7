"""The simulator's TMA tensor store (tirx/families/tma/sim_store.py; the groups
tirx/sim/bulk_groups.py): where a stored box lands (every swizzle, the image bytes against the
PTX ISA's formula written out here, elements outside the tensor not written), a loop that
loads with TMA, computes and stores with TMA through two stages, a corrupted lowering; each
fault of the model on a kernel built to break it, with its corrected twin; and the same
kernels on the GPU, bit-equal to the simulator. The reductions' arithmetic is
tests/test_sim_tma_reduce.py's."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx.errors import ContractError, SimulationError

from .tma_store_kernels import (
    LOAD,
    REDUCE,
    STORE,
    bits,
    box_kernel,
    expected_store,
    ints,
    line,
    on_gpu_and_sim,
    pipeline_expected,
    pipeline_kernel,
    run_sim,
)

FENCE = 'T.ptx["fence.proxy.async.shared::cta"]()'


def _fails(tmp_path, pattern, **kw):
    k, src = box_kernel(tmp_path, **kw)
    a = ints((64, 64), np.float16)
    with pytest.raises(SimulationError, match=pattern) as e:
        run_sim(k, a, np.zeros((128, 128), dtype=np.float16))
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
    a = ints(box, np.float16, swizzle)
    c = np.full((128, 128), 7, dtype=np.float16)
    want = expected_store(c, a, (64, 32))
    run_sim(k, a, c)
    assert np.array_equal(c.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("swizzle", [1, 2, 3])
def test_the_engine_reads_the_swizzled_image(tmp_path, swizzle):
    # the tile's raw storage (address order) holds A; the engine reads the image the ISA says
    box = (64, 64) if swizzle == 3 else (64, 16 << swizzle >> 1)
    raw = f"raw = s.view({box[0]}, {box[1]}, layout=TileLayout(S[({box[0]}, {box[1]})]))"
    k, _ = box_kernel(tmp_path, box=box, coords=(0, 0), swizzle=swizzle, prologue=raw, target="raw")
    a = ints(box, np.float16, 10 + swizzle)
    c = np.zeros((128, 128), dtype=np.float16)
    run_sim(k, a, c)
    image = _image(a, swizzle)
    assert np.array_equal(c[: box[0], : box[1]], image)
    assert not np.array_equal(image, a)  # the swizzle moved something


@pytest.mark.parametrize("coords", [(64, 32), (100, 120)])
def test_elements_outside_the_tensor_are_not_written(tmp_path, coords):
    k, _ = box_kernel(tmp_path, shape=(100, 72), coords=coords, swizzle=3)
    a = ints((64, 64), np.float16, 3)
    c = np.full((100, 72), -5, dtype=np.float16)
    want = expected_store(c, a, coords)
    run_sim(k, a, c)
    assert np.array_equal(c, want)


@pytest.mark.parametrize("reduce", [False, True])
def test_a_box_that_starts_before_the_tensor_is_refused(tmp_path, reduce):
    """An H100 stops a tensor store whose box starts at (-8, -16) with an illegal instruction
    (docs/gpu-runs/sessions.md, 2026-12-05): compile-time coordinates are refused when the
    kernel is lowered, run-time ones stop the simulator at the statement."""
    kw = dict(shape=(100, 72), swizzle=3, text=REDUCE.format(op="add") if reduce else STORE)
    k, _ = box_kernel(tmp_path, coords=(-8, -16), **kw)
    with pytest.raises(ContractError, match="box coordinate 0 is -8, below 0"):
        tirx.compile(k, target="sim")
    k, _ = box_kernel(tmp_path, coords=("y", 0), prologue="y = T.int32(A[0, 0]) - 8", **kw)
    a = ints((64, 64), np.float16, 3)
    a[0, 0] = 0
    with pytest.raises(SimulationError, match="box coordinate 0 is -8, below 0"):
        run_sim(k, a, np.zeros((100, 72), np.float16))


def test_a_store_and_a_reduction_of_one_tile_in_one_group(tmp_path):
    red = 'T.cuda.tile.apply(T.ptx[RED], C[:, :], s[:, :], box=(64, 64), coords=(0, 64), swizzle=3, scope="thread")'
    names = dict(RED=REDUCE.format(op="add"))
    k, _ = box_kernel(tmp_path, names, coords=(64, 0), after_store=red)
    a = ints((64, 64), np.float16, 4, -100, 100)
    c = ints((128, 128), np.float16, 5, -100, 100)
    want = expected_store(c, a, (64, 0))
    want = expected_store(want, a, (0, 64), "add", "float16")
    run_sim(k, a, c)
    assert np.array_equal(c, want)


# -------------------------------------------------------------------------- the pipeline


def test_load_compute_store_through_two_stages_is_exact(tmp_path):
    K = 4
    a = ints((K * 64, 64), np.float16, 6, -500, 500)
    c = np.zeros_like(a)
    k, _ = pipeline_kernel(tmp_path, K)
    run_sim(k, a, c)
    assert np.array_equal(c, pipeline_expected(a))


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

    a, c = ints((64, 64), np.float16, 17), np.zeros((128, 128), dtype=np.float16)
    want = expected_store(c, a, (64, 0))
    good = c.copy()
    sim.run(lowered, [a, good])
    assert np.array_equal(good, want)
    sim.run(dataclasses.replace(lowered, body=walk(lowered.body)), [a, c])
    assert not np.array_equal(c, want)


# ---------------------------------------------------------------------------- the faults


def test_a_missing_fence(tmp_path):
    err, src = _fails(tmp_path, "the copy engine may read stale bytes", fence="pass")
    assert (
        "through the generic proxy with no fence.proxy.async of shared memory after it"
        in err.message
    )
    assert f"at line {line(src, 'fill')}" in err.message
    assert f"{STORE} at line {line(src, 'store')}" in err.message
    assert "fence.proxy.async.shared::cta" in err.hint and "cta_sync" in err.hint


def test_a_global_proxy_fence_is_named_as_the_one_that_orders_global_memory_only(tmp_path):
    err, src = _fails(
        tmp_path, "the copy engine may read stale bytes",
        fence='T.ptx["fence.proxy.async.global"]()',
    )  # fmt: skip
    fence = line(src, "fence")
    assert (
        f"(its fence.proxy.async.global at line {fence} orders global memory only)" in err.message
    )
    assert "fence.proxy.async.shared::cta" in err.hint


def test_a_fence_by_some_of_the_writers_only(tmp_path):
    fence = f"if tid < 64:\n        {FENCE}"
    _fails(tmp_path, "the copy engine may read stale bytes", fence=fence)


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
    a, c = ints((64, 64), np.float16, 8), np.zeros((128, 128), dtype=np.float16)
    run_sim(k, a, c)
    assert np.array_equal(c[64:, :64], a)  # the store took the bytes before the reuse


def test_a_missing_commit(tmp_path):
    err, src = _fails(tmp_path, "never committed", commit="pass")
    assert f"the block exits while the {STORE} at line {line(src, 'store')}" in err.message
    _fails(tmp_path, "not known to be done", commit="pass", after_read="s[0, 0] = T.float16(1)")


def test_missing_waits(tmp_path):
    err, src = _fails(tmp_path, "the block exits while", wait_read="pass", wait_full="pass")
    assert "commit_group" in err.hint and "wait_group.read" in err.hint
    k, _ = box_kernel(tmp_path, wait_read="pass")  # the full wait also covers the reads
    a, c = ints((64, 64), np.float16, 9), np.zeros((128, 128), dtype=np.float16)
    run_sim(k, a, c)
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
    a, c = ints((64, 64), np.float16, 11), np.zeros((128, 128), dtype=np.float16)
    run_sim(k, a, c)
    assert c[0, 0] == a[6, 5]


AGAIN = (  # a second copy of the tile, overlapping the first one's destination
    'T.cuda.tile.apply(T.ptx[TEXT], C[:, :], s[:, :], box=(64, 64), coords=(96, 32), swizzle=3, scope="thread")'
)


def test_a_second_store_onto_pending_bytes(tmp_path):
    _fails(tmp_path, "is still writing", after_store=AGAIN)


def test_two_pending_reductions_may_overlap(tmp_path):
    k, _ = box_kernel(tmp_path, text=REDUCE.format(op="add"), coords=(64, 0), after_store=AGAIN)
    a = ints((64, 64), np.float16, 12, -50, 50)
    c = ints((128, 128), np.float16, 13, -50, 50)
    want = expected_store(c, a, (64, 0), "add", "float16")
    want = expected_store(want, a, (96, 32), "add", "float16")
    run_sim(k, a, c)
    assert np.array_equal(c, want)


def test_a_tensor_load_of_bytes_a_store_has_not_written(tmp_path):
    load = (
        'T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 8192)\n        '
        "T.cuda.tile.apply(T.ptx[LOAD], s2[:, :], C[:, :], box=(64, 64), coords=(64, 0), "
        'swizzle=3, mbar=bars[0], scope="thread")'
    )
    names = dict(LOAD=LOAD)
    k, src = box_kernel(tmp_path, names, after_read=load)
    a, c = ints((64, 64), np.float16, 14), np.zeros((128, 128), dtype=np.float16)
    with pytest.raises(SimulationError, match="tensor load read of global 'C'") as e:
        run_sim(k, a, c)
    assert f"the destination of the {STORE} at line {line(src, 'store')}" in e.value.message
    twin = load + "\n        T.cuda.mbarrier_wait(bars[0], 0)"
    k, _ = box_kernel(tmp_path, names, after_full=twin)
    run_sim(k, a, c)


@pytest.mark.parametrize("text", [STORE, REDUCE.format(op="add")])
def test_a_misaligned_data_pointer_is_refused(tmp_path, text):
    k, _ = box_kernel(tmp_path, text=text)
    base = np.zeros(128 * 128 + 8, dtype=np.float16)
    with pytest.raises(SimulationError, match="multiple of 16"):
        run_sim(k, ints((64, 64), np.float16), base[1 : 1 + 128 * 128].reshape(128, 128))


def test_pipeline_faults_and_twins(tmp_path):
    a = ints((4 * 64, 64), np.float16, 15, -500, 500)

    def fails(pattern, **changes):
        k, src = pipeline_kernel(tmp_path, 4, **changes)
        with pytest.raises(SimulationError, match=pattern) as e:
            run_sim(k, a, np.zeros_like(a))
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
    run_sim(k, a, c)
    assert np.array_equal(c, pipeline_expected(a))


def test_pipeline_with_the_fence_after_the_barrier(tmp_path):
    a = ints((4 * 64, 64), np.float16, 16)
    k, _ = pipeline_kernel(tmp_path, 4, fence="pass", late_fence=FENCE)
    with pytest.raises(SimulationError, match="stale"):
        run_sim(k, a, np.zeros_like(a))


def test_the_trace_shows_the_store(tmp_path):
    from tirx import sim

    k, _ = box_kernel(tmp_path)
    a, c = ints((64, 64), np.float16), np.zeros((128, 128), dtype=np.float16)
    result = sim.run(tirx.compile(k, target="sim").lowered, [a, c], trace=True)
    events = [(t.event, t.instruction) for t in result.copies]
    assert ("copy", STORE) in events
    (copy,) = [t for t in result.copies if t.instruction == STORE]
    assert copy.nbytes[0] == 8192 and copy.active.sum() == 1
    assert [e for e, _ in events[-3:]] == ["commit_group", "wait_group", "wait_group"]


# ---------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("swizzle", [0, 1, 2, 3])
def test_gpu_stored_boxes_equal_the_simulator(tmp_path, swizzle):
    box = (64, 64) if swizzle in (0, 3) else (64, 16 << swizzle >> 1)
    k, _ = box_kernel(tmp_path, box=box, coords=(64, 32), swizzle=swizzle)
    a, c = ints(box, np.float16, swizzle), np.full((128, 128), 7, dtype=np.float16)
    (_, sim_c), (_, gpu_c) = on_gpu_and_sim(k, a, c)
    assert np.array_equal(bits(gpu_c), bits(sim_c))
    assert np.array_equal(sim_c, expected_store(c, a, (64, 32)))


@pytest.mark.gpu
@pytest.mark.parametrize("coords", [(64, 32)])  # (-8, -16): an illegal instruction, refused
def test_gpu_leaves_elements_outside_the_tensor_alone(tmp_path, coords):
    k, _ = box_kernel(tmp_path, shape=(100, 72), coords=coords, swizzle=3)
    a, c = ints((64, 64), np.float16, 3), np.full((100, 72), -5, dtype=np.float16)
    (_, sim_c), (_, gpu_c) = on_gpu_and_sim(k, a, c)
    assert np.array_equal(bits(gpu_c), bits(sim_c))


@pytest.mark.gpu
def test_gpu_pipeline_equals_the_simulator(tmp_path):
    a = ints((4 * 64, 64), np.float16, 6, -500, 500)
    k, _ = pipeline_kernel(tmp_path, 4)
    (_, sim_c), (_, gpu_c) = on_gpu_and_sim(k, a, np.zeros_like(a))
    assert np.array_equal(bits(gpu_c), bits(sim_c))
    assert np.array_equal(sim_c, pipeline_expected(a))


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
    a = ints((128, 64), np.float16, 18, -100, 100)
    c = ints((128, 64), np.float16, 19, -100, 100)
    want = np.concatenate([a[64:], a[:64]])
    if text != STORE:
        want = (c.astype(np.float32) + want).astype(np.float16)
    run_sim(k, a, c)
    assert np.array_equal(c, want)
