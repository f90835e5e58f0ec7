"""Row-wise softmax: ``Y[r, :] = softmax(X[r, :])`` for float16 or bfloat16 ``X`` of shape
``(rows, cols)``, computed in float32.

A row belongs to one warp (``warps_per_row=1``: each block holds ``warps`` rows) or to a whole
block of ``warps_per_row`` warps (wide rows). Each thread loads its share of the row in 8-byte
chunks (four elements; the 32 chunks a warp loads in one step are 256 contiguous bytes, so
every load is coalesced) and keeps it in registers. The row's maximum and its sum of
exponentials are combined with ``T.cuda.warp_max`` / ``T.cuda.warp_sum`` (xor-shuffle
butterflies: every lane ends with the warp's value) and, across the warps of a block, with
``T.cuda.cta_max`` / ``T.cuda.cta_sum`` (the butterflies, then one slot per warp in shared
memory). The exponentials are computed twice (once for the sum, once for the output) instead of
being kept, which halves the registers a wide row needs.

``exp(x - m)`` is written ``exp2((x - m) * log2(e))``, the form the GPU's ``ex2`` unit computes;
the result is within one unit in the last place of the float64 softmax (tests/test_softmax.py,
both targets).
"""

import math

from tirx import T
from tirx.dtypes import dtype_of

from .gemm_config import positive_int

__all__ = ["make_softmax", "default_warps_per_row", "CHUNK"]

CHUNK = 4  # elements per 8-byte load
LOG2E = math.log2(math.e)


def default_warps_per_row(cols: int) -> int:
    """One warp for rows up to 1024 elements (32 per lane); wider rows spread over up to 8
    warps so that each thread keeps at most 32 elements."""
    return max(1, min(8, cols // 1024))


def make_softmax(
    rows: int, cols: int, dtype: str = "float16", warps: int = 4, warps_per_row: int | None = None
):
    """A softmax kernel for fixed ``(rows, cols)``.

    ``warps_per_row=1``: one warp per row, ``warps`` rows per block; ``warps_per_row=W > 1``:
    one row per block of ``W`` warps (``warps`` is then not used). ``cols`` must be a multiple
    of ``128 * W`` (four elements per thread and load step). ``None`` picks
    :func:`default_warps_per_row`. ``rows``, ``cols``, ``warps`` and ``warps_per_row`` are
    ints (numpy integers too; not bools): a wrong type is a TypeError, a wrong value a
    ValueError.
    """
    rows, cols = positive_int("rows", rows), positive_int("cols", cols)
    warps = positive_int("warps", warps)
    if warps_per_row is not None:
        warps_per_row = positive_int("warps_per_row", warps_per_row)
    dtype = dtype_of(dtype).name  # "half" is float16
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"softmax takes float16 or bfloat16 rows, not {dtype}")
    W = default_warps_per_row(cols) if warps_per_row is None else warps_per_row
    if W not in (1, 2, 4, 8, 16, 32) or warps not in (1, 2, 4, 8, 16, 32):
        raise ValueError("warps and warps_per_row must be powers of two up to 32")
    if cols % (32 * CHUNK * W):
        raise ValueError(f"cols = {cols} must be a positive multiple of {32 * CHUNK * W}")
    if W == 1:
        return _warp_per_row(rows, cols, dtype, warps)
    return _block_per_row(rows, cols, dtype, W)


def _warp_per_row(rows, cols, dtype, warps):
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


def _block_per_row(rows, cols, dtype, W):
    THREADS = 32 * W
    PER = cols // THREADS  # elements per thread
    STEPS = PER // CHUNK

    @T.function
    def softmax(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=rows, block=THREADS))
        tid = T.cuda.thread_idx("x")
        row = T.cuda.block_idx("x")
        max_slots = T.alloc_shared((W,), "float32")
        sum_slots = T.alloc_shared((W,), "float32")
        x = T.alloc_local((PER,), dtype)
        x_chunks = x.view("uint64")
        X_chunks = X.view("uint64")
        Y_chunks = Y.view("uint64")
        for j in T.unroll(STEPS):
            x_chunks[j] = X_chunks[row, j * THREADS + tid]
        m = T.cast(x[0], "float32")
        for i in T.unroll(PER):
            m = T.max(m, T.cast(x[i], "float32"))
        m = T.cuda.cta_max(m, W, max_slots.data)
        total = T.float32(0)
        for i in T.unroll(PER):
            total = total + T.exp2((T.cast(x[i], "float32") - m) * LOG2E)
        total = T.cuda.cta_sum(total, W, sum_slots.data)
        scale = T.float32(1) / total
        for i in T.unroll(PER):
            x[i] = T.cast(T.exp2((T.cast(x[i], "float32") - m) * LOG2E) * scale, dtype)
        for j in T.unroll(STEPS):
            Y_chunks[row, j * THREADS + tid] = x_chunks[j]

    return softmax
