"""What the notebook tools refuse: every bad argument is a tirx error (also a ValueError or a
TypeError) that names the argument and what it takes, raised before any work; a picture too
large to draw is refused at once, with the same bound as ``tirx layout``."""

from __future__ import annotations

import importlib
import time

import numpy as np
import pytest

import tirx
import widgets
from tirx.layout import R, S, TileLayout, laneid, warpid
from widgets import (
    check_layout,
    link,
    run_instruction,
    show_fragment,
    show_instruction,
    show_layout,
    show_pair,
    show_trace,
)
from widgets.args import MAX_CELLS
from widgets.model import layout_grid

MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
LDX4 = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
STX4 = "stmatrix.sync.aligned.m8n8.x4.shared.b16"
L = TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])
SHAPE = (4, 8, 4)


def refused(call, kind, *words):
    """``call()`` raises ``kind`` (a TirxError too), quickly, with ``words`` in its text."""
    t0 = time.perf_counter()
    with pytest.raises(kind) as info:
        call()
    assert isinstance(info.value, tirx.TirxError), type(info.value)
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    assert time.perf_counter() - t0 < 5
    return str(info.value)


# ------------------------------------------------------------------- 1. mismatch


def test_mismatch_is_the_function_every_time_after_its_module_loaded():
    importlib.import_module("widgets.mismatch_map")  # what the magic's --check loads
    from widgets import mismatch

    for fn in (mismatch, widgets.mismatch, widgets.mismatch):
        assert callable(fn) and fn.__name__ == "mismatch"
    m = mismatch(np.zeros((4, 8), np.float32), np.ones((4, 8), np.float32), 1e-3, 1e-3)
    assert "32" in str(m)  # every element is wrong


# ------------------------------------------------------------------- 2. 1-D layouts


@pytest.mark.parametrize(
    "what, kwargs, cells",
    [
        (TileLayout(S[4]), {}, ["0", "1", "2", "3"]),
        (TileLayout(S[1]), {}, ["0"]),
        (TileLayout(S[4 : 1 @ laneid]), {}, ["T0:v0", "T1:v0", "T2:v0", "T3:v0"]),
        ("S[4]", {"view": "banks"}, ["0", "1", "2", "3"]),
    ],
)
def test_a_one_dimensional_layout_is_drawn_as_one_row(what, kwargs, cells):
    view = show_fragment(what, **kwargs)
    assert view.fragment.rows == 1 and view.fragment.cols == len(cells)
    assert [view.fragment.label(e).split("/")[0] for e in view.fragment.elements] == cells


# ------------------------------------------------------------------- 3. size bound


def test_the_bound_is_the_command_lines():
    from tirx.cli import MAX_CELLS as CLI_MAX

    assert MAX_CELLS == CLI_MAX


BIG = [
    lambda: show_layout(TileLayout(S[2**20])),
    lambda: show_layout(TileLayout(S[2**40])),
    lambda: show_fragment(TileLayout(S[2**40])),
    lambda: show_layout(TileLayout(S[4] + R[2**40 : 1 @ warpid])),
    lambda: show_fragment(MMA, "A", repeat=(100, 100)),
    lambda: show_fragment(MMA, "A", repeat=(1000, 1000)),
    lambda: show_pair(TileLayout(S[2**30 : 1 @ laneid]), L),
    lambda: show_fragment(TileLayout(S[MAX_CELLS:1]), element_bits=16, unit_bits=32),  # 2 a word
]


@pytest.mark.parametrize("call", BIG)
def test_huge_pictures_are_refused_at_once(call):
    refused(call, tirx.LayoutError, "the notebook views", "at most", "show one tile")


def test_a_picture_at_the_bound_is_drawn():
    assert len(layout_grid(TileLayout(S[128, 128])).cells) == MAX_CELLS


# ------------------------------------------------------------------- 5-10, 14, 18: a table

BAD = [
    # (call, exception, words)
    (lambda: show_layout(L, shape=SHAPE, lane=32), ValueError, ["lane=32", "0..31"]),
    (lambda: show_layout(L, shape=SHAPE, lane=-1), ValueError, ["lane=-1", "0..31"]),
    (lambda: show_layout(L, shape=SHAPE, lane="3"), TypeError, ["lane", "0..31"]),
    (lambda: show_layout(L, shape=SHAPE, lane=3.0), TypeError, ["lane", "0..31"]),
    (lambda: show_layout(L, shape=SHAPE).set_lane(32), ValueError, ["lane=32", "0..31"]),
    (lambda: show_layout(L, shape=SHAPE).set_lane(-5), ValueError, ["lane=-5"]),
    (lambda: show_fragment(MMA, "D", lane=40), ValueError, ["lane=40", "0..31"]),
    (lambda: show_instruction(MMA, "D", lane=40), ValueError, ["lane=40", "0..31"]),
    (lambda: show_fragment(MMA, "D").set_lane(99), ValueError, ["lane=99", "0..31"]),
    (lambda: show_pair(L, L, left_shape=SHAPE, right_shape=SHAPE, lane=32), ValueError, ["0..31"]),
    (lambda: show_layout(L, shape=(-4, -8, 4)), ValueError, ["shape", "positive ints"]),
    (lambda: show_layout(L, shape="4,8,4"), TypeError, ["shape", "(4, 8, 4)"]),
    (lambda: show_layout(L, shape=(4.0, 8, 4)), ValueError, ["shape", "positive ints"]),
    (lambda: show_layout(TileLayout(S[8, 64]), dtype_bytes=0), ValueError, ["dtype_bytes=0"]),
    (lambda: show_layout(TileLayout(S[8, 64]), dtype_bytes=-2), ValueError, ["dtype_bytes=-2"]),
    (lambda: show_layout(TileLayout(S[8, 64]), dtype_bytes=3), ValueError, ["1, 2, 4, 8"]),
    (lambda: show_layout(TileLayout(S[8, 64]), dtype_bytes=1024), ValueError, ["dtype_bytes"]),
    (lambda: show_layout(TileLayout(S[8, 64]), dtype_bytes=2.5), TypeError, ["dtype_bytes"]),
    (lambda: show_layout(TileLayout(S[8, 64]), dtype_bytes="2"), TypeError, ["dtype_bytes"]),
    (lambda: show_fragment(MMA, "A", element_bits=64), tirx.LayoutError, ["64-bit"]),
    (lambda: show_fragment(MMA, "A", element_bits=7), tirx.LayoutError, ["7-bit"]),
    (lambda: show_fragment(MMA, "A", element_bits=0), tirx.LayoutError, ["0-bit"]),
    (lambda: show_fragment(MMA, "D", element_bits=16), tirx.LayoutError, ["element_bits is 32"]),
    (lambda: show_fragment(MMA, "A", repeat=(0, 2)), ValueError, ["repeat", "positive"]),
    (lambda: show_fragment(MMA, "A", repeat=(-1, 2)), ValueError, ["repeat", "positive"]),
    (lambda: show_fragment(MMA, "A", shape=(3, 3)), ValueError, ["shape=", "repeat="]),
    (lambda: show_fragment(L, shape=SHAPE, unit_bits=7), tirx.LayoutError, ["7-bit units"]),
    (lambda: show_fragment(L, shape=SHAPE, element_bits=0), tirx.LayoutError, ["0-bit"]),
    (lambda: show_layout(None), TypeError, ["layout must be a layout", "spec text"]),
    (lambda: show_layout(5), TypeError, ["layout must be a layout"]),
    (lambda: show_fragment(None), TypeError, ["what must be", "layout"]),
    (lambda: show_fragment(5), TypeError, ["what must be"]),
    (lambda: show_instruction(None, "D"), TypeError, ["instr must be a PTX instruction"]),
    (lambda: show_instruction(5, "D"), TypeError, ["instr must be a PTX instruction"]),
    (lambda: run_instruction(None), TypeError, ["instr must be a PTX instruction"]),
    (lambda: check_layout(None), TypeError, ["instr must be a PTX instruction"]),
    (lambda: check_layout(MMA, "A", 5), TypeError, ["layout must be a layout"]),
    (lambda: show_pair(L, None, left_shape=SHAPE), TypeError, ["right must be a layout"]),
    (lambda: show_pair(None, L, right_shape=SHAPE), TypeError, ["left must be a layout"]),
    (lambda: link(show_layout(L, shape=SHAPE), 5), TypeError, ["link joins views", "argument 2"]),
    (lambda: show_layout(L, shape=SHAPE, title=5), TypeError, ["title must be text"]),
    (lambda: show_fragment(L, shape=SHAPE, title=5), TypeError, ["title must be text"]),
    (lambda: run_instruction(MMA, A="x", B=np.ones((8, 16))), TypeError, ["(16, 16)", "numbers"]),
    (lambda: show_layout(L, shape=SHAPE).click(10**6), ValueError, ["cell 1000000", "0..127"]),
    (lambda: show_layout(L, shape=SHAPE).click(-1), ValueError, ["cell -1", "0..127"]),
    (lambda: show_fragment(MMA, "D").click(10**6), ValueError, ["0..127"]),
    (lambda: show_instruction(MMA, "D", page=5), ValueError, ["page=5", "1 page"]),
    (lambda: show_instruction(MMA, "D", page=-1), ValueError, ["page=-1"]),
    (lambda: show_fragment(MMA, "D", page=3), ValueError, ["page=3"]),
    (lambda: show_layout(L, shape=SHAPE, color_by="bogus"), ValueError, ["'lane', 'slot'"]),
    (lambda: show_instruction(MMA, "D", swizzle="99B"), ValueError, ["swizzle=", "register"]),
    (lambda: show_fragment(MMA, "A", swizzle="64B"), ValueError, ["swizzle="]),
    (lambda: show_instruction(MMA, "D", k=1), ValueError, ["k="]),
    # 12: operands an instruction does not have, registers of the wrong shape
    (lambda: run_instruction(MMA, shared=np.ones((4, 8, 8))), ValueError,
     ["mma takes A=, B=, C=", "not shared="]),
    (lambda: run_instruction(LDX4, A=np.ones((16, 16))), ValueError, ["ldmatrix takes shared="]),
    (lambda: run_instruction(LDX4, shared=np.ones((4, 8, 8)), registers=np.ones((32, 4))),
     ValueError, ["not registers="]),
]  # fmt: skip


@pytest.mark.parametrize("call, kind, words", BAD)
def test_bad_arguments_are_refused_by_name(call, kind, words):
    refused(call, kind, *words)


def test_a_register_shape_is_named_as_the_user_wrote_it():
    text = refused(lambda: run_instruction(STX4, registers=np.ones((31, 4))), tirx.TirxError,
                   "registers of shape (32, 4)", "got (31, 4)")  # fmt: skip
    assert "Regs" not in text


def test_good_arguments_still_draw():
    assert show_layout(L, shape=SHAPE, lane=31).lane == 31
    assert show_layout(L, shape=SHAPE, lane=np.int64(3)).lane == 3
    assert show_layout(TileLayout(S[8, 8]), dtype_bytes=16).dtype_bytes == 16  # 16-byte chunks
    wg = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"
    assert show_fragment(wg, "D", lane=100).lane == 100  # a warpgroup's thread
    view = show_layout(L, shape=SHAPE)
    view.click(5)
    assert view.focus == 5
    run = run_instruction("ldmatrix.sync.aligned.m8n8.x1.shared.b16", shared=np.ones((8, 8)))
    assert run.traces[0].registers[0].after.shape == (32, 1)  # .x1 takes one 8 x 8 matrix


def _fragment_banks(view):
    return [view.fragment.bank(e) for e in view.fragment.elements]


def _layout_banks(view):
    return [view.grid.bank(c) for c in view.grid.cells]


@pytest.mark.parametrize(
    "tile", [TileLayout(S[8, 64]), tirx.layout.ComposeLayout(3, 3, 3, TileLayout(S[8, 64]))]
)
def test_a_shared_tile_gets_the_same_banks_from_show_fragment_and_show_layout(tile):
    """A memory layout's defaults: 16-bit elements, one per ``m`` step, as show_layout's
    dtype_bytes=2 and view="banks" read it (show_fragment said "32-bit elements")."""
    fragment = show_fragment(tile)
    assert "(16-bit elements)" in fragment.fragment.legend()
    assert (fragment.fragment.rows, fragment.fragment.cols) == (8, 64)
    assert _fragment_banks(fragment) == _layout_banks(show_layout(tile))
    assert _fragment_banks(fragment) == _fragment_banks(show_fragment(tile, view="banks"))
    wide = show_fragment(tile, element_bits=32)  # a width given is kept
    assert _fragment_banks(wide) == _layout_banks(show_layout(tile, dtype_bytes=4))


def test_a_register_layout_is_still_drawn_one_32_bit_element_per_register():
    view = show_fragment(L, shape=SHAPE)
    assert view.fragment.element_bits == 32 and view.fragment.per_register == 1
    assert show_fragment(L, shape=SHAPE, element_bits=16).fragment.per_register == 2


# ------------------------------------------------------------------- 9. ldmatrix .trans


def test_the_trans_picture_says_its_coordinates_are_the_transposed_matrix():
    plain = str(show_instruction("ldmatrix.sync.aligned.m8n8.x1.shared.b16", "registers"))
    trans = str(show_instruction("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16", "registers"))
    assert "transposed" not in plain
    head = trans.splitlines()[:3]
    assert "(transposed matrix)" in head[0]
    assert "row (= shared column)" in head[2]
    assert "shared element (r, c) is drawn at (c, r)" in trans


# ------------------------------------------------------------------- 11. no GPU


@pytest.mark.skipif(tirx.gpu_available(), reason="a GPU is visible: target='cuda' runs")
def test_a_gpu_target_without_a_gpu_suggests_the_simulator():
    for call in (lambda: check_layout(MMA, "D", target="cuda"),
                 lambda: run_instruction(MMA, target="cuda")):  # fmt: skip
        refused(call, tirx.TirxError, "no GPU is visible", "target='sim'")


def test_check_layout_reads_spec_text_as_show_layout_does():
    spec = "S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)]"
    view = check_layout(MMA, "A", spec, target="sim")
    assert view.ok


# ------------------------------------------------------------------- 4, 13: show_trace


@pytest.fixture(scope="module")
def run():
    from tirx.examples.warp_matmul import warp_matmul

    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (16, 16)).astype(np.float16)
    b = rng.integers(-3, 4, (8, 16)).astype(np.float16)
    out = np.zeros((16, 8), np.float32)
    return tirx.compile(warp_matmul, target="sim")(a, b, out, trace=True)


def test_show_trace_refuses_what_it_cannot_show(run):
    wide = TileLayout(S[(16, 8) : (8 @ laneid, 1)])
    refused(lambda: show_trace(run, step=2, operand="D", layout=wide, shape=(16, 8)),
            tirx.LayoutError, "element (4, 0) to lane 32", "lanes 0..31")  # fmt: skip
    refused(lambda: show_trace(run, when="during"), ValueError, "'before' or 'after'")
    refused(lambda: show_trace(run, fmt="bogus"), ValueError, "'auto'", "'bf16x2'")
    refused(lambda: show_trace(run, step="x"), TypeError, "step must be an int")
    refused(lambda: show_trace(run, layout=5), TypeError, "layout must be a layout")
    refused(lambda: show_trace(run, lane=32), ValueError, "lane=32")
    text = str(
        show_trace(run, step=2, operand="D", layout="S[(8, 4, 2) : (4 @ laneid, 1 @ laneid, 1)]")
    )
    assert "·" not in text.splitlines()[3]  # spec text is read as show_layout reads it


# ------------------------------------------------------------------- 16. show_pipeline


@pytest.fixture(scope="module")
def ring(tmp_path_factory):
    from tests.pipeline_kernels import ring_inputs, ring_kernel

    a, out, _ = ring_inputs(4)
    exe = tirx.compile(ring_kernel(tmp_path_factory.mktemp("ring"), 4), target="sim")
    return exe(a, out, trace=True)


def test_show_pipeline_refuses_a_block_or_page_the_run_has_not(ring):
    from widgets import show_pipeline

    refused(lambda: show_pipeline(ring, block=(5, 0, 0)), ValueError,
            "block (5, 0, 0) recorded nothing", "(0, 0, 0)")  # fmt: skip
    refused(lambda: show_pipeline(ring, block=5), TypeError, "block must be a block index")
    pages = show_pipeline(ring).pages
    refused(lambda: show_pipeline(ring, page=pages), ValueError, f"page={pages}")
    refused(lambda: show_pipeline(ring, page=-1), ValueError, "page=-1")
    assert show_pipeline(ring, page=pages - 1).page == pages - 1


# ------------------------------------------------------------------- 17. SimProfile keys


def test_profile_lookups_name_the_bad_key_and_the_good_ones():
    from tirx.sim.profile import LineProfile, SimProfile, UnknownKey

    p = SimProfile("k", "f.py", 1, (LineProfile("f.py", 7, {"int": 2}, {}),))
    assert p.line(999) is None  # a line that ran nothing, as the docs promise
    assert p.line(7).cost("shared").units == 0  # a space the line did not touch
    for call, words in [
        (lambda: p.line(7).cost("bogus"), ["memory space 'bogus'", "'global', 'shared'"]),
        (lambda: p.line(7).cost("shared", "both"), ["access 'both'", "'load', 'store'"]),
        (lambda: p.metric("bogus"), ["metric 'bogus'", "conflicts"]),
    ]:
        with pytest.raises(UnknownKey) as info:
            call()
        assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)
        assert all(w in str(info.value) for w in words) and not str(info.value).startswith('"')
    with pytest.raises(TypeError, match="line number"):
        p.line("7")


# ------------------------------------------------------------------- 18. spec text


def test_a_spec_without_strides_says_so():
    with pytest.raises(tirx.LayoutError, match="has no strides after its colon"):
        S[4:]
    with pytest.raises(tirx.LayoutError, match="exactly one colon"):
        S[4:1:2]
