"""How the simulator's reports name threads and shared-memory locations: a thread of a block
of two or three dimensions by its threadIdx, a shared byte by the element that holds it (as the
allocation's layout places it, swizzle included), a byte no element holds by its offset."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx import T
from tirx.errors import SimulationError
from tirx.layout import S, TileLayout
from tirx.sim.shared import element_at
from widgets.pipeline import barrier_name

PADDED = TileLayout(S[(8, 32) : (40, 1)])  # rows 40 elements apart: 8 padding ints a row


def _shift(block, barrier=False, layout="default"):
    """Each thread stores its own element, then reads the next row's: a race between warps
    without the barrier."""
    cols, rows = (block[0], block[1]) if len(block) > 1 else (32, block[0] // 32)

    @T.function
    def shift(Out: T.Tensor((rows, cols), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=block))
        if len(block) > 1:
            tx = T.cuda.thread_idx("x")
            ty = T.cuda.thread_idx("y")
        else:
            tx = T.cuda.thread_idx("x") % 32
            ty = T.cuda.thread_idx("x") // 32
        s = T.alloc_shared((rows, cols), "int32", layout=layout)
        s[ty, tx] = ty * cols + tx
        if barrier:
            T.cuda.cta_sync()
        Out[ty, tx] = s[(ty + 1) % rows, tx]

    return shift


def _race(block, layout="default"):
    out = np.zeros((8, 32), np.int32)
    tirx.compile(_shift(block, True, layout), "sim")(out)  # the corrected twin runs clean
    assert (out == np.roll(np.arange(256).reshape(8, 32), -1, axis=0)).all()
    with pytest.raises(SimulationError) as e:
        tirx.compile(_shift(block, False, layout), "sim")(np.zeros((8, 32), np.int32))
    return e.value


def test_a_thread_of_a_two_dimensional_block_is_named_by_its_thread_idx():
    err = _race((32, 8))
    msg = str(err)
    # thread (0, 0, 0) reads row 1, which thread (0, 1, 0) (warp 1) wrote
    assert "thread (0, 0, 0) (warp 0, lane 0) reads 's'[1, 0] (byte 128, shared address 128)" in msg
    assert "which thread (0, 1, 0) (warp 1, lane 0) wrote" in msg
    assert "[block (0, 0, 0), thread (0, 0, 0), warp 0, lane 0]" in msg
    assert (err.block, err.thread, err.warp, err.lane) == ((0, 0, 0), (0, 0, 0), 0, 0)


def test_a_thread_of_a_one_dimensional_block_keeps_its_linear_id():
    err = _race((256,))
    msg = str(err)
    assert "thread 0 (warp 0, lane 0) reads 's'[1, 0]" in msg
    assert "which thread 32 (warp 1, lane 0) wrote" in msg
    assert "[block (0, 0, 0), warp 0, lane 0]" in msg and err.thread == (0, 0, 0)


def test_an_element_is_found_through_its_layout():
    err = _race((32, 8), PADDED)
    # row 1 starts at element 40, byte 160
    assert "reads 's'[1, 0] (byte 160, shared address 160)" in str(err)


def test_elements_through_a_swizzled_layout_and_padding_bytes():
    from tirx.examples.gemm_wgmma import make_gemm_wgmma

    k = make_gemm_wgmma(256, 128, 256)
    a_s = next(b for b in k.ir.allocations if b.name == "a_s")
    # 128-byte swizzle: row 1's first 16-byte chunk is stored second, so its byte 2 (slot 65)
    # holds row 1's column 8 + 1
    assert element_at(a_s, 0) == (0, 0, 0)
    assert element_at(a_s, 130) == (0, 1, 9)
    assert element_at(a_s, 64 * 2 * 256) == (1, 0, 0)  # the next stage
    buf = next(b for b in _padded_buffers() if b.name == "s")
    assert element_at(buf, 4 * 41) == (1, 1)
    assert element_at(buf, 4 * 33) is None  # padding: no element there
    assert element_at(None, 0) is None


def _padded_buffers():
    return _shift((32, 8), True, PADDED).ir.allocations


def test_the_pipeline_picture_shortens_both_names_of_a_barrier():
    assert barrier_name("'full'[1] (byte 8, shared address 1032)") == "full[1]"
    assert barrier_name("'full' byte 8 (shared address 1032)") == "full[1]"
    assert barrier_name("'bars'[0, 1] (byte 8, shared address 8)") == "bars[0, 1]"
    assert barrier_name("shared address 8") == "shared address 8"
