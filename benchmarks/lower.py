"""How long tirx's own work on a kernel takes beside NVRTC's, for the example kernels.

    python benchmarks/lower.py [TREE ...] [--runs N] [--out FILE]

For each example kernel, in fresh processes (``--runs`` of them, medians), after ``import
tirx``: ``define`` (importing the kernel's module and making the kernel: its factory and
``@T.function``'s parse), ``lower`` (``lower_function``: the tile
operations checked against their contracts, indices simplified), ``codegen`` (these two with
the garbage collector paused, as ``tirx.compile`` runs them, in a tree whose ``tirx.compile``
does so) and NVRTC's
compile of the generated source with tirx's command line (the first in the process, as in a
cold compile). The ratio is tirx's work (define + lower + codegen) over NVRTC's. With two
source trees (``TREE``: a checkout; default this one), each kernel's processes alternate
between them, and the table gives both and the second's lowering over the first's: for a
change to the lowering. NVRTC runs in the last tree's processes only (the generated source is
the same). The table goes to ``benchmarks/results/lower-<machine>.md`` (``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

# (name, import, factory call, arch): representative kernels of each family of examples
KERNELS = [
    ("seed (warp_matmul)", "from tirx.examples.warp_matmul import warp_matmul as k", "k", 90),
    ("gemm 128^3", "from tirx.examples.gemm import make_gemm", "make_gemm(128, 128, 128)", 80),
    ("gemm_pipelined 4096^3", "from tirx.examples.gemm_pipelined import make_gemm_pipelined",
     "make_gemm_pipelined(4096, 4096, 4096)", 80),
    ("gemm_wgmma 4096^3", "from tirx.examples.gemm_wgmma import make_gemm_wgmma",
     "make_gemm_wgmma(4096, 4096, 4096)", 90),
    ("gemm_fp8 2048^3", "from tirx.examples.gemm_fp8 import make_gemm_fp8",
     "make_gemm_fp8(2048, 2048, 2048)", 90),
    ("attention_mma d128", "from tirx.examples.attention_mma import make_attention",
     "make_attention(1, 8, 8, 1024, 1024, 128)", 80),
    ("attention_wgmma d128", "from tirx.examples.attention_wgmma import make_attention",
     "make_attention(1, 8, 8, 1024, 1024, 128)", 90),
]  # fmt: skip

_CHILD = """
import json, sys, time
import tirx
t1 = time.perf_counter()
{imp}
kernel = {call}
fn = kernel.ir
t2 = time.perf_counter()
from tirx.transform.lower import lower_function
from tirx.backend.cuda.codegen import generate
if "tirx.collector" in sys.modules:  # as this tree's tirx.compile runs them: collector paused
    from tirx.collector import paused
else:  # (not an import attempt: an editable install would find the module in another tree)
    from contextlib import nullcontext as paused
with paused():
    low = lower_function(fn, arch={arch})
    t3 = time.perf_counter()
    source = generate(low)
    t4 = time.perf_counter()
out = dict(define=(t2 - t1) * 1e3, lower=(t3 - t2) * 1e3, codegen=(t4 - t3) * 1e3)
if {nvrtc}:
    from tirx.backend.cuda import executable as build
    if not hasattr(build, "nvrtc_options"):  # a tree from after build.py was split out
        from tirx.backend.cuda import build
    nvrtc_arch, nvrtc_options = build.nvrtc_arch, build.nvrtc_options
    from tirx.backend.cuda.nvrtc import command_line, compile_cuda, nvrtc_version
    arch = nvrtc_arch(low, "sm_{arch}")
    command = command_line(arch, nvrtc_options(nvrtc_version()))
    t5 = time.perf_counter()
    compile_cuda(source, arch=arch, filename="k.cu", command=command)
    out["nvrtc"] = (time.perf_counter() - t5) * 1e3
print(json.dumps(out))
"""


def _child(tree: str, kernel, nvrtc: bool, tmp: str) -> dict:
    _, imp, call, arch = kernel
    code = _CHILD.format(imp=imp, call=call, arch=arch, nvrtc=nvrtc)
    return report.run_in_tree(tree, ["-c", code], tmp, kernel[0])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="*", help="source trees (default: this checkout)")
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per kernel and tree")
    report.add_output_arguments(ap, "lower")
    args = ap.parse_args(argv)
    trees = [os.path.abspath(t) for t in args.trees] or [str(report.ROOT)]
    if len(trees) > 2:
        ap.error("one or two trees")
    med = statistics.median
    rows = []
    with tempfile.TemporaryDirectory(prefix="tirx-lower-") as tmp:
        for kernel in KERNELS:
            for tree in trees:  # warm each tree's bytecode
                _child(tree, kernel, False, tmp)
            got = {tree: [] for tree in trees}
            for _ in range(args.runs):
                for tree in trees:
                    got[tree].append(_child(tree, kernel, tree == trees[-1], tmp))
            rows.append((kernel[0], got))
    names = [f"`{report.tree_commit(t)}`" for t in trees]
    head = "| kernel |" + (" tree |" if len(trees) > 1 else "")
    head += " define ms | lower ms | codegen ms | NVRTC ms | tirx / NVRTC |"
    if len(trees) > 1:
        head += " lower, after / before |"
    lines = [
        f"# tirx's work on the example kernels beside NVRTC's: medians of {args.runs} fresh "
        "processes",
        "",
        "define: the kernel's module, factory and parse; lower: `lower_function`; NVRTC: the first "
        "compile in the process of the generated source, tirx's command line; tirx / NVRTC: "
        "(define + lower + codegen) / NVRTC."
        + (" Trees: before " + names[0] + ", after " + names[1] + "." if len(trees) > 1 else ""),
        "",
        head,
        "|---" * (head.count("|") - 1) + "|",
    ]
    for name, got in rows:
        nv = med(r["nvrtc"] for r in got[trees[-1]])
        before_lower = med(r["lower"] for r in got[trees[0]])
        for i, tree in enumerate(trees):
            d, low, cg = (med(r[k] for r in got[tree]) for k in ("define", "lower", "codegen"))
            cells = [name] + ([("before", "after")[i]] if len(trees) > 1 else [])
            cells += [
                f"{d:.1f}",
                f"{low:.1f}",
                f"{cg:.1f}",
                f"{nv:.1f}",
                f"{(d + low + cg) / nv:.2f}",
            ]
            if len(trees) > 1:
                cells.append(f"{low / before_lower:.2f}" if i else "")
            lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text)
    report.write_result(
        "lower", text, args, __file__, report.trees_by_commit(argv), gpu=report.gpu_name()
    )


if __name__ == "__main__":
    main()
