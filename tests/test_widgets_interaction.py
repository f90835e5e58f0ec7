"""Hover, click and linked views (widgets.cellgrid, widgets.fragview, widgets.pair), driven
through the widgets' Python side as a front end would; the browser test checks the same in
Chromium."""

from __future__ import annotations

import pytest

from tirx.examples.warp_matmul import a_load_layout, a_mma_layout, d_mma_layout
from widgets import link, show_fragment, show_layout, show_pair
from widgets.cellgrid import SCRIPT

MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def test_hovering_a_cell_outlines_its_lanes_cells():
    view = show_layout(d_mma_layout, (16, 8))
    grid = view.widget and view._cellgrid
    cells = grid.hover_of(9 * 8 + 3)  # Out[9, 3] belongs to lane 5
    assert cells == [i for i, c in enumerate(view.grid.cells) if c.lane == 5]
    assert "outline:2px solid" in SCRIPT.read_text()  # the front end's rule for them
    tips = grid.cells.tips
    assert "laneid = 1·4 + 1·1 = 5" in tips[9 * 8 + 3]  # the tooltip is the formula


def test_fragment_view_widget_clicks_and_blocks():
    view = show_fragment(MMA, "D", repeat=(2, 2))
    grid = view.widget and view._cellgrid
    assert len(grid.cells.labels) == 32 * 16
    tracks = grid.cells.tracks.split()
    assert tracks[8] != tracks[7] and tracks[0] == tracks[7]  # a gap before block column N1
    view.click(16 * 16 + 8 + 3)  # element (1, 1, 0, 3): lane 1, c1
    assert view.lane == 1 and view.focus == 16 * 16 + 8 + 3
    assert "T1:c1" in view._info.value and "lane = 4·(row % 8)" in view._info.value
    bold = [i for i, s in enumerate(view.cell_styles()) if s.highlighted]
    assert len(bold) == 4 * 4  # lane 1's four elements in each of the four blocks


def test_linked_views_light_the_same_element():
    elements = show_fragment(d_mma_layout, shape=(1, 1, 16, 8))
    words = show_layout(d_mma_layout, (16, 8))
    by_thread = show_fragment(MMA, "D", view="threads")
    link(elements, words, by_thread)
    for v in (elements, words, by_thread):
        _ = v.widget
    elements.click(9 * 8 + 3)
    assert words.focus == 9 * 8 + 3 and words.lane == 5
    assert by_thread.lane == 5
    cell = by_thread.grid.cells[by_thread.focus]
    assert (cell.lane, cell.slot) == (5, 3)  # lane 5's c3 is Out[9, 3]


def test_pair_explains_a_click_once_and_shows_whole_layouts():
    pair = show_pair(a_load_layout, a_mma_layout, left_shape=(4, 8, 4),
                     right_shape=(1, 1, 16, 8))  # fmt: skip
    _ = pair.widget
    texts = [side._widget.children[1].value for side in (pair.left, pair.right)]
    assert "4 @ laneid, 2, 1 @ laneid" in texts[1] and "overflow-wrap:anywhere" in texts[1]
    pair.left.click(5)
    info = pair._info.value
    assert info.count("element (") == 2  # left and right formula, each once
    assert "<pre>" not in pair.left._info.value and "<pre>" not in pair.right._info.value


# ---------------------------------------------------------------- linked without asking


def test_linkable_grids_draw_the_same_thing():
    from widgets.linking import linkable

    d_elems = show_fragment(d_mma_layout, shape=(1, 1, 16, 8)).grid
    d_words = show_layout(d_mma_layout, (16, 8)).grid
    a_elems, b_elems = (show_fragment(MMA, op).grid for op in ("A", "B"))
    pair = show_pair(a_load_layout, a_mma_layout, left_shape=(4, 8, 4),
                     right_shape=(1, 1, 16, 8))  # fmt: skip
    assert linkable(d_elems, d_words)  # the same coordinates
    assert not linkable(pair.left.grid, pair.right.grid)  # show_pair links those by register
    assert not linkable(a_elems, b_elems)  # A's (row, k) and B's (n, k) are other matrices
    assert not linkable(d_words, show_layout(a_load_layout, (4, 8, 4)).grid)  # other shape


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


def test_views_one_cell_shows_answer_each_others_clicks(shell):
    from IPython.utils.capture import capture_output

    shell.user_ns.update(show_fragment=show_fragment, show_layout=show_layout, d=d_mma_layout,
                         MMA=MMA)  # fmt: skip
    with capture_output():
        assert shell.run_cell(
            "elements = show_fragment(d, shape=(1, 1, 16, 8))\n"
            "words = show_layout(d, (16, 8))\n"
            "b = show_fragment(MMA, 'B')\n"
            "display(elements, words, b)\n", store_history=True,
        ).success  # fmt: skip
        assert shell.run_cell("later = show_layout(d, (16, 8))\nlater", store_history=True).success
    elements, words, b, later = (shell.user_ns[k] for k in ("elements", "words", "b", "later"))
    elements.click(9 * 8 + 3)
    assert words.focus == 9 * 8 + 3 and words.lane == 5
    assert b.focus is None and b.lane is None  # another matrix: not linked
    assert later.focus is None  # another cell's view: not linked
    words.click(0)
    assert elements.focus == 0 and elements.lane == 0


def test_views_linked_by_hand_stay_as_linked(shell):
    from IPython.utils.capture import capture_output

    one, two, three = (show_layout(d_mma_layout, (16, 8)) for _ in range(3))
    link(one, two)
    shell.user_ns.update(one=one, two=two, three=three)
    with capture_output():
        assert shell.run_cell("display(one, two, three)", store_history=True).success
    one.click(5)
    assert two.focus == 5 and three.focus is None


def test_a_wrong_check_shows_the_machine_beside_and_links_them():
    from tirx.layout import S, TileLayout, laneid
    from widgets import check_layout

    wrong = TileLayout(S[(4, 8, 4) : (1, 1 @ laneid, 8 @ laneid)])
    view = check_layout("ldmatrix.sync.aligned.m8n8.x4.shared.b16", "registers", wrong)
    machine = view.machine_view
    assert machine is not None and len(view.widget.children) == 2  # drawing | machine
    cell = view.grid.cells[1]  # element (0, 0, 1): drawn lane 8, the machine's lane 1
    assert machine.grid.cells[1].coord == cell.coord and machine.grid.cells[1].lane == 1
    view.click(1)
    assert machine.focus == 1 and machine.lane == view.lane == 8
    assert "DISAGREE" in view._info.value
    machine.click(1)
    assert view.focus == 1 and view.lane == 1
    assert view._repr_html_().count("<svg") == 2
    right = check_layout("ldmatrix.sync.aligned.m8n8.x4.shared.b16", "registers")
    assert right.ok and right.machine_view is None and right._repr_html_().count("<svg") == 1


def test_a_trace_shown_with_its_operand_is_linked(shell):
    from IPython.utils.capture import capture_output

    from widgets import run_instruction, show_trace

    trace = show_trace(run_instruction(MMA, target="sim"), operand="D")
    picture = show_fragment(MMA, "D")
    shell.user_ns.update(trace=trace, picture=picture)
    with capture_output():
        assert shell.run_cell("display(trace, picture)", store_history=True).success
    trace.click(9 * 8 + 3)  # Out[9, 3]: lane 5's c3
    assert picture.focus == 9 * 8 + 3 and picture.lane == 5
    assert "T5:c3" in picture._info.value
