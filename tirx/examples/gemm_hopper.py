"""A warp-specialized persistent GEMM for Hopper: ``Out = A @ B.T`` with TMA loads, wgmma and a
TMA store, the structure of CUTLASS's "cooperative" warp-specialized kernels.

A is ``(M, K)``, B is ``(N, K)``, both K-major (as :mod:`tirx.examples.gemm_wgmma` takes them),
float16 or bfloat16; Out is ``(M, N)`` float32, float16 or bfloat16 (f32 accumulation). With
``cluster=2`` M must be a multiple of ``2 * BM``; N of ``bn``, K of ``BK``. sm_90a only. The
same kernel with e4m3 operands and per-tensor scales is :mod:`tirx.examples.gemm_fp8`.

The kernel, one block of 384 threads per multiprocessor (``grid="sms"``), block tiles of
``BM x bn x BK`` (128 x 128 x 64 or 128 x 256 x 64):

* **Warp specialization.** Warpgroup 0 is the producer: it gives registers back
  (``setmaxnreg.dec`` to 40) and one of its threads issues every tensor copy. Warpgroups 1 and
  2 are the consumers (``setmaxnreg.inc`` to 232): consumer ``g`` owns rows ``64 g .. 64 g +
  63`` of the block tile, a ``64 x bn`` f32 accumulator (``bn / 2`` registers per thread).
  40 + 232 + 232 = 504 = 3 x 168, the registers ``__launch_bounds__(384, 1)`` reserves.
* **Persistent, grouped.** Block ``bx`` of ``G`` computes tiles ``bx, bx + G, ...`` in the
  grouped order of :mod:`tirx.examples.tile_scheduler`; producer and consumers walk the same
  list, and the stage ring runs on from one tile into the next (no fill and drain per tile).
* **The stage ring.** ``stages`` shared stages of one K tile (A's ``BM x BK`` box and B's
  ``bn x BK`` box, 128-byte swizzled by the copy engine, the layout the wgmma descriptors name).
  Per stage a ``full`` mbarrier (one arrival: the producer's ``arrive.expect_tx`` with the
  stage's bytes; the copies' complete-tx finishes the phase) and an ``empty`` one (one arrival
  per consumer warp). The n-th use of a stage waits for parity ``n % 2`` of ``full``; the
  producer refills it after parity ``(n - 1) % 2`` of ``empty``.
* **The consumers' main loop.** Wait for ``full``, ``wgmma.fence``, ``BK / 16`` (fp8:
  ``BK / 32``) ``wgmma.mma_async.m64nNk16`` with both operands read from shared memory through
  matrix descriptors, ``commit_group``, then ``wait_group 1``: the multiplies of the K tile
  before are done, so that tile's stage is released (lane 0 of each warp arrives on ``empty``)
  while this tile's multiplies still run. After the last K tile, ``wait_group 0`` and the
  last release.
* **The epilogue.** Each consumer converts its accumulator to the output type and writes it,
  a pair of adjacent columns per store (8 or 4 bytes), into its own shared staging tile, laid
  out as the 128-byte swizzled image of ``64 x CW`` boxes (``CW`` = 128 bytes of output
  elements), executes ``fence.proxy.async.shared::cta``
  (its generic stores must be visible to the copy engine), and the warpgroup meets at an
  mbarrier of 128 arrivals (its arrive and parity wait are the release/acquire meeting of one
  warpgroup that a named barrier, ``T.cuda.warpgroup_sync``, also gives). Then one
  thread issues the tensor stores (``cp.async.bulk.tensor.2d.global.shared::cta.bulk_group``,
  one per box) and ``commit_group``. The stores drain while the next tile's multiplies run;
  before the staging tile is written again, that thread waits ``wait_group.read 0`` (the copy
  engine has read the tile) and the warpgroup meets again. The first meeting of a tile is
  the barrier's even phase, the second its odd one, so the parities are constants.
* **Clusters** (``cluster=2``): the two blocks of a cluster compute vertically adjacent tiles
  ``(2 c, n)`` and ``(2 c + 1, n)`` of cluster tile ``c`` (the grouped order over pairs of tile
  rows), which need the same B tile. Each block's producer loads its own A box and *half* of
  the B box with ``.multicast::cluster`` (mask ``0b11``): both halves land in both blocks,
  each block's ``full`` barrier counting all the stage's bytes. A stage is now written by both
  producers into both blocks, so it may be refilled only when the consumers of *both* blocks
  have released it: every consumer warp arrives on its own block's ``empty`` barrier and
  (``.release.cluster``) on the peer's (``mapa`` gives the peer's address), ``empty`` counts
  16 arrivals, and the producers wait on it with ``.acquire.cluster``. A cluster barrier after
  the barriers' init (no copy or remote arrive before the peer's barriers exist) and one at
  the end (no block exits while its peer may still arrive on its barriers) complete it.

Shared memory: ``stages x (BM + bn) x BK x 2`` bytes of stages, 2 x 64 x bn x (output bytes)
of staging tiles and the barriers; :func:`shared_bytes` computes it and the sizes the 227 KB
of an sm_90 block allow are checked.
"""

from tirx import T
from tirx.layout import ComposeLayout, S, TileLayout

from .gemm_config import positive_int
from .gemm_wgmma import accumulator_layout
from .tile_scheduler import grouped_tile

__all__ = [
    "make_gemm_hopper",
    "build",
    "check_arguments",
    "shared_bytes",
    "BM",
    "BK",
    "THREADS",
    "PRODUCER_REGISTERS",
    "CONSUMER_REGISTERS",
    "SHARED_LIMIT",
]

BM, BK, THREADS = 128, 64, 384
PRODUCER_REGISTERS, CONSUMER_REGISTERS = 40, 232
SHARED_LIMIT = 227 * 1024  # dynamic shared memory of one sm_90 block
BARRIER_BYTES = 128  # room kept for the mbarriers (2 per stage and 2 more, 16-byte aligned)
GROUP_M = 8

_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3fn": 1}
_PTX_TYPE = {"float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3"}


def _swizzled(shape, elem_bytes: int):
    """The 128-byte swizzled image of boxes whose rows are 128 bytes (the last axis of
    ``shape``), as the copy engine writes and reads them (swizzle mode 3)."""
    per_16 = (16 // elem_bytes).bit_length() - 1  # log2 of the elements in 16 bytes
    return ComposeLayout(per_16, 3, 3, TileLayout(S[shape]))


def shared_bytes(bn: int, stages: int, in_bytes: int, out_bytes: int, bk: int = BK) -> int:
    """Shared bytes of the stages and the two staging tiles (the mbarriers take a few dozen
    more: :data:`BARRIER_BYTES` are kept for them)."""
    return stages * (BM + bn) * bk * in_bytes + 2 * 64 * bn * out_bytes


def check_arguments(
    M, N, K, dtype, out_dtype, stages, cluster, bn, bk, dtypes, out_dtypes, group=GROUP_M
):
    """ValueError unless the sizes, types, stages, cluster, tile width and group make a kernel
    whose shared memory fits a block (``dtypes``, ``out_dtypes``: the types the caller offers);
    TypeError where an integer argument is not an int (a bool, a float, a string, None).
    Returns ``(M, N, K, stages, cluster, bn, group)`` as Python ints (numpy integers pass)."""
    if dtype not in dtypes:
        raise ValueError(f"dtype must be one of {dtypes}, got {dtype!r}")
    if out_dtype not in out_dtypes:
        raise ValueError(f"out_dtype must be one of {out_dtypes}, got {out_dtype!r}")
    cluster = positive_int("cluster", cluster)
    if cluster not in (1, 2):
        raise ValueError(f"cluster must be 1 or 2 (blocks sharing the B tile), got {cluster!r}")
    bn = positive_int("bn", bn)
    if bn not in (128, 256):
        raise ValueError(f"bn must be 128 or 256, got {bn!r}")
    stages = positive_int("stages", stages, 2)
    M, N, K = (positive_int(name, v) for name, v in zip("MNK", (M, N, K)))
    group = positive_int("group", group)
    if M % (BM * cluster) or N % bn or K % bk:
        raise ValueError(
            f"M, N, K must be multiples of {BM * cluster}, {bn}, {bk} "
            f"(cluster={cluster}, bn={bn}); got {M}, {N}, {K}"
        )
    in_bytes, out_bytes = _BYTES[dtype], _BYTES[out_dtype]
    need = shared_bytes(bn, stages, in_bytes, out_bytes, bk) + BARRIER_BYTES
    if need > SHARED_LIMIT:
        # only the changes that make it fit: fewer stages (2 at least), a narrower tile
        room = SHARED_LIMIT - BARRIER_BYTES
        most = (room - shared_bytes(bn, 0, in_bytes, out_bytes, bk)) // ((BM + bn) * bk * in_bytes)
        fixes = [f"at most {most} stages"] if most >= 2 else []
        if bn == 256 and shared_bytes(128, stages, in_bytes, out_bytes, bk) <= room:
            fixes.append("bn=128")
        raise ValueError(
            f"{stages} stages of bn={bn} and a {out_dtype} staging tile need {need} bytes of "
            f"shared memory, more than the {SHARED_LIMIT} of a block"
            + (f": use {' or '.join(fixes)}" if fixes else "")
        )
    return M, N, K, stages, cluster, bn, group


def build(M, N, K, dtype, out_dtype, stages, cluster, bn, group, scaled: bool):
    """The kernel (both operands ``dtype``, wgmma K step 32 bytes), shared by
    :func:`make_gemm_hopper` and :func:`tirx.examples.gemm_fp8.make_gemm_fp8`. ``scaled``:
    the kernel takes two more float32 tensors of one element, ``scale_a`` and ``scale_b``,
    whose product multiplies the accumulator in the epilogue."""
    IN_BYTES, OUT_BYTES = _BYTES[dtype], _BYTES[out_dtype]
    BKK = 128 // IN_BYTES  # a K tile is one 128-byte row: 64 f16 / bf16, 128 e4m3
    KS = 32 // IN_BYTES  # the wgmma K step: 16 f16 / bf16, 32 e4m3
    BN, STAGES, CLUSTER = bn, stages, cluster
    CW = 128 // OUT_BYTES  # output columns per store box (128 bytes)
    NBOX = BN // CW
    PAIR = "uint64" if OUT_BYTES == 4 else "uint32"  # two output elements
    KT = K // BKK
    TILES_M, TILES_N = M // BM, N // BN
    CTILES_M = TILES_M // CLUSTER  # cluster tiles: CLUSTER vertically adjacent block tiles
    CTILES = CTILES_M * TILES_N
    GROUP = min(group, CTILES_M)  # a band of more rows than there are is all of them
    HALF = BN // CLUSTER  # rows of the B box each block of the cluster loads
    STAGE_BYTES = (BM + BN) * BKK * IN_BYTES
    EMPTY = 8 * CLUSTER  # arrivals that free a stage: every consumer warp of the cluster
    ab = _PTX_TYPE[dtype]
    wgmma = f"wgmma.mma_async.sync.aligned.m64n{BN}k{KS}.f32.{ab}.{ab}"
    LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
    MCAST = (
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster"
    )
    STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
    DEC, INC = "setmaxnreg.dec.sync.aligned.u32", "setmaxnreg.inc.sync.aligned.u32"
    INIT = "mbarrier.init.shared::cta.b64"
    ARRIVE = "mbarrier.arrive.shared::cta.b64"
    ARRIVE_CLUSTER = "mbarrier.arrive.release.cluster.shared::cluster.b64"
    ACC = accumulator_layout(BN)
    A_SMEM = _swizzled((STAGES, BM, BKK), IN_BYTES)
    B_SMEM = _swizzled((STAGES, BN, BKK), IN_BYTES)
    O_SMEM = _swizzled((2, NBOX, 64, CW), OUT_BYTES)
    launch = (
        T.cuda.LaunchConfig(grid="sms", block=THREADS, cluster=(CLUSTER, 1, 1))
        if CLUSTER > 1
        else T.cuda.LaunchConfig(grid="sms", block=THREADS)
    )

    @T.macro
    def multiply(acc, a_s, b_s, s, row, k):
        """One wgmma.mma_async: rows row .. row + 63 of stage s times its B tile, K step k."""
        T.cuda.tile.apply(
            T.ptx[wgmma],
            acc.view(64, BN, layout=ACC),
            a_s[s, row : row + 64, k * KS : k * KS + KS],
            b_s[s, :, k * KS : k * KS + KS],
            scope="warpgroup",
        )

    @T.macro
    def release(empty, s, lane, peer, rank):
        """Lane 0 of a consumer warp frees stage s: the warp's multiplies that read it are
        done (its wait_group). In a cluster also on the peer block's barrier, whose producer
        multicasts into this block: ``.release.cluster`` (a fence at GPU scope in the SASS,
        ``MEMBAR.ALL.GPU``) for that one only."""
        if lane == 0:
            T.ptx[ARRIVE](empty[s])
            if CLUSTER > 1:
                T.ptx["mapa.shared::cluster.u32"](peer[0], empty[s], rank ^ 1)
                T.ptx[ARRIVE_CLUSTER](peer[0])

    @T.macro
    def meet(bar, parity):
        """The consumer warpgroup's 128 threads meet at mbarrier bar (phase of that parity)."""
        T.ptx[ARRIVE](bar)
        T.cuda.mbarrier_wait(bar, parity)

    @T.macro
    def body(A, B, Out, scale_a, scale_b):
        tid = T.cuda.thread_idx("x")
        wg = T.cuda.warpgroup_id()
        lane = T.cuda.lane_id()
        a_s = T.alloc_shared(
            (STAGES, BM, BKK), dtype, layout=A_SMEM, align=1024, scope="shared.dyn"
        )
        b_s = T.alloc_shared(
            (STAGES, BN, BKK), dtype, layout=B_SMEM, align=1024, scope="shared.dyn"
        )
        o_s = T.alloc_shared(
            (2, NBOX, 64, CW), out_dtype, layout=O_SMEM, align=1024, scope="shared.dyn"
        )
        full = T.alloc_shared((STAGES,), "uint64")
        empty = T.alloc_shared((STAGES,), "uint64")
        staged = T.alloc_shared((2,), "uint64")  # one per consumer warpgroup: the epilogue
        if CLUSTER > 1:
            rank = T.cuda.mov_sreg(32, "cluster_ctarank")
            cid = T.cuda.cluster_id("x")
            clusters = T.cuda.grid_dim("x") // CLUSTER
        else:
            rank = 0
            cid = T.cuda.block_idx("x")
            clusters = T.cuda.grid_dim("x")
        if tid == 0:
            for s in range(STAGES):
                T.ptx[INIT](full[s], 1)
                T.ptx[INIT](empty[s], EMPTY)
            for g in range(2):
                T.ptx[INIT](staged[g], 128)
            T.ptx["fence.mbarrier_init.release.cluster"]()
        if CLUSTER > 1:
            T.cuda.cluster_sync()  # the peer's barriers exist before any copy or arrive
        else:
            T.cuda.cta_sync()
        count = T.ceildiv(CTILES - cid, clusters)  # the cluster tiles of this block
        if wg == 0:  # the producer
            T.ptx[DEC](PRODUCER_REGISTERS)
            if tid == 0:
                for i in range(count):
                    mc, n = T.meta_var(grouped_tile(cid + i * clusters, CTILES_M, TILES_N, GROUP))
                    m = mc * CLUSTER + rank
                    for kt in range(KT):
                        it = i * KT + kt  # the ring's step
                        s = it % STAGES
                        if it >= STAGES:  # every consumer (of the cluster) released the stage
                            if CLUSTER > 1:
                                T.cuda.mbarrier_wait_acquire_cluster(
                                    empty[s], (it // STAGES - 1) % 2
                                )
                            else:
                                T.cuda.mbarrier_wait(empty[s], (it // STAGES - 1) % 2)
                        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](full[s], STAGE_BYTES)
                        T.cuda.tile.apply(
                            T.ptx[LOAD],
                            a_s[s, :, :],
                            A[:, :],
                            box=(BM, BKK),
                            coords=(m * BM, kt * BKK),
                            swizzle=3,
                            mbar=full[s],
                            scope="thread",
                        )
                        if CLUSTER > 1:  # this block's half of B, into both blocks
                            T.cuda.tile.apply(
                                T.ptx[MCAST],
                                b_s[s, rank * HALF : rank * HALF + HALF, :],
                                B[:, :],
                                box=(HALF, BKK),
                                coords=(n * BN + rank * HALF, kt * BKK),
                                swizzle=3,
                                mbar=full[s],
                                cta_mask=0b11,
                                scope="thread",
                            )
                        else:
                            T.cuda.tile.apply(
                                T.ptx[LOAD],
                                b_s[s, :, :],
                                B[:, :],
                                box=(BN, BKK),
                                coords=(n * BN, kt * BKK),
                                swizzle=3,
                                mbar=full[s],
                                scope="thread",
                            )
        else:  # the consumers
            T.ptx[INC](CONSUMER_REGISTERS)
            g = wg - 1  # rows 64 g .. 64 g + 63 of the block tile
            c = tid - 128 * wg  # the thread in its warpgroup
            w = c // 32
            peer = T.alloc_local((1,), "uint32")
            pair = T.alloc_local((2,), out_dtype)
            pair_w = pair.view(PAIR)
            o_w = o_s.view(PAIR)
            acc = T.alloc_local((BN // 2,), "float32")
            factor = scale_a[0] * scale_b[0] if scaled else None
            for i in range(count):
                mc, n = T.meta_var(grouped_tile(cid + i * clusters, CTILES_M, TILES_N, GROUP))
                m = mc * CLUSTER + rank
                for j in T.unroll(BN // 2):
                    acc[j] = T.float32(0)
                for kt in range(KT):
                    it = i * KT + kt
                    s = it % STAGES
                    T.cuda.mbarrier_wait(full[s], (it // STAGES) % 2)
                    T.ptx["wgmma.fence.sync.aligned"]()
                    for k in T.unroll(BKK // KS):
                        multiply(acc, a_s, b_s, s, g * 64, k)
                    T.ptx["wgmma.commit_group.sync.aligned"]()
                    T.ptx["wgmma.wait_group.sync.aligned"](1)
                    if kt > 0:  # the K tile before is multiplied: its stage is free
                        release(empty, (it + STAGES - 1) % STAGES, lane, peer, rank)
                T.ptx["wgmma.wait_group.sync.aligned"](0)
                release(empty, (i * KT + KT - 1) % STAGES, lane, peer, rank)
                # the epilogue: the staging tile's last stores have been read
                if c == 0:
                    T.ptx["cp.async.bulk.wait_group.read"](0)
                meet(staged[g], 0)
                # each thread's two adjacent columns as one 2 x (output bytes) store
                for j in T.unroll(BN // 8):
                    for h in T.unroll(2):
                        for e in T.unroll(2):
                            v = acc[4 * j + 2 * h + e]
                            pair[e] = T.cast(v * factor if scaled else v, out_dtype)
                        col = 8 * j + 2 * (lane % 4)
                        o_w[g, col // CW, 16 * w + 8 * h + lane // 4, (col % CW) // 2] = pair_w[0]
                T.ptx["fence.proxy.async.shared::cta"]()  # the copy engine reads them
                meet(staged[g], 1)
                if c == 0:
                    for b in range(NBOX):
                        T.cuda.tile.apply(
                            T.ptx[STORE],
                            Out[:, :],
                            o_s[g, b, :, :],
                            box=(64, CW),
                            coords=(m * BM + g * 64, n * BN + b * CW),
                            swizzle=3,
                            scope="thread",
                        )
                    T.ptx["cp.async.bulk.commit_group"]()
            if c == 0:
                T.ptx["cp.async.bulk.wait_group"](0)  # the stores are done before the exit
        if CLUSTER > 1:
            T.cuda.cluster_sync()  # no block exits while its peer may arrive on its barriers

    if scaled:

        @T.function
        def gemm_fp8(
            A: T.Tensor((M, K), dtype),
            B: T.Tensor((N, K), dtype),
            scale_a: T.Tensor((1,), "float32"),
            scale_b: T.Tensor((1,), "float32"),
            Out: T.Tensor((M, N), out_dtype),
        ):
            T.device_entry(launch=launch)
            body(A, B, Out, scale_a, scale_b)

        return gemm_fp8

    @T.function
    def gemm_hopper(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K), dtype),
        Out: T.Tensor((M, N), out_dtype),
    ):
        T.device_entry(launch=launch)
        body(A, B, Out, None, None)

    return gemm_hopper


def make_gemm_hopper(
    M: int,
    N: int,
    K: int,
    dtype: str = "float16",
    out_dtype: str = "float32",
    stages: int | None = None,
    cluster: int = 1,
    bn: int | None = None,
    group: int = GROUP_M,
):
    """A kernel for fixed sizes. ``stages``: shared stages of one K tile (default: 4 with
    ``bn=128``, 3 with ``bn=256``); ``cluster``: 1, or 2 for clusters of two blocks that share
    each B tile through multicast; ``bn``: the block tile's columns, 128 or 256 (default 256
    for a 16-bit output, 128 for float32, whose staging tile is twice as large); ``group``:
    tile rows (pairs of rows in a cluster) per band of the grouped order, an int of at least 1
    (more than the tile rows: one band). M, N, K, ``stages``, ``cluster``, ``bn`` and ``group``
    are ints (numpy integers too; not bools): a wrong type is a TypeError, a wrong value a
    ValueError naming the argument, raised before a kernel is built."""
    if bn is None:
        bn = 128 if out_dtype == "float32" else 256
    if stages is None:
        stages = 4 if bn == 128 else 3
    M, N, K, stages, cluster, bn, group = check_arguments(
        M, N, K, dtype, out_dtype, stages, cluster, bn, BK,
        ("float16", "bfloat16"), ("float32", "float16", "bfloat16"), group,
    )  # fmt: skip
    return build(M, N, K, dtype, out_dtype, stages, cluster, bn, group, scaled=False)
