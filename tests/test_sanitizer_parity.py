"""Sanitizer parity: the simulator's verdict on every planted kernel (and its corrected twin)
against ``compute-sanitizer`` on the GPU.

Each kernel of tests/planted.py is compiled for cuda by tirx's code generator and launched in a
subprocess (``python -m tests.sanitizer_runner NAME``) under the sanitizer tool that looks for
its kind of fault (racecheck, memcheck, initcheck, synccheck). Clean must meet clean and a
fault the same kind of fault. Where the sanitizer cannot see what the simulator reports, the
table's ``blind`` entry says why, and the test checks that the sanitizer indeed stays silent
there (so the claim stays true), or, for a fault it reports in some runs only
(``seen_sometimes``), that a report names the simulator's kind. With ``TIRX_PARITY_OUT=path`` the test writes the parity table
(kernel, tool, sanitizer verdict, simulator verdict) there as Markdown for the GPU-run record.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.async_kernels import ASYNC_CASES
from tests.bulk_kernels import BULK_CASES
from tests.named_barrier_planted import NAMED_BARRIER_CASES
from tests.planted import PLANTED, Kind, Planted, Tool, simulator_inputs
from tests.text_planted import TEXT_CASES
from tests.wgmma_planted import WGMMA_CASES
from tirx.errors import SimulationError
from tirx.sim import run

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 120  # seconds per sanitizer run; a deadlocked barrier counts as a barrier fault
_ROWS: list[tuple[str, str, str, str, str]] = []


def find_sanitizer() -> str | None:
    """``compute-sanitizer`` on PATH, else in /usr/local/cuda/bin, else None."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    candidate = Path("/usr/local/cuda/bin/compute-sanitizer")
    return str(candidate) if candidate.is_file() else None


@pytest.fixture(scope="module")
def sanitizer():
    path = find_sanitizer()
    if path is None:
        pytest.skip("compute-sanitizer is not on PATH nor in /usr/local/cuda/bin")
    yield path
    out = os.environ.get("TIRX_PARITY_OUT")
    if out and _ROWS:
        lines = [
            "| kernel | tool | sanitizer | simulator | agreement |",
            "|---|---|---|---|---|",
            *(f"| {' | '.join(row)} |" for row in _ROWS),
        ]
        worker = os.environ.get("PYTEST_XDIST_WORKER")  # one file per worker under xdist
        path = Path(out).with_suffix(f".{worker}.md") if worker else Path(out)
        path.write_text("\n".join(lines) + "\n")


def simulator_verdict(case: Planted) -> str:
    """``clean`` or ``fault: <kind>`` (the table's kind when the message matches it)."""
    return _verdict(_simulate(case))


def _simulate(case: Planted) -> SimulationError | None:
    """The simulator's fault on ``case``, None when it runs clean."""
    try:
        run(case.build(), simulator_inputs(case))
    except SimulationError as e:
        return e
    return None


def _verdict(fault: SimulationError | None) -> str:
    if fault is None:
        return "clean"
    for kind in Kind:
        if re.search(kind.pattern, fault.message):
            return f"fault: {kind.name.lower()}"
    return f"fault: {fault.message[:60]}"


def sanitizer_verdict(path: str, tool: Tool, name: str) -> tuple[str, str]:
    """(verdict, the report's first finding) of ``tool`` on planted kernel ``name``."""
    cmd = [path, "--tool", tool.value, "--print-limit", "10"]
    cmd += [sys.executable, "-m", "tests.sanitizer_runner", name]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT
        )
    except subprocess.TimeoutExpired:
        return "fault: hang", f"no end within {TIMEOUT} s"
    text = done.stdout + done.stderr
    if tool is Tool.RACECHECK:
        m = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed", text)
    else:
        m = re.search(r"ERROR SUMMARY: (\d+) errors?", text)
    if m is None:
        raise AssertionError(f"no sanitizer summary (exit {done.returncode}):\n{text[-3000:]}")
    finding = next((x.strip() for x in text.splitlines() if "=========" in x and len(x) > 12), "")
    if int(m.group(1)) == 0:
        return "clean", ""
    if tool is Tool.MEMCHECK:
        trap = re.search(r"=+ Unknown Error\n=+\s+at (\S+ in \S+:\d+)", text)
        if trap and not re.search(r"Invalid __", text):  # the GPU trapped; no access reported
            return "fault: trap", f"trap at {trap.group(1)}"
        kind = "misaligned" if re.search(r"misaligned", text, re.I) else "out_of_bounds"
        return f"fault: {kind}", finding
    kinds = {
        Tool.RACECHECK: Kind.RACE,
        Tool.INITCHECK: Kind.UNINITIALIZED,
        Tool.SYNCCHECK: Kind.DIVERGENT_BARRIER,
    }
    return f"fault: {kinds[tool].name.lower()}", finding


@pytest.mark.parametrize(
    "case",
    [*PLANTED, *BULK_CASES, *ASYNC_CASES, *WGMMA_CASES, *NAMED_BARRIER_CASES, *TEXT_CASES],
    ids=lambda c: c.name,
)
def test_simulator_and_sanitizer_agree(sanitizer, case):
    tool = case.kind.tool
    fault = _simulate(case)
    sim = _verdict(fault)
    assert (sim != "clean") == case.fault, (case.name, sim)
    san, finding = sanitizer_verdict(sanitizer, tool, case.name)
    seen = case.blind and case.seen_sometimes and san != "clean"  # a blind spot, seen this time
    if seen:
        agreement = "agree (seen this time)" if san == sim else "DISAGREE"
    elif case.blind:
        agreement = "expected divergence: " + case.blind if case.fault else "clean/clean"
    else:
        agreement = "agree" if _agree(case, san, sim) else "DISAGREE"
    _ROWS.append(
        (case.name, tool.value, san if not finding else f"{san} ({finding[:80]})", sim, agreement)
    )
    if seen:
        assert san == sim, f"{case.name}: sanitizer {san!r} ({finding}), simulator {sim!r}"
        return
    if case.blind:
        # the stated reason must hold: the sanitizer does not see this fault (nor the twin's)
        assert san == "clean", f"{case.name}: the sanitizer sees it after all: {finding}"
        return
    assert _agree(case, san, sim), f"{case.name}: sanitizer {san!r} ({finding}), simulator {sim!r}"
    if san == "fault: trap":  # at the line the simulator names
        assert finding.endswith(f":{fault.span.line}"), (finding, fault.span)


def _agree(case: Planted, san: str, sim: str) -> bool:
    """The same verdict, or the GPU's own way of failing a fault of this kind: a barrier
    nobody completes hangs; an early-armed mbarrier traps (memcheck reports the trap's line,
    no access)."""
    if san == sim:
        return True
    if not case.fault:
        return False
    if case.kind in (Kind.DIVERGENT_BARRIER, Kind.DEADLOCK):
        return san == "fault: hang"
    if case.kind is Kind.ASYNC_VISIBILITY:  # racecheck calls every hazard it finds a race
        return san == "fault: race"
    return case.kind is Kind.EARLY_ARM and san == "fault: trap"
