"""How fast the CPU simulator runs the seed kernel and tiled GEMMs.

    python benchmarks/sim_speed.py [--repeat N] [--quick] [--out FILE]

For each kernel: median wall time per call (untraced), warp-level tile instructions executed
(counted once with tracing on), and simulated tile instructions per second. The baseline
column is the same product computed by torch on the CPU in the same run, to show what the
simulator costs relative to doing the arithmetic directly; the goal column is the target
the project set (seed < 20 ms, 128^3 GEMM < 2 s).

A second table times what the tests only check for correctness: how soon a runaway
``while True`` stops at a 0.5 s budget, a sum of 2,900 terms (about CPython's own depth)
compiled and run on the simulator, and one head of attention (256 queries and keys, head dims
64 and 128: ``tirx.examples.attention`` on CPU tensors), compiled and run (``--quick`` leaves
out the 256^3 GEMM).

The tables go to ``benchmarks/results/sim_speed-<machine>.md`` (``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import tempfile
import time
from pathlib import Path

import report  # benchmarks/report.py (scripts run from this folder)
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


def bench_budget_stop(budget_s=0.5):
    """Wall time from launch to the budget's SimulationError for a kernel that never ends."""
    from tirx import sim
    from tirx.errors import SimulationError
    from tirx.ir import nodes as ir

    tid = ir.Special(ir.Builtin.THREAD_IDX, 0, ir.I32)
    s = ir.Buffer("s", ir.I32, ir.Scope.SHARED, (32,), None, 32)
    body = ir.Seq(
        (
            ir.Store(s, tid, tid, ir.I32),
            ir.While(ir.const(True), ir.Store(s, tid, ir.Load(s, tid, ir.I32) + 1, ir.I32)),
        )
    )
    fn = ir.Function(
        "spin",
        (),
        body,
        ir.LaunchConfig((1, 1, 1), (32, 1, 1)),
        allocations=(s,),
        shared_offsets={s: 0},
        shared_bytes=128,
        lowered=True,
    )
    t0 = time.perf_counter()
    try:
        sim.run(fn, [], budget=budget_s)
    except SimulationError as e:
        assert "budget" in e.message, e.message
    else:
        raise AssertionError("the runaway loop was not stopped")
    return time.perf_counter() - t0


def bench_deep_sum(n=2900, repeat=5):
    """Compile and run ``out[x] = x + x + ... + x`` (n terms) on the simulator."""
    import numpy as np

    src = (
        "from tirx import T\n\n\n@T.function\n"
        "def deep(out: T.Tensor((32,), 'int32')):\n"
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))\n"
        "    x = T.cuda.lane_id()\n"
        f"    out[x] = {' + '.join(['x'] * n)}\n"
    )
    with tempfile.TemporaryDirectory() as tmp:  # the parser reads the kernel's source file
        path = Path(tmp) / "deep_bench.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location("deep_bench", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    t0 = time.perf_counter()
    exe = tirx.compile(module.deep, target="sim")
    t_compile = time.perf_counter() - t0
    out = np.zeros(32, np.int32)
    t_run = _median_time(lambda: exe(out), repeat)
    assert (out == n * np.arange(32)).all()
    return t_compile, t_run


def bench_attention(head_dim: int, repeat: int = 3):
    """Compile, then run, the attention kernel for one (256 x 256) head on the simulator."""
    from tirx.examples.attention import attention_executable

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 256, head_dim, generator=gen).half() for _ in range(3))
    t0 = time.perf_counter()
    exe = attention_executable(q, k, v)
    t_compile = time.perf_counter() - t0
    o, lse = torch.empty_like(q), torch.empty(1, 1, 256)
    t_run = _median_time(lambda: exe(q, k, v, o, lse, head_dim**-0.5), repeat)
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())
    assert (o.double() - ref).abs().max() < 1e-2
    return t_compile, t_run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="leave out the 256^3 GEMM")
    report.add_output_arguments(ap, "sim_speed")
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
        )
        if not args.quick
        else None,
    ]
    rows = [r for r in rows if r is not None]
    head = ("kernel", "ms/call", "tile instrs", "instrs/s", "x torch-cpu", "goal ms", "ok")
    lines = [
        f"tirx {tirx.__version__} simulator, {platform.processor() or platform.machine()}, "
        f"python {platform.python_version()}, torch {torch.__version__}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for name, ms, n, rate, ratio, goal, ok in rows:
        lines.append(
            f"| {name} | {ms:.1f} | {n} | {rate:,.0f} | {ratio:,.0f} | {goal:.0f} | "
            f"{'yes' if ok else 'NO'} |"
        )
    stop = bench_budget_stop()
    compile_s, run_s = bench_deep_sum(repeat=args.repeat)
    lines += [
        "",
        "| case | ms |",
        "|---|---|",
        f"| runaway while True stopped at a 0.5 s budget | {stop * 1e3:.0f} |",
        f"| sum of 2900 terms: tirx.compile(target='sim') | {compile_s * 1e3:.0f} |",
        f"| sum of 2900 terms: one simulator run | {run_s * 1e3:.1f} |",
    ]
    for d in (64, 128):
        compile_s, run_s = bench_attention(d)
        lines += [
            f"| attention head 256 x 256, d {d}: compile (target='sim') | {compile_s * 1e3:.0f} |",
            f"| attention head 256 x 256, d {d}: one simulator run | {run_s * 1e3:.0f} |",
        ]
    text = "\n".join(lines)
    print(text)
    # the simulator runs on the CPU, but the file is named after the machine like the others
    report.write_result("sim_speed", text, args, __file__, argv, gpu=report.gpu_name())


if __name__ == "__main__":
    main()
