"""The profiles in the notebook: the heat column beside the kernel's Python (the simulator's
per-line counts), the roofline of an Nsight Compute profile, and ``%%tirx --profile``."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import tirx
from tirx.backend.cuda.ncu_report import parse_csv
from tirx.sim.profile import METRICS
from widgets import magic
from widgets.codeview import code_view
from widgets.heat import HeatColumn, heat_color, heat_column
from widgets.magic import CellError
from widgets.roofline import H200, place, roofline_figure, roofline_html, roofline_text

from .test_sim_profile import BANKS, build

GOLDENS = Path(__file__).parent / "goldens"


@pytest.fixture(scope="module")
def banks(tmp_path_factory):
    exe, line = build(tmp_path_factory.mktemp("banks"), BANKS)
    return exe.profile(np.zeros(32, np.float32), np.zeros(32, np.float64)), line


# ------------------------------------------------------------------------ heat column


def test_the_magic_offers_the_profiles_metrics():
    assert magic.HEAT_METRICS == tuple(METRICS)


def test_heat_column_of_bank_conflicts(banks):
    profile, line = banks
    heat = heat_column(profile, "conflicts")
    assert heat.values[line("# stride 32")] == 31 and heat.values[line("# stride 2")] == 1
    assert heat.level(line("# stride 32")) == 1.0  # the kernel's worst line
    assert heat.level(line("# stride 2")) == pytest.approx(1 / 31)
    assert heat.label(line("# stride 1")) == ""  # no replays: an empty cell
    assert heat_color(1.0) == "#f4511e" and heat_color(0.0) == "#fff3c4"
    cell = heat.cell(line("# stride 32"))
    assert "background:#f4511e" in cell and ">31<" in cell and "color:#000" in cell
    assert heat.cell(line("# stride 1")) == '<span class="tirx-heat"></span>'
    text = heat.text({line("# stride 32"): "s[lane * 32 + 1024] = ..."})
    assert text.splitlines()[0].startswith("heat: bank conflicts (replays) per line")
    assert text.splitlines()[1] == f"{line('# stride 32'):>5}     31 | s[lane * 32 + 1024] = ..."


def test_coalescing_is_hot_where_it_is_low():
    heat = HeatColumn("coalescing", "coalescing", "%", "", {3: 100.0, 4: 12.5, 5: 56.25}, False)
    assert (heat.level(3), heat.level(4), heat.level(5)) == (0.0, 1.0, 0.5)
    assert heat.label(4) == "12.5"


def test_an_unknown_metric_names_the_known_ones(banks):
    with pytest.raises(ValueError, match="unknown heat metric 'speed'; choose from instructions"):
        heat_column(banks[0], "speed")


def test_the_code_view_puts_the_column_beside_the_python(banks, tmp_path):
    profile, line = banks
    exe, _ = build(tmp_path, BANKS)
    cuda = tirx.compile(exe.kernel, "cuda -arch=sm_90")
    view = code_view({"cuda": cuda.source})
    assert view.python is not None
    view.heat = heat_column(profile, "wavefronts")
    page = view.html()
    n = line("# stride 32")
    row = re.search(rf'<label[^>]*data-line="{n}".*?</label>', page).group(0)
    assert '<span class="tirx-heat" title="shared wavefronts: 32 wavefronts"' in row
    assert "heat: shared wavefronts (wavefronts) per line" in page  # the key
    assert ".tirx-heat{display:inline-block" in page


# ------------------------------------------------------------------------ roofline


def gemm_profile(flops=None):
    (p,) = parse_csv((GOLDENS / "ncu_gemm_base.csv").read_text())
    p.flops_given = flops
    return p


def test_the_roofline_place_of_a_profile():
    p = gemm_profile()
    where = place(p)
    bytes_ = 402_653_184 + 134_217_728
    assert where.intensity == pytest.approx(p.flops / bytes_)
    assert where.rate == pytest.approx(p.flops / 1.048576e-3)
    assert where.ridge == pytest.approx(989.5e12 / 4.8e12)
    assert where.bound == "FP16/BF16 tensor" and where.roof == 989.5e12  # right of the ridge
    text = roofline_text(p)
    assert text.startswith("roofline (H200 SXM, datasheet): 'gemm_wgmma' at 1.02e+03 FLOP/B")
    assert "compute-bound (FP16/BF16 tensor)" in text


def test_peaks_are_overridable():
    slow = dataclasses.replace(H200, name="slow", bandwidth=1e11)
    where = place(gemm_profile(), slow)
    assert where.bound == "memory" and where.roof == pytest.approx(where.intensity * 1e11)
    assert "memory-bound" in roofline_text(gemm_profile(), slow)


def test_the_roofline_figure_draws_roofs_and_the_kernel():
    p = gemm_profile(flops=2 * 4096**3)
    fig = roofline_figure(p)
    ax = fig.axes[0]
    memory, *compute, point = ax.get_lines()
    x, y = memory.get_data()
    assert y[0] == pytest.approx(x[0] * 4.8e12)  # the memory roof's slope
    assert max(y) == pytest.approx(989.5e12)
    assert len(compute) == 3
    assert point.get_xdata()[0] == pytest.approx(place(p).intensity)
    assert point.get_ydata()[0] == pytest.approx(2 * 4096**3 / 1.048576e-3)
    assert ax.get_xscale() == "log" and "FLOP per DRAM byte" in ax.get_xlabel()
    assert roofline_html(p).startswith('<div class="tirx-roofline"><img alt="roofline"')


def test_without_flops_the_roofline_says_so():
    (p,) = parse_csv((GOLDENS / "ncu_seed_details.csv").read_text())
    p.values.pop("dram__bytes_read.sum"), p.values.pop("dram__bytes_write.sum")
    assert place(p) is None
    assert "no FLOP count or no DRAM bytes" in roofline_html(p)


# ------------------------------------------------------------------------ %%tirx --profile


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    assert shell.run_cell("%load_ext tirx").success
    shell.run_cell(
        "import numpy as np\no = np.zeros(32, np.float32)\nd = np.zeros(32, np.float64)\n"
    )
    return shell


CELL = BANKS


def run(ip, line: str, cell: str):
    with capture_output() as cap:
        result = ip.run_cell(f"%%tirx {line}\n{cell}", store_history=True)
    return result, cap


def test_profile_on_the_simulator_draws_the_heat_column(ip):
    result, cap = run(ip, '-t sim --run "o, d" --profile --heat conflicts', CELL)
    assert result.success, cap.stdout
    (out,) = [o for o in cap.outputs if "text/html" in o.data]
    text, page = out.data["text/plain"], out.data["text/html"]
    assert "profile of 'kernel' on the simulator: 1 block" in text
    assert "heat: bank conflicts (replays) per line" in text
    stride32 = next(t for t in text.splitlines() if "# stride 32" in t)
    assert re.match(r"\s+\d+\s+31 \| s\[lane \* 32 \+ 1024\]", stride32)
    assert "Profile (simulator, per line; heat column: bank conflicts)" in page
    assert 'class="tirx-heat" title="bank conflicts: 31 replays"' in page
    panel = ip.user_ns["_tirx"][0]
    assert panel.profile.total().cost("shared").units > 0


def test_profile_needs_run_and_a_known_metric(ip):
    with pytest.raises(UsageError, match="--profile needs --run ARGS"):
        ip.run_cell_magic("tirx", "--profile", CELL)
    with pytest.raises(UsageError, match="unknown --heat metric 'speed'"):
        ip.run_cell_magic("tirx", '--run "o, d" --profile --heat speed', CELL)


def test_profile_on_the_cuda_target_without_a_gpu_says_where_to_run(ip):
    if tirx.gpu_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(CellError, match="(?s)no CUDA GPU is visible.*-t sim"):
        with capture_output():
            ip.run_cell_magic("tirx", '-t cuda --run "o, d" --profile', CELL)


def test_a_panel_shows_an_ncu_profile_and_its_roofline():
    from tirx.examples.warp_matmul import warp_matmul
    from widgets.panel import KernelPanel

    exe = tirx.compile(warp_matmul, "sim")
    panel = KernelPanel("warp_matmul", exe, None, sections=(), profile=gemm_profile(2 * 4096**3))
    assert panel.heat_column() is None  # a heat column is the simulator's
    text = str(panel)
    assert "  ncu profile of 'gemm_wgmma'" in text
    assert "  roofline (H200 SXM, datasheet): 'gemm_wgmma'" in text
    page = panel._repr_html_()
    assert "Profile (Nsight Compute)" in page and "data:image/png;base64," in page
