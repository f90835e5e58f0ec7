"""The ``.relaxed`` cluster arrive and ``fence.mbarrier_init`` in the simulator (PTX ISA,
"barrier.cluster": ".relaxed ... no memory ordering and visibility guarantees ... for the
memory accesses performed prior to barrier.cluster.arrive"; "membar / fence":
``fence.mbarrier_init.release.cluster`` releases the thread's prior ``mbarrier.init``
operations at cluster scope). Each fault has its corrected twin, which runs exactly."""

from __future__ import annotations

import numpy as np
import pytest

import tirx

from .cluster_kernels import (
    ACQUIRE_CLUSTER,
    MC,
    MULTICAST,
    REMOTE_ARRIVE,
    SUM_TAIL,
    SYNC,
    multicast_expected,
    push_expected,
    push_kernel,
    rows,
    tile,
)
from .cluster_kernels import (
    kernel_line as _line,
)
from .cluster_kernels import (
    sim_fault as _fault,
)
from .helpers import define

ARRIVE = 'T.ptx["barrier.cluster.arrive.aligned"]()'
RELAXED = 'T.ptx["barrier.cluster.arrive.relaxed.aligned"]()'
WAIT = 'T.ptx["barrier.cluster.wait.aligned"]()'
FENCE = 'T.ptx["fence.mbarrier_init.release.cluster"]()'


def _sync(arrive: str) -> str:
    """An arrive and a wait in place of ``T.cuda.cluster_sync()`` (at 4 spaces)."""
    return f"{arrive}\n    {WAIT}"


# ------------------------------------------------------------- data across blocks


def test_a_relaxed_arrive_does_not_release_the_remote_store(tmp_path):
    msg = _fault(push_kernel(tmp_path, sync=_sync(RELAXED)), rows(2), np.zeros((2, 64), np.int32))
    store, arrive = _line(tmp_path, "st.shared::cluster"), _line(tmp_path, "arrive.relaxed")
    assert "distributed shared-memory race" in msg
    assert f"wrote at line {store} with no cluster barrier in between that releases it" in msg
    assert f"its thread's arrive at line {arrive} is .relaxed" in msg
    assert f"arrive with release semantics at line {arrive} (barrier.cluster.arrive" in msg


@pytest.mark.parametrize("arrive", [ARRIVE, 'T.ptx["barrier.cluster.arrive.release.aligned"]()'])
def test_the_release_arrive_orders_it(tmp_path, arrive):
    a = rows(4)
    out = np.zeros_like(a)
    tirx.compile(push_kernel(tmp_path, G=4, sync=_sync(arrive)), target="sim")(a, out)
    assert np.array_equal(out, push_expected(a))


def test_a_later_release_arrive_releases_what_a_relaxed_one_held_back(tmp_path):
    # store, a relaxed phase, then a full one before the read: the second arrive releases it
    a = rows(2)
    out = np.zeros_like(a)
    sync = f"{_sync(RELAXED)}\n    {SYNC}"
    tirx.compile(push_kernel(tmp_path, sync=sync), target="sim")(a, out)
    assert np.array_equal(out, push_expected(a))


LOCAL = """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64, cluster=2))
    s = T.alloc_shared((64,), "int32")
    tid = T.cuda.thread_idx("x")
    s[tid] = tid
    {sync}
    Out[tid] = s[63 - tid]
    T.cuda.cluster_sync()
"""


def test_within_a_block_a_relaxed_phase_does_not_order_the_stores_either(tmp_path):
    k = define(LOCAL.format(sync=_sync(RELAXED)), tmp_path, "kernel")
    msg = _fault(k, np.zeros(64, np.int32))
    store, read = _line(tmp_path, "s[tid] = tid"), _line(tmp_path, "Out[tid] = s[63 - tid]")
    arrive = _line(tmp_path, "arrive.relaxed")
    assert "shared-memory race" in msg and f"wrote at line {store}" in msg
    assert f"at line {read}" in msg
    assert f"if the cluster barrier whose arrive is at line {arrive} should order them" in msg


def test_within_a_block_the_release_phase_orders_them(tmp_path):
    out = np.zeros(64, np.int32)
    tirx.compile(define(LOCAL.format(sync=_sync(ARRIVE)), tmp_path, "kernel"), target="sim")(out)
    assert np.array_equal(out, np.arange(63, -1, -1))


# ------------------------------------------------------------------ the barriers' inits


def _remote_arrive(tmp_path, fence: bool, arrive: str = RELAXED):
    """tests/cluster_kernels.py's remote arrive with the first cluster_sync split into
    ``arrive`` and a wait, with or without the init fence."""
    source = REMOTE_ARRIVE.format(
        arrive="mbarrier.arrive.release.cluster.shared::cluster.b64", wait=ACQUIRE_CLUSTER
    )
    head, tail = source.split("    T.cuda.cluster_sync()\n", 1)
    if not fence:
        head = head.replace(f"        {FENCE}\n", "")
    return define(f"{head}    {_sync(arrive)}\n{tail}", tmp_path, "kernel")


def test_the_init_fence_lets_a_relaxed_arrive_publish_the_barrier(tmp_path):
    a = rows(2)
    out = np.zeros(64, np.int32)
    tirx.compile(_remote_arrive(tmp_path, fence=True), target="sim")(a, out)
    assert np.array_equal(out, a[1])


def test_a_relaxed_arrive_without_the_init_fence_is_a_race_on_the_barrier(tmp_path):
    msg = _fault(_remote_arrive(tmp_path, fence=False), rows(2), np.zeros(64, np.int32))
    init, arrive = _line(tmp_path, "mbarrier.init"), _line(tmp_path, "arrive.relaxed")
    remote = _line(tmp_path, "mbarrier.arrive.release.cluster")
    assert (
        f"arrives on block (0, 0, 0)'s 'bars'[0] (byte 0, shared address 256) at line {remote}"
        in msg
    )
    assert f"initialized (mbarrier.init) at line {init}" in msg
    assert f"arrive at line {arrive} is .relaxed" in msg
    assert 'put T.ptx["fence.mbarrier_init.release.cluster"]() after the init' in msg
    assert f"before the .relaxed arrive at line {arrive}" in msg


def test_without_the_init_fence_a_release_arrive_publishes_the_barrier(tmp_path):
    # the fence is the light-weight release of the inits; the default arrive releases them too
    a = rows(2)
    out = np.zeros(64, np.int32)
    tirx.compile(_remote_arrive(tmp_path, fence=False, arrive=ARRIVE), target="sim")(a, out)
    assert np.array_equal(out, a[1])


def _multicast(tmp_path, init_sync: str):
    source = MULTICAST.format(C=2, mask="0b11", init_sync=init_sync, tail=SUM_TAIL)
    return define(source, tmp_path, "kernel", MC=MC)


def test_a_multicast_onto_a_barrier_whose_init_a_relaxed_arrive_held_back_is_a_race(tmp_path):
    # (a cta_sync orders the init for the block's own threads: the peer's copy is the race)
    sync = f"T.cuda.cta_sync()\n    {_sync(RELAXED)}"
    msg = _fault(_multicast(tmp_path, sync), tile(), np.zeros((2, 128), np.float32))
    init, issue = _line(tmp_path, "mbarrier.init"), _line(tmp_path, "T.cuda.tile.apply")
    assert (
        "block (0, 0, 0) thread 0 (warp 0, lane 0) signals a multicast tensor copy's bytes on"
        in msg
    )
    assert f"block (1, 0, 0)'s 'bars'[0] (byte 0, shared address 8192) at line {issue}" in msg
    assert (
        f"block (1, 0, 0) thread 0 (warp 0, lane 0) initialized (mbarrier.init) at line {init}"
        in msg
    )


def test_a_multicast_after_the_fenced_inits_and_a_relaxed_arrive_is_exact(tmp_path):
    sync = f"if tid == 0:\n        {FENCE}\n    {_sync(RELAXED)}"
    t = tile()
    out = np.zeros((2, 128), np.float32)
    tirx.compile(_multicast(tmp_path, sync), target="sim")(t, out)
    assert np.array_equal(out, multicast_expected(t, 2))


def test_a_multicast_onto_a_barrier_initialized_after_the_cluster_barrier_is_a_race(tmp_path):
    # the cluster barrier comes before the inits: the peer's init, although it ran first here,
    # is not ordered before the copy's complete-tx on it
    source = MULTICAST.format(
        C=2, mask="0b11", init_sync="T.cuda.cta_sync()", tail=SUM_TAIL
    ).replace(
        '    if tid == 0:\n        T.ptx["mbarrier.init',
        f'    {SYNC}\n    if tid == 0:\n        T.ptx["mbarrier.init',
        1,
    )
    msg = _fault(define(source, tmp_path, "kernel", MC=MC), tile(), np.zeros((2, 128), np.float32))
    init = _line(tmp_path, "mbarrier.init")
    assert "signals a multicast tensor copy's bytes on block (1, 0, 0)'s 'bars'" in msg
    assert f"initialized (mbarrier.init) at line {init} with no cluster barrier in between" in msg


# ------------------------------------------------------------------------------ exits


def test_a_relaxed_last_arrive_does_not_order_a_peer_read_before_the_exit(tmp_path):
    from .cluster_kernels import exchange_kernel

    k = exchange_kernel(tmp_path, G=2, C=2, sync2=_sync(RELAXED))
    msg = _fault(k, rows(2), np.zeros((2, 64), np.int32))
    read, arrive = _line(tmp_path, "ld.shared::cluster"), _line(tmp_path, "arrive.relaxed")
    assert f"at line {read}, but that block may exit before it" in msg
    assert f"(the accessing thread's arrive at line {arrive} is .relaxed" in msg


def test_a_release_last_arrive_does(tmp_path):
    from .cluster_kernels import exchange_expected, exchange_kernel

    a = rows(2)
    out = np.zeros_like(a)
    tirx.compile(exchange_kernel(tmp_path, G=2, C=2, sync2=_sync(ARRIVE)), target="sim")(a, out)
    assert np.array_equal(out, exchange_expected(a, 2))


# -------------------------------------------------------------------------------- GPU


def _gpu(kernel, *arrays):
    import torch

    exe = tirx.compile(kernel, target="cuda")
    gpus = [torch.from_numpy(a.copy()).cuda() for a in arrays]
    exe(*gpus)
    torch.cuda.synchronize()
    return [g.cpu().numpy() for g in gpus]


@pytest.mark.gpu
def test_gpu_the_fenced_inits_and_relaxed_arrives_equal_the_simulator(tmp_path):
    a = rows(2)
    _, out = _gpu(_remote_arrive(tmp_path, fence=True), a, np.zeros(64, np.int32))
    assert np.array_equal(out, a[1])
    t = tile()
    sync = f"if tid == 0:\n        {FENCE}\n    {_sync(RELAXED)}"
    _, out = _gpu(_multicast(tmp_path, sync), t, np.zeros((2, 128), np.float32))
    assert np.array_equal(out, multicast_expected(t, 2))
