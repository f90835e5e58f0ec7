"""The simulator's TMA tensor load (tirx/sim/tma.py): where a box lands (with and without the
128-byte swizzle, against the PTX ISA's formula written out here), zero fill outside the
tensor, the mbarrier's complete-tx and the visibility of the bytes, a two-stage pipeline, the
data pointer's alignment; and the same kernels on the GPU, bit-equal to the simulator."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tirx
from tirx.errors import SimulationError

from .helpers import define
from .tma_kernels import (
    TMA,
    box_kernel,
    expected_raw,
    pipeline_expected,
    pipeline_kernel,
)


def _lines(tmp_path):
    """(the copy's line, the reading line) of the newest kernel file in ``tmp_path``."""
    path = max(tmp_path.glob("kernel_*.py"), key=lambda p: int(p.stem.split("_")[1]))
    text = path.read_text().splitlines()
    copy = next(i for i, ln in enumerate(text, 1) if "tile.apply" in ln)
    read = next(i for i, ln in enumerate(text, 1) if "= raw[" in ln)
    return copy, read


def _matrix(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(-1000, 1000, size=shape).astype(np.float16)


@pytest.mark.parametrize("swizzle", [0, 1, 2, 3])
def test_a_64x64_box_lands_where_the_formula_says(tmp_path, swizzle):
    box = (64, 64) if swizzle in (0, 3) else (64, 16 << swizzle >> 1)
    a = _matrix((128, 128))
    k = box_kernel(tmp_path, box=box, coords=(64, 32), swizzle=swizzle, raw=True)
    out = np.zeros(box, dtype=np.float16)
    tirx.compile(k, target="sim")(a, out)
    assert np.array_equal(out, expected_raw(a, (64, 32), box, swizzle))
    if swizzle:  # the swizzle moved something: the raw bytes are not the plain box
        assert not np.array_equal(out, a[64 : 64 + box[0], 32 : 32 + box[1]])


@pytest.mark.parametrize("swizzle", [0, 3])
def test_the_tile_read_through_its_layout_is_the_box(tmp_path, swizzle):
    a = _matrix((128, 128), 1)
    out = np.zeros((64, 64), dtype=np.float16)
    tirx.compile(box_kernel(tmp_path, swizzle=swizzle), target="sim")(a, out)
    assert np.array_equal(out, a[64:128, 0:64])


def test_a_box_past_the_tensor_edge_is_zero_filled(tmp_path):
    a = _matrix((100, 72), 2)
    k = box_kernel(tmp_path, shape=(100, 72), coords=(64, 32), swizzle=3)
    out = np.full((64, 64), 7, dtype=np.float16)
    tirx.compile(k, target="sim")(a, out)
    want = np.zeros((64, 64), dtype=np.float16)
    want[:36, :40] = a[64:, 32:]
    assert np.array_equal(out, want)


def test_negative_coordinates_read_zeros_before_the_tensor(tmp_path):
    a = _matrix((128, 128), 3)
    k = box_kernel(tmp_path, coords=(-8, -16), swizzle=0, raw=True)
    out = np.zeros((64, 64), dtype=np.float16)
    tirx.compile(k, target="sim")(a, out)
    assert np.array_equal(out, expected_raw(a, (-8, -16), (64, 64), 0))
    assert not out[:8].any() and not out[:, :16].any()


def test_reading_without_waiting_is_a_fault_for_the_issuing_thread_too(tmp_path):
    # the phase completes at issue (arrive.expect_tx first), but no thread has waited for it:
    # only the wait tells a thread that the bytes are there
    exe = tirx.compile(box_kernel(tmp_path, wait=""), target="sim")
    a, out = _matrix((128, 128)), np.zeros((64, 64), dtype=np.float16)
    with pytest.raises(SimulationError) as e:
        exe(a, out)
    msg = str(e.value)
    copy, read = _lines(tmp_path)
    assert (
        f"thread 0 (warp 0, lane 0) reads 's'[0, 0] (byte 0, shared address 0) at line {read}"
        in msg
    )
    assert f"the destination of the tensor copy {TMA} at line {copy} issued by thread 0" in msg
    assert "mbarrier_wait" in msg  # the hint: wait on the copy's barrier
    assert "[block (0, 0, 0), warp 0, lane 0]" in msg


def test_reading_a_copy_in_flight_names_the_copy(tmp_path):
    k = box_kernel(tmp_path, wait="", nbytes=8192 + 16)  # more bytes expected: never completes
    a, out = _matrix((128, 128)), np.zeros((64, 64), dtype=np.float16)
    with pytest.raises(SimulationError) as e:
        tirx.compile(k, target="sim")(a, out)
    msg = str(e.value)
    assert "tensor copy cp.async.bulk.tensor.2d" in msg and "has not completed" in msg
    copy, read = _lines(tmp_path)
    assert f"at line {read}, the destination of the tensor copy" in msg
    assert f"at line {copy} issued by thread 0" in msg
    assert "mbarrier_wait" in msg  # the hint: wait on the copy's barrier


def test_waiting_makes_the_bytes_every_waiters(tmp_path):
    a, out = _matrix((128, 128), 4), np.zeros((64, 64), dtype=np.float16)
    tirx.compile(box_kernel(tmp_path), target="sim")(a, out)  # the twin: no fault
    assert np.array_equal(out, a[64:, :64])


def test_a_two_stage_pipeline_is_correct_and_race_free(tmp_path):
    K = 6
    a = (np.arange(K * 32 * 64) % 23).reshape(K * 32, 64).astype(np.float16)
    out = np.zeros((128, 16), dtype=np.float32)
    exe = tirx.compile(pipeline_kernel(tmp_path, K), target="sim")
    exe(a, out)
    assert np.array_equal(out, pipeline_expected(a, K))


def test_refilling_a_stage_without_a_barrier_is_a_race(tmp_path):
    K = 4
    a = (np.arange(K * 32 * 64) % 23).reshape(K * 32, 64).astype(np.float16)
    out = np.zeros((128, 16), dtype=np.float32)
    exe = tirx.compile(pipeline_kernel(tmp_path, K, sync="pass"), target="sim")
    with pytest.raises(SimulationError, match="race"):
        exe(a, out)


def test_the_trace_shows_the_copy_and_the_complete_tx(tmp_path):
    from tirx import sim

    exe = tirx.compile(box_kernel(tmp_path), target="sim")
    a, out = _matrix((128, 128)), np.zeros((64, 64), dtype=np.float16)
    result = sim.run(exe.lowered, [a, out], trace=True)
    (copy,) = result.copies
    assert copy.event == "copy" and copy.instruction.startswith("cp.async.bulk.tensor.2d")
    assert copy.nbytes[0] == 8192 and copy.active.sum() == 1
    events = [b.event.value for b in result.barriers]
    assert events[:4] == ["init", "expect_tx", "arrive", "complete_tx"]
    assert "phase complete" in events


def test_a_misaligned_data_pointer_is_refused(tmp_path):
    exe = tirx.compile(box_kernel(tmp_path), target="sim")
    base = np.zeros(128 * 128 + 8, dtype=np.float16)
    a = base[1 : 1 + 128 * 128].reshape(128, 128)
    with pytest.raises(SimulationError, match="multiple of 16"):
        exe(a, np.zeros((64, 64), dtype=np.float16))


# ---------------------------------------------------------------------------------- GPU


def _on_gpu_and_sim(kernel, a, out_shape, out_dtype):
    import torch

    sim_out = np.zeros(out_shape, dtype=out_dtype)
    tirx.compile(kernel, target="sim")(a, sim_out)
    exe = tirx.compile(kernel, target="cuda")
    ga = torch.from_numpy(a).cuda()
    gout = torch.zeros(out_shape, dtype=torch.from_numpy(sim_out).dtype, device="cuda")
    exe(ga, gout)
    torch.cuda.synchronize()
    return sim_out, gout.cpu().numpy()


@pytest.mark.gpu
@pytest.mark.parametrize("swizzle", [0, 1, 2, 3])
def test_gpu_box_placement_equals_the_simulator(tmp_path, swizzle):
    box = (64, 64) if swizzle in (0, 3) else (64, 16 << swizzle >> 1)
    k = box_kernel(tmp_path, box=box, coords=(64, 32), swizzle=swizzle, raw=True)
    want, got = _on_gpu_and_sim(k, _matrix((128, 128)), box, np.float16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.gpu
def test_gpu_zero_fill_equals_the_simulator(tmp_path):
    k = box_kernel(tmp_path, shape=(100, 72), coords=(64, 32), swizzle=3)
    want, got = _on_gpu_and_sim(k, _matrix((100, 72), 2), (64, 64), np.float16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.gpu
def test_gpu_two_stage_pipeline_equals_the_simulator(tmp_path):
    K = 6
    a = (np.arange(K * 32 * 64) % 23).reshape(K * 32, 64).astype(np.float16)
    want, got = _on_gpu_and_sim(pipeline_kernel(tmp_path, K), a, (128, 16), np.float32)
    assert np.array_equal(got, want)
    assert np.array_equal(want, pipeline_expected(a, K))


THREE_D = """
@T.function
def kernel(A: T.Tensor((4, 40, 64), "float16"), Out: T.Tensor((2, 16, 64), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    s = T.alloc_shared((2, 16, 64), "float16", layout=LAYOUT, align=1024)
    bars = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 4096)
        T.cuda.tile.apply(T.ptx[TEXT], s[:, :, :], A[:, :, :], box=(2, 16, 64), coords=(1, 30, 0), swizzle=3, mbar=bars[0], scope="thread")
    T.cuda.mbarrier_wait(bars[0], 0)
    for i in range(64):
        e = tid * 64 + i
        Out[e // 1024, (e // 64) % 16, e % 64] = s[e // 1024, (e // 64) % 16, e % 64]
"""


@pytest.mark.parametrize("dst", ["shared::cta", "shared::cluster"])
def test_a_3d_box_with_a_ragged_middle_axis(tmp_path, dst):
    from tirx.layout import ComposeLayout, S, TileLayout

    from .helpers import define

    text = f"cp.async.bulk.tensor.3d.{dst}.global.mbarrier::complete_tx::bytes"  # .tile left out
    layout = ComposeLayout(3, 3, 3, TileLayout(S[(2, 16, 64)]))
    k = define(THREE_D, tmp_path, "kernel", LAYOUT=layout, TEXT=text)
    a = _matrix((4, 40, 64), 5)
    out = np.full((2, 16, 64), 3, dtype=np.float16)
    tirx.compile(k, target="sim")(a, out)
    want = np.zeros((2, 16, 64), dtype=np.float16)
    want[:, :10] = a[1:3, 30:40]
    assert np.array_equal(out, want)
    exe = tirx.compile(k, target="cuda -arch=sm_90")
    assert f"{text} [%0], [%1, {{%2, %3, %4}}], [%5];" in exe.source
    assert '"r"(0), "r"(30), "r"(1)' in exe.source  # innermost first


REPEATS = """
@T.function
def kernel(A: T.Tensor((64, 256), "float16"), Out: T.Tensor((2, 64, 64), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    s = T.alloc_shared((2, 64, 64), "float16", layout=LAYOUT, align=1024)
    bars = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 16384)
        T.cuda.tile.apply(T.ptx[TEXT], s[:, :, :], A[:, :], box=(64, 64), coords=(0, 64), coord_steps=((0, 64),), swizzle=3, mbar=bars[0], scope="thread")
    T.cuda.mbarrier_wait(bars[0], 0)
    for i in range(64):
        e = tid * 64 + i
        Out[e // 4096, (e // 64) % 64, e % 64] = s[e // 4096, (e // 64) % 64, e % 64]
"""


def test_coord_steps_issue_one_copy_per_repeat(tmp_path):
    from tirx.layout import ComposeLayout, S, TileLayout

    from .helpers import define
    from .tma_kernels import TMA

    k = define(
        REPEATS, tmp_path, "kernel", TEXT=TMA,
        LAYOUT=ComposeLayout(3, 3, 3, TileLayout(S[(2, 64, 64)])),
    )  # fmt: skip
    a = _matrix((64, 256), 6)
    out = np.zeros((2, 64, 64), dtype=np.float16)
    tirx.compile(k, target="sim")(a, out)
    assert np.array_equal(out[0], a[:, 64:128]) and np.array_equal(out[1], a[:, 128:192])
    src = tirx.compile(k, target="cuda -arch=sm_90").source
    assert src.count("cp.async.bulk.tensor.2d") == 2 and '"r"(128), "r"(0)' in src


@pytest.mark.gpu
def test_gpu_repeated_calls_reuse_the_map_and_new_tensors_get_theirs(tmp_path):
    import torch

    k = box_kernel(tmp_path, coords=(64, 0), swizzle=3)
    exe = tirx.compile(k, target="cuda")
    out = torch.zeros((64, 64), dtype=torch.float16, device="cuda")
    for seed in (7, 8):  # per tensor: a miss (its map encoded), then memo hits (C where built)
        a = torch.from_numpy(_matrix((128, 128), seed)).cuda()
        for _ in range(3):
            out.zero_()
            exe(a, out)
            torch.cuda.synchronize()
            assert torch.equal(out, a[64:, :64])


WGMMA_AFTER_TMA = """
from tirx.layout import wid_in_wg

SW = ComposeLayout(3, 3, 3, TileLayout(S[64, 64]))
ACC = TileLayout(S[(4, 2, 8, 8, 4, 2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)])
WG = "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"

@T.function
def kernel(A: T.Tensor((64, 64), "bfloat16"), B: T.Tensor((64, 64), "bfloat16"),
           Out: T.Tensor((64, 64), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    lane = T.cuda.lane_id()
    w = T.cuda.warp_id()
    a_s = T.alloc_shared((64, 64), "bfloat16", layout=SW, align=1024, scope="shared.dyn")
    b_s = T.alloc_shared((64, 64), "bfloat16", layout=SW, align=1024, scope="shared.dyn")
    bar = T.alloc_shared((1,), "uint64")
    acc = T.alloc_local((32,), "float32")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bar[0], 1)
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bar[0], {tx})
        T.cuda.tile.apply(T.ptx[TMA], a_s[:, :], A[:, :], box=(64, 64), coords=(0, 0),
                          swizzle=3, mbar=bar[0], scope="thread")
        T.cuda.tile.apply(T.ptx[TMA], b_s[:, :], B[:, :], box=(64, 64), coords=(0, 0),
                          swizzle=3, mbar=bar[0], scope="thread")
    T.cuda.mbarrier_wait(bar[0], 0)
    T.ptx["wgmma.fence.sync.aligned"]()
    for kk in T.unroll(4):
        T.cuda.tile.apply(T.ptx[WG], acc.view(64, 64, layout=ACC), a_s[:, kk * 16 : kk * 16 + 16],
                          b_s[:, kk * 16 : kk * 16 + 16], scope="warpgroup", scale_d=kk)
    T.ptx["wgmma.commit_group.sync.aligned"]()
    T.ptx["wgmma.wait_group.sync.aligned"](0)
    for i in T.unroll(32):
        Out[16 * w + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2] = acc[i]
"""


@pytest.mark.parametrize("tx", ["2 * 64 * 64 * 2", "64 * 64 * 2"], ids=["both-boxes", "one-box"])
def test_a_wgmma_reading_a_box_that_has_not_landed_names_the_copy(tmp_path, tx):
    """expect_tx armed with A's bytes only: the phase completes when A lands, and the wgmma
    reads B before it does (a race with the copy engine on a GPU). The fault names B's copy
    and the mbarrier's expect_tx, not "nothing wrote"."""
    fn = define(WGMMA_AFTER_TMA.format(tx=tx), tmp_path, "kernel", TMA=TMA)
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-4, 4, size=(64, 64)).astype(np.float32) for _ in range(2))
    at, bt = (torch.from_numpy(x).to(torch.bfloat16) for x in (a, b))
    out = torch.zeros(64, 64)
    exe = tirx.compile(fn, "sim")
    if tx.startswith("2"):
        exe(at, bt, out)
        np.testing.assert_array_equal(out.numpy(), a @ b.T)
        return
    with pytest.raises(SimulationError, match="destination of the tensor copy") as e:
        exe(at, bt, out)
    assert "'b_s'" in str(e.value) and "expect_tx" in e.value.hint
    assert "nothing wrote" not in str(e.value)


# thread 0 (warp 0) produces one stage twice; warp 1 consumes it and frees it on `empty`
WRONG_TX = """
@T.function
def kernel(A: T.Tensor((64, 64), "float16"), Out: T.Tensor((2,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    s = T.alloc_shared((32, 64), "float16", layout=LAYOUT, align=1024)
    full = T.alloc_shared((1,), "uint64")
    empty = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](full[0], 1)
        T.ptx["mbarrier.init.shared::cta.b64"](empty[0], 1)
    T.cuda.cta_sync()
    if tid < 32:
        if tid == 0:
            for k in range(2):
                if k > 0:
                    T.cuda.mbarrier_wait(empty[0], 0)
                T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](full[0], {nbytes})
                T.cuda.tile.apply(T.ptx[TEXT], s[:, :], A[:, :], box=(32, 64), coords=(k * 32, 0), swizzle=3, mbar=full[0], scope="thread")
    else:
        for k in range(2):
            T.cuda.mbarrier_wait(full[0], k % 2)
            if tid == 32:
                Out[k] = T.float32(s[0, 0])
                T.ptx["mbarrier.arrive.shared::cta.b64"](empty[0])
"""


@pytest.mark.parametrize("nbytes, verdict", [(4094, "more"), (4098, "fewer")])
def test_an_expect_tx_count_that_is_off_leads_the_deadlock_report(tmp_path, nbytes, verdict):
    """The producer's empty wait and the consumer's full wait both block; the cause is full's
    tx-count, armed with the wrong byte count: that barrier leads, naming the expect_tx."""
    from tirx.layout import ComposeLayout, S, TileLayout

    layout = ComposeLayout(3, 3, 3, TileLayout(S[(32, 64)]))
    a = _matrix((64, 64), 3)
    good = define(WRONG_TX.format(nbytes=4096), tmp_path, "kernel", LAYOUT=layout, TEXT=TMA)
    out = np.zeros(2, np.float32)
    tirx.compile(good, target="sim")(a, out)
    assert list(out) == [float(a[0, 0]), float(a[32, 0])]
    k = define(WRONG_TX.format(nbytes=nbytes), tmp_path, "kernel", LAYOUT=layout, TEXT=TMA)
    with pytest.raises(SimulationError) as e:
        tirx.compile(k, target="sim")(a, out)
    msg, hint = e.value.message, e.value.hint
    lead = msg.split("no arrive can come: ", 1)[1]
    assert lead.startswith("mbarrier 'full'"), msg
    assert f"it was armed for {nbytes} bytes by the expect_tx at line " in msg
    assert "the copies that complete on it delivered 4096" in msg
    assert f"{abs(nbytes - 4096)} bytes {verdict} than the expect_tx count" in hint, hint
    assert "sum of the bytes of the boxes" in hint and f"(4096 here, not {nbytes})" in hint
