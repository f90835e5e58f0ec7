"""The gradient of the row softmax: ``dX = Y * (dY - sum(dY * Y))`` per row, for float16 or
bfloat16 ``Y = softmax(X)`` and ``dY`` of shape ``(rows, cols)``, computed in float32.

It is laid out as the forward kernel (tirx/examples/softmax.py): a row belongs to one warp
(``warps_per_row=1``: each block holds ``warps`` rows) or to a whole block of
``warps_per_row`` warps (wide rows). Each thread loads its share of ``Y`` and ``dY`` in 8-byte
chunks of four elements (coalesced) and keeps it in registers; the row's dot product
``sum(dY * Y)`` is summed per thread and combined with ``T.cuda.warp_sum`` within a warp or
``T.cuda.cta_sum`` across the warps of a block (the butterflies, then one slot per warp in
shared memory, between two barriers); then every thread writes its elements of ``dX``.

Between the two passes every 32-bit word of the thread's Y and dY goes through
``T.cuda.__shfl_sync`` from its own lane, which gives the same bits back but which ptxas cannot
see through: it converts the 16-bit elements to float32 again for the second pass instead of
keeping the first pass's float32 copies of both, about one register per element where it took
two (a row of 2048 columns over one warp: 139 registers without the shuffles, 80 with them,
on sm_80 and sm_90; an empty ``asm`` fence does not do it, ptxas never sees one). So a thread
holds as many elements as the forward's (:func:`most_per_thread`: 200 to 235 registers for
128 in a block of 256 threads) and the backward takes every width the forward takes, with no
spills. The shuffles change no value: the result is the same bit for bit, and one warp per
row (widths up to 2048 by default) sums in the order it always did.
"""

from tirx import T

from .softmax import CHUNK, MOST_COLS, MOST_PER_THREAD, RowKernel, most_per_thread, row_config
from .softmax import default_warps_per_row as _forward_warps_per_row

__all__ = [
    "make_softmax_backward", "default_warps_per_row", "most_per_thread", "MOST_PER_THREAD",
    "MOST_COLS", "ONE_WARP_COLS",
]  # fmt: skip

# Up to this width a row belongs to one warp by default, as it did before rows spread over
# several warps: those widths keep their reduction order, and so their results bit for bit.
ONE_WARP_COLS = 2048


def default_warps_per_row(cols: int, warps: int = 4) -> int:
    """One warp for rows of up to :data:`ONE_WARP_COLS` (2048) columns (64 elements of Y and
    of dY per lane) where a block of ``warps`` such warps holds them in its registers; other
    rows as the forward's :func:`tirx.examples.softmax.default_warps_per_row`: 2, 4 or 8
    warps, about one per 1024 columns, a power of two that divides the row in 128-column
    steps."""
    if cols <= ONE_WARP_COLS and cols // 32 <= most_per_thread(32 * warps):
        return 1
    return _forward_warps_per_row(cols)


def make_softmax_backward(
    rows: int, cols: int, dtype: str = "float16", warps: int = 4, warps_per_row: int | None = None
):
    """A kernel ``softmax_backward(Y, dY, dX)`` for fixed ``(rows, cols)``.

    ``warps_per_row=1``: one warp per row, ``warps`` rows per block; ``warps_per_row=W > 1``:
    one row per block of ``W`` warps (``warps`` is then not used). ``cols`` must be a multiple
    of ``128 * W``. ``None`` picks :func:`default_warps_per_row` (the forward's, but one warp
    up to 2048 columns). ``dtype`` is float16 or bfloat16, spelled as
    :func:`tirx.dtypes.dtype_of` takes it ("float16", "half", ``T.float16``) or a torch dtype
    (``torch.float16``). ``rows``, ``cols``, ``warps`` and ``warps_per_row`` are ints (numpy
    integers too; not bools): a wrong type is a TypeError, a wrong value a ValueError.

    Each thread keeps ``cols / (32 * W)`` elements of Y and of dY in registers: at most
    :func:`most_per_thread` of its block (128 in a block of up to 256 threads, 64 in one of
    512, 32 in one of 1024), as the forward, so ``cols`` is at most :data:`MOST_COLS` (32768,
    over 8 warps). A wider share would spill to local memory; it is refused here, before the
    kernel is built, naming a ``warps`` or ``warps_per_row`` that fits.
    """
    rows, cols, dtype, warps, W = row_config(
        rows, cols, dtype, warps, warps_per_row, lambda c: default_warps_per_row(c, warps), BACKWARD
    )
    if W == 1:
        return _warp_per_row(rows, cols, dtype, warps)
    return _block_per_row(rows, cols, dtype, W)


BACKWARD = RowKernel(
    "softmax_backward", "elements of a row of Y and of dY",
    "pad the rows of Y and dY to {n} with zeros",
    "(reading Y and dY twice); torch's softmax backward takes them",
)  # fmt: skip


def _warp_per_row(rows, cols, dtype, warps):
    PER = cols // 32  # elements per lane
    STEPS = PER // CHUNK  # 8-byte loads per lane
    WORDS = PER // 2  # 32-bit registers per lane, for each of Y and dY
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
        y_words = y.view("uint32")
        g_words = g.view("uint32")
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
            for k in T.unroll(WORDS):  # the same bits, converted again below
                y_words[k] = T.cuda.__shfl_sync(0xFFFFFFFF, y_words[k], lane)
                g_words[k] = T.cuda.__shfl_sync(0xFFFFFFFF, g_words[k], lane)
            for i in T.unroll(PER):
                g[i] = T.cast(T.cast(y[i], "float32") * (T.cast(g[i], "float32") - dot), dtype)
            for j in T.unroll(STEPS):
                dX_chunks[row, j * 32 + lane] = g_chunks[j]

    return softmax_backward


def _block_per_row(rows, cols, dtype, W):
    THREADS = 32 * W
    PER = cols // THREADS  # elements per thread
    STEPS = PER // CHUNK
    WORDS = PER // 2

    @T.function
    def softmax_backward(
        Y: T.Tensor((rows, cols), dtype),
        dY: T.Tensor((rows, cols), dtype),
        dX: T.Tensor((rows, cols), dtype),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=rows, block=THREADS))
        tid = T.cuda.thread_idx("x")
        lane = T.cuda.lane_id()
        row = T.cuda.block_idx("x")
        dot_slots = T.alloc_shared((W,), "float32")
        y = T.alloc_local((PER,), dtype)
        g = T.alloc_local((PER,), dtype)
        y_chunks = y.view("uint64")
        g_chunks = g.view("uint64")
        y_words = y.view("uint32")
        g_words = g.view("uint32")
        Y_chunks = Y.view("uint64")
        dY_chunks = dY.view("uint64")
        dX_chunks = dX.view("uint64")
        for j in T.unroll(STEPS):
            y_chunks[j] = Y_chunks[row, j * THREADS + tid]
            g_chunks[j] = dY_chunks[row, j * THREADS + tid]
        dot = T.float32(0)
        for i in T.unroll(PER):
            dot = dot + T.cast(g[i], "float32") * T.cast(y[i], "float32")
        dot = T.cuda.cta_sum(dot, W, dot_slots.data)  # its barriers order the slots
        for k in T.unroll(WORDS):  # the same bits, converted again below
            y_words[k] = T.cuda.__shfl_sync(0xFFFFFFFF, y_words[k], lane)
            g_words[k] = T.cuda.__shfl_sync(0xFFFFFFFF, g_words[k], lane)
        for i in T.unroll(PER):
            g[i] = T.cast(T.cast(y[i], "float32") * (T.cast(g[i], "float32") - dot), dtype)
        for j in T.unroll(STEPS):
            dX_chunks[row, j * THREADS + tid] = g_chunks[j]

    return softmax_backward
