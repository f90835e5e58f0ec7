"""Notebook 05's GEMM table comes from benchmarks/results/ by code: the cell reads the newest
``gemm_speed-*.md`` (whatever its columns), and the committed output is that file's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tirx

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "05_tiled_gemm.ipynb"

TABLE = """\
# Tiled GEMM, {date}

Machine: NVIDIA H200

| dtype | M = N = K | {extra}tirx TFLOP/s | torch TFLOP/s |
|---|---|---|---|
| float16 | 2048 | {extra_cell}{tirx} | 600.0 |
| float16 | 4096 | {extra_cell}{tirx_big} | 700.0 |
"""


def table_cell() -> dict:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    (cell,) = [c for c in cells if "newest_result(" in "".join(c["source"])]
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


def write_result(folder: Path, name: str, date: str, tirx_tf: float, extra: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    text = TABLE.format(date=date, tirx=tirx_tf / 2, tirx_big=tirx_tf, extra=extra,
                        extra_cell="1.0 | " if extra else "")  # fmt: skip
    if extra:  # one more column: one more rule cell
        text = text.replace("|---|---|---|---|", "|---|---|---|---|---|")
    (folder / name).write_text(text)


def test_the_newest_file_is_shown_whatever_its_columns(tmp_path, monkeypatch):
    results = tmp_path / "benchmarks" / "results"
    write_result(results, "gemm_speed-2026-11-30-h200.md", "2026-11-30", 90.0)
    write_result(results, "gemm_speed-2026-12-03-h200-pipelined.md", "2026-12-03", 400.0,
                 extra="stages | ")  # fmt: skip
    write_result(results, "gemm_speed-2026-12-01-h200.md", "2026-12-01", 120.0)
    (results / "gemm_speed-notes.md").write_text("| not | a result |\n|---|---|\n| x | y |\n")
    shown, printed = run_cell(tmp_path, monkeypatch)
    assert printed.startswith("(read from benchmarks/results/gemm_speed-2026-12-03-h200-pipelined")
    assert shown == [(results / "gemm_speed-2026-12-03-h200-pipelined.md").read_text()]
    assert (
        "fastest tirx row: 400 TFLOP/s (float16, 4096); torch.matmul there: 700 TFLOP/s" in printed
    )


def test_without_results_the_cell_says_how_to_make_them(tmp_path, monkeypatch):
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    shown, printed = run_cell(tmp_path, monkeypatch)
    assert not shown and "python benchmarks/gemm_speed.py --out benchmarks/results/" in printed


def test_the_committed_output_is_the_newest_result():
    results = ROOT / "benchmarks" / "results"
    newest = max(p.name for p in results.glob("gemm_speed-2*.md"))
    outputs = table_cell()["outputs"]
    printed = "".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream")
    if newest not in printed:
        pytest.fail(f"notebook 05 shows an older GEMM table than {newest}: re-execute the "
                    "notebook (make notebooks) after adding a result")  # fmt: skip
    (markdown,) = [o for o in outputs if "text/markdown" in o.get("data", {})]
    assert "".join(markdown["data"]["text/markdown"]) == (results / newest).read_text()


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
