"""The SM clock and board power while one kernel runs back to back, kernel by kernel.

    python benchmarks/gemm_clocks.py [--variants tirx,NAME,...] [--n 8192] [--seconds 1.5]

Each runner (the named tirx variants, the mma.sync register-only peak, cuBLAS) runs alone for
``--seconds`` while ``nvidia-smi`` is read (clocks.sm, power.draw: read-only queries); the table
gives the median clock and power of the second half of each run and the kernel's TFLOP/s then.
A kernel that moves more data per flop draws more power, and a power-capped GPU lowers its clock:
this says whether two kernels' speeds differ by their code or by the clock they were given.
The table goes to ``benchmarks/results/gemm_clocks-<machine>.md`` (``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402
from gemm_kernels import TIRX_VARIANTS, make_mma_peak, output_dtype, peak_flops  # noqa: E402


def _sampler(samples: list, stop: threading.Event) -> None:
    cmd = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"]
    while not stop.is_set():
        out = subprocess.run(cmd, capture_output=True, text=True).stdout.strip().split(",")
        try:
            samples.append((time.perf_counter(), float(out[0]), float(out[1])))
        except (ValueError, IndexError):
            pass
        time.sleep(0.05)


def run_for(fn, seconds: float, torch):
    samples: list = []
    stop = threading.Event()
    thread = threading.Thread(target=_sampler, args=(samples, stop))
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    thread.start()
    calls, mid_t, mid_calls = 0, None, 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            fn()
        calls += 8
        torch.cuda.synchronize()
        if mid_t is None and time.perf_counter() - t0 >= seconds / 2:
            mid_t, mid_calls = time.perf_counter(), calls
    end = time.perf_counter()
    stop.set()
    thread.join()
    late = [s for s in samples if s[0] >= mid_t] or samples
    per_call = (end - mid_t) / max(calls - mid_calls, 1)
    return statistics.median(s[1] for s in late), statistics.median(s[2] for s in late), per_call


def main(argv=None) -> int:
    import torch

    import tirx

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="tirx")
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--seconds", type=float, default=1.5)
    report.add_output_arguments(ap, "gemm_clocks")
    args = ap.parse_args(argv)
    n = args.n
    tdtype = getattr(torch, args.dtype)
    a = torch.randn((n, n), device="cuda").to(tdtype)
    b = torch.randn((n, n), device="cuda").to(tdtype)
    runners = {}
    for name in (v.strip() for v in args.variants.split(",") if v.strip()):
        kernel = TIRX_VARIANTS[name](n, n, n, args.dtype)
        out = torch.empty((n, n), device="cuda", dtype=getattr(torch, output_dtype(kernel)))
        exe = tirx.compile(kernel, target="cuda")
        runners[name] = (lambda exe=exe, out=out: exe(a, b, out), 2.0 * n**3)
    peak, blocks, threads = make_mma_peak(args.dtype)
    pexe = tirx.compile(peak, target="cuda")
    sink = torch.zeros((blocks * threads,), device="cuda", dtype=torch.float32)
    runners["mma.sync peak"] = (lambda: pexe(sink), peak_flops(args.dtype))
    bt = b.T
    runners["cublas"] = (lambda: torch.matmul(a, bt), 2.0 * n**3)
    lines = [
        "# SM clock and board power per kernel",
        "",
        f"Each row: the kernel alone for {args.seconds:g} s back to back, the median SM clock and "
        "board power of the second half (`nvidia-smi`, read-only) and the TFLOP/s then.",
        "",
        f"| kernel ({args.dtype}, n={n}) | SM clock MHz | power W | TFLOP/s |",
        "|---|---|---|---|",
    ]
    print("\n".join(lines[-2:]))
    for name, (fn, flops) in runners.items():
        mhz, watts, per_call = run_for(fn, args.seconds, torch)
        lines.append(f"| {name} | {mhz:.0f} | {watts:.0f} | {flops / per_call / 1e12:.1f} |")
        print(lines[-1], flush=True)
    report.write_result("gemm_clocks", "\n".join(lines), args, __file__, argv,
                        gpu=report.gpu_name())  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
