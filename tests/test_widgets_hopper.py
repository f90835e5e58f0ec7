"""The Hopper pictures (widgets.operands, widgets.smem, widgets.tma, widgets.show): wgmma's
accumulator and register A over a warpgroup, its shared operands as core matrices with the
descriptor tirx derives, a TMA box and where it lands (against the simulator), and what the
tools say for the families with no register fragment. Each checked against a reading of the
PTX ISA written out here, not against the contract tables the pictures are drawn from."""

from __future__ import annotations

import dataclasses
import re
import struct

import numpy as np
import pytest

import tirx
from tirx.isa import OperandSpec, Role
from widgets import operands as O
from widgets import picture, tikz
from widgets.show import show_fragment, show_instruction
from widgets.smem import SWIZZLES, chunk_addresses
from widgets.tma import landing, show_tma_box

W64 = "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"
W256 = "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"
TMA = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"


def isa_d(row: int, col: int) -> tuple[int, int]:
    """The ISA's m64nNk16 f32 accumulator figure: warp w holds rows 16w..16w+15 as mma.sync's
    m16n8 D fragment, column block j of 8 in registers 4j..4j+3."""
    w, r, j, c = row // 16, row % 16, col // 8, col % 8
    return 32 * w + 4 * (r % 8) + c // 2, 4 * j + 2 * (r // 8) + c % 2


def isa_a(row: int, col: int) -> tuple[int, int]:
    """The ISA's m64nNk16 A figure for 16-bit elements in registers: warp w's rows as
    mma.sync's m16n8k16 A; element a_i, i = 4·(col // 8) + 2·((row % 16) // 8) + col % 2."""
    w, r = row // 16, row % 16
    return 32 * w + 4 * (r % 8) + (col % 8) // 2, 4 * (col // 8) + 2 * (r // 8) + col % 2


def test_the_accumulator_is_the_isa_figure_over_four_warps():
    view = show_fragment(W64, "D")
    frag = view.fragment
    assert (frag.rows, frag.cols, frag.block, frag.holder) == (64, 64, (16, 8), "thread")
    assert frag.block_labels[0] == ("warp 0", "warp 1", "warp 2", "warp 3")
    for _i, e in enumerate(frag.elements):
        thread, reg = isa_d(*e.coord)
        assert (e.lane, e.register) == (thread, reg)
        assert frag.label(e) == f"T{thread}:d{reg}"
    text = str(view)
    assert "cell = T<thread>:d<i>" in text and "thread = 32·warp + lane" in text
    assert text.splitlines()[4].split()[1:3] == ["T0:d0", "T0:d1"]
    assert view._lane_count() == 128 and view._select_name() == "thread"


def test_a_wide_accumulator_goes_in_pages_of_columns_in_every_form(tmp_path):
    view = show_fragment(W256, "D")
    assert view.pages == 32  # 256 columns, 8 to a page (64 rows: a page is one band)
    svg = view.svg(page=3)
    cols = sorted({int(m) for m in re.findall(r'data-coord="\d+,(\d+)"', svg)})
    assert cols == list(range(24, 32)) and "page 4 of 32: columns 24–31 of 256" in svg
    assert f'data-coord="17,24" data-lane="{isa_d(17, 24)[0]}"' in svg
    width = float(re.search(r'<svg[^>]* width="([\d.]+)"', svg).group(1))
    assert width <= 880  # read at 100 % in a notebook 1,000 px wide
    data = view.png(tmp_path / "d.png", page=3)
    w, h = struct.unpack(">II", data[16:24])
    assert abs(w - width * 2) <= 2  # 200 dpi: 2 px for each px of the SVG
    tex = view.tikz(page=3)
    thread, reg = isa_d(9, 24)
    assert tex.count("\\filldraw") == 64 * 8 and f"{{T{thread}:d{reg}}}" in tex
    grid = view.widget and view._cellgrid
    assert grid.pages > 1 and grid.page_cols % 8 == 0  # the widget pages its columns too
    view.click(5 * 256 + 200)  # element (5, 200): its page is shown, its thread selected
    assert grid.page == 200 // grid.page_cols and view.lane == isa_d(5, 200)[0]


def test_register_a_is_the_contracts_and_equals_the_isa_figure():
    view = show_fragment(W64, "A", form="registers")
    frag = view.fragment
    assert (frag.rows, frag.cols, frag.holder) == (64, 16, "thread")
    for e in frag.elements:  # the contract's rs operand, checked against the figure above
        thread, i = isa_a(*e.coord)
        assert frag.label(e) == f"T{thread}:a{i}", e.coord
    # the picture is drawn from whatever register form the contract carries
    contract = tirx.instruction_contract(W64)
    own = OperandSpec("A", Role.REG_IN, "uint32", (64, 8), 4, lambda c: (c[0] % 32 + 96, 0),
                      elements_per_word=2)  # fmt: skip
    params = tuple(p for p in contract.params if p[0] != "a_registers")
    carried = dataclasses.replace(contract, params=(*params, ("a_registers", own)))
    frag = O.operand_fragment(carried, "A", form="registers")
    assert frag.elements[0].lane == 96
    with pytest.raises(tirx.TirxError, match="no register form"):
        show_fragment(W64, "B", form="registers")  # B is read from shared memory only
    fp8 = show_fragment(
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3", "A", form="registers"
    )
    assert (fp8.fragment.rows, fp8.fragment.cols) == (64, 32)  # four e4m3 per 32-bit word


@pytest.mark.parametrize("swizzled", [True, False])
def test_the_descriptor_drawn_is_the_one_tirx_derives(swizzled):
    """The descriptor of the picture equals the constant the lowering ORs into the start
    address for tests/wgmma_kernels.py's tiles (128-byte swizzled, or core matrices)."""
    from tests.wgmma_kernels import wgmma_kernel

    exe = tirx.compile(wgmma_kernel(64, swizzled=swizzled), target="sim")
    lowered = next(ln for ln in exe.script(lowered=True).splitlines() if "mma_async" in ln)
    derived = {int(v) for v in re.findall(r"\| (\d+)", lowered)}
    mode = "128B" if swizzled else "none"
    _, desc = chunk_addresses(64, mode)
    assert derived == {desc.value}
    step = re.search(r"smem_addr\(As\) \+ kk \* (\d+)", lowered).group(1)
    assert chunk_addresses(64, mode, k=1 if swizzled else 0)[1].start == (
        int(step) if swizzled else 0
    )


def test_core_matrices_under_each_swizzle():
    for mode, (width, _, value) in SWIZZLES.items():
        chunks, desc = chunk_addresses(64, mode)
        for (r, c), (plain, at) in chunks.items():
            if mode == "none":  # 8 x 16-byte rows contiguous, LBO 128 along K, SBO 256 down
                assert at == plain == (r // 8) * 256 + c * 128 + (r % 8) * 16
            else:  # rows of `width` bytes; chunk c of row r XOR-ed with its group's place
                n, mask = width // 16, (1 << SWIZZLES[mode][1]) - 1
                assert plain == r * width + 16 * c
                assert at == r * width + 16 * (c ^ ((r * n + c) >> 3 & mask)), (mode, r, c)
        assert desc.sbo == 8 * (width or 32) and (desc.lbo == 128) == (mode == "none")
        assert desc.value >> 62 == value


def test_shared_operand_picture_faces(tmp_path):
    pic = show_fragment(W64, "B", swizzle="64B", k=1)
    text = str(pic)
    assert "core matrices" in text and "SBO = 512 B" in text and "slice k=1" in text
    left, right = pic.views
    assert left.fragment.block == (8, 1) and left.fragment.block_labels[0][:2] == ("start", "+SBO")
    # slice k=1 starts 32 bytes into each 64-byte row: row 1's chunk 0 at byte 96 (line 0,
    # slot 6, its group's XOR 0), row 2's at 160 ^ 16 = 176 (line 1, slot 3)
    assert right.fragment.at(0, 6).text == "r1·k0" and right.fragment.at(1, 3).text == "r2·k0"
    html = pic._repr_html_()
    assert html.count("<svg") == 2 and ":has(.x0_0:focus) .x0_0 rect" in html
    for suffix in (".svg", ".png", ".tex"):
        assert pic.save(tmp_path / f"b{suffix}").stat().st_size > 1000
    assert show_instruction(W64, "A", swizzle="none").notes[1].startswith("LBO = 128 B")


def test_the_tma_box_lands_where_the_simulator_puts_it(tmp_path):
    from tests.tma_kernels import box_kernel

    shape, box, coords = (128, 128), (64, 64), (48, 8)
    a = (np.arange(128 * 128) % 2048).astype(np.float16).reshape(shape)
    out = np.zeros(box, dtype=np.float16)
    exe = tirx.compile(box_kernel(tmp_path, shape=shape, box=box, coords=coords, raw=True),
                       target="sim")  # fmt: skip
    exe(a, out)
    image = out.reshape(-1)  # shared memory in address order, 2 bytes an element
    for (r, j), offset in landing(box, 2, "128B").items():
        first = image[offset // 2]
        want = a[coords[0] + r, coords[1] + 8 * j] if coords[1] + 8 * j < 128 else 0
        assert first == want, (r, j, offset)
    view = show_tma_box(shape, box, coords)
    shared = view.views[1].fragment
    assert shared.at(3, 1 ^ 3).text == "3·1"  # row 3's chunk 1 sits in slot 1 ^ 3 of line 3
    assert "8192 bytes" in view.notes[0]


def test_a_box_past_the_tensor_edge_reads_zeros():
    view = show_tma_box((100, 72), (32, 64), (80, 16))
    tensor = view.views[0].fragment
    zeros = [e for e in tensor.elements if e.text == "0"]
    assert zeros and all("read as zeros" in e.info for e in zeros)
    assert "928 element(s)" in view.notes[-1]
    with pytest.raises(tirx.TirxError, match="at most 128 bytes"):
        show_tma_box((128, 256), (8, 128), (0, 0), swizzle="128B")


@pytest.mark.parametrize(
    "text", [TMA, "cp.async.ca.shared.global", "mbarrier.arrive.shared::cta.b64"]
)
def test_families_without_fragments_say_why_and_what_they_have(text):
    contract = tirx.instruction_contract(text)
    why = tirx.isa.spec_of(contract.family).no_picture
    for call in (show_fragment, show_instruction):
        with pytest.raises(tirx.TirxError) as info:
            call(text)
        assert why in str(info.value) and "show_tma_box" in info.value.hint


def test_immediates_have_nothing_to_draw():
    with pytest.raises(tirx.TirxError, match="operand scale_d of .* is a scalar"):
        show_instruction(W64, "scale_d")


def test_picture_faces_for_the_accumulator(tmp_path):
    frag = show_fragment(W64, "D").fragment
    svg = picture.svg(frag)
    assert ":has(.l37:hover) .l37 rect" in svg  # hovering thread 37 outlines its cells
    assert tikz.tikz(frag).count("\\filldraw") == 64 * 8
