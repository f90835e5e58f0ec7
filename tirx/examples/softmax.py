"""Row-wise softmax: ``Y[r, :] = softmax(X[r, :])`` for float16 or bfloat16 ``X`` of shape
``(rows, cols)``, computed in float32.

One warp owns a row. Each lane loads its share of the row in 8-byte chunks (four elements; the
warp's 32 chunks of one step are 256 contiguous bytes, so every load is coalesced) and keeps it
in registers; the row's maximum and the sum of exponentials are combined across the warp with
``T.cuda.warp_max`` and ``T.cuda.warp_sum`` (xor-shuffle butterflies, so every lane ends with
the whole row's value); the exponentials are computed twice (once for the sum, once for the
output) instead of being kept, so a 4096-wide row needs 64 registers of data per lane, not 128.

``exp(x - m)`` is written ``exp2((x - m) * log2(e))``, the form the GPU's ``ex2`` unit computes
directly; the result is within the float16 rounding of ``torch.softmax`` (checked by
tests/test_softmax.py on both targets).
"""

import math

from tirx import T

__all__ = ["make_softmax", "CHUNK"]

CHUNK = 4  # elements per 8-byte load
LOG2E = math.log2(math.e)


def make_softmax(rows: int, cols: int, dtype: str = "float16", warps: int = 4):
    """A softmax kernel for fixed ``(rows, cols)``: ``cols`` a multiple of 128 (32 lanes ×
    four elements), ``warps`` rows per block of ``32 * warps`` threads."""
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"softmax takes float16 or bfloat16 rows, not {dtype}")
    if cols % (32 * CHUNK) or cols <= 0:
        raise ValueError(f"cols = {cols} must be a positive multiple of {32 * CHUNK}")
    if rows <= 0 or warps not in (1, 2, 4, 8, 16, 32):
        raise ValueError("rows must be positive and warps a power of two up to 32")
    PER = cols // 32  # elements per lane
    STEPS = PER // CHUNK  # 8-byte loads per lane
    BLOCKS = (rows + warps - 1) // warps

    @T.function
    def softmax(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=BLOCKS, block=32 * warps))
        lane = T.cuda.lane_id()
        row = T.cuda.block_idx("x") * warps + T.cuda.warp_id()
        x = T.alloc_local((PER,), dtype)
        x_chunks = x.view("uint64")
        X_chunks = X.view("uint64")
        Y_chunks = Y.view("uint64")
        if row < rows:  # the same for every lane of a warp: the shuffles see whole warps
            for j in T.unroll(STEPS):
                x_chunks[j] = X_chunks[row, j * 32 + lane]
            m = T.cast(x[0], "float32")
            for i in T.unroll(PER):
                m = T.max(m, T.cast(x[i], "float32"))
            m = T.cuda.warp_max(m)
            total = T.float32(0)
            for i in T.unroll(PER):
                total = total + T.exp2((T.cast(x[i], "float32") - m) * LOG2E)
            total = T.cuda.warp_sum(total)
            scale = T.float32(1) / total
            for i in T.unroll(PER):
                x[i] = T.cast(T.exp2((T.cast(x[i], "float32") - m) * LOG2E) * scale, dtype)
            for j in T.unroll(STEPS):
                Y_chunks[row, j * 32 + lane] = x_chunks[j]

    return softmax
