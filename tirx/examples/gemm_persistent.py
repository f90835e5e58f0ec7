"""The tiled GEMM of :mod:`tirx.examples.gemm` as a persistent kernel: ``Out = A @ B.T``.

The same 64 x 64 block tile, 4 warps, ldmatrix and ``mma.sync.m16n8k16`` per 16-wide K slice;
but the grid is one block per multiprocessor (``grid="sms"``, sized when the kernel is
launched), and each block walks over the output tiles in the grouped order of
:mod:`tirx.examples.tile_scheduler`: block ``bx`` takes tiles ``bx``, ``bx + grid``, ...,
zeroing its accumulators for each.
"""

from tirx import T
from tirx.dtypes import dtype_of

from .gemm import A_LOAD, A_MMA, B_LOAD, B_MMA, BK, BM, BN, D_MMA, MR, NR
from .gemm_config import positive_int
from .tile_scheduler import grouped_tile

__all__ = ["make_gemm_persistent"]


def make_gemm_persistent(M: int, N: int, K: int, dtype: str = "float16", group: int = 8):
    """A kernel for fixed sizes (M, N multiples of 64; K a multiple of 16); ``group``: the
    tile rows of a band of the grouped order (an int of at least 1)."""
    M, N, K = (positive_int(name, v) for name, v in zip("MNK", (M, N, K)))
    group = positive_int("group", group)
    if M % BM or N % BN or K % BK:
        raise ValueError(f"M and N must be multiples of 64 and K of 16, got {M}, {N}, {K}")
    dtype = dtype_of(dtype).name  # "half" is float16
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(
            f"make_gemm_persistent multiplies float16 or bfloat16 matrices, not {dtype}"
        )
    ab = "f16" if dtype == "float16" else "bf16"
    mma = f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32"
    TILES_M, TILES_N = M // BM, N // BN
    TILES, GROUP = TILES_M * TILES_N, min(group, TILES_M)

    @T.function
    def gemm_persistent(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K), dtype),
        Out: T.Tensor((M, N), "float32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid="sms", block=128))
        tid = T.cuda.thread_idx("x")
        lane = T.cuda.lane_id()
        warp = T.cuda.warp_id()
        wm = warp // 2
        wn = warp % 2
        bx = T.cuda.block_idx("x")
        grid = T.cuda.grid_dim("x")
        a_s = T.alloc_shared((BM, BK), dtype, align=16)
        b_s = T.alloc_shared((BN, BK), dtype, align=16)
        ar = T.alloc_local((4 * MR,), "uint32")
        br = T.alloc_local((2 * NR,), "uint32")
        dr = T.alloc_local((4 * MR * NR,), "float32")
        a_w = a_s.view("uint32")
        b_w = b_s.view("uint32")
        A_w = A.view("uint32")
        B_w = B.view("uint32")
        for i in range(T.ceildiv(TILES - bx, grid)):  # this block's tiles
            bm, bn = T.meta_var(grouped_tile(bx + i * grid, TILES_M, TILES_N, GROUP))
            for r in T.unroll(4 * MR * NR):
                dr[r] = T.float32(0)
            for kt in range(K // BK):
                for q in T.unroll(4):
                    idx = tid + 128 * q
                    a_w[idx // 8, idx % 8] = A_w[bm * BM + idx // 8, kt * 8 + idx % 8]
                    b_w[idx // 8, idx % 8] = B_w[bn * BN + idx // 8, kt * 8 + idx % 8]
                T.cuda.cta_sync()
                a_frag = a_w[wm * 32 : wm * 32 + 32, :].rearrange(
                    "(rep group row) (chunk word) -> rep (chunk group) row word",
                    rep=MR,
                    group=2,
                    chunk=2,
                )
                b_frag = b_w[wn * 32 : wn * 32 + 32, :].rearrange(
                    "(rep row) (chunk word) -> rep chunk row word", rep=NR, chunk=2
                )
                T.cuda.tile.apply(
                    T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
                    ar.view(MR, 4, 8, 4, layout=A_LOAD),
                    a_frag,
                    scope="warp",
                )
                T.cuda.tile.apply(
                    T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"],
                    br.view(NR, 2, 8, 4, layout=B_LOAD),
                    b_frag,
                    scope="warp",
                )
                T.cuda.tile.apply(
                    T.ptx[mma],
                    dr.view(MR, NR, 16, 8, layout=D_MMA),
                    ar.view(MR, 1, 16, 8, layout=A_MMA),
                    br.view(NR, 1, 8, 8, layout=B_MMA),
                    dr.view(MR, NR, 16, 8, layout=D_MMA),
                    scope="warp",
                )
                T.cuda.cta_sync()
            for mi in T.unroll(MR):
                for ni in T.unroll(NR):
                    for r in T.unroll(4):
                        row = bm * BM + wm * 32 + mi * 16 + lane // 4 + 8 * (r // 2)
                        col = bn * BN + wn * 32 + ni * 8 + 2 * (lane % 4) + r % 2
                        Out[row, col] = dr[16 * mi + 4 * ni + r]

    return gemm_persistent
