"""The simulator's instruction semantics against the hardware (GPU machine only).

Each form runs twice on the same inputs: as inline PTX in a tiny CUDA kernel (compiled with
cupy, independent of tirx's code generator) and as a hand-built lowered kernel in the
simulator. Bit patterns must agree; mma on integer-valued inputs must agree exactly and on
random halves to float32 rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_sim_ptx import ROWS, matrix_kernel, mma_kernel
from tirx.sim import run

pytestmark = pytest.mark.gpu

SOURCE = r"""
#define LD(N, T, REGS) asm volatile("ldmatrix.sync.aligned.m8n8" N T ".shared.b16 " REGS ", [%4];" \
    : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr))
#define ST(N, T, REGS) asm volatile("stmatrix.sync.aligned.m8n8" N T ".shared.b16 [%0], " REGS ";" \
    :: "r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory")

extern "C" __global__ void ldm(const unsigned short* src, const int* perm, unsigned* out,
                               int mode) {
    __shared__ __align__(16) unsigned short s[64 * 8];
    int lane = threadIdx.x;
    for (int i = lane; i < 512; i += 32) s[i] = src[i];
    __syncthreads();
    unsigned addr = (unsigned)__cvta_generic_to_shared(s + perm[lane] * 8);
    unsigned r[4] = {0, 0, 0, 0};
    switch (mode) {
        case 0: LD(".x1", "", "{%0}"); break;
        case 1: LD(".x2", "", "{%0, %1}"); break;
        case 2: LD(".x4", "", "{%0, %1, %2, %3}"); break;
        case 3: LD(".x1", ".trans", "{%0}"); break;
        case 4: LD(".x2", ".trans", "{%0, %1}"); break;
        case 5: LD(".x4", ".trans", "{%0, %1, %2, %3}"); break;
    }
    for (int i = 0; i < 4; ++i) out[lane * 4 + i] = r[i];
}

extern "C" __global__ void stm(const unsigned* in, const int* perm, unsigned short* out, int mode) {
    __shared__ __align__(16) unsigned short s[64 * 8];
    int lane = threadIdx.x;
    for (int i = lane; i < 512; i += 32) s[i] = 0;
    __syncthreads();
    unsigned addr = (unsigned)__cvta_generic_to_shared(s + perm[lane] * 8);
    unsigned r[4];
    for (int i = 0; i < 4; ++i) r[i] = in[lane * 4 + i];
    switch (mode) {
        case 0: ST(".x1", "", "{%1}"); break;
        case 1: ST(".x2", "", "{%1, %2}"); break;
        case 2: ST(".x4", "", "{%1, %2, %3, %4}"); break;
        case 3: ST(".x1", ".trans", "{%1}"); break;
        case 4: ST(".x2", ".trans", "{%1, %2}"); break;
        case 5: ST(".x4", ".trans", "{%1, %2, %3, %4}"); break;
    }
    __syncthreads();
    for (int i = lane; i < 512; i += 32) out[i] = s[i];
}

#define MMA(SHAPE, T, AREGS, BREGS) asm volatile( \
    "mma.sync.aligned." SHAPE ".row.col.f32." T "." T ".f32 {%0, %1, %2, %3}, " AREGS ", " BREGS \
    ", {%10, %11, %12, %13};" \
    : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]) \
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), \
      "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]))

extern "C" __global__ void mma(const unsigned* A, const unsigned* B, const float* C, float* D,
                               int mode) {
    int lane = threadIdx.x;
    int na = (mode & 1) ? 4 : 2, nb = (mode & 1) ? 2 : 1;
    unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4], d[4];
    for (int i = 0; i < na; ++i) a[i] = A[lane * na + i];
    for (int i = 0; i < nb; ++i) b[i] = B[lane * nb + i];
    for (int i = 0; i < 4; ++i) c[i] = C[lane * 4 + i];
    switch (mode) {
        case 0: MMA("m16n8k8", "f16", "{%4, %5}", "{%8}"); break;
        case 1: MMA("m16n8k16", "f16", "{%4, %5, %6, %7}", "{%8, %9}"); break;
        case 2: MMA("m16n8k8", "bf16", "{%4, %5}", "{%8}"); break;
        case 3: MMA("m16n8k16", "bf16", "{%4, %5, %6, %7}", "{%8, %9}"); break;
    }
    for (int i = 0; i < 4; ++i) D[lane * 4 + i] = d[i];
}
"""


@pytest.fixture(scope="module")
def gpu():
    cp = pytest.importorskip("cupy")
    module = cp.RawModule(code=SOURCE, options=("-arch=sm_90",))
    return cp, module


def _launch(gpu, name, *args):
    cp, module = gpu
    dev = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    module.get_function(name)((1,), (32,), tuple(dev))
    cp.cuda.runtime.deviceSynchronize()
    return [cp.asnumpy(d) if isinstance(d, cp.ndarray) else d for d in dev]


MODES = [(num, trans) for trans in (False, True) for num in (1, 2, 4)]


@pytest.mark.parametrize("mode", range(6))
def test_ldmatrix_agrees_with_hardware(gpu, mode):
    num, trans = MODES[mode]
    rng = np.random.default_rng(mode)
    src = rng.integers(0, 2**16, size=ROWS * 8, dtype=np.uint16)
    perm = rng.permutation(ROWS)[:32].astype(np.int32)
    hw = _launch(gpu, "ldm", src, perm, np.zeros(32 * 4, np.uint32), np.int32(mode))[2]
    sim = np.zeros(32 * num, dtype=np.uint32)
    run(
        matrix_kernel("ldmatrix", num, trans, [0, 1, 2, 3]),
        [src, perm, sim, np.zeros(ROWS * 8, np.uint16)],
    )
    np.testing.assert_array_equal(sim.reshape(32, num), hw.reshape(32, 4)[:, :num])


@pytest.mark.parametrize("mode", range(6))
def test_stmatrix_agrees_with_hardware(gpu, mode):
    num, trans = MODES[mode]
    rng = np.random.default_rng(10 + mode)
    words = rng.integers(0, 2**32, size=(32, 4), dtype=np.uint32)
    perm = rng.permutation(ROWS)[:32].astype(np.int32)
    hw = _launch(gpu, "stm", words.ravel(), perm, np.zeros(ROWS * 8, np.uint16), np.int32(mode))[2]
    sim = np.zeros(ROWS * 8, dtype=np.uint16)
    regs_in = np.ascontiguousarray(words[:, :num]).ravel()
    run(
        matrix_kernel("stmatrix", num, trans, [0, 1, 2, 3]),
        [np.zeros(ROWS * 8, np.uint16), perm, regs_in, sim],
    )
    np.testing.assert_array_equal(sim, hw)


def _halves(values: np.ndarray, ab: str) -> np.ndarray:
    if ab == "f16":
        return values.astype(np.float16).view(np.uint16)
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _pack(h: np.ndarray) -> np.ndarray:
    return h[:, 0::2].astype(np.uint32) | (h[:, 1::2].astype(np.uint32) << 16)


@pytest.mark.parametrize("mode", range(4))
@pytest.mark.parametrize("integers", [True, False])
def test_mma_agrees_with_hardware(gpu, mode, integers):
    k = 16 if mode & 1 else 8
    ab = "bf16" if mode >= 2 else "f16"
    rng = np.random.default_rng(20 + mode)
    if integers:
        a_vals = rng.integers(-16, 16, size=(32, k // 2)).astype(np.float32)
        b_vals = rng.integers(-16, 16, size=(32, k // 4)).astype(np.float32)
        c = rng.integers(-256, 256, size=(32, 4)).astype(np.float32)
    else:
        a_vals = rng.standard_normal((32, k // 2)).astype(np.float32)
        b_vals = rng.standard_normal((32, k // 4)).astype(np.float32)
        c = rng.standard_normal((32, 4)).astype(np.float32)
    a_regs, b_regs = _pack(_halves(a_vals, ab)), _pack(_halves(b_vals, ab))
    a4 = np.zeros((32, 4), np.uint32)
    a4[:, : k // 4] = a_regs
    b2 = np.zeros((32, 2), np.uint32)
    b2[:, : k // 8] = b_regs
    hw = _launch(
        gpu,
        "mma",
        a_regs.ravel(),
        b_regs.ravel(),
        c.ravel(),
        np.zeros(128, np.float32),
        np.int32(mode),
    )[3].reshape(32, 4)
    sim = np.zeros((32, 4), dtype=np.float32)
    run(mma_kernel(k, ab), [a_regs, b_regs, c, sim])
    if integers:
        np.testing.assert_array_equal(sim, hw)
    else:
        np.testing.assert_allclose(sim, hw, rtol=1e-6, atol=1e-6)
