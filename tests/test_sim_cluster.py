"""The simulator's thread-block clusters (tirx/sim/cluster.py, cluster_run.py, distributed.py,
tirx/families/cluster/sim.py): the blocks of a cluster run together, read and write each
other's shared memory, and meet at the cluster barrier; each rule of order is a kernel built to
break it beside its corrected twin, and the values are the PTX ISA's (a model written here)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tirx

from .cluster_kernels import (
    SYNC,
    exchange_expected,
    exchange_kernel,
    push_expected,
    push_kernel,
    registers_expected,
    registers_kernel,
    remote_arrive_kernel,
)
from .cluster_kernels import (
    kernel_line as _line,
)
from .cluster_kernels import (
    rows as _rows,
)
from .cluster_kernels import (
    sim_fault as _fault,
)
from .helpers import define


def _run(kernel, *args):
    tirx.compile(kernel, target="sim")(*args)


# ----------------------------------------------------------------------- registers


@pytest.mark.parametrize(
    "grid, cluster", [((4, 2, 2), (2, 2, 1)), ((8, 1, 1), (4, 1, 1)), ((2, 2, 4), (1, 2, 2))]
)
def test_the_cluster_registers_are_the_isas(tmp_path, grid, cluster):
    out = np.full((grid[0] * grid[1] * grid[2], 12), -7, dtype=np.int32)
    _run(registers_kernel(tmp_path, grid, cluster), out)
    assert np.array_equal(out, registers_expected(grid, cluster))


def test_without_clusters_every_block_is_a_cluster_of_one(tmp_path):
    k = define(
        """
        @T.function
        def kernel(Out: T.Tensor((3, 4), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=3, block=32))
            b = T.cuda.block_idx("x")
            if T.cuda.thread_idx("x") == 0:
                Out[b, 0] = T.cuda.mov_sreg(32, "cluster_ctarank")
                Out[b, 1] = T.cuda.mov_sreg(32, "cluster_nctarank")
                Out[b, 2] = T.cuda.cluster_id("x")
                Out[b, 3] = T.cuda.mov_sreg(32, "nclusterid.x")
            T.cuda.cluster_sync()
        """,
        tmp_path,
        "kernel",
    )
    out = np.zeros((3, 4), dtype=np.int32)
    _run(k, out)
    assert out.tolist() == [[0, 1, b, 3] for b in range(3)]


# ------------------------------------------------------------ distributed shared memory


@pytest.mark.parametrize("C", [2, 4])
def test_each_block_reads_its_neighbours_row(tmp_path, C):
    a = _rows(8)
    out = np.zeros_like(a)
    _run(exchange_kernel(tmp_path, G=8, C=C), a, out)
    assert np.array_equal(out, exchange_expected(a, C))


def test_a_dropped_cluster_barrier_before_the_peer_read_is_a_fault(tmp_path):
    # the read of the peer's row and the peer's write of it: nothing orders them (here the
    # schedule ran the reader first, so the peer's bytes are not even written yet)
    msg = _fault(exchange_kernel(tmp_path, sync1="pass"), _rows(), np.zeros((4, 64), np.int32))
    assert "block (0, 0, 0)" in msg and "of block (1, 0, 0)" in msg
    assert "which nothing wrote there" in msg and "synchronize the cluster" in msg


def test_a_peer_read_after_the_peer_may_have_exited_is_a_fault(tmp_path):
    k = exchange_kernel(tmp_path, sync2="pass")
    msg = _fault(k, _rows(), np.zeros((4, 64), np.int32))
    read, end = _line(tmp_path, "ld.shared::cluster"), _line(tmp_path, "Out[b, tid]")
    assert re.search(r"block \(\d, 0, 0\) thread 0 \(warp 0, lane 0\) reads 's'\[0\] \(byte 0", msg)
    assert f"at line {read}, but that block may exit before it: it ends at line {end}" in msg
    assert "end the kernel with T.cuda.cluster_sync()" in msg


def test_a_remote_store_racing_a_local_read_names_both_blocks_and_lines(tmp_path):
    msg = _fault(push_kernel(tmp_path, sync="pass"), _rows(2), np.zeros((2, 64), np.int32))
    store, read = _line(tmp_path, "st.shared::cluster"), _line(tmp_path, "Out[b, tid]")
    assert "distributed shared-memory race" in msg
    assert f"writes block (1, 0, 0)'s 's'[0] (byte 0, shared address 0) at line {store}" in msg
    assert f"which block (1, 0, 0) thread 0 (warp 0, lane 0) read at line {read}" in msg
    assert "T.cuda.cluster_sync()" in msg and f"between line {read} and line {store}" in msg


def test_the_remote_store_with_a_cluster_barrier_before_the_read_is_exact(tmp_path):
    a = _rows(4)
    out = np.zeros_like(a)
    _run(push_kernel(tmp_path, G=4, sync=SYNC), a, out)
    assert np.array_equal(out, push_expected(a))


def test_mapa_to_a_rank_outside_the_cluster_is_a_fault(tmp_path):
    k = exchange_kernel(tmp_path, target="r + 2")
    msg = _fault(k, _rows(), np.zeros((4, 64), np.int32))
    assert re.search(r"rank [23] names no block of this cluster of 2 block\(s\)", msg)
    assert "mapa.shared::cluster.u32" in msg


# -------------------------------------------------------------------- barrier.cluster

BARRIER = """
@T.function
def kernel(Out: T.Tensor((2, 64), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64, cluster=2))
    tid = T.cuda.thread_idx("x")
    {body}
    Out[T.cuda.block_idx("x"), tid] = 1
"""


def _barrier_kernel(tmp_path, body: str):
    body = "\n    ".join(body.strip().splitlines())
    return define(BARRIER.format(body=body), tmp_path, "kernel")


ARRIVE, WAIT = 'T.ptx["barrier.cluster.arrive"]()', 'T.ptx["barrier.cluster.wait"]()'


@pytest.mark.parametrize(
    "body, message",
    [
        (f"{ARRIVE}\n{ARRIVE}\n{WAIT}", "arrives again before it waited for the phase"),
        (f"{WAIT}", "waits without having arrived at the phase"),
        (
            f"if tid < 32:\n    {ARRIVE}\n{WAIT}",
            "thread 32 (warp 1, lane 0) waits without having arrived at the phase",
        ),
        (
            'if tid < 48:\n    T.ptx["barrier.cluster.arrive.aligned"]()',
            "reached by 16 of 32 threads of warp 1; lane 16 is elsewhere",
        ),
    ],
    ids=["arrive twice", "wait without arrive", "a warp skips the arrive", "aligned in part"],
)
def test_barrier_misuse_is_a_fault(tmp_path, body, message):
    msg = _fault(_barrier_kernel(tmp_path, body), np.zeros((2, 64), np.int32))
    assert message in msg
    assert "hint:" in msg


STUCK = f"""
bars = T.alloc_shared((1,), "uint64")
if tid == 0:
    T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
T.cuda.cta_sync()
if T.cuda.block_idx("x") == 1:
    T.cuda.mbarrier_wait(bars[0], 0)
{SYNC}
"""


def test_a_deadlock_across_the_cluster_names_every_wait(tmp_path):
    # block 1 waits on an mbarrier no one arrives at; block 0 waits at the cluster barrier for
    # block 1, which never arrives (and never exits)
    msg = _fault(_barrier_kernel(tmp_path, STUCK), np.zeros((2, 64), np.int32))
    wait, sync = _line(tmp_path, "mbarrier_wait"), _line(tmp_path, "cluster_sync")
    assert "deadlock across the cluster" in msg
    assert (
        f"block (0, 0, 0): barrier.cluster.wait at line {sync}: thread 0 (warp 0, lane 0) waits "
        "for phase 1; block (1, 0, 0) thread 0 (warp 0, lane 0) has not arrived at phase 1"
    ) in msg
    assert f"block (1, 0, 0): mbarrier 'bars'[0] (byte 0, shared address 0) at line {wait}" in msg
    assert "every thread of every block of the cluster must arrive" in msg


@pytest.mark.parametrize(
    "body",
    [SYNC, f"{ARRIVE}\n{WAIT}", f"{ARRIVE}\nx = tid * 2\n{WAIT}\n{SYNC}\n{SYNC}"],
    ids=["cluster_sync", "split", "three phases"],
)
def test_the_twins_pass(tmp_path, body):
    out = np.zeros((2, 64), np.int32)
    _run(_barrier_kernel(tmp_path, body), out)
    assert (out == 1).all()


def test_an_exited_block_counts_as_arrived(tmp_path):
    # block 1 ends at once; block 0's cluster barrier still completes (the ISA: the wait is for
    # all non-exited threads)
    out = np.zeros((2, 64), np.int32)
    _run(_barrier_kernel(tmp_path, f'if T.cuda.block_idx("x") == 0:\n    {SYNC}'), out)
    assert (out == 1).all()


# ------------------------------------------------------------------ remote mbarrier arrive


def test_a_remote_arrive_at_cluster_scope_orders_the_peers_store(tmp_path):
    a = _rows(2)
    out = np.zeros(64, np.int32)
    _run(remote_arrive_kernel(tmp_path), a, out)
    assert np.array_equal(out, a[1])


def test_a_remote_arrive_at_cta_scope_does_not(tmp_path):
    k = remote_arrive_kernel(tmp_path, arrive="mbarrier.arrive.shared::cluster.b64")
    msg = _fault(k, _rows(2), np.zeros(64, np.int32))
    store, read = _line(tmp_path, "st.shared::cluster"), _line(tmp_path, "Out[tid]")
    assert "distributed shared-memory race" in msg
    assert f"reads its own 's'[0] (byte 0, shared address 0) at line {read}" in msg
    assert f"which block (1, 0, 0) thread 0 (warp 0, lane 0) wrote at line {store}" in msg
    arrive = _line(tmp_path, "mbarrier.arrive.shared::cluster.b64")
    assert f"ordered only by its thread's arrive at line {arrive} on another block's mbarrier, " \
        "which releases at CTA scope (the default)" in msg  # fmt: skip


def test_a_wait_at_cta_scope_does_not_acquire_a_peers_release(tmp_path):
    # the ISA's scopes: a .release.cluster arrive and a .acquire.cta wait (mbarrier_wait's
    # default) are not morally strong, so the peer's store is not ordered before the read
    k = remote_arrive_kernel(tmp_path, wait="T.cuda.mbarrier_wait")
    with pytest.raises(tirx.SimulationError) as e:
        _run(k, _rows(2), np.zeros(64, np.int32))
    msg, hint = str(e.value), e.value.hint
    store, read, wait = (
        _line(tmp_path, "st.shared::cluster"), _line(tmp_path, "Out[tid]"),
        _line(tmp_path, "(bars[0], 0)"),
    )  # fmt: skip
    assert f"reads its own 's'[0] (byte 0, shared address 0) at line {read}" in msg
    assert f"which block (1, 0, 0) thread 0 (warp 0, lane 0) wrote at line {store}" in msg
    assert f"the wait at line {wait} acquires at CTA scope" in msg
    assert f"T.cuda.mbarrier_wait_acquire_cluster(bar, parity) at line {wait}" in hint


WAR = """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64, cluster=2))
    s = T.alloc_shared((64,), "int32")
    peer = T.alloc_local((1,), "uint32")
    tid = T.cuda.thread_idx("x")
    r = T.cuda.mov_sreg(32, "cluster_ctarank")
    s[tid] = tid
    T.cuda.cluster_sync()
    if r == 1:
        Out[tid] = s[tid]
    {sync}
    if r == 0:
        T.ptx["mapa.shared::cluster.u32"](peer[0], s[tid], 1)
        T.ptx["st.shared::cluster.s32"](peer[0], -1)
    T.cuda.cluster_sync()
"""


def test_a_peer_write_after_a_read_is_told_to_wait_for_the_readers(tmp_path):
    out = np.zeros(64, np.int32)
    _run(define(WAR.format(sync=SYNC), tmp_path, "kernel"), out)  # the twin: exact
    assert (out == np.arange(64)).all()
    k = define(WAR.format(sync="pass"), tmp_path, "kernel")
    with pytest.raises(tirx.SimulationError) as e:
        _run(k, np.zeros(64, np.int32))
    msg, hint = str(e.value), e.value.hint
    assert "block (0, 0, 0) thread 0 (warp 0, lane 0) writes block (1, 0, 0)'s 's'[0]" in msg
    assert "which block (1, 0, 0) thread 0 (warp 0, lane 0) read" in msg
    # the writer waits for the readers: an mbarrier of the writing block, not the reading one
    assert "an mbarrier of the writing block: the readers arrive on it" in hint
    assert "the writer waits for that phase" in hint


# Block 1's thread 0 arrives on block 0's barrier after {init} (an init and a CTA barrier,
# which no cluster barrier orders before the arrive; or nothing: the word is never initialized).
REMOTE_ON_PEER = """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64, cluster=2))
    bars = T.alloc_shared((1,), "uint64")
    peer = T.alloc_local((1,), "uint32")
    tid = T.cuda.thread_idx("x")
    r = T.cuda.mov_sreg(32, "cluster_ctarank")
{init}
    if tid == 0 and r == 1:
        T.ptx["mapa.shared::cluster.u32"](peer[0], bars[0], 0)
        T.ptx["mbarrier.arrive.release.cluster.shared::cluster.b64"](peer[0])
    T.cuda.cluster_sync()
    Out[tid] = 1
"""
INIT_THEN_CTA_SYNC = """    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
    T.cuda.cta_sync()"""


def test_a_remote_arrive_on_a_word_never_initialized_names_the_arrive(tmp_path):
    k = define(REMOTE_ON_PEER.format(init="    T.cuda.cluster_sync()"), tmp_path, "kernel")
    msg = _fault(k, np.zeros(64, np.int32))
    arrive = _line(tmp_path, "mbarrier.arrive.release")
    # the peer's word is named at the arriving statement, not where the peer block stands
    assert f"is used before mbarrier.init (or after mbarrier.inval) at line {arrive}" in msg


def test_a_remote_arrive_before_the_peers_init_is_ordered_is_a_race(tmp_path):
    k = define(REMOTE_ON_PEER.format(init=INIT_THEN_CTA_SYNC), tmp_path, "kernel")
    msg = _fault(k, np.zeros(64, np.int32))
    assert "distributed shared-memory race" in msg and "'bars'[0] (byte 0" in msg
    assert "block (1, 0, 0) thread 0 (warp 0, lane 0) arrives on block (0, 0, 0)'s" in msg


def test_single_block_kernels_take_no_cluster_path(tmp_path):
    # the seed kernel's machine: no cluster made, no distributed record on its shared memory
    from tirx.sim.machine import Machine

    from .cluster_kernels import EXCHANGE  # noqa: F401 - the cluster kernels are elsewhere

    k = define(
        """
        @T.function
        def kernel(Out: T.Tensor((64,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
            s = T.alloc_shared((64,), "int32")
            tid = T.cuda.thread_idx("x")
            s[tid] = tid
            T.cuda.cta_sync()
            Out[tid] = s[63 - tid]
        """,
        tmp_path,
        "kernel",
    )
    fn = tirx.compile(k, target="sim").lowered
    m = Machine(fn, [np.zeros(64, np.int32)], None, False)
    m.run()
    assert m.cluster is None and m.shared.cluster is None and "cluster" not in m.units
