"""The seed guide's kernel (docs/seed/warp_matrix_instructions.rst), verbatim.

``Out = A @ B.T`` for float16 A (16x16) and B (8x16) with one warp: ldmatrix.x4/x2 into
registers, one mma.sync.m16n8k16 with float32 accumulation. tests/test_seed.py checks that
the code below is exactly the guide's first code block.
"""

# --- begin verbatim ---
from tvm_tirx.script import tirx as T
from tvm_tirx.backend.cuda.axis import laneid
from tvm_tirx.tirx.layout import S, TileLayout

a_load_layout = TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])
b_load_layout = TileLayout(S[(2, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])
a_mma_layout = TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
b_mma_layout = TileLayout(S[(1, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)])
d_mma_layout = TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])


@T.function
def warp_matmul(
    A: T.Tensor((16, 16), "float16"),
    B: T.Tensor((8, 16), "float16"),
    Out: T.Tensor((16, 8), "float32"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 16), "float16", layout="default", align=16)
    b = T.alloc_shared((8, 16), "float16", layout="default", align=16)
    for q in range(8):
        index = lane + 32 * q
        a[index // 16, index % 16] = A[index // 16, index % 16]
    for q in range(4):
        index = lane + 32 * q
        b[index // 16, index % 16] = B[index // 16, index % 16]
    T.cuda.cta_sync()
    a_words = a.view("uint32").rearrange(
        "(group row) (chunk word) -> (chunk group) row word", group=2, chunk=2, word=4
    )
    b_words = b.view("uint32").rearrange("row (chunk word) -> chunk row word", chunk=2)
    ar = T.alloc_local((4,), "uint32", layout="default")
    br = T.alloc_local((2,), "uint32", layout="default")
    dr = T.alloc_local((4,), "float32", layout="default")
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        ar.view(4, 8, 4, layout=a_load_layout), a_words, scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"],
        br.view(2, 8, 4, layout=b_load_layout), b_words, scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"],
        dr.view(1, 1, 16, 8, layout=d_mma_layout),
        ar.view(1, 1, 16, 8, layout=a_mma_layout),
        br.view(1, 1, 8, 8, layout=b_mma_layout),
        T.float32(0), scope="warp",
    )
    for r in range(4):
        Out[lane // 4 + 8 * (r // 2), 2 * (lane % 4) + r % 2] = dr[r]
# --- end verbatim ---
