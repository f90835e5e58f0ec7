"""The tirx softmax backward against PyTorch's, in one run on a GPU.

    python benchmarks/softmax_backward_speed.py [--shapes 4096x1024,4096x2048,16384x4096]
                                                [--dtypes float16] [--reps 15] [--out FILE]

For every dtype and shape ``(rows, cols)`` the script checks, then times:

* **tirx**: ``tirx.examples.softmax_backward.make_softmax_backward`` (``dX = Y * (dY -
  sum(dY * Y))``, the row in registers, the row sum over a warp's shuffles and, across warps,
  one shared slot per warp) in the configurations of ``TIRX_CONFIGS``: one warp per row with 4
  or 8 rows per block (``warp/4``, ``warp/8``), or one row per block of 4 or 8 warps
  (``block/4w`` ...); the fastest counting, and the default (the factory's own choice)
  printed too;
* **torch**: ``torch._softmax_backward_data(dY, Y, -1, dtype)``, the kernel PyTorch's
  autograd runs for ``torch.softmax`` (CUDA backend).

Every runner reads two 16-bit tensors and writes one (6 bytes per element); the table gives
microseconds per call, the bandwidth this is (``6 · rows · cols`` bytes per call) and the
ratio tirx / torch. Timing as in ``gemm_speed.py``: back-to-back batches of about 2 ms between
CUDA events, the runners alternating, the median of ``--reps`` samples.

Without a GPU the script compiles the tirx kernels for sm_90 and prints their registers. The
report goes to ``benchmarks/results/softmax_backward_speed-<machine>.md``
(``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402
from gemm_speed import gpu_visible, time_runners  # noqa: E402
from softmax_speed import TIRX_CONFIGS as FORWARD_CONFIGS  # noqa: E402
from softmax_speed import all_runners, best, compile_only  # noqa: E402 - the same helpers

# name -> (warps, warps_per_row) of make_softmax_backward: the forward's, up to 8 warps
TIRX_CONFIGS = {name: c for name, c in FORWARD_CONFIGS.items() if c[0] <= 8}


def _configs(cols: int) -> dict:
    from tirx.examples.softmax import MOST_COLS, most_per_thread

    out = {"default": (4, None)}
    for name, (w, per_row) in TIRX_CONFIGS.items():
        threads = 32 * (per_row if per_row > 1 else w)
        fits = cols // (32 * per_row) <= most_per_thread(threads) and cols <= MOST_COLS
        if cols % (128 * per_row) == 0 and fits:
            out[name] = (w, per_row)
    return out


def _check(name, got, ref, dtype):
    """Within four units in the last place of ``dtype`` of the float64 gradient, scaled by the
    row's largest term since dX is a difference: a check that each runner computes the
    gradient (torch's comes within about two; tirx's own bound is tests/test_softmax.py's)."""
    import torch

    eps = torch.finfo(getattr(torch, dtype)).eps
    err = (got.double() - ref).abs()
    scale = ref.abs().amax(dim=-1, keepdim=True).clamp_min(2.0**-14)
    worst = (err / (4 * eps * scale)).max().item()
    if not worst <= 1.0:
        raise AssertionError(f"{name}: {worst:.2f} × the four-ulp bound from float64")


def measure(rows: int, cols: int, dtype: str, reps: int) -> dict[str, float]:
    """Check every runner, then the median ms per call of each."""
    import torch

    import tirx
    from tirx.examples.softmax_backward import make_softmax_backward

    gen = torch.Generator(device="cuda").manual_seed(rows + cols)
    t = getattr(torch, dtype)
    y = torch.softmax(torch.randn((rows, cols), device="cuda", generator=gen) * 3, -1).to(t)
    dy = torch.randn((rows, cols), device="cuda", generator=gen).to(t)
    yd, dyd = y.double(), dy.double()
    ref = yd * (dyd - (yd * dyd).sum(-1, keepdim=True))
    runners = {}
    for name, (w, per_row) in _configs(cols).items():
        exe = tirx.compile(make_softmax_backward(rows, cols, dtype, w, per_row), target="cuda")
        dx = torch.full_like(y, float("nan"))
        exe(y, dy, dx)
        _check(f"tirx {name}", dx, ref, dtype)
        runners[f"tirx {name}"] = lambda exe=exe, dx=dx: exe(y, dy, dx)

    def torch_backward():
        return torch._softmax_backward_data(dy, y, -1, t)

    _check("torch", torch_backward(), ref, dtype)
    runners["torch"] = torch_backward
    return time_runners(runners, reps, torch)


def table(results: list[tuple[str, int, int, dict[str, float]]], l2_bytes: int = 0) -> str:
    """The summary table; a shape whose three tensors fit in ``l2_bytes`` (the GPU's L2) has
    its bandwidth marked "(L2)": back-to-back calls find their inputs there, and the figure
    may pass the DRAM's."""
    lines = [
        "| dtype | rows × cols | tirx µs (config) | tirx default µs | torch µs | tirx GB/s "
        "| tirx / torch | tirx default / torch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for dtype, rows, cols, ms in results:
        t, d, base = best(ms, "tirx "), ms["tirx default"], ms["torch"]
        gbs = 6 * rows * cols / (ms[t] * 1e-3) / 1e9
        where = " (L2)" if 6 * rows * cols <= l2_bytes else ""
        lines.append(
            f"| {dtype} | {rows} × {cols} | {ms[t] * 1e3:.1f} ({t[5:]}) | {d * 1e3:.1f} "
            f"| {base * 1e3:.1f} | {gbs:.0f}{where} | {ms[t] / base:.2f} | {d / base:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="4096x1024,4096x2048,16384x4096")
    ap.add_argument("--dtypes", default="float16")
    ap.add_argument("--reps", type=int, default=15)
    report.add_output_arguments(ap, "softmax_backward_speed")
    args = ap.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    dtypes = args.dtypes.split(",")
    if not gpu_visible():
        from tirx.examples.softmax_backward import make_softmax_backward

        return compile_only(shapes, dtypes, make_softmax_backward, _configs)
    import torch

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    results = []
    for dtype in dtypes:
        for rows, cols in shapes:
            results.append((dtype, rows, cols, measure(rows, cols, dtype, args.reps)))
    text = "\n\n".join(
        [
            f"# Softmax backward speed: tirx against torch, {date.today()}",
            f"Median of {args.reps} samples per cell (microseconds per call; each sample a "
            "batch of back-to-back calls between two CUDA events). tirx / torch is tirx's "
            "time over torch's in the same run. GB/s counts 6 bytes per element (Y and dY "
            f'read, dX written); "(L2)": the three tensors fit in the GPU\'s {l2 >> 20} MiB '
            "L2, where back-to-back calls find them, so the figure may pass the DRAM's.",
            table(results, l2),
            "## Every runner (µs per call)",
            all_runners(results),
        ]
    )
    print(text)
    report.write_result("softmax_backward_speed", text, args, __file__, argv, gpu=report.gpu_name())
    return 0


if __name__ == "__main__":
    sys.exit(main())
