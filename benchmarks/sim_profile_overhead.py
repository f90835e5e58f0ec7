"""What the simulator's profile costs: a run without it, against the same code at a revision
without the profiler (``--baseline REV``), and a run with it.

    python benchmarks/sim_profile_overhead.py [--baseline REV] [--rounds 7] [--repeat 7]

``REV`` is a git revision of this repository (``main``, a commit): its ``tirx/`` is exported to a
temporary folder. Each round starts one worker process per tree (this checkout and the
baseline, the first of them alternating from round to round), so that a shared machine's load
weighs on both alike; a worker imports
that tree's tirx, warms each kernel up and reports the median wall time of ``--repeat`` runs:
the seed kernel and the 128^3 tiled GEMM (``tirx.examples.gemm``), without profiling and, in
this checkout, with ``exe.profile``. The table gives the median over rounds and goes to
``benchmarks/results/sim_profile_overhead-<machine>.md`` (``benchmarks/report.py``). A run
without the profile pays one ``None`` test per memory access and per compiled node; the goal is
no measurable difference.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

HERE = Path(__file__).resolve().parents[1]
KERNELS = ("seed 16x8x16", "GEMM 128^3")


def worker(profile: bool, repeat: int) -> dict:
    import torch

    import tirx
    from tirx.examples.gemm import make_gemm
    from tirx.examples.warp_matmul import warp_matmul

    gen = torch.Generator().manual_seed(0)
    out = {}
    for name, kernel, (m, n, k) in zip(
        KERNELS, (warp_matmul, make_gemm(128, 128, 128)), ((16, 8, 16), (128, 128, 128))
    ):
        a = torch.randint(-4, 5, (m, k), generator=gen).to(torch.float16)
        b = torch.randint(-4, 5, (n, k), generator=gen).to(torch.float16)
        c = torch.zeros(m, n)
        exe = tirx.compile(kernel, target="sim")
        runs = [("off", functools.partial(exe, a, b, c))]
        if profile:
            runs.append(("on", functools.partial(exe.profile, a, b, c)))
        for mode, fn in runs:
            fn()
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            out[f"{name}|{mode}"] = statistics.median(times)
    return out


def run_worker(tree: Path, profile: bool, repeat: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    args = [sys.executable, str(Path(__file__).resolve()), "--worker", "--repeat", str(repeat)]
    if profile:
        args.append("--profile")
    done = subprocess.run(args, env=env, cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def export(rev: str, folder: str) -> Path:
    """``tirx/`` of git revision ``rev``, written into ``folder``."""
    archive = subprocess.run(
        ["git", "-C", str(HERE), "archive", "--format=tar", rev, "tirx"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    path = Path(folder) / "tree.tar"
    path.write_bytes(archive)
    with tarfile.open(path) as tar:
        tar.extractall(folder, filter="data")
    return Path(folder)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default=None, metavar="REV")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    report.add_output_arguments(ap, "sim_profile_overhead")
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.profile, args.repeat)))
        return
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="tirx-baseline-") as tmp:
        base = export(args.baseline, tmp) if args.baseline else None
        trees = [("this", HERE, True)] + ([("baseline", base, False)] if base else [])
        for r in range(args.rounds):
            for tag, tree, profile in trees[
                :: 1 if r % 2 == 0 else -1
            ]:  # who goes first alternates
                for key, value in run_worker(tree, profile, args.repeat).items():
                    rows.setdefault(f"{tag}|{key}", []).append(value)
    med = {k: statistics.median(v) for k, v in rows.items()}
    lines = [
        f"# The simulator's profile: its cost off and on ({args.rounds} rounds x "
        f"{args.repeat} runs, medians, ms)",
        "",
        f"| kernel | baseline {args.baseline or '—'} | this, profile off | this, profile on |",
        "|---|---|---|---|",
    ]
    for name in KERNELS:
        base_ms = med.get(f"baseline|{name}|off")
        cells = [f"{base_ms * 1e3:.2f}" if base_ms is not None else "—"]
        cells += [f"{med[f'this|{name}|{mode}'] * 1e3:.2f}" for mode in ("off", "on")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text)
    report.write_result("sim_profile_overhead", text, args, __file__, argv, gpu=report.gpu_name())


if __name__ == "__main__":
    main()
