"""Element-level fragment pictures (widgets.fragment, widgets.picture, widgets.tikz).

Every instruction operand's picture is compared, element by element, with the PTX ISA's
fragment figures written out below independently of tirx (lane and element index ``T5:a2``).
The text and SVG forms of the seed's five layouts and of each operand are goldens under
``tests/goldens/fragments`` (regenerate with ``TIRX_UPDATE_GOLDENS=1`` after checking them).
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest

from tirx.errors import TirxError
from tirx.layout import ComposeLayout, S, TileLayout, laneid
from widgets import fragment as F
from widgets import operands as O
from widgets import picture, tikz
from widgets.show import show_fragment

GOLDENS = Path(__file__).parent / "goldens" / "fragments"
UPDATE = os.environ.get("TIRX_UPDATE_GOLDENS") == "1"
K16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
K8 = "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32"
LDX4 = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
LDX2 = "ldmatrix.sync.aligned.m8n8.x2.shared.b16"
STX4 = "stmatrix.sync.aligned.m8n8.x4.shared.b16"

# The seed's five layouts (docs/seed), with the shapes the guide views them in; A and B are
# u32 words of f16 halves, the accumulator f32 values.
SEED = {
    "a_load": (TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)]), (4, 8, 4), 16, 32),
    "b_load": (TileLayout(S[(2, 8, 4) : (1, 4 @ laneid, 1 @ laneid)]), (2, 8, 4), 16, 32),
    "a_mma": (
        TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)]),
        (1, 1, 16, 8),
        16,
        32,
    ),  # fmt: skip
    "b_mma": (
        TileLayout(S[(1, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)]),
        (1, 1, 8, 8),
        16,
        32,
    ),  # fmt: skip
    "d_mma": (
        TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)]),
        (1, 1, 16, 8),
        32,
        32,
    ),  # fmt: skip
}


# --------------------------------------------------------------------------- the PTX ISA


def isa_mma_a(r, c, k):  # m16n8k{8,16} .f16/.bf16 A: a_i, row g (+8), col 2t + (i & 1) (+8)
    return 4 * (r % 8) + (c % 8) // 2, c % 2 + 2 * (r // 8) + (4 * (c // 8) if k == 16 else 0)


def isa_mma_b(n, kk, k):  # B, drawn N-major (n, k): b_i, row(k) 2t + (i & 1) (+8), col(n) g
    return 4 * n + (kk % 8) // 2, kk % 2 + (2 * (kk // 8) if k == 16 else 0)


def isa_mma_cd(r, c):  # C/D f32: c_i, row g (+8 for c2, c3), col 2t + (i & 1)
    return 4 * (r % 8) + c // 2, c % 2 + 2 * (r // 8)


def isa_ldmatrix(mat, r, c):  # each 8x8 b16 matrix: lane 4r + c // 2 holds two halves
    return 4 * r + c // 2, 2 * mat + c % 2


def _index(frag, e):
    return e.register * frag.per_register + e.part


CASES = [
    (K16, "A", lambda co: isa_mma_a(*co, 16), (16, 16)),
    (K16, "B", lambda co: isa_mma_b(*co, 16), (8, 16)),
    (K16, "C", lambda co: isa_mma_cd(*co), (16, 8)),
    (K16, "D", lambda co: isa_mma_cd(*co), (16, 8)),
    (K8, "A", lambda co: isa_mma_a(*co, 8), (16, 8)),
    (K8, "B", lambda co: isa_mma_b(*co, 8), (8, 8)),
    (LDX4, "registers", lambda co: isa_ldmatrix(*co), (8, 32)),
    (LDX2, "registers", lambda co: isa_ldmatrix(*co), (8, 16)),
    (STX4, "registers", lambda co: isa_ldmatrix(*co), (8, 32)),
]


@pytest.mark.parametrize("instr,operand,isa,size", CASES)
def test_operand_fragments_match_the_isa_figures(instr, operand, isa, size):
    frag = O.operand_fragment(instr, operand)
    assert (frag.rows, frag.cols) == size
    for e in frag.elements:
        lane, i = isa(e.coord)
        assert (e.lane, _index(frag, e)) == (lane, i), e.coord
        assert frag.label(e) == f"T{lane}:{frag.prefix}{i}"


def test_labels_read_as_the_isa_draws_them():
    a = O.operand_fragment(K16, "A")
    assert [a.label(a.at(0, c)) for c in range(3)] == ["T0:a0", "T0:a1", "T1:a0"]
    assert a.label(a.at(8, 9)) == "T0:a7" and a.axes == ("row (M)", "column (K)")
    d = O.operand_fragment(K16, "D")
    assert d.label(d.at(9, 3)) == "T5:c3" and d.per_register == 1


def test_element_width_is_a_parameter():
    s8 = O.operand_fragment(K16, "A", element_bits=8)  # 16 x 32 bytes, four per register
    assert (s8.rows, s8.cols) == (16, 32) and s8.per_register == 4
    assert [s8.label(s8.at(0, c)) for c in (0, 3, 4)] == ["T0:a0", "T0:a3", "T1:a0"]
    with pytest.raises(TirxError, match="12-bit"):
        F.layout_fragment(SEED["a_mma"][0], (1, 1, 16, 8), element_bits=12)


def test_repeats_tile_into_blocks_not_a_column():
    frag = O.operand_fragment(K16, "D", repeat=(2, 2))
    assert (frag.rows, frag.cols, frag.block) == (32, 16, (16, 8))
    assert frag.block_labels == (("M0", "M1"), ("N0", "N1"))
    assert frag.at(16, 8).coord == (1, 1, 0, 0) and frag.label(frag.at(16, 8)) == "T0:c0"
    svg = picture.svg(frag, hover=False)
    assert len(re.findall(r'<line [^>]*stroke-width="2.5"', svg)) == 2  # one row, one column
    layout = TileLayout(S[(2, 2, 2, 8, 4, 2) : (8, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
    tile = F.layout_fragment(layout, (2, 2, 16, 8), repeat_names=("M", "N"))
    assert (tile.rows, tile.cols) == (32, 16)
    assert tile.label(tile.at(16, 8)) == "T0:v12"  # M1 N1 starts at slot 12


def test_thread_major_lists_each_lanes_elements():
    a = O.operand_fragment(K16, "A")
    by_lane = F.thread_major(a)
    assert (by_lane.rows, by_lane.cols) == (32, 8)
    for lane in range(32):
        for i in range(8):
            coord = by_lane.at(lane, i).coord
            assert isa_mma_a(*coord, 16) == (lane, i)
    with pytest.raises(TirxError, match="register fragment"):
        F.thread_major(F.bank_fragment(TileLayout(S[8, 64]), (8, 64)))


def test_bank_view_of_shared_layouts():
    plain = F.bank_fragment(TileLayout(S[8, 64]), (8, 64), element_bits=16)
    swizzled = F.bank_fragment(ComposeLayout(3, 3, 3, TileLayout(S[8, 64])), (8, 64))
    assert F.bank_conflicts(plain) == 8 and F.bank_conflicts(swizzled) == 1
    e = swizzled.at(3, 40)
    assert e.address == 240 and swizzled.bank(e) == 240 * 2 // 4 % 32
    assert "b24" in F.text(swizzled).splitlines()[8]
    with pytest.raises(TirxError, match="shared-memory layout"):
        F.bank_fragment(SEED["d_mma"][0], (16, 8))


def test_legends_break_between_phrases():
    sentence = (
        "cell = T<lane>:a<i> (element i of the lane's fragment); colour = lane; ×n = n copies"
    )
    for width in (30, 45, 60, 200):
        lines = picture.legend_lines(sentence, width)
        assert " ".join(lines).replace(";  ", "; ") == sentence.replace("; ", "; ")
        assert all(not line.startswith(";") for line in lines)
        if width >= 60:  # every phrase fits on a line: no phrase is split
            phrases = sentence.split("; ")
            assert all(any(p in line for line in lines) for p in phrases)


def test_svg_hover_and_cell_data():
    svg = picture.svg(O.operand_fragment(K16, "A"))
    assert svg.count('class="tirx-el"') == 256
    assert ":has(.l5:hover) .l5 rect" in svg  # hovering any of lane 5's cells outlines them all
    assert re.search(r'data-index="18" data-coord="1,2" data-lane="5"', svg)
    tip = re.search(r'<text class="tirx-tip t18"[^>]*>([^<]*)</text>', svg).group(1)
    assert tip.startswith("element (1, 2) = T5:a0")


def test_png_at_print_resolution(tmp_path):
    frag = O.operand_fragment(K16, "A")
    data = picture.png(frag, dpi=150, path=tmp_path / "a.png")
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and (tmp_path / "a.png").read_bytes() == data
    width, height = struct.unpack(">II", data[16:24])
    g = picture.geometry(frag, picture.looks(frag))
    assert abs(width - g.width * 1.5) <= 2 and abs(height - g.height * 1.5) <= 2
    with pytest.raises(TirxError, match="dpi=80"):
        picture.png(frag, dpi=80)


def test_tikz_and_save(tmp_path):
    frag = O.operand_fragment(K16, "B")
    tex = tikz.tikz(frag, standalone=True)
    assert tex.startswith("\\documentclass") and tex.count("\\filldraw") == 128
    assert "{T5:b2}" in tex and tex.count("\\begin{tikzpicture}") == 1
    view = show_fragment(K16, "B")
    for suffix in (".svg", ".png", ".tex"):
        path = view.save(tmp_path / f"b{suffix}")
        assert path.stat().st_size > 1000
    assert (tmp_path / "b.svg").read_text().startswith("<svg")
    with pytest.raises(TirxError, match="picture format"):
        view.save(tmp_path / "b.bmp")


def test_marks_show_in_every_form():
    frag = O.operand_fragment(K16, "D")
    assert "!T0:c0" in F.text(frag, marks=[0])
    assert picture.svg(frag, marks=[0]).count(picture.MARK_COLOR) == 1
    assert "tirxmark,very thick" in tikz.tikz(frag, marks=[0])


# --------------------------------------------------------------------------- goldens


def _normalised(svg: str) -> str:
    return re.sub(r"tirx-f\d+", "tirx-fN", svg)


def _golden(name: str, text: str) -> None:
    path = GOLDENS / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden {path}; run with TIRX_UPDATE_GOLDENS=1 and check it"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden"


GOLDEN_OPERANDS = [(K16, "A"), (K16, "B"), (K16, "C"), (K16, "D"), (K8, "A"), (K8, "B"),
                   (LDX4, "registers"), (LDX4, "shared"), (STX4, "registers")]  # fmt: skip


def _stem(instr, operand):
    parts = instr.split(".")
    shape = parts[3] if parts[0] == "mma" else parts[4]  # m16n8k16, or x4
    kind = f"_{parts[-2]}" if parts[0] == "mma" else ""  # the A/B type
    return f"{parts[0]}_{shape}{kind}_{operand}"


@pytest.mark.parametrize("instr,operand", GOLDEN_OPERANDS)
def test_operand_goldens(instr, operand):
    frag = O.operand_fragment(instr, operand)
    _golden(_stem(instr, operand) + ".txt", F.text(frag) + "\n")
    _golden(_stem(instr, operand) + ".svg", _normalised(picture.svg(frag, hover=False)) + "\n")


@pytest.mark.parametrize("name", sorted(SEED))
def test_seed_layout_goldens(name):
    layout, shape, bits, unit = SEED[name]
    frag = F.layout_fragment(layout, shape, element_bits=bits, unit_bits=unit, title=name)
    _golden(f"seed_{name}.txt", F.text(frag) + "\n")
    _golden(f"seed_{name}.svg", _normalised(picture.svg(frag, hover=False)) + "\n")


def test_seed_mma_layouts_draw_the_instruction_fragments():
    """The seed's A, B and D layouts, drawn in elements, are the ISA's figures exactly."""
    for name, instr, operand in (("a_mma", K16, "A"), ("b_mma", K16, "B"), ("d_mma", K16, "D")):
        layout, shape, bits, unit = SEED[name]
        mine = F.layout_fragment(layout, shape, element_bits=bits, unit_bits=unit)
        isa = O.operand_fragment(instr, operand)
        assert [e.lane for e in mine.elements] == [e.lane for e in isa.elements], name


def test_a_long_title_wraps_inside_the_picture():
    d = TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 1 @ laneid, 8 @ laneid, 1)])
    title = f"your layout: {d!r}"
    frag = F.layout_fragment(d, (1, 1, 16, 8), title=title)
    g = picture.geometry(frag, picture.looks(frag))
    assert len(g.title) > 1 and " ".join(g.title) == title  # every word, in order
    assert all(len(line) * 7.3 <= g.width - 4 for line in g.title)  # 12 px bold monospace


def test_a_layout_over_16_bit_slots_names_each_slot_once():
    """A layout over a float16 local buffer steps one 16-bit slot per register index: slot k
    of a lane is element k (v0, v1, ...), not the halves of 32-bit words (v0, v2, ...)."""
    slots = F.layout_fragment(TileLayout(S[(8, 4) : (1 @ laneid, 1)]), (8, 4),
                              element_bits=16, unit_bits=16)  # fmt: skip
    assert [slots.label(e) for e in slots.elements[:5]] == ["T0:v0", "T0:v1", "T0:v2", "T0:v3",
                                                            "T1:v0"]  # fmt: skip
    assert "1 per 16-bit slot" in slots.legend()
    assert [e.coord for e in F.thread_major(slots).elements[:4]] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    words = F.layout_fragment(TileLayout(S[(8, 2) : (1 @ laneid, 1)]), (8, 2),
                              element_bits=16, unit_bits=32)  # fmt: skip
    assert [words.label(e) for e in words.elements[:4]] == ["T0:v0", "T0:v1", "T0:v2", "T0:v3"]
    assert "2 per 32-bit register" in words.legend()


def test_a_register_layout_no_warp_can_hold_is_said_under_its_picture():
    from widgets import show_fragment, show_layout

    bad = TileLayout(S[(8, 8) : (4 @ laneid, 1 @ laneid)])  # lanes 0..35, (0, 4) and (1, 0) share
    for view, slot in ((show_fragment(bad), "v0"), (show_layout(bad), "slot 0")):
        assert (f"elements (0, 4) and (1, 0) share lane 4's {slot} (one slot: writing one "
                "overwrites the other)") in view.summary  # fmt: skip
        assert "lanes 32..35 are past a warp's 32" in view.summary
        assert view.summary in str(view)
    good = TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])
    assert show_fragment(good).summary == "" and show_layout(good).summary == ""
    # the copies of a replicated element are one element's, not two in one slot
    assert show_layout("S[(8, 4) : (4 @ laneid, 1 @ laneid)] + R[2 : 1 @ warpid]").summary == ""


def test_a_layouts_blocks_are_named_by_their_dimension():
    from widgets import show_fragment

    view = show_fragment(TileLayout(S[(2, 2, 8, 4) : (2, 1, 4 @ laneid, 1 @ laneid)]))
    assert view.fragment.block_labels == (("dim 0 = 0", "dim 0 = 1"), ("dim 1 = 0", "dim 1 = 1"))
