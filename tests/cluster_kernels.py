"""Kernels of the thread-block cluster tests (tests/test_cluster.py, test_sim_cluster.py,
test_sim_cluster_tma.py, test_sim_cluster_relaxed.py): each is text with fields, so a test can
break one piece and keep its corrected twin beside it; and the helpers those tests share."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx.errors import SimulationError

from .helpers import define

SYNC = "T.cuda.cluster_sync()"


def rows(g: int = 4, seed: int = 0) -> np.ndarray:
    """``g`` rows of 64 int32 values, a row per block."""
    return np.random.default_rng(seed).integers(-1000, 1000, size=(g, 64)).astype(np.int32)


def tile(seed: int = 0) -> np.ndarray:
    """A 64 x 64 float16 tile of small integers: every float32 sum is exact, whatever the
    order."""
    return np.random.default_rng(seed).integers(-8, 8, size=(64, 64)).astype(np.float16)


def sim_fault(kernel, *args) -> str:
    """The message of the SimulationError that running ``kernel`` on the simulator raises."""
    with pytest.raises(SimulationError) as e:
        tirx.compile(kernel, target="sim")(*args)
    return str(e.value)


def kernel_line(tmp_path, text: str) -> int:
    """The line of the newest kernel file in ``tmp_path`` that holds ``text`` (first one)."""
    path = max(tmp_path.glob("kernel_*.py"), key=lambda p: int(p.stem.split("_")[1]))
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


# Every block writes its row of A into its shared memory, the cluster synchronizes, and every
# block reads the row of the next block of its cluster (rank r + 1 mod n) through mapa and
# ld.shared::cluster; a cluster barrier at the end keeps every block alive while its peers read.
EXCHANGE = """
@T.function
def kernel(A: T.Tensor(({G}, 64), "int32"), Out: T.Tensor(({G}, 64), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid={G}, block=64, cluster={C}))
    s = T.alloc_shared((64,), "int32")
    peer = T.alloc_local((1,), "uint32")
    v = T.alloc_local((1,), "int32")
    tid = T.cuda.thread_idx("x")
    b = T.cuda.block_idx("x")
    r = T.cuda.mov_sreg(32, "cluster_ctarank")
    n = T.cuda.mov_sreg(32, "cluster_nctarank")
    s[tid] = A[b, tid]
    {sync1}
    T.ptx["mapa.shared::cluster.u32"](peer[0], s[tid], {target})
    T.ptx["ld.shared::cluster.u32"](v[0], peer[0])
    Out[b, tid] = v[0]
    {sync2}
"""


def exchange_kernel(tmp_path, G=4, C=2, sync1=SYNC, sync2=SYNC, target="(r + 1) % n"):
    source = EXCHANGE.format(G=G, C=C, sync1=sync1, sync2=sync2, target=target)
    return define(source, tmp_path, "kernel")


def exchange_expected(a: np.ndarray, C: int) -> np.ndarray:
    out = np.empty_like(a)
    for b in range(a.shape[0]):
        base, r = b - b % C, b % C
        out[b] = a[base + (r + 1) % C]
    return out


# Every block sets its shared row to -1; after a cluster barrier (so the peer's store comes
# after that write) it stores its row of A into the next block's row with st.shared::cluster;
# then each block reads its own row: the cluster barrier {sync} between the peer's store and
# the local read is what orders them.
PUSH = """
@T.function
def kernel(A: T.Tensor(({G}, 64), "int32"), Out: T.Tensor(({G}, 64), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid={G}, block=64, cluster=2))
    s = T.alloc_shared((64,), "int32")
    peer = T.alloc_local((1,), "uint32")
    tid = T.cuda.thread_idx("x")
    b = T.cuda.block_idx("x")
    r = T.cuda.mov_sreg(32, "cluster_ctarank")
    s[tid] = -1
    T.cuda.cluster_sync()
    T.ptx["mapa.shared::cluster.u32"](peer[0], s[tid], 1 - r)
    T.ptx["st.shared::cluster.s32"](peer[0], A[b, tid])
    {sync}
    Out[b, tid] = s[tid]
    T.cuda.cluster_sync()
"""


def push_kernel(tmp_path, G=2, sync=SYNC):
    return define(PUSH.format(G=G, sync=sync), tmp_path, "kernel")


def push_expected(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, 2, a.shape[1])[:, ::-1].reshape(a.shape)


# The cluster registers of every thread's block: Out[block, k] for register k.
REGISTERS = """
@T.function
def kernel(Out: T.Tensor(({nb}, 12), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid={grid}, block=32, cluster={cluster}))
    b = T.cuda.block_idx("x") + {gx} * (T.cuda.block_idx("y") + {gy} * T.cuda.block_idx("z"))
    t = T.cuda.thread_idx("x")
    if t == 0:
        Out[b, 0] = T.cuda.cluster_cta_id("x")
        Out[b, 1] = T.cuda.cluster_cta_id("y")
        Out[b, 2] = T.cuda.cluster_cta_id("z")
        Out[b, 3] = T.cuda.cluster_id("x")
        Out[b, 4] = T.cuda.cluster_id("y")
        Out[b, 5] = T.cuda.cluster_id("z")
        Out[b, 6] = T.cuda.cluster_dim("x") * 100 + T.cuda.cluster_dim("y") * 10 + T.cuda.cluster_dim("z")
        Out[b, 7] = T.cuda.mov_sreg(32, "cluster_ctarank")
        Out[b, 8] = T.cuda.mov_sreg(32, "cluster_nctarank")
        Out[b, 9] = T.cuda.mov_sreg(32, "nclusterid.x") * 100 + T.cuda.mov_sreg(32, "nclusterid.y") * 10 + T.cuda.mov_sreg(32, "nclusterid.z")
        Out[b, 10] = T.cuda.mov_sreg(32, "ctaid.x")
        Out[b, 11] = T.cuda.mov_sreg(32, "laneid")
"""


def registers_kernel(tmp_path, grid=(4, 2, 2), cluster=(2, 2, 1)):
    gx, gy, gz = grid
    source = REGISTERS.format(
        nb=gx * gy * gz, grid=grid, cluster=cluster, gx=gx, gy=gy,
    )  # fmt: skip
    return define(source, tmp_path, "kernel")


def registers_expected(grid, cluster) -> np.ndarray:
    """The registers from the PTX ISA's definitions: a cluster is a box of the grid; its rank
    counts x fastest."""
    gx, gy, gz = grid
    cx, cy, cz = cluster
    out = np.zeros((gx * gy * gz, 12), dtype=np.int32)
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                b = x + gx * (y + gy * z)
                cid = (x % cx, y % cy, z % cz)
                out[b, 0:3] = cid
                out[b, 3:6] = (x // cx, y // cy, z // cz)
                out[b, 6] = cx * 100 + cy * 10 + cz
                out[b, 7] = cid[0] + cx * (cid[1] + cy * cid[2])
                out[b, 8] = cx * cy * cz
                out[b, 9] = (gx // cx) * 100 + (gy // cy) * 10 + gz // cz
                out[b, 10] = x
                out[b, 11] = 0
    return out


# Block 1 of each cluster stores its row of A into block 0's shared memory, then arrives on
# block 0's mbarrier ({arrive}); block 0 waits for the phase and reads the row.
REMOTE_ARRIVE = """
@T.function
def kernel(A: T.Tensor((2, 64), "int32"), Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64, cluster=2))
    s = T.alloc_shared((64,), "int32")
    bars = T.alloc_shared((1,), "uint64")
    peer = T.alloc_local((2,), "uint32")
    tid = T.cuda.thread_idx("x")
    r = T.cuda.mov_sreg(32, "cluster_ctarank")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 64)
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cluster_sync()
    if r == 1:
        T.ptx["mapa.shared::cluster.u32"](peer[0], s[tid], 0)
        T.ptx["mapa.shared::cluster.u32"](peer[1], bars[0], 0)
        T.ptx["st.shared::cluster.s32"](peer[0], A[1, tid])
        T.ptx["{arrive}"](peer[1])
    else:
        {wait}(bars[0], 0)
        Out[tid] = s[tid]
    T.cuda.cluster_sync()
"""
RELEASE_CLUSTER = "mbarrier.arrive.release.cluster.shared::cluster.b64"
ACQUIRE_CLUSTER = "T.cuda.mbarrier_wait_acquire_cluster"


def remote_arrive_kernel(tmp_path, arrive=RELEASE_CLUSTER, wait=ACQUIRE_CLUSTER):
    return define(REMOTE_ARRIVE.format(arrive=arrive, wait=wait), tmp_path, "kernel")


# A 64x64 f16 tile of A, loaded once by rank 0's thread 0 with .multicast::cluster into the
# shared memory of every block of the mask; each block arms its own barrier with the box's bytes,
# waits, and each of its 128 threads sums 32 elements of the tile into Out[rank, thread].
MC = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
MULTICAST = """
@T.function
def kernel(A: T.Tensor((64, 64), "float16"), Out: T.Tensor(({C}, 128), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid={C}, block=128, cluster={C}))
    s = T.alloc_shared((64, 64), "float16", align=128)
    bars = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    r = T.cuda.mov_sreg(32, "cluster_ctarank")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
    {init_sync}
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 8192)
    if tid == 0 and r == 0:
        T.cuda.tile.apply(T.ptx[MC], s[:, :], A[:, :], box=(64, 64), coords=(0, 0), mbar=bars[0], cta_mask={mask}, scope="thread")
{tail}"""
# After the copies: each thread sums its 32 elements of the tile once the phase completed.
SUM_TAIL = """    T.cuda.mbarrier_wait(bars[0], 0)
    acc = T.float32(0)
    for j in range(32):
        e = tid * 32 + j
        acc = acc + T.float32(s[e // 64, e % 64])
    Out[r, tid] = acc
    T.cuda.cluster_sync()
"""


def multicast_kernel(tmp_path, C=2, mask="(1 << 2) - 1", init_sync=SYNC):
    source = MULTICAST.format(C=C, mask=mask, init_sync=init_sync, tail=SUM_TAIL)
    return define(source, tmp_path, "kernel", MC=MC)


def multicast_expected(a: np.ndarray, C: int) -> np.ndarray:
    sums = a.astype(np.float32).reshape(128, 32).sum(axis=1)
    return np.tile(sums, (C, 1))
