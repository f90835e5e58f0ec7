"""The tirx softmax against ``torch.softmax`` and a Triton softmax, in one run on a GPU.

    python benchmarks/softmax_speed.py [--shapes 4096x1024,16384x4096] [--dtypes float16]
                                       [--reps 15] [--out FILE]

For every dtype and shape ``(rows, cols)`` the script checks, then times:

* **tirx**: ``tirx.examples.softmax.make_softmax`` (the row in registers; warp shuffles, and
  across warps one shared slot per warp, for the max and the sum) in the configurations of
  ``TIRX_CONFIGS``: one warp per row with 4 or 8 rows per block (``warp/4``, ``warp/8``), or
  one row per block of 4, 8 or 16 warps (``block/4w`` ...); the fastest counting, and the
  default (``make_softmax``'s own choice) printed too;
* **torch**: ``torch.softmax(x, dim=-1)`` (the row softmax of PyTorch's CUDA backend);
* **Triton**: a one-row-per-program softmax written below (the row in one block of
  ``next_power_of_2(cols)`` elements, float32 inside), at 4, 8 and 16 warps, the fastest
  counting.

Every runner reads the float16 rows and writes float16 rows (2 bytes in, 2 out per element);
the table gives microseconds per call, the bandwidth this is (``4 · rows · cols`` bytes per
call) and the ratio tirx / the faster of torch and Triton (the issue's goal: at most 1.2).
Timing as in ``gemm_speed.py``: back-to-back batches of about 2 ms between CUDA events, the
runners alternating, the median of ``--reps`` samples.

Without a GPU the script compiles the tirx kernels for sm_90 and prints their registers. The
report goes to ``benchmarks/results/softmax_speed-<machine>.md`` (``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402
from gemm_speed import gpu_visible, time_runners  # noqa: E402

# name -> (warps, warps_per_row) of make_softmax
TIRX_CONFIGS = {
    "warp/4": (4, 1),
    "warp/8": (8, 1),
    "block/4w": (4, 4),
    "block/8w": (8, 8),
    "block/16w": (16, 16),
}
TRITON_WARPS = (4, 8, 16)


def _triton_softmax_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_rows(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        inside = offs < cols
        x = tl.load(x_ptr + row * cols + offs, mask=inside, other=-float("inf"))
        x = x.to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        y = e / tl.sum(e, axis=0)
        tl.store(y_ptr + row * cols + offs, y.to(y_ptr.dtype.element_ty), mask=inside)

    return softmax_rows


def triton_softmax(x, y, warps: int):
    """A zero-argument runner of the Triton softmax over the rows of ``x`` into ``y``."""
    import triton

    kernel = _triton_softmax_kernel()
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)

    def run():
        kernel[(rows,)](x, y, cols, BLOCK=block, num_warps=warps)

    return run


def _check(name, got, ref, dtype):
    """At most one unit in the last place of ``dtype`` from the float64 softmax."""
    import torch

    eps = torch.finfo(getattr(torch, dtype)).eps
    err = (got.double() - ref).abs()
    bound = eps * ref.abs().clamp_min(2.0**-14) * 1.01
    worst = (err / bound).max().item()
    if not worst <= 1.0:
        raise AssertionError(f"{name}: {worst:.2f} × the one-ulp bound from float64 softmax")


def measure(rows: int, cols: int, dtype: str, reps: int) -> dict[str, float]:
    """Check every runner, then the median ms per call of each."""
    import torch

    import tirx
    from tirx.examples.softmax import make_softmax

    gen = torch.Generator(device="cuda").manual_seed(rows + cols)
    x = (torch.randn((rows, cols), device="cuda", generator=gen) * 3).to(getattr(torch, dtype))
    ref = torch.softmax(x.double(), dim=-1)
    runners = {}
    for name, (w, per_row) in forward_configs(cols).items():
        exe = tirx.compile(make_softmax(rows, cols, dtype, w, per_row), target="cuda")
        y = torch.full_like(x, float("nan"))
        exe(x, y)
        _check(f"tirx {name}", y, ref, dtype)
        runners[f"tirx {name}"] = lambda exe=exe, y=y: exe(x, y)
    _check("torch", torch.softmax(x, dim=-1), ref, dtype)
    runners["torch"] = lambda: torch.softmax(x, dim=-1)
    for w in TRITON_WARPS:
        y = torch.full_like(x, float("nan"))
        fn = triton_softmax(x, y, w)
        fn()
        _check(f"triton {w}w", y, ref, dtype)
        runners[f"triton {w}w"] = fn
    return time_runners(runners, reps, torch)


def best(ms: dict[str, float], prefix: str) -> str:
    return min((k for k in ms if k.startswith(prefix)), key=ms.get)


def table(results: list[tuple[str, int, int, dict[str, float]]]) -> str:
    lines = [
        "| dtype | rows × cols | tirx µs (config) | tirx default µs | torch µs "
        "| Triton µs (config) | tirx GB/s | tirx / faster of torch and Triton "
        "| tirx default / faster |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for dtype, rows, cols, ms in results:
        t, tr = best(ms, "tirx "), best(ms, "triton ")
        baseline = min(ms["torch"], ms[tr])
        gbs = 4 * rows * cols / (ms[t] * 1e-3) / 1e9
        d = ms["tirx default"]
        lines.append(
            f"| {dtype} | {rows} × {cols} | {ms[t] * 1e3:.1f} ({t[5:]}) | {d * 1e3:.1f} "
            f"| {ms['torch'] * 1e3:.1f} | {ms[tr] * 1e3:.1f} ({tr[7:]}) | {gbs:.0f} "
            f"| {ms[t] / baseline:.2f} | {d / baseline:.2f} |"
        )
    return "\n".join(lines)


def all_runners(results) -> str:
    names = list(dict.fromkeys(n for r in results for n in r[3]))
    lines = ["| dtype | rows × cols | " + " | ".join(names) + " |"]
    lines.append("|---|---|" + "---|" * len(names))
    for dtype, rows, cols, ms in results:
        cells = " | ".join(f"{ms[n] * 1e3:.1f}" if n in ms else "–" for n in names)
        lines.append(f"| {dtype} | {rows} × {cols} | {cells} |")
    return "\n".join(lines)


def forward_configs(cols: int) -> dict:
    """The configurations of ``TIRX_CONFIGS`` (and the default) a row of ``cols`` divides."""
    configs = {"default": (4, None), **TIRX_CONFIGS}
    return {n: (w, r) for n, (w, r) in configs.items() if not (r and cols % (128 * r))}


def compile_only(shapes, dtypes, make=None, configs=forward_configs) -> int:
    """Without a GPU: each kernel ``make(rows, cols, dtype, warps, warps_per_row)`` (default:
    ``make_softmax``) of ``configs(cols)`` compiled for sm_90, its registers printed."""
    import tirx

    if make is None:
        from tirx.examples.softmax import make_softmax as make

    print("no GPU: compiling for sm_90 only (registers per thread)")
    for dtype in dtypes:
        for rows, cols in shapes:
            for name, (w, per_row) in configs(cols).items():
                kernel = make(rows, cols, dtype, w, per_row)
                st = tirx.compile(kernel, "cuda -arch=sm_90").stats
                print(
                    f"{dtype} {rows}x{cols} {name}: {st.get('registers')} registers, "
                    f"{st.get('spill_stores', 0)} spill stores"
                )
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="4096x1024,16384x4096")
    ap.add_argument("--dtypes", default="float16")
    ap.add_argument("--reps", type=int, default=15)
    report.add_output_arguments(ap, "softmax_speed")
    args = ap.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    dtypes = args.dtypes.split(",")
    if not gpu_visible():
        return compile_only(shapes, dtypes)
    results = []
    for dtype in dtypes:
        for rows, cols in shapes:
            results.append((dtype, rows, cols, measure(rows, cols, dtype, args.reps)))
    text = "\n\n".join(
        [
            f"# Softmax speed: tirx against torch and Triton, {date.today()}",
            f"Median of {args.reps} samples per cell (microseconds per call; each sample a "
            "batch of back-to-back calls between two CUDA events).",
            table(results),
            "## Every runner (µs per call)",
            all_runners(results),
        ]
    )
    print(text)
    report.write_result("softmax_speed", text, args, __file__, argv, gpu=report.gpu_name())
    return 0


if __name__ == "__main__":
    sys.exit(main())
