"""Notebook 05's GEMM table comes from benchmarks/results/ by code: the cell reads the H200's
current GEMM result by its name, ``gemm_speed-h200.md`` (the file every run of
``benchmarks/gemm_speed.py`` there rewrites), and the committed output is that file's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tirx

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "05_tiled_gemm.ipynb"
NAME = "gemm_speed-h200.md"
CURRENT = ROOT / "benchmarks" / "results" / NAME

TABLE = """\
# GEMM speed, {date}

Command: `python benchmarks/gemm_speed.py`

| dtype | n | tirx TFLOP/s | Triton best (config) | cuBLAS | tirx / cuBLAS |
|---|---|---|---|---|---|
| float16 | 4096 | {small} | 500.0 (128x256x64/8w/3s) | 600.0 | 0.5 |
| bfloat16 | 8192 | {big} | 510.0 (128x256x64/8w/3s) | 700.0 | 0.9 |

## tirx variants (TFLOP/s)

| dtype | n | tirx | other |
|---|---|---|---|
| float16 | 4096 | {small} | 9999.0 |
"""


def table_cell() -> dict:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    (cell,) = [c for c in cells if f'RESULT = "benchmarks/results/{NAME}"' in "".join(c["source"])]
    return cell


def run_cell(cwd: Path, monkeypatch) -> tuple[list, str]:
    """Run the table cell with ``cwd`` as the notebook's folder: (what it displayed, printed)."""
    import io
    from contextlib import redirect_stdout

    shown = []
    monkeypatch.chdir(cwd)
    scope = {"Path": Path, "tirx": tirx, "display": shown.append, "Markdown": lambda t: t}
    out = io.StringIO()
    with redirect_stdout(out):
        exec("".join(table_cell()["source"]), scope)  # noqa: S102 - the notebook's own code
    return shown, out.getvalue()


def write_result(folder: Path, name: str, date: str, small: float, big: float) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    text = TABLE.format(date=date, small=small, big=big)
    (folder / name).write_text(text)
    return text


def test_the_named_file_is_shown_whatever_else_is_there(tmp_path, monkeypatch):
    results = tmp_path / "benchmarks" / "results"
    text = write_result(results, NAME, "2026-12-01", 300.0, 640.0)
    # names that sort after it, newer dates, other machines: none of them is the current file
    write_result(results, "gemm_speed-2026-12-31-h200.md", "2026-12-31", 1.0, 2.0)
    write_result(results, "gemm_speed-h200.md.bak", "2027-01-01", 3.0, 4.0)
    write_result(results, "gemm_speed-h100.md", "2027-01-02", 5.0, 6.0)
    shown, printed = run_cell(tmp_path, monkeypatch)
    assert printed.startswith(f"(read from benchmarks/results/{NAME})")
    assert shown == [text], "the cell shows exactly the named file"
    assert (
        "fastest tirx row: 640 TFLOP/s (bfloat16, n = 8192); cuBLAS there: 700 TFLOP/s" in printed
    )


def test_without_the_file_the_cell_says_how_to_make_it(tmp_path, monkeypatch):
    results = tmp_path / "benchmarks" / "results"
    write_result(results, "gemm_speed-2026-12-01-h200.md", "2026-12-01", 1.0, 2.0)
    monkeypatch.setattr(tirx, "__file__", str(tmp_path / "tirx" / "__init__.py"))
    shown, printed = run_cell(tmp_path, monkeypatch)
    assert not shown
    assert f"benchmarks/results/{NAME} is not here" in printed
    assert "python benchmarks/gemm_speed.py" in printed


def test_the_committed_output_is_the_current_file():
    if not CURRENT.exists():
        pytest.fail(f"benchmarks/results/{NAME} is missing: notebook 05 shows that file")
    outputs = table_cell()["outputs"]
    printed = "".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream")
    assert f"(read from benchmarks/results/{NAME})" in printed
    shown = [o for o in outputs if "text/markdown" in o.get("data", {})]
    assert len(shown) == 1, "the cell displays one table file"
    if "".join(shown[0]["data"]["text/markdown"]) != CURRENT.read_text():
        pytest.fail(f"notebook 05 shows another table than benchmarks/results/{NAME}: re-execute "
                    "the notebook (make notebooks) after a new result")  # fmt: skip


def test_the_visualizer_demo_is_saved_with_pictures_that_render_without_a_kernel():
    """Its views are saved as SVG and text (a widget saved without its kernel shows only
    "model not found" in JupyterLab), and the notebook says how to get the live views."""
    cells = json.loads((ROOT / "notebooks" / "visualizer_demo.ipynb").read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    outputs = [o for c in code for o in c["outputs"]]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    pictures = [o for o in outputs if "<svg" in "".join(o.get("data", {}).get("text/html", ""))]
    assert len(pictures) >= 7
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    intro = "".join(cells[0]["source"])
    assert "Run the notebook" in intro and "open the notebook in JupyterLab" not in intro


MACHINE_PATH = re.compile(
    r"(?:/work/|/home/|/root/|/tmp/|/private/|/Users/|site-packages|[A-Z]:\\\\)"
)


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem)
def test_committed_notebooks_carry_no_machine_paths(path):
    """What a notebook was run with (the checkout, a temporary directory, a cache of an
    earlier run) does not end up in its outputs: a reader's clone has none of those paths."""
    found = sorted(set(MACHINE_PATH.findall(path.read_text())))
    assert not found, f"{path.name} carries machine paths {found}: re-run make notebooks"


@pytest.mark.parametrize(
    "notebook, name",
    [
        ("09_attention", "attention_speed-h100.md"),
        ("10_warp_specialized_gemm", "gemm_wgmma-h200.md"),
    ],
)
def test_notebooks_show_the_current_result_they_name(notebook, name):
    """Notebook 9's and 10's speed cells read a results file by name; the saved output is that
    file (re-execute the notebook after a new result: make notebooks)."""
    notebook = ROOT / "notebooks" / f"{notebook}.ipynb"
    cells = json.loads(notebook.read_text())["cells"]
    (cell,) = [c for c in cells if f'RESULT = "benchmarks/results/{name}"' in "".join(c["source"])]
    printed = "".join(
        "".join(o.get("text", "")) for o in cell["outputs"] if o["output_type"] == "stream"
    )
    assert f"(read from benchmarks/results/{name})" in printed
    (shown,) = [o for o in cell["outputs"] if "text/markdown" in o.get("data", {})]
    current = ROOT / "benchmarks" / "results" / name
    assert "".join(shown["data"]["text/markdown"]) == current.read_text(), (
        f"{notebook.name} shows another table than benchmarks/results/{name}: make notebooks"
    )
