"""A tile scheduler for persistent kernels: which output tile a block computes next.

A *persistent* kernel launches one block per multiprocessor (``grid="sms"``) and lets each
block walk over the output tiles: block ``bx`` of a grid of ``G`` takes tiles ``bx``,
``bx + G``, ``bx + 2G``, ... until they run out. The blocks stay resident, so nothing is paid
per tile for launching a block, and a block can overlap one tile's epilogue with the next one's
loads.

*Which* tile the linear index ``t`` names decides how well L2 serves the kernel. ``G`` blocks
run at the same time on ``G`` consecutive indices; in row-major order those are one or two rows
of output tiles, which share their A rows but read every column of B. The *grouped* order
numbers the tiles band by band, a band being ``group`` tile rows: inside a band it goes down a
column of ``group`` tiles, then to the next column. The tiles running together then form a
near-square patch, ``group`` rows of A by ``G / group`` columns of B, and each A row and B
column fetched into L2 is reused by about ``group`` (resp. ``G / group``) blocks (CUTLASS's and
Triton's "grouped" or "swizzled" launch orders rest on the same observation). With 7 x 5 tiles
and ``group=3``::

    tile (m, n):  n=0  n=1  n=2  n=3  n=4
         m=0       0    3    6    9   12     band 0: rows 0..2
         m=1       1    4    7   10   13
         m=2       2    5    8   11   14
         m=3      15   18   21   24   27     band 1: rows 3..5
         m=4      16   19   22   25   28
         m=5      17   20   23   26   29
         m=6      30   31   32   33   34     band 2: the one row left

In a kernel::

    bx = T.cuda.block_idx("x")
    grid = T.cuda.grid_dim("x")                      # the multiprocessor count with grid="sms"
    for i in range(T.ceildiv(TILES - bx, grid)):     # the tiles of this block
        m, n = T.meta_var(grouped_tile(bx + i * grid, TILES_M, TILES_N, GROUP))
        ...                                          # compute output tile (m, n)

The loop counts the block's tiles rather than stepping by ``grid`` (``range(bx, TILES,
grid)``), because a tirx loop's step is a compile-time int and with ``grid="sms"`` the grid is
known only at launch. With a grid fixed at compile time both spellings are the same loop.
"""

from __future__ import annotations

from tirx import T

from .gemm_config import positive_int

__all__ = ["grouped_tile", "tile_order", "tiles_of_block"]


@T.macro
def grouped_tile(t, TILES_M, TILES_N, GROUP):
    """The output tile ``(m, n)`` that linear tile index ``t`` names in the grouped order of a
    ``TILES_M x TILES_N`` grid of tiles, bands of ``GROUP`` tile rows (the last band may be
    shorter). ``TILES_M``, ``TILES_N`` and ``GROUP`` are compile-time ints; ``t`` any int value
    in ``0 .. TILES_M * TILES_N - 1``. Bind the result with ``T.meta_var``."""
    first = t // (GROUP * TILES_N) * GROUP  # the band's first tile row
    rows = T.min(GROUP, TILES_M - first)  # the rows of this band
    k = t % (GROUP * TILES_N)  # the tile's place in its band, column by column
    m = first + k % rows
    n = k // rows
    return m, n


def tile_order(t: int, tiles_m: int, tiles_n: int, group: int) -> tuple[int, int]:
    """:func:`grouped_tile` in Python: the same arithmetic, for host code and tests.
    ``tiles_m``, ``tiles_n`` and ``group`` are positive ints, ``t`` an int in
    ``0 .. tiles_m * tiles_n - 1`` (numpy integers too; a float or a bool is a TypeError)."""
    tiles_m, tiles_n = positive_int("tiles_m", tiles_m), positive_int("tiles_n", tiles_n)
    group, t = positive_int("group", group), positive_int("t", t, 0)
    if t >= tiles_m * tiles_n:
        raise ValueError(f"tile {t} of {tiles_m} x {tiles_n} tiles (group {group})")
    first = t // (group * tiles_n) * group
    rows = min(group, tiles_m - first)
    k = t % (group * tiles_n)
    return first + k % rows, k // rows


def tiles_of_block(bx: int, tiles: int, grid: int) -> list[int]:
    """The linear tile indices block ``bx`` of ``grid`` takes, in order (the persistent loop):
    none once ``bx >= tiles``. ``grid`` is a positive int, ``tiles`` an int of at least 0 and
    ``bx`` one in ``0 .. grid - 1``."""
    bx, tiles = positive_int("bx", bx, 0), positive_int("tiles", tiles, 0)
    grid = positive_int("grid", grid)
    if bx >= grid:
        raise ValueError(f"bx must be a block of the grid, 0 .. {grid - 1}, got {bx}")
    return [bx + i * grid for i in range(max(0, -(-(tiles - bx) // grid)))]
