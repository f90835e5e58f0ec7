"""The simulator's checks of accesses that bypass plain loads and stores against pending bulk
copies (tirx/sim/bulkcopy.py): a ``cp.async`` whose global source a bulk store has not yet
written (tirx/sim/asynccopy.py), and an atomic on shared bytes a bulk copy still reads
(tirx/sim/atomics.py). Each fires on a kernel built to break it, naming both lines, and stays
silent on its corrected twin."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx.errors import SimulationError

from .test_sim_bulk import line

BULK = "cp.async.bulk.global.shared::cta.bulk_group"

# Threads 0 and 1 store row tid of A into shared memory, fence, hand it to the copy engine
# (to Out) and commit; then each reads the first 16 bytes of its row of Out back with a
# cp.async into t. {wait} is what stands between the bulk store and the read.
READ_BACK = f"""
@T.function
def kernel(A: T.Tensor((2, 64), "float32"), Out: T.Tensor((2, 64), "float32"),
           Back: T.Tensor((2, 4), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.lane_id()
    s = T.alloc_shared((2, 64), "float32")
    t = T.alloc_shared((2, 4), "float32")
    if tid < 2:
        for j in range(64):
            s[tid, j] = A[tid, j]
        T.ptx["fence.proxy.async.shared::cta"]()
        T.ptx["{BULK}"](Out[tid, 0], s[tid, 0], 256)  # bulk
        T.ptx["cp.async.bulk.commit_group"]()
        {{wait}}  # wait
        T.ptx["cp.async.cg.shared.global"](t[tid, 0], Out[tid, 0], 16)  # read back
        T.ptx["cp.async.wait_all"]()
        for j in range(4):
            Back[tid, j] = t[tid, j]
        T.ptx["cp.async.bulk.wait_group.read"](0)
"""

# Threads 0 and 1 store row tid of A (int32) into shared memory, fence, hand it to the copy
# engine and commit; then each adds 1 to an element of its row atomically. {wait} is what
# stands between the copy and the atomic.
ATOMIC = f"""
@T.function
def kernel(A: T.Tensor((2, 64), "int32"), Out: T.Tensor((2, 64), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.lane_id()
    s = T.alloc_shared((2, 64), "int32")
    if tid < 2:
        for j in range(64):
            s[tid, j] = A[tid, j]
        T.ptx["fence.proxy.async.shared::cta"]()
        T.ptx["{BULK}"](Out[tid, 0], s[tid, 0], 256)  # bulk
        T.ptx["cp.async.bulk.commit_group"]()
        {{wait}}  # wait
        T.cuda.atomic_add(s.ptr_to([tid, 3]), 1)  # atomic
        T.ptx["cp.async.bulk.wait_group"](0)
"""

FULL = 'T.ptx["cp.async.bulk.wait_group"](0)'
READ = 'T.ptx["cp.async.bulk.wait_group.read"](0)'


def _sim(tmp_path, template: str, wait: str):
    from .helpers import define

    src = template.format(wait=wait)
    return tirx.compile(define(src, tmp_path, "kernel"), target="sim"), src


def _a(dtype):
    return (np.arange(128).reshape(2, 64) * 3 + 1).astype(dtype)


@pytest.mark.parametrize("wait", ["pass", READ])  # .read: the bytes are read, not yet written
def test_a_cp_async_of_bytes_a_bulk_store_has_not_written(tmp_path, wait):
    sim, src = _sim(tmp_path, READ_BACK, wait)
    a = _a(np.float32)
    with pytest.raises(SimulationError, match="cp.async read of global 'Out' bytes 0..15") as e:
        sim(a, np.zeros_like(a), np.zeros((2, 4), np.float32))
    msg = e.value.message
    assert f"at line {line(src, 'read back')}" in msg
    assert f"the destination of the cp.async.bulk at line {line(src, 'bulk')}" in msg
    assert "which has not completed" in msg and "wait_group" in e.value.hint


def test_its_twin_waits_for_the_bulk_store_and_reads_the_new_bytes(tmp_path):
    sim, _ = _sim(tmp_path, READ_BACK, FULL)
    a, out, back = _a(np.float32), np.zeros((2, 64), np.float32), np.zeros((2, 4), np.float32)
    sim(a, out, back)
    np.testing.assert_array_equal(out, a)
    np.testing.assert_array_equal(back, a[:, :4])


def test_an_atomic_on_bytes_a_bulk_copy_still_reads(tmp_path):
    sim, src = _sim(tmp_path, ATOMIC, "pass")
    a = _a(np.int32)
    with pytest.raises(SimulationError, match="the source of the cp.async.bulk") as e:
        sim(a, np.zeros_like(a))
    msg = e.value.message
    assert f"at line {line(src, 'atomic')}" in msg
    assert f"cp.async.bulk at line {line(src, 'bulk')}" in msg
    assert "wait_group.read" in e.value.hint


@pytest.mark.parametrize("wait", [READ, FULL])
def test_its_twin_waits_for_the_reads_and_the_copy_took_the_old_bytes(tmp_path, wait):
    sim, _ = _sim(tmp_path, ATOMIC, wait)
    a, out = _a(np.int32), np.zeros((2, 64), np.int32)
    sim(a, out)
    np.testing.assert_array_equal(out, a)  # read at issue, before the atomic
