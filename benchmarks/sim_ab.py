"""The CPU simulator's run time from two source trees, in alternating fresh processes.

    python benchmarks/sim_ab.py BEFORE_TREE AFTER_TREE [--rounds N] [--repeat N]

For a change to the simulator: each workload (the seed kernel, the 128^3 and 256^3 GEMMs of
``tirx.examples.gemm``, one attention head of 256 queries and keys at head dims 64 and 128)
is compiled for ``target="sim"`` and run once untimed in a fresh process with ``PYTHONPATH``
set to one tree, then run ``--repeat`` times; the process reports the fastest of those runs.
The trees take turns, ``--rounds`` processes each, so that a shared machine's load weighs on
both alike. The table gives each tree's median over the rounds of those fastest runs and the
after tree's over the before tree's. The current figures of the simulator itself are
``benchmarks/sim_speed.py``'s. The table goes to ``benchmarks/results/sim_ab-<machine>.md``
(``benchmarks/report.py``), each tree named by its commit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

import report  # benchmarks/report.py (scripts run from this folder)

WORKLOADS = {
    "seed 16x8x16 (1 warp)": "seed",
    "gemm 128^3 fp16 (16 blocks x 4 warps)": "gemm128",
    "gemm 256^3 fp16": "gemm256",
    "attention head 256 x 256, d 64": "attention64",
    "attention head 256 x 256, d 128": "attention128",
}

_CHILD = """
import json, time, torch
import tirx
work = {work!r}
if work == "seed":
    from tirx.examples.warp_matmul import warp_matmul as kernel
    g = torch.Generator().manual_seed(0)
    args = (torch.randn(16, 16, generator=g).half(), torch.randn(8, 16, generator=g).half(),
            torch.zeros(16, 8))
    exe = tirx.compile(kernel, target="sim")
elif work.startswith("gemm"):
    from tirx.examples.gemm import make_gemm
    n = int(work[4:])
    g = torch.Generator().manual_seed(0)
    args = (torch.randint(-4, 5, (n, n), generator=g).half(),
            torch.randint(-4, 5, (n, n), generator=g).half(), torch.zeros(n, n))
    exe = tirx.compile(make_gemm(n, n, n, "float16"), target="sim")
else:
    from tirx.examples.attention import attention_executable
    d = int(work[9:])
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 256, d, generator=g).half() for _ in range(3))
    exe = attention_executable(q, k, v)
    args = (q, k, v, torch.empty_like(q), torch.empty(1, 1, 256), d ** -0.5)
exe(*args)
times = []
for _ in range({repeat}):
    t0 = time.perf_counter()
    exe(*args)
    times.append(time.perf_counter() - t0)
print(json.dumps(min(times) * 1e3))
"""


def _child(tree: str, work: str, repeat: int, tmp: str) -> float:
    code = _CHILD.format(work=work, repeat=repeat)
    return report.run_in_tree(
        tree, ["-c", code], tmp, work, TIRX_SIM_BUDGET="0"
    )  # no run cut short


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=7, help="fresh processes per workload and tree")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs in each process")
    report.add_output_arguments(ap, "sim_ab")
    args = ap.parse_args(argv)
    trees = [os.path.abspath(args.before), os.path.abspath(args.after)]
    med = statistics.median
    rows = []
    with tempfile.TemporaryDirectory(prefix="tirx-sim-ab-") as tmp:
        for name, work in WORKLOADS.items():
            got = {tree: [] for tree in trees}
            for _ in range(args.rounds):
                for tree in trees:
                    got[tree].append(_child(tree, work, args.repeat, tmp))
            rows.append((name, med(got[trees[0]]), med(got[trees[1]])))
    before, after = (f"`{report.tree_commit(t)}`" for t in trees)
    lines = [
        f"# The simulator's run time, two trees: medians over {args.rounds} alternating "
        f"processes of each one's fastest of {args.repeat} runs",
        "",
        f'One run: `exe(...)` of a kernel compiled for `target="sim"`, after an untimed first '
        f"run. Trees: before {before}, after {after}.",
        "",
        "| workload | before ms | after ms | after / before |",
        "|---|---|---|---|",
    ]
    for name, b, a in rows:
        lines.append(f"| {name} | {b:.1f} | {a:.1f} | {a / b:.2f} |")
    text = "\n".join(lines)
    print(text)
    report.write_result(
        "sim_ab", text, args, __file__, report.trees_by_commit(argv), gpu=report.gpu_name()
    )


if __name__ == "__main__":
    main()
