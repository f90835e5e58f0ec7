"""The simulator's multicast tensor load (tirx/families/tma/sim_multicast.py): one copy lands at
the same offset in the shared memory of every block of its ctaMask and completes its bytes on
each block's barrier at the same offset; a 2-block (and a 4-block) cluster sums the tile exactly;
a wrong mask, and a copy before the peer's barrier is initialized, are faults with their twins."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx.errors import SimulationError

from .cluster_kernels import multicast_expected, multicast_kernel, tile


def _run(kernel, C):
    a = tile()
    out = np.full((C, 128), np.nan, dtype=np.float32)
    tirx.compile(kernel, target="sim")(a, out)
    return a, out


@pytest.mark.parametrize("C, mask", [(2, "0b11"), (4, "0xF"), (2, "(1 << 2) - 1")])
def test_every_block_of_the_mask_sums_the_tile_exactly(tmp_path, C, mask):
    a, out = _run(multicast_kernel(tmp_path, C=C, mask=mask), C)
    assert np.array_equal(out, multicast_expected(a, C))


def test_a_mask_without_a_waiting_block_deadlocks_and_says_so(tmp_path):
    with pytest.raises(SimulationError) as e:
        _run(multicast_kernel(tmp_path, mask="0b01"), 2)
    msg = str(e.value)
    assert "deadlock across the cluster" in msg
    assert "block (1, 0, 0): mbarrier 'bars'[0] (byte 0" in msg and "tx-count 8192" in msg
    assert "the mask must name each block that waits for the box" in msg


def test_a_mask_bit_past_the_cluster_is_a_fault(tmp_path):
    with pytest.raises(SimulationError) as e:
        _run(multicast_kernel(tmp_path, mask="0b101"), 2)
    msg = str(e.value)
    assert "ctaMask 0x0005 sets bit 2 of a cluster of 2 block(s)" in msg
    assert "cta_mask=0x3 for every block" in msg


def test_a_copy_before_the_peer_initialized_its_barrier_is_a_fault(tmp_path):
    # without the cluster barrier after the inits, rank 0 may issue the copy before rank 1 has
    # initialized the barrier the copy completes its bytes on
    with pytest.raises(SimulationError) as e:
        _run(multicast_kernel(tmp_path, init_sync="pass"), 2)
    msg = str(e.value)
    assert (
        "the mbarrier 'bars'[0] (byte 0, shared address 8192) of block (1, 0, 0) is used before"
        in msg
    )
    assert "then the cluster synchronizes (T.cuda.cluster_sync())" in msg


def test_reading_the_peer_tile_before_its_wait_names_the_multicast(tmp_path):
    from .cluster_kernels import MC, MULTICAST, SUM_TAIL, SYNC
    from .helpers import define

    # rank 1 reads its tile after a cluster barrier, but only a wait on its own mbarrier says
    # that the copy has landed there
    source = MULTICAST.format(C=2, mask="0b11", init_sync=SYNC, tail=SUM_TAIL).replace(
        "    T.cuda.mbarrier_wait(bars[0], 0)\n",
        "    if r == 0:\n        T.cuda.mbarrier_wait(bars[0], 0)\n    T.cuda.cluster_sync()\n",
    )
    k = define(source, tmp_path, "kernel", MC=MC)
    with pytest.raises(SimulationError) as e:
        _run(k, 2)
    msg = str(e.value)
    assert "reads 's'[0, 0] (byte 0, shared address 0)" in msg and "[block (1, 0, 0)" in msg
    assert "(multicast by block (0, 0, 0))" in msg
    assert "whose completion this thread has not observed" in msg
    assert "wait on the copy's mbarrier in the receiving block first" in msg


def test_a_traced_run_records_every_blocks_barrier_events_in_one_order(tmp_path):
    from tirx import sim

    fn = tirx.compile(multicast_kernel(tmp_path), target="sim").lowered
    out = np.zeros((2, 128), np.float32)
    result = sim.run(fn, [tile(), out], trace=True, profile=True)
    blocks = {t.block for t in result.barriers}
    assert blocks == {(0, 0, 0), (1, 0, 0)} and len(result.copies) == 1
    seqs = [t.seq for t in result.barriers] + [c.seq for c in result.copies]
    assert len(seqs) == len(set(seqs))  # one clock for the cluster's blocks
    assert [t.seq for t in result.barriers] == sorted(t.seq for t in result.barriers)
    assert result.profile is not None and result.blocks == 2


HALVES = """
@T.function
def kernel(A: T.Tensor((64, 64), "float16"), Out: T.Tensor((2, 128), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128, cluster=2))
    s = T.alloc_shared((64, 64), "float16", align=128)
    bars = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    r = T.cuda.mov_sreg(32, "cluster_ctarank")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
    T.cuda.cluster_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], {tx})
        T.cuda.tile.apply(T.ptx[MC], s[r * 32 : r * 32 + 32, :], A[:, :], box=(32, 64), coords=(r * 32, 0), mbar=bars[0], cta_mask=0b11, scope="thread")
{tail}"""


def test_an_expect_tx_that_misses_the_peers_multicast_half_names_the_phase(tmp_path):
    """Each block multicasts its half of the tile into both; a block that arms its barrier for
    its own half only passes its wait before the peer's half is issued: the read of that half
    finds nothing written, and the hint names the wait, the bytes and the expect_tx."""
    from .cluster_kernels import MC, SUM_TAIL, define, kernel_line

    a = tile()
    out = np.zeros((2, 128), np.float32)
    tirx.compile(define(HALVES.format(tx=8192, tail=SUM_TAIL), tmp_path, "kernel", MC=MC), "sim")(
        a, out
    )
    assert np.array_equal(out, multicast_expected(a, 2))  # the twin: both halves counted
    k = define(HALVES.format(tx=4096, tail=SUM_TAIL), tmp_path, "kernel", MC=MC)
    with pytest.raises(SimulationError, match="nothing wrote in this block") as e:
        tirx.compile(k, "sim")(a, np.zeros((2, 128), np.float32))
    wait, arm = kernel_line(tmp_path, "mbarrier_wait"), kernel_line(tmp_path, "expect_tx")
    hint = e.value.hint
    assert (
        f"this thread's mbarrier wait at line {wait} passed phase 0 of mbarrier 'bars'[0]" in hint
    )
    assert f"completed when 4096 bytes had arrived (armed by the expect_tx at line {arm})" in hint
    assert "a multicast counts in every receiving block's" in hint


RING = """
@T.function
def ring(A: T.Tensor((2 * NT * 64, 64), "float16"), Out: T.Tensor((4, NT, 128), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=256, cluster=2))
    s = T.alloc_shared((2, 64, 64), "float16", align=128)
    full = T.alloc_shared((2,), "uint64")
    empty = T.alloc_shared((2,), "uint64")
    pe = T.alloc_local((1,), "uint32")
    tid = T.cuda.thread_idx("x")
    bx = T.cuda.block_idx("x")
    cid = T.cuda.cluster_id("x")
    r = T.cuda.mov_sreg(32, "cluster_ctarank")
    if tid == 0:
        for i in range(2):
            T.ptx["mbarrier.init.shared::cta.b64"](full[i], 1)
            T.ptx["mbarrier.init.shared::cta.b64"](empty[i], {empty_count})
    T.cuda.cluster_sync()
    if tid == 0:
        for i in range(NT):  # each block's producer multicasts its half of tile i into both
            T.cuda.mbarrier_wait_acquire_cluster(empty[i % 2], (i // 2) % 2 ^ 1)
            T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](full[i % 2], 8192)
            T.cuda.tile.apply(T.ptx[MC], s[i % 2, r * 32 : r * 32 + 32, :], A[:, :], box=(32, 64), coords=(cid * NT * 64 + i * 64 + r * 32, 0), mbar=full[i % 2], cta_mask=0b11, scope="thread")
    elif tid >= 128:
        t = tid - 128
        for i in range(NT):
            T.cuda.mbarrier_wait(full[i % 2], (i // 2) % 2)
            acc = T.float32(0)
            for j in range(32):
                acc = acc + T.float32(s[i % 2, (t * 32 + j) // 64, (t * 32 + j) % 64])
            Out[bx, i, t] = acc
            T.ptx["mbarrier.arrive.shared::cta.b64"](empty[i % 2])
{release_peer}
    T.cuda.cluster_sync()
"""
RELEASE_PEER = """            T.ptx["mapa.shared::cluster.u32"](pe[0], empty[i % 2], r ^ 1)
            T.ptx["mbarrier.arrive.release.cluster.shared::cluster.b64"](pe[0])"""


def test_a_multicast_refill_before_the_peer_released_the_stage_says_who_must_wait(tmp_path):
    """A ring of two stages whose two producers each multicast half a tile into both blocks:
    a stage is free once the consumers of both blocks released it. Consumers that release only
    their own block's empty barrier let the peer's producer refill a stage still being read;
    the reader waited for the stage's phase, and the hint names that and the release it lacks."""
    from .cluster_kernels import MC, define

    nt = 3
    a = np.random.default_rng(0).standard_normal((2 * nt * 64, 64)).astype(np.float16)
    want = np.stack([
        np.stack([a[b // 2 * nt * 64 + i * 64 :][:64].astype(np.float32).reshape(128, 32).sum(1)
                  for i in range(nt)])
        for b in range(4)
    ])  # fmt: skip
    good = define(RING.format(empty_count=256, release_peer=RELEASE_PEER), tmp_path, "ring",
                  MC=MC, NT=nt)  # fmt: skip
    out = np.zeros((4, nt, 128), np.float32)
    tirx.compile(good, "sim")(a, out)
    assert np.allclose(out, want, atol=1e-2)
    bad = define(RING.format(empty_count=128, release_peer=""), tmp_path, "ring", MC=MC, NT=nt)
    with pytest.raises(SimulationError, match="multicast by block") as e:
        tirx.compile(bad, "sim")(a, np.zeros((4, nt, 128), np.float32))
    assert "this thread waited at line" in e.value.hint
    assert "the issuing block's producer must wait, before refilling" in e.value.hint
    assert "mbarrier.arrive.release.cluster.shared::cluster" in e.value.hint


HANDOFF = """
from tirx.examples.gemm_wgmma import accumulator_layout

LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
WG = "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"
SW = ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))
ACC = accumulator_layout(64)

@T.function
def handoff(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
            B2: T.Tensor((64, 64), "float16"), Out: T.Tensor((64, 64), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128, cluster=2))
    a_s = T.alloc_shared((64, 64), "float16", layout=SW, align=1024, scope="shared.dyn")
    b_s = T.alloc_shared((64, 64), "float16", layout=SW, align=1024, scope="shared.dyn")
    full = T.alloc_shared((1,), "uint64")
    empty = T.alloc_shared((1,), "uint64")
    peer = T.alloc_local((1,), "uint32")
    acc = T.alloc_local((32,), "float32")
    tid = T.cuda.thread_idx("x")
    lane = T.cuda.lane_id()
    w = tid // 32
    r = T.cuda.mov_sreg(32, "cluster_ctarank")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](full[0], 1)
        T.ptx["mbarrier.init.shared::cta.b64"](empty[0], 4)
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cluster_sync()
    if tid == 0 and r == 0:  # block 0's producer fills block 1's b_s
        T.cuda.tile.apply(T.ptx[MC], b_s[:, :], B[:, :], box=(64, 64), coords=(0, 0), swizzle=3,
                          mbar=full[0], cta_mask=0b10, scope="thread")
    if r == 1:
        if tid == 0:
            T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](full[0], 2 * 64 * 64 * 2)
            T.cuda.tile.apply(T.ptx[LOAD], a_s[:, :], A[:, :], box=(64, 64), coords=(0, 0),
                              swizzle=3, mbar=full[0], scope="thread")
        T.cuda.mbarrier_wait(full[0], 0)
        T.ptx["wgmma.fence.sync.aligned"]()
        for k in T.unroll(4):
            T.cuda.tile.apply(T.ptx[WG], acc.view(64, 64, layout=ACC), a_s[:, 16 * k : 16 * k + 16],
                              b_s[:, 16 * k : 16 * k + 16], scope="warpgroup", scale_d=k)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        if lane == 0:  # this warp's tensor-core reads of b_s are done: block 0 may refill it
            T.ptx["mapa.shared::cluster.u32"](peer[0], empty[0], 0)
            T.ptx[ARRIVE](peer[0])
        for j in T.unroll(8):
            for h in T.unroll(2):
                for e in T.unroll(2):
                    Out[16 * w + lane // 4 + 8 * h, 8 * j + 2 * (lane % 4) + e] = acc[4 * j + 2 * h + e]
        if tid == 0:
            T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](full[0], 64 * 64 * 2)
        T.cuda.mbarrier_wait(full[0], 1)
    if r == 0:
        if tid == 0:
            WAIT(empty[0], 0)
            T.cuda.tile.apply(T.ptx[MC], b_s[:, :], B2[:, :], box=(64, 64), coords=(0, 0),
                              swizzle=3, mbar=full[0], cta_mask=0b10, scope="thread")
    T.cuda.cluster_sync()
"""


@pytest.mark.parametrize(
    "release, acquire, found",
    [
        (True, True, None),
        (False, True, "which releases at CTA scope (the default)"),
        (True, False, "acquires at CTA scope (the default)"),
    ],
)
def test_a_peers_refill_is_ordered_after_the_tensor_cores_reads(tmp_path, release, acquire, found):
    """Block 1's tensor core reads the b_s block 0 multicast into it; block 1's warps release
    the stage to block 0 (a remote arrive) and block 0 multicasts new bytes into it. Without
    .release.cluster on the arrive, or with a CTA-scope wait in block 0, nothing orders the
    refill after the wgmma's reads: a race naming the tensor core (it ran clean: the
    wgmma's reads were not in the cluster's record, docs/clusters.md)."""
    from tirx import T

    from .cluster_kernels import MC, define

    arrive = "mbarrier.arrive" + (".release.cluster" if release else "") + ".shared::cluster.b64"
    wait = T.cuda.mbarrier_wait_acquire_cluster if acquire else T.cuda.mbarrier_wait
    k = define(HANDOFF, tmp_path, "handoff", MC=MC, ARRIVE=arrive, WAIT=wait)
    rng = np.random.default_rng(0)
    a, b, b2 = (rng.integers(-3, 4, (64, 64)).astype(np.float16) for _ in range(3))
    out = np.full((64, 64), np.nan, np.float32)
    if found is None:
        tirx.compile(k, "sim")(a, b, b2, out)
        assert np.array_equal(out, a.astype(np.float64) @ b.astype(np.float64).T)
        return
    with pytest.raises(SimulationError, match="distributed shared-memory race") as e:
        tirx.compile(k, "sim")(a, b, b2, out)
    assert "block (1, 0, 0)'s tensor core (warpgroup 0) read at line" in e.value.message
    assert found in e.value.message, e.value.message
