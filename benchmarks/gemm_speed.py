"""The tiled GEMM of ``tirx.examples.gemm`` against ``torch.matmul`` on a GPU.

    python benchmarks/gemm_speed.py [--sizes 512,1024,2048,4096] [--dtypes float16,bfloat16]
                                    [--reps 30] [--out FILE]

For every dtype and size ``n`` (M = N = K = n) the script compiles ``make_gemm(n, n, n, dtype)``
for the visible GPU, checks one result against torch, then times

* tirx: ``exe(A, B, Out)``, ``Out = A @ B.T`` with float32 output;
* torch: ``torch.matmul(A, B.T)`` (cuBLAS; output in A's dtype, accumulation in float32).

Each timed sample is a batch of back-to-back calls between two CUDA events, sized to take
about 2 ms, so the launch cost from Python is hidden behind the GPU work. tirx and torch
alternate sample by sample (drift affects both alike); the table gives the median time per
call, TFLOP/s (``2·n³`` flops per call) and the ratio tirx / torch in time. ``--out`` writes
the table, the command and the machine (GPU, driver, torch, date) as Markdown; the tutorial
``notebooks/05_tiled_gemm.ipynb`` shows the newest ``benchmarks/results/gemm_speed-*-h200.md``
as recorded.

Without a GPU the script compiles every kernel for ``sm_90`` (NVRTC needs no GPU) and reports
its registers and shared memory, so the script itself can be checked anywhere; it times nothing.
"""

from __future__ import annotations

import argparse
import platform
import shlex
import statistics
import sys
from dataclasses import dataclass
from datetime import date

BATCH_MS = 2.0  # target GPU time of one timed sample


@dataclass
class Row:
    """One measured size: median milliseconds per call and TFLOP/s for tirx and torch."""

    dtype: str
    n: int
    tirx_ms: float
    torch_ms: float
    max_error: float

    @property
    def flops(self) -> float:
        return 2.0 * self.n**3

    @property
    def tirx_tflops(self) -> float:
        return self.flops / (self.tirx_ms * 1e-3) / 1e12

    @property
    def torch_tflops(self) -> float:
        return self.flops / (self.torch_ms * 1e-3) / 1e12

    @property
    def ratio(self) -> float:
        """tirx time / torch time (1.0 = as fast as cuBLAS, 2.0 = twice as slow)."""
        return self.tirx_ms / self.torch_ms


def gpu_visible() -> bool:
    from tirx.backend.cuda.driver import gpu_count

    return gpu_count() > 0


def _batch_size(fn, torch) -> int:
    """How many back-to-back calls of fn take about BATCH_MS of GPU time."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    start.record()
    for _ in range(3):
        fn()
    stop.record()
    stop.synchronize()
    per_call = max(start.elapsed_time(stop) / 3, 1e-3)
    return max(1, min(1000, round(BATCH_MS / per_call)))


def _sample(fn, calls: int, torch) -> float:
    """Milliseconds per call over one batch of ``calls`` back-to-back calls."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / calls


def measure(n: int, dtype: str = "float16", reps: int = 30, seed: int = 0) -> Row:
    """Time the tirx GEMM and torch.matmul at M = N = K = n on the current GPU."""
    import torch

    import tirx
    from tirx.examples.gemm import make_gemm

    exe = tirx.compile(make_gemm(n, n, n, dtype), target="cuda")
    gen = torch.Generator(device="cuda").manual_seed(seed)
    tdtype = getattr(torch, dtype)
    a = torch.randn((n, n), device="cuda", generator=gen).to(tdtype)
    b = torch.randn((n, n), device="cuda", generator=gen).to(tdtype)
    out = torch.empty((n, n), device="cuda", dtype=torch.float32)

    exe(a, b, out)
    ref = a.float() @ b.float().T
    torch.cuda.synchronize()
    max_error = (out - ref).abs().max().item()
    scale = ref.abs().max().item()
    if not max_error <= 1e-3 * max(scale, 1.0):
        raise AssertionError(f"{dtype} {n}: tirx differs from torch by {max_error:g}")

    bt = b.T
    runners = {
        "tirx": lambda: exe(a, b, out),
        "torch": lambda: torch.matmul(a, bt),
    }
    calls = {name: _batch_size(fn, torch) for name, fn in runners.items()}
    times = {name: [] for name in runners}
    for _ in range(reps):
        for name, fn in runners.items():
            times[name].append(_sample(fn, calls[name], torch))
    return Row(
        dtype,
        n,
        statistics.median(times["tirx"]),
        statistics.median(times["torch"]),
        max_error,
    )


def machine() -> str:
    """One line naming the GPU, its driver and the software versions."""
    import torch

    try:
        import cuda.bindings as cb

        bindings = cb.__version__
    except Exception:  # an old cuda-python without __version__
        bindings = "?"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    driver = _driver_version()
    return (
        f"{gpu}, driver {driver}; python {platform.python_version()}, torch {torch.__version__}, "
        f"cuda-bindings {bindings}"
    )


def _driver_version() -> str:
    try:
        from cuda.bindings import driver as drv

        drv.cuInit(0)
        err, version = drv.cuDriverGetVersion()
        if int(err) == 0:
            return f"CUDA {version // 1000}.{version % 1000 // 10}"
    except Exception:
        pass
    return "?"


def table(rows: list[Row]) -> str:
    lines = [
        "| dtype | M = N = K | tirx ms | tirx TFLOP/s | torch.matmul ms | torch TFLOP/s "
        "| tirx / torch (time) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.dtype} | {r.n} | {r.tirx_ms:.4f} | {r.tirx_tflops:.1f} | {r.torch_ms:.4f} "
            f"| {r.torch_tflops:.1f} | {r.ratio:.2f} |"
        )
    return "\n".join(lines)


def report(rows: list[Row], command: str, reps: int) -> str:
    return "\n".join(
        [
            f"# Tiled GEMM (tirx.examples.gemm) against torch.matmul, {date.today().isoformat()}",
            "",
            f"Command: `{command}`",
            "",
            f"Machine: {machine()}",
            "",
            f"Median of {reps} samples per cell; each sample is a batch of back-to-back calls "
            f"between two CUDA events (about {BATCH_MS:g} ms of GPU work), tirx and torch "
            "alternating. tirx: `Out = A @ B.T` with float32 output (64 x 64 block tiles, 4 warps, "
            "mma.sync.m16n8k16, no pipelining). torch: `torch.matmul(A, B.T)` (cuBLAS, output "
            "in A's dtype). TFLOP/s = 2·n³ / time.",
            "",
            table(rows),
            "",
        ]
    )


def compile_only(sizes, dtypes) -> int:
    """No GPU: compile each kernel for sm_90 and report its resources."""
    import tirx
    from tirx.examples.gemm import make_gemm

    print("no GPU visible: compiling only (no timings)")
    for dtype in dtypes:
        for n in sizes:
            exe = tirx.compile(make_gemm(n, n, n, dtype), target="cuda -arch=sm_90")
            st = exe.stats
            print(
                f"{dtype} {n}: {st.get('registers')} registers, {st['shared_bytes']} shared "
                f"bytes, {st.get('spill_stores', 0)} spill stores"
            )
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="512,1024,2048,4096", help="comma list of M = N = K")
    ap.add_argument("--dtypes", default="float16,bfloat16", help="comma list: float16, bfloat16")
    ap.add_argument("--reps", type=int, default=30, help="timed samples per cell (median)")
    ap.add_argument("--out", default=None, help="also write the Markdown report to this file")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for n in sizes:
        if n % 64:
            ap.error(f"size {n} is not a multiple of 64 (the GEMM's block tile)")
    for d in dtypes:
        if d not in ("float16", "bfloat16"):
            ap.error(f"dtype {d!r}: choose float16 or bfloat16")
    if not gpu_visible():
        return compile_only(sizes, dtypes)

    rows = []
    for dtype in dtypes:
        for n in sizes:
            row = measure(n, dtype, args.reps)
            print(
                f"{dtype} {n}: tirx {row.tirx_ms:.4f} ms ({row.tirx_tflops:.1f} TFLOP/s), "
                f"torch {row.torch_ms:.4f} ms ({row.torch_tflops:.1f} TFLOP/s), "
                f"ratio {row.ratio:.2f}",
                flush=True,
            )
            rows.append(row)
    command = "python " + " ".join(
        shlex.quote(a)
        for a in ["benchmarks/gemm_speed.py", *(argv if argv is not None else sys.argv[1:])]
    )
    text = report(rows, command, args.reps)
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
