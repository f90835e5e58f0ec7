"""Machine limits checked after lowering (tirx/transform/limits.py), the same for both targets.

Each check fires on a kernel built to break it, at the user's line, and stays silent on the
corrected twin.
"""

from __future__ import annotations

import pytest

import tirx
from tests.helpers import caret_line, define
from tirx.transform.limits import (
    LOCAL_BYTES_PER_THREAD,
    WARP_COLLECTIVE_OPCODES,
    MachineLimitError,
)

TARGETS = ["sim", "cuda -arch=sm_90"]

RAW_LDMATRIX = """
@T.function
def k(A: T.Tensor((16, 16), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={block}))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 16), "float16")
    r = T.alloc_local((2,), "uint32")
    if lane < 32:
        T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"](r[0], r[1], a[lane % 16, 0])
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("block", ["16", "(8, 6)", "33", "1000"])
def test_a_raw_warp_instruction_in_a_partial_warp_is_refused(tmp_path, target, block):
    k = define(RAW_LDMATRIX.format(block=block), tmp_path, "k")
    with pytest.raises(MachineLimitError) as info:
        tirx.compile(k, target=target)
    err = info.value
    assert isinstance(err, tirx.LaunchError) and isinstance(err, tirx.TirxError)
    assert caret_line(str(err)).startswith('T.ptx["ldmatrix')
    assert "ldmatrix is a warp-collective instruction" in str(err)
    assert "multiple of 32" in err.hint


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("block", ["32", "(8, 8)", "1024", "(32, 2, 2)"])
def test_whole_warps_compile(tmp_path, target, block):
    k = define(RAW_LDMATRIX.format(block=block), tmp_path, "k")
    assert tirx.compile(k, target=target) is not None


@pytest.mark.parametrize("target", TARGETS)
def test_partial_warps_without_warp_instructions_are_fine(tmp_path, target):
    k = define(
        """
        @T.function
        def k(A: T.Tensor((16,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=16))
            A[T.cuda.thread_idx("x")] = 1.0
        """,
        tmp_path,
        "k",
    )
    assert tirx.compile(k, target=target) is not None


LOCALS = """
@T.function
def k(A: T.Tensor((4,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    x = T.alloc_local(({first},), "float32")
    y = T.alloc_local(({second},), "uint8")
    x[0] = 1.0
    y[0] = 2
    A[0] = x[0] + y[0]
"""


@pytest.mark.parametrize("target", TARGETS)
def test_local_arrays_beyond_a_threads_local_memory_are_refused(tmp_path, target):
    words = LOCAL_BYTES_PER_THREAD // 4
    k = define(LOCALS.format(first=words, second=1), tmp_path, "k")  # one byte too many
    with pytest.raises(MachineLimitError) as info:
        tirx.compile(k, target=target)
    assert caret_line(str(info.value)).startswith("y = T.alloc_local")  # where it overflows
    assert "512 KiB" in str(info.value) and "T.alloc_shared" in info.value.hint


def test_local_arrays_up_to_the_limit_compile(tmp_path):
    words = LOCAL_BYTES_PER_THREAD // 4
    k = define(LOCALS.format(first=words - 1, second=4), tmp_path, "k")  # exactly 512 KiB
    assert tirx.compile(k, target="sim") is not None


def test_the_warp_collective_list_covers_the_tile_instructions():
    from tirx.transform import contracts

    tile = {"ldmatrix", "stmatrix", "mma"}
    assert tile <= set(contracts.FAMILIES) and tile <= WARP_COLLECTIVE_OPCODES
