"""What Hopper's ``wgmma`` gives the default GEMM's tiles: CUDA kernels of the same blocks
(256x128x64, 8 warps), fed by TMA tensor copies or by cp.async, against the tirx default and the
baselines.

    python benchmarks/gemm_wgmma.py [--sizes 4096,8192] [--dtypes float16,bfloat16]
                                    [--loads tma,cp.async] [--out FILE]
    python benchmarks/gemm_wgmma.py --check --sizes 512,1024   # against the default only

These are the hand-written references for ``tirx.examples.gemm_wgmma`` (the cp.async one is
the kernel that example writes in tirx; the TMA one is what tensor copies would add):

* the two warpgroups of a block take 128 rows each, two ``wgmma.mma_async.m64n128k16`` (f32
  accumulate) per 16-wide K slice, both operands read from shared memory through matrix
  descriptors (K-major, 128-byte swizzle): no ``ldmatrix``, no operand registers;
* ``tma``: one thread fetches each K tile with two ``cp.async.bulk.tensor.2d`` (A's 256 x 64
  box and B's 128 x 64 box, swizzled by the copy engine), ``stages - 1`` tiles ahead, a ``full``
  mbarrier per stage (``expect_tx`` of its bytes) telling every thread that it landed; a barrier
  after the step's ``wgmma.wait_group 1`` frees the stage read one K tile earlier, which the
  same step refills;
* ``cp.async``: every thread copies twelve 16-byte chunks of each K tile into their swizzled
  places, ``stages - 2`` tiles ahead; a step waits for its tile, fences the generic proxy's
  writes for the tensor cores' async proxy, passes its one barrier and refills the stage read
  two steps earlier;
* ``wgmma.commit_group`` per K tile and ``wgmma.wait_group 1``: a tile's mma run while the next
  tile's are issued;
* the accumulators leave from registers, an 8-byte store per pair (each quad writes a 32-byte
  sector).

The sums are the same as the default kernel's (the check compares them bit for bit); timing is
the sustained one of ``gemm_clocks.run_for`` (each kernel alone, SM clock and board power). The
tables go to ``benchmarks/results/gemm_wgmma-<machine>.md`` (``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402
from raw_cuda import CUDA_TMA_BASICS, cuda_fill, nvrtc_cubin, raw_launcher, tensor_map_2d  # noqa: E402

BM, BN, BK, THREADS = 256, 128, 64, 256


LOADS = ("tma", "cp.async")


def wgmma_source(n: int, dtype: str = "float16", stages: int = 4, loads: str = "tma") -> str:
    """The CUDA of the wgmma kernel for ``n``³ (``n`` a multiple of 256). ``loads``: ``"tma"``
    (one thread, two tensor copies per K tile, ``stages - 1`` tiles ahead, a full mbarrier per
    stage, two barriers per step) or ``"cp.async"`` (every thread twelve 16-byte copies per K
    tile, swizzled by hand, ``stages - 2`` tiles ahead, ``fence.proxy.async`` and one barrier per
    step: the kernel ``tirx.examples.gemm_wgmma`` writes in tirx)."""
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"dtype must be float16 or bfloat16, got {dtype!r}")
    if loads not in LOADS:
        raise ValueError(f"loads must be one of {LOADS}, got {loads!r}")
    if n % BM or n // BK < stages:
        raise ValueError(f"n must be a multiple of {BM} with at least {stages} K tiles, got {n}")
    if not (2 if loads == "tma" else 3) <= stages <= 4:
        raise ValueError(f"stages must be 2 (3 for cp.async) .. 4 (48 KB each), got {stages}")
    ab = "f16" if dtype == "float16" else "bf16"
    kt_n, nb_n, group = n // BK, n // BN, min(8, n // BM)
    span = group * nb_n
    a_stage, b_stage = BM * BK * 2, BN * BK * 2
    b_base, full = stages * a_stage, stages * (a_stage + b_stage)
    regs = ", ".join(f"%{i}" for i in range(64))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(64))
    mma = f"""
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  #pragma unroll
  for (int k = 0; k < {BK // 16}; ++k) {{
    const unsigned long long db = desc(smem + {b_base}u + s * {b_stage}u + k * 32u);
    #pragma unroll
    for (int i = 0; i < 2; ++i)
      mma64x128(acc[i], desc(smem + s * {a_stage}u + (g * 128 + i * 64) * 128u + k * 32u), db);
  }}
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");"""
    if loads == "tma":
        loads_ = [
            (f"smem + stage * {a_stage}u", "tA", f"k * {BK}", f"bm * {BM}", False),
            (f"smem + {b_base}u + stage * {b_stage}u", "tB", f"k * {BK}", f"bn * {BN}", False),
        ]
        helpers = CUDA_TMA_BASICS + cuda_fill("tirx_fill", full, a_stage + b_stage, loads_)
        params = "const __grid_constant__ tirx_tmap tmA, const __grid_constant__ tirx_tmap tmB"
        start = f"""
  if (tid == 0) {{
    for (int s = 0; s < {stages}; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem + {full}u + 8u * s) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }}
  __syncthreads();
  if (tid == 0)
    for (int f = 0; f < {stages - 1}; ++f) tirx_fill(smem, &tmA, &tmB, f, f, bm, bn, 0);"""
        step = f"""
  tirx_mbar_wait(smem + {full}u + 8u * s, (unsigned)((kt / {stages}) & 1));{mma}
  __syncthreads();  // both warpgroups' mma of the previous K tile are done with its stage
  if (tid == 0 && kt + {stages - 1} < {kt_n})  // that stage (at kt = 0 the unused one)
    tirx_fill(smem, &tmA, &tmB, (kt + {stages - 1}) % {stages}, kt + {stages - 1}, bm, bn, 0);"""
        finish = ""
    else:
        ahead = stages - 2
        copies = "\n".join(
            f"""  #pragma unroll
  for (int q = 0; q < {rows // 32}; ++q) {{
    const int row = r0 + 32 * q;
    const unsigned dst = smem + {base}stage * {size}u + row * 128u + ((c ^ (row & 7)) << 4);
    const unsigned short* src = {t} + (size_t)({blk} * {rows} + row) * {n} + k * {BK} + c * 8;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
  }}"""
            for t, rows, base, size, blk in (
                ("A", BM, "", a_stage, "bm"),
                ("B", BN, f"{b_base}u + ", b_stage, "bn"),
            )
        )
        helpers = (
            "// K tile k into stage: chunk c of rows r0 + 32 q, at chunk c ^ (row % 8) of its row\n"
            "TIRX_DEVICE void tirx_fill(unsigned smem, const unsigned short* A, "
            "const unsigned short* B, int stage, int k, int bm, int bn, int r0, int c) {\n"
            f"{copies}\n"
            '  asm volatile("cp.async.commit_group;" ::: "memory");\n}\n'
        )
        params = "const unsigned short* __restrict__ A, const unsigned short* __restrict__ B"
        start = f"""
  const int r0 = tid >> 3, c = tid & 7;
  for (int f = 0; f < {ahead}; ++f) tirx_fill(smem, A, B, f, f, bm, bn, r0, c);"""
        step = f"""
  asm volatile("cp.async.wait_group {ahead - 1};" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic writes, async reads
  __syncthreads();  // every warpgroup's mma of two steps ago are done with that stage
  tirx_fill(smem, A, B, (kt + {ahead}) % {stages}, kt + {ahead} < {kt_n} ? kt + {ahead} : {kt_n - 1},
            bm, bn, r0, c);{mma}"""
        finish = '\n  asm volatile("cp.async.wait_all;" ::: "memory");'
    return rf"""
#define TIRX_DEVICE static __device__ __forceinline__
{helpers}// a K-major tile of 128-byte rows, 128-byte swizzle: start address, LBO 16 (unused), SBO 1024
// (8-row groups), swizzle mode 1
TIRX_DEVICE unsigned long long desc(unsigned addr) {{
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}}
TIRX_DEVICE void mma64x128(float* d, unsigned long long da, unsigned long long db) {{
  asm volatile("{{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.{ab}.{ab} {{{regs}}}, %64, %65, p, 1, 1, 0, 0;\n}}\n"
               : {outs} : "l"(da), "l"(db));
}}
extern "C" __global__ void __launch_bounds__({THREADS}) gemm_wgmma(float* __restrict__ Out, {params}) {{
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem = (unsigned)__cvta_generic_to_shared(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = warp >> 2, w = warp & 3;
  const int pid = blockIdx.x;
  const int bm = (pid / {span}) * {group} + (pid % {span}) % {group};
  const int bn = (pid % {span}) / {group};
  float acc[2][64];
  #pragma unroll
  for (int i = 0; i < 2; ++i)
    #pragma unroll
    for (int r = 0; r < 64; ++r) acc[i][r] = 0.0f;{start}
  for (int kt = 0; kt < {kt_n}; ++kt) {{
    const int s = kt % {stages};{step}
  }}
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");{finish}
  #pragma unroll
  for (int i = 0; i < 2; ++i)
    #pragma unroll
    for (int j = 0; j < {BN // 8}; ++j)
      #pragma unroll
      for (int h = 0; h < 2; ++h) {{
        const int row = bm * {BM} + g * 128 + i * 64 + 16 * w + (lane >> 2) + 8 * h;
        const int col = bn * {BN} + 8 * j + 2 * (lane & 3);
        *reinterpret_cast<float2*>(&Out[(size_t)row * {n} + col]) =
            make_float2(acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1]);
      }}
}}
"""


def compile_wgmma(n: int, dtype: str = "float16", stages: int = 4, loads: str = "tma") -> bytes:
    """The cubin of the wgmma kernel (NVRTC, sm_90a: wgmma needs the arch-specific target)."""
    return nvrtc_cubin(wgmma_source(n, dtype, stages, loads), "gemm_wgmma.cu")


def wgmma_runner(cubin: bytes, stages: int, a, b, out, loads: str = "tma"):
    """A no-argument launcher of ``out = a @ b.T`` (a, b (n, n) 16-bit, out (n, n) float32)."""
    n = a.shape[0]
    if loads == "tma":
        args = [ctypes.c_void_p(out.data_ptr()), tensor_map_2d(a, BM), tensor_map_2d(b, BN)]
    else:
        args = [ctypes.c_void_p(t.data_ptr()) for t in (out, a, b)]
    smem = stages * (BM + BN) * BK * 2 + 8 * stages
    return raw_launcher(cubin, "gemm_wgmma", (n // BM) * (n // BN), THREADS, smem, args)


def main(argv=None) -> int:
    import torch
    from gemm_clocks import run_for
    from gemm_kernels import TRITON_CONFIGS, TRITON_NAMED, make_mma_peak, peak_flops, triton_matmul

    import tirx
    from tirx.examples.gemm_pipelined import make_gemm_pipelined

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--check", action="store_true", help="bit-equality with the default only")
    ap.add_argument("--loads", default="tma,cp.async", help="how K tiles arrive: tma, cp.async")
    report.add_output_arguments(ap, "gemm_wgmma")
    args = ap.parse_args(argv)
    lines = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    for dtype in args.dtypes.split(","):
        tdtype = getattr(torch, dtype)
        if not args.check:
            peak, blocks, threads = make_mma_peak(dtype)
            pexe = tirx.compile(peak, target="cuda")
            sink = torch.zeros((blocks * threads,), device="cuda")
            mhz, watts, per_call = run_for(lambda p=pexe, s=sink: p(s), args.seconds, torch)
            say(f"\n{dtype}: mma.sync register-only peak {peak_flops(dtype) / per_call / 1e12:.1f} "
                f"TFLOP/s ({mhz:.0f} MHz, {watts:.0f} W)")  # fmt: skip
        for n in (int(s) for s in args.sizes.split(",")):
            a = torch.randn((n, n), device="cuda").to(tdtype)
            b = torch.randn((n, n), device="cuda").to(tdtype)
            want = torch.full((n, n), float("nan"), device="cuda")
            got = torch.full((n, n), float("nan"), device="cuda")
            exe = tirx.compile(make_gemm_pipelined(n, n, n, dtype), target="cuda")
            exe(a, b, want)
            runners = {}
            for loads in args.loads.split(","):
                for stages in (4, 3):
                    run = wgmma_runner(compile_wgmma(n, dtype, stages, loads), stages, a, b, got, loads)  # fmt: skip
                    got.fill_(float("nan"))
                    run()
                    torch.cuda.synchronize()
                    say(f"{dtype} n={n} wgmma, {loads}, {stages} stages: bit-equal to the tirx "
                        f"default: {torch.equal(got, want)}")  # fmt: skip
                    if not torch.allclose(got, want, rtol=1e-5, atol=1e-3):
                        return 1
                    runners[f"wgmma, {loads}, {stages} stages"] = run
            if args.check:
                continue
            runners["tirx default (mma.sync)"] = lambda exe=exe, a=a, b=b, c=want: exe(a, b, c)
            for cfg in (TRITON_CONFIGS[0], TRITON_NAMED):
                runners[f"Triton {cfg}"] = triton_matmul(a, b, want, cfg)
            bt = b.T
            runners["cuBLAS"] = lambda a=a, bt=bt: torch.matmul(a, bt)
            say(f"\n| kernel ({dtype}, n={n}) | SM clock MHz | power W | TFLOP/s |\n|---|---|---|---|")  # fmt: skip
            for name, fn in runners.items():
                mhz, watts, per_call = run_for(fn, args.seconds, torch)
                say(f"| {name} | {mhz:.0f} | {watts:.0f} | {2 * n**3 / per_call / 1e12:.1f} |")
    if args.check:  # bit-equality only: no table to keep
        return 0
    title = [
        "# The default GEMM's tiles on wgmma (CUDA), against tirx, Triton and cuBLAS",
        "",
        f"Each row: the kernel alone for {args.seconds:g} s back to back (`gemm_clocks.run_for`: "
        "median SM clock and board power of the second half, TFLOP/s then); A and B random "
        "normal, float32 out (cuBLAS: out in A's dtype). \"bit-equal\": the wgmma kernel's "
        "output against the tirx default's, element for element.",
    ]
    report.write_result("gemm_wgmma", "\n".join(title + lines), args, __file__, argv,
                        gpu=report.gpu_name())  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
