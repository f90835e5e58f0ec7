"""Bulk asynchronous stores (cp.async.bulk shared -> global, its groups and waits) and
fence.proxy.async in the simulator: a correct kernel's result equals its input, and each fault
of the model (tirx/sim/bulkcopy.py) fires on a broken twin, naming the lines involved."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import tirx
from tirx import sim
from tirx.errors import SimulationError

from .helpers import PRELUDE, define

COPY = "cp.async.bulk.global.shared::cta.bulk_group"

# Threads store a (2 x 64) float32 tile per block into shared memory, fence, barrier; threads
# 0 and 1 each hand one 256-byte row to the copy engine, commit and wait. Lines are found by
# their "# name" markers.
KERNEL = """
@T.function
def kernel(A: T.Tensor((4, 64), "float32"), Out: T.Tensor((4, 64), "float32"), k: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
    tid = T.cuda.linear_thread_id()
    bx = T.cuda.block_idx("x")
    s = T.alloc_shared((2, 64), "float32")
    {fill}
    {fence}  # fence
    {sync}  # sync
    if {who}:
        T.ptx["{copy}"]({dst}, {src}, {size})  # copy
        {after_copy}  # after copy
        T.ptx["cp.async.bulk.commit_group"]()  # commit
        {after_commit}  # after commit
        {wait_read}  # wait read
        {after_read}  # after read
        {wait_full}  # wait full
        {after_full}  # after full
    {tail}  # tail
"""

STORE = "for j in range(2):\n        s[tid // 32, (tid % 32) * 2 + j] = A[2 * bx + tid // 32, (tid % 32) * 2 + j]  # store"

GOOD = dict(
    who="tid < 2",
    fill=STORE,
    fence='T.ptx["fence.proxy.async.shared::cta"]()',
    sync="T.cuda.cta_sync()",
    copy=COPY,
    dst="Out[2 * bx + tid, 0]",
    src="s[tid, 0]",
    size="256",
    after_copy="pass",
    after_commit="pass",
    wait_read='T.ptx["cp.async.bulk.wait_group.read"](0)',
    after_read="pass",
    wait_full='T.ptx["cp.async.bulk.wait_group"](0)',
    after_full="pass",
    tail="pass",
)


def source(**changes) -> str:
    return KERNEL.format(**{**GOOD, **changes})


def line(src: str, marker: str) -> int:
    """The line number (in the file define() writes) of the line carrying ``# marker``."""
    text = PRELUDE + textwrap.dedent(src)
    for i, ln in enumerate(text.splitlines(), 1):
        if ln.rstrip().endswith(f"# {marker}"):
            return i
    raise AssertionError(marker)


def inputs():
    a = (np.arange(4 * 64, dtype=np.float32).reshape(4, 64) * 0.5) - 3.0
    return a, np.zeros_like(a)


def run(tmp_path, k=1, trace=False, **changes):
    src = source(**changes)
    fn = define(src, tmp_path, "kernel")
    a, out = inputs()
    result = sim.run(tirx.compile(fn, "sim").lowered, [a, out, k], trace=trace)
    return a, out, result, src


def fails(tmp_path, pattern, k=1, **changes) -> tuple[SimulationError, str]:
    src = source(**changes)
    fn = define(src, tmp_path, "kernel")
    with pytest.raises(SimulationError, match=pattern) as info:
        sim.run(tirx.compile(fn, "sim").lowered, [*inputs(), k])
    return info.value, src


# ------------------------------------------------------------------------ correct kernels


def test_the_copied_tile_equals_the_input(tmp_path):
    a, out, _, _ = run(tmp_path)
    np.testing.assert_array_equal(out, a)


@pytest.mark.parametrize(
    "changes",
    [
        dict(wait_full="pass"),  # lands at the end of the block
        dict(wait_read="pass"),  # the full wait also finishes the reads
        dict(fence='T.ptx["fence.proxy.async"]()'),  # every state space
        dict(size="k * 256", dst="Out[2 * bx + tid, 0]"),  # a run-time size
        # the source may be reused once the reads are done; the copy took the old bytes
        dict(after_read="s[tid, 0] = T.float32(-1.0)"),
        # the destination may be read once the full wait covered the copy
        dict(after_full="x = Out[2 * bx + tid, 5]\n        Out[2 * bx + tid, 5] = x"),
    ],
)
def test_the_corrected_twins_run_and_give_the_input(tmp_path, changes):
    a, out, _, _ = run(tmp_path, **changes)
    np.testing.assert_array_equal(out, a)


def test_one_thread_copies_both_rows_in_two_groups(tmp_path):
    a, out, _, _ = run(
        tmp_path,
        copy=COPY,
        dst="Out[2 * bx, 0]",
        src="s[0, 0]",
        size="256",
        after_commit=f'T.ptx["{COPY}"](Out[2 * bx + 1, 0], s[1, 0], 256)\n'
        '        T.ptx["cp.async.bulk.commit_group"]()',
        wait_read='T.ptx["cp.async.bulk.wait_group.read"](1)',
        who="tid == 0",
    )
    np.testing.assert_array_equal(out, a)


def test_traces_show_fences_copies_commits_and_waits(tmp_path):
    _, _, result, _ = run(tmp_path, trace=True)
    block0 = [c for c in result.copies if c.block == (0, 0, 0)]
    events = [(c.event, c.instruction, int(c.active.sum())) for c in block0]
    assert events == [
        ("fence", "fence.proxy.async.shared::cta", 32),
        ("fence", "fence.proxy.async.shared::cta", 32),
        ("copy", COPY, 2),
        ("commit_group", "cp.async.bulk.commit_group", 2),
        ("wait_group", "cp.async.bulk.wait_group.read", 2),
        ("wait_group", "cp.async.bulk.wait_group", 2),
    ]
    copy = block0[2]
    assert copy.dst[:2].tolist() == [0, 256]  # byte offsets in Out
    assert copy.nbytes[:2].tolist() == [256, 256] and copy.dst[2] == -1
    assert block0[3].group[:2].tolist() == [0, 0]
    assert block0[4].completed[:2].tolist() == [1, 1]


# -------------------------------------------------------------------------------- faults


def test_writing_the_source_before_the_read_wait(tmp_path):
    err, src = fails(
        tmp_path, "the source of the cp.async.bulk", after_commit="s[tid, 3] = T.float32(0.0)"
    )
    assert f"at line {line(src, 'after commit')}" in err.message
    assert f"cp.async.bulk at line {line(src, 'copy')}" in err.message
    assert "block (0, 0, 0), warp 0, lane 0" in err.message
    assert "wait_group.read" in err.hint


def test_another_thread_writing_the_source_before_the_read_wait(tmp_path):
    err, src = fails(
        tmp_path,
        "the source of the cp.async.bulk",
        tail="if tid == 40:\n        s[1, 8] = T.float32(0.0)",
        wait_read="pass",
        wait_full="pass",
    )
    assert f"at line {line(src, 'tail')}" in err.message
    assert "warp 1, lane 8" in err.message and "issued by thread 1" in err.message


def test_reusing_the_source_needs_a_barrier_after_the_read_wait(tmp_path):
    reuse = "if tid == 40:\n        s[1, 8] = T.float32(0.0)"
    err, src = fails(tmp_path, "shared-memory race", tail=reuse)
    assert f"at line {line(src, 'tail')}" in err.message
    assert f"which thread 1 (warp 0, lane 1) read at line {line(src, 'wait read')}" in err.message
    a, out, _, _ = run(tmp_path, tail="T.cuda.cta_sync()\n    " + reuse)
    np.testing.assert_array_equal(out, a)  # the copy took the bytes before the reuse


def test_a_missing_fence(tmp_path):
    err, src = fails(tmp_path, "the copy engine may read stale bytes", fence="pass")
    assert (
        "through the generic proxy with no fence.proxy.async of shared memory after it"
        in err.message
    )
    assert f"at line {line(src, 'store')}" in err.message
    assert f"cp.async.bulk at line {line(src, 'copy')}" in err.message


@pytest.mark.parametrize(
    "fence",
    [
        'T.ptx["fence.proxy.async.global"]()',  # orders global memory only
        'if tid == 0:\n        T.ptx["fence.proxy.async.shared::cta"]()',  # not by every storer
    ],
)
def test_a_fence_that_does_not_cover_the_stores(tmp_path, fence):
    fails(tmp_path, "the copy engine may read stale bytes", fence=fence)


def test_a_fence_after_the_barrier(tmp_path):
    """The fence publishes the stores to the async proxy only from where it stands: after the
    barrier, it is not ordered before the copy another thread issues (the lockstep run
    executes it first all the same)."""
    fence = 'T.ptx["fence.proxy.async.shared::cta"]()'
    err, src = fails(
        tmp_path, "the copy engine may read stale bytes", fence="T.cuda.cta_sync()", sync=fence
    )
    assert (
        f"published to the async proxy with the fence.proxy.async at line {line(src, 'sync')}"
        in (err.message)
    )
    assert f"the cp.async.bulk at line {line(src, 'copy')}, issued by thread 0" in err.message
    assert "move the fence before the barrier" in err.hint


def test_no_barrier_between_the_fence_and_the_copy(tmp_path):
    err, src = fails(tmp_path, "shared-memory race", sync="pass")
    assert f"at line {line(src, 'copy')}" in err.message
    assert f"at line {line(src, 'store')}" in err.message


def test_exiting_without_a_wait(tmp_path):
    err, src = fails(
        tmp_path, "the block exits while the cp.async.bulk", wait_read="pass", wait_full="pass"
    )
    assert f"at line {line(src, 'copy')}" in err.message
    fails(
        tmp_path,
        "never committed",
        size="128",
        after_commit=f'T.ptx["{COPY}"](Out[2 * bx + tid, 32], s[tid, 32], 16)',
        wait_full="pass",
    )


@pytest.mark.parametrize(
    "where, change",
    [
        ("after read", dict(after_read="x = Out[2 * bx + tid, 5]")),
        ("after copy", dict(after_copy="Out[2 * bx + tid, 60] = T.float32(1.0)")),
        ("tail", dict(tail="x = Out[2 * bx, 0]", wait_full="pass")),
    ],
)
def test_accessing_the_destination_before_the_full_wait(tmp_path, where, change):
    err, src = fails(tmp_path, "the destination of the cp.async.bulk", **change)
    assert f"at line {line(src, where)}" in err.message
    assert f"cp.async.bulk at line {line(src, 'copy')}" in err.message
    assert "wait_group" in err.hint


def test_two_pending_copies_onto_the_same_bytes(tmp_path):
    fails(
        tmp_path,
        "is still writing",
        after_copy=f'T.ptx["{COPY}"](Out[2 * bx + tid, 32], s[tid, 0], 16)',
    )


@pytest.mark.parametrize(
    "changes, k, pattern",
    [
        (dict(size="k * 8"), 1, "size 8 is not a positive multiple of 16"),
        (dict(size="k * 256"), 0, "size 0 is not a positive multiple of 16"),
        (
            dict(dst="Out[2 * bx + tid, k]"),
            1,
            r"byte \d+ of global 'Out' .* is not 16-byte aligned",
        ),
        (dict(src="s[tid, k * 2]", size="16"), 1, r"shared address \d+ is not 16-byte aligned"),
        (dict(dst="Out[2 * bx + tid, 0]", size="k * 256"), 4, "out-of-bounds cp.async.bulk"),
        (dict(src="s[tid, 0]", size="k * 256"), 2, "lies outside every shared allocation"),
    ],
)
def test_run_time_operands_are_checked(tmp_path, changes, k, pattern):
    fails(tmp_path, pattern, k=k, **changes)


def test_landed_cp_async_counts_as_a_generic_store(tmp_path):
    fill = (
        'T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], '
        "s[tid // 32, (tid % 32) * 2 : (tid % 32) * 2 + 4].view(1, 4), "
        "A[2 * bx + tid // 32, (tid % 32) * 2 : (tid % 32) * 2 + 4].view(1, 4), "
        'scope="thread", chunk_bytes=16, pred=tid % 2 == 0)  # store\n'
        '    T.ptx["cp.async.wait_all"]()'
    )
    a, out, _, _ = run(tmp_path, fill=fill)
    np.testing.assert_array_equal(out, a)
    err, src = fails(tmp_path, "may read stale bytes", fill=fill, fence="pass")
    assert f"cp.async.bulk at line {line(src, 'copy')}" in err.message


# ----------------------------------------------------------------------------- on the GPU


@pytest.mark.gpu
@pytest.mark.parametrize(
    "changes",
    [
        dict(),
        dict(wait_full="pass"),  # the stores land after the block's last instruction
        dict(size="k * 128", dst="Out[2 * bx + tid, 32]", src="s[tid, 32]"),
    ],
)
def test_the_gpu_equals_the_simulator_bit_for_bit(tmp_path, changes):
    import torch

    fn = define(source(**changes), tmp_path, "kernel")
    a, out = inputs()
    out[:] = -7.25  # bytes no copy writes keep this on both sides
    sim.run(tirx.compile(fn, "sim").lowered, [a, out, 1])
    exe = tirx.compile(fn, "cuda")
    ga = torch.from_numpy(a).cuda()
    gout = torch.full_like(ga, -7.25)
    exe(ga, gout, 1)
    torch.cuda.synchronize()
    got = gout.cpu().numpy()
    np.testing.assert_array_equal(got.view(np.uint32), out.view(np.uint32))
    if not changes.get("size"):
        np.testing.assert_array_equal(got, a)
