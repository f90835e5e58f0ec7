"""The gradient of the row softmax: ``dX = Y * (dY - sum(dY * Y))`` per row, for float16 or
bfloat16 ``Y = softmax(X)`` and ``dY`` of shape ``(rows, cols)``, computed in float32.

It is laid out as the forward kernel (tirx/examples/softmax.py) with one warp per row: each
lane loads its share of ``Y`` and ``dY`` in 8-byte chunks of four elements (coalesced), the
row's dot product ``sum(dY * Y)`` is summed per lane and combined with ``T.cuda.warp_sum``,
and every lane writes its elements of ``dX``.
"""

from tirx import T

from .gemm_config import positive_int
from .softmax import CHUNK

__all__ = ["make_softmax_backward"]


def make_softmax_backward(rows: int, cols: int, dtype: str = "float16", warps: int = 4):
    """A kernel ``softmax_backward(Y, dY, dX)`` for fixed ``(rows, cols)``; ``cols`` a
    positive multiple of 128, ``warps`` rows per block."""
    rows, cols = positive_int("rows", rows), positive_int("cols", cols)
    warps = positive_int("warps", warps)
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"softmax_backward takes float16 or bfloat16 rows, not {dtype}")
    if warps not in (1, 2, 4, 8, 16, 32):
        raise ValueError("warps must be a power of two up to 32")
    if cols % (32 * CHUNK):
        raise ValueError(f"cols = {cols} must be a positive multiple of {32 * CHUNK}")
    PER = cols // 32  # elements per lane
    STEPS = PER // CHUNK
    BLOCKS = (rows + warps - 1) // warps

    @T.function
    def softmax_backward(
        Y: T.Tensor((rows, cols), dtype),
        dY: T.Tensor((rows, cols), dtype),
        dX: T.Tensor((rows, cols), dtype),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=BLOCKS, block=32 * warps))
        lane = T.cuda.lane_id()
        row = T.cuda.block_idx("x") * warps + T.cuda.warp_id()
        y = T.alloc_local((PER,), dtype)
        g = T.alloc_local((PER,), dtype)
        y_chunks = y.view("uint64")
        g_chunks = g.view("uint64")
        Y_chunks = Y.view("uint64")
        dY_chunks = dY.view("uint64")
        dX_chunks = dX.view("uint64")
        if row < rows:  # the same for every lane of a warp: the shuffle sees whole warps
            for j in T.unroll(STEPS):
                y_chunks[j] = Y_chunks[row, j * 32 + lane]
                g_chunks[j] = dY_chunks[row, j * 32 + lane]
            dot = T.float32(0)
            for i in T.unroll(PER):
                dot = dot + T.cast(g[i], "float32") * T.cast(y[i], "float32")
            dot = T.cuda.warp_sum(dot)
            for i in T.unroll(PER):
                g[i] = T.cast(T.cast(y[i], "float32") * (T.cast(g[i], "float32") - dot), dtype)
            for j in T.unroll(STEPS):
                dX_chunks[row, j * 32 + lane] = g_chunks[j]

    return softmax_backward
