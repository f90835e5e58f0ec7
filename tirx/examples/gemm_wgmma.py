"""A GEMM on Hopper's warpgroup matrix instructions: ``Out = A @ B.T`` with ``wgmma.mma_async``.

A is ``(M, K)``, B is ``(N, K)`` (both K-major, as the pipelined mma.sync GEMM takes them),
float16 or bfloat16; Out is ``(M, N)`` float32 (f32 accumulation). M must be a multiple of 256,
N of 128 and K of 64, with at least ``stages - 2`` K tiles. sm_90a only (an H100 or H200).

The kernel, 256 x 128 x 64 blocks of 8 warps (two warpgroups):

* each warpgroup owns 128 rows of the block tile and keeps them in two 64 x 128 f32
  accumulators (64 registers each per thread); per 16-wide K slice it issues two
  ``wgmma.mma_async.m64n128k16``, both operands read by the tensor cores straight from shared
  memory through matrix descriptors: no ldmatrix and no operand registers, which is what lifts
  it past the mma.sync kernel at the board's power limit (``docs/performance.md``);
* the shared tiles are 128-byte swizzled (``shared_layout(..., "swizzle")``: a 64-element row
  is 128 bytes, its 16-byte chunk index XOR-ed with the row's low three bits), the layout the
  descriptors name with swizzle mode 1 and an 8-row stride of 1024 bytes;
* ``stages`` (4) shared stages of one K tile, filled by ``cp.async.cg`` (every thread copies
  twelve 16-byte chunks per K tile); a K step waits for its tile, fences the generic proxy's
  writes for the tensor cores' async proxy (``fence.proxy.async``), passes the one barrier of
  the step, and then refills the stage read two steps earlier: every warpgroup's
  ``wgmma.wait_group 1`` of the step before has retired those reads;
* or, with ``loads="tma"``, one thread fills each stage with two ``cp.async.bulk.tensor.2d``
  (A's 256 x 64 box and B's 128 x 64 box, swizzled by the copy engine), ``stages - 1`` K tiles
  ahead, and a ``full`` mbarrier per stage (armed with the stage's bytes) tells every thread it
  has landed; the refill of the stage read one step earlier follows a barrier after the step's
  ``wgmma.wait_group 1``. The tensor copies write through the async proxy, so no proxy fence;
* ``wgmma.commit_group`` per K step and ``wait_group 1``: one step's multiplies run while the
  next step's are issued.

The cp.async loop has no branch: past the last K tile the copies re-read it into stages nobody
reads.
"""

from tirx import T
from tirx.layout import S, TileLayout, laneid, wid_in_wg

from .gemm_config import positive_int, shared_layout

__all__ = ["make_gemm_wgmma", "BM", "BN", "BK", "THREADS", "LOADS", "accumulator_layout"]

BM, BN, BK, THREADS = 256, 128, 64, 256
GROUP_M = 8  # block rows that walk across N together (their A and B tiles stay in L2)


def accumulator_layout(n: int) -> TileLayout:
    """The ISA's m64nNk16 f32 accumulator fragment as a layout of a (64, n) view: thread
    ``32 w + lane`` of the warpgroup holds row ``16 w + 8 h + lane / 4`` and column
    ``8 j + 2 (lane % 4) + e`` in its register ``4 j + 2 h + e``."""
    return TileLayout(S[(4, 2, 8, n // 8, 4, 2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)])


LOADS = ("cp.async", "tma")


def make_gemm_wgmma(
    M: int, N: int, K: int, dtype: str = "float16", stages: int = 4, loads: str = "tma"
):
    """A kernel for fixed sizes (M a positive multiple of 256, N of 128, K of 64).

    ``loads``: ``"tma"`` (one thread issues two tensor copies per K tile, ``stages - 1`` ahead,
    each stage's arrival told by an mbarrier: the faster, 5-8 % on the H200) or ``"cp.async"``
    (every thread copies, ``stages - 2`` K tiles ahead)."""
    M, N, K = (positive_int(name, v) for name, v in zip("MNK", (M, N, K)))
    stages = positive_int("stages", stages)
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"dtype must be float16 or bfloat16, got {dtype!r}")
    if loads not in LOADS:
        raise ValueError(f"loads must be one of {LOADS}, got {loads!r}")
    TMA = loads == "tma"
    if not (2 if TMA else 3) <= stages <= 4:
        raise ValueError(
            f"stages must be {2 if TMA else 3} .. 4 (48 KB each of the 227 KB), got {stages}"
        )
    if M % BM or N % BN or K % BK:
        raise ValueError(f"M, N, K must be multiples of {BM}, {BN}, {BK}; got {M}, {N}, {K}")
    STAGES, AHEAD = stages, stages - 1 if TMA else stages - 2  # K tiles in flight
    if K // BK < AHEAD:
        raise ValueError(f"K = {K} has fewer than the {AHEAD} K tiles kept in flight")
    ab = "f16" if dtype == "float16" else "bf16"
    wgmma = f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.{ab}.{ab}"
    cp = "cp.async.cg.shared.global"
    tma = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
    STAGE_BYTES = (BM + BN) * BK * 2
    KT, NB_M, NB_N = K // BK, M // BM, N // BN
    TILES = NB_M * NB_N
    GROUP = min(GROUP_M, NB_M)
    SPAN = GROUP * NB_N
    LAST = (TILES - 1) // SPAN
    LAST_ROWS = NB_M - LAST * GROUP
    CPR = BK // 8  # 16-byte chunks per row of a K tile
    RSTEP = THREADS // CPR  # rows between a thread's chunks
    A_CH, B_CH = BM // RSTEP, BN // RSTEP  # chunks each thread copies per stage
    ACC = accumulator_layout(BN)
    A_SMEM = shared_layout(STAGES, BM, BK, "swizzle")
    B_SMEM = shared_layout(STAGES, BN, BK, "swizzle")

    @T.macro
    def fetch(a_q, b_q, A_q, B_q, st, bm, bn, kt, r0, c0):
        """cp.async of K tile kt into stage st: the thread's chunk c0 of rows r0 + RSTEP q."""
        T.cuda.tile.apply(
            T.ptx[cp],
            a_q[st, :, r0, c0 * 8 : c0 * 8 + 8],
            A_q[bm, :, r0, kt * BK + c0 * 8 : kt * BK + c0 * 8 + 8],
            scope="thread",
            chunk_bytes=16,
        )
        T.cuda.tile.apply(
            T.ptx[cp],
            b_q[st, :, r0, c0 * 8 : c0 * 8 + 8],
            B_q[bn, :, r0, kt * BK + c0 * 8 : kt * BK + c0 * 8 + 8],
            scope="thread",
            chunk_bytes=16,
        )

    @T.macro
    def fill(a_s, b_s, A, B, bars, st, bm, bn, kt):
        """One thread's tensor copies of K tile kt into stage st (the copy engine swizzles
        them as the stage's layout says): bars[st] expects the stage's bytes, and its phase
        completes when both boxes have landed."""
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[st], STAGE_BYTES)
        T.cuda.tile.apply(
            T.ptx[tma],
            a_s[st, :, :],
            A[:, :],
            box=(BM, BK),
            coords=(bm * BM, kt * BK),
            swizzle=3,
            mbar=bars[st],
            scope="thread",
        )
        T.cuda.tile.apply(
            T.ptx[tma],
            b_s[st, :, :],
            B[:, :],
            box=(BN, BK),
            coords=(bn * BN, kt * BK),
            swizzle=3,
            mbar=bars[st],
            scope="thread",
        )

    @T.macro
    def multiply(acc, a_s, b_s, s, row, k):
        """One wgmma.mma_async: rows row .. row + 63 of stage s times its B tile, K slice k."""
        T.cuda.tile.apply(
            T.ptx[wgmma],
            acc.view(64, BN, layout=ACC),
            a_s[s, row : row + 64, k * 16 : k * 16 + 16],
            b_s[s, :, k * 16 : k * 16 + 16],
            scope="warpgroup",
        )

    @T.macro
    def store(out_c, acc_c, r, c, w, lane):
        """A 64 x BN accumulator to Out[r:, c:], f32 pairs by 8-byte stores (a quad of lanes
        writes one 32-byte sector)."""
        for j in T.unroll(BN // 8):
            for h in T.unroll(2):
                out_c[r + 16 * w + lane // 4 + 8 * h, (c + 8 * j + 2 * (lane % 4)) // 2] = acc_c[
                    2 * j + h
                ]

    @T.function
    def gemm_wgmma(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K), dtype),
        Out: T.Tensor((M, N), "float32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=TILES, block=THREADS))
        tid = T.cuda.thread_idx("x")
        lane = T.cuda.lane_id()
        warp = T.cuda.warp_id()
        g = warp // 4  # the warpgroup: rows g * 128 .. g * 128 + 127 of the block tile
        w = warp % 4
        pid = T.cuda.block_idx("x")
        a_s = T.alloc_shared((STAGES, BM, BK), dtype, layout=A_SMEM, align=1024, scope="shared.dyn")
        b_s = T.alloc_shared((STAGES, BN, BK), dtype, layout=B_SMEM, align=1024, scope="shared.dyn")
        r0 = tid // CPR
        c0 = tid % CPR
        a_q = a_s.view(STAGES, A_CH, RSTEP, BK)
        b_q = b_s.view(STAGES, B_CH, RSTEP, BK)
        A_q = A.view(NB_M, A_CH, RSTEP, K)
        B_q = B.view(NB_N, B_CH, RSTEP, K)
        # the warpgroup's two 64 x BN accumulators (rows g * 128 and g * 128 + 64 on)
        acc0 = T.alloc_local((BN // 2,), "float32")
        acc1 = T.alloc_local((BN // 2,), "float32")
        for i in T.unroll(BN // 2):
            acc0[i] = T.float32(0)
            acc1[i] = T.float32(0)
        rows = (
            GROUP if LAST_ROWS == GROUP else T.if_then_else(pid // SPAN == LAST, LAST_ROWS, GROUP)
        )
        bm = (pid // SPAN) * GROUP + (pid % SPAN) % rows
        bn = (pid % SPAN) // rows
        # TMA: "stage st has landed", one mbarrier per stage
        bars = T.alloc_shared((STAGES,), "uint64") if TMA else None
        if TMA:
            if tid == 0:
                for st in range(STAGES):
                    T.ptx["mbarrier.init.shared::cta.b64"](bars[st], 1)
                T.ptx["fence.mbarrier_init.release.cluster"]()
            T.cuda.cta_sync()
            if tid == 0:  # K tiles 0 .. AHEAD - 1 in flight
                for st in range(AHEAD):
                    fill(a_s, b_s, A, B, bars, st, bm, bn, st)
        else:
            for st in range(AHEAD):  # K tiles 0 .. AHEAD - 1 in flight, one commit group each
                fetch(a_q, b_q, A_q, B_q, st, bm, bn, st, r0, c0)
                T.ptx["cp.async.commit_group"]()
        for kt in range(KT):
            s = kt % STAGES
            if TMA:  # the stage's phase kt // STAGES has completed: both boxes are there
                T.cuda.mbarrier_wait(bars[s], (kt // STAGES) % 2)
            else:
                # K tile kt has landed (at most AHEAD - 1 newer groups pending); its bytes were
                # written by the generic proxy and the tensor cores read through the async one
                T.ptx["cp.async.wait_group"](AHEAD - 1)
                T.ptx["fence.proxy.async.shared::cta"]()
                T.cuda.cta_sync()
                # the stage read two steps ago is free: every warpgroup waited for those
                # multiplies (wait_group 1 of the step before) before the barrier above
                kf = T.if_then_else(kt + AHEAD < KT, kt + AHEAD, KT - 1)
                fetch(a_q, b_q, A_q, B_q, (kt + AHEAD) % STAGES, bm, bn, kf, r0, c0)
                T.ptx["cp.async.commit_group"]()
            T.ptx["wgmma.fence.sync.aligned"]()
            for k in T.unroll(BK // 16):
                multiply(acc0, a_s, b_s, s, g * 128, k)
                multiply(acc1, a_s, b_s, s, g * 128 + 64, k)
            T.ptx["wgmma.commit_group.sync.aligned"]()
            T.ptx["wgmma.wait_group.sync.aligned"](1)
            if TMA:
                # every warpgroup's multiplies of the step before are done with their stage,
                # which one thread refills with K tile kt + AHEAD
                T.cuda.cta_sync()
                if tid == 0:
                    if kt + AHEAD < KT:
                        fill(a_s, b_s, A, B, bars, (kt + AHEAD) % STAGES, bm, bn, kt + AHEAD)
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        if not TMA:
            T.ptx["cp.async.wait_all"]()  # no copy outlives the block (the re-reads included)
        # the accumulators leave from registers: each quad of lanes writes a 32-byte sector
        out_c = Out.view("uint64")
        store(out_c, acc0.view("uint64"), bm * BM + g * 128, bn * BN, w, lane)
        store(out_c, acc1.view("uint64"), bm * BM + g * 128 + 64, bn * BN, w, lane)

    return gemm_wgmma
