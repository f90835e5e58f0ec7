"""Kernels the test suite runs, each with integer-valued inputs and (where one exists) a numpy
model written from the PTX ISA — not from tirx's contract tables.

Used three ways: the CPU tests compare the simulator with the models, compile every kernel to
CUBIN, and the GPU parity test runs every kernel on the GPU and on the simulator and demands
identical bits.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tirx import T
from tirx.layout import S, TileLayout, laneid


@dataclass
class Case:
    name: str
    build: Callable  # () -> kernel
    inputs: Callable  # (np.random.Generator) -> list of numpy arrays / scalars
    model: Callable | None = None  # (inputs) -> {arg index: expected array}
    min_arch: int = 80


def _bits16(rng, shape, lo=-8, hi=8, dtype="float16"):
    """Random small integers as float16/bfloat16 bit patterns (uint16)."""
    vals = rng.integers(lo, hi, size=shape).astype(np.float32)
    if dtype == "float16":
        return vals.astype(np.float16).view(np.uint16)
    return (vals.view(np.uint32) >> 16).astype(np.uint16)


def _value16(bits, dtype):
    if dtype == "float16":
        return bits.view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _tensor16(bits, dtype):
    """A torch tensor of dtype float16/bfloat16 holding these bits."""
    import torch

    t = torch.from_numpy(bits.astype(np.int16))
    return t.view(getattr(torch, dtype))


# ------------------------------------------------------------------ ldmatrix / stmatrix


def _ldst_text(family, count, trans):
    return f"{family}.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16"


def _words_of(mats: np.ndarray, trans: bool) -> np.ndarray:
    """ISA model: the (32, n) u32 words lanes hold for 8x8 b16 matrices ``mats[n, 8, 8]``."""
    n = mats.shape[0]
    out = np.zeros((32, n), np.uint32)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(n):
            if trans:
                lo, hi = mats[i, 2 * t, g], mats[i, 2 * t + 1, g]
            else:
                lo, hi = mats[i, g, 2 * t], mats[i, g, 2 * t + 1]
            out[lane, i] = np.uint32(lo) | (np.uint32(hi) << 16)
    return out


def make_ldmatrix(count: int, trans: bool, reps: int):
    instr = _ldst_text("ldmatrix", count, trans)
    rows, nslots = reps * count * 8, reps * count
    load = TileLayout(S[(reps, count, 8, 4) : (count, 1, 4 @ laneid, 1 @ laneid)])

    @T.function
    def ldmatrix_kernel(Src: T.Tensor((rows, 8), "uint16"), Out: T.Tensor((32, nslots), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        s = T.alloc_shared((rows, 8), "uint16", align=16)
        regs = T.alloc_local((nslots,), "uint32")
        for i in range(lane, rows * 8, 32):
            s[i // 8, i % 8] = Src[i // 8, i % 8]
        T.cuda.cta_sync()
        words = s.view("uint32").rearrange("(rep mat row) w -> rep mat row w", rep=reps, mat=count)
        T.cuda.tile.apply(T.ptx[instr], regs.view(reps, count, 8, 4, layout=load), words)
        for j in range(nslots):
            Out[lane, j] = regs[j]

    return ldmatrix_kernel


def _ldmatrix_case(count, trans, reps):
    rows = reps * count * 8

    def inputs(rng):
        return [
            rng.integers(0, 2**16, size=(rows, 8), dtype=np.uint16),
            np.zeros((32, reps * count), np.uint32),
        ]

    def model(args):
        return {1: _words_of(args[0].reshape(reps * count, 8, 8), trans)}

    return Case(
        f"ldmatrix-x{count}{'-trans' if trans else ''}-rep{reps}",
        lambda: make_ldmatrix(count, trans, reps),
        inputs,
        model,
    )


def make_stmatrix(count: int, trans: bool, reps: int):
    instr = _ldst_text("stmatrix", count, trans)
    rows, nslots = reps * count * 8, reps * count
    load = TileLayout(S[(reps, count, 8, 4) : (count, 1, 4 @ laneid, 1 @ laneid)])

    @T.function
    def stmatrix_kernel(In: T.Tensor((32, nslots), "uint32"), Out: T.Tensor((rows, 8), "uint16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        s = T.alloc_shared((rows, 8), "uint16", align=16)
        regs = T.alloc_local((nslots,), "uint32")
        for j in range(nslots):
            regs[j] = In[lane, j]
        words = s.view("uint32").rearrange("(rep mat row) w -> rep mat row w", rep=reps, mat=count)
        T.cuda.tile.apply(T.ptx[instr], words, regs.view(reps, count, 8, 4, layout=load))
        T.cuda.cta_sync()
        for i in range(lane, rows * 8, 32):
            Out[i // 8, i % 8] = s[i // 8, i % 8]

    return stmatrix_kernel


def _stmatrix_case(count, trans, reps):
    rows = reps * count * 8

    def inputs(rng):
        return [
            rng.integers(0, 2**32, size=(32, reps * count), dtype=np.uint32),
            np.zeros((rows, 8), np.uint16),
        ]

    def model(args):
        words = args[0]
        mats = np.zeros((reps * count, 8, 8), np.uint16)
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for i in range(reps * count):
                lo, hi = np.uint16(words[lane, i] & 0xFFFF), np.uint16(words[lane, i] >> 16)
                if trans:
                    mats[i, 2 * t, g], mats[i, 2 * t + 1, g] = lo, hi
                else:
                    mats[i, g, 2 * t], mats[i, g, 2 * t + 1] = lo, hi
        return {1: mats.reshape(rows, 8)}

    return Case(
        f"stmatrix-x{count}{'-trans' if trans else ''}-rep{reps}",
        lambda: make_stmatrix(count, trans, reps),
        inputs,
        model,
        min_arch=90,
    )


# ----------------------------------------------------------------------------- mma.sync


def mma_layouts(k: int, mr: int, nr: int, kr: int):
    """Register layouts for D, A and B with repeats (slots as SPEC §5 generalizes them)."""
    d = TileLayout(S[(mr, nr, 2, 8, 4, 2) : (4 * nr, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
    if k == 16:
        a = TileLayout(S[(mr, kr, 2, 8, 2, 4) : (4 * kr, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
        b = TileLayout(S[(nr, kr, 8, 2, 4) : (2 * kr, 2, 4 @ laneid, 1, 1 @ laneid)])
    else:
        a = TileLayout(S[(mr, kr, 2, 8, 4) : (2 * kr, 2, 1, 4 @ laneid, 1 @ laneid)])
        b = TileLayout(S[(nr, kr, 8, 4) : (kr, 1, 4 @ laneid, 1 @ laneid)])
    return d, a, b


def make_mma(k: int, dtype: str, mr: int, nr: int, kr: int, c_view: bool):
    ab = "f16" if dtype == "float16" else "bf16"
    instr = f"mma.sync.aligned.m16n8k{k}.row.col.f32.{ab}.{ab}.f32"
    d_l, a_l, b_l = mma_layouts(k, mr, nr, kr)
    M, N, K = 16 * mr, 8 * nr, k * kr
    na, nb = mr * kr * (k // 4), nr * kr * max(k // 8, 1)
    ra, rb = k // 4, max(k // 8, 1)
    words = k // 2

    @T.function
    def mma_kernel(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K), dtype),
        C: T.Tensor((M, N), "float32"),
        Out: T.Tensor((M, N), "float32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        g = lane // 4
        t = lane % 4
        ar = T.alloc_local((na,), "uint32")
        br = T.alloc_local((nb,), "uint32")
        cr = T.alloc_local((mr * nr * 4,), "float32")
        dr = T.alloc_local((mr * nr * 4,), "float32")
        Aw = A.view("uint32")
        Bw = B.view("uint32")
        for mi in T.unroll(mr):
            for ki in T.unroll(kr):
                for r in T.unroll(ra):
                    ar[(mi * kr + ki) * ra + r] = Aw[
                        mi * 16 + g + 8 * (r % 2), ki * words + t + 4 * (r // 2)
                    ]
        for ni in T.unroll(nr):
            for ki in T.unroll(kr):
                for r in T.unroll(rb):
                    br[(ni * kr + ki) * rb + r] = Bw[ni * 8 + g, ki * words + t + 4 * r]
        for mi in T.unroll(mr):
            for ni in T.unroll(nr):
                for r in T.unroll(4):
                    cr[(mi * nr + ni) * 4 + r] = C[
                        mi * 16 + g + 8 * (r // 2), ni * 8 + 2 * t + r % 2
                    ]
        if c_view:
            T.cuda.tile.apply(
                T.ptx[instr],
                dr.view(mr, nr, 16, 8, layout=d_l),
                ar.view(mr, kr, 16, words, layout=a_l),
                br.view(nr, kr, 8, words, layout=b_l),
                cr.view(mr, nr, 16, 8, layout=d_l),
            )
        else:
            T.cuda.tile.apply(
                T.ptx[instr],
                dr.view(mr, nr, 16, 8, layout=d_l),
                ar.view(mr, kr, 16, words, layout=a_l),
                br.view(nr, kr, 8, words, layout=b_l),
                T.float32(0.5),
            )
        for mi in T.unroll(mr):
            for ni in T.unroll(nr):
                for r in T.unroll(4):
                    Out[mi * 16 + g + 8 * (r // 2), ni * 8 + 2 * t + r % 2] = dr[
                        (mi * nr + ni) * 4 + r
                    ]

    return mma_kernel


def _mma_case(k, dtype, mr, nr, kr, c_view):
    M, N, K = 16 * mr, 8 * nr, k * kr

    def inputs(rng):
        return [
            _bits16(rng, (M, K), dtype=dtype),
            _bits16(rng, (N, K), dtype=dtype),
            rng.integers(-64, 64, size=(M, N)).astype(np.float32),
            np.zeros((M, N), np.float32),
        ]

    def model(args):
        a, b = _value16(args[0], dtype), _value16(args[1], dtype)
        c = args[2] if c_view else np.float32(0.5)
        return {3: (a.astype(np.float64) @ b.astype(np.float64).T + c).astype(np.float32)}

    name = f"mma-k{k}-{dtype}-{mr}x{nr}x{kr}-{'cview' if c_view else 'cscalar'}"
    return Case(name, lambda: make_mma(k, dtype, mr, nr, kr, c_view), inputs, model)


# ------------------------------------------------------------------------- other kernels


def make_raw_ptx_matmul():
    """The seed's product with raw T.ptx calls (scalar operands) instead of tile ops."""
    mma = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"

    @T.function
    def raw_matmul(
        A: T.Tensor((16, 16), "float16"),
        B: T.Tensor((8, 16), "float16"),
        Out: T.Tensor((16, 8), "float32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        a = T.alloc_shared((16, 16), "float16", align=16)
        b = T.alloc_shared((8, 16), "float16", align=16)
        for q in range(8):
            a[(lane + 32 * q) // 16, (lane + 32 * q) % 16] = A[
                (lane + 32 * q) // 16, (lane + 32 * q) % 16
            ]
        for q in range(4):
            b[(lane + 32 * q) // 16, (lane + 32 * q) % 16] = B[
                (lane + 32 * q) // 16, (lane + 32 * q) % 16
            ]
        T.cuda.cta_sync()
        ar = T.alloc_local((4,), "uint32")
        br = T.alloc_local((2,), "uint32")
        dr = T.alloc_local((4,), "float32")
        mat = lane // 8
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"](
            ar[0], ar[1], ar[2], ar[3], a[(mat % 2) * 8 + lane % 8, (mat // 2) * 8]
        )
        T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"](br[0], br[1], b[lane % 8, (mat % 2) * 8])
        T.ptx[mma](
            dr[0], dr[1], dr[2], dr[3], ar[0], ar[1], ar[2], ar[3], br[0], br[1], 0.0, 0.0, 0.0, 0.0
        )
        for r in range(4):
            Out[lane // 4 + 8 * (r // 2), 2 * (lane % 4) + r % 2] = dr[r]

    return raw_matmul


def _matmul_inputs(rng, m=16, n=8, k=16, dtype="float16"):
    return [
        _bits16(rng, (m, k), dtype=dtype),
        _bits16(rng, (n, k), dtype=dtype),
        np.zeros((m, n), np.float32),
    ]


def _matmul_model(dtype="float16"):
    def model(args):
        a, b = _value16(args[0], dtype), _value16(args[1], dtype)
        return {2: (a.astype(np.float64) @ b.astype(np.float64).T).astype(np.float32)}

    return model


def _seed():
    from tirx.examples.warp_matmul import warp_matmul

    return warp_matmul


def _gemm(m, n, k, dtype):
    from tirx.examples.gemm import make_gemm

    return make_gemm(m, n, k, dtype)


def make_scalar_mix():
    """Integer and float scalar code: floor division, loops, branches, casts, 2-D blocks."""

    @T.function
    def scalar_mix(
        X: T.Tensor((4, 32), "int32"),
        F: T.Tensor((4, 32), "float32"),
        Out: T.Tensor((4, 32), "int32"),
        G: T.Tensor((4, 32), "float32"),
        n: T.int32,
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(2, 2), block=(16, 2)))
        x = T.cuda.thread_idx("x") + 16 * T.cuda.block_idx("x")
        y = T.cuda.thread_idx("y") + 2 * T.cuda.block_idx("y")
        v = X[y, x]
        acc = 0
        for i in range(0, n, 3):
            if (v + i) % 4 == 0:
                continue
            acc += (v - i) // 3 + (v * i) % 7
        j = 0
        while j * j < abs(v):
            j += 1
        Out[y, x] = acc + j + min(v, 2) - max(v, -2)
        G[y, x] = F[y, x] * 0.75 + T.float32(v) / 3.0 - T.float32(T.int32(F[y, x] * 1.5))

    return scalar_mix


def _scalar_inputs(rng):
    return [
        rng.integers(-50, 50, size=(4, 32)).astype(np.int32),
        (rng.integers(-1000, 1000, size=(4, 32)) / 8).astype(np.float32),
        np.zeros((4, 32), np.int32),
        np.zeros((4, 32), np.float32),
        17,
    ]


def _scalar_model(args):
    X, F, n = args[0], args[1], args[4]
    out = np.zeros_like(X)
    for (y, x), v in np.ndenumerate(X):
        v = int(v)
        acc = sum((v - i) // 3 + (v * i) % 7 for i in range(0, n, 3) if (v + i) % 4)
        j = 0
        while j * j < abs(v):
            j += 1
        out[y, x] = acc + j + min(v, 2) - max(v, -2)
    g = (F * np.float32(0.75)).astype(np.float32) + (X.astype(np.float32) / np.float32(3.0))
    g = g.astype(np.float32) - np.trunc(F * np.float32(1.5)).astype(np.float32)
    return {2: out, 3: g.astype(np.float32)}


CASES: list[Case] = (
    [_ldmatrix_case(c, t, r) for c in (1, 2, 4) for t in (False, True) for r in (1, 2)]
    + [_stmatrix_case(c, t, r) for c in (1, 2, 4) for t in (False, True) for r in (1, 2)]
    + [
        _mma_case(k, dt, mr, nr, kr, cv)
        for k in (8, 16)
        for dt in ("float16", "bfloat16")
        for (mr, nr, kr, cv) in ((1, 1, 1, False), (2, 1, 2, True), (1, 2, 3, True))
    ]
    + [
        Case("seed", _seed, _matmul_inputs, _matmul_model()),
        Case("raw-ptx-matmul", make_raw_ptx_matmul, _matmul_inputs, _matmul_model()),
        Case(
            "gemm-f16-128x128x64",
            lambda: _gemm(128, 128, 64, "float16"),
            lambda rng: _matmul_inputs(rng, 128, 128, 64),
            _matmul_model(),
        ),
        Case(
            "gemm-bf16-64x192x48",
            lambda: _gemm(64, 192, 48, "bfloat16"),
            lambda rng: _matmul_inputs(rng, 64, 192, 48, "bfloat16"),
            _matmul_model("bfloat16"),
        ),
        Case("scalar-mix", make_scalar_mix, _scalar_inputs, _scalar_model),
    ]
)


def to_torch(args, dtypes):
    """Convert numpy inputs to torch CPU tensors (16-bit floats from their bits)."""
    import torch

    out = []
    for a, dt in zip(args, dtypes):
        if isinstance(a, np.ndarray):
            out.append(_tensor16(a, dt) if dt in ("float16", "bfloat16") else torch.from_numpy(a))
        else:
            out.append(a)
    return out


def make_f64_to_16bit():
    """float64 rounded once to float16 and bfloat16 (not through float32)."""

    @T.function
    def narrow(
        X: T.Tensor((32,), "float64"),
        H: T.Tensor((32,), "float16"),
        Bf: T.Tensor((32,), "bfloat16"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        i = T.cuda.lane_id()
        H[i] = X[i]
        Bf[i] = X[i]

    return narrow


def _bf16_round_once(x: float) -> int:
    """bfloat16 bits of x rounded to nearest even, straight from float64 (normal range)."""
    import math

    if x == 0 or not math.isfinite(x):
        return int(np.float32(x).view(np.uint32) >> 16)
    _, e = math.frexp(x)
    step = 2.0 ** (e - 8)  # 8 significant bits
    r = round(x / step) * step  # Python rounds exact halves to even
    return int(np.float32(r).view(np.uint32) >> 16)


def _narrow_inputs(rng):
    tricky = [
        1 + 2**-8 + 2**-40,
        1 + 2**-8,
        1 + 3 * 2**-8,
        -(1 + 2**-8 + 2**-40),
        1 + 2**-11 + 2**-45,
        1 + 2**-11,
        3.0 + 2**-10 + 2**-50,
        0.0,
    ]
    x = np.concatenate([np.array(tricky), rng.uniform(-100, 100, 32 - len(tricky))])
    return [x.astype(np.float64), np.zeros(32, np.float16), np.zeros(32, np.uint16)]


def _narrow_model(args):
    x = args[0]
    return {
        1: x.astype(np.float16),  # numpy rounds float64 -> float16 once
        2: np.array([_bf16_round_once(float(v)) for v in x], np.uint16),
    }


CASES.append(Case("f64-to-16bit", make_f64_to_16bit, _narrow_inputs, _narrow_model))
