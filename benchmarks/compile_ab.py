"""The cold compile of the seed kernel from two source trees, in alternating fresh processes.

    python benchmarks/compile_ab.py BEFORE_TREE AFTER_TREE [--runs N] [--arch sm_90] [--no-driver]

The after tree's ``benchmarks/compile.py`` child runs (``--child tirx``: an empty cache, the
clock from defining the seed kernel to ``tirx.compile`` returning; the CUDA driver initialized
before the clock only where there is a GPU) with ``PYTHONPATH`` set to each tree in turn, so
that both trees are measured by the same code and the load of a shared machine weighs on both
alike; NVRTC alone (``--child nvrtc``) takes its turn too. Prints the medians and each stage's
median (``define`` = the kernel module's import and ``@T.function``'s parse; ``other`` = what
``tirx.compile`` spent outside its stages), and the ratio of each cold compile to NVRTC alone.
For comparing a change that must not slow the cold compile down (a restructure); the current
figures of the compile itself are ``benchmarks/compile.py``'s. The table goes to
``benchmarks/results/compile_ab-<machine>.md`` (``benchmarks/report.py``), each tree named by its
commit.

``--no-driver`` (a GPU machine): every child, NVRTC alone included, leaves the CUDA driver alone
before its clock, as a script or ``tirx compile`` for a named arch does (NVRTC's first compile
then initializes the driver itself); the table goes to ``compile_ab-<machine>-nodriver.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402
from compile import _has_gpu  # noqa: E402 - the GPU question compile.py's children are told


def _child(tree: str, args: list[str], tmp: str) -> dict:
    return report.run_in_tree(
        tree, [str(HERE / "compile.py"), "--child", *args], tmp, f"child {args}", cwd=str(HERE),
        TIRX_BENCH_GPU="1" if _has_gpu() else "0",
    )  # fmt: skip


def _source(tree: str, arch: str, tmp: str) -> str:
    """The seed's CUDA source from ``tree`` and its NVRTC command line beside it (the files
    ``compile.py``'s NVRTC-alone child reads)."""
    path = os.path.join(tmp, "warp_matmul.cu")
    code = f"from compile import _write_seed_source; _write_seed_source({arch!r}, {path!r})"
    env = dict(os.environ, PYTHONPATH=tree, TIRX_CACHE_DIR=tempfile.mkdtemp(dir=tmp))
    subprocess.run([sys.executable, "-c", code], env=env, cwd=str(HERE), check=True)
    return path


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--names", nargs=2, metavar=("BEFORE", "AFTER"),
                    help="the trees' commits, where their checkouts cannot say (a copy of a "
                         "tree without its git history, as on the GPU machine)")  # fmt: skip
    ap.add_argument(
        "--no-driver",
        action="store_true",
        help="leave the CUDA driver alone before every clock (see above)",
    )
    report.add_output_arguments(ap, "compile_ab")
    args = ap.parse_args(argv)
    mode = "nodriver" if args.no_driver else "full"  # compile.py's children take it alike
    trees = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    commits = dict(zip(trees, args.names or [report.tree_commit(t) for t in trees.values()]))
    target = f"cuda -arch={args.arch}"
    with tempfile.TemporaryDirectory(prefix="tirx-ab-") as tmp:
        src = _source(trees["after"], args.arch, tmp)
        for tree in trees.values():  # warm each tree's bytecode
            _child(tree, ["tirx", target, mode], tmp)
        results = {"before": [], "after": [], "nvrtc": []}
        imports = {"before": [], "after": []}
        for _ in range(args.runs):
            results["nvrtc"].append(_child(trees["after"], ["nvrtc", src, args.arch, mode], tmp))
            for name, tree in trees.items():
                results[name].append(_child(tree, ["tirx", target, mode], tmp))
                imports[name].append(_child(tree, ["import"], tmp)["ms"])
    nvrtc = statistics.median(r["ms"] for r in results["nvrtc"])
    stages = _stages(results)
    lines = [
        f"# The seed kernel's cold compile for {args.arch}: two trees, median of {args.runs} "
        "alternating runs",
        "",
        "cold ms: from defining the kernel to `tirx.compile` returning, `import tirx` done "
        f"before the clock{_NO_DRIVER_NOTE if args.no_driver else ''}; `import tirx` ms: the "
        "import alone, in its own fresh process (a tree that loads modules at first use moves their cost from the import to the compile: "
        "the sum is what a fresh process waits); tirx's share: the cold compile less NVRTC's "
        "compile call (what the goal bounds; the library's load is not in it where tirx hides "
        "it behind the lowering).",
        "",
        "| tree | commit | import tirx ms | cold ms | import + cold ms | / NVRTC alone | "
        "tirx's share ms | " + " | ".join(stages) + " |",
        "|---|---|---|---|---|---|---|" + "---|" * len(stages),
    ]
    for name in trees:
        cold = statistics.median(r["ms"] for r in results[name])
        imp = statistics.median(imports[name])
        share = statistics.median(r["ms"] - r["compile_ms"] for r in results[name])
        cells = [
            f"{statistics.median(r['timings'].get(s, 0.0) for r in results[name]):.2f}"
            for s in stages
        ]
        lines.append(
            f"| {name} | {commits[name]} | {imp:.1f} | {cold:.1f} | {imp + cold:.1f} | "
            f"{cold / nvrtc:.2f} | {share:.1f} | " + " | ".join(cells) + " |"
        )
    lines.append(f"| NVRTC alone | | | {nvrtc:.1f} | | 1.00 | |" + " |" * len(stages))
    text = "\n".join(lines)
    print(text)
    # the command as written, each tree named by its commit, not by this machine's path
    names = {tree: f"<tree at {commits[name]}>" for name, tree in trees.items()}
    shown = [names.get(os.path.abspath(a), a) for a in (sys.argv[1:] if argv is None else argv)]
    report.write_result(
        "compile_ab", text, args, __file__, shown, gpu=report.gpu_name(),
        suffix="-nodriver" if args.no_driver else "",
    )  # fmt: skip


_NO_DRIVER_NOTE = ", the CUDA driver left alone before it (NVRTC's first compile initializes it)"


def _stages(results) -> list[str]:
    keys = []
    for name in ("before", "after"):
        for r in results[name]:
            for k in r["timings"]:
                if k not in keys:
                    keys.append(k)
    return keys


if __name__ == "__main__":
    main()
