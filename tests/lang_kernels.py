"""Kernels that use the language forms of TIRx (tirx/script/forms.py, loops.py, macros.py), one
family each, with their inputs and the outputs they must give, computed here with numpy
from what each form means (not from tirx). tests/test_lang_forms.py runs them on the
simulator, compares their generated CUDA with goldens and, on the GPU machine, compares both
targets bit for bit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tirx import T

ROWS = 4


@T.function
def grid_loops(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    if T.cuda.lane_id() == 0:
        for i, j in T.grid(4, (2, 6)):
            B[i, j] = A[i, j] * 2.0 + i
        for k in T.serial(1, 8, step=3):
            B[0, k] = B[0, k] + 100.0
        for k in T.unroll(0, 2):
            B[1, k] = -1.0
        for k in T.serial(4, unroll=True):
            B[3, k] = B[3, k] + 0.5


def _grid_expected(A):
    B = np.zeros_like(A)
    for i in range(4):
        for j in range(2, 8):
            B[i, j] = A[i, j] * 2 + i
    B[0, [1, 4, 7]] += 100
    B[1, :2] = -1
    B[3, :4] += 0.5
    return [B]


@T.function
def vector_loops(
    A: T.Tensor((32, 8), "float32"),
    B: T.Tensor((32, 8), "float32"),
    H: T.Tensor((16, 16), "float16"),
    G: T.Tensor((16, 16), "float16"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    t = T.cuda.linear_thread_id()
    r = t // 2
    c = t % 2 * 4
    for v in T.vectorized(4):  # a copy: one 16-byte load and store
        B[r, c + v] = A[r, c + v]
    if t < 32:
        for v in T.vectorized(0, 8):  # 8 halves: 16 bytes
            G[t // 2, t % 2 * 8 + v] = H[t // 2, t % 2 * 8 + v]
    if t < 8:
        for v in T.vectorized(4):  # not a plain copy: unrolled element accesses
            B[t, v] = B[t, v] * 2.0 + 1.0


def _vector_expected(A, H):
    B = A.copy()
    B[:8, :4] = B[:8, :4] * 2 + 1
    return [B, H.copy()]


@T.function
def conditional(A: T.Tensor((32,), "float32"), B: T.Tensor((64,), "float32"),
                C: T.Tensor((64,), "float32")):  # fmt: skip
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    t = T.cuda.linear_thread_id()
    # A has 32 elements: the threads t >= 32 must not load A[t] (only the taken side runs)
    B[t] = T.if_then_else(t < 32, A[t], -1.0)
    C[t] = T.Select(t % 2 == 0, T.float32(t), A[t % 32] * 2.0)


def _conditional_expected(A):
    t = np.arange(64)
    B = np.where(t < 32, A[np.minimum(t, 31)], -1).astype(np.float32)
    C = np.where(t % 2 == 0, t.astype(np.float32), A[t % 32] * 2).astype(np.float32)
    return [B, C]


@T.function
def bindings(A: T.Tensor((32,), "int32"), B: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    rows, cols = T.meta_var((ROWS, 8))  # compile-time values: unrolled into the code
    base: T.let = lane // cols * cols
    off = T.bind_(lane % cols)
    width: T.let[T.int32] = cols
    acc = T.local_scalar("int32", 0)
    for k in range(rows):
        acc = acc + A[(base + off + k * width) % 32]
    T.evaluate(acc + 1)
    B[lane] = acc * 10 + off


def _bindings_expected(A):
    lane = np.arange(32)
    base, off = lane // 8 * 8, lane % 8
    acc = sum(A[(base + off + k * 8) % 32] for k in range(ROWS))
    return [(acc * 10 + off).astype(np.int32)]


@T.macro
def scaled_store(dst, i, value, scale=2):
    tmp = value * scale  # the macro's own tmp, not the caller's
    dst[i] = tmp


@T.inline
def clamp_index(i, n):
    j = T.min(i, n - 1)
    return j


@T.function
def macros(A: T.Tensor((32,), "int32"), B: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    tmp = lane + 100
    j = clamp_index(lane + 4, 32)
    scaled_store(B, lane, A[j], scale=3)
    B[lane] = B[lane] + tmp


def _macros_expected(A):
    lane = np.arange(32)
    return [(A[np.minimum(lane + 4, 31)] * 3 + lane + 100).astype(np.int32)]


@T.function
def storage(
    A: T.Tensor((32,), "float32"),
    Bits: T.Tensor((32,), "uint32"),
    Back: T.Tensor((32,), "float32"),
    Addr: T.Tensor((32,), "uint32"),
    Half: T.Tensor((32,), "int16"),
    Pair: T.Tensor((16,), "uint64"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    s = T.alloc_tensor((32,), "float32", scope="shared")
    s[lane] = A[lane]
    T.cuda.cta_sync()
    Bits[lane] = T.reinterpret(s[lane], ty="uint32")
    Back[lane] = T.reinterpret("float32", Bits[lane] ^ T.uint32(0x80000000))
    Addr[lane] = T.address_of(s[lane]) - T.address_of(s[0])
    Half[lane] = T.reinterpret(T.float16(A[lane]), ty="int16")
    words = T.decl_tensor(s, (16,), "uint64")
    if lane < 16:
        Pair[lane] = words[lane]


def _storage_expected(A):
    bits = A.view(np.uint32)
    return [
        bits.copy(),
        (-A).astype(np.float32),
        (np.arange(32) * 4).astype(np.uint32),
        A.astype(np.float16).view(np.int16),
        A.view(np.uint64).copy(),
    ]


@T.function
def thread_ids(Out: T.Tensor((5, 256), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=(64, 4)))
    t = T.cuda.linear_thread_id()
    Out[0, t] = t
    Out[1, t] = T.cuda.thread_rank()
    Out[2, t] = T.cuda.warpgroup_id()
    Out[3, t] = T.cuda.warp_in_warpgroup()
    Out[4, t] = T.cuda.thread_in_warpgroup()


def _thread_ids_expected():
    ty, tx = np.meshgrid(np.arange(4), np.arange(64), indexing="ij")
    t = (tx + 64 * ty).ravel()
    out = np.zeros((5, 256), np.int32)
    out[0, t] = t
    out[1, t] = t
    out[2, t] = t // 128
    out[3, t] = t // 32 % 4
    out[4, t] = t % 128
    return [out]


@dataclass(frozen=True)
class Case:
    """A kernel, its inputs (``inputs(rng)``: one array per parameter, outputs zeroed) and
    the expected outputs (``expected(*inputs)``, for the parameters listed in ``outputs``)."""

    name: str
    kernel: object
    inputs: Callable
    outputs: tuple[int, ...]
    expected: Callable


def _f32(rng, *shape):
    return (rng.standard_normal(shape) * 4).astype(np.float32)


CASES = [
    Case(
        "grid",
        grid_loops,
        lambda rng: [_f32(rng, 4, 8), np.zeros((4, 8), np.float32)],
        (1,),
        lambda A, B: _grid_expected(A),
    ),
    Case(
        "vectorized",
        vector_loops,
        lambda rng: [
            _f32(rng, 32, 8),
            np.zeros((32, 8), np.float32),
            _f32(rng, 16, 16).astype(np.float16),
            np.zeros((16, 16), np.float16),
        ],
        (1, 3),
        lambda A, B, H, G: _vector_expected(A, H),
    ),
    Case(
        "conditional",
        conditional,
        lambda rng: [_f32(rng, 32), np.zeros(64, np.float32), np.zeros(64, np.float32)],
        (1, 2),
        lambda A, B, C: _conditional_expected(A),
    ),
    Case(
        "bindings",
        bindings,
        lambda rng: [rng.integers(-1000, 1000, 32).astype(np.int32), np.zeros(32, np.int32)],
        (1,),
        lambda A, B: _bindings_expected(A),
    ),
    Case(
        "macros",
        macros,
        lambda rng: [rng.integers(-1000, 1000, 32).astype(np.int32), np.zeros(32, np.int32)],
        (1,),
        lambda A, B: _macros_expected(A),
    ),
    Case(
        "storage",
        storage,
        lambda rng: [
            _f32(rng, 32),
            np.zeros(32, np.uint32),
            np.zeros(32, np.float32),
            np.zeros(32, np.uint32),
            np.zeros(32, np.int16),
            np.zeros(16, np.uint64),
        ],
        (1, 2, 3, 4, 5),
        lambda A, *_: _storage_expected(A),
    ),
    Case(
        "thread_ids",
        thread_ids,
        lambda rng: [np.zeros((5, 256), np.int32)],
        (0,),
        lambda Out: _thread_ids_expected(),
    ),
]
