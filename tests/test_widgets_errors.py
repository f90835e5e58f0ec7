"""Errors as pictures and from the user's side: a failed ``%%tirx --check`` shows the map of the
wrong output elements (widgets.mismatch_map), and a tirx error raised by an ordinary cell shows the
cell's own line first with tirx's frames left out (widgets.tracebacks), while any other
exception keeps its whole traceback."""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from tests.test_magic import SEED_CELL
from widgets.mismatch_map import HEAT, mismatch

WRONG_AT = "(lambda r: r.index_put_((torch.tensor([3, 9]), torch.tensor([2, 5])), " \
           "torch.tensor([1.0, 5000.0]), accumulate=True))(a.float() @ b.float().T)"  # fmt: skip


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    assert shell.run_cell("%load_ext tirx").success
    shell.run_cell(
        "import torch\ntorch.manual_seed(0)\n"
        "a = torch.randn((16, 16), dtype=torch.float16)\n"
        "b = torch.randn((8, 16), dtype=torch.float16)\nout = torch.zeros((16, 8))\n"
    )
    return shell


def test_a_failed_check_shows_which_elements_are_wrong(ip):
    with capture_output() as cap:
        result = ip.run_cell(f'%%tirx -s none --run "a, b, out" --check "{WRONG_AT}"\n{SEED_CELL}',
                             store_history=True)  # fmt: skip
    assert result.success
    report = ip.user_ns["_tirx"][0].run
    assert report.passed is False
    shown = [o.data for o in cap.outputs if "tirx-mismatch" in o.data.get("text/html", "")]
    assert len(shown) == 1
    text = shown[0]["text/plain"]
    out, ref = ip.user_ns["out"], ip.user_ns["a"].float() @ ip.user_ns["b"].float().T
    assert text.startswith("2 of 128 elements of out are wrong (atol 0.001, rtol 0.001)")
    assert (
        f"the first is out[3, 2]: expected {ref[3, 2].item() + 1:.6g}, got {out[3, 2].item():.6g}"
        in text
    )
    assert "the worst out[9, 5]" in text
    rows = text.splitlines()[2:]  # the map, X where wrong
    assert rows[3][2 + 2] == "X" and rows[9][2 + 5] == "X" and "".join(rows).count("X") == 2
    html = shown[0]["text/html"]
    assert html.count('class="tirx-el"') == 128 and "|out-ref|/tol" in html  # the heat key
    assert shown[0]["image/png"]


def test_the_mismatch_map_colours_by_decades_past_the_tolerance():
    ref = np.zeros((4, 4))
    out = ref.copy()
    out[0, 0], out[1, 1], out[2, 2] = 0.0005, 0.05, 50.0  # within, 50x, 5e4x the tolerance
    m = mismatch(out, ref, atol=1e-3, rtol=0.0)
    looks = m.looks()
    assert looks[0].fill == HEAT[0] and looks[5].fill == HEAT[2] and looks[10].fill == HEAT[5]
    assert looks[5].highlighted and not looks[10].highlighted  # the first wrong one outlined
    assert m.count == 2 and tuple(int(x) for x in m.first) == (1, 1)
    nan = mismatch(np.full((2, 2), np.nan), np.zeros((2, 2)))
    assert nan.count == 4  # NaN is wrong


def test_the_mismatch_map_takes_infinities_and_nans_as_torch_isclose_does(recwarn):
    """An infinity on one side only is wrong (its tolerance is infinite too: it read as
    within), equal infinities are right, a NaN is wrong; each is drawn in the darkest colour
    (a NaN raised OverflowError), with no warning from numpy; arrays of two shapes are named."""
    inf, nan = np.inf, np.nan
    out = np.array([[0.0, inf, -inf], [nan, 1.0, 2.0]])
    ref = np.array([[inf, inf, inf], [0.0, 1.0005, 2.0]])
    m = mismatch(out, ref, atol=1e-3, rtol=1e-3)
    expected = np.isclose(out, ref, atol=1e-3, rtol=1e-3)
    assert (m.bad == ~expected).all() and m.count == 3
    looks = m.looks()
    assert [lk.fill for lk in looks] == [HEAT[-1], HEAT[0], HEAT[-1], HEAT[-1], HEAT[0], HEAT[0]]
    assert "elements of out are wrong" in m.verdict() and m._repr_html_()
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    with pytest.raises(ValueError, match=r"out has shape \(4, 4\) and the reference \(4, 5\)"):
        mismatch(np.zeros((4, 4)), np.zeros((4, 5)))


def test_a_big_output_is_drawn_in_blocks_at_100_percent(tmp_path):
    m = mismatch(np.zeros((512, 256)), np.eye(512, 256))
    frag = m.fragment()
    assert (frag.rows, frag.cols) == (64, 32) and "a block of 8 x 8 elements" in frag.caption
    svg = m.svg()
    assert float(re.search(r'width="([\d.]+)"', svg).group(1)) <= 880
    assert struct.unpack(">II", m.png(tmp_path / "m.png")[16:24])[0] > 0


LAYOUT_CELL = """\
from tirx.layout import S, TileLayout, laneid

def make():
    return TileLayout(S[(2, 8, 4, 2) : (2, 4 @ laneid, 1 @ laneid)])

lay = make()
"""


def test_a_tirx_error_outside_tirx_cells_shows_the_users_line_first(ip):
    with capture_output() as cap:
        result = ip.run_cell(LAYOUT_CELL, store_history=True)
    assert result.error_in_exec is not None
    text = re.sub(r"\x1b\[[0-9;]*m", "", cap.stdout)  # IPython's colours
    assert "LayoutError: S[...] has 4 extents but 3 strides" in text
    assert text.index("lay = make()") < text.index("LayoutError: S[...]")
    assert "tirx/layout" not in text and "spec.py" not in text  # tirx's frames left out
    assert "frame(s) inside tirx hidden; %tb shows the whole traceback" in text
    with capture_output() as whole:
        ip.run_line_magic("tb", "")
    assert "spec.py" in re.sub(r"\x1b\[[0-9;]*m", "", whole.stdout)  # %tb has them all


def test_other_exceptions_keep_every_frame(ip, monkeypatch):
    import tirx.layout

    def broken(self, axis=None):
        raise KeyError("an internal bug")

    monkeypatch.setattr(tirx.layout.TileLayout, "size", broken)
    with capture_output() as cap:
        result = ip.run_cell("from tirx.layout import S, TileLayout\nTileLayout(S[4]).size()")
    assert isinstance(result.error_in_exec, KeyError)
    text = re.sub(r"\x1b\[[0-9;]*m", "", cap.stdout)
    assert "test_widgets_errors.py" in text and "hidden" not in text
