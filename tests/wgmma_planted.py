"""wgmma kernels of the sanitizer parity suite (tests/test_sanitizer_parity.py): a result
that the simulator and the GPU must agree on, made visible to ``compute-sanitizer`` by a
planted shared-memory access that goes out of bounds exactly when a result differs from the
expected one (each thread checks its accumulator registers against ``Expect``).

The question they settle is the descriptor's base offset (PTX ISA, "Matrix Descriptor
Format"; docs/simulator.md, "Base offset"): A is read from rows 3 .. 66 of a 128-byte
swizzled tile whose buffer starts on a 1024-byte boundary, i.e. from 384 bytes into a swizzle
period. The ISA ties the base offset to where the *pattern* starts, so the clean twin passes
base offset 0 (what tirx's tile form emits) and the simulator computes the right product; the
planted kernel passes base offset 3 (``(start >> 7) & 7``, the reading that ties it to the
matrix's start), which the simulator reads as a pattern moved by three rows, so its results
differ and its check writes out of bounds. On a GPU that agrees with the simulator's reading,
memcheck is silent on the twin and reports the planted one; a GPU that ties the base offset to
the matrix's start would answer the other way round, and the parity test would fail on both.
"""

from __future__ import annotations

import functools

import numpy as np

import tirx
from tests.planted import Kind, Planted
from tirx import T
from tirx.layout import ComposeLayout, S, TileLayout

__all__ = ["WGMMA_CASES", "BY_NAME", "base_offset_kernel"]

R0 = 3  # A's first row: 384 bytes into a 1024-byte swizzle period
MMA = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"


@functools.cache
def base_offset_kernel(base: int):
    """Raw ``wgmma.mma_async`` m64n8k16 over K = 64 (four k16 steps, the start advanced 32
    bytes a step), A's descriptor starting at row ``R0`` with base offset ``base``."""
    la = ComposeLayout(3, 3, 3, TileLayout(S[(64 + R0, 64)]))
    lb = ComposeLayout(3, 3, 3, TileLayout(S[(8, 64)]))
    # LBO 16 (unused), SBO 1024, 128-byte swizzle (mode 1); base offset in bits 49-51
    a_fields = 1 << 16 | 64 << 32 | base << 49 | 1 << 62
    b_fields = 1 << 16 | 64 << 32 | 1 << 62
    rows = 64 + R0

    @T.function
    def wgmma_base_offset(A: T.Tensor((rows, 64), "float16"), B: T.Tensor((8, 64), "float16"), Expect: T.Tensor((64, 8), "float32"), Out: T.Tensor((64, 8), "float32")):  # fmt: skip
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        As = T.alloc_shared((rows, 64), "float16", layout=la, align=1024)
        Bs = T.alloc_shared((8, 64), "float16", layout=lb, align=1024)
        flag = T.alloc_shared((128,), "int32")
        acc = T.alloc_local((4,), "float32")
        desc = T.alloc_local((2,), "uint64")
        tid = T.cuda.thread_idx("x")
        for i in range((rows + 1) // 2):
            f = tid + 128 * i
            if f < rows * 64:
                As[f // 64, f % 64] = A[f // 64, f % 64]
        for i in range(4):
            Bs[(tid + 128 * i) // 64, (tid + 128 * i) % 64] = B[(tid + 128 * i) // 64, (tid + 128 * i) % 64]  # fmt: skip
        T.ptx["fence.proxy.async.shared::cta"]()
        T.cuda.cta_sync()
        a0 = T.cast(T.cuda.cvta_generic_to_shared(As.ptr_to([0, 0])), "uint64") + R0 * 128
        b0 = T.cast(T.cuda.cvta_generic_to_shared(Bs.ptr_to([0, 0])), "uint64")
        T.ptx["wgmma.fence.sync.aligned"]()
        for kk in range(4):
            desc[0] = ((a0 + 32 * kk) & 0x3FFFF) >> 4 | T.uint64(a_fields)
            desc[1] = ((b0 + 32 * kk) & 0x3FFFF) >> 4 | T.uint64(b_fields)
            T.ptx[MMA](acc, desc[0], desc[1], kk, 1, 1, 0, 0)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        w = tid // 32
        lane = tid % 32
        for r in range(4):
            row = 16 * w + lane // 4 + 8 * (r // 2)
            col = 2 * (lane % 4) + r % 2
            bad = T.cast(acc[r] != Expect[row, col], "int32")
            flag[tid + bad * 100000] = 1  # out of shared memory when the result is not Expect
            Out[row, col] = acc[r]

    return wgmma_base_offset


def _build(base: int):
    return lambda: tirx.compile(base_offset_kernel(base), "sim").lowered


def _inputs():
    rng = np.random.default_rng(25)
    a = rng.integers(-3, 4, (64 + R0, 64)).astype(np.float16)
    b = rng.integers(-3, 4, (8, 64)).astype(np.float16)
    expect = (a[R0:].astype(np.float32) @ b.astype(np.float32).T).astype(np.float32)
    return [a, b, expect, np.zeros((64, 8), np.float32)]


WGMMA_CASES: list[Planted] = [
    Planted("wgmma_base_offset_of_a_start_inside_a_period", Kind.OUT_OF_BOUNDS, _build(R0),
            _inputs, True),
    Planted("wgmma_base_offset_of_a_start_inside_a_period.fixed", Kind.OUT_OF_BOUNDS, _build(0),
            _inputs, False),
]  # fmt: skip
BY_NAME = {p.name: p for p in WGMMA_CASES}
