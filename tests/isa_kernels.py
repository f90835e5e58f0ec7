"""One test kernel per mma form, in the seed's own structure (tirx/examples/warp_matmul.py):
A (16 x K) and B (8 x K, N-major) staged in shared memory, loaded with ldmatrix as 16-byte
rows of u32 words, one mma with a scalar C, each lane writing its D registers to ``Out``.

Only the dtypes, the instruction and (for the half-K forms) the word counts change: in words
every form's A tile is 16 x 8 or 16 x 4 and B's 8 x 8 or 8 x 4, whatever the element width.
``Out`` is (16, 8) of the accumulator dtype, or (16, 4) u32 words of two halves for ``.f16``.
"""

from __future__ import annotations

import functools

import numpy as np

import tirx
from tirx import T
from tirx.layout import S, TileLayout, laneid

ELEMENT = {"f16": "float16", "bf16": "bfloat16", "tf32": "float32", "s8": "int8", "u8": "uint8"}
ACCUMULATOR = {"f32": "float32", "s32": "int32", "f16": "uint32"}
NUMPY = {"float16": np.float16, "float32": np.float32, "int8": np.int8, "uint8": np.uint8,
         "int32": np.int32, "uint32": np.uint32}  # fmt: skip

A_LOAD = {8: TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)]),
          4: TileLayout(S[(2, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])}  # fmt: skip
B_LOAD = {8: TileLayout(S[(2, 8, 4) : (1, 4 @ laneid, 1 @ laneid)]),
          4: TileLayout(S[(1, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])}  # fmt: skip
A_MMA = {8: TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)]),
         4: TileLayout(S[(1, 1, 2, 8, 4) : (2, 2, 1, 4 @ laneid, 1 @ laneid)])}  # fmt: skip
B_MMA = {8: TileLayout(S[(1, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)]),
         4: TileLayout(S[(1, 1, 8, 4) : (1, 1, 4 @ laneid, 1 @ laneid)])}  # fmt: skip
D_MMA = {8: TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)]),
         4: TileLayout(S[(1, 1, 2, 8, 4) : (2, 2, 1, 4 @ laneid, 1 @ laneid)])}  # fmt: skip


def parts(text: str) -> dict:
    """shape k, A/B element types and accumulator type of an mma text."""
    c = tirx.instruction_contract(text)
    return dict(k=c.param("k"), ab=c.param("a_type"), b=c.param("b_type"),
                acc=c.param("acc_type"), satfinite=c.param("satfinite"), contract=c)  # fmt: skip


@functools.cache
def mma_kernel(text: str, d_layout=None, c_value=0):
    """The seed-structured kernel of ``text`` (``d_layout`` overrides D's layout)."""
    p = parts(text)
    k, contract = p["k"], p["contract"]
    a_words = contract.operand("A").atom[1]
    b_words = contract.operand("B").atom[1]
    d_words = contract.operand("D").atom[1]
    el, el_b, acc = ELEMENT[p["ab"]], ELEMENT[p["b"]], ACCUMULATOR[p["acc"]]
    nd = contract.operand("D").registers
    a_load, b_load = A_LOAD[a_words], B_LOAD[b_words]
    a_mma, b_mma = A_MMA[a_words], B_MMA[b_words]
    d_mma = d_layout or D_MMA[d_words]
    a_ld = f"ldmatrix.sync.aligned.m8n8.x{a_words // 2}.shared.b16"
    b_ld = f"ldmatrix.sync.aligned.m8n8.x{b_words // 4}.shared.b16"
    a_chunks, b_chunks = a_words // 4, b_words // 4
    a_count, b_count = a_words // 2, b_words // 4

    @T.function
    def mma_form(
        A: T.Tensor((16, k), el), B: T.Tensor((8, k), el_b), Out: T.Tensor((16, d_words), acc)
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        a = T.alloc_shared((16, k), el, layout="default", align=16)
        b = T.alloc_shared((8, k), el_b, layout="default", align=16)
        for q in range(k // 2):
            index = lane + 32 * q
            a[index // k, index % k] = A[index // k, index % k]
        for q in range(k // 4):
            index = lane + 32 * q
            b[index // k, index % k] = B[index // k, index % k]
        T.cuda.cta_sync()
        aw = a.view("uint32").rearrange(
            "(group row) (chunk word) -> (chunk group) row word", group=2, chunk=a_chunks, word=4
        )
        bw = b.view("uint32").rearrange("row (chunk word) -> chunk row word", chunk=b_chunks)
        ar = T.alloc_local((a_count,), "uint32", layout="default")
        br = T.alloc_local((b_count,), "uint32", layout="default")
        dr = T.alloc_local((nd,), acc, layout="default")
        T.cuda.tile.apply(T.ptx[a_ld], ar.view(a_count, 8, 4, layout=a_load), aw, scope="warp")
        T.cuda.tile.apply(T.ptx[b_ld], br.view(b_count, 8, 4, layout=b_load), bw, scope="warp")
        T.cuda.tile.apply(
            T.ptx[text],
            dr.view(1, 1, 16, d_words, layout=d_mma),
            ar.view(1, 1, 16, a_words, layout=a_mma),
            br.view(1, 1, 8, b_words, layout=b_mma),
            c_value,
            scope="warp",
        )
        for r in range(nd):
            if d_words == 8:
                Out[lane // 4 + 8 * (r // 2), 2 * (lane % 4) + r % 2] = dr[r]
            else:
                Out[lane // 4 + 8 * r, lane % 4] = dr[r]

    return mma_form


def inputs(text: str, seed: int = 0):
    """Integer-valued A (16 x K) and B (8 x K) for ``text`` (exact in every form's arithmetic)
    and a zeroed Out, as numpy arrays."""
    p = parts(text)
    k, ab, bt = p["k"], p["ab"], p["b"]
    rng = np.random.default_rng(seed)
    ranges = {"s8": (-128, 128), "u8": (0, 256)}
    a = rng.integers(*ranges.get(ab, (-4, 5)), (16, k))
    b = rng.integers(*ranges.get(bt, (-4, 5)), (8, k))
    if ab == "bf16":
        import torch

        ta = torch.tensor(a, dtype=torch.bfloat16)
        tb = torch.tensor(b, dtype=torch.bfloat16)
        return ta, tb, np.zeros(out_shape(text), NUMPY[ACCUMULATOR[p["acc"]]])
    da, db = NUMPY[ELEMENT[ab]], NUMPY[ELEMENT[bt]]
    return a.astype(da), b.astype(db), np.zeros(out_shape(text), NUMPY[ACCUMULATOR[p["acc"]]])


def out_shape(text: str):
    return (16, tirx.instruction_contract(text).operand("D").atom[1])


def reference(text: str, a, b, c_value=0) -> np.ndarray:
    """What D must be: exact integer A·Bᵀ + C in the accumulator's type (f16 accumulators as
    u32 words of two halves, as Out holds them)."""
    import torch

    p = parts(text)
    ta = torch.as_tensor(a).to(torch.float64 if p["acc"] != "s32" else torch.int64)
    tb = torch.as_tensor(b).to(ta.dtype)
    d = (ta @ tb.T + c_value).numpy()
    if p["acc"] == "s32":
        d = np.clip(d, -(2**31), 2**31 - 1) if p["satfinite"] else (d + 2**31) % 2**32 - 2**31
        return d.astype(np.int32)
    if p["acc"] == "f32":
        return d.astype(np.float32)
    return np.ascontiguousarray(d.astype(np.float16)).view(np.uint32)
