"""How close the e4m3 GEMM of ``tirx.examples.gemm_fp8`` comes to the exact product, beside
``torch._scaled_mm`` (cuBLAS) with and without its fast accumulation, on a GPU.

    python benchmarks/fp8_accuracy.py [--n 2048] [--out FILE]

Hopper's fp8 ``wgmma`` adds its products into the float32 accumulator with fewer bits than a
float32 add keeps; cuBLAS's default (``use_fast_accum=False``) moves partial sums into full
float32 every few K steps, its fast mode does not, and tirx's kernel accumulates in the
``wgmma`` accumulator throughout, as the fast mode does. For each configuration the table
gives, against the float64 product of the same e4m3 operands (scales 0.5 and 2.0): the
relative Frobenius error, the largest error as a fraction of ``sum |a||b|`` of its element,
the largest absolute error, and the share of elements equal to the fast mode's. The report
goes to ``benchmarks/results/fp8_accuracy-<gpu>.md`` (``--out`` to put it elsewhere).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

CONFIGS = (("bfloat16", 256, 3, 1), ("float16", 128, 4, 1), ("bfloat16", 256, 3, 2))


def measure(n: int) -> list[str]:
    import torch

    import tirx
    from tirx.examples import gemm_fp8 as gf

    rows = []
    for out_dtype, bn, stages, cluster in CONFIGS:
        g = torch.Generator(device="cuda").manual_seed(stages)
        a = torch.randn((n, n), device="cuda", generator=g).to(torch.float8_e4m3fn)
        b = torch.randn((n, n), device="cuda", generator=g).to(torch.float8_e4m3fn)
        sa, sb = torch.tensor([0.5], device="cuda"), torch.tensor([2.0], device="cuda")
        odt = getattr(torch, out_dtype)
        ref = a.double() @ b.double().T
        mag = (a.double().abs() @ b.double().abs().T).clamp_min(1)
        out = torch.empty((n, n), dtype=odt, device="cuda")
        kernel = gf.make_gemm_fp8(n, n, n, out_dtype, stages, cluster, bn)
        tirx.compile(kernel, target="cuda")(a, b, sa, sb, out)

        def scaled(fast, a=a, b=b, sa=sa, sb=sb, odt=odt):
            return torch._scaled_mm(
                a, b.t(), scale_a=sa, scale_b=sb, out_dtype=odt, use_fast_accum=fast
            )

        fast = scaled(True)
        for name, got in (("tirx", out), ("_scaled_mm", scaled(False)), ("_scaled_mm fast", fast)):
            err = (got.double() - ref).abs()
            same = (got == fast).double().mean().item()
            rows.append(
                f"| {out_dtype} {bn}/{stages}/{cluster} | {name} "
                f"| {(err.norm() / ref.norm()).item():.2e} | {(err / mag).max().item():.2e} "
                f"| {err.max().item():.3g} | {same:.4f} |"
            )
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048, help="M = N = K")
    report.add_output_arguments(ap, "fp8_accuracy")
    args = ap.parse_args(argv)
    from gemm_speed import gpu_visible

    if not gpu_visible():
        print("fp8_accuracy: no NVIDIA GPU is visible", file=sys.stderr)
        return 2
    head = [
        "# fp8 GEMM accuracy: tirx and torch._scaled_mm against the float64 product",
        "",
        f"M = N = K = {args.n}, e4m3 operands from `randn`, scales 0.5 and 2.0, "
        "configuration = output dtype, block N / stages / cluster.",
        "",
        "| configuration | GEMM | relative Frobenius error | max error / sum abs products "
        "| max abs error | share equal to the fast mode |",
        "|---|---|---|---|---|---|",
    ]
    text = "\n".join(head + measure(args.n)) + "\n"
    print(text)
    report.write_result("fp8_accuracy", text, args, __file__, argv, gpu=report.gpu_name())
    return 0


if __name__ == "__main__":
    sys.exit(main())
