"""wgmma test kernels for every line (f16/bf16, tf32, fp8, integer; .f32, .f16 and .s32
accumulators), both forms (A from shared memory or from registers) and both major-nesses of
the 16-bit types, written with the tile form: one warpgroup, A (64, 4K) and B (N, 4K) (one
128-byte row of K per row), four instructions of K accumulated into D over ``Init`` (or not,
``scale_d0=0``), each thread writing its registers to ``Out`` by the ISA's fragment figures
(written here from the ISA, not from tirx's tables). The register layouts below are the
fragments as tirx layouts: D, and A's (or an .f16 D's) 32-bit words."""

from __future__ import annotations

import functools

from tirx import T
from tirx.layout import ComposeLayout, S, TileLayout, laneid, wid_in_wg

ELEMENT = {
    "f16": "float16", "bf16": "bfloat16", "tf32": "float32", "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2", "s8": "int8", "u8": "uint8",
}  # fmt: skip
BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}
ACC = {"f32": "float32", "s32": "int32", "f16": "uint32"}  # register (and Out) dtypes


def d_layout(n: int) -> TileLayout:
    """32-bit D (row, col) -> thread 32·(row // 16) + 4·(row % 8) + (col % 8) // 2, slot
    4·(col // 8) + 2·((row % 16) // 8) + col % 2."""
    return TileLayout(S[(4, 2, 8, n // 8, 4, 2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)])


def words_layout(w: int) -> TileLayout:
    """32-bit words (row, word) of A (w = 8 per instruction) or of an .f16 D (w = N / 2) ->
    thread 32·(row // 16) + 4·(row % 8) + word % 4, slot (row % 16) // 8 + 2·(word // 4)."""
    return TileLayout(S[(4, 2, 8, w // 4, 4) : (1 @ wid_in_wg, 1, 4 @ laneid, 2, 1 @ laneid)])


def _log2(x: int) -> int:
    return x.bit_length() - 1


def k_major(rows: int, t: str, swizzled: bool):
    """A K-major (rows, 128 / bytes) tile: row-major under the 128-byte swizzle, or in core
    matrices (each 8 rows x 16 bytes contiguous, the two chunks of a row 128 bytes apart,
    8-row groups 256 bytes, one instruction's K after the other)."""
    per = 16 // BYTES[t]
    if swizzled:
        return ComposeLayout(_log2(per), 3, 3, TileLayout(S[(rows, 8 * per)]))
    return TileLayout(S[(rows // 8, 8, 4, 2, per) : (16 * per, per, rows * 2 * per, 8 * per, 1)])


def mn_major(rows: int, swizzled: bool):
    """A 16-bit MN-major (rows, 64) tile: the rows of one K adjacent. Swizzled: K lines of 128
    bytes (64 rows), the next 64 rows after all 64 K (LBO 8192, SBO 1024). Plain: core
    matrices of 8 K x 8 rows (128 bytes), 8-K groups 128 bytes apart (LBO), 8-row groups 1024
    bytes apart (SBO)."""
    if swizzled:
        return ComposeLayout(3, 3, 3, TileLayout(S[(rows // 64, 64, 64) : (4096, 1, 64)]))
    return TileLayout(S[(rows // 8, 8, 8, 8) : (512, 1, 64, 8)])


@functools.cache
def line_kernel(
    n: int, a: str, b: str, acc: str, *, rs=False, trans_a=False, trans_b=False,
    swizzled=True, sat=False, scale_a=1, scale_b=1, scale_d0=1,
):  # fmt: skip
    """``Out = scale_a·scale_b · A·Bᵀ (+ Init)`` for A (64, 4K) of ``a``, B (n, 4K) of ``b``;
    Init and Out (64, n) of the accumulator's register dtype (.f16: (64, n/2) words)."""
    k = 32 // BYTES[a]
    kt = 4 * k
    ea, eb, ed = ELEMENT[a], ELEMENT[b], ACC[acc]
    text = f"wgmma.mma_async.sync.aligned.m64n{n}k{k}{'.satfinite' if sat else ''}.{acc}.{a}.{b}"
    half = acc == "f16"
    ncol = n // 2 if half else n
    regs = n // 4 if half else n // 2
    dl = words_layout(n // 2) if half else d_layout(n)
    la = mn_major(64, swizzled) if trans_a else k_major(64, a, swizzled)
    lb = mn_major(n, swizzled) if trans_b else k_major(n, b, swizzled)
    wl = words_layout(32)
    per = 4 // BYTES[a]
    integer = acc == "s32"

    @T.function
    def line(A: T.Tensor((64, kt), ea), B: T.Tensor((n, kt), eb), Init: T.Tensor((64, ncol), ed), Out: T.Tensor((64, ncol), ed)):  # fmt: skip
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        As = T.alloc_shared((64, kt), ea, layout=la, align=1024)
        Bs = T.alloc_shared((n, kt), eb, layout=lb, align=1024)
        acc_r = T.alloc_local((regs,), ed)
        a_el = T.alloc_local((16 * per,), ea)
        tid = T.cuda.thread_idx("x")
        w = tid // 32
        lane = tid % 32
        for i in range(kt // 2):
            f = tid + 128 * i
            As[f // kt, f % kt] = A[f // kt, f % kt]
        for i in range(n * kt // 128):
            f = tid + 128 * i
            Bs[f // kt, f % kt] = B[f // kt, f % kt]
        if rs:
            for s in T.unroll(16 * per):
                ws = s // per
                row = 16 * w + lane // 4 + 8 * (ws % 2)
                a_el[s] = A[row, ((ws // 2) * 4 + lane % 4) * per + s % per]
        for r in T.unroll(regs):
            if half:  # word r: row 16w + g + 8 (r % 2), word 4 (r // 2) + t
                acc_r[r] = Init[16 * w + lane // 4 + 8 * (r % 2), 4 * (r // 2) + lane % 4]
            else:  # register r: row 16w + g + 8 ((r // 2) % 2), col 8 (r // 4) + 2t + r % 2
                acc_r[r] = Init[16 * w + lane // 4 + 8 * (r // 2 % 2), 8 * (r // 4) + 2 * (lane % 4) + r % 2]  # fmt: skip
        T.ptx["fence.proxy.async.shared::cta"]()
        T.cuda.cta_sync()
        D = acc_r.view(64, ncol, layout=dl)
        pa = a_el.view("uint32").view(64, 32, layout=wl).rearrange("r (s w) -> s r w", w=8)
        av = As.rearrange("r (s k) -> s r k", k=k)
        bv = Bs.rearrange("r (s k) -> s r k", k=k)
        T.ptx["wgmma.fence.sync.aligned"]()
        for kk in T.unroll(4):
            if rs:
                if integer:
                    T.cuda.tile.apply(T.ptx[text], D, pa[kk], bv[kk], scope="warpgroup", scale_d=kk + scale_d0)  # fmt: skip
                else:
                    T.cuda.tile.apply(T.ptx[text], D, pa[kk], bv[kk], scope="warpgroup", scale_d=kk + scale_d0, scale_a=scale_a, scale_b=scale_b)  # fmt: skip
            elif integer:
                T.cuda.tile.apply(T.ptx[text], D, av[kk], bv[kk], scope="warpgroup", scale_d=kk + scale_d0)  # fmt: skip
            else:
                T.cuda.tile.apply(T.ptx[text], D, av[kk], bv[kk], scope="warpgroup", scale_d=kk + scale_d0, scale_a=scale_a, scale_b=scale_b)  # fmt: skip
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        for r in T.unroll(regs):
            if half:
                Out[16 * w + lane // 4 + 8 * (r % 2), 4 * (r // 2) + lane % 4] = acc_r[r]
            else:
                Out[16 * w + lane // 4 + 8 * (r // 2 % 2), 8 * (r // 4) + 2 * (lane % 4) + r % 2] = acc_r[r]  # fmt: skip

    return line


@functools.cache
def chain_kernel(d: int = 64):
    """FlashAttention-3's two products without the softmax: ``S = Q·Kᵀ`` (ss, 64 keys),
    ``P = float16(S)`` register by register into a buffer with S's slots, then ``O = P·V``
    with P as the rs form's A (``p.view(64, 64, layout=S's).view("uint32")``, one k16 slice of
    keys per instruction) and V, stored (keys, d) row-major, as an MN-major B."""
    sw = ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))
    mma_s = "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"
    mma_o = f"wgmma.mma_async.sync.aligned.m64n{d}k16.f32.f16.f16"
    ls, lo = d_layout(64), d_layout(d)
    lv = ComposeLayout(3, 3, 3, TileLayout(S[(64, d // 64, 64) : (64, 4096, 1)]))

    @T.function
    def chain(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((64, 64), "float16"), V: T.Tensor((64, d), "float16"), O: T.Tensor((64, d), "float32")):  # fmt: skip
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        Qs = T.alloc_shared((64, 64), "float16", layout=sw, align=1024)
        Ks = T.alloc_shared((64, 64), "float16", layout=sw, align=1024)
        Vs = T.alloc_shared((64, d), "float16", layout=lv, align=1024)
        s_acc = T.alloc_local((32,), "float32")
        p = T.alloc_local((32,), "float16")
        o_acc = T.alloc_local((d // 2,), "float32")
        tid = T.cuda.thread_idx("x")
        for i in range(32):
            f = tid + 128 * i
            Qs[f // 64, f % 64] = Q[f // 64, f % 64]
            Ks[f // 64, f % 64] = K[f // 64, f % 64]
        for i in range(d // 2):
            f = tid + 128 * i
            Vs[f // d, f % d] = V[f // d, f % d]
        T.ptx["fence.proxy.async.shared::cta"]()
        T.cuda.cta_sync()
        Sv = s_acc.view(64, 64, layout=ls)
        qv = Qs.rearrange("r (j k) -> j r k", k=16)
        kv = Ks.rearrange("r (j k) -> j r k", k=16)
        T.ptx["wgmma.fence.sync.aligned"]()
        for j in T.unroll(4):
            T.cuda.tile.apply(T.ptx[mma_s], Sv, qv[j], kv[j], scope="warpgroup", scale_d=j)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        for i in T.unroll(32):
            p[i] = s_acc[i]
        pa = p.view(64, 64, layout=ls).view("uint32").rearrange("r (j w) -> j r w", w=8)
        vt = Vs.permute(1, 0).rearrange("n (j k) -> j n k", k=16)
        Ov = o_acc.view(64, d, layout=lo)
        T.ptx["wgmma.fence.sync.aligned"]()
        for j in T.unroll(4):
            T.cuda.tile.apply(T.ptx[mma_o], Ov, pa[j], vt[j], scope="warpgroup", scale_d=j)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        w = tid // 32
        lane = tid % 32
        for r in T.unroll(d // 2):
            O[16 * w + lane // 4 + 8 * (r // 2 % 2), 8 * (r // 4) + 2 * (lane % 4) + r % 2] = o_acc[r]  # fmt: skip

    return chain


@functools.cache
def offset_kernel(r0: int, swizzle: int = 128):
    """``Out = A·Bᵀ`` (f16, m64n8, one 32-byte K step per instruction) with A's view starting
    at row ``r0`` of a ``swizzle``-byte swizzled tile: inside a swizzle period when ``r0`` is
    not a multiple of 8. The tile's buffer is aligned to the period, so the swizzle pattern
    starts on its boundary and the descriptor's base offset is 0 (PTX ISA, "Matrix
    Descriptor Format")."""
    kt = swizzle // 2
    steps = kt // 16
    rows = 64 + r0
    la = ComposeLayout(3, _log2(swizzle // 16), 3, TileLayout(S[(rows, kt)]))
    lb = ComposeLayout(3, _log2(swizzle // 16), 3, TileLayout(S[(8, kt)]))
    text = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"
    dl = d_layout(8)

    @T.function
    def offset(A: T.Tensor((rows, kt), "float16"), B: T.Tensor((8, kt), "float16"), Out: T.Tensor((64, 8), "float32")):  # fmt: skip
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        As = T.alloc_shared((rows, kt), "float16", layout=la, align=1024)
        Bs = T.alloc_shared((8, kt), "float16", layout=lb, align=1024)
        acc = T.alloc_local((4,), "float32")
        tid = T.cuda.thread_idx("x")
        for i in range((rows * kt + 127) // 128):
            f = tid + 128 * i
            if f < rows * kt:
                As[f // kt, f % kt] = A[f // kt, f % kt]
        if tid < 8 * kt // 4:
            for i in range(4):
                Bs[(4 * tid + i) // kt, (4 * tid + i) % kt] = B[(4 * tid + i) // kt, (4 * tid + i) % kt]  # fmt: skip
        T.ptx["fence.proxy.async.shared::cta"]()
        T.cuda.cta_sync()
        D = acc.view(64, 8, layout=dl)
        av = As[r0 : r0 + 64, :].rearrange("r (s k) -> s r k", k=16)
        bv = Bs.rearrange("r (s k) -> s r k", k=16)
        T.ptx["wgmma.fence.sync.aligned"]()
        for kk in T.unroll(steps):
            T.cuda.tile.apply(T.ptx[text], D, av[kk], bv[kk], scope="warpgroup", scale_d=kk)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        w = tid // 32
        lane = tid % 32
        for r in T.unroll(4):
            Out[16 * w + lane // 4 + 8 * (r // 2), 2 * (lane % 4) + r % 2] = acc[r]

    return offset
