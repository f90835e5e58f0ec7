"""A reader's check of the tutorials in notebooks/ (nbval runs them; this test reads them).

Each tutorial opens with what the learner will be able to do; every exercise has a cell that
checks the answer, and the saved notebook shows its solution passing (tests/test_exercises.py
runs each exercise unsolved and solved); notebooks are saved from one clean run (outputs
present, execution counts 1, 2, 3, ...) with no traceback, no huge output and no path of the
machine that ran them; randomness is seeded; notebooks/README.md lists exactly the notebooks
there are.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TUTORIALS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
CHECKED = "# NBVAL_CHECK_OUTPUT"
PASSED = "✓ right!"
MAX_OUTPUT_CHARS = 20_000  # one output's text: code listings are excerpts, not dumps
MAX_NOTEBOOK_BYTES = 400_000


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def source(cell: dict) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


def output_text(output: dict) -> str:
    if output["output_type"] == "stream":
        text = output["text"]
    elif output["output_type"] == "error":
        text = output["evalue"] + "".join(output.get("traceback", []))
    else:
        text = output.get("data", {}).get("text/plain", "")
    return text if isinstance(text, str) else "".join(text)


def code_cells(path: Path) -> list[dict]:
    return [c for c in cells(path) if c["cell_type"] == "code"]


tutorial = pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])


def test_the_tutorials_are_numbered_in_order():
    numbers = [int(p.name[:2]) for p in TUTORIALS]
    assert numbers == list(range(1, len(numbers) + 1)), [p.name for p in TUTORIALS]
    assert len(TUTORIALS) >= 6


@tutorial
def test_opens_with_what_the_learner_will_be_able_to_do(path):
    first = cells(path)[0]
    text = source(first)
    assert first["cell_type"] == "markdown", "the first cell is the introduction"
    assert text.startswith("# "), "the first cell starts with the notebook's title"
    assert "you will be able to" in text.lower(), "say what the learner will be able to do"
    goals = [ln for ln in text.splitlines() if ln.startswith("- ")]
    assert len(goals) >= 3, "list the things the learner will be able to do"


@tutorial
def test_every_exercise_has_a_checking_cell_that_passes(path):
    all_cells = cells(path)
    exercises = 0
    for i, cell in enumerate(all_cells):
        if cell["cell_type"] != "markdown" or "### Exercise" not in source(cell):
            continue
        exercises += 1
        following = []
        for later in all_cells[i + 1 :]:
            if later["cell_type"] == "markdown":
                break
            following.append(later)
        checks = [c for c in following if "check(" in source(c)]
        title = next(ln for ln in source(cell).splitlines() if "### Exercise" in ln)
        assert len(following) >= 2, f"{title}: an answer cell, then a checking cell"
        assert "check(" not in source(following[0]), f"{title}: the answer has its own cell"
        assert checks, f"{title}: no cell calls check(...)"
        check_cell = checks[-1]
        assert source(check_cell).startswith(CHECKED), f"{title}: mark the check {CHECKED}"
        said = "".join(output_text(o) for o in check_cell["outputs"])
        assert PASSED in said, f"{title}: the saved check does not pass: {said!r}"
    assert exercises >= 1, "a tutorial has at least one exercise"


@tutorial
def test_saved_from_one_clean_run(path):
    code = code_cells(path)
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), f"execution counts {counts}"
    with_output = [c for c in code if c["outputs"]]
    assert len(with_output) >= len(code) // 2, "save the notebook with its outputs"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_no_output_is_a_traceback(path):
    for n, cell in enumerate(code_cells(path), 1):
        for output in cell["outputs"]:
            assert output["output_type"] != "error", f"code cell {n}: {output.get('ename')}"
            assert "Traceback (most recent call last)" not in output_text(output), (
                f"code cell {n} shows a traceback"
            )


@tutorial
def test_outputs_are_small(path):
    assert path.stat().st_size < MAX_NOTEBOOK_BYTES, f"{path.name} is {path.stat().st_size} bytes"
    for n, cell in enumerate(code_cells(path), 1):
        for output in cell["outputs"]:
            for kind, value in output.get("data", {}).items():
                if kind.startswith("text/"):
                    text = value if isinstance(value, str) else "".join(value)
                    assert len(text) < MAX_OUTPUT_CHARS, f"code cell {n}: {len(text)} chars"
            if output["output_type"] == "stream":
                assert len(output_text(output)) < MAX_OUTPUT_CHARS, f"code cell {n}: long output"


@tutorial
def test_randomness_is_seeded(path):
    code = "\n".join(source(c) for c in code_cells(path))
    draws = [m.start() for m in re.finditer(r"torch\.(randn|randint|rand)\(|np\.random\.", code)]
    for at in draws:
        before = code[:at]
        assert "manual_seed" in before or "Generator" in before, (
            f"{path.name}: a random draw before any seed: {code[at : at + 40]!r}"
        )


def test_readme_lists_exactly_the_notebooks():
    readme = (NOTEBOOKS / "README.md").read_text()
    listed = re.findall(r"\(([\w\-]+\.ipynb)\)", readme)
    present = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert sorted(set(listed)) == present
    tutorials_listed = [n for n in dict.fromkeys(listed) if n[0].isdigit()]
    assert tutorials_listed == [p.name for p in TUTORIALS], "list the tutorials in order"


def test_first_warp_matmul_runs_the_seed_guide_verbatim():
    guide = (ROOT / "docs" / "seed" / "warp_matrix_instructions.rst").read_text()
    block = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", guide)[0]
    block = textwrap.dedent(block).strip()
    (notebook,) = NOTEBOOKS.glob("02_*.ipynb")
    assert any(source(c).strip() == block for c in code_cells(notebook)), (
        "notebook 2 has a cell holding the guide's kernel exactly"
    )


# a machine's own directories, as they show in outputs saved on it: temporary and home
# directories, the checkout's place (`make notebooks` writes outputs relative to the checkout)
MACHINE_PATH = re.compile(
    r"(?<![\w.])/(?:tmp|work|root|home|Users|private|var/folders|mnt|opt|srv)/"
)


def output_texts(output: dict) -> list[str]:
    texts = [output_text(output)]
    for kind, value in output.get("data", {}).items():
        if kind.startswith("text/") or kind.endswith("json"):
            texts.append(value if isinstance(value, str) else json.dumps(value))
    return texts


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_no_output_holds_a_machine_path(path):
    for n, cell in enumerate(code_cells(path), 1):
        for output in cell["outputs"]:
            for text in output_texts(output):
                found = MACHINE_PATH.search(text)
                assert not found, (
                    f"code cell {n} shows a path of the machine that ran it: "
                    f"{text[max(found.start() - 60, 0) : found.end() + 60]!r}"
                )


def test_the_machine_path_pattern_finds_them():
    for text in ("File /tmp/ipykernel_1/2.py, line 3", '.file 1 "/work/wt/pic/notebooks/k.cu"',
                 "--out /root/out/x.md", "/home/me/tirx", "/Users/me/tirx/notebooks"):  # fmt: skip
        assert MACHINE_PATH.search(text), text
    for text in ("benchmarks/results/gemm_speed-h200.md", "docs/gpu-runs/gemm.md", "1/2 of a tmp/x",
                 "Cell In[3], line 5", ".file 1 \"transpose_blocks.cu\""):  # fmt: skip
        assert not MACHINE_PATH.search(text), text
