"""wgmma test kernels: one warpgroup, A (64 x 64) and B (N x 64) staged in shared memory
(128-byte swizzled or in unswizzled core-matrix order), four k16 slices of one m64nNk16
accumulated into D, each thread writing its N/2 registers to ``Out`` by the ISA's fragment
map (written here from the ISA's figure, not from tirx's tables)."""

from __future__ import annotations

import functools

from tirx import T
from tirx.layout import ComposeLayout, S, TileLayout, laneid, wid_in_wg

ELEMENT = {"f16": "float16", "bf16": "bfloat16"}


def d_layout(n: int) -> TileLayout:
    """(row, col) -> thread 32·(row // 16) + 4·(row % 8) + (col % 8) // 2, slot
    4·(col // 8) + 2·((row % 16) // 8) + col % 2."""
    return TileLayout(S[(4, 2, 8, n // 8, 4, 2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)])


def tile_layout(rows: int, swizzled: bool):
    """A 16-bit tile of ``rows`` x 64: (rows, 64) row-major under the 128-byte swizzle, or
    (4, rows, 16), one k16 slice after the other, each of core matrices of 8 rows x 8 elements
    (128 contiguous bytes), the two K chunks 128 bytes apart, 8-row groups 256."""
    if swizzled:
        return ComposeLayout(3, 3, 3, TileLayout(S[(rows, 64)]))
    return TileLayout(S[(4, rows // 8, 8, 2, 8) : (rows * 16, 128, 8, 64, 1)])


@functools.cache
def wgmma_kernel(n: int, ab: str = "f16", swizzled: bool = True):
    """``Out = A · Bᵀ`` for A (64, 64), B (n, 64) of ``ab``, Out (64, n) float32."""
    el = ELEMENT[ab]
    text = f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab}"
    la, lb, ld = tile_layout(64, swizzled), tile_layout(n, swizzled), d_layout(n)
    align = 1024 if swizzled else 16
    nd = n // 2
    if not swizzled:
        return _unswizzled(n, el, text, la, lb, ld, nd)

    @T.function
    def wgmma_tile(A: T.Tensor((64, 64), el), B: T.Tensor((n, 64), el), Out: T.Tensor((64, n), "float32")):  # fmt: skip
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        As = T.alloc_shared((64, 64), el, layout=la, align=align)
        Bs = T.alloc_shared((n, 64), el, layout=lb, align=align)
        acc = T.alloc_local((nd,), "float32")
        tid = T.cuda.thread_idx("x")
        for i in range(32):
            f = tid + 128 * i
            As[f // 64, f % 64] = A[f // 64, f % 64]
        for i in range(n // 2):
            f = tid + 128 * i
            Bs[f // 64, f % 64] = B[f // 64, f % 64]
        T.ptx["fence.proxy.async.shared::cta"]()
        T.cuda.cta_sync()
        D = acc.view(64, n, layout=ld)
        T.ptx["wgmma.fence.sync.aligned"]()
        for kk in T.unroll(4):
            T.cuda.tile.apply(
                T.ptx[text], D, As[:, 16 * kk : 16 * kk + 16], Bs[:, 16 * kk : 16 * kk + 16],
                scope="warpgroup", scale_d=kk,
            )  # fmt: skip
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        w = tid // 32
        lane = tid % 32
        for j in range(n // 8):
            for h in range(2):
                for e in range(2):
                    row = 16 * w + lane // 4 + 8 * h
                    Out[row, 8 * j + 2 * (lane % 4) + e] = acc[4 * j + 2 * h + e]

    return wgmma_tile


def _unswizzled(n, el, text, la, lb, ld, nd):
    @T.function
    def wgmma_plain(A: T.Tensor((64, 64), el), B: T.Tensor((n, 64), el), Out: T.Tensor((64, n), "float32")):  # fmt: skip
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        As = T.alloc_shared((4, 64, 16), el, layout=la)
        Bs = T.alloc_shared((4, n, 16), el, layout=lb)
        acc = T.alloc_local((nd,), "float32")
        tid = T.cuda.thread_idx("x")
        for i in range(32):
            f = tid + 128 * i
            As[f % 64 // 16, f // 64, f % 16] = A[f // 64, f % 64]
        for i in range(n // 2):
            f = tid + 128 * i
            Bs[f % 64 // 16, f // 64, f % 16] = B[f // 64, f % 64]
        T.ptx["fence.proxy.async.shared::cta"]()
        T.cuda.cta_sync()
        D = acc.view(64, n, layout=ld)
        T.ptx["wgmma.fence.sync.aligned"]()
        for kk in T.unroll(4):
            T.cuda.tile.apply(T.ptx[text], D, As[kk], Bs[kk], scope="warpgroup", scale_d=kk)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        w = tid // 32
        lane = tid % 32
        for j in range(n // 8):
            for h in range(2):
                for e in range(2):
                    row = 16 * w + lane // 4 + 8 * h
                    Out[row, 8 * j + 2 * (lane % 4) + e] = acc[4 * j + 2 * h + e]

    return wgmma_plain


@functools.cache
def descriptor_kernel():
    """Writes the descriptor of ``As[0, 16]`` (LBO 1, SBO 64, 128-byte swizzle in the helper's
    numbering 3) and the shared address of that element, as uint64."""

    @T.function
    def encode(Out: T.Tensor((2,), "uint64")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        As = T.alloc_shared((64, 64), "float16", align=1024)
        desc = T.alloc_local((1,), "uint64")
        T.cuda.wgmma.encode_matrix_descriptor(desc.ptr_to([0]), As[0, 16], 1, 64, 3)
        if T.cuda.thread_idx("x") == 0:
            Out[0] = desc[0]
            Out[1] = T.cast(T.cuda.cvta_generic_to_shared(As.ptr_to([0, 16])), "uint64")

    return encode
