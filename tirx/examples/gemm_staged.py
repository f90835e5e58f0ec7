"""A register-staged GEMM: ``Out = A @ B.T`` with large tiles and 8-byte loads, no cp.async.

A is ``(M, K)``, B is ``(N, K)`` (N-major), both float16 or bfloat16; Out is ``(M, N)``
float32. The step of notebook 07 between :mod:`tirx.examples.gemm` (64x64 tiles, 4 warps,
4-byte copies, two barriers per 16-wide K slice) and :mod:`tirx.examples.gemm_pipelined`:

* the block tile and warp grid of a :class:`~tirx.examples.gemm_pipelined.GemmConfig`
  (128x128, 8 warps of 64x32 here) and its grouped block raster;
* two shared stages of ``bk = 32``: while the warps multiply the tile in one stage, the next
  K tile travels global -> registers (8-byte loads) and is stored to the other stage, so one
  barrier per K tile orders everything; the loads wait in registers, not in shared memory;
* ``smem="pad"`` adds 16 bytes to each shared row, so an ldmatrix reads 8 different bank
  groups; ``"plain"`` leaves rows back to back (4-way bank conflicts);
* ldmatrix.x4 for A and B, fragments double-buffered in registers, 8-byte output stores.
"""

from tirx import T
from tirx.layout import S, TileLayout

from .gemm_config import GemmConfig, check_sizes, fragment_layouts

__all__ = ["make_gemm_staged", "STAGED"]

STAGED = GemmConfig(bk=32, warps_n=4, stages=2, smem="pad")


def make_gemm_staged(M: int, N: int, K: int, dtype: str = "float16", cfg: GemmConfig = STAGED):
    """A kernel for fixed sizes (M a multiple of ``cfg.bm``, N of ``cfg.bn``, K of ``cfg.bk``).

    ``cfg.stages`` and ``cfg.double_buffer`` are not used (two stages, double-buffered);
    ``cfg.smem`` is ``"pad"`` or ``"plain"``.
    """
    M, N, K = check_sizes(M, N, K, dtype, cfg)
    if cfg.bk != 32:
        raise ValueError("the register-staged kernel takes bk = 32 (two 16-wide slices)")
    if cfg.smem == "swizzle":
        raise ValueError("the register-staged kernel pads its rows or leaves them plain")
    ab = "f16" if dtype == "float16" else "bf16"
    mma = f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32"
    ldsm = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
    BM, BN, BK, WN = cfg.bm, cfg.bn, cfg.bk, cfg.warps_n
    WTM, WTN, MR, NR = cfg.wtm, cfg.wtn, cfg.mr, cfg.nr
    THREADS = cfg.threads
    LD = BK + (8 if cfg.smem == "pad" else 0)  # halves per shared row
    CPR = BK // 4  # 8-byte chunks per row of a K tile
    A_CH = BM * CPR // THREADS  # chunks each thread copies per stage
    B_CH = BN * CPR // THREADS
    KT = K // BK
    NB_M, NB_N = M // BM, N // BN
    GROUP = min(cfg.group_m, NB_M)
    A_SMEM = TileLayout(S[(2, BM, BK) : (BM * LD, LD, 1)])
    B_SMEM = TileLayout(S[(2, BN, BK) : (BN * LD, LD, 1)])
    ACC, A_MMA, B_MMA, A_LOAD, B_LOAD = fragment_layouts(MR, NR)
    A_PAT = "(rep group row) (chunk word) -> rep (chunk group) row word"
    B_PAT = "(rep nt row) (chunk word) -> rep (nt chunk) row word"

    @T.function
    def gemm_staged(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K), dtype),
        Out: T.Tensor((M, N), "float32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=NB_M * NB_N, block=THREADS))
        tid = T.cuda.thread_idx("x")
        lane = T.cuda.lane_id()
        warp = T.cuda.warp_id()
        wm = warp // WN
        wn = warp % WN
        pid = T.cuda.block_idx("x")  # grouped raster, as in gemm_pipelined
        first = (pid // (GROUP * NB_N)) * GROUP
        rows_here = min(NB_M - first, GROUP)
        bm = first + (pid % (GROUP * NB_N)) % rows_here
        bn = (pid % (GROUP * NB_N)) // rows_here
        a_s = T.alloc_shared((2, BM, BK), dtype, layout=A_SMEM, align=128)
        b_s = T.alloc_shared((2, BN, BK), dtype, layout=B_SMEM, align=128)
        a_w = a_s.view("uint32")
        b_w = b_s.view("uint32")
        a_c = a_s.view("uint64")
        b_c = b_s.view("uint64")
        A_c = A.view("uint64")
        B_c = B.view("uint64")
        ga = T.alloc_local((A_CH,), "uint64")
        gb = T.alloc_local((B_CH,), "uint64")
        fa0 = T.alloc_local((4 * MR,), "uint32")
        fa1 = T.alloc_local((4 * MR,), "uint32")
        fb0 = T.alloc_local((2 * NR,), "uint32")
        fb1 = T.alloc_local((2 * NR,), "uint32")
        acc = T.alloc_local((4 * MR * NR,), "float32")
        for i in T.unroll(4 * MR * NR):
            acc[i] = T.float32(0)
        # prologue: K tile 0 into stage 0
        for q in T.unroll(A_CH):
            idx = tid + THREADS * q
            a_c[0, idx // CPR, idx % CPR] = A_c[bm * BM + idx // CPR, idx % CPR]
        for q in T.unroll(B_CH):
            idx = tid + THREADS * q
            b_c[0, idx // CPR, idx % CPR] = B_c[bn * BN + idx // CPR, idx % CPR]
        T.cuda.cta_sync()
        T.cuda.tile.apply(
            T.ptx[ldsm],
            fa0.view(MR, 4, 8, 4, layout=A_LOAD),
            a_w[0, wm * WTM : wm * WTM + WTM, 0:8].rearrange(A_PAT, rep=MR, group=2, chunk=2),
        )
        T.cuda.tile.apply(
            T.ptx[ldsm],
            fb0.view(NR // 2, 4, 8, 4, layout=B_LOAD),
            b_w[0, wn * WTN : wn * WTN + WTN, 0:8].rearrange(B_PAT, rep=NR // 2, nt=2, chunk=2),
        )
        for kt in range(KT):
            s = kt % 2
            if kt + 1 < KT:  # the next K tile, global -> registers, in flight during the mma
                for q in T.unroll(A_CH):
                    idx = tid + THREADS * q
                    ga[q] = A_c[bm * BM + idx // CPR, (kt + 1) * CPR + idx % CPR]
                for q in T.unroll(B_CH):
                    idx = tid + THREADS * q
                    gb[q] = B_c[bn * BN + idx // CPR, (kt + 1) * CPR + idx % CPR]
            # K slice 1 of this stage into the second fragment buffer, then slice 0's mma
            T.cuda.tile.apply(
                T.ptx[ldsm],
                fa1.view(MR, 4, 8, 4, layout=A_LOAD),
                a_w[s, wm * WTM : wm * WTM + WTM, 8:16].rearrange(A_PAT, rep=MR, group=2, chunk=2),
            )
            T.cuda.tile.apply(
                T.ptx[ldsm],
                fb1.view(NR // 2, 4, 8, 4, layout=B_LOAD),
                b_w[s, wn * WTN : wn * WTN + WTN, 8:16].rearrange(
                    B_PAT, rep=NR // 2, nt=2, chunk=2
                ),
            )
            T.cuda.tile.apply(
                T.ptx[mma],
                acc.view(MR, NR, 16, 8, layout=ACC),
                fa0.view(MR, 1, 16, 8, layout=A_MMA),
                fb0.view(NR, 1, 8, 8, layout=B_MMA),
                acc.view(MR, NR, 16, 8, layout=ACC),
            )
            if kt + 1 < KT:  # the other stage: store, one barrier, first fragments of it
                for q in T.unroll(A_CH):
                    idx = tid + THREADS * q
                    a_c[1 - s, idx // CPR, idx % CPR] = ga[q]
                for q in T.unroll(B_CH):
                    idx = tid + THREADS * q
                    b_c[1 - s, idx // CPR, idx % CPR] = gb[q]
                T.cuda.cta_sync()
                T.cuda.tile.apply(
                    T.ptx[ldsm],
                    fa0.view(MR, 4, 8, 4, layout=A_LOAD),
                    a_w[1 - s, wm * WTM : wm * WTM + WTM, 0:8].rearrange(
                        A_PAT, rep=MR, group=2, chunk=2
                    ),
                )
                T.cuda.tile.apply(
                    T.ptx[ldsm],
                    fb0.view(NR // 2, 4, 8, 4, layout=B_LOAD),
                    b_w[1 - s, wn * WTN : wn * WTN + WTN, 0:8].rearrange(
                        B_PAT, rep=NR // 2, nt=2, chunk=2
                    ),
                )
            T.cuda.tile.apply(
                T.ptx[mma],
                acc.view(MR, NR, 16, 8, layout=ACC),
                fa1.view(MR, 1, 16, 8, layout=A_MMA),
                fb1.view(NR, 1, 8, 8, layout=B_MMA),
                acc.view(MR, NR, 16, 8, layout=ACC),
            )
        out_c = Out.view("uint64")
        acc_c = acc.view("uint64")
        for mi in T.unroll(MR):
            for ni in T.unroll(NR):
                for h in T.unroll(2):
                    row = bm * BM + wm * WTM + mi * 16 + lane // 4 + 8 * h
                    col = bn * BN + wn * WTN + ni * 8 + 2 * (lane % 4)
                    out_c[row, col // 2] = acc_c[2 * NR * mi + 2 * ni + h]

    return gemm_staged
