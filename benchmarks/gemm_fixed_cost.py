"""What a GEMM launch costs besides its K loop: time ``M = N = n`` at several K and fit a line.

    python benchmarks/gemm_fixed_cost.py [--variants tirx,NAME,...] [--n 4096]
                                         [--ks 512,1024,2048,4096] [--dtype float16]

Time per call is ``fixed + per_k * K``: ``per_k`` is the main loop's cost of one K step, and
``fixed`` what every block pays once (the prologue's first copies, the epilogue's stores, the
last partial wave, the launch). Leaving K tiles out is the "leave one stage out" measurement
for the prologue and epilogue: if ``fixed`` is a few percent of the ``K = n`` time, a faster
epilogue cannot buy more than that. Each kernel is checked against float64 torch first. The
lines go to ``benchmarks/results/gemm_fixed_cost-<machine>.md`` (``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402
from gemm_kernels import TIRX_VARIANTS, output_dtype  # noqa: E402
from gemm_speed import _check, time_runners  # noqa: E402


def fit(ks, ms):
    """Least-squares line ``ms = fixed + per_k * k``."""
    n = len(ks)
    mk, mm = sum(ks) / n, sum(ms) / n
    per_k = sum((k - mk) * (m - mm) for k, m in zip(ks, ms)) / sum((k - mk) ** 2 for k in ks)
    return mm - per_k * mk, per_k


def main(argv=None) -> int:
    import torch

    import tirx

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="tirx")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--ks", default="512,1024,2048,4096")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--reps", type=int, default=9)
    report.add_output_arguments(ap, "gemm_fixed_cost")
    args = ap.parse_args(argv)
    n, ks = args.n, [int(k) for k in args.ks.split(",")]
    tdtype = getattr(torch, args.dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    lines = [f"M = N = {n}, {args.dtype}; ms per call at K = {ks}; fixed + per-K fit"]
    print(lines[0])
    for name in (v.strip() for v in args.variants.split(",") if v.strip()):
        runners = {}
        for k in ks:
            a = torch.randn((n, k), device="cuda", generator=gen).to(tdtype)
            b = torch.randn((n, k), device="cuda", generator=gen).to(tdtype)
            kernel = TIRX_VARIANTS[name](n, n, k, args.dtype)
            odt = output_dtype(kernel)
            out = torch.full((n, n), float("nan"), device="cuda", dtype=getattr(torch, odt))
            exe = tirx.compile(kernel, target="cuda")
            exe(a, b, out)
            tol = 1e-5 if odt == "float32" else 1e-2
            _check(f"{name} K={k}", out, a.double() @ b.double().T, tol)
            runners[k] = lambda exe=exe, a=a, b=b, out=out: exe(a, b, out)
        ms = time_runners(runners, args.reps, torch)
        fixed, per_k = fit(ks, [ms[k] for k in ks])
        full = fixed + per_k * n
        cells = ", ".join(f"K={k}: {ms[k] * 1e3:.1f} us" for k in ks)
        lines.append(
            f"{name}: {cells}; fixed {fixed * 1e3:.1f} us ({fixed / full:.1%} of K={n}), "
            f"loop at {2 * n * n / (per_k * 1e9):.1f} TFLOP/s"
        )
        print(lines[-1], flush=True)
    text = "# What a GEMM launch costs besides its K loop\n\n" + "\n\n".join(lines)
    report.write_result("gemm_fixed_cost", text, args, __file__, argv, gpu=report.gpu_name())
    return 0


if __name__ == "__main__":
    sys.exit(main())
