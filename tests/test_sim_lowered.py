"""The simulator on kernels lowered by tirx's own pipeline (``tirx.compile(..., target="sim")``).

The lowering and the simulator read the PTX ISA independently; these kernels exercise the
seed guide, M/N/K repeats with bf16, ``ldmatrix.trans`` and ``stmatrix`` through both.
"""

from __future__ import annotations

import io

import torch

import tirx
from tirx import T
from tirx.layout import S, TileLayout, laneid

d_layout = TileLayout(S[(1, 2, 2, 8, 4, 2) : (8, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
a_layout = TileLayout(S[(1, 2, 2, 8, 2, 4) : (8, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
b_layout = TileLayout(S[(2, 2, 8, 2, 4) : (4, 2, 4 @ laneid, 1, 1 @ laneid)])
load_rep = TileLayout(S[(2, 4, 8, 4) : (4, 1, 4 @ laneid, 1 @ laneid)])
load4 = TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])


@T.function
def mm(
    A: T.Tensor((16, 32), "bfloat16"),
    B: T.Tensor((16, 32), "bfloat16"),
    Out: T.Tensor((16, 16), "float32"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 32), "bfloat16")
    b = T.alloc_shared((16, 32), "bfloat16")
    for q in range(16):
        index = lane + 32 * q
        a[index // 32, index % 32] = A[index // 32, index % 32]
        b[index // 32, index % 32] = B[index // 32, index % 32]
    T.cuda.cta_sync()
    ar = T.alloc_local((8,), "uint32")
    br = T.alloc_local((8,), "uint32")
    dr = T.alloc_local((8,), "float32")
    aw = a.view("uint32").rearrange(
        "(group row) (kc chunk word) -> kc (chunk group) row word", group=2, kc=2, chunk=2, word=4
    )
    bw = b.view("uint32").rearrange("(n row) (j word) -> n j row word", n=2, word=4)
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        ar.view(2, 4, 8, 4, layout=load_rep),
        aw,
        scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        br.view(2, 4, 8, 4, layout=load_rep),
        bw,
        scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"],
        dr.view(1, 2, 16, 8, layout=d_layout),
        ar.view(1, 2, 16, 8, layout=a_layout),
        br.view(2, 2, 8, 8, layout=b_layout),
        T.float32(0),
        scope="warp",
    )
    for r in range(8):
        Out[lane // 4 + 8 * (r % 4 // 2), (r // 4) * 8 + 2 * (lane % 4) + r % 2] = dr[r]


@T.function
def mm_t(
    A: T.Tensor((16, 32), "float16"),
    BT: T.Tensor((32, 16), "float16"),
    Out: T.Tensor((16, 16), "float32"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 32), "float16")
    b = T.alloc_shared((32, 16), "float16")
    for q in range(16):
        index = lane + 32 * q
        a[index // 32, index % 32] = A[index // 32, index % 32]
        b[index // 16, index % 16] = BT[index // 16, index % 16]
    T.cuda.cta_sync()
    ar = T.alloc_local((8,), "uint32")
    br = T.alloc_local((8,), "uint32")
    dr = T.alloc_local((8,), "float32")
    aw = a.view("uint32").rearrange(
        "(group row) (kc chunk word) -> kc (chunk group) row word", group=2, kc=2, chunk=2, word=4
    )
    bw = b.view("uint32").rearrange("(j row) (n word) -> n j row word", j=4, word=4)
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        ar.view(2, 4, 8, 4, layout=load_rep),
        aw,
        scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"],
        br.view(2, 4, 8, 4, layout=load_rep),
        bw,
        scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"],
        dr.view(1, 2, 16, 8, layout=d_layout),
        ar.view(1, 2, 16, 8, layout=a_layout),
        br.view(2, 2, 8, 8, layout=b_layout),
        T.float32(0),
        scope="warp",
    )
    for r in range(8):
        Out[lane // 4 + 8 * (r % 4 // 2), (r // 4) * 8 + 2 * (lane % 4) + r % 2] = dr[r]


@T.function
def roundtrip(A: T.Tensor((16, 16), "float16"), Out: T.Tensor((16, 16), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 16), "float16")
    c = T.alloc_shared((16, 16), "float16")
    for q in range(8):
        index = lane + 32 * q
        a[index // 16, index % 16] = A[index // 16, index % 16]
    T.cuda.cta_sync()
    ar = T.alloc_local((4,), "uint32")
    aw = a.view("uint32").rearrange(
        "(group row) (chunk word) -> (chunk group) row word", group=2, chunk=2, word=4
    )
    cw = c.view("uint32").rearrange(
        "(group row) (chunk word) -> (group chunk) row word", group=2, chunk=2, word=4
    )
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"],
        ar.view(4, 8, 4, layout=load4),
        aw,
        scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["stmatrix.sync.aligned.m8n8.x4.shared.b16"],
        cw,
        ar.view(4, 8, 4, layout=load4),
        scope="warp",
    )
    T.cuda.cta_sync()
    for q in range(8):
        index = lane + 32 * q
        Out[index // 16, index % 16] = c[index // 16, index % 16]


def _ints(*shape, seed=0):
    return torch.randint(-50, 50, shape, generator=torch.Generator().manual_seed(seed))


def test_seed_guide_through_the_pipeline():
    from tirx.examples.warp_matmul import warp_matmul

    exe = tirx.compile(warp_matmul, target="sim")
    a, b = _ints(16, 16).half(), _ints(8, 16, seed=1).half()
    out = torch.zeros(16, 8)
    exe(a, b, out)
    assert torch.equal(out, a.float() @ b.float().T)
    result = exe(a, b, out, trace=True, stdout=io.StringIO())
    assert [t.instruction.split(".")[0] for t in result.traces] == ["ldmatrix", "ldmatrix", "mma"]


def test_repeats_in_bf16():
    a, b = _ints(16, 32), _ints(16, 32, seed=1)
    out = torch.zeros(16, 16)
    tirx.compile(mm, target="sim")(a.bfloat16(), b.bfloat16(), out)
    assert torch.equal(out, (a @ b.T).float())


def test_ldmatrix_trans_feeds_a_k_major_b():
    a, b = _ints(16, 32), _ints(16, 32, seed=1)
    out = torch.zeros(16, 16)
    tirx.compile(mm_t, target="sim")(a.half(), b.T.contiguous().half(), out)
    assert torch.equal(out, (a @ b.T).float())


def test_ldmatrix_trans_then_stmatrix_transposes():
    a = torch.randn(16, 16, generator=torch.Generator().manual_seed(2)).half()
    out = torch.zeros(16, 16).half()
    tirx.compile(roundtrip, target="sim")(a, out)
    assert torch.equal(out, a.T)
