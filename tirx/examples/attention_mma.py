"""FlashAttention's forward pass on ``mma.sync`` (sm_80 and later), FlashAttention-2's
structure, for one shape class: ``O = softmax(Q Kᵀ · scale + mask) V`` and the per-row
log-sum-exp ``LSE``.

``Q`` and ``O`` are ``(batch, heads, seq_q, head_dim)``, ``K`` and ``V`` are ``(batch,
kv_heads, seq_k, head_dim)`` (``heads`` a multiple of ``kv_heads``: query head ``h`` reads
key/value head ``h // (heads // kv_heads)``), float16 or bfloat16; ``LSE`` is ``(batch, heads,
seq_q)`` float32, the natural logarithm of each row's sum of ``exp(scores · scale)``; ``scale``
is a run-time float32 argument. The walk-through is docs/attention.md.

One block of ``cfg.warps`` warps owns ``cfg.block_m`` query rows of one head, 16 · m_tiles
rows per warp, and streams the head's keys and values past them in tiles of ``cfg.block_n``:

* the block's Q tile is copied once with ``cp.async`` into swizzled shared memory and loaded
  into registers with ``ldmatrix`` (every head-dim slice: Q stays in registers);
* K and V tiles are double-buffered in swizzled shared memory: while the warps work on tile
  ``j``, ``cp.async`` fills the other stage with tile ``j + 1`` (one commit group per tile,
  one barrier per tile);
* ``S = Q Kᵀ`` with ``ldmatrix`` (K is stored key-major, the B operand as mma.sync wants it)
  and ``mma.sync.m16n8k16``, f32 accumulation;
* the online softmax runs on the S accumulator in registers: scores are multiplied by
  ``scale · log2(e)`` (so ``exp`` is one ``exp2``), the row maximum and (at the end) the row
  sum are combined over the four lanes that hold a row with two ``__shfl_xor_sync``, and the
  output accumulator is rescaled by ``exp2(old max - new max)`` when the maximum grows;
* with ``cfg.approx`` (the default) the softmax is written as FlashAttention-2 writes it: the
  row maxima of the unscaled scores with ``max.f32`` (for ``scale > 0`` they are the scaled
  scores' maxima), then one fma ``s · c - max · c`` and one ``ex2.approx.ftz.f32`` per score
  (the ISA bounds its error by 2 ulp); the exact form scales first, takes ``T.max``
  (NaN-propagating) and calls ``exp2f``. A scale that is not positive takes the exact form:
  one branch, the same in every thread, around the whole loop over key tiles;
* ``P`` is rounded to the inputs' type in registers, in a buffer with the S accumulator's
  layout, and that buffer's ``uint32`` view, regrouped, *is* the A operand of ``P V``: tirx's
  contract check verifies that every element of it sits in the lane mma.sync reads it from
  (the fragment identity of docs/attention.md);
* ``V``'s B operand comes straight from its key-major tile with ``ldmatrix.trans``;
* causal attention (top-left aligned, as torch's ``is_causal``: key ``j`` is seen by query
  ``i`` when ``j <= i``) skips the key tiles right of the block's last row and masks the tiles
  that cross a warp's diagonal; the last, ragged key tile is masked and the rows past
  ``seq_q`` are computed on zeros and not stored. Causal blocks start from the last query
  tile, the longest, so that the short ones fill in at the end.
"""

import math
from dataclasses import dataclass

from tirx import T
from tirx.layout import ComposeLayout, S, TileLayout, laneid

__all__ = [
    "AttentionConfig", "HEAD_DIMS", "DTYPES", "P_AS_A", "default_config", "make_attention",
    "score_layout",
]  # fmt: skip

HEAD_DIMS = (64, 128)
DTYPES = ("float16", "bfloat16")
LOG2E = math.log2(math.e)
LN2 = math.log(2.0)
# P's words (the S accumulator's view of them) regrouped as mma.sync's A operand: 8-key tiles
# 2 kv and 2 kv + 1 side by side make the 16-key slice kv (docs/attention.md)
P_AS_A = "mi (kv two) row w -> mi kv row (two w)"


@dataclass(frozen=True)
class AttentionConfig:
    """The block's shape: ``warps`` warps of ``16 · m_tiles`` query rows each, key/value tiles
    of ``block_n`` keys (two shared stages of each); ``approx``: the softmax's maxima and
    exponentials with ``max.f32`` and ``ex2.approx.ftz.f32`` (module doc)."""

    warps: int = 4
    m_tiles: int = 1
    block_n: int = 64
    approx: bool = False

    @property
    def block_m(self) -> int:
        return 16 * self.warps * self.m_tiles

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def check(self) -> None:
        """The values the kernel is written for (with them, every tile of ``block_m`` or
        ``block_n`` rows splits into whole 16-byte chunks over the threads)."""
        if self.warps not in (1, 2, 4, 8):
            raise ValueError(f"cfg.warps must be 1, 2, 4 or 8, got {self.warps}")
        if self.m_tiles not in (1, 2):
            raise ValueError(
                f"cfg.m_tiles (16-row mma tiles per warp) must be 1 or 2, got {self.m_tiles}"
            )
        if self.block_n not in (32, 64, 128):
            raise ValueError(f"cfg.block_n must be 32, 64 or 128, got {self.block_n}")

    def shared_bytes(self, head_dim: int) -> int:
        """Q's tile and two stages each of K and V, 16-bit elements."""
        return (self.block_m + 4 * self.block_n) * head_dim * 2


def default_config(head_dim: int) -> AttentionConfig:
    """4 warps and 64-key tiles; 32 query rows per warp for head_dim 64 (each K and V
    fragment feeds two mma.sync), 16 for head_dim 128 (32 would not fit in 255 registers
    without spilling); the approx softmax, the faster at both head dims in
    benchmarks/results/attention_speed-h100.md. Registers: docs/attention.md."""
    return AttentionConfig(warps=4, m_tiles=2 if head_dim == 64 else 1, block_n=64, approx=True)


def _swizzled(shape: tuple[int, ...], head_dim: int):
    """Rows of ``head_dim`` 16-bit elements: the 16-byte chunk index within each 128-byte
    group is XOR-ed with the row's low three bits, so the 8 rows an ldmatrix reads (one chunk
    column) fall in 8 different groups of 4 banks, and so do the 16-byte cp.async stores."""
    return ComposeLayout(3, 3, (head_dim // 8).bit_length() - 1, TileLayout(S[shape]))


def score_layout(m_tiles: int, n_tiles: int) -> TileLayout:
    """The mma.sync accumulator of ``m_tiles x n_tiles`` 16x8 tiles: element ``(mi, ni, row,
    col)`` is in lane ``4 (row % 8) + col // 2``, slot ``4 (n_tiles mi + ni) + 2 (row // 8) +
    col % 2``."""
    return TileLayout(
        S[(m_tiles, n_tiles, 2, 8, 4, 2) : (4 * n_tiles, 4, 2, 4 @ laneid, 1 @ laneid, 1)]
    )


def _load_layout(count: int) -> TileLayout:
    """``count`` ldmatrix.x4 loads: matrix ``i`` of load ``c`` in slot ``4 c + i``, word
    ``(row, w)`` of it in lane ``4 row + w``."""
    return TileLayout(S[(count, 4, 8, 4) : (4, 1, 4 @ laneid, 1 @ laneid)])


def _a_layout(m_tiles: int, k_tiles: int) -> TileLayout:
    """mma.sync's A operand for ``m_tiles x k_tiles`` 16x16 tiles (SPEC's generalization)."""
    return TileLayout(
        S[(m_tiles, k_tiles, 2, 8, 2, 4) : (4 * k_tiles, 4, 1, 4 @ laneid, 2, 1 @ laneid)]
    )


def _b_layout(n_tiles: int) -> TileLayout:
    """mma.sync's B operand for ``n_tiles`` 8x16 tiles, as ``_load_layout`` leaves them."""
    return TileLayout(S[(n_tiles, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)])


def make_attention(
    batch: int,
    heads: int,
    kv_heads: int,
    seq_q: int,
    seq_k: int,
    head_dim: int,
    dtype: str = "float16",
    causal: bool = False,
    cfg: AttentionConfig | None = None,
):
    """The kernel ``attention(Q, K, V, O, LSE, scale)`` for one shape class (module doc).

    Launch grid: ``(ceil(seq_q / cfg.block_m), batch · heads)``.
    """
    cfg = cfg or default_config(head_dim)
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be float16 or bfloat16, got {dtype!r}")
    if min(batch, heads, kv_heads, seq_q, seq_k) <= 0 or heads % kv_heads:
        raise ValueError(
            f"batch, heads, kv_heads, seq_q, seq_k must be positive and heads a multiple of "
            f"kv_heads; got {batch}, {heads}, {kv_heads}, {seq_q}, {seq_k}"
        )
    cfg.check()
    ab = "f16" if dtype == "float16" else "bf16"
    mma = f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32"
    ldsm = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
    ldsm_t = "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
    cp = "cp.async.cg.shared.global"
    D, BM, BN, MR = head_dim, cfg.block_m, cfg.block_n, cfg.m_tiles
    THREADS = cfg.threads
    GROUP = heads // kv_heads
    NQ = -(-seq_q // BM)  # query tiles
    NKV = -(-seq_k // BN)  # key tiles
    KQ = D // 16  # 16-wide head-dim slices of S = Q Kᵀ
    NS = BN // 8  # 8-key tiles of S
    KV = BN // 16  # 16-key slices of P V
    DN = D // 8  # 8-wide head-dim tiles of O
    CPR = D // 8  # 16-byte chunks per row
    RSTEP = THREADS // CPR  # rows between one thread's chunks
    Q_CH, KV_CH = BM // RSTEP, BN // RSTEP  # chunks per thread per tile
    RAGGED = seq_k % BN != 0
    APPROX = cfg.approx
    where = "shared.dyn" if cfg.shared_bytes(D) > 48 * 1024 else "shared"

    ACC_S = score_layout(MR, NS)
    ACC_O = score_layout(MR, DN)
    Q_LOAD, Q_MMA = _load_layout(MR * KQ), _a_layout(MR, KQ)
    K_LOAD, K_MMA = _load_layout(NS // 2), _b_layout(NS)
    V_LOAD, V_MMA = _load_layout(DN // 2), _b_layout(DN)
    Q_PAT = "(mi half row) (kq chunk w) -> (mi kq) (chunk half) row w"
    K_PAT = "(pair nt row) (chunk w) -> pair (nt chunk) row w"
    V_PAT = "(kh row) (pair nt w) -> pair (nt kh) row w"
    QS_LAYOUT = _swizzled((BM, D), D)
    KV_LAYOUT = _swizzled((2, BN, D), D)

    @T.macro
    def copy_rows(dst, src, b, h, row0, rows, chunks, limit, r0, c0):
        """cp.async of the thread's chunks of ``rows`` rows from ``src[b, h, row0:]``:
        chunk c0 of rows r0 + RSTEP q. Rows at or past ``limit`` are zero-filled (their
        source address clamped to the last row, src_size 0)."""
        for q in T.unroll(chunks):
            r = row0 + r0 + RSTEP * q
            T.cuda.tile.apply(
                T.ptx[cp],
                dst[r0 + RSTEP * q, c0 * 8 : c0 * 8 + 8],
                src[b, h, T.min(r, limit - 1), c0 * 8 : c0 * 8 + 8],
                scope="thread",
                chunk_bytes=16,
                src_size=T.if_then_else(r < limit, 16, 0),
            )

    @T.macro
    def key_tiles(ax, n_kv, scale, b, h, hk, r0, c0, t, g, w0, K, V, O, LSE, k_s, v_s, qf, kf, vf):
        """The loop over the key tiles and the epilogue, for the warp's rows (module doc);
        ``ax``: the approx softmax (a compile-time bool)."""
        k_w = k_s.view("uint32")
        v_w = v_s.view("uint32")
        s = T.alloc_local((4 * MR * NS,), "float32")  # scores of one key tile
        p = T.alloc_local((4 * MR * NS,), dtype)  # their exponentials, rounded
        # P as mma.sync's A operand: the S accumulator's layout on P's slots, in uint32 words
        # of two columns, each pair of 8-key tiles one 16-key slice (the fragment identity)
        p_a = p.view(MR, NS, 16, 8, layout=ACC_S).view("uint32").rearrange(P_AS_A, two=2)
        o = T.alloc_local((4 * MR * DN,), "float32")  # the output accumulator
        row_max = T.alloc_local((2 * MR,), "float32")  # rows g and g + 8 of each m tile
        row_sum = T.alloc_local((2 * MR,), "float32")  # this lane's columns only
        pair = T.alloc_local((2,), dtype)
        mx = T.alloc_local((2,), "float32")  # approx: a running maximum, a pair's; alpha
        for i in T.unroll(4 * MR * DN):
            o[i] = T.float32(0)
        for i in T.unroll(2 * MR):
            row_max[i] = -T.infinity(ty="float32")
            row_sum[i] = T.float32(0)
        c = scale * LOG2E  # exp(x · scale) = exp2(x · c)

        for j in range(n_kv):
            st = j % 2
            # tile j has landed and every warp is done with tile j - 1, whose stage the
            # copies of tile j + 1 now overwrite
            T.ptx["cp.async.wait_group"](0)
            T.cuda.cta_sync()
            if j + 1 < n_kv:
                copy_rows(k_s[1 - st], K, b, hk, (j + 1) * BN, BN, KV_CH, seq_k, r0, c0)
                copy_rows(v_s[1 - st], V, b, hk, (j + 1) * BN, BN, KV_CH, seq_k, r0, c0)
                T.ptx["cp.async.commit_group"]()

            # S = Q Kᵀ, one 16-wide head-dim slice at a time
            for i in T.unroll(4 * MR * NS):
                s[i] = T.float32(0)
            for kq in T.unroll(KQ):
                T.cuda.tile.apply(
                    T.ptx[ldsm],
                    kf.view(NS // 2, 4, 8, 4, layout=K_LOAD),
                    k_w[st, :, kq * 8 : kq * 8 + 8].rearrange(K_PAT, nt=2, row=8, chunk=2, w=4),
                )
                T.cuda.tile.apply(
                    T.ptx[mma],
                    s.view(MR, NS, 16, 8, layout=ACC_S),
                    qf.view(MR, KQ, 16, 8, layout=Q_MMA)[:, kq : kq + 1, :, :],
                    kf.view(NS, 1, 8, 8, layout=K_MMA),
                    s.view(MR, NS, 16, 8, layout=ACC_S),
                )
            if not ax:  # the approx softmax folds c into its fma
                for i in T.unroll(4 * MR * NS):
                    s[i] = s[i] * c

            # mask the keys past seq_k and (causal) right of the diagonal, in the tiles
            # that have any for this warp
            last_col = j * BN + BN - 1
            if (RAGGED and last_col >= seq_k) or (causal and last_col > w0):
                for mi in T.unroll(MR):
                    for ni in T.unroll(NS):
                        for e in T.unroll(4):
                            col = j * BN + ni * 8 + 2 * t + e % 2
                            row = w0 + mi * 16 + g + 8 * (e // 2)
                            i = 4 * NS * mi + 4 * ni + e
                            if col >= seq_k or (causal and col > row):
                                s[i] = -T.infinity(ty="float32")

            # online softmax: each row's new maximum over the quad of lanes that holds it,
            # the exponentials, and the old sums and outputs rescaled to the new maximum
            for mi in T.unroll(MR):
                for hf in T.unroll(2):
                    r = 2 * mi + hf
                    if ax:  # on unscaled scores: max.f32, one fma and ex2.approx per score
                        mx[0] = row_max[r]
                        for ni in T.unroll(NS):
                            lo = 4 * NS * mi + 4 * ni + 2 * hf
                            T.ptx["max.f32"](mx[1], s[lo], s[lo + 1])
                            T.ptx["max.f32"](mx[0], mx[0], mx[1])
                        quad = T.cuda.__shfl_xor_sync(0xFFFFFFFF, mx[0], 1)
                        T.ptx["max.f32"](mx[0], mx[0], quad)
                        quad = T.cuda.__shfl_xor_sync(0xFFFFFFFF, mx[0], 2)
                        T.ptx["max.f32"](mx[0], mx[0], quad)
                        mc = mx[0] * c
                        T.ptx["ex2.approx.ftz.f32"](mx[1], row_max[r] * c - mc)
                        alpha = mx[1]
                        row_max[r] = mx[0]
                        total = T.float32(0)
                        for ni in T.unroll(NS):
                            for e in T.unroll(2):
                                i = 4 * NS * mi + 4 * ni + 2 * hf + e
                                T.ptx["ex2.approx.ftz.f32"](s[i], T.fma(s[i], c, -mc))
                                total = total + s[i]
                                p[i] = T.cast(s[i], dtype)
                    else:  # on scaled scores: T.max (NaN-propagating) and exp2f
                        m = row_max[r]
                        for ni in T.unroll(NS):
                            i = 4 * NS * mi + 4 * ni + 2 * hf
                            m = max(m, max(s[i], s[i + 1]))
                        m = max(m, T.cuda.__shfl_xor_sync(0xFFFFFFFF, m, 1))
                        m = max(m, T.cuda.__shfl_xor_sync(0xFFFFFFFF, m, 2))
                        alpha = T.exp2(row_max[r] - m)
                        row_max[r] = m
                        total = T.float32(0)
                        for ni in T.unroll(NS):
                            for e in T.unroll(2):
                                i = 4 * NS * mi + 4 * ni + 2 * hf + e
                                x = T.exp2(s[i] - m)
                                total = total + x
                                p[i] = T.cast(x, dtype)
                    row_sum[r] = row_sum[r] * alpha + total
                    for dn in T.unroll(DN):
                        for e in T.unroll(2):
                            i = 4 * DN * mi + 4 * dn + 2 * hf + e
                            o[i] = o[i] * alpha

            # O += P V, one 16-key slice at a time; P is the A operand as it is
            for kv in T.unroll(KV):
                T.cuda.tile.apply(
                    T.ptx[ldsm_t],
                    vf.view(DN // 2, 4, 8, 4, layout=V_LOAD),
                    v_w[st, kv * 16 : kv * 16 + 16, :].rearrange(V_PAT, kh=2, nt=2, w=4),
                )
                T.cuda.tile.apply(
                    T.ptx[mma],
                    o.view(MR, DN, 16, 8, layout=ACC_O),
                    p_a[:, kv : kv + 1, :, :],
                    vf.view(DN, 1, 8, 8, layout=V_MMA),
                    o.view(MR, DN, 16, 8, layout=ACC_O),
                )
        T.ptx["cp.async.wait_all"]()

        # epilogue: the whole rows' sums, O / sum, and lse = (max + log2(sum)) · ln 2
        o_w = O.view("uint32")
        for mi in T.unroll(MR):
            for hf in T.unroll(2):
                r = 2 * mi + hf
                total = row_sum[r]
                total = total + T.cuda.__shfl_xor_sync(0xFFFFFFFF, total, 1)
                total = total + T.cuda.__shfl_xor_sync(0xFFFFFFFF, total, 2)
                inv = T.float32(1) / total
                row = w0 + mi * 16 + g + 8 * hf
                if row < seq_q:
                    for dn in T.unroll(DN):
                        i = 4 * DN * mi + 4 * dn + 2 * hf
                        pair[0] = T.cast(o[i] * inv, dtype)
                        pair[1] = T.cast(o[i + 1] * inv, dtype)
                        o_w[b, h, row, dn * 4 + t] = pair.view("uint32")[0]
                    if t == 0:
                        # the approx form's maxima are of unscaled scores
                        top = row_max[r] * c if ax else row_max[r]
                        LSE[b, h, row] = (top + T.log2(total)) * LN2

    @T.function
    def attention(
        Q: T.Tensor((batch, heads, seq_q, D), dtype),
        K: T.Tensor((batch, kv_heads, seq_k, D), dtype),
        V: T.Tensor((batch, kv_heads, seq_k, D), dtype),
        O: T.Tensor((batch, heads, seq_q, D), dtype),
        LSE: T.Tensor((batch, heads, seq_q), "float32"),
        scale: T.float32,
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(NQ, batch * heads), block=THREADS))
        tid = T.cuda.thread_idx("x")
        lane = T.cuda.lane_id()
        warp = T.cuda.warp_id()
        qt = NQ - 1 - T.cuda.block_idx("x") if causal else T.cuda.block_idx("x")
        bh = T.cuda.block_idx("y")
        b = bh // heads
        h = bh % heads
        hk = h // GROUP
        q0 = qt * BM  # the block's first query row
        w0 = q0 + warp * 16 * MR  # the warp's
        g = lane // 4
        t = lane % 4
        r0 = tid // CPR
        c0 = tid % CPR

        q_s = T.alloc_shared((BM, D), dtype, layout=QS_LAYOUT, align=128, scope=where)
        k_s = T.alloc_shared((2, BN, D), dtype, layout=KV_LAYOUT, align=128, scope=where)
        v_s = T.alloc_shared((2, BN, D), dtype, layout=KV_LAYOUT, align=128, scope=where)
        q_w = q_s.view("uint32")

        qf = T.alloc_local((4 * MR * KQ,), "uint32")  # Q, every head-dim slice
        kf = T.alloc_local((2 * NS,), "uint32")  # K, one head-dim slice
        vf = T.alloc_local((2 * DN,), "uint32")  # V, one 16-key slice

        # the key tiles this block sees: all of them, or (causal) up to its last row's
        n_kv = NKV
        if causal:
            n_kv = T.min(NKV, (T.min(q0 + BM, seq_q) - 1) // BN + 1)

        # prologue: Q, then key/value tile 0 into stage 0, one commit group each
        copy_rows(q_s, Q, b, h, q0, BM, Q_CH, seq_q, r0, c0)
        T.ptx["cp.async.commit_group"]()
        copy_rows(k_s[0], K, b, hk, 0, BN, KV_CH, seq_k, r0, c0)
        copy_rows(v_s[0], V, b, hk, 0, BN, KV_CH, seq_k, r0, c0)
        T.ptx["cp.async.commit_group"]()
        T.ptx["cp.async.wait_group"](1)  # Q has landed
        T.cuda.cta_sync()
        T.cuda.tile.apply(
            T.ptx[ldsm],
            qf.view(MR * KQ, 4, 8, 4, layout=Q_LOAD),
            q_w[warp * 16 * MR : warp * 16 * MR + 16 * MR, :].rearrange(
                Q_PAT, mi=MR, half=2, chunk=2, w=4
            ),
        )

        if APPROX:
            # its fma folds a positive scale (the maximum of unscaled scores is then the scaled
            # ones'); any other takes the exact form. One branch, the same in every thread,
            # around the whole loop: the loop has none
            if scale > T.float32(0):
                key_tiles(True, n_kv, scale, b, h, hk, r0, c0, t, g, w0, K, V, O, LSE, k_s, v_s, qf, kf, vf)  # fmt: skip
            else:
                key_tiles(False, n_kv, scale, b, h, hk, r0, c0, t, g, w0, K, V, O, LSE, k_s, v_s, qf, kf, vf)  # fmt: skip
        else:
            key_tiles(False, n_kv, scale, b, h, hk, r0, c0, t, g, w0, K, V, O, LSE, k_s, v_s, qf, kf, vf)  # fmt: skip

    return attention
