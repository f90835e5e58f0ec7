"""The kernels that ``benchmarks/gemm_speed.py`` times besides cuBLAS.

* ``TIRX_VARIANTS``: name -> ``factory(M, N, K, dtype)`` of a tirx GEMM (``Out = A @ B.T``,
  float32 out). ``"tirx"`` is the pipelined GEMM's default configuration, ``"wgmma"`` the
  warpgroup GEMM of ``tirx.examples.gemm_wgmma`` fed by cp.async, ``"wgmma-tma"`` by TMA,
  ``"hopper..."`` the warp-specialized persistent GEMM of ``tirx.examples.gemm_hopper`` (some
  with their output in the inputs' dtype); the others are the steps of notebook 07 and
  the variants that show where the time goes.
* ``triton_matmul``: a ``tl.dot`` matmul (the Triton tutorial's grouped-order kernel, no masks:
  sizes are multiples of the tile), float32 accumulate and float32 output.
* ``make_mma_peak``: a tirx kernel issuing ``mma.sync.m16n8k16`` from registers only.

Importing this module needs neither a GPU nor Triton; ``triton_matmul`` imports Triton.
"""

from __future__ import annotations

from dataclasses import dataclass

from tirx import T
from tirx.examples import gemm_pipelined as gp
from tirx.examples.gemm import make_gemm
from tirx.examples.gemm_hopper import make_gemm_hopper
from tirx.examples.gemm_staged import make_gemm_staged
from tirx.examples.gemm_wgmma import make_gemm_wgmma
from tirx.layout import S, TileLayout, laneid


def _pipelined(cfg: gp.GemmConfig):
    def factory(M, N, K, dtype):
        return gp.make_gemm_pipelined(M, N, K, dtype, cfg)

    return factory


def _staged(cfg: gp.GemmConfig):
    def factory(M, N, K, dtype):
        return make_gemm_staged(M, N, K, dtype, cfg)

    return factory


def variant_name(cfg: gp.GemmConfig) -> str:
    """``BMxBNxBK-Ww-Ss-SMEM`` (``-nodbuf`` without register double buffering, ``-gN`` for a
    raster group of N block rows other than the default's, ``-pN`` for a persistent kernel of N
    blocks per multiprocessor, ``-direct`` for an epilogue that stores from registers, ``-bulk``
    for one whose staged tile leaves through cp.async.bulk)."""
    warps = cfg.warps_m * cfg.warps_n
    name = f"{cfg.bm}x{cfg.bn}x{cfg.bk}-{warps}w-{cfg.stages}s-{cfg.smem}"
    name += "" if cfg.double_buffer else "-nodbuf"
    name += "" if cfg.group_m == gp.DEFAULT.group_m else f"-g{cfg.group_m}"
    name += f"-p{cfg.persistent}" if cfg.persistent else ""
    if cfg.bulk_store:
        return name + "-bulk"
    return name + ("" if cfg.stage_output or cfg.persistent else "-direct")


def _cfg(
    tile="128x128x32",
    warps=(2, 4),
    stages=3,
    smem="swizzle",
    dbuf=True,
    group=8,
    p=0,
    staged=True,
    bulk=False,
):
    bm, bn, bk = (int(x) for x in tile.split("x"))
    return gp.GemmConfig(bm, bn, bk, warps[0], warps[1], stages, smem, dbuf, group, p, staged, bulk)


PIPELINED = [
    # the steps of notebook 07 (cp.async, swizzle, stages), 8 warps of 64x32, bk = 32
    _cfg(stages=2, smem="plain"),
    _cfg(stages=2),
    _cfg(stages=3),
    _cfg(stages=4),
    # around GemmConfig() (128x128x64, 4 warps of 64x64, 3 stages, swizzled, double-buffered)
    _cfg("128x128x64", (2, 2), stages=3),
    _cfg("128x128x64", (2, 2), stages=2),
    _cfg("128x128x64", (2, 2), stages=4),
    _cfg("128x128x64", (2, 2), stages=3, smem="plain"),
    _cfg("128x128x64", (2, 2), stages=3, smem="pad"),
    _cfg("128x128x64", (2, 2), stages=3, dbuf=False),
    _cfg("128x256x64", (2, 4), stages=3),
    _cfg("128x128x32", (2, 2), stages=4),
    # larger blocks: one block of 8 warps per SM, 48 KB per stage (the default is 256x128x64
    # with 3 stages, "tirx")
    _cfg("128x256x64", (2, 4), stages=4),
    _cfg("256x128x64", (4, 2), stages=2),
    _cfg("256x128x64", (4, 2), stages=4),
    _cfg("128x256x64", (2, 4), stages=3, group=16),
    _cfg("128x128x64", (2, 2), stages=3, group=16),
    # persistent: every multiprocessor's blocks run from tile to tile without draining
    _cfg("256x128x64", (4, 2), stages=3, p=1),
    _cfg("256x128x64", (4, 2), stages=4, p=1),
    _cfg("128x256x64", (2, 4), stages=3, p=1),
    _cfg("128x128x64", (2, 2), stages=3, p=2),
    _cfg("256x128x64", (4, 2), stages=3, group=16, p=1),
    _cfg("256x128x64", (4, 2), stages=3, group=4, p=1),
    # the epilogue from registers (8-byte stores, a quad of lanes per 32-byte sector)
    _cfg("256x128x64", (4, 2), stages=3, staged=False),
    _cfg("128x128x64", (2, 2), stages=3, staged=False),
    # the default's twin (a variant runner, to compare with the tirx column of the same run)
    _cfg("256x128x64", (4, 2), stages=3),
    # the staged tile out through cp.async.bulk (sm_90): no warp waits for its stores; a
    # persistent kernel's stores drain while its next tile's mma.sync run
    _cfg("256x128x64", (4, 2), stages=3, bulk=True),
    _cfg("256x128x64", (4, 2), stages=3, p=1, bulk=True),
    _cfg("128x128x64", (2, 2), stages=3, bulk=True),
]

TIRX_VARIANTS = {
    "tirx": _pipelined(gp.DEFAULT),
    # Hopper's warpgroup GEMM (sm_90a): the same 256x128x64 blocks on wgmma.mma_async
    "wgmma": lambda M, N, K, dtype: make_gemm_wgmma(M, N, K, dtype, loads="cp.async"),
    "wgmma-3": lambda M, N, K, dtype: make_gemm_wgmma(M, N, K, dtype, 3, loads="cp.async"),
    "wgmma-tma": lambda M, N, K, dtype: make_gemm_wgmma(M, N, K, dtype, loads="tma"),
    "wgmma-tma-3": lambda M, N, K, dtype: make_gemm_wgmma(M, N, K, dtype, 3, loads="tma"),
    # the warp-specialized persistent GEMM (sm_90a): float32 out (128x128x64, 4 stages), or
    # out in the inputs' dtype as cuBLAS writes it (128x256x64, 3 stages); -c2: clusters of two
    # blocks sharing each B tile through multicast
    "hopper": lambda M, N, K, dtype: make_gemm_hopper(M, N, K, dtype),
    "hopper-c2": lambda M, N, K, dtype: make_gemm_hopper(M, N, K, dtype, cluster=2),
    "hopper-out16": lambda M, N, K, dtype: make_gemm_hopper(M, N, K, dtype, out_dtype=dtype),
    "hopper-out16-c2": lambda M, N, K, dtype: make_gemm_hopper(
        M, N, K, dtype, out_dtype=dtype, cluster=2
    ),
    "05-tiled": make_gemm,
    "staged-plain": _staged(gp.GemmConfig(bk=32, warps_n=4, stages=2, smem="plain")),
    "staged-pad": _staged(gp.GemmConfig(bk=32, warps_n=4, stages=2, smem="pad")),
    **{variant_name(cfg): _pipelined(cfg) for cfg in PIPELINED},
    # the default with its output in the inputs' dtype, as cuBLAS writes it here
    "tirx-out16": lambda M, N, K, dtype: gp.make_gemm_pipelined(M, N, K, dtype, out_dtype=dtype),
    "tirx-out16-direct": lambda M, N, K, dtype: gp.make_gemm_pipelined(
        M, N, K, dtype, gp.GemmConfig(bm=256, warps_m=4, stage_output=False), out_dtype=dtype
    ),
    "tirx-out16-bulk-p1": lambda M, N, K, dtype: gp.make_gemm_pipelined(
        M,
        N,
        K,
        dtype,
        gp.GemmConfig(bm=256, warps_m=4, persistent=1, bulk_store=True),
        out_dtype=dtype,
    ),
}


def output_dtype(kernel) -> str:
    """The dtype name of a GEMM kernel's output (its third parameter): float32 or 16-bit."""
    return str(kernel.ir.params[2].dtype)


# ------------------------------------------------------------------------------- Triton


@dataclass(frozen=True)
class TritonConfig:
    bm: int
    bn: int
    bk: int
    warps: int
    stages: int

    def __str__(self) -> str:
        return f"{self.bm}x{self.bn}x{self.bk}/{self.warps}w/{self.stages}s"


# the best ones of seven standard configurations measured on the H200 (see the results file of
# 2026-12-01), and the 128x128x64 / 8-warp / 4-stage one the goal names
TRITON_CONFIGS = (
    TritonConfig(128, 256, 64, 8, 3),
    TritonConfig(256, 128, 64, 8, 3),
    TritonConfig(128, 128, 64, 4, 4),
    TritonConfig(128, 128, 64, 8, 4),
    TritonConfig(128, 128, 32, 4, 4),
)
TRITON_NAMED = TRITON_CONFIGS[3]  # the 128x128x64 / 8-warp / 4-stage one the goal names

_TRITON_KERNEL = None


def _triton_kernel():
    global _TRITON_KERNEL
    if _TRITON_KERNEL is not None:
        return _TRITON_KERNEL
    import triton
    import triton.language as tl

    @triton.jit
    def matmul_kernel(
        a_ptr, b_ptr, c_ptr, M, N, K,
        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    ):  # fmt: skip
        pid = tl.program_id(0)
        num_pid_m = tl.cdiv(M, BM)
        num_pid_n = tl.cdiv(N, BN)
        in_group = GROUP_M * num_pid_n
        first_m = (pid // in_group) * GROUP_M
        group_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + ((pid % in_group) % group_m)
        pid_n = (pid % in_group) // group_m
        offs_m = pid_m * BM + tl.arange(0, BM)
        offs_n = pid_n * BN + tl.arange(0, BN)
        offs_k = tl.arange(0, BK)
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(0, tl.cdiv(K, BK)):
            acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
            a_ptrs += BK * stride_ak
            b_ptrs += BK * stride_bk
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc)

    _TRITON_KERNEL = matmul_kernel
    return matmul_kernel


def triton_matmul(a, b, out, cfg: TritonConfig):
    """A no-argument launcher of ``out = a @ b.T`` (b is ``(N, K)``) with configuration cfg."""
    kernel = _triton_kernel()
    M, K = a.shape
    N = b.shape[0]
    grid = ((M // cfg.bm) * (N // cfg.bn),)

    def run():
        kernel[grid](
            a, b, out, M, N, K,
            a.stride(0), a.stride(1), b.stride(1), b.stride(0), out.stride(0), out.stride(1),
            BM=cfg.bm, BN=cfg.bn, BK=cfg.bk, GROUP_M=8,
            num_warps=cfg.warps, num_stages=cfg.stages,
        )  # fmt: skip

    return run


# -------------------------------------------------------------------- mma.sync peak

PEAK_BLOCKS = 132 * 8
PEAK_THREADS = 128
PEAK_ITERS = 2048  # outer iterations, 4 unrolled inner ones of 8 independent mma each
_ACC = TileLayout(S[(2, 4, 2, 8, 4, 2) : (16, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
_A = TileLayout(S[(2, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
_B = TileLayout(S[(4, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)])


def peak_flops(dtype: str) -> float:
    """Floating-point operations of one launch of ``make_mma_peak``."""
    warps = PEAK_BLOCKS * PEAK_THREADS // 32
    return warps * PEAK_ITERS * 4 * 8 * (2 * 16 * 8 * 16)


def make_mma_peak(dtype: str = "float16", operands: str = "constant"):
    """(kernel, blocks, threads): 8 independent m16n8k16 accumulators per warp, registers only.

    ``operands="constant"``: every fragment holds 1.0 with a few low mantissa bits flipped, as
    the ceiling is usually measured; ``"random"``: each register of a fragment holds its own
    pseudo-random halves (random sign and mantissa, magnitude in [0.5, 1)), so the tensor
    cores switch as many bits as on a GEMM's data.
    """
    if operands not in ("constant", "random"):
        raise ValueError(f"operands must be 'constant' or 'random', got {operands!r}")
    ab = "f16" if dtype == "float16" else "bf16"
    mma = f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32"
    one = 0x3C003C00 if dtype == "float16" else 0x3F803F80  # two halves of 1.0
    # random halves: sign and mantissa bits from a hash, the exponent of 0.5
    keep, half = (0x83FF83FF, 0x38003800) if dtype == "float16" else (0x807F807F, 0x3F003F00)
    RANDOM = operands == "random"
    blocks, threads, iters = PEAK_BLOCKS, PEAK_THREADS, PEAK_ITERS

    @T.function
    def mma_peak(Sink: T.Tensor((blocks * threads,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=blocks, block=threads))
        tid = T.cuda.thread_idx("x")
        bx = T.cuda.block_idx("x")
        fa = T.alloc_local((8,), "uint32")
        fb = T.alloc_local((8,), "uint32")
        acc = T.alloc_local((32,), "float32")
        for i in T.unroll(8):
            if RANDOM:
                h = T.cast(bx * threads + tid, "uint32") * T.uint32(0x9E3779B1)
                fa[i] = (
                    (h ^ T.uint32(0x85EBCA77 * (i + 1) & 0xFFFFFFFF)) & T.uint32(keep)
                ) | T.uint32(half)
                fb[i] = (
                    (h ^ T.uint32(0xC2B2AE3D * (i + 1) & 0xFFFFFFFF)) * T.uint32(0x27D4EB2F)
                    & T.uint32(keep)
                ) | T.uint32(half)
            else:
                fa[i] = T.uint32(one) ^ T.cast((tid + i) & 7, "uint32")
                fb[i] = T.uint32(one) ^ T.cast((tid + 3 * i) & 7, "uint32")
        for i in T.unroll(32):
            acc[i] = T.float32(0)
        for _it in range(iters):
            for _u in T.unroll(4):
                T.cuda.tile.apply(
                    T.ptx[mma],
                    acc.view(2, 4, 16, 8, layout=_ACC),
                    fa.view(2, 1, 16, 8, layout=_A),
                    fb.view(4, 1, 8, 8, layout=_B),
                    acc.view(2, 4, 16, 8, layout=_ACC),
                )
        total = T.float32(0)
        for i in T.unroll(32):
            total = total + acc[i]
        Sink[bx * threads + tid] = total

    return mma_peak, blocks, threads
