"""A ContractError drawn under its message (widgets.errorview).

A kernel whose accumulator layout swaps the lane strides breaks the mma contract: the
picture shows the instruction's D fragment beside the user's layout with every element held
by the wrong lane marked, in a ``%%tirx`` cell and in an ordinary cell alike. Its corrected
twin (the seed's own layout) compiles and draws nothing.
"""

from __future__ import annotations

import inspect

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import tirx
from tirx.examples import warp_matmul
from widgets import operands as O
from widgets.errorview import SIDE, contract_picture, install

GOOD = "(4, 4, 2, 4 @ laneid, 1 @ laneid, 1)"
BAD = "(4, 4, 2, 1 @ laneid, 8 @ laneid, 1)"


def _seed_source(strides: str) -> str:
    text = inspect.getsource(warp_matmul)
    body = text.split("# --- begin verbatim ---")[1].split("# --- end verbatim ---")[0]
    body = "\n".join(line for line in body.splitlines() if not line.startswith("from tvm_tirx"))
    return body.replace(GOOD, strides)


def _kernel(strides: str, tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text("from tirx import T\nfrom tirx.layout import S, TileLayout, laneid\n"
                    + _seed_source(strides))  # fmt: skip
    ns = {"__name__": "kernel_under_test"}
    exec(compile(path.read_text(), str(path), "exec"), ns)  # noqa: S102 - our own test kernel
    return ns["warp_matmul"]


def _expected_mismatches():
    """Elements whose lane differs between the two accumulator layouts, counted directly."""
    from tirx.layout import S, TileLayout, laneid

    good = TileLayout(S[(2, 8, 4, 2) : (2, 4 @ laneid, 1 @ laneid, 1)])
    bad = TileLayout(S[(2, 8, 4, 2) : (2, 1 @ laneid, 8 @ laneid, 1)])
    return sum(
        good.apply(r, c, shape=(16, 8))["laneid"] != bad.apply(r, c, shape=(16, 8))["laneid"]
        for r in range(16)
        for c in range(8)
    )


def test_picture_marks_the_cells_held_by_the_wrong_lane(tmp_path):
    with pytest.raises(tirx.ContractError) as info:
        tirx.compile(_kernel(BAD, tmp_path), "sim")
    pic = contract_picture(info.value)
    assert pic is not None and pic.actual is not None
    assert pic.mismatches == _expected_mismatches() > 0
    marked = set(pic.expected.marks)
    assert marked == set(pic.actual.marks) and len(marked) == pic.mismatches
    isa = O.operand_fragment("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "D")
    for i, (mine, want) in enumerate(zip(pic.actual.fragment.elements, isa.elements)):
        assert (i in marked) == (mine.lane != want.lane)
    html = pic._repr_html_()
    assert html.count("<svg") == 2 and "your layout" in html and "✗" in html
    assert f"{pic.mismatches} element(s)" in html


def test_picture_fits_the_output_and_links_its_sides(tmp_path):
    import re

    with pytest.raises(tirx.ContractError) as info:
        tirx.compile(_kernel(BAD, tmp_path), "sim")
    html = contract_picture(info.value)._repr_html_()
    assert "overflow-x" not in html and "flex-wrap:wrap" in html  # wraps, never scrolls
    sides = re.findall(r'class="tirx-contract-side" style="flex:0 0 auto;max-width:100%"', html)
    widths = [int(w) for w in re.findall(r'<svg[^>]* width="(\d+)"', html)]
    assert len(sides) == len(widths) == 2 and max(widths) <= SIDE  # two fit 1,000 px
    assert "svg{width:100%" not in html  # drawn at their natural size, never scaled down
    scope = re.search(r'class="tirx-contract-picture (tirx-cp\d+)"', html).group(1)
    for i in (0, 127):  # a click (focus) on element i outlines element i on both sides
        assert f".{scope}:has(.c{i}:focus) .c{i} rect{{stroke:" in html
    assert html.count('tabindex="-1"') == 2 * 128


def test_corrected_twin_compiles_and_other_errors_draw_nothing(tmp_path):
    tirx.compile(_kernel(GOOD, tmp_path), "sim")  # the seed's layout: no error at all
    assert contract_picture(tirx.ContractError("a wrong dtype, nothing to draw")) is None
    assert contract_picture(ValueError("not ours")) is None


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    assert shell.run_cell("%load_ext tirx").success
    assert install(shell)
    return shell


def test_notebook_shows_the_picture_under_the_error(ip, tmp_path):
    cell = "%%tirx --target sim -s none\n" + _seed_source(BAD)
    with capture_output() as out:
        result = ip.run_cell(cell)
    assert not result.success
    assert "operand D" in out.stdout + out.stderr  # the short error text is still there
    shown = [o.data.get("text/html", "") for o in out.outputs]
    assert any("tirx-contract-picture" in h and h.count("<svg") == 2 for h in shown)

    with capture_output() as good:
        assert ip.run_cell("%%tirx --target sim -s none\n" + _seed_source(GOOD)).success
    assert not any("tirx-contract-picture" in o.data.get("text/html", "") for o in good.outputs)


def test_ordinary_cells_get_the_picture_too(ip, tmp_path):
    ip.user_ns["_bad_kernel"] = _kernel(BAD, tmp_path)
    with capture_output() as out:
        assert not ip.run_cell("import tirx\ntirx.compile(_bad_kernel, 'sim')").success
    assert any("tirx-contract-picture" in o.data.get("text/html", "") for o in out.outputs)


LOAD_GOOD = "S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)]"
LOAD_BAD = "S[(4, 8, 4) : (1, 1 @ laneid, 8 @ laneid)]"


def test_a_long_message_wraps_and_both_sides_name_the_matrices(tmp_path):
    import re

    path = tmp_path / "ldm.py"
    path.write_text("from tirx import T\nfrom tirx.layout import S, TileLayout, laneid\n"
                    + _seed_source(GOOD).replace(LOAD_GOOD, LOAD_BAD, 1))  # fmt: skip
    ns = {"__name__": "ldm_under_test"}
    exec(compile(path.read_text(), str(path), "exec"), ns)  # noqa: S102 - our own test kernel
    with pytest.raises(tirx.ContractError) as info:
        tirx.compile(ns["warp_matmul"], "sim")
    pic = contract_picture(info.value)
    # the user's side is cut into blocks as the instruction's is, and named alike
    assert pic.expected.fragment.block_labels == pic.actual.fragment.block_labels
    assert pic.actual.fragment.block_labels[1][:2] == ("matrix 0", "matrix 1")
    svg = pic._panels().svg()
    width = float(re.search(r'width="([\d.]+)"', svg).group(1))
    title = re.findall(r'<text x="6" y="\d+" font-size="12" font-weight="bold">([^<]*)</text>', svg)
    first = info.value.message.splitlines()[0]
    assert len(title) > 1 and " ".join(title) == first.replace("'", "&#x27;")
    assert all(len(line) * 7.2 <= width for line in title)  # each line fits the picture
