"""A tiled GEMM with warp matrix instructions: ``Out = A @ B.T``.

A is ``(M, K)``, B is ``(N, K)`` (N-major, as mma.sync wants it), both float16 or bfloat16;
Out is ``(M, N)`` float32. Each block computes a 64x64 tile with 4 warps (2x2, 32x32 each).
For every 16-wide slice of K the block copies its A and B tiles to shared memory, each warp
loads its fragments with ``ldmatrix`` (A: x4 with 2 M repeats; B: x2 with 4 N repeats) and
issues 2x4 ``mma.sync.m16n8k16`` that accumulate into the same registers across the K loop.
"""

from __future__ import annotations

from tirx import T
from tirx.dtypes import dtype_of
from tirx.layout import S, TileLayout, laneid

from .gemm_config import positive_int

BM, BN, BK = 64, 64, 16
MR, NR = 2, 4  # per warp: 2 m16 tiles x 4 n8 tiles = 32 x 32

# Register layouts (SPEC §5's natural generalization to repeats).
D_MMA = TileLayout(S[(MR, NR, 2, 8, 4, 2) : (4 * NR, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
A_MMA = TileLayout(S[(MR, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
B_MMA = TileLayout(S[(NR, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)])
A_LOAD = TileLayout(S[(MR, 4, 8, 4) : (4, 1, 4 @ laneid, 1 @ laneid)])
B_LOAD = TileLayout(S[(NR, 2, 8, 4) : (2, 1, 4 @ laneid, 1 @ laneid)])


def make_gemm(M: int, N: int, K: int, dtype: str = "float16"):
    """A kernel for fixed sizes (M, N positive multiples of 64; K a positive multiple of 16)."""
    M, N, K = (positive_int(name, v) for name, v in zip("MNK", (M, N, K)))
    if M % BM or N % BN or K % BK:
        raise ValueError(f"M and N must be multiples of 64 and K of 16, got {M}, {N}, {K}")
    dtype = dtype_of(dtype).name  # "half" is float16
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"make_gemm multiplies float16 or bfloat16 matrices, not {dtype}")
    ab = "f16" if dtype == "float16" else "bf16"
    mma = f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32"

    @T.function
    def gemm(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K), dtype),
        Out: T.Tensor((M, N), "float32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(N // BN, M // BM), block=128))
        tid = T.cuda.thread_idx("x")
        lane = T.cuda.lane_id()
        warp = T.cuda.warp_id()
        wm = warp // 2
        wn = warp % 2
        bm = T.cuda.block_idx("y")
        bn = T.cuda.block_idx("x")
        a_s = T.alloc_shared((BM, BK), dtype, align=16)
        b_s = T.alloc_shared((BN, BK), dtype, align=16)
        ar = T.alloc_local((4 * MR,), "uint32")
        br = T.alloc_local((2 * NR,), "uint32")
        dr = T.alloc_local((4 * MR * NR,), "float32")
        a_w = a_s.view("uint32")
        b_w = b_s.view("uint32")
        A_w = A.view("uint32")
        B_w = B.view("uint32")
        for i in T.unroll(4 * MR * NR):
            dr[i] = T.float32(0)
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

    return gemm
