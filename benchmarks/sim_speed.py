"""How fast the CPU simulator runs the seed kernel and tiled GEMMs.

    python benchmarks/sim_speed.py [--repeat N]

For each kernel: median wall time per call (untraced), warp-level tile instructions executed
(counted once with tracing on), and simulated tile instructions per second. The baseline
column is the same product computed by torch on the CPU in the same run, to show what the
simulator costs relative to doing the arithmetic directly; the goal column is the target
the project set (seed < 20 ms, 128^3 GEMM < 2 s).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

import tirx
from tirx.examples.gemm import make_gemm
from tirx.examples.warp_matmul import warp_matmul


def _median_time(fn, repeat):
    fn()  # warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(name, kernel, m, n, k, dtype, goal_s, repeat):
    tdt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(-4, 5, (m, k), generator=gen).to(tdt)
    b = torch.randint(-4, 5, (n, k), generator=gen).to(tdt)
    out = torch.zeros(m, n)
    exe = tirx.compile(kernel, target="sim")
    t_sim = _median_time(lambda: exe(a, b, out), repeat)
    assert torch.equal(out, a.float() @ b.float().T), name
    traced = exe(a, b, out, trace=True)
    instructions = len(traced.traces)
    t_ref = _median_time(lambda: a.float() @ b.float().T, max(repeat, 20))
    return (
        name,
        t_sim * 1e3,
        instructions,
        instructions / t_sim,
        t_sim / t_ref,
        goal_s * 1e3,
        t_sim <= goal_s,
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    rows = [
        bench("seed 16x8x16 (1 warp)", warp_matmul, 16, 8, 16, "float16", 0.020, args.repeat * 4),
        bench(
            "gemm 128^3 fp16 (16 blocks x 4 warps)",
            make_gemm(128, 128, 128, "float16"),
            128,
            128,
            128,
            "float16",
            2.0,
            args.repeat,
        ),
        bench(
            "gemm 128x256x64 bf16",
            make_gemm(128, 256, 64, "bfloat16"),
            128,
            256,
            64,
            "bfloat16",
            2.0,
            args.repeat,
        ),
        bench(
            "gemm 256^3 fp16",
            make_gemm(256, 256, 256, "float16"),
            256,
            256,
            256,
            "float16",
            10.0,
            max(args.repeat // 2, 1),
        ),
    ]
    print(
        f"tirx {tirx.__version__} simulator, {platform.processor() or platform.machine()}, "
        f"python {platform.python_version()}, torch {torch.__version__}"
    )
    head = ("kernel", "ms/call", "tile instrs", "instrs/s", "x torch-cpu", "goal ms", "ok")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, ms, n, rate, ratio, goal, ok in rows:
        print(
            f"| {name} | {ms:.1f} | {n} | {rate:,.0f} | {ratio:,.0f} | {goal:.0f} | "
            f"{'yes' if ok else 'NO'} |"
        )


if __name__ == "__main__":
    main()
