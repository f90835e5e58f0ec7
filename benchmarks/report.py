"""Where a benchmark writes its result, and what the file says about the run.

Every benchmark keeps one current file per machine, ``benchmarks/results/<benchmark>-<machine>.md``
(``gemm_speed-h200.md``, ``compile-cpu.md``), and each run rewrites it: the file is the latest
run of that benchmark on that machine. Earlier runs are in git's history, and the ones the
documentation discusses are recorded in ``docs/gpu-runs/``. The file opens with the run's command
line (less the options that only say where the file goes), its date (UTC), the machine and
the versions of what ran.

``<machine>`` names the GPU (``h200`` for an NVIDIA H200; other models by their name in lower
case) or is ``cpu`` when no GPU is visible; a benchmark that measures a stand-in adds its own
suffix (``launch-cpu-stub``). ``--machine`` overrides it, ``--results-dir`` writes the same name
into another folder (the GPU runner's ``$OUT``), ``--out FILE`` writes to one file of any name
(``--out -``: print only).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from machine import cpu_name  # benchmarks/machine.py (scripts run from this folder)

BENCHMARKS = Path(__file__).resolve().parent
RESULTS = BENCHMARKS / "results"
ROOT = BENCHMARKS.parent

# package distributions whose versions a result names, where they are installed
PACKAGES = ("tirx", "torch", "cuda-bindings", "triton", "cupy-cuda13x", "nvidia-cuda-nvrtc")
# words of a GPU's name that say who made it or which board it sits on, not which model it is
_VENDOR = {"nvidia", "geforce", "tesla", "quadro"}
_BOARD = re.compile(r"^(\d+gb|sxm\d*|pcie|hbm\d*e?|nvl|mig.*)$")


def gpu_name() -> str | None:
    """The first GPU's name as the driver reports it, or None where there is no GPU (no
    driver, no device): a probe that never raises."""
    try:
        from cuda.bindings import driver as drv

        if drv.cuInit(0)[0] != drv.CUresult.CUDA_SUCCESS:
            return None
        err, count = drv.cuDeviceGetCount()
        if err != drv.CUresult.CUDA_SUCCESS or count == 0:
            return None
        err, name = drv.cuDeviceGetName(64, 0)
        if err != drv.CUresult.CUDA_SUCCESS:
            return None
        return name.split(b"\0")[0].decode()
    except Exception:  # no cuda-bindings, no libcuda: no GPU to name
        return None


def machine_label(gpu: str | None) -> str:
    """The machine's part of a result's name: the GPU's model in lower case (``NVIDIA H200`` ->
    ``h200``, ``NVIDIA H100 80GB HBM3`` -> ``h100``, ``NVIDIA GeForce RTX 4090`` ->
    ``rtx-4090``), or ``cpu`` without a GPU."""
    if not gpu:
        return "cpu"
    words = [w for w in re.split(r"[^0-9a-z]+", gpu.lower()) if w and w not in _VENDOR]
    model = []
    for word in words:
        if _BOARD.match(word):
            break
        model.append(word)
    return "-".join(model or words) or "gpu"


def result_path(benchmark: str, machine: str, folder: Path | str = RESULTS) -> Path:
    """The current result file of ``benchmark`` on ``machine``."""
    if not re.fullmatch(r"[a-z0-9_]+", benchmark) or not re.fullmatch(r"[a-z0-9-]+", machine):
        raise ValueError(f"benchmark {benchmark!r} and machine {machine!r}: lower case names")
    return Path(folder) / f"{benchmark}-{machine}.md"


def add_output_arguments(ap: argparse.ArgumentParser, benchmark: str) -> None:
    """``--out``, ``--results-dir`` and ``--machine``, as every benchmark takes them."""
    ap.add_argument(
        "--out",
        default=None,
        help=f"write the result to this file instead of {RESULTS.name}/{benchmark}-<machine>.md "
        "('-': print it only)",
    )
    ap.add_argument(
        "--results-dir",
        default=str(RESULTS),
        help="the folder of the current results (default: benchmarks/results)",
    )
    ap.add_argument(
        "--machine",
        default=None,
        help="the machine's part of the file name (default: the GPU's model, or cpu)",
    )


# options that say only where the file goes: the file's own name and place say that
_WHERE = ("--out", "--results-dir", "--machine")


def command_line(script: str, argv: list[str] | None) -> str:
    """The command that ran ``script`` (a file of benchmarks/), as typed from the repository's
    root, with the environment variables a run depends on, less the options that only place
    the file (``--out``, ``--results-dir``, ``--machine``: a machine's own paths stay out)."""
    given = list(sys.argv[1:] if argv is None else argv)
    args = []
    while given:
        arg = given.pop(0)
        if arg in _WHERE:
            given = given[1:]
        elif not arg.startswith(tuple(f"{w}=" for w in _WHERE)):
            args.append(arg)
    env = [f"{k}={shlex.quote(os.environ[k])}" for k in ("TIRX_SIM_BUDGET",) if k in os.environ]
    return " ".join([*env, "python", f"benchmarks/{Path(script).name}", *map(shlex.quote, args)])


def _commit() -> str | None:
    """The checkout's commit, "with uncommitted changes" where tracked files differ; or, where
    ``TIRX_COMMIT`` is set, that: a machine that runs a copy of a tree without its history (the
    GPU machine) is told which commit the copy is, as its own git metadata may be stale."""
    given = os.environ.get("TIRX_COMMIT", "").strip()
    if given:
        return given
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain=v2", "--branch", "-uno"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    head = re.search(r"^# branch\.oid ([0-9a-f]{7})", out, re.M)
    if not head:
        return None
    changed = any(not line.startswith("#") for line in out.splitlines())
    return head.group(1) + (" with uncommitted changes" if changed else "")


def tree_commit(tree: str) -> str:
    """The short commit of the checkout at ``tree``, with ``+`` when tracked files differ from
    it (how the two-tree benchmarks name their trees), or ``?``."""
    out = subprocess.run(
        ["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", tree, "status", "--porcelain", "-uno"], capture_output=True, text=True
    )
    return (
        out.stdout.strip() + ("+" if dirty.stdout.strip() else "") if out.returncode == 0 else "?"
    )


def run_in_tree(tree: str, args: list[str], tmp: str, what: str, cwd=None, **env_extra: str):
    """Run Python with ``args`` (``["-c", code]``, or a script and its arguments) in a fresh
    process that imports tirx from ``tree`` (its own empty cache, the disk cache on, bytecode
    cached in ``tmp`` as after an install; in ``cwd``, else ``tmp``) and return the JSON value
    its last line prints; a failed child ends the benchmark, naming ``what`` and its stderr."""
    env = dict(os.environ, PYTHONPATH=tree, TIRX_CACHE_DIR=tempfile.mkdtemp(dir=tmp), **env_extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("TIRX_CACHE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache-" + str(abs(hash(tree))))
    done = subprocess.run(
        [sys.executable, *args], env=env, cwd=cwd or tmp, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {what} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def trees_by_commit(argv: list[str] | None) -> list[str]:
    """The command's arguments (``sys.argv[1:]`` where ``argv`` is None) with each source tree
    named by its commit, ``<tree at abc1234>``, not by this machine's path (the two-tree
    benchmarks' command lines)."""
    given = sys.argv[1:] if argv is None else argv
    return [
        f"<tree at {tree_commit(os.path.abspath(a))}>" if os.path.isdir(a) else a for a in given
    ]


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _driver_cuda() -> str | None:
    try:
        from cuda.bindings import driver as drv

        err, v = drv.cuDriverGetVersion()
        return f"{v // 1000}.{v % 1000 // 10}" if err == drv.CUresult.CUDA_SUCCESS else None
    except Exception:
        return None


def header(
    script: str, argv: list[str] | None, gpu: str | None, now: datetime | None = None
) -> str:
    """The lines a result file opens with: command, date, machine, versions."""
    now = now or datetime.now(timezone.utc)
    cuda = _driver_cuda() if gpu else None
    machine = ", ".join(
        p
        for p in (
            f"{gpu}, driver CUDA {cuda}" if gpu and cuda else gpu or "no GPU",
            f"{cpu_name()}, {os.cpu_count()} CPUs",
        )
        if p
    )
    versions = [f"python {platform.python_version()}"]
    versions += [f"{d} {v}" for d in PACKAGES if (v := _version(d))]
    commit = _commit()
    lines = [
        f"Command: `{command_line(script, argv)}`",
        "",
        f"Date: {now:%Y-%m-%d %H:%M} UTC",
        f"Machine: {machine}",
        f"Versions: {', '.join(versions)}" + (f"; commit {commit}" if commit else ""),
    ]
    return "\n".join(lines) + "\n"


def write_result(
    benchmark: str,
    body: str,
    args: argparse.Namespace,
    script: str,
    argv: list[str] | None,
    *,
    gpu: str | None,
    suffix: str = "",
) -> Path | None:
    """Write ``body`` under the header to the benchmark's current file (or ``args.out``) and
    return the path; None with ``--out -``."""
    if args.out == "-":
        return None
    machine = args.machine or machine_label(gpu) + suffix
    path = Path(args.out) if args.out else result_path(benchmark, machine, args.results_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header(script, argv, gpu) + "\n" + body.strip("\n") + "\n")
    print(f"wrote {path}", file=sys.stderr)
    return path
