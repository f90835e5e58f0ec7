"""FlashAttention's forward pass on Hopper's ``wgmma.mma_async`` (sm_90a), FlashAttention-3's
structure, for one shape class: ``O = softmax(Q Kᵀ · scale + mask) V`` and the per-row
log-sum-exp ``LSE``. The arguments are those of :mod:`tirx.examples.attention_mma` (``Q``,
``O``: ``(batch, heads, seq_q, head_dim)``; ``K``, ``V``: ``(batch, kv_heads, seq_k,
head_dim)``; ``LSE``: ``(batch, heads, seq_q)`` float32; ``scale`` a run-time float32). The
walk-through is docs/attention.md, "The Hopper kernel".

One block of 384 threads (three warpgroups) owns ``BM = 128`` query rows of one head (with
``cfg.consumers = 3``, head dim 64 only: 512 threads, four warpgroups, 192 rows):

* warpgroup 0 produces: it gives registers back (``setmaxnreg.dec`` to 24) and one of its
  threads loads the block's Q tile once and streams the head's K and V tiles of ``block_n``
  keys with TMA (``cp.async.bulk.tensor.4d``, the copy engine writing 128-byte swizzled
  tiles; a head dimension of 128 is two boxes of 64 columns) into a ring of ``stages``
  shared stages. Each stage has a ``full`` mbarrier (one arrival, armed with the stage's
  bytes by ``expect_tx``) and an ``empty`` one (an arrival from every consumer thread); the
  producer waits on ``empty`` with parity ``(n - 1) % 2`` before the ``n``-th refill of a
  stage;
* warpgroups 1 and 2 consume (``setmaxnreg.inc`` to 240: 24 + 240 + 240 = 504 = 3 x 168,
  the 64K registers of the block; three consumers get 160 each, 24 + 3 x 160 <= 4 x 128),
  each 64 query rows: they wait on ``full`` with parity
  ``n % 2``, compute ``S = Q Kᵀ`` with ``wgmma.mma_async`` m64n``block_n``k16, both operands
  from shared memory through descriptors, f32 accumulation; the online softmax runs on the
  accumulator fragment (row maximum and sum over the quad of lanes that holds a row, two
  ``shfl.xor``; ``exp2`` with ``scale · log2(e)`` folded in; O rescaled); P is rounded to the
  inputs' type into a buffer with S's accumulator layout, whose 32-bit view *is* the rs
  form's register A operand of ``O += P V`` (wgmma m64n``head_dim``k16, V read from its
  key-major tile as an MN-major B). ``wgmma.wait_group 0`` before the accumulators are read;
  then every consumer thread arrives on the stage's ``empty`` barrier;
* causal attention (top-left aligned, as torch's ``is_causal``) skips the key tiles right of
  the block's last row and masks the tiles that cross a warpgroup's diagonal; rows and keys
  past the sequence ends are zeros in the boxes (TMA fills outside the tensor with zeros):
  keys past ``seq_k`` are masked, rows past ``seq_q`` are computed and not stored. Any
  sequence lengths and grouped-query attention.

With ``cfg.pingpong`` the two consumer warpgroups take turns to issue their ``S = Q Kᵀ``
(FlashAttention-3's warp scheduler barrier, here two mbarriers ``turn`` of 128 arrivals, as
CUTLASS's ordered sequence barrier): warpgroup ``c`` waits for its turn, issues its
multiplies and hands the turn to the other before it waits for them, so one warpgroup's
softmax runs while the other's ``Q Kᵀ`` occupies the tensor cores (warpgroup 2 hands the
first turn to warpgroup 1 before its loop). The turns order the issue; no data passes.

With ``cfg.overlap`` each consumer pipelines its own two products (FlashAttention-3's
intra-warpgroup overlap): step ``j`` issues tile ``j``'s ``Q Kᵀ`` and tile ``j - 1``'s ``P V``
as two commit groups, ``wait_group 1`` lets the scores land while ``P V`` runs on, the softmax
of tile ``j`` keeps its exponentials in S's f32 registers, and only after ``wait_group 0`` are
O rescaled, P rounded and tile ``j - 1``'s stage released.

With ``cfg.approx`` the softmax is written with FlashAttention-3's instructions: the row
maxima of the unscaled scores through ``max.f32`` (one ``FMNMX`` each; for ``scale > 0`` the
maximum of the scaled scores is ``scale`` times theirs), and each exponential as one fma
``s · cs - max · cs`` and ``ex2.approx.ftz.f32`` (one ``MUFU.EX2``; the ISA bounds its
relative error, docs/instructions.md), where the exact form scales every score first, takes
``T.max`` (which propagates NaN: a compare and two selects) and calls ``exp2f`` (a range
reduction around ``MUFU.EX2``). It is the default configuration. For a scale that is not
positive the consumers run the exact form: one branch on the run-time scale, the same in every
thread, around their whole code (which the kernel then holds twice), so their loops have no
branch and the results are right for any scale.

With ``cfg.consumers = 3`` (the default at head dim 64, as FlashAttention-3 splits it) a third
consumer warpgroup takes rows 128 .. 191: 160 registers per consumer thread, enough for S, P
and O at head dim 64 only; more warps hide more softmax behind the others' multiplies.

With ``cfg.persistent`` (the default on full attention) one block per multiprocessor walks
over the query tiles in rounds of ``grid``, the odd rounds in reverse; causal tiles go longest
first across groups of 16 heads (a round's tiles alike, few heads' keys in L2 at once). The
ring runs on across tiles, and a ``q_free`` mbarrier (every consumer's last ``Q Kᵀ`` done)
lets the producer load the next Q during the consumers' epilogue.

Ping-pong and the overlap are off by default (docs/attention.md, "Speed"). Not here: separate
K and V barriers, an epilogue through shared memory and TMA (FlashAttention-3 has both).
"""

import math

from tirx import T
from tirx.examples.attention_wgmma_config import (
    BLOCK_NS,
    BM,
    CONSUMER_REGISTERS,
    DTYPES,
    HEAD_DIMS,
    PRODUCER_REGISTERS,
    THREADS,
    WgmmaAttentionConfig,
    default_config,
)  # fmt: skip
from tirx.layout import ComposeLayout, S, TileLayout, laneid, wid_in_wg

__all__ = [
    "WgmmaAttentionConfig", "HEAD_DIMS", "DTYPES", "BLOCK_NS", "BM", "THREADS", "PRODUCER_REGISTERS",
    "CONSUMER_REGISTERS", "default_config", "make_attention", "accumulator_layout",
]  # fmt: skip

LOG2E = math.log2(math.e)
LN2 = math.log(2.0)
COLS = 64  # head-dim columns per swizzled box: 128 bytes of 16-bit elements


def accumulator_layout(n: int) -> TileLayout:
    """The m64nNk16 f32 accumulator of a warpgroup as a layout of a (64, n) view: thread
    ``32 w + 4 g + t`` holds row ``16 w + 8 h + g`` and column ``8 j + 2 t + e`` in its
    register ``4 j + 2 h + e``."""
    return TileLayout(S[(4, 2, 8, n // 8, 4, 2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)])


def _boxes(*outer: int) -> ComposeLayout:
    """``(*outer, 1, 1, rows, 64)`` 16-bit boxes, each row 128 bytes, 128-byte swizzled (the
    16-byte chunk index XOR-ed with the row's low three bits), as TMA's swizzle 3 writes them
    and wgmma's descriptors (swizzle mode 1) read them."""
    return ComposeLayout(3, 3, 3, TileLayout(S[outer]))


def make_attention(
    batch: int,
    heads: int,
    kv_heads: int,
    seq_q: int,
    seq_k: int,
    head_dim: int,
    dtype: str = "float16",
    causal: bool = False,
    cfg: WgmmaAttentionConfig | None = None,
):
    """The kernel ``attention(Q, K, V, O, LSE, scale)`` for one shape class (module doc).

    Launch grid: ``(ceil(seq_q / cfg.block_m), batch · heads)`` (128 rows per block with two
    consumers, 192 with three; persistent: ``"sms"``), ``cfg.threads`` threads, sm_90a."""
    cfg = cfg or default_config(head_dim, causal)
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be float16 or bfloat16, got {dtype!r}")
    if min(batch, heads, kv_heads, seq_q, seq_k) <= 0 or heads % kv_heads:
        raise ValueError(
            f"batch, heads, kv_heads, seq_q, seq_k must be positive and heads a multiple of "
            f"kv_heads; got {batch}, {heads}, {kv_heads}, {seq_q}, {seq_k}"
        )
    cfg.check(head_dim)
    ab = "f16" if dtype == "float16" else "bf16"
    D, BN, STAGES, PINGPONG, OVERLAP = head_dim, cfg.block_n, cfg.stages, cfg.pingpong, cfg.overlap
    APPROX, PERSISTENT = cfg.approx, cfg.persistent
    BM, CONSUMERS, THREADS = cfg.block_m, cfg.consumers, cfg.threads  # rows, warpgroups, threads
    KB = D // COLS  # 64-column boxes per row of Q, K or V
    wgmma_s = f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.{ab}.{ab}"
    wgmma_o = f"wgmma.mma_async.sync.aligned.m64n{D}k16.f32.{ab}.{ab}"
    tma = "cp.async.bulk.tensor.4d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
    DEC, INC = "setmaxnreg.dec.sync.aligned.u32", "setmaxnreg.inc.sync.aligned.u32"
    INIT, ARRIVE = "mbarrier.init.shared::cta.b64", "mbarrier.arrive.shared::cta.b64"
    EXPECT = "mbarrier.arrive.expect_tx.shared::cta.b64"
    GROUP = heads // kv_heads
    NQ = -(-seq_q // BM)  # query tiles
    NKV = -(-seq_k // BN)  # key tiles
    BH, HG = batch * heads, min(batch * heads, 16)  # HG: a group's heads (causal persistent)
    TILES, GRID = NQ * BH, "sms" if PERSISTENT else (NQ, BH)
    KQ = D // 16  # k16 slices of S = Q Kᵀ
    KV = BN // 16  # k16 slices of O += P V
    NS = BN // 8  # 8-column groups of S
    DN = D // 8  # of O
    RAGGED = seq_k % BN != 0
    Q_BYTES, STAGE_BYTES = BM * D * 2, 2 * BN * D * 2  # Q; K and V of one stage
    ACC_S = accumulator_layout(BN)
    ACC_O = accumulator_layout(D)
    Q_LAYOUT = _boxes(KB, 1, 1, BM, COLS)
    KV_LAYOUT = _boxes(STAGES, KB, 1, 1, BN, COLS)

    @T.macro
    def nth_tile(bx, grid, i):
        """Persistent: the block's i-th tile, i·grid + bx, or in odd rounds i·grid + grid - 1 - bx
        (after a long causal tile a short one); else the block's own, bx."""
        return i * grid + T.if_then_else(i % 2 == 0, bx, grid - 1 - bx) if PERSISTENT else bx

    @T.macro
    def tile_of(t):
        """Query tile ``t``: batch, head, K/V head, first row, key tiles (head after head;
        causal: longest first, on a persistent grid longest first within each group of HG)."""
        g, u = T.meta_var((t // (HG * NQ), t % (HG * NQ)))  # (causal, persistent) t's group
        n = T.meta_var(T.min(HG, BH - g * HG))  # and its heads
        qt = (NQ - 1 - u // n if PERSISTENT else NQ - 1 - t % NQ) if causal else t % NQ
        bh = g * HG + u % n if causal and PERSISTENT else t // NQ
        q0 = qt * BM
        n_kv = NKV  # all key tiles, or (causal) up to the tile's last row's
        if causal:
            n_kv = T.min(NKV, (T.min(q0 + BM, seq_q) - 1) // BN + 1)
        return bh // heads, bh % heads, bh % heads // GROUP, q0, n_kv

    @T.macro
    def issue_s(s_acc, q_s, k_s, st, cw):
        """S = Q Kᵀ of stage st: d / 16 wgmma, both operands from shared memory, K key-major."""
        for kq in T.unroll(KQ):
            T.cuda.tile.apply(
                T.ptx[wgmma_s],
                s_acc,
                q_s[kq // 4, 0, 0, 64 * cw : 64 * cw + 64, (kq % 4) * 16 : (kq % 4) * 16 + 16],
                k_s[st, kq // 4, 0, 0, :, (kq % 4) * 16 : (kq % 4) * 16 + 16],
                scope="warpgroup",
                scale_d=kq,
            )

    @T.macro
    def issue_pv(o_acc, p_a, v_s, st):
        """O += P V of stage st: P from registers (rs), V key-major in shared memory (an
        MN-major B: wgmma's N is the head dimension, contiguous)."""
        for kv in T.unroll(KV):
            T.cuda.tile.apply(
                T.ptx[wgmma_o],
                o_acc,
                p_a[kv],
                v_s[st, :, 0, 0, kv * 16 : kv * 16 + 16, :].rearrange("kb k c -> (kb c) k"),
                scope="warpgroup",
            )

    @T.macro
    def wait_full(full, n):
        """The ring's n-th K and V tiles have landed: the (n // STAGES)-th phase of their
        stage's barrier."""
        T.cuda.mbarrier_wait(full[n % STAGES], (n // STAGES) % 2)

    @T.macro
    def take_turn(turn, cw, n):
        """Ping-pong: this warpgroup's turn n (the other has issued its step n - 1)."""
        if PINGPONG:
            T.cuda.mbarrier_wait(turn[cw], n % 2)

    @T.macro
    def give_turn(turn, cw):
        """Ping-pong: the other warpgroup may issue while this one waits and exponentiates."""
        if PINGPONG:
            T.ptx[ARRIVE](turn[1 - cw])

    @T.macro
    def scale_all(s, cs):
        for i in T.unroll(BN // 2):
            s[i] = s[i] * cs

    @T.macro
    def scale_scores(s, cs, ax):
        """S · scale · log2(e) (the approx softmax, ``ax``, folds it into its fma instead)."""
        if not ax:
            scale_all(s, cs)

    @T.macro
    def mask(s, j, w0, w, g, t):
        """-inf for the keys past seq_k and (causal) right of the diagonal, in the tiles that
        have any for this warpgroup."""
        last_col = j * BN + BN - 1
        if (RAGGED and last_col >= seq_k) or (causal and last_col > w0):
            for ni in T.unroll(NS):
                for e in T.unroll(4):
                    col = j * BN + ni * 8 + 2 * t + e % 2
                    row = w0 + 16 * w + g + 8 * (e // 2)
                    if col >= seq_k or (causal and col > row):
                        s[4 * ni + e] = -T.infinity(ty="float32")

    @T.macro
    def softmax_approx(s, row_max, row_sum, alpha, cs, mx):
        """The same on unscaled scores (their maximum is the scaled one's for scale > 0):
        ``max.f32`` for the maxima, one fma ``s · cs - max · cs`` and ``ex2.approx.ftz`` per
        score."""
        for hf in T.unroll(2):
            mx[0] = row_max[hf]
            for ni in T.unroll(NS):
                T.ptx["max.f32"](mx[1], s[4 * ni + 2 * hf], s[4 * ni + 2 * hf + 1])
                T.ptx["max.f32"](mx[0], mx[0], mx[1])
            T.ptx["max.f32"](mx[0], mx[0], T.cuda.__shfl_xor_sync(0xFFFFFFFF, mx[0], 1))
            T.ptx["max.f32"](mx[0], mx[0], T.cuda.__shfl_xor_sync(0xFFFFFFFF, mx[0], 2))
            mc = mx[0] * cs
            T.ptx["ex2.approx.ftz.f32"](alpha[hf], row_max[hf] * cs - mc)
            row_max[hf] = mx[0]
            total = T.float32(0)
            for ni in T.unroll(NS):
                for e in T.unroll(2):
                    i = 4 * ni + 2 * hf + e
                    T.ptx["ex2.approx.ftz.f32"](s[i], T.fma(s[i], cs, -mc))
                    total = total + s[i]
            row_sum[hf] = row_sum[hf] * alpha[hf] + total

    @T.macro
    def softmax_exact(s, row_max, row_sum, alpha):
        """On scores already scaled: T.max (NaN-propagating) and exp2f (2 ulp)."""
        for hf in T.unroll(2):
            m = row_max[hf]
            for ni in T.unroll(NS):
                m = max(m, max(s[4 * ni + 2 * hf], s[4 * ni + 2 * hf + 1]))
            m = max(m, T.cuda.__shfl_xor_sync(0xFFFFFFFF, m, 1))
            m = max(m, T.cuda.__shfl_xor_sync(0xFFFFFFFF, m, 2))
            alpha[hf] = T.exp2(row_max[hf] - m)
            row_max[hf] = m
            total = T.float32(0)
            for ni in T.unroll(NS):
                for e in T.unroll(2):
                    x = T.exp2(s[4 * ni + 2 * hf + e] - m)
                    total = total + x
                    s[4 * ni + 2 * hf + e] = x
            row_sum[hf] = row_sum[hf] * alpha[hf] + total

    @T.macro
    def softmax_in_place(s, row_max, row_sum, alpha, cs, mx, ax):
        """Each row's new maximum over its quad, alpha = exp2(old - new), the exponentials
        in S's registers and the row sums rescaled: no register of O or P is touched."""
        if ax:
            softmax_approx(s, row_max, row_sum, alpha, cs, mx)
        else:
            softmax_exact(s, row_max, row_sum, alpha)

    @T.macro
    def rescale_and_round(o, p, s, alpha):
        """O *= alpha row by row; P = the exponentials rounded to the inputs' type."""
        for hf in T.unroll(2):
            for dn in T.unroll(DN):
                for e in T.unroll(2):
                    o[4 * dn + 2 * hf + e] = o[4 * dn + 2 * hf + e] * alpha[hf]
        for i in T.unroll(BN // 2):
            p[i] = T.cast(s[i], dtype)

    @T.macro
    def consume(cw, tid, first, step, count, scale, bufs, O, LSE, ax):
        """Consumer warpgroup ``cw`` (0 .. CONSUMERS - 1): query rows ``q0 + 64 cw ..`` of the
        block's ``count`` tiles ``first``, ``first + step``, ..., with the approx softmax when
        ``ax`` (a compile-time bool); ``bufs``: the shared buffers and barriers."""
        q_s, k_s, v_s, q_full, q_free, full, empty, turn = T.meta_var(bufs)
        c = tid - 128  # the thread within the consumer warpgroups
        w = (c // 32) % 4  # its warp
        lane = c % 32
        g = lane // 4
        t = lane % 4
        s = T.alloc_local((BN // 2,), "float32")  # S of one key tile
        p = T.alloc_local((BN // 2,), dtype)  # its exponentials, rounded
        o = T.alloc_local((D // 2,), "float32")  # the output accumulator
        row_max = T.alloc_local((2,), "float32")  # rows 16 w + g and 16 w + g + 8
        row_sum = T.alloc_local((2,), "float32")  # this lane's columns only
        alpha = T.alloc_local((2,), "float32")  # exp2(old max - new max) per row
        mx = T.alloc_local((2,), "float32")  # approx: a running maximum and a pair's
        pair = T.alloc_local((2,), dtype)
        cs = scale * LOG2E  # exp(x · scale) = exp2(x · cs)
        s_acc = s.view(64, BN, layout=ACC_S)
        o_acc = o.view(64, D, layout=ACC_O)
        # P as the rs form's A, S's layout on P's slots (2 keys a word, a k16 slice an index)
        p_a = p.view(64, BN, layout=ACC_S).view("uint32").rearrange("r (j w) -> j r w", w=8)
        ring = 0  # the ring's steps of the block's earlier tiles
        if PINGPONG:
            if cw == 1:  # warpgroup 2 gives warpgroup 1 the first turn (phase 0)
                T.ptx[ARRIVE](turn[0])
        for i in range(count):
            b, h, hk, q0, n_kv = T.meta_var(tile_of(nth_tile(first, step, i)))
            w0 = q0 + 64 * cw  # the warpgroup's first row
            base = ring if PERSISTENT else 0  # the ring's step of the tile's first key tile
            for k in T.unroll(D // 2):
                o[k] = T.float32(0)
            for k in T.unroll(2):
                row_max[k] = -T.infinity(ty="float32")
                row_sum[k] = T.float32(0)
            T.cuda.mbarrier_wait(q_full[0], i % 2)
            if not OVERLAP:
                for j in range(n_kv):
                    st = (base + j) % STAGES
                    wait_full(full, base + j)
                    take_turn(turn, cw, base + j)
                    T.ptx["wgmma.fence.sync.aligned"]()
                    issue_s(s_acc, q_s, k_s, st, cw)
                    T.ptx["wgmma.commit_group.sync.aligned"]()
                    give_turn(turn, cw)
                    T.ptx["wgmma.wait_group.sync.aligned"](0)
                    scale_scores(s, cs, ax)
                    mask(s, j, w0, w, g, t)
                    # online softmax on the fragment, then O rescaled and P rounded
                    softmax_in_place(s, row_max, row_sum, alpha, cs, mx, ax)
                    rescale_and_round(o, p, s, alpha)
                    T.ptx["wgmma.fence.sync.aligned"]()
                    issue_pv(o_acc, p_a, v_s, st)
                    T.ptx["wgmma.commit_group.sync.aligned"]()
                    T.ptx["wgmma.wait_group.sync.aligned"](0)
                    T.ptx[ARRIVE](empty[st])  # this thread's multiplies are done with the stage
            else:
                # tile 0's scores and P; then per tile j: Q K_jᵀ and P_(j-1) V_(j-1) issued
                # together, the softmax of tile j while P_(j-1) V_(j-1) runs
                wait_full(full, base)
                take_turn(turn, cw, base)
                T.ptx["wgmma.fence.sync.aligned"]()
                issue_s(s_acc, q_s, k_s, base % STAGES, cw)
                T.ptx["wgmma.commit_group.sync.aligned"]()
                give_turn(turn, cw)
                T.ptx["wgmma.wait_group.sync.aligned"](0)
                scale_scores(s, cs, ax)
                mask(s, 0, w0, w, g, t)
                softmax_in_place(s, row_max, row_sum, alpha, cs, mx, ax)
                rescale_and_round(o, p, s, alpha)
                for j in range(1, n_kv):
                    st = (base + j) % STAGES
                    sp = (base + j - 1) % STAGES  # the stage of tile j - 1
                    wait_full(full, base + j)
                    take_turn(turn, cw, base + j)
                    T.ptx["wgmma.fence.sync.aligned"]()
                    issue_s(s_acc, q_s, k_s, st, cw)
                    T.ptx["wgmma.commit_group.sync.aligned"]()
                    issue_pv(o_acc, p_a, v_s, sp)
                    T.ptx["wgmma.commit_group.sync.aligned"]()
                    give_turn(turn, cw)
                    T.ptx["wgmma.wait_group.sync.aligned"](1)  # S_j has landed; P V may run on
                    scale_scores(s, cs, ax)
                    mask(s, j, w0, w, g, t)
                    softmax_in_place(s, row_max, row_sum, alpha, cs, mx, ax)
                    T.ptx["wgmma.wait_group.sync.aligned"](0)  # P_(j-1) V_(j-1) is done too
                    T.ptx[ARRIVE](empty[sp])  # with tile j - 1's stage
                    rescale_and_round(o, p, s, alpha)
                last = (base + n_kv - 1) % STAGES
                T.ptx["wgmma.fence.sync.aligned"]()
                issue_pv(o_acc, p_a, v_s, last)
                T.ptx["wgmma.commit_group.sync.aligned"]()
                T.ptx["wgmma.wait_group.sync.aligned"](0)
                T.ptx[ARRIVE](empty[last])
            ring = base + n_kv
            if PERSISTENT:  # this thread's multiplies are done with Q: the next tile's may land
                T.ptx[ARRIVE](q_free[0])

            # epilogue: the whole rows' sums, O / sum, and lse = (max + log2(sum)) · ln 2
            o_w = O.view("uint32")
            for hf in T.unroll(2):
                total = row_sum[hf]
                total = total + T.cuda.__shfl_xor_sync(0xFFFFFFFF, total, 1)
                total = total + T.cuda.__shfl_xor_sync(0xFFFFFFFF, total, 2)
                inv = T.float32(1) / total
                row = w0 + 16 * w + g + 8 * hf
                if row < seq_q:
                    for dn in T.unroll(DN):
                        pair[0] = T.cast(o[4 * dn + 2 * hf] * inv, dtype)
                        pair[1] = T.cast(o[4 * dn + 2 * hf + 1] * inv, dtype)
                        o_w[b, h, row, dn * 4 + t] = pair.view("uint32")[0]
                    if t == 0:
                        if ax:  # the maximum of unscaled scores
                            LSE[b, h, row] = (row_max[hf] * cs + T.log2(total)) * LN2
                        else:
                            LSE[b, h, row] = (row_max[hf] + T.log2(total)) * LN2

    @T.macro
    def consumers(tid, first, step, count, scale, bufs, O, LSE, ax):
        """The consumer warpgroups (``wg`` 1 .. CONSUMERS); ``bufs``: the shared buffers and
        barriers."""
        wg = T.cuda.warpgroup_id()
        if PINGPONG:
            # each warpgroup in a branch of its own, with its warpgroup index a constant:
            # they take turns
            if wg == 1:
                consume(0, tid, first, step, count, scale, bufs, O, LSE, ax)
            else:
                consume(1, tid, first, step, count, scale, bufs, O, LSE, ax)
        else:
            consume(wg - 1, tid, first, step, count, scale, bufs, O, LSE, ax)

    @T.function
    def attention(
        Q: T.Tensor((batch, heads, seq_q, D), dtype),
        K: T.Tensor((batch, kv_heads, seq_k, D), dtype),
        V: T.Tensor((batch, kv_heads, seq_k, D), dtype),
        O: T.Tensor((batch, heads, seq_q, D), dtype),
        LSE: T.Tensor((batch, heads, seq_q), "float32"),
        scale: T.float32,
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=THREADS))
        tid = T.cuda.thread_idx("x")
        wg = T.cuda.warpgroup_id()
        # the block's count query tiles: nth_tile(first, step, i) for i < count
        first = T.cuda.block_idx("x") if PERSISTENT else T.cuda.block_idx("y") * NQ + T.cuda.block_idx("x")  # fmt: skip
        step = T.cuda.grid_dim("x") if PERSISTENT else 1
        last = T.meta_var(nth_tile(first, step, TILES // step))  # in the last, partial, round
        count = TILES // step + T.if_then_else(last < TILES, 1, 0) if PERSISTENT else 1

        # Q's tile and the stages of K and V: boxes of 64 columns, 128-byte swizzled
        q_s = T.alloc_shared((KB, 1, 1, BM, COLS), dtype, layout=Q_LAYOUT, align=1024, scope="shared.dyn")  # fmt: skip
        k_s = T.alloc_shared((STAGES, KB, 1, 1, BN, COLS), dtype, layout=KV_LAYOUT, align=1024, scope="shared.dyn")  # fmt: skip
        v_s = T.alloc_shared((STAGES, KB, 1, 1, BN, COLS), dtype, layout=KV_LAYOUT, align=1024, scope="shared.dyn")  # fmt: skip
        q_full = T.alloc_shared((1,), "uint64")
        q_free = T.alloc_shared((1,), "uint64")  # (persistent) every consumer is done with Q
        full = T.alloc_shared((STAGES,), "uint64")
        empty = T.alloc_shared((STAGES,), "uint64")
        turn = T.alloc_shared((2,), "uint64")  # ping-pong's turns (128 arrivals; else unused)
        if tid == 0:
            T.ptx[INIT](q_full[0], 1)
            if PERSISTENT:
                T.ptx[INIT](q_free[0], 128 * CONSUMERS)
            for st in range(STAGES):
                T.ptx[INIT](full[st], 1)
                T.ptx[INIT](empty[st], 128 * CONSUMERS)
            if PINGPONG:
                T.ptx[INIT](turn[0], 128)
                T.ptx[INIT](turn[1], 128)
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()

        if wg == 0:  # the producer
            T.ptx[DEC](PRODUCER_REGISTERS)
            if tid == 0:
                ring = 0  # the ring's steps of earlier tiles
                for i in range(count):
                    b, h, hk, q0, n_kv = T.meta_var(tile_of(nth_tile(first, step, i)))
                    base = ring if PERSISTENT else 0  # the ring's step of the tile's first
                    if i > 0:  # every consumer is done with the last tile's Q
                        T.cuda.mbarrier_wait(q_free[0], (i - 1) % 2)
                    T.ptx[EXPECT](q_full[0], Q_BYTES)
                    T.cuda.tile.apply(T.ptx[tma], q_s[:, :, :, :, :], Q[:, :, :, :], box=(1, 1, BM, COLS), coords=(b, h, q0, 0), coord_steps=((0, 0, 0, COLS),), swizzle=3, mbar=q_full[0], scope="thread")  # fmt: skip
                    for j in range(n_kv):
                        n = base + j  # the ring's step
                        st = n % STAGES
                        if n >= STAGES:  # every consumer is done with the stage's last tile
                            T.cuda.mbarrier_wait(empty[st], (n // STAGES - 1) % 2)
                        T.ptx[EXPECT](full[st], STAGE_BYTES)
                        T.cuda.tile.apply(T.ptx[tma], k_s[st, :, :, :, :, :], K[:, :, :, :], box=(1, 1, BN, COLS), coords=(b, hk, j * BN, 0), coord_steps=((0, 0, 0, COLS),), swizzle=3, mbar=full[st], scope="thread")  # fmt: skip
                        T.cuda.tile.apply(T.ptx[tma], v_s[st, :, :, :, :, :], V[:, :, :, :], box=(1, 1, BN, COLS), coords=(b, hk, j * BN, 0), coord_steps=((0, 0, 0, COLS),), swizzle=3, mbar=full[st], scope="thread")  # fmt: skip
                    ring = base + n_kv
        else:  # the consumers: 64 query rows each
            T.ptx[INC](cfg.consumer_registers)
            bufs = T.meta_var((q_s, k_s, v_s, q_full, q_free, full, empty, turn))
            if APPROX:
                # its fma folds a positive scale (the maximum of unscaled scores is then the
                # scaled ones'); any other takes the exact form. One branch, the same in every
                # thread, around the consumers' whole code: their loops have none
                if scale > T.float32(0):
                    consumers(tid, first, step, count, scale, bufs, O, LSE, True)
                else:
                    consumers(tid, first, step, count, scale, bufs, O, LSE, False)
            else:
                consumers(tid, first, step, count, scale, bufs, O, LSE, False)

    return attention
