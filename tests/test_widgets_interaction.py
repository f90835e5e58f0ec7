"""Hover, click and linked views (widgets.cellgrid, widgets.fragview, widgets.pair), driven
through the widgets' Python side as a front end would; the browser test checks the same in
Chromium."""

from __future__ import annotations

import re

from tirx.examples.warp_matmul import a_load_layout, a_mma_layout, d_mma_layout
from widgets import link, show_fragment, show_layout, show_pair

MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def _hover_group(css: str, index: int) -> tuple[list[int], str]:
    """The cells outlined together when cell ``index`` is hovered, and the rule's style."""
    for rule in css.split("}"):
        if ":has(> :is(" not in rule:
            continue
        kids = rule.split(":has(> :is(")[1].split("):hover)")[0]
        cells = [int(n) - 1 for n in re.findall(r"nth-child\((\d+)\)", kids)]
        if index in cells:
            return sorted(cells), rule.split("{")[1]
    raise AssertionError(f"no hover rule for cell {index}")


def test_hovering_a_cell_outlines_its_lanes_cells():
    view = show_layout(d_mma_layout, (16, 8))
    _ = view.widget
    css = view._cellgrid.css.value
    cells, style = _hover_group(css, 9 * 8 + 3)  # Out[9, 3] belongs to lane 5
    assert cells == [i for i, c in enumerate(view.grid.cells) if c.lane == 5]
    assert "outline:2px solid" in style
    tips = view._cellgrid.cells.tooltips
    assert "laneid = 1·4 + 1·1 = 5" in tips[9 * 8 + 3]  # the tooltip is the formula


def test_fragment_view_widget_clicks_and_blocks():
    view = show_fragment(MMA, "D", repeat=(2, 2))
    grid = view.widget and view._cellgrid
    assert len(grid.cells.options) == 32 * 16
    tracks = re.search(r"grid-template-columns:([^;]*);", grid.css.value).group(1).split()
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
