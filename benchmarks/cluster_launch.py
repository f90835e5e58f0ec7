"""What a launch in thread-block clusters costs from Python, and what the simulator takes to run
a cluster's blocks together.

    python benchmarks/cluster_launch.py [--launches 20000] [--reps 9]

On a GPU: one kernel (one warp per block, 8 blocks, each storing its cluster rank), compiled
twice, without clusters and with ``cluster=(2, 1, 1)``; each executable issues ``--launches``
calls in a tight loop and synchronizes once (median and best of ``--reps`` batches, round-robin).
The plain one launches through ``cuLaunchKernel`` (its C runner where the extension is built);
the cluster one through ``cuLaunchKernelEx`` with ``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION``
from the Python runner (``tirx/backend/cuda/cluster_launch.py``); a third row calls
``cuLaunchKernelEx`` directly with a ready configuration and argument block (its floor).

On any machine: the simulator's time for the DSMEM exchange kernel of the tests (a grid of 8
blocks of 64 threads, two cluster barriers) in clusters of 1 (no ``cluster=``: blocks one after
another), 2 and 4 (blocks of a cluster on threads of their own), best of ``--reps``.

The table goes to ``benchmarks/results/cluster_launch-<machine>.md`` (``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import report  # noqa: E402

KERNEL = """
@T.function
def kernel(Out: T.Tensor((8,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=8, block=32{cluster}))
    if T.cuda.thread_idx("x") == 0:
        Out[T.cuda.block_idx("x")] = T.cuda.mov_sreg(32, "cluster_ctarank")
"""


def _define(source: str, folder: Path):
    from tests.helpers import define

    return define(source, folder, "kernel")


def _batches(calls: dict, launches: int, reps: int, sync) -> dict:
    times = {name: [] for name in calls}
    for call in calls.values():  # warm-up
        for _ in range(launches // 10):
            call()
        sync()
    for _ in range(reps):
        for name, call in calls.items():
            t0 = time.perf_counter()
            for _ in range(launches):
                call()
            sync()
            times[name].append((time.perf_counter() - t0) / launches * 1e6)
    return times


def run_gpu(args, folder: Path) -> list[str]:
    import torch

    import tirx
    from tirx.backend.cuda import driver

    plain = tirx.compile(_define(KERNEL.format(cluster=""), folder), target="cuda")
    clustered = tirx.compile(
        _define(KERNEL.format(cluster=", cluster=(2, 1, 1)"), folder), target="cuda"
    )
    out = torch.zeros(8, dtype=torch.int32, device="cuda")
    plain(out)
    clustered(out)
    torch.cuda.synchronize()
    ranks = out.cpu().tolist()
    launcher = clustered._launcher
    block, params = launcher.pack(out.data_ptr())
    stream = driver.STREAMS[torch.cuda.current_stream().cuda_stream]
    entry = launcher.entry
    config = entry._config((int(stream), 8, 1, 1, 32, 1, 1, 0), stream)
    raw = entry._launch
    handle = launcher.kernel.handle
    calls = {
        f"tirx, no cluster (cuLaunchKernel, {plain.fast_path} runner)": lambda: plain(out),
        f"tirx, cluster=(2, 1, 1) (cuLaunchKernelEx, {clustered.fast_path} runner)": (
            lambda: clustered(out)
        ),
        "raw cuLaunchKernelEx, ready configuration and arguments": (
            lambda: raw(config, handle, params, 0)
        ),
    }
    times = _batches(calls, args.launches, args.reps, torch.cuda.synchronize)
    del block
    lines = [
        f"Ranks the cluster launch gave the 8 blocks: {ranks} (x fastest, clusters of 2).",
        "",
        "| launch | median µs per call | best µs |",
        "|---|---|---|",
    ]
    for name, ts in times.items():
        lines.append(f"| {name} | {statistics.median(ts):.2f} | {min(ts):.2f} |")
    return lines


def run_sim(args, folder: Path) -> list[str]:
    import tirx
    from tests.cluster_kernels import exchange_kernel

    a = np.arange(8 * 64, dtype=np.int32).reshape(8, 64)
    lines = ["| simulator, DSMEM exchange (8 blocks x 64 threads) | best ms |", "|---|---|"]
    for c in (1, 2, 4):
        exe = tirx.compile(exchange_kernel(folder, G=8, C=c), target="sim")
        ts = []
        for _ in range(args.reps):
            out = np.zeros_like(a)
            t0 = time.perf_counter()
            exe(a, out)
            ts.append((time.perf_counter() - t0) * 1e3)
        lines.append(f"| clusters of {c} block(s) | {min(ts):.1f} |")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=9)
    report.add_output_arguments(ap, "cluster_launch")
    args = ap.parse_args(argv)
    from tirx.backend.cuda import driver

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        lines = run_gpu(args, folder) + [""] if driver.gpu_count() else []
        lines += run_sim(args, folder)
    text = "\n".join(lines)
    print(text)
    report.write_result("cluster_launch", text, args, __file__, argv, gpu=report.gpu_name())


if __name__ == "__main__":
    main()
