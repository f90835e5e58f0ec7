"""tirx GEMMs against Triton, cuBLAS and the mma.sync peak, in one run on a GPU.

    python benchmarks/gemm_speed.py [--sizes 2048,4096,8192] [--dtypes float16,bfloat16]
                                    [--variants NAME,...] [--reps 15] [--out FILE]
                                    [--sources DIR] [--warm-ms 50]
                                    [--fp8 off|also|only] [--fp8-sizes MxNxK,...]

For every dtype and size ``n`` (M = N = K = n, ``Out = A @ B.T`` with A ``(n, n)`` and B
``(n, n)`` N-major) the script times

* **tirx**: the pipelined GEMM of ``tirx.examples.gemm_pipelined`` (its default configuration),
  float32 output, or with ``--main wgmma`` the warpgroup GEMM of ``tirx.examples.gemm_wgmma``
  (sm_90a); with ``--variants`` also named other configurations (the steps of
  ``notebooks/07_making_it_fast.ipynb`` and the ones that show where the time goes, the mma.sync
  default as ``256x128x64-8w-3s-swizzle``) and the tiled GEMM of ``tirx.examples.gemm``
  (``05-tiled``);
* **Triton**: a ``tl.dot`` matmul written below, float32 accumulate and **float32 output**
  (the same bytes as tirx), over a few standard configurations; the best one counts, and the
  128x128x64 / 8-warp / 4-stage one is printed too;
* **cuBLAS**: ``torch.matmul(A, B.T)``, float32 accumulate, **output in A's dtype**;
* **peak**: a tirx kernel that issues ``mma.sync.m16n8k16`` from registers only (8 independent
  accumulators per warp, no memory traffic in the loop): the instruction's ceiling, with
  operands near 1.0 as it is usually measured; the same loop on random operands is timed too
  and has a table of its own (do the operands' bits move the ceiling?).

Each timed sample is a batch of back-to-back calls between two CUDA events, sized to take about
2 ms, queued right behind ``--warm-ms`` (50) ms of the same runner's untimed calls, so that each
kernel is timed near the clock it settles at rather than at the one the previous runner's
kernel left behind; the runners alternate sample by sample, in a new order every round (so
that no runner always follows the same one), and the median counts. The table gives TFLOP/s (``2·n³`` per call) and the
ratios tirx/Triton (best and 128x128x64/8/4), tirx/cuBLAS and tirx/peak. Every kernel's result is checked against torch before it is timed.
``--sources DIR`` adds, for each file ``DIR/LABEL/<variant>-<dtype>-<n>.cu`` written by
``gemm_sources.py`` (with another build of tirx), a runner ``<variant>@LABEL`` that launches that
CUDA source as this build launches the variant: an A/B of two compilers' code in one run.
The warp-specialized GEMM of ``tirx.examples.gemm_hopper`` runs as the variants ``hopper``
and ``hopper-c2`` (float32 out, against Triton) and ``hopper-out16`` / ``hopper-out16-c2``
(output in the inputs' dtype, as cuBLAS writes it): a table compares every variant whose
output is 16-bit with cuBLAS. ``--fp8 also`` (or ``only``) times the e4m3 GEMM of
``tirx.examples.gemm_fp8`` (bfloat16 out, clusters of one and of two blocks) against
``torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=torch.bfloat16)`` at the
``--fp8-sizes`` (default 4096³, 8192³ and 8192 x 8192 x 4096), both checked against the
float64 product first.
The report goes to ``benchmarks/results/gemm_speed-<machine>.md`` (``benchmarks/report.py``:
the command, date, machine and versions above the tables).

Without a GPU the script compiles the tirx kernels for ``sm_90`` (NVRTC needs no GPU) and
prints their registers and shared memory; it times nothing.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402
from gemm_kernels import (  # noqa: E402
    TIRX_VARIANTS,
    TRITON_CONFIGS,
    TRITON_NAMED,
    make_mma_peak,
    output_dtype,
    peak_flops,
    triton_matmul,
)

BATCH_MS = 2.0  # target GPU time of one timed sample
# GPU time of the same runner's untimed calls right before each sample: a sample then runs at
# the clock its own kernel settles at (an H200 near its power limit lowers the clock within
# milliseconds and raises it again as slowly, so a sample taken right after another runner's
# hungrier kernel would inherit that kernel's lower clock)
WARM_MS = 50.0


@dataclass
class Cell:
    """One dtype and size: milliseconds per call of every runner that was timed."""

    dtype: str
    n: int
    ms: dict[str, float] = field(default_factory=dict)
    out: dict[str, str] = field(default_factory=dict)  # a tirx runner's output dtype

    def tflops(self, name: str) -> float:
        return 2.0 * self.n**3 / (self.ms[name] * 1e-3) / 1e12

    def triton_best(self) -> str:
        names = [k for k in self.ms if k.startswith("triton ")]
        return min(names, key=lambda k: self.ms[k])


def gpu_visible() -> bool:
    from tirx.backend.cuda.driver import gpu_count

    return gpu_count() > 0


def _batch_size(fn, torch) -> int:
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    start.record()
    for _ in range(3):
        fn()
    stop.record()
    stop.synchronize()
    per_call = max(start.elapsed_time(stop) / 3, 1e-3)
    return max(1, min(1000, round(BATCH_MS / per_call)))


def _sample(fn, calls: int, torch, warm: int = 0) -> float:
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(warm):  # queued ahead of the timed calls: no gap between the two
        fn()
    start.record()
    for _ in range(calls):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / calls


def time_runners(runners: dict, reps: int, torch, warm_ms: float | None = None) -> dict[str, float]:
    """Median ms per call of each runner, the runners alternating sample by sample, in a new
    order every round (a fixed sequence of shuffles): a runner that always came right after the
    same one, cuBLAS say, whose kernel leaves the clock at 1485 MHz, would inherit that clock in
    every sample (it did, when each round started one runner further on in a fixed cycle). Each
    sample follows ``warm_ms`` (default :data:`WARM_MS`) of the same runner's untimed calls, so
    that it is timed near that runner's own steady clock."""
    warm_ms = WARM_MS if warm_ms is None else warm_ms
    calls = {name: _batch_size(fn, torch) for name, fn in runners.items()}
    warm = {name: round(warm_ms / BATCH_MS * c) for name, c in calls.items()}
    times = {name: [] for name in runners}
    for rep in range(reps):
        order = list(runners)
        random.Random(rep).shuffle(order)
        for name in order:
            times[name].append(_sample(runners[name], calls[name], torch, warm[name]))
    return {name: statistics.median(t) for name, t in times.items()}


def _check(name, got, ref, tol):
    err = ((got.double() - ref).norm() / ref.norm()).item()
    if not err <= tol:
        raise AssertionError(f"{name}: relative error {err:.3g} against float64 (limit {tol})")
    return err


def other_builds(sources: str | None, n: int, dtype: str) -> list[tuple[str, str, str]]:
    """(runner name, variant, CUDA source) of every file of ``--sources`` for this cell."""
    if not sources:
        return []
    found = []
    for path in sorted(Path(sources).glob(f"*/*-{dtype}-{n}.cu")):
        variant = path.name[: -len(f"-{dtype}-{n}.cu")]
        if variant in TIRX_VARIANTS:
            found.append((f"{variant}@{path.parent.name}", variant, path.read_text()))
    return found


def _with_source(exe, source: str):
    """``exe``'s kernel and launch, compiled from ``source`` (another build's code for it)."""
    from tirx.backend.cuda.build import build

    return build(exe.kernel, exe.lowered, exe.target, {}, source=source)


def measure(
    n: int,
    dtype: str,
    variants: list[str],
    reps: int,
    main: str = "tirx",
    seed: int = 0,
    sources: str | None = None,
) -> Cell:
    """Check and time every runner at M = N = K = n."""
    import torch

    import tirx

    gen = torch.Generator(device="cuda").manual_seed(seed + n)
    tdtype = getattr(torch, dtype)
    a = torch.randn((n, n), device="cuda", generator=gen).to(tdtype)
    b = torch.randn((n, n), device="cuda", generator=gen).to(tdtype)
    ref = a.double() @ b.double().T
    # one output tensor per dtype, shared by every runner of the cell: where a tensor lands in
    # memory changes a whole call's time by up to 5 % at 8192³ (runs 9 and 10 of the third
    # session of 2026-12-01, docs/gpu-runs/gemm.md), and no runner should have a placement of its own
    outputs = {}

    def output(odt: str):
        if odt not in outputs:
            outputs[odt] = torch.empty((n, n), device="cuda", dtype=getattr(torch, odt))
        return outputs[odt].fill_(float("nan"))

    runners, outputs_of = {}, {}
    for name in ["tirx", *variants]:
        factory = TIRX_VARIANTS[main if name == "tirx" else name]
        kernel = factory(n, n, n, dtype)
        odt = outputs_of[name] = output_dtype(kernel)
        exe = tirx.compile(kernel, target="cuda")
        out = output(odt)
        exe(a, b, out)
        _check(name, out, ref, 1e-5 if odt == "float32" else 1e-2)
        runners[name] = lambda exe=exe, out=out: exe(a, b, out)
    for name, variant, source in other_builds(sources, n, dtype):
        exe = tirx.compile(TIRX_VARIANTS[variant](n, n, n, dtype), target="cuda")
        exe = _with_source(exe, source)
        out = output("float32")
        exe(a, b, out)
        _check(name, out, ref, 1e-5)
        runners[name] = lambda exe=exe, out=out: exe(a, b, out)
    for cfg in TRITON_CONFIGS:
        out = output("float32")
        fn = triton_matmul(a, b, out, cfg)
        fn()
        _check(f"triton {cfg}", out, ref, 1e-5)
        runners[f"triton {cfg}"] = fn
    bt = b.T
    _check("cublas", torch.matmul(a, bt), ref, 1e-2)
    runners["cublas"] = lambda: torch.matmul(a, bt)
    return Cell(dtype, n, time_runners(runners, reps, torch), outputs_of)


FP8_SIZES = "4096x4096x4096,8192x8192x8192,8192x8192x4096"
FP8_RUNNERS = {"tirx fp8": 1, "tirx fp8 c2": 2}  # name: cluster


def fp8_sizes(text: str) -> list[tuple[int, int, int]]:
    """``MxNxK,...`` as (M, N, K) triples; ValueError for a malformed or unusable size."""
    sizes = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"fp8 size {item!r} is not MxNxK")
        M, N, K = map(int, parts)
        if M % 256 or N % 256 or K % 128 or not K:
            raise ValueError(f"fp8 size {item}: M and N must be multiples of 256, K of 128")
        sizes.append((M, N, K))
    return sizes


def fp8_kernel(M: int, N: int, K: int, cluster: int):
    from tirx.examples.gemm_fp8 import make_gemm_fp8

    return make_gemm_fp8(M, N, K, "bfloat16", cluster=cluster)


@dataclass
class Fp8Cell:
    """One fp8 size: milliseconds per call of the tirx kernels and of torch._scaled_mm."""

    M: int
    N: int
    K: int
    ms: dict[str, float] = field(default_factory=dict)

    def tflops(self, name: str) -> float:
        return 2.0 * self.M * self.N * self.K / (self.ms[name] * 1e-3) / 1e12


def measure_fp8(M: int, N: int, K: int, reps: int, seed: int = 0) -> Fp8Cell:
    """Check and time the fp8 runners at (M, N, K): e4m3 operands, per-tensor scales,
    bfloat16 out."""
    import torch

    import tirx

    gen = torch.Generator(device="cuda").manual_seed(seed + M + N + K)
    a = torch.randn((M, K), device="cuda", generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn((N, K), device="cuda", generator=gen).to(torch.float8_e4m3fn)
    sa = torch.tensor([0.75], device="cuda")
    sb = torch.tensor([1.25], device="cuda")
    ref = (a.double() @ b.double().T) * (0.75 * 1.25)
    out = torch.empty((M, N), device="cuda", dtype=torch.bfloat16)
    runners = {}
    for name, cluster in FP8_RUNNERS.items():
        exe = tirx.compile(fp8_kernel(M, N, K, cluster), target="cuda")
        out.fill_(float("nan"))
        exe(a, b, sa, sb, out)
        _check(name, out, ref, 1e-2)
        runners[name] = lambda exe=exe: exe(a, b, sa, sb, out)
    bt = b.t()
    for name, fast in FP8_BASELINES.items():

        def scaled_mm(fast=fast):
            return torch._scaled_mm(
                a, bt, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast
            )

        _check(name, scaled_mm(), ref, 1e-2)
        runners[name] = scaled_mm
    return Fp8Cell(M, N, K, time_runners(runners, reps, torch))


#: the cuBLAS baselines of the fp8 table: its default (partial sums moved into full float32
#: every few K steps) and its fast accumulation (the wgmma accumulator throughout, as tirx's
#: kernel: bit for bit the same product, benchmarks/results/fp8_accuracy-h100.md)
FP8_BASELINES = {"torch._scaled_mm": False, "torch._scaled_mm fast": True}


def fp8_table(cells: list[Fp8Cell]) -> str:
    names = list(FP8_RUNNERS)
    bases = [b for b in FP8_BASELINES if any(b in c.ms for c in cells)]
    short = {b: b.removeprefix("torch.") for b in bases}
    lines = [
        "| M | N | K | "
        + " | ".join(f"{k} TFLOP/s" for k in names + bases)
        + " | "
        + " | ".join(f"{k} / {short[b]}" for b in bases for k in names)
        + " |",
        "|---|---|---|" + "---|" * (len(names) + len(bases) + len(names) * len(bases)),
    ]
    for c in cells:
        lines.append(
            f"| {c.M} | {c.N} | {c.K} | "
            + " | ".join(f"{c.tflops(k):.1f}" for k in names + bases)
            + " | "
            + " | ".join(f"{c.tflops(k) / c.tflops(b):.2f}" for b in bases for k in names)
            + " |"
        )
    return "\n".join(lines)


def same_output_table(cells: list[Cell]) -> str:
    """Every tirx runner whose output is in the inputs' dtype, against cuBLAS (which writes
    that dtype): TFLOP/s and the ratio. Empty when no such runner was timed."""
    names = sorted({k for c in cells for k, odt in c.out.items() if odt == c.dtype})
    if not names:
        return ""
    lines = [
        "| dtype | n | cuBLAS | " + " | ".join(f"{k} | {k} / cuBLAS" for k in names) + " |",
        "|---|---|---|" + "---|---|" * len(names),
    ]
    for c in cells:
        cb = c.tflops("cublas")
        row = [f"{c.tflops(k):.1f} | {c.tflops(k) / cb:.2f}" if k in c.ms else " | " for k in names]
        lines.append(f"| {c.dtype} | {c.n} | {cb:.1f} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def measure_peak(dtype: str, reps: int, operands: str = "constant") -> float:
    """TFLOP/s of the register-only mma.sync loop."""
    import torch

    import tirx

    fn, blocks, threads = make_mma_peak(dtype, operands)
    exe = tirx.compile(fn, target="cuda")
    sink = torch.zeros((blocks * threads,), device="cuda", dtype=torch.float32)
    ms = time_runners({"peak": lambda: exe(sink)}, reps, torch)["peak"]
    return peak_flops(dtype) / (ms * 1e-3) / 1e12


def main_table(cells: list[Cell], peak: dict[str, float]) -> str:
    lines = [
        "| dtype | n | tirx TFLOP/s | Triton best (config) | Triton 128x128x64/8w/4s | cuBLAS "
        "| mma.sync peak | tirx / Triton best | tirx / Triton 128x128x64 | tirx / cuBLAS "
        "| tirx / peak |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        best = c.triton_best()
        t, tb, tn, cb = (
            c.tflops("tirx"),
            c.tflops(best),
            c.tflops(f"triton {TRITON_NAMED}"),
            c.tflops("cublas"),
        )
        p = peak[c.dtype]
        lines.append(
            f"| {c.dtype} | {c.n} | {t:.1f} | {tb:.1f} ({best[7:]}) | {tn:.1f} | {cb:.1f} "
            f"| {p:.1f} | {t / tb:.2f} | {t / tn:.2f} | {t / cb:.2f} | {t / p:.2f} |"
        )
    return "\n".join(lines)


def variant_table(cells: list[Cell], variants: list[str]) -> str:
    names = ["tirx", *variants]
    for c in cells:  # the other builds' runners (--sources), in the order first seen
        names += [k for k in c.ms if "@" in k and k not in names]
    lines = [
        "| dtype | n | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for c in cells:
        lines.append(
            f"| {c.dtype} | {c.n} | "
            + " | ".join(f"{c.tflops(k):.1f}" if k in c.ms else "" for k in names)
            + " |"
        )
    return "\n".join(lines)


def triton_table(cells: list[Cell]) -> str:
    names = [f"triton {cfg}" for cfg in TRITON_CONFIGS]
    lines = [
        "| dtype | n | " + " | ".join(k[7:] for k in names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for c in cells:
        lines.append(
            f"| {c.dtype} | {c.n} | " + " | ".join(f"{c.tflops(k):.1f}" for k in names) + " |"
        )
    return "\n".join(lines)


def peak_table(cells: list[Cell], peak: dict[str, float], random_peak: dict[str, float]) -> str:
    """The peak with constant and with random operands, and the tirx cells against the latter."""
    lines = [
        "| dtype | peak, constant operands | peak, random operands | "
        + " | ".join(f"tirx / random peak, n={c.n}" for c in cells if c.dtype == cells[0].dtype)
        + " |",
        "|---|---|---|" + "---|" * sum(c.dtype == cells[0].dtype for c in cells),
    ]
    for d in peak:
        ratios = [f"{c.tflops('tirx') / random_peak[d]:.2f}" for c in cells if c.dtype == d]
        lines.append(f"| {d} | {peak[d]:.1f} | {random_peak[d]:.1f} | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def markdown_report(
    cells, peak, variants, reps, main="tirx", random_peak=None, fp8_cells=None
) -> str:
    from tirx.examples.gemm_pipelined import DEFAULT

    what = {
        "tirx": f"`tirx.examples.gemm_pipelined` with `{DEFAULT}`",
        "wgmma": "`tirx.examples.gemm_wgmma` (256x128x64, two warpgroups, `wgmma.mma_async` "
        "m64n128k16 from 128-byte-swizzled shared tiles, cp.async 4 stages; sm_90a)",
        "wgmma-tma": "`tirx.examples.gemm_wgmma` (256x128x64, two warpgroups, `wgmma.mma_async` "
        "m64n128k16 from 128-byte-swizzled shared tiles, TMA tensor copies into 4 stages; sm_90a)",
    }.get(main, main)

    out_text = "output in A's dtype" if "out16" in main else "float32 output"
    parts = [
        f"# GEMM speed: tirx against Triton, cuBLAS and the mma.sync peak, "
        f"{date.today().isoformat()}",
        "",
        f"Median of {reps} samples per cell; each sample is a batch of back-to-back calls "
        f"between two CUDA events (about {BATCH_MS:g} ms of GPU work) right after "
        f"{WARM_MS:g} ms of the same runner's untimed calls (so that each kernel is timed near "
        "the clock it settles at), the runners alternating in a new order every round, every tirx and Triton runner "
        "writing the same output tensor (one per output dtype). "
        "M = N = K = n, `Out = A @ B.T`, TFLOP/s = 2·n³ / time. tirx: "
        f"{what}, {out_text}. "
        "Triton: a `tl.dot` "
        "matmul in `benchmarks/gemm_kernels.py`, float32 accumulate and output, best of the "
        "configurations below (BMxBNxBK/warps/stages). cuBLAS: `torch.matmul(A, B.T)`, "
        "output in A's dtype. peak: `mma.sync.m16n8k16` from registers only "
        "(`make_mma_peak`), one figure per dtype.",
        "",
        main_table(cells, peak),
        "",
        *(
            [
                "## The peak's operands",
                "",
                "The register-only loop with every fragment near 1.0 (the peak above, as the "
                "ceiling is usually measured) and with random halves in every register (as "
                "many switching bits as a GEMM's data): whether the ceiling depends on the "
                "operands, and the tirx GEMM against the random-operand figure.",
                "",
                peak_table(cells, peak, random_peak),
                "",
            ]
            if random_peak
            else []
        ),
        "## tirx variants (TFLOP/s)",
        "",
        variant_table(cells, variants),
        "",
        "## Triton configurations (TFLOP/s)",
        "",
        triton_table(cells),
        "",
    ]
    same = same_output_table(cells)
    if same:
        parts += [
            "## Output in the inputs' dtype, against cuBLAS (TFLOP/s)",
            "",
            "The tirx runners that write their output in A's dtype, as `torch.matmul` does.",
            "",
            same,
            "",
        ]
    if fp8_cells:
        parts += [
            "## fp8 (e4m3) against torch._scaled_mm (TFLOP/s)",
            "",
            "`tirx.examples.gemm_fp8` (128x256x128 blocks, 3 stages, warp-specialized and "
            "persistent; c2: clusters of two blocks sharing each B tile) and "
            "`torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=torch.bfloat16)`, "
            "per-tensor float32 scales, bfloat16 out, in cuBLAS's default accumulation and "
            "(fast) with `use_fast_accum=True`, whose product equals tirx's bit for bit "
            "(benchmarks/fp8_accuracy.py); TFLOP/s = 2·M·N·K / time.",
            "",
            fp8_table(fp8_cells),
            "",
        ]
    return "\n".join(parts)


def compile_only(sizes, dtypes, variants, main="tirx", fp8=()) -> int:
    import tirx

    print("no GPU visible: compiling only (no timings)")
    for M, N, K in fp8[:1]:
        for name, cluster in FP8_RUNNERS.items():
            exe = tirx.compile(fp8_kernel(M, N, K, cluster), target="cuda -arch=sm_90a")
            st = exe.stats
            print(
                f"{name} {M}x{N}x{K}: {st.get('registers')} registers, "
                f"{exe.lowered.shared_bytes} shared bytes, {st.get('spill_stores', 0)} spill stores"
            )
    for dtype in dtypes if sizes else ():
        for name in ["tirx", *variants]:
            n = sizes[0]
            factory = TIRX_VARIANTS[main if name == "tirx" else name]
            exe = tirx.compile(factory(n, n, n, dtype), target="cuda -arch=sm_90")
            st = exe.stats
            print(
                f"{dtype} {name} n={n}: {st.get('registers')} registers, "
                f"{exe.lowered.shared_bytes} shared bytes (static and dynamic), "
                f"{st.get('spill_stores', 0)} spill stores"
            )
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2048,4096,8192", help="comma list of M = N = K")
    ap.add_argument("--dtypes", default="float16,bfloat16", help="comma list: float16, bfloat16")
    ap.add_argument("--variants", default="", help=f"tirx variants: {', '.join(TIRX_VARIANTS)}")
    ap.add_argument("--main", default="tirx", help="the variant the tirx column times")
    ap.add_argument("--reps", type=int, default=15, help="timed samples per cell (median)")
    report.add_output_arguments(ap, "gemm_speed")
    ap.add_argument("--sources", default=None, help="other builds' sources (gemm_sources.py)")
    ap.add_argument(
        "--warm-ms",
        type=float,
        default=WARM_MS,
        help="GPU ms of a runner's untimed calls before each of its samples (0: none)",
    )
    ap.add_argument(
        "--fp8",
        choices=("off", "also", "only"),
        default="off",
        help="time the e4m3 GEMM against torch._scaled_mm too (also) or alone (only)",
    )
    ap.add_argument("--fp8-sizes", default=FP8_SIZES, help="comma list of MxNxK for --fp8")
    args = ap.parse_args(argv)
    globals()["WARM_MS"] = args.warm_ms  # every time_runners call of this run, the report's too
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in [*variants, args.main]:
        if v not in TIRX_VARIANTS or (v == "tirx" and v in variants):
            ap.error(f"unknown variant {v!r}: choose from {', '.join(TIRX_VARIANTS)}")
    for n in sizes:
        if n % 256:
            ap.error(f"size {n} is not a multiple of 256 (the largest block tile)")
    for d in dtypes:
        if d not in ("float16", "bfloat16"):
            ap.error(f"dtype {d!r}: choose float16 or bfloat16")
    try:
        fp8 = fp8_sizes(args.fp8_sizes) if args.fp8 != "off" else []
    except ValueError as e:
        ap.error(str(e))
    if args.fp8 == "only":
        sizes = []
    if not gpu_visible():
        return compile_only(sizes, dtypes, variants, args.main, fp8)

    dtypes = dtypes if sizes else []  # --fp8 only: no square cells, no mma.sync peak
    peak = {d: measure_peak(d, args.reps) for d in dtypes}
    random_peak = {d: measure_peak(d, args.reps, "random") for d in dtypes}
    if peak:
        print(
            "mma.sync peak: "
            + ", ".join(
                f"{d} {p:.1f} TFLOP/s (random operands {random_peak[d]:.1f})"
                for d, p in peak.items()
            )
        )
    cells = []
    for dtype in dtypes:
        for n in sizes:
            cell = measure(n, dtype, variants, args.reps, args.main, sources=args.sources)
            best = cell.triton_best()
            print(
                f"{dtype} {n}: tirx {cell.tflops('tirx'):.1f}, {best} {cell.tflops(best):.1f}, "
                f"cublas {cell.tflops('cublas'):.1f} TFLOP/s; "
                + ", ".join(
                    f"{v} {cell.tflops(v):.1f}" for v in cell.ms if v in variants or "@" in v
                ),
                flush=True,
            )
            cells.append(cell)
    fp8_cells = []
    for M, N, K in fp8:
        cell = measure_fp8(M, N, K, args.reps)
        print(
            f"fp8 {M}x{N}x{K}: "
            + ", ".join(f"{k} {cell.tflops(k):.1f}" for k in cell.ms)
            + " TFLOP/s",
            flush=True,
        )
        fp8_cells.append(cell)
    text = markdown_report(cells, peak, variants, args.reps, args.main, random_peak, fp8_cells)
    print()
    print(text)
    report.write_result("gemm_speed", text, args, __file__, argv, gpu=report.gpu_name())
    return 0


if __name__ == "__main__":
    sys.exit(main())
