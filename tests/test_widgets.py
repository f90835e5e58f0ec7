"""The layout views: pure drawings on Agg, and the ipywidgets wiring (no browser needed).

Drawings are checked by content: the colour of every cell patch, the text in it, the outline of
a highlighted lane. Widgets are driven through their Python side (set the selector, click a
cell button, type into the layout box), as a front end would.
"""

from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

import tirx  # noqa: E402
from tirx.examples.warp_matmul import (  # noqa: E402
    a_load_layout,
    a_mma_layout,
    b_mma_layout,
    d_mma_layout,
)
from tirx.layout import ComposeLayout, R, S, TileLayout, laneid, warpid  # noqa: E402
from widgets import show_instruction, show_layout, show_pair  # noqa: E402
from widgets.draw import cell_styles, figure, svg, text_table  # noqa: E402
from widgets.model import (  # noqa: E402
    fade,
    lane_color,
    layout_formula,
    layout_grid,
    parse_layout,
    slot_color,
)

MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
LDX4 = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"


def d_owner(row, col):  # PTX ISA, mma C/D fragment
    return 4 * (row % 8) + col // 2, 2 * (row // 8) + col % 2


def cells_of(fig):
    """{cell index: (face colour hex, label, edge colour hex, bold)} read back from a Figure."""
    from matplotlib.colors import to_hex

    ax = fig.axes[0]
    patches = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("cell-")}
    texts = {t.get_gid(): t for t in ax.texts if (t.get_gid() or "").startswith("cell-")}
    out = {}
    for gid, p in patches.items():
        t = texts[gid]
        out[int(gid[5:])] = (
            to_hex(p.get_facecolor()),
            t.get_text(),
            to_hex(p.get_edgecolor()),
            t.get_fontweight() == "bold",
        )
    return out


# ------------------------------------------------------------------------ pure drawing


def test_figure_has_one_colour_per_lane_and_isa_labels():
    grid = layout_grid(d_mma_layout, (1, 1, 16, 8))
    fig = figure(grid)
    cells = cells_of(fig)
    assert len(cells) == 128
    colour_of_lane = {}
    for i, (face, label, _, _) in cells.items():
        row, col = divmod(i, 8)
        lane, reg = d_owner(row, col)
        assert label == f"{lane}:{reg}"
        colour_of_lane.setdefault(lane, set()).add(face)
    assert all(len(c) == 1 for c in colour_of_lane.values())  # one colour per lane...
    assert len({c.pop() for c in colour_of_lane.values()}) == 32  # ...and 32 different ones
    png = io.BytesIO()
    fig.savefig(png, format="png")
    assert png.getvalue()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "layout, shape, owner",
    [
        (a_load_layout, (4, 8, 4), lambda i, row, w: (4 * row + w, i)),
        (a_mma_layout, (1, 1, 16, 8), lambda r, w: (4 * (r % 8) + w % 4, r // 8 + 2 * (w // 4))),
        (b_mma_layout, (1, 1, 8, 8), lambda n, w: (4 * n + w % 4, w // 4)),
    ],
)
def test_figure_slot_labels_follow_the_fragment_tables(layout, shape, owner):
    grid = layout_grid(layout, shape)
    cells = cells_of(figure(grid))
    for i, cell in enumerate(grid.cells):
        coord = tuple(c for c, e in zip(cell.coord, shape) if e > 1 or len(shape) == 3)
        lane, slot = owner(*coord)
        assert cells[i][1] == f"{lane}:{slot}"
        assert cells[i][0] == lane_color(lane)


def test_figure_highlights_the_chosen_lane():
    grid = layout_grid(d_mma_layout, (1, 1, 16, 8))
    plain, picked = cells_of(figure(grid)), cells_of(figure(grid, lane=5))
    chosen = {i for i in range(128) if d_owner(*divmod(i, 8))[0] == 5}
    assert len(chosen) == 4
    for i in range(128):
        face, label, edge, bold = picked[i]
        assert label == plain[i][1]
        if i in chosen:
            assert (face, edge, bold) == (plain[i][0], "#000000", True)
        else:
            assert face == fade(plain[i][0], 0.82) and not bold


def test_svg_and_text_faces():
    grid = layout_grid(d_mma_layout, (1, 1, 16, 8))
    picture = svg(grid, lane=7)
    assert picture.startswith("<svg") and picture.count('class="tirx-cell"') == 128
    assert 'data-lane="7" data-slot="3"' in picture
    table = text_table(grid)
    assert "cell = lane:slot" in table and " 31:3" in table


def test_lane_colours_are_distinct_and_readable():
    colours = [lane_color(lane) for lane in range(32)]
    assert len(set(colours)) == 32
    assert all(c.startswith("#") and len(c) == 7 for c in colours)


def test_replicas_are_drawn_and_selected_through_every_copy():
    layout = TileLayout(S[(8, 4) : (4, 1)] + R[4 : 8 @ laneid])
    grid = layout_grid(layout, (8, 4))
    assert grid.replicated
    assert all(len(c.copies) == 4 for c in grid.cells)
    assert grid.label(grid.cells[5]) == "0:5×4"
    assert "×n = the element has n copies" in text_table(grid)
    styles = cell_styles(grid, lane=16)  # lane 16 holds a copy of every element
    assert all(s.highlighted for s in styles)
    assert "copies: " in layout_formula(layout, (1, 1), (8, 4))


def test_other_thread_axes_are_named_before_the_lane():
    layout = TileLayout(S[(2, 8, 4) : (1 @ warpid, 4 @ laneid, 1 @ laneid)])
    grid = layout_grid(layout, (16, 4))
    assert grid.thread_axes == ("warpid",)
    assert grid.label(grid.cell(9, 2)) == "1/6:0"
    assert "cell = warpid/lane:slot" in text_table(grid)


def test_bank_view_shows_what_the_swizzle_fixes():
    plain = layout_grid(TileLayout(S[8, 64]), (8, 64))
    swizzled = layout_grid(ComposeLayout(3, 3, 3, TileLayout(S[8, 64])), (8, 64))
    assert plain.kind == swizzled.kind == "memory"
    assert plain.bank_conflicts() == 8 and swizzled.bank_conflicts() == 1
    column0 = [swizzled.bank(swizzled.cell(r, 0)) for r in range(8)]
    assert column0 == [0, 4, 8, 12, 16, 20, 24, 28]
    cells = cells_of(figure(swizzled))
    assert {cells[r * 64][0] for r in range(8)} == {lane_color(b) for b in column0}
    assert "swizzle m: 64 → 72" in layout_formula(
        ComposeLayout(3, 3, 3, TileLayout(S[8, 64])), (1, 0), (8, 64)
    )


def test_parse_layout_reads_specs_and_explains_mistakes():
    assert parse_layout("S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)]") == a_load_layout
    assert parse_layout(repr(d_mma_layout)) == d_mma_layout
    for bad, words in [
        ("S[(2, 8, 4, 2) : (2, 4 @ laneid, 1 @ laneid)]", "4 extents but 3 strides"),
        ("S[(8, 4) : (4 @ lane, 1)]", "NameError"),
        ("S[(8, 4", "cannot read"),
        ("42", "not a layout"),
        ("__import__('os')", "NameError"),
    ]:
        with pytest.raises(tirx.LayoutError, match=words):
            parse_layout(bad)


# ------------------------------------------------------------------------ widgets


def painted(view) -> list[tuple[str, str, bool]]:
    """(background, text colour, bold) of every cell, read from the looks the widget sends
    (each button's entry in a palette of inline styles)."""
    styles = (view.widget and view._cellgrid).painted()
    assert len(styles) == len(view.grid.cells)
    return [_look(s) for s in styles]


def _look(style: str) -> tuple[str, str, bool]:
    bg, ink = re.match(r"background:(#\w+);color:(#\w+)", style).groups()
    return bg, ink, "font-weight:bold" in style


def labels(view) -> list[str]:
    return list((view.widget and view._cellgrid).cells.labels)


def models(widget) -> int:
    """How many widget models the front end has to create for ``widget``."""
    seen, todo = set(), [widget]
    while todo:
        w = todo.pop()
        if id(w) in seen:
            continue
        seen.add(id(w))
        for name in ("children", "layout", "style"):
            value = getattr(w, name, None)
            todo.extend(value if isinstance(value, tuple) else [value] if value else [])
    return len(seen)


def test_layout_view_faces_and_lane_selector():
    view = show_layout(d_mma_layout, shape=(16, 8))
    bundle = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == str(view) and "cell = lane:slot" in str(view)
    assert "<svg" in bundle["text/html"]
    assert models(view.widget) < 60  # a handful of models, not one per cell
    assert len(labels(view)) == 128 and labels(view)[9] == "4:1"
    before = painted(view)
    assert [bg for bg, _, _ in before[:3]] == [lane_color(0), lane_color(0), lane_color(1)]
    view._lane.value = 5
    after = painted(view)
    changed = {i for i in range(128) if before[i][0] != after[i][0]}
    lane5 = {i for i in range(128) if d_owner(*divmod(i, 8))[0] == 5}
    assert changed == set(range(128)) - lane5
    assert {i for i in range(128) if after[i][2]} == lane5
    view._lane.value = -1  # "all"
    assert painted(view) == before


def test_clicking_a_cell_picks_its_lane_and_shows_the_formula():
    view = show_layout(d_mma_layout, shape=(16, 8))
    view.click(9 * 8 + 3)  # element (9, 3)
    assert view._lane.value == 5
    info = view._info.value
    assert "element (9, 3)" in info and "laneid = 1·4 + 1·1 = 5" in info and "m = " in info
    assert painted(view)[9 * 8 + 3][0] == "#222222"
    view._info.value = ""
    view.click(9 * 8 + 3)  # the same cell again: explained again
    assert "element (9, 3)" in view._info.value


def test_editing_the_layout_redraws_or_explains():
    view = show_layout(d_mma_layout, shape=(16, 8))
    assert view.widget is not None
    view._text.value = "S[(2, 8, 4, 2) : (2, 4 @ laneid, 1 @ laneid)]"
    assert "4 extents but 3 strides" in view._error.value
    assert view.layout == d_mma_layout and labels(view)[2] == "1:0"
    view._text.value = "S[(8, 4, 2) : (4 @ laneid, 1 @ laneid, 1)]"  # 64 elements, not 128
    assert "has 128 elements but the layout has 64" in view._error.value
    view._text.value = "S[(2, 8, 4, 2) : (1, 4 @ laneid, 1 @ laneid, 2)]"
    assert view._error.value == ""
    assert labels(view)[1] == "0:2" and labels(view)[8 * 8] == "0:1"


def test_memory_view_selects_banks():
    view = show_layout(ComposeLayout(0, 3, 3, TileLayout(S[8, 8])), (8, 8), dtype_bytes=16)
    assert view.widget is not None
    assert view._lane.description == "bank" and "1-way" in view.summary
    view._lane.value = 4
    bold = [i for i, (_, _, b) in enumerate(painted(view)) if b]
    assert len(bold) == 8 and sorted(view.grid.bank(view.grid.cells[i]) for i in bold) == [4] * 8


def test_big_grids_hold_buttons_for_one_page_of_columns():
    view = show_layout(TileLayout(S[32, 64]), (32, 64))
    grid = view.widget and view._cellgrid
    assert grid.windowed and grid.pages > 1  # 2048 cells: one page of buttons at a time
    assert len(grid.cells.labels) == 32 * grid.page_cols <= 1024
    view._lane.value = 3
    assert len([s for s in painted_page(view) if s[2]]) == 64  # columns 6 and 7 of every row
    view.click(5 * 64 + 63)  # the last column: its page is shown, the cell explained
    assert grid.page == grid.pages - 1 and view.focus == 5 * 64 + 63
    assert labels(view)[grid.buttons.index(5 * 64 + 63)] == str(5 * 64 + 63)
    assert "element (5, 63)" in view._info.value


def painted_page(view) -> list[tuple[str, str, bool]]:
    """(background, text colour, bold) of the buttons of the shown page."""
    return [_look(s) for s in view._cellgrid.painted()]


def test_pair_view_matches_registers_across_views():
    pair = show_pair(a_load_layout, a_mma_layout, left_shape=(4, 8, 4),
                     right_shape=(1, 1, 16, 8))  # fmt: skip
    assert "same 128 registers" in pair.summary()
    assert "<svg" in pair._repr_html_() and pair._repr_html_().count("<svg") == 2
    assert pair.widget is not None
    left, right = pair.left, pair.right
    # matrix 1 of the x4 load is the lower-left 8x8 word block of the mma view: slot 1 both
    for side in (left, right):
        fills = {}
        for cell, (bg, _, _) in zip(side.grid.cells, painted(side)):
            fills.setdefault(cell.slot, set()).add(bg)
        assert all(len(f) == 1 for f in fills.values()) and len(fills) == 4
        assert fills == {slot: {slot_color(slot)} for slot in range(4)}
    index = 1 * 32 + 2 * 4 + 3  # (matrix 1, row 2, word 3): lane 11, slot 1
    left.click(index)
    j = right.focus
    assert right.grid.cells[j].copies[0] == (11, 1) == left.grid.cells[index].copies[0]
    assert right.grid.cells[j].coord == (0, 0, 10, 3)
    assert painted(right)[j][0] == painted(left)[index][0] == "#222222"
    assert pair._lane.value == 11 and "lane 11, slot 1" in pair._info.value


def test_show_instruction_draws_the_contract_table_with_the_isa_labels():
    view = show_instruction(MMA, "D")
    for cell in view.grid.cells:
        assert (cell.lane, cell.slot) == d_owner(*cell.coord)
    assert labels(view)[:4] == ["T0:c0", "T0:c1", "T1:c0", "T1:c1"] and labels(view)[8] == "T4:c0"
    assert "T<lane>:c<i>" in str(view) and str(view).splitlines()[-1].startswith("D: the 16x8")
    view.click(0)
    assert "register = 2·(row // 8) + col % 2" in view._info.value
    a = show_instruction(MMA, "A")  # elements, two halves to a register, as the ISA draws
    assert len(a.grid.cells) == 256 and labels(a)[:3] == ["T0:a0", "T0:a1", "T1:a0"]
    assert labels(a)[8 * 16] == "T0:a2" and labels(a)[8] == "T0:a4"
    shared = show_instruction(tirx.T.ptx[LDX4], "shared")
    assert all(c.lane == 8 * c.coord[0] + c.coord[1] for c in shared.grid.cells)
    with pytest.raises(tirx.TirxError, match="has no operand 'E'"):
        show_instruction(MMA, "E")
    with pytest.raises(tirx.ContractError):
        show_instruction("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32", "D")
