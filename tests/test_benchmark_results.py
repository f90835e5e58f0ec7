"""benchmarks/results/ holds one current file per benchmark and machine, named
``<benchmark>-<machine>.md``, each opening with its run's command, date, machine and versions;
every benchmark script rewrites its own file by that name (``benchmarks/report.py``)."""

from __future__ import annotations

import argparse
import ast
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"
sys.path.insert(0, str(BENCHMARKS))
import report  # noqa: E402

# modules of benchmarks/ that measure nothing themselves: kernels, helpers, a profiler target,
# the source dumper of gemm_speed's --sources
LIBRARIES = {"gemm_kernels", "raw_cuda", "machine", "report", "gemm_sources", "gemm_profile"}
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem not in LIBRARIES)


@pytest.mark.parametrize(
    "gpu, label",
    [
        (None, "cpu"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("NVIDIA L40S", "l40s"),
    ],
)
def test_the_machine_is_named_after_its_gpu(gpu, label):
    assert report.machine_label(gpu) == label


def test_a_result_is_named_by_benchmark_and_machine():
    assert report.result_path("gemm_speed", "h200") == RESULTS / "gemm_speed-h200.md"
    assert report.result_path("launch", "cpu-stub", "/x").as_posix() == "/x/launch-cpu-stub.md"
    with pytest.raises(ValueError, match="lower case"):
        report.result_path("gemm_speed", "H200 2026-12-01")


def test_the_header_states_command_date_machine_and_versions():
    when = datetime(2026, 12, 2, 9, 5, tzinfo=timezone.utc)
    argv = ["--reps", "3", "--results-dir", "/root/out", "a b", "--out=/tmp/x.md"]
    text = report.header("/anywhere/benchmarks/launch.py", argv, None, when)
    lines = text.splitlines()
    assert lines[0] == "Command: `python benchmarks/launch.py --reps 3 'a b'`"  # not the paths
    assert "Date: 2026-12-02 09:05 UTC" in lines
    (machine,) = [ln for ln in lines if ln.startswith("Machine: ")]
    assert machine.startswith("Machine: no GPU, ") and "CPUs" in machine
    (versions,) = [ln for ln in lines if ln.startswith("Versions: ")]
    assert re.search(r"python 3\.\d+\.\d+", versions) and "tirx " in versions


def test_the_header_takes_the_commit_the_caller_names(monkeypatch):
    """A copy of a tree run elsewhere (the GPU machine) may carry stale git metadata: the
    commit given in TIRX_COMMIT is the one the header records."""
    when = datetime(2026, 12, 2, 9, 5, tzinfo=timezone.utc)
    monkeypatch.setenv("TIRX_COMMIT", "abc1234")
    text = report.header("/anywhere/benchmarks/launch.py", [], None, when)
    assert re.search(r"^Versions: .*; commit abc1234$", text, re.M)
    monkeypatch.delenv("TIRX_COMMIT")
    text = report.header("/anywhere/benchmarks/launch.py", [], None, when)
    assert "commit abc1234" not in text


def _args(**kw) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    report.add_output_arguments(ap, "thing")
    argv = [f"--{k.replace('_', '-')}={v}" for k, v in kw.items()]
    return ap.parse_args(argv)


def test_each_run_rewrites_the_current_file(tmp_path):
    args = _args(results_dir=tmp_path)
    first = report.write_result("thing", "| a |\n", args, "thing.py", ["--x"], gpu="NVIDIA H200")
    second = report.write_result("thing", "| b |\n", args, "thing.py", [], gpu="NVIDIA H200")
    assert first == second == tmp_path / "thing-h200.md"
    text = second.read_text()
    assert text.startswith("Command: `python benchmarks/thing.py`\n") and text.endswith("| b |\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thing-h200.md"]
    stub = report.write_result("thing", "x", args, "thing.py", [], gpu=None, suffix="-stub")
    assert stub.name == "thing-cpu-stub.md"


def test_out_names_another_file_or_none(tmp_path):
    mine = tmp_path / "elsewhere.md"
    assert report.write_result("thing", "x", _args(out=mine), "t.py", [], gpu=None) == mine
    assert report.write_result("thing", "x", _args(out="-"), "t.py", [], gpu=None) is None
    named = report.write_result("thing", "x", _args(results_dir=tmp_path, machine="h200"), "t.py",
                                [], gpu=None)  # fmt: skip
    assert named == tmp_path / "thing-h200.md"


def _calls(script: str, function: str) -> list[str]:
    tree = ast.parse((BENCHMARKS / f"{script}.py").read_text())
    return [
        node.args[0].value if function == "write_result" else node.args[1].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == function
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "report"
    ]


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_writes_its_own_current_file(script):
    assert _calls(script, "add_output_arguments") == [script], "takes --out/--results-dir"
    assert _calls(script, "write_result") == [script], "writes <its name>-<machine>.md"


def test_the_cpu_benchmarks_write_their_files_when_run(tmp_path):
    """Two of them run here for real, briefly: the files appear under their fixed names, named
    after the machine (``cpu`` without a GPU; the launch benchmark's no-op stand-in adds
    ``-stub``, which ``--cpu-stub`` asks for on any machine)."""
    import launch
    import launch_parts

    launch.main(["--launches", "200", "--reps", "2", "--cpu-stub", "--results-dir", str(tmp_path)])
    launch_parts.main(["--calls", "200", "--reps", "1", "--results-dir", str(tmp_path)])
    label = report.machine_label(report.gpu_name())
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"launch-{label}-stub.md",
        f"launch_parts-{label}.md",
    ]


def _committed() -> list[Path]:
    return sorted(RESULTS.glob("*"))


def test_results_holds_one_current_file_per_benchmark_and_machine():
    names = [p.name for p in _committed()]
    assert names, "benchmarks/results/ is empty"
    for name in names:
        found = re.fullmatch(r"([a-z][a-z0-9_]*)-([a-z0-9]+(?:-[a-z0-9]+)*)\.md", name)
        assert found, f"{name}: not <benchmark>-<machine>.md"
        benchmark, machine = found.groups()
        assert benchmark in SCRIPTS, f"{name}: no benchmarks/{benchmark}.py"
        assert not re.search(r"\d{4}-\d{2}-\d{2}|-\d+$|-s\d", machine), f"{name}: a dated copy"


@pytest.mark.parametrize("path", _committed(), ids=lambda p: p.name)
def test_each_result_says_how_when_and_where_it_was_made(path):
    text = path.read_text()
    benchmark = path.name.split("-")[0]
    (command,) = re.findall(r"^Command: `([^`]+)`", text, re.M)
    assert re.search(rf"(^|\s|/){benchmark}\.py\b", command), command
    assert re.search(r"\b2\d{3}-\d{2}-\d{2}\b", text), "the run's date"
    assert re.search(r"\bpython 3\.\d+", text), "the versions"
    machine = path.stem.split("-", 1)[1]
    if machine.startswith("cpu"):
        assert re.search(r"no GPU|CPU|x86_64", text), "the machine"
    else:  # the GPU's label, then any suffix naming the run's kind ("h100-nodriver")
        assert machine.split("-")[0].upper() in text.upper(), "the GPU"
    assert not re.search(r"/root/|/tmp/|/home/|/work/", text), "a machine's own path"


def test_two_tree_commands_name_each_tree_by_its_commit(tmp_path):
    """``lower.py``, ``sim_ab.py``: the command line in the results file names the trees
    compared by their commits, not by this machine's paths; other arguments stay."""
    shown = report.trees_by_commit([str(ROOT), str(tmp_path), "--runs", "3"])
    assert shown[0] == f"<tree at {report.tree_commit(str(ROOT))}>" and "?" not in shown[0]
    assert shown[1:] == ["<tree at ?>", "--runs", "3"]  # a folder that is no checkout
