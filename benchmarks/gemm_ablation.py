"""Where the default GEMM's time goes at the board's power limit: the kernel with one part of its
work left out, each variant alone on the GPU with its SM clock and board power.

    python benchmarks/gemm_ablation.py [--n 8192] [--dtype float16] [--seconds 1.5] [--out FILE]

The variants are the default kernel of :mod:`tirx.examples.gemm_pipelined` with a part of its
main loop left out (their results are wrong; they are for measuring only):

* ``no-copy``: the main loop issues no ``cp.async`` (the stages keep the prologue's tiles):
  no bytes from L2 or DRAM after the first two K tiles;
* ``no-copy-b``: the main loop copies A's tiles only: one third fewer bytes from L2, as a
  cluster that shares A's tile between two blocks would read;
* ``same-k``: every copy re-reads the tile's first K tile: the same bytes from L2, almost none
  from DRAM;
* ``no-ldmatrix``: no ``ldmatrix`` in the main loop (the fragments of the first slice stay in
  the registers, so the tensor cores also see the same operands every step);
* ``zero inputs``: the default kernel itself on A = B = 0 (as few switching bits as can be).

Each runs alone for ``--seconds`` while ``nvidia-smi`` is read (``gemm_clocks.run_for``), after
the default, Triton's best configuration and the mma.sync register-only peak (constant and
random operands). The variants are built from the example's own source with named edits, each
of which must apply exactly where it is meant to (``ablated_gemm`` fails otherwise), so the
kernels measured are the default's but for the one part left out. The table goes to
``benchmarks/results/gemm_ablation-<machine>.md`` (``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import inspect
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

ABLATIONS = ("no-copy", "no-copy-b", "same-k", "no-ldmatrix")

# (the text in gemm_pipelined.py, what it becomes, how many times it occurs there)
_COMMON = [
    ("from .gemm_config import (", "from tirx.examples.gemm_config import (", 1),
    (
        '    OUT16 = out_dtype != "float32"\n',
        '    OUT16 = out_dtype != "float32"\n'
        "    COPY_A, COPY_B, SAME_K, LDSM_LOOP = ABLATION_FLAGS\n",
        1,
    ),
    (
        "    def load_slice(fa, fb, a_w, b_w, s, w, wm, wn):\n",
        "    def load_slice(fa, fb, a_w, b_w, s, w, wm, wn, live=True):\n",
        1,
    ),
    (
        "    def fetch(a_q, b_q, A_q, B_q, st, tm, tn, kt, r0, c0):\n",
        "    def fetch(a_q, b_q, A_q, B_q, st, tm, tn, kt, r0, c0, copy_a=True, copy_b=True):\n",
        1,
    ),
    (
        "fetch(a_q, b_q, A_q, B_q, ws, cbm, cbn, ck, r0, c0)",
        "fetch(a_q, b_q, A_q, B_q, ws, cbm, cbn, 0 if SAME_K else ck, r0, c0, COPY_A, COPY_B)",
        1,
    ),
    # the main loop's ldmatrix (not the one before it)
    ("load_slice(fa1, fb1, a_w, b_w, s, 16 * kp + 8, wm, wn)", None, 2),
    ("load_slice(fa0, fb0, a_w, b_w, s, 16 * kp, wm, wn)", None, 1),
    ("load_slice(fa0, fb0, a_w, b_w, s1, 0, wm, wn)", None, 1),
    ("load_slice(fa0, fb0, a_w, b_w, s, 16 * kp + 16, wm, wn)", None, 1),
]


def ablated_source(flags: tuple[bool, bool, bool, bool]) -> str:
    """The source of gemm_pipelined.py with the ablation hooks in (all of them off when
    ``flags`` is ``(True, True, False, True)``: copy A, copy B, not same-k, ldmatrix)."""
    from tirx.examples import gemm_pipelined

    src = inspect.getsource(gemm_pipelined)
    for old, new, count in _COMMON:
        found = src.count(old)
        if found != count:
            raise RuntimeError(f"ablation edit expects {count} x {old!r} in gemm_pipelined.py, "
                               f"found {found}: update benchmarks/gemm_ablation.py")  # fmt: skip
        src = src.replace(old, new if new is not None else old[:-1] + ", LDSM_LOOP)")
    # the macros' bodies: each tile op under its flag
    src = _under(src, "            a_q[st, :, r0, c0 * 8 : c0 * 8 + 8],\n", "copy_a")
    src = _under(src, "            b_q[st, :, r0, c0 * 8 : c0 * 8 + 8],\n", "copy_b")
    src = _under(src, "            fa.view(MR, 4, 8, 4, layout=A_LOAD),\n", "live")
    src = _under(src, "            fb.view(NR // 2, 4, 8, 4, layout=B_LOAD),\n", "live")
    return f"ABLATION_FLAGS = {flags!r}\n" + src


def _under(src: str, marker: str, flag: str) -> str:
    """Put the ``T.cuda.tile.apply(...)`` call whose operand line is ``marker`` under
    ``if flag:``."""
    if src.count(marker) != 1:
        raise RuntimeError(f"ablation edit expects one {marker.strip()!r} in gemm_pipelined.py")
    at = src.index(marker)
    start = src.rindex("        T.cuda.tile.apply(\n", 0, at)
    end = src.index("\n        )\n", at) + len("\n        )\n")
    block = src[start:end]
    guarded = f"        if {flag}:\n" + "".join("    " + ln for ln in block.splitlines(True))
    return src[:start] + guarded + src[end:]


_MODULES: dict = {}


def ablated_gemm(M: int, N: int, K: int, dtype: str, ablation: str | None):
    """The default kernel with ``ablation`` (one of ``ABLATIONS``, or None for none of them)."""
    if ablation is not None and ablation not in ABLATIONS:
        raise ValueError(f"ablation must be one of {ABLATIONS} or None, got {ablation!r}")
    flags = (
        ablation != "no-copy",
        ablation not in ("no-copy", "no-copy-b"),
        ablation == "same-k",
        ablation != "no-ldmatrix",
    )
    if flags not in _MODULES:
        # a file of its own: @T.function reads its kernel's source from the module's file
        folder = tempfile.mkdtemp(prefix="tirx-ablation-")
        atexit.register(shutil.rmtree, folder, True)
        path = Path(folder) / "gemm_ablated.py"
        path.write_text(ablated_source(flags))
        spec = importlib.util.spec_from_file_location(f"gemm_ablated_{len(_MODULES)}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MODULES[flags] = module
    return _MODULES[flags].make_gemm_pipelined(M, N, K, dtype)


def main(argv=None) -> int:
    import torch
    from gemm_clocks import run_for
    from gemm_kernels import TRITON_CONFIGS, make_mma_peak, peak_flops, triton_matmul

    import tirx

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--seconds", type=float, default=1.5)
    report.add_output_arguments(ap, "gemm_ablation")
    args = ap.parse_args(argv)
    n, tdtype = args.n, getattr(torch, args.dtype)
    a = torch.randn((n, n), device="cuda").to(tdtype)
    b = torch.randn((n, n), device="cuda").to(tdtype)
    zero = torch.zeros_like(a)
    out = torch.empty((n, n), device="cuda", dtype=torch.float32)
    flops = 2.0 * n**3
    runners = {}
    for ablation in (None, *ABLATIONS):
        exe = tirx.compile(ablated_gemm(n, n, n, args.dtype, ablation), target="cuda")
        runners[ablation or "default"] = (lambda exe=exe: exe(a, b, out), flops)
        if ablation is None:
            runners["default, zero inputs"] = (lambda exe=exe: exe(zero, zero, out), flops)
    best = TRITON_CONFIGS[0]
    runners[f"Triton {best}"] = (triton_matmul(a, b, out, best), flops)
    for operands in ("constant", "random"):
        peak, blocks, threads = make_mma_peak(args.dtype, operands)
        pexe = tirx.compile(peak, target="cuda")
        sink = torch.zeros((blocks * threads,), device="cuda", dtype=torch.float32)
        runners[f"mma.sync peak, {operands} operands"] = (
            lambda pexe=pexe, sink=sink: pexe(sink),
            peak_flops(args.dtype),
        )
    lines = [
        f"| kernel ({args.dtype}, n={n}) | SM clock MHz | power W | TFLOP/s | "
        "TFLOP/s per GHz | / default |",
        "|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    base = None
    for name, (fn, work) in runners.items():
        mhz, watts, per_call = run_for(fn, args.seconds, torch)
        tf = work / per_call / 1e12
        base = base or tf
        row = f"| {name} | {mhz:.0f} | {watts:.0f} | {tf:.1f} | {tf / mhz * 1e3:.1f} | {tf / base:.2f} |"
        lines.append(row)
        print(row, flush=True)
    title = [
        "# Where the default GEMM's time goes at the power limit",
        "",
        f"Each row: the kernel alone for {args.seconds:g} s back to back, the median SM clock and "
        "board power of the second half (`nvidia-smi`, read-only) and the TFLOP/s then; A and B "
        "random normal (the zero-input row excepted). The variants are the default kernel with "
        "one part of its main loop left out (`benchmarks/gemm_ablation.py` says how; their "
        "results are wrong).",
        "",
    ]
    report.write_result("gemm_ablation", "\n".join(title + lines), args, __file__, argv,
                        gpu=report.gpu_name())  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
