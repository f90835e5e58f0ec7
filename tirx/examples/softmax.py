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
from typing import NamedTuple

from tirx import T
from tirx.dtypes import dtype_of

from .gemm_config import positive_int

__all__ = [
    "make_softmax", "default_warps_per_row", "most_per_thread", "row_config", "RowKernel",
    "FORWARD", "CHUNK", "MOST_PER_THREAD", "MOST_COLS",
]  # fmt: skip

CHUNK = 4  # elements per 8-byte load
LOG2E = math.log2(math.e)
# A thread keeps its share of the row in registers, about two per element (one warp per row:
# 254 registers for 128 elements on sm_80 and sm_90); ptxas gives a thread at most 255, and
# 65536 / (threads of the block) under the kernel's launch bounds. More elements spill to
# local memory (ptxas, sm_90: 256 per thread, 784 spill stores; 65536 columns over 8 warps,
# 255 registers; 2**18 columns, 20 s in NVRTC), so make_softmax refuses them.
MOST_PER_THREAD = 128
MOST_COLS = 32768  # 128 per thread over 8 warps, 64 over 16, 32 over 32


def most_per_thread(threads: int) -> int:
    """The most row elements a thread of a block of ``threads`` keeps in its registers."""
    return min(MOST_PER_THREAD, 32768 // threads)


def default_warps_per_row(cols: int) -> int:
    """One warp for rows up to 2047 elements (up to 63 per lane); wider rows spread over
    2, 4 or 8 warps, about one per 1024 columns, a power of two that divides the row in
    128-column steps (at most 32 elements per thread up to 8192 columns, 128 at 32768)."""
    fit = max(1, cols // 1024)
    return next((w for w in (8, 4, 2) if w <= fit and cols % (32 * CHUNK * w) == 0), 1)


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

    Each thread keeps ``cols / (32 * W)`` elements of its row in registers: at most
    :func:`most_per_thread` of its block (128 in a block of up to 256 threads, 64 in one of
    512, 32 in one of 1024), so ``cols`` is at most :data:`MOST_COLS` (32768, over 8 warps).
    A wider share would spill to local memory; it is refused here, before the kernel is
    built, naming a ``warps`` or ``warps_per_row`` that fits.
    """
    rows, cols, dtype, warps, W = row_config(
        rows, cols, dtype, warps, warps_per_row, default_warps_per_row, FORWARD
    )
    if W == 1:
        return _warp_per_row(rows, cols, dtype, warps)
    return _block_per_row(rows, cols, dtype, W)


class RowKernel(NamedTuple):
    """How a row kernel's refusals name it: ``name`` (in "softmax takes ..."), what a thread
    keeps of a row, how rows are padded to a width its warps divide, and what takes rows wider
    than any of its configurations."""

    name: str
    keeps: str
    pad: str
    wider: str


FORWARD = RowKernel(
    "softmax", "elements of a row", "pad the rows to {n} with -inf",
    "(an online softmax); torch.softmax takes them",
)  # fmt: skip


def row_config(rows, cols, dtype, warps, warps_per_row, default, kernel: RowKernel):
    """``(rows, cols, dtype, warps, W)`` of a row kernel (the softmax and its backward) after
    every check of its arguments: positive ints, float16 or bfloat16 (spelled as
    :func:`tirx.dtypes.dtype_of` takes it, or a torch dtype), powers of two up to 32, ``cols``
    a multiple of ``128 * W``, and a thread's share of the row within its registers;
    ``default(cols)`` picks ``W`` when ``warps_per_row`` is None."""
    rows, cols = positive_int("rows", rows), positive_int("cols", cols)
    warps = positive_int("warps", warps)
    if warps_per_row is not None:
        warps_per_row = positive_int("warps_per_row", warps_per_row)
    if type(dtype).__module__ == "torch":  # torch.float16, named as tirx names a tensor's
        dtype = str(dtype).removeprefix("torch.")
    dtype = dtype_of(dtype).name  # "half" is float16
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"{kernel.name} takes float16 or bfloat16 rows, not {dtype}")
    W = default(cols) if warps_per_row is None else warps_per_row
    if W not in (1, 2, 4, 8, 16, 32) or warps not in (1, 2, 4, 8, 16, 32):
        raise ValueError("warps and warps_per_row must be powers of two up to 32")
    if cols % (32 * CHUNK * W):
        raise ValueError(f"cols = {cols} must be a positive multiple of {32 * CHUNK * W}")
    _check_registers(cols, W, warps, warps_per_row is not None, kernel)
    return rows, cols, dtype, warps, W


def _check_registers(cols: int, W: int, warps: int, chosen: bool, kernel: RowKernel) -> None:
    """A ValueError when a thread's share of the row is more than its registers hold."""
    threads = 32 * (W if W > 1 else warps)
    per = cols // (32 * W)
    most = most_per_thread(threads)
    if per <= most:
        return
    fits = [w for w in (2, 4, 8, 16, 32) if cols // (32 * w) <= most_per_thread(32 * w)]
    fixes = []
    if W == 1 and per <= MOST_PER_THREAD:
        most_warps = 1 << ((32768 // (32 * per)).bit_length() - 1)  # a power of two
        fixes.append(f"warps={most_warps} or fewer (rows per block)")
    fixes += [f"warps_per_row={w}" for w in fits if w != W and cols % (32 * CHUNK * w) == 0][:1]
    if fixes:
        fix = "use " + " or ".join(fixes)
    elif cols <= MOST_COLS:  # a width that more warps would hold, were it their multiple
        w = fits[0]
        step = 32 * CHUNK * w
        pad = kernel.pad.format(n=-(-cols // step) * step)
        fix = f"warps_per_row={w} holds rows of a multiple of {step} columns: {pad}"
    else:
        fix = (f"rows of more than {MOST_COLS} columns need a kernel that walks the row in "
               f"tiles {kernel.wider}")  # fmt: skip
    how = "chosen" if chosen else "the default for this width"
    raise ValueError(
        f"cols = {cols} puts {per} {kernel.keeps} in each thread's registers "
        f"(warps_per_row={W}, {how}; {threads} threads a block), more than the {most} this "
        f"kernel keeps there without spilling to local memory: {fix}"
    )


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
