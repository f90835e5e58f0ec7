"""A measured prototype of the Hopper path for the default GEMM: clusters of two blocks fed by
TMA tensor copies, A's tile multicast to both.

    python benchmarks/gemm_cluster_tma.py [--sizes 4096,8192] [--dtype float16] [--seconds 1.5]
    python benchmarks/gemm_cluster_tma.py --check [--sizes 512]   # bit-equality only

The kernel is the default's generated CUDA (``make_gemm_pipelined``, 256x128x64, 8 warps,
``cuda -arch=sm_90``) rewritten as text and launched here through the driver. What changes:

* the two blocks of a cluster (``__cluster_dims__(2, 1, 1)``) compute neighbouring tiles of the
  same block row; each fetches half of their common A tile with one
  ``cp.async.bulk.tensor.2d ... .multicast::cluster`` (the copy lands in both blocks' shared
  memory) and its own B tile with one more, 128-byte-swizzled by the copy engine into exactly
  the layout the kernel's ``ldmatrix`` reads (``shared_layout(..., "swizzle")``), so L2 serves
  each A tile once per cluster instead of once per block;
* one thread per block issues the copies; a ``full`` mbarrier per stage (``expect_tx`` of the
  stage's 48 KB) replaces ``cp.async.wait_group`` and tells every thread that its stage landed;
* a stage may be refilled only when both blocks have read it: ``--sync release`` (default)
  gives each stage an ``empty`` mbarrier of two arrivals, one from each block (the far one
  through ``mapa`` and a cluster-scope arrive); ``--sync cluster`` uses ``barrier.cluster``
  arrive/wait once per K step instead;
* ``--stages`` (3 or 4), ``--ahead`` (K tiles in flight, at most stages - 1; fewer leaves a
  stage of slack so a refill waits for an older release) and ``--fill-at`` (``start`` of a K
  step or its ``half``) place the copies.

The result is checked bit for bit against the default kernel (same mma order, same sums), and
the timing is the sustained one of ``gemm_clocks.run_for`` (SM clock and board power sampled).
The tables go to ``benchmarks/results/gemm_cluster_tma-<machine>.md`` (``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402
from raw_cuda import CUDA_TMA_BASICS, cuda_fill, nvrtc_cubin, raw_launcher, tensor_map_2d  # noqa: E402

THREADS, BM, BN, BK = 256, 256, 128, 64
A_STAGE, B_STAGE = BM * BK * 2, BN * BK * 2  # bytes of one stage's A and B tiles

_RELEASE = r"""
TIRX_DEVICE void tirx_release(unsigned bar, int peer) {
  unsigned remote;
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(peer));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(remote) : "memory");
}
"""


def _device_helpers(stages: int) -> str:
    """The mbarrier wait, the far block's release, and the two stage fills: ``tirx_fill`` (half
    of A multicast to both blocks, B own) and ``tirx_fill_solo`` (one block: all of A)."""
    full, b_base = stages * (A_STAGE + B_STAGE), stages * A_STAGE
    b_load = (f"smem + {b_base}u + stage * {B_STAGE}u", "tB", f"k * {BK}", f"bn * {BN}", False)
    half = (f"smem + stage * {A_STAGE}u + rank * {A_STAGE // 2}u", "tA", f"k * {BK}",
            f"bm * {BM} + rank * {BM // 2}", True)  # fmt: skip
    whole = (f"smem + stage * {A_STAGE}u", "tA", f"k * {BK}", f"bm * {BM}", False)
    nbytes = A_STAGE + B_STAGE
    return (
        CUDA_TMA_BASICS
        + _RELEASE
        + cuda_fill("tirx_fill", full, nbytes, [b_load, half])
        + cuda_fill("tirx_fill_solo", full, nbytes, [b_load, whole])
    )


_ARRIVE = 'asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");'
_WAIT = 'asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");'


class RewriteError(RuntimeError):
    """The generated CUDA no longer has the shape this rewrite expects."""


def cluster_source(src: str, n: int, stages: int = 4, ahead: int = 2, fill_at: str = "start",
                   sync: str = "release") -> str:  # fmt: skip
    """The default kernel's CUDA ``src`` (for ``n``³, ``stages`` stages) as the cluster kernel."""
    if sync not in ("release", "cluster", "solo") or fill_at not in ("start", "half"):
        raise ValueError(f"sync must be release, cluster or solo, fill_at start or half; got {sync}, {fill_at}")  # fmt: skip
    solo = sync == "solo"
    fill_fn = "tirx_fill_solo" if solo else "tirx_fill"
    if not 1 <= ahead <= stages - 1:
        raise ValueError(f"ahead must be 1 .. stages - 1 = {stages - 1}, got {ahead}")
    kt_n, nb_m, nb_n = n // BK, n // BM, n // BN
    group = min(8, nb_m)
    if nb_m % group or nb_n % 2:
        raise ValueError(f"n = {n}: the raster groups must be whole and the block columns even")
    span = group * nb_n
    full = stages * (A_STAGE + B_STAGE)
    empty = full + 8 * stages
    helpers = _device_helpers(stages)
    smem = "tirx_smem_addr"

    def fill(ind: str) -> list[str]:
        k = f"kt + {ahead}"
        lines = [ind + _WAIT] if sync == "cluster" else [] if solo else [
            ind + f"if (tirx_tid == 0 && {k} < {kt_n} && {k} >= {stages}) "
            f"tirx_mbar_wait({smem} + {empty}u + 8u * (({k}) % {stages}), "
            f"(unsigned)((({k}) / {stages} - 1) & 1));"
        ]  # fmt: skip
        lines.append(ind + f"if (tirx_tid == 0 && {k} < {kt_n}) {fill_fn}({smem}, &tmA, &tmB, "
                           f"({k}) % {stages}, {k}, bm, bn, tirx_rank);")  # fmt: skip
        return lines

    lines, out, i = src.replace("((int)blockIdx.x)", "tirx_pid").split("\n"), [], 0
    seen = set()

    def skip_until(text: str) -> None:
        nonlocal i
        while text not in lines[i]:
            out.append(lines[i])
            i += 1
        i += 1

    while i < len(lines):
        ln = lines[i]
        stripped = ln.strip()
        if ln.startswith('extern "C" __global__'):
            seen.add("entry")
            out.append(helpers)
            if not solo:
                ln = ln.replace("__global__ void __launch_bounds__", "__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__")  # fmt: skip
            ln = ln.replace("Out)", "Out, const __grid_constant__ tirx_tmap tmA, const __grid_constant__ tirx_tmap tmB)")  # fmt: skip
        elif "extern __shared__ __align__(128)" in ln:
            seen.add("smem")
            out += [ln.replace("(128)", "(1024)")]
            if solo:
                out.append("  const int tirx_rank = 0, tirx_pid = (int)blockIdx.x;")
                i += 1
                continue
            out += ["  const int tirx_rank = (int)(blockIdx.x & 1), tirx_c = (int)(blockIdx.x >> 1);",
                    f"  const int tirx_pid = (tirx_c / {span // 2}) * {span} + ((tirx_c % {span // 2}) / {group}) * {2 * group} + (tirx_c % {group}) + {group} * tirx_rank;"]  # fmt: skip
            i += 1
            continue
        elif stripped.startswith(f"for (st = 0; st < {stages - 1}; ++st) {{"):
            seen.add("prologue")
            init = " ".join(
                f'asm volatile("mbarrier.init.shared::cta.b64 [%0], {count};" :: "r"({smem} + {base}u + 8u * b) : "memory");'  # fmt: skip
                for base, count in ((full, 1), (empty, 2))
            )
            out += [f"  if (tirx_tid == 0) {{ for (int b = 0; b < {stages}; ++b) {{ {init} }} "
                    'asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }',
                    "  __syncthreads();" if solo else "  " + _ARRIVE + " " + _WAIT,
                    f"  if (tirx_tid == 0) {{ for (int f = 0; f < {ahead}; ++f) "
                    f"{fill_fn}({smem}, &tmA, &tmB, f, f, bm, bn, tirx_rank); }}"]  # fmt: skip
            depth = 0
            while True:  # drop the cp.async loop
                depth += lines[i].count("{") - lines[i].count("}")
                i += 1
                if depth == 0:
                    break
            skip_until("cp.async.wait_group")
            out.append(f"  tirx_mbar_wait({smem} + {full}u, 0u);")
            if sync == "cluster":
                out.append("  " + _ARRIVE)
            skip_until("__syncthreads")
            continue
        elif fill_at == "half" and stripped == "for (kp = 0; kp < 2; ++kp) {":
            out += [ln, "          if (kp == 1) {", *fill("            "), "          }"]
            i += 1
            continue
        elif stripped == "if ((kp == 0)) {":
            seen.add("copies")
            out.append(ln)
            i += 1
            while "cp.async.commit_group" not in lines[i]:
                if "cp.async.cg" not in lines[i]:
                    out.append(lines[i])
                i += 1
            i += 1
            if fill_at == "start":
                out += fill("            ")
            continue
        elif stripped == "if ((kp == 1)) {":
            seen.add("wait")
            out.append(ln)
            i += 1
            skip_until("cp.async.wait_group")
            skip_until("__syncthreads")
            nxt = "kt + 1"
            out.append(f"            if ({nxt} < {kt_n}) tirx_mbar_wait({smem} + {full}u + 8u * (({nxt}) % {stages}), (unsigned)((({nxt}) / {stages}) & 1));")  # fmt: skip
            if sync == "cluster":
                out.append("            " + _ARRIVE)
            elif solo:
                out.append("            __syncthreads();")
            else:
                out += ["            __syncthreads();",
                        f"            if (tirx_tid == 0 && kt + {stages} < {kt_n}) tirx_release({smem} + {empty}u + 8u * (kt % {stages}), tirx_rank ^ 1);"]  # fmt: skip
            continue
        out.append(ln)
        i += 1
    missing = {"entry", "smem", "prologue", "copies", "wait"} - seen
    text = "\n".join(out)
    if missing or "cp.async.cg" in text:
        raise RewriteError(f"the generated CUDA changed shape (not found: {sorted(missing)})")
    close = text.rstrip().rfind("}")
    tail = {"cluster": f"  {_WAIT}\n", "release": f"  {_ARRIVE}\n  {_WAIT}\n", "solo": ""}[sync]
    return text[:close] + tail + "}\n"


def compile_cluster(n: int, dtype: str, stages: int, **kw):
    """(default executable, CUDA text, cubin) for the cluster kernel of n³."""
    from dataclasses import replace

    import tirx
    from tirx.examples.gemm_pipelined import DEFAULT, make_gemm_pipelined

    exe = tirx.compile(make_gemm_pipelined(n, n, n, dtype, replace(DEFAULT, stages=stages)),
                       target="cuda -arch=sm_90")  # fmt: skip
    text = cluster_source(exe.source, n, stages, **kw)
    return exe, text, nvrtc_cubin(text, "gemm_cluster.cu")


def cluster_runner(cubin: bytes, stages: int, a, b, out, solo: bool = False):
    """A no-argument launcher of the cluster kernel on a (n, n), b (n, n), out (n, n) f32."""
    n = a.shape[0]
    args = [ctypes.c_void_p(t.data_ptr()) for t in (a, b, out)]
    args += [tensor_map_2d(a, BM if solo else BM // 2), tensor_map_2d(b, BN)]
    smem = stages * (A_STAGE + B_STAGE) + 16 * stages
    return raw_launcher(cubin, "gemm_pipelined", (n // BM) * (n // BN), THREADS, smem, args)


VARIANTS = {  # name: (stages, ahead, fill_at, sync)
    "4s-ahead2-release": (4, 2, "start", "release"),
    "4s-ahead3-release": (4, 3, "start", "release"),
    "4s-ahead3-half-release": (4, 3, "half", "release"),
    "3s-ahead2-release": (3, 2, "start", "release"),
    "4s-ahead3-cluster-barrier": (4, 3, "start", "cluster"),
    # one block, no cluster: TMA copies and mbarriers in place of cp.async, nothing shared
    "3s-solo": (3, 2, "start", "solo"),
    "4s-solo": (4, 3, "start", "solo"),
}


def main(argv=None) -> int:
    import torch
    from gemm_clocks import run_for
    from gemm_kernels import TRITON_CONFIGS, triton_matmul

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--check", action="store_true", help="bit-equality with the default only")
    report.add_output_arguments(ap, "gemm_cluster_tma")
    args = ap.parse_args(argv)
    tdtype = getattr(torch, args.dtype)
    lines = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    for n in (int(s) for s in args.sizes.split(",")):
        a = torch.randn((n, n), device="cuda").to(tdtype)
        b = torch.randn((n, n), device="cuda").to(tdtype)
        want, got = torch.zeros((n, n), device="cuda"), torch.zeros((n, n), device="cuda")
        runners, default = {}, None
        for name in args.variants.split(","):
            stages, ahead, fill_at, sync = VARIANTS[name]
            exe, _, cubin = compile_cluster(n, args.dtype, stages, ahead=ahead, fill_at=fill_at, sync=sync)  # fmt: skip
            default = default or exe
            run = cluster_runner(cubin, stages, a, b, got, solo=sync == "solo")
            got.zero_()
            run()
            default(a, b, want)
            torch.cuda.synchronize()
            same = torch.equal(got, want)
            say(f"{args.dtype} n={n} {name}: bit-equal to the default kernel: {same}")
            if not same:
                return 1
            runners[f"cluster-2 TMA {name}"] = run
        if args.check:
            continue
        runners["tirx default"] = lambda exe=default, a=a, b=b, c=want: exe(a, b, c)
        runners[f"Triton {TRITON_CONFIGS[0]}"] = triton_matmul(a, b, want, TRITON_CONFIGS[0])
        say(f"\n| kernel ({args.dtype}, n={n}) | SM clock MHz | power W | TFLOP/s |\n|---|---|---|---|")  # fmt: skip
        for name, fn in runners.items():
            mhz, watts, per_call = run_for(fn, args.seconds, torch)
            say(f"| {name} | {mhz:.0f} | {watts:.0f} | {2 * n**3 / per_call / 1e12:.1f} |")
    if not args.check:
        title = [
            "# A cluster/TMA prototype of the default GEMM",
            "",
            f"{args.dtype} in, float32 out. Each row: the kernel alone for {args.seconds:g} s back "
            "to back (`gemm_clocks.run_for`: median SM clock and board power of the second half, "
            "TFLOP/s then). Variants: `benchmarks/gemm_cluster_tma.py` (`VARIANTS`).",
            "",
        ]
        report.write_result("gemm_cluster_tma", "\n".join(title + lines), args, __file__, argv,
                            gpu=report.gpu_name())  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
