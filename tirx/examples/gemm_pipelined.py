"""A pipelined GEMM with warp matrix instructions: ``Out = A @ B.T``, near mma.sync's limit.

A is ``(M, K)``, B is ``(N, K)`` (N-major, as mma.sync wants it), both float16 or bfloat16;
Out is ``(M, N)`` float32 (f32 accumulation). M, N and K must be multiples of the block tile.

The kernel (the SM80 "multistage" structure); ``DEFAULT``, the fastest configuration measured
on the H200, is 256x128x64 with 8 warps of 64x64 and 3 stages (``GemmConfig()`` itself is the
128x128x64 block of 4 warps that notebook 07 builds up to first):

* each block computes a ``bm x bn`` tile with ``warps_m x warps_n`` warps; each warp a
  ``wtm x wtn`` tile of ``mr x nr`` mma.sync.m16n8k16 instructions per 16-wide K slice;
  blocks are numbered in groups of ``group_m`` block rows so that neighbouring blocks share
  their A and B tiles in L2;
* ``stages`` shared-memory stages of one ``bk`` (32 or 64) deep K tile: ``cp.async.cg`` copies
  16-byte chunks from global to shared memory without passing through registers, one commit
  group per K tile, ``stages - 1`` tiles in flight while the warps multiply;
* the shared tiles are swizzled (``smem="swizzle"``: the 16-byte chunk index XOR-ed with bits
  of the row, CUTLASS's swizzle for 64- or 128-byte rows) or padded (16 bytes per row)
  so that an ldmatrix reads its 8 rows from 8 different groups of 4 banks;
* fragments come in with ldmatrix.x4 (A and B) and are double-buffered in registers: the next
  K slice's fragments are loaded before the current slice's mma.sync are issued, and the first
  slice of the next stage is loaded right after the one barrier per K tile;
* the accumulators leave with 8-byte stores: each quad of lanes writes one full 32-byte sector;
* ``persistent``: the grid is as many blocks as fit on the GPU at once, each taking every
  grid-th tile; the last ``stages - 1`` K steps of a tile fetch the next tile's first K tiles,
  so no block waits for a pipeline to fill between tiles.

The loop body has no branch (copies past the last K tile re-read it into a dead stage), so
the CUDA compiler schedules loads, address arithmetic and mma.sync across the whole K tile.
"""

from tirx import T
from tirx.layout import S, TileLayout

from .gemm_config import (
    DEFAULT,
    GemmConfig,
    check_sizes,
    fragment_layouts,
    multiprocessors,
    positive_int,
    shared_layout,
)

__all__ = ["GemmConfig", "make_gemm_pipelined", "DEFAULT", "shared_layout", "multiprocessors"]


def make_gemm_pipelined(
    M: int,
    N: int,
    K: int,
    dtype: str = "float16",
    cfg: GemmConfig | None = None,
    sms: int | None = None,
    out_dtype: str = "float32",
):
    """A kernel for fixed sizes (M a multiple of ``cfg.bm``, N of ``cfg.bn``, K of ``cfg.bk``).

    ``cfg``: by default :data:`DEFAULT` (256x128x64), or ``GemmConfig()`` (128x128x64) where M
    is a multiple of 128 but not of 256. ``sms``: the multiprocessors a persistent kernel
    (``cfg.persistent``) is sized for (it launches ``sms * cfg.persistent`` blocks, at most one
    per tile), a positive int; by default :func:`multiprocessors`. ``out_dtype``:
    ``"float32"``, or the inputs' dtype (the f32 sums rounded to nearest once, as cuBLAS's
    half-precision output). M, N and K are positive ints (numpy integers too), ``cfg`` a
    :class:`GemmConfig`: anything else is refused (ValueError, or TypeError for the wrong
    type) before a kernel is built.
    """
    M, N, K = (positive_int(name, v) for name, v in zip("MNK", (M, N, K)))
    if cfg is None:
        cfg = DEFAULT if M % DEFAULT.bm == 0 else GemmConfig()
    M, N, K = check_sizes(M, N, K, dtype, cfg)
    if sms is not None:
        sms = positive_int("sms", sms)
    if out_dtype not in ("float32", dtype):
        raise ValueError(f"out_dtype must be float32 or {dtype} (the inputs'), got {out_dtype!r}")
    OUT16 = out_dtype != "float32"
    ab = "f16" if dtype == "float16" else "bf16"
    mma = f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32"
    ldsm = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
    cp = "cp.async.cg.shared.global"
    ACC, A_MMA, B_MMA, A_LOAD, B_LOAD = fragment_layouts(cfg.mr, cfg.nr)
    BM, BN, BK, WN = cfg.bm, cfg.bn, cfg.bk, cfg.warps_n
    WTM, WTN, MR, NR = cfg.wtm, cfg.wtn, cfg.mr, cfg.nr
    THREADS, STAGES, DBUF = cfg.threads, cfg.stages, cfg.double_buffer
    CPR = BK // 8  # 16-byte chunks per row of a K tile
    A_CH = BM * CPR // THREADS  # chunks each thread copies per stage
    B_CH = BN * CPR // THREADS
    RSTEP = THREADS // CPR  # rows between a thread's chunks
    KT = K // BK
    KP = BK // 32  # pairs of 16-wide slices per stage
    NB_M, NB_N = M // BM, N // BN
    TILES = NB_M * NB_N
    GRID = min(TILES, (sms or multiprocessors()) * cfg.persistent) if cfg.persistent else TILES
    ROUNDS = -(-TILES // GRID)  # tiles per block, at most
    PERSISTENT = ROUNDS > 1
    BULK = cfg.bulk_store
    OWN = BULK and PERSISTENT  # a staging buffer beside the stages
    STAGED = (cfg.stage_output and not PERSISTENT) or BULK
    # the staged epilogue: rows of the block tile per round through A's stages (a padded
    # pitch of BN + 8 elements: the fragments' stores hit 8 different bank groups), 16-byte
    # chunks out, each thread CPT of them per round, RSTEP_O rows apart
    ob = 2 if OUT16 else 4
    cap = STAGES * BM * BK * 2 // ob  # out_dtype elements A's stages hold
    ROWS_O = max(
        (
            r
            for r in range(WTM, BM + 1, WTM)
            if BM % r == 0 and r * (BN + 8) <= cap and (r <= THREADS or not BULK)
        ),
        default=0,
    )
    if OWN:
        ROWS_O = cfg.bulk_rows(ob)
    CH = 16 // ob  # elements per 16-byte chunk
    CPR_O = BN // CH  # chunks per row
    CPT = ROWS_O * CPR_O // THREADS if ROWS_O else 0
    RSTEP_O = THREADS // CPR_O if CPR_O <= THREADS else 0
    if STAGED and not BULK and (not ROWS_O or ROWS_O * CPR_O % THREADS or not RSTEP_O):
        STAGED = False  # the tile does not split into whole rounds: store from registers
    C_LAYOUT = TileLayout(S[(max(ROWS_O, 1), BN) : (BN + 8, 1)])
    WPR = max(ROWS_O // WTM, 1)  # warp rows per round
    GROUP = min(cfg.group_m, NB_M)
    SPAN = GROUP * NB_N  # tiles of one raster group
    LAST = (TILES - 1) // SPAN  # the last raster group, which may have fewer block rows
    LAST_ROWS = NB_M - LAST * GROUP
    NEXT = KT - STAGES + 1  # from this K step on, the copies fetch the next tile's K tiles
    A_SMEM = shared_layout(STAGES, BM, BK, cfg.smem)
    B_SMEM = shared_layout(STAGES, BN, BK, cfg.smem)
    where = "shared.dyn" if cfg.shared_bytes(2, ob) > 48 * 1024 else "shared"
    bulk = "cp.async.bulk.global.shared::cta.bulk_group"
    A_PAT = "(rep group row) (chunk word) -> rep (chunk group) row word"
    B_PAT = "(rep nt row) (chunk word) -> rep (nt chunk) row word"

    # The kernel's three repeated steps, expanded where they are called (T.macro: each call
    # is the tile operations below, with the call's values):
    @T.macro
    def load_slice(fa, fb, a_w, b_w, s, w, wm, wn):
        """ldmatrix.x4 of one 16-wide K slice of stage s (words w .. w+7 of each row): the
        warp's MR A fragments and NR B fragments (two 8-column n tiles per ldmatrix)."""
        T.cuda.tile.apply(
            T.ptx[ldsm],
            fa.view(MR, 4, 8, 4, layout=A_LOAD),
            a_w[s, wm * WTM : wm * WTM + WTM, w : w + 8].rearrange(A_PAT, rep=MR, group=2, chunk=2),
        )
        T.cuda.tile.apply(
            T.ptx[ldsm],
            fb.view(NR // 2, 4, 8, 4, layout=B_LOAD),
            b_w[s, wn * WTN : wn * WTN + WTN, w : w + 8].rearrange(
                B_PAT, rep=NR // 2, nt=2, chunk=2
            ),
        )

    @T.macro
    def fetch(a_q, b_q, A_q, B_q, st, tm, tn, kt, r0, c0):
        """cp.async of K tile kt of block tile (tm, tn) into stage st: the thread's 16-byte
        chunk c0 of rows r0 + RSTEP * q (q the repeat axis: A_CH and B_CH copies)."""
        T.cuda.tile.apply(
            T.ptx[cp],
            a_q[st, :, r0, c0 * 8 : c0 * 8 + 8],
            A_q[tm, :, r0, kt * BK + c0 * 8 : kt * BK + c0 * 8 + 8],
            scope="thread",
            chunk_bytes=16,
        )
        T.cuda.tile.apply(
            T.ptx[cp],
            b_q[st, :, r0, c0 * 8 : c0 * 8 + 8],
            B_q[tn, :, r0, kt * BK + c0 * 8 : kt * BK + c0 * 8 + 8],
            scope="thread",
            chunk_bytes=16,
        )

    @T.macro
    def multiply(acc, fa, fb):
        """mma.sync of one K slice: MR x NR m16n8k16 instructions into the accumulators."""
        T.cuda.tile.apply(
            T.ptx[mma],
            acc.view(MR, NR, 16, 8, layout=ACC),
            fa.view(MR, 1, 16, 8, layout=A_MMA),
            fb.view(NR, 1, 8, 8, layout=B_MMA),
            acc.view(MR, NR, 16, 8, layout=ACC),
        )

    @T.function
    def gemm_pipelined(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K), dtype),
        Out: T.Tensor((M, N), out_dtype),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=THREADS))
        tid = T.cuda.thread_idx("x")
        lane = T.cuda.lane_id()
        warp = T.cuda.warp_id()
        wm = warp // WN
        wn = warp % WN
        pid = T.cuda.block_idx("x")
        a_s = T.alloc_shared((STAGES, BM, BK), dtype, layout=A_SMEM, align=128, scope=where)
        b_s = T.alloc_shared((STAGES, BN, BK), dtype, layout=B_SMEM, align=128, scope=where)
        # where the staged epilogue puts the tile: A's stages, or a buffer of its own
        o_s = (
            T.alloc_shared((ROWS_O * (BN + 8),), out_dtype, align=128, scope=where) if OWN else a_s
        )
        a_w = a_s.view("uint32")
        b_w = b_s.view("uint32")
        # the copy: thread tid moves chunk c0 of rows r0 + RSTEP * q (q < A_CH, B_CH) of a K
        # tile, one tile op each with q as its repeat axis (constant offsets between repeats)
        r0 = tid // CPR
        c0 = tid % CPR
        a_q = a_s.view(STAGES, A_CH, RSTEP, BK)
        b_q = b_s.view(STAGES, B_CH, RSTEP, BK)
        A_q = A.view(NB_M, A_CH, RSTEP, K)
        B_q = B.view(NB_N, B_CH, RSTEP, K)
        fa0 = T.alloc_local((4 * MR,), "uint32")
        fa1 = T.alloc_local((4 * MR,), "uint32")
        fb0 = T.alloc_local((2 * NR,), "uint32")
        fb1 = T.alloc_local((2 * NR,), "uint32")
        acc = T.alloc_local((4 * MR * NR,), "float32")
        pair = T.alloc_local((2,), out_dtype)  # two rounded sums, stored as one word
        for i in T.unroll(4 * MR * NR):
            acc[i] = T.float32(0)
        # grouped raster: GROUP block rows walk across N together (their tiles stay in L2).
        # The block's first tile is the pid-th; a persistent block then takes every GRID-th,
        # so the blocks running at one time work on GRID consecutive tiles.
        rows = (
            GROUP if LAST_ROWS == GROUP else T.if_then_else(pid // SPAN == LAST, LAST_ROWS, GROUP)
        )
        bm = (pid // SPAN) * GROUP + (pid % SPAN) % rows
        bn = (pid % SPAN) // rows
        # prologue: K tiles 0 .. STAGES-2 of the first tile in flight, one commit group each
        for st in range(STAGES - 1):
            fetch(a_q, b_q, A_q, B_q, st, bm, bn, st, r0, c0)
            T.ptx["cp.async.commit_group"]()
        T.ptx["cp.async.wait_group"](STAGES - 2)
        T.cuda.cta_sync()
        if DBUF:
            load_slice(fa0, fb0, a_w, b_w, 0, 0, wm, wn)
        for j in range(ROUNDS):  # the block's tiles
            tile = pid + j * GRID
            if tile < TILES:
                # the tile after this one (this one again after the block's last): the last
                # STAGES - 1 K steps fetch its first K tiles, so the pipeline never drains
                # between tiles. After the last tile they re-read this one's first K tiles
                # into stages nobody reads: the loop needs no branch.
                nt = T.if_then_else(tile + GRID < TILES, tile + GRID, tile)
                rows_n = (
                    GROUP
                    if LAST_ROWS == GROUP
                    else T.if_then_else(nt // SPAN == LAST, LAST_ROWS, GROUP)
                )
                nbm = (nt // SPAN) * GROUP + (nt % SPAN) % rows_n
                nbn = (nt % SPAN) // rows_n
                for kt in range(KT):
                    s = (j * KT + kt) % STAGES  # the stage this K step reads
                    ws = (j * KT + kt + STAGES - 1) % STAGES  # the one read one step ago
                    s1 = (j * KT + kt + 1) % STAGES
                    for kp in T.unroll(KP):  # slices 2 kp (fa0/fb0) and 2 kp + 1 (fa1/fb1)
                        if DBUF:  # slice 2kp+1 now; slice 2kp was loaded one step earlier
                            load_slice(fa1, fb1, a_w, b_w, s, 16 * kp + 8, wm, wn)
                        else:
                            load_slice(fa0, fb0, a_w, b_w, s, 16 * kp, wm, wn)
                        if kp == 0:
                            # K tile kt + STAGES - 1 of this tile, or past its end the next tile's,
                            # into the stage read one step ago: every warp passed the barrier
                            # after its last read of it
                            cbm = T.if_then_else(kt >= NEXT, nbm, bm) if PERSISTENT else bm
                            cbn = T.if_then_else(kt >= NEXT, nbn, bn) if PERSISTENT else bn
                            ck = T.if_then_else(kt >= NEXT, kt - NEXT, kt + STAGES - 1)
                            fetch(a_q, b_q, A_q, B_q, ws, cbm, cbn, ck, r0, c0)
                            T.ptx["cp.async.commit_group"]()
                        multiply(acc, fa0, fb0)
                        if not DBUF:
                            load_slice(fa1, fb1, a_w, b_w, s, 16 * kp + 8, wm, wn)
                        if kp == KP - 1:
                            # the next K step's tile has landed (all but the newest STAGES - 2
                            # groups are done); after the block's last one this waits for a
                            # re-read, harmlessly
                            T.ptx["cp.async.wait_group"](STAGES - 2)
                            T.cuda.cta_sync()
                            if DBUF:
                                load_slice(fa0, fb0, a_w, b_w, s1, 0, wm, wn)
                        elif DBUF:  # slice 2kp+2 of this stage
                            load_slice(fa0, fb0, a_w, b_w, s, 16 * kp + 16, wm, wn)
                        multiply(acc, fa1, fb1)
                if STAGED:
                    # the epilogue through shared memory: round by round, the warps of
                    # ROWS_O rows put their fragments into A's stages (free once every copy,
                    # the re-reads included, has landed), then every thread stores 16-byte
                    # chunks: each warp writes whole rows, full 128-byte lines
                    if not OWN:  # every copy, the re-reads included, has landed
                        T.ptx["cp.async.wait_all"]()
                        T.cuda.cta_sync()
                    c_s = T.decl_tensor(o_s, (ROWS_O, BN), out_dtype, C_LAYOUT)
                    c_w = c_s.view("uint32" if OUT16 else "uint64")
                    acc_c = acc.view("uint64")
                    o_c = tid % CPR_O
                    o_r = tid // CPR_O
                    for rd in range(BM // ROWS_O):
                        if BULK:  # the last round's copies (this thread's) have read c_s
                            T.ptx["cp.async.bulk.wait_group.read"](0)
                            T.cuda.cta_sync()
                        if wm // WPR == rd:
                            for mi in T.unroll(MR):
                                for ni in T.unroll(NR):
                                    for h in T.unroll(2):
                                        lr = (wm % WPR) * WTM + mi * 16 + lane // 4 + 8 * h
                                        lc = wn * WTN + ni * 8 + 2 * (lane % 4)
                                        if OUT16:
                                            pair[0] = T.cast(
                                                acc[4 * NR * mi + 4 * ni + 2 * h], out_dtype
                                            )
                                            pair[1] = T.cast(
                                                acc[4 * NR * mi + 4 * ni + 2 * h + 1], out_dtype
                                            )
                                            c_w[lr, lc // 2] = pair.view("uint32")[0]
                                        else:
                                            c_w[lr, lc // 2] = acc_c[2 * NR * mi + 2 * ni + h]
                        if BULK:
                            # the copy engine reads c_s through the async proxy: order the
                            # threads' stores before it, then one row per thread leaves
                            T.ptx["fence.proxy.async.shared::cta"]()
                            T.cuda.cta_sync()
                            if tid < ROWS_O:
                                T.ptx[bulk](
                                    Out[bm * BM + rd * ROWS_O + tid, bn * BN],
                                    c_s[tid, 0],
                                    BN * ob,
                                )
                            T.ptx["cp.async.bulk.commit_group"]()
                        else:
                            T.cuda.cta_sync()
                            for q in T.unroll(CPT):
                                orow = o_r + q * RSTEP_O
                                for v in T.vectorized(CH):
                                    Out[bm * BM + rd * ROWS_O + orow, bn * BN + o_c * CH + v] = c_s[
                                        orow, o_c * CH + v
                                    ]
                            T.cuda.cta_sync()  # the next round writes where this one read
                else:
                    # the epilogue from registers: each quad of lanes writes one full 32-byte
                    # sector (8-byte stores of f32 pairs, 4-byte ones of 16-bit pairs), while
                    # the next tile's first K tiles are in flight
                    out_c = Out.view("uint32" if OUT16 else "uint64")
                    acc_c = acc.view("uint64")
                    for mi in T.unroll(MR):
                        for ni in T.unroll(NR):
                            for h in T.unroll(2):
                                row = bm * BM + wm * WTM + mi * 16 + lane // 4 + 8 * h
                                col = bn * BN + wn * WTN + ni * 8 + 2 * (lane % 4)
                                if OUT16:
                                    pair[0] = T.cast(acc[4 * NR * mi + 4 * ni + 2 * h], out_dtype)
                                    pair[1] = T.cast(
                                        acc[4 * NR * mi + 4 * ni + 2 * h + 1], out_dtype
                                    )
                                    out_c[row, col // 2] = pair.view("uint32")[0]
                                else:
                                    out_c[row, col // 2] = acc_c[2 * NR * mi + 2 * ni + h]
                if PERSISTENT:  # the next tile's accumulators start at zero
                    for i in T.unroll(4 * MR * NR):
                        acc[i] = T.float32(0)
                    bm = nbm
                    bn = nbn
        T.ptx["cp.async.wait_all"]()  # no copy outlives the block
        if BULK:  # nor a bulk store's reads of its shared memory
            T.ptx["cp.async.bulk.wait_group.read"](0)

    return gemm_pipelined
