"""What the simulator's profile costs: a run without it (against a checkout without the
profiler, ``--baseline``) and a run with it.

    python benchmarks/sim_profile_overhead.py [--baseline /path/to/other/checkout]
                                              [--rounds 5] [--repeat 7] [--out FILE]

Each round starts one worker process per tree (this checkout, then the baseline), alternating,
so that a shared machine's load weighs on both alike; a worker imports that tree's tirx, warms
each kernel up and reports the median wall time of ``--repeat`` runs: the seed kernel and the
128^3 tiled GEMM (``tirx.examples.gemm``), without profiling and, in this checkout, with
``exe.profile``. The table gives the median over rounds. A run without the profile pays one
``None`` test per memory access and per compiled node; the goal is no measurable difference.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def worker(profile: bool, repeat: int) -> dict:
    import torch

    import tirx
    from tirx.examples.gemm import make_gemm
    from tirx.examples.warp_matmul import warp_matmul

    gen = torch.Generator().manual_seed(0)
    out = {}
    for name, kernel, (m, n, k) in (
        ("seed 16x8x16", warp_matmul, (16, 8, 16)),
        ("GEMM 128^3", make_gemm(128, 128, 128), (128, 128, 128)),
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.worker:
        print(json.dumps(worker(opts.profile, opts.repeat)))
        return
    rows: dict[str, list[float]] = {}
    for _ in range(opts.rounds):
        for key, value in run_worker(HERE, True, opts.repeat).items():
            rows.setdefault(f"this|{key}", []).append(value)
        if opts.baseline is not None:
            for key, value in run_worker(opts.baseline, False, opts.repeat).items():
                rows.setdefault(f"baseline|{key}", []).append(value)
    med = {k: statistics.median(v) for k, v in rows.items()}
    lines = [
        f"# simulator profile overhead ({platform.node()}, {os.cpu_count()} CPUs, "
        f"{opts.rounds} rounds x {opts.repeat} runs, medians)",
        "",
        "| kernel | baseline, no profiler (ms) | this, profile off (ms) | this, profile on (ms) |",
        "|---|---|---|---|",
    ]
    for name in ("seed 16x8x16", "GEMM 128^3"):
        base = med.get(f"baseline|{name}|off")
        cells = [f"{base * 1e3:.2f}" if base is not None else "—"]
        cells += [f"{med[f'this|{name}|{mode}'] * 1e3:.2f}" for mode in ("off", "on")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if opts.out is not None:
        opts.out.write_text(text)


if __name__ == "__main__":
    main()
