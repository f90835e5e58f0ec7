"""Every exercise of the tutorials starts unsolved and turns solved only with its solution.

An exercise is a markdown cell with ``### Exercise`` followed by code cells: the answer cell
the reader fills in, the check (``check(...)`` prints ``✓ right!`` or ``✗ not yet. Hint: ...``)
and the solution, a cell tagged ``solution`` and hidden in JupyterLab (``source_hidden``), which
sets the answer and runs the check again. The tests read that structure from the notebooks,
then run each exercise in a fresh IPython shell: the cells the exercise depends on (found by
the names its cells read), the answer cell as committed and the check, which must say ✗, then
the solution, which must say ✓.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TUTORIALS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
FAILED, PASSED = "✗ not yet", "✓ right!"


def source(cell: dict) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


def saved_text(cell: dict) -> str:
    return "".join("".join(o.get("text", "")) for o in cell["outputs"])


@dataclass(frozen=True)
class Exercise:
    title: str
    answer: int  # cell indices in the notebook
    check: int
    solution: int


def exercises(cells: list[dict]) -> list[Exercise]:
    found = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown" or "### Exercise" not in source(cell):
            continue
        title = next(ln for ln in source(cell).splitlines() if "### Exercise" in ln)
        code = []
        for j in range(i + 1, len(cells)):
            if cells[j]["cell_type"] != "code":
                break
            code.append(j)
        solutions = [j for j in code if "solution" in cells[j]["metadata"].get("tags", [])]
        assert len(solutions) == 1, f"{title}: one cell tagged 'solution' after the exercise"
        checks = [j for j in code if "check(" in source(cells[j]) and j not in solutions]
        assert code and checks, f"{title}: an answer cell, then a check"
        assert code[0] not in checks + solutions, f"{title}: the answer has its own cell"
        assert checks[0] < solutions[0], f"{title}: the solution follows the check"
        found.append(Exercise(title, code[0], checks[0], solutions[0]))
    return found


def cells_of(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


WITH_EXERCISES = [p for p in TUTORIALS if exercises(cells_of(p))]


def test_every_tutorial_has_exercises():
    assert WITH_EXERCISES == TUTORIALS


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_the_saved_notebook_shows_each_exercise_unsolved_then_solved(path):
    cells = cells_of(path)
    for ex in exercises(cells):
        solution = cells[ex.solution]
        hidden = solution["metadata"].get("jupyter", {}).get("source_hidden")
        assert hidden is True, f"{ex.title}: the solution cell is hidden in JupyterLab"
        assert source(cells[ex.answer]).strip() != "", f"{ex.title}: an answer cell to fill in"
        said = saved_text(cells[ex.check])
        assert FAILED in said and PASSED not in said, f"{ex.title}: the saved check says {said!r}"
        assert PASSED in saved_text(solution), f"{ex.title}: the saved solution does not pass"


# ----------------------------------------------------------------- running them


def _python(cell_source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(cell_source)


def _names(cell_source: str) -> tuple[set[str], set[str]]:
    """(names the cell binds, names it reads), anywhere in it: a generous slice is harmless."""
    tree = ast.parse(_python(cell_source))
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            read.add(node.value.id)
    return bound, read


def needed_cells(cells: list[dict], targets: list[int]) -> list[int]:
    """The code cells before ``targets`` that bind a name the targets read, and (recursively)
    the cells those read from, with the targets, in notebook order."""
    names = {i: _names(source(cells[i])) for i, c in enumerate(cells) if c["cell_type"] == "code"}
    chosen = set(targets)
    for target in sorted(targets):
        wanted = set(names[target][1])
        for j in range(target - 1, -1, -1):
            if j in names and names[j][0] & wanted:
                chosen.add(j)
                wanted |= names[j][1]
    return sorted(chosen)


@pytest.fixture(scope="module")
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


def _run(shell, cell_source: str, where: str) -> str:
    from IPython.utils.capture import capture_output

    with capture_output() as out:
        result = shell.run_cell(cell_source, store_history=True)
    if not result.success:
        raise AssertionError(f"{where} failed: {result.error_in_exec or result.error_before_exec}")
    return out.stdout


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.stem)
def test_each_exercise_starts_unsolved_and_its_solution_solves_it(path, shell, monkeypatch):
    monkeypatch.chdir(NOTEBOOKS)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    shell.reset(new_session=False)
    cells = cells_of(path)
    todo = exercises(cells)
    by_answer = {ex.answer: ex for ex in todo}
    parts = {i for ex in todo for i in (ex.answer, ex.check, ex.solution)}
    for i in needed_cells(cells, sorted(parts)):
        if i in parts and i not in by_answer:
            continue  # run below, with their exercise
        where = f"{path.name} cell {i}"
        if i not in by_answer:
            _run(shell, source(cells[i]), where)
            continue
        ex = by_answer[i]
        _run(shell, source(cells[ex.answer]), f"{ex.title}: the answer cell")
        said = _run(shell, source(cells[ex.check]), f"{ex.title}: the check")
        assert FAILED in said and PASSED not in said, (
            f"{ex.title}: unsolved, the check says {said!r}"
        )
        said = _run(shell, source(cells[ex.solution]), f"{ex.title}: the solution")
        assert PASSED in said and FAILED not in said, (
            f"{ex.title}: the solution's check says {said!r}"
        )
