"""A warp-specialized persistent kernel: one producer warpgroup feeds two consumer warpgroups
through a ring of shared-memory stages, and ``setmaxnreg`` moves registers from the producer to
the consumers. ``Out = A * A + 1`` over ``(M, N)`` float32 tiles of 64 x 64.

The shape is the one FlashAttention-3 and CUTLASS's warp-specialized Hopper GEMMs use, with
the matrix multiply left out:

* 384 threads: warpgroup 0 produces, warpgroups 1 and 2 consume. The launch reserves 168
  registers per thread (65536 / 384, rounded down to a multiple of 8: ``__launch_bounds__(384,
  1)``, which tirx writes for a kernel with setmaxnreg); the producer keeps 40
  (``setmaxnreg.dec``) and each consumer takes 232 (``setmaxnreg.inc``): 40 + 232 + 232 = 504 =
  3 x 168, every register of the block;
* ``grid="sms"``: one block per multiprocessor, each walking over the tiles in the grouped order
  of :mod:`tirx.examples.tile_scheduler`;
* ``STAGES`` stages, each with a ``full`` mbarrier (128 arrivals: every producer thread, after
  storing its part of the tile) and an ``empty`` one (256 arrivals: every consumer thread, after
  reading its part). The producer waits for ``empty`` before refilling a stage, a consumer for
  ``full`` before reading one; the parity of the n-th use of a stage is ``n % 2``.
"""

from tirx import T

from .gemm_config import positive_int
from .tile_scheduler import grouped_tile

__all__ = [
    "make_warp_specialized",
    "BM",
    "BN",
    "THREADS",
    "PRODUCER_REGISTERS",
    "CONSUMER_REGISTERS",
]

BM, BN = 64, 64
THREADS = 384  # three warpgroups
PRODUCER_REGISTERS, CONSUMER_REGISTERS = 40, 232


def make_warp_specialized(M: int, N: int, stages: int = 2, group: int = 8):
    """A kernel for fixed sizes (M and N multiples of 64). ``stages``: shared stages of one tile
    (16 KB each: 1 or 2, which fit in the 48 KB of static shared memory beside the rest);
    ``group``: tile rows per
    band of the grouped order (an int of at least 1)."""
    M, N = positive_int("M", M), positive_int("N", N)
    stages, group = positive_int("stages", stages), positive_int("group", group)
    if M % BM or N % BN:
        raise ValueError(f"M and N must be multiples of {BM} and {BN}, got {M}, {N}")
    if not 1 <= stages <= 2:
        raise ValueError(f"stages must be 1 or 2 (16 KB each), got {stages}")
    STAGES = stages
    TILES_M, TILES_N = M // BM, N // BN
    TILES, GROUP = TILES_M * TILES_N, min(group, TILES_M)
    PER_PRODUCER, PER_CONSUMER = BM * BN // 128, BM * BN // 256  # elements per thread per tile
    DEC, INC = "setmaxnreg.dec.sync.aligned.u32", "setmaxnreg.inc.sync.aligned.u32"
    INIT, ARRIVE = "mbarrier.init.shared::cta.b64", "mbarrier.arrive.shared::cta.b64"

    @T.function
    def warp_specialized(A: T.Tensor((M, N), "float32"), Out: T.Tensor((M, N), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid="sms", block=THREADS))
        tid = T.cuda.thread_idx("x")
        wg = T.cuda.warpgroup_id()
        bx = T.cuda.block_idx("x")
        grid = T.cuda.grid_dim("x")
        stage = T.alloc_shared((STAGES, BM, BN), "float32")
        full = T.alloc_shared((STAGES,), "uint64")
        empty = T.alloc_shared((STAGES,), "uint64")
        if tid == 0:
            for s in range(STAGES):
                T.ptx[INIT](full[s], 128)
                T.ptx[INIT](empty[s], 256)
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()
        count = T.ceildiv(TILES - bx, grid)  # the tiles of this block
        if wg == 0:  # the producer: global -> shared
            T.ptx[DEC](PRODUCER_REGISTERS)
            for i in range(count):
                m, n = T.meta_var(grouped_tile(bx + i * grid, TILES_M, TILES_N, GROUP))
                s = i % STAGES
                if i >= STAGES:  # the consumers are done with the stage's last tile
                    T.cuda.mbarrier_wait(empty[s], (i // STAGES - 1) % 2)
                for j in range(PER_PRODUCER):  # a loop: 40 registers hold one copy at a time
                    e = tid + 128 * j
                    stage[s, e // BN, e % BN] = A[m * BM + e // BN, n * BN + e % BN]
                T.ptx[ARRIVE](full[s])
        else:  # the consumers: shared -> registers -> global
            T.ptx[INC](CONSUMER_REGISTERS)
            c = tid - 128
            v = T.alloc_local((PER_CONSUMER,), "float32")
            for i in range(count):
                m, n = T.meta_var(grouped_tile(bx + i * grid, TILES_M, TILES_N, GROUP))
                s = i % STAGES
                T.cuda.mbarrier_wait(full[s], (i // STAGES) % 2)
                for j in T.unroll(PER_CONSUMER):
                    e = c + 256 * j
                    v[j] = stage[s, e // BN, e % BN]
                T.ptx[ARRIVE](empty[s])  # the stage may be refilled: its values are in v
                for j in T.unroll(PER_CONSUMER):
                    e = c + 256 * j
                    Out[m * BM + e // BN, n * BN + e % BN] = v[j] * v[j] + 1.0

    return warp_specialized
