"""Math and bit intrinsics (T.exp, T.clz, ...): one table of intrinsics drives the golden CUDA
excerpts, the simulator's semantics (against Python's ``math`` and exact integer arithmetic,
not against the simulator's own numpy code), the GPU comparisons (bit-equal, or within
CUDA's documented ulp bound) and the misuse cases. The 8-bit float types are in
tests/test_fp8.py.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest

import tirx
from tests.helpers import caret_line, define, reference_cuda
from tirx.errors import ContractError, TirxError
from tirx.families.math.nodes import MathCall
from tirx.families.math.nodes import MathOp as M
from tirx.families.math.script import FORMS
from tirx.families.math.sim import ULP_BOUND

N = 64  # inputs per row: two warps


# ------------------------------------------------------------------------ float intrinsics


def _round_half_even(x: float) -> float:
    return float(round(x))  # Python's round() on floats is half to even


def _fma_exact(x: float, y: float, z: float):
    """x*y+z exactly: a Fraction (the test rounds it to the output type), or the float
    itself where it is zero (whose sign the Fraction cannot keep)."""
    q = Fraction(x) * Fraction(y) + Fraction(z)
    return x * y + z if q == 0 else q


def _rounded(v, dtype: str) -> float:
    """A reference value rounded once to ``dtype`` (float32 or float64)."""
    if isinstance(v, Fraction):
        return _nearest_f32(v) if dtype == "float32" else float(v)
    return v


def _nearest_f32(q: Fraction) -> float:
    near = np.float32(float(q))  # within one float32 step of the answer
    lo, hi = np.nextafter(near, np.float32(-np.inf)), np.nextafter(near, np.float32(np.inf))
    cands = [c for c in (lo, near, hi) if np.isfinite(c)]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(c.view(np.uint32)) & 1))
    return float(best)


@dataclass(frozen=True)
class FloatRow:
    """``T.<name>`` over float values: its C call, its reference and its inputs."""

    name: str
    op: M
    c32: str  # the start of the float32 C call
    c64: str  # the float64 one
    reference: object  # float64 arguments -> exact-or-nearly float (Python's math)
    low: float
    high: float
    arity: int = 1
    positive_log: bool = False  # draw log-uniform positive inputs over [e**low, e**high]


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


FLOAT_ROWS = [
    FloatRow("exp", M.EXP, "expf(", "exp(", math.exp, -87, 88),
    FloatRow("exp2", M.EXP2, "exp2f(", "exp2(", lambda x: 2.0**x, -126, 127),
    FloatRow("exp10", M.EXP10, "exp10f(", "exp10(", lambda x: 10.0**x, -37, 38),
    FloatRow("log", M.LOG, "logf(", "log(", math.log, -80, 80, positive_log=True),
    FloatRow("log2", M.LOG2, "log2f(", "log2(", math.log2, -80, 80, positive_log=True),
    FloatRow("log10", M.LOG10, "log10f(", "log10(", math.log10, -80, 80, positive_log=True),
    FloatRow("sqrt", M.SQRT, "sqrtf(", "sqrt(", math.sqrt, -80, 80, positive_log=True),
    FloatRow("rsqrt", M.RSQRT, "rsqrtf(", "rsqrt(", lambda x: 1 / math.sqrt(x), -80, 80, 1, True),
    FloatRow("tanh", M.TANH, "tanhf(", "tanh(", math.tanh, -10, 10),
    FloatRow(
        "sigmoid", M.SIGMOID, "(1.0f / (1.0f + expf(-(", "(1.0 / (1.0 + exp(-(", _sigmoid, -80, 80
    ),
    FloatRow("sin", M.SIN, "sinf(", "sin(", math.sin, -100, 100),
    FloatRow("cos", M.COS, "cosf(", "cos(", math.cos, -100, 100),
    FloatRow("erf", M.ERF, "erff(", "erf(", math.erf, -4, 4),
    FloatRow("pow", M.POW, "powf(", "pow(", math.pow, 0.1, 8, 2),
    FloatRow("fabs", M.FABS, "fabsf(", "fabs(", math.fabs, -100, 100),
    FloatRow("abs", M.FABS, "fabsf(", "fabs(", math.fabs, -100, 100),
    FloatRow("floor", M.FLOOR, "floorf(", "floor(", math.floor, -100, 100),
    FloatRow("ceil", M.CEIL, "ceilf(", "ceil(", math.ceil, -100, 100),
    FloatRow("round", M.NEARBYINT, "nearbyintf(", "nearbyint(", _round_half_even, -100, 100),
    FloatRow("nearbyint", M.NEARBYINT, "nearbyintf(", "nearbyint(", _round_half_even, -9, 9),
    FloatRow("trunc", M.TRUNC, "truncf(", "trunc(", math.trunc, -100, 100),
    FloatRow("fma", M.FMA, "fmaf(", "fma(", _fma_exact, -4, 4, 3),
    FloatRow("max", M.FMAX, "tirx_fmax(", "tirx_fmax(", max, -4, 4, 2),
    FloatRow("min", M.FMIN, "tirx_fmin(", "tirx_fmin(", min, -4, 4, 2),
    FloatRow("tan", M.TAN, "tanf(", "tan(", math.tan, -100, 100),
    FloatRow("asin", M.ASIN, "asinf(", "asin(", math.asin, -1, 1),
    FloatRow("acos", M.ACOS, "acosf(", "acos(", math.acos, -1, 1),
    FloatRow("atan", M.ATAN, "atanf(", "atan(", math.atan, -100, 100),
    FloatRow("sinh", M.SINH, "sinhf(", "sinh(", math.sinh, -88, 88),
    FloatRow("cosh", M.COSH, "coshf(", "cosh(", math.cosh, -88, 88),
    FloatRow("asinh", M.ASINH, "asinhf(", "asinh(", math.asinh, -1e6, 1e6),
    FloatRow("acosh", M.ACOSH, "acoshf(", "acosh(", math.acosh, 0, 40, positive_log=True),
    FloatRow("atanh", M.ATANH, "atanhf(", "atanh(", math.atanh, -0.999, 0.999),
    FloatRow("log1p", M.LOG1P, "log1pf(", "log1p(", math.log1p, -0.999, 100),
    FloatRow("atan2", M.ATAN2, "atan2f(", "atan2(", math.atan2, -10, 10, 2),
    FloatRow("hypot", M.HYPOT, "hypotf(", "hypot(", math.hypot, -1e3, 1e3, 2),
    FloatRow("fmod", M.FMOD, "fmodf(", "fmod(", math.fmod, -100, 100, 2),
    FloatRow("copysign", M.COPYSIGN, "copysignf(", "copysign(", math.copysign, -100, 100, 2),
    # the next value of the operands' own type (the simulator test steps in that type)
    FloatRow("nextafter", M.NEXTAFTER, "nextafterf(", "nextafter(", np.nextafter, -4, 4, 2),
]


def float_inputs(row: FloatRow, seed: int) -> np.ndarray:
    """``(arity, N)`` float32 inputs in the row's domain (halves included for the roundings)."""
    rng = np.random.default_rng(seed)
    if row.positive_log:
        x = np.exp(rng.uniform(row.low, row.high, (row.arity, N)))
    else:
        x = rng.uniform(row.low, row.high, (row.arity, N))
    if row.op in (M.FLOOR, M.CEIL, M.NEARBYINT, M.TRUNC):
        x[0, :16] = np.arange(-8, 8) + 0.5  # the ties: half to even, and the signs of zero
    if row.op is M.POW:
        x[1] = rng.uniform(-8, 8, N)
    return x.astype(np.float32)


def _float_kernel_source(rows, in_dtype: str, out_dtype: str) -> str:
    lines = []
    for k, row in enumerate(rows):
        args = ", ".join(f"X[{k}, {j}, i]" for j in range(row.arity))
        lines.append(f"    O[{k}, i] = T.{row.name}({args})")
    body = "\n".join(lines)
    return f"""
@T.function
def k(X: T.Tensor(({len(rows)}, 3, {N}), "{in_dtype}"), O: T.Tensor(({len(rows)}, {N}), "{out_dtype}")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={N}))
    i = T.cuda.thread_idx("x")
{body}
"""


@pytest.fixture(scope="module")
def float_kernels(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("float_intrinsics")
    return {
        dt: define(_float_kernel_source(FLOAT_ROWS, dt, out), tmp, "k")
        for dt, out in (("float32", "float32"), ("float64", "float64"), ("float16", "float32"))
    }


def _all_float_inputs(in_dtype: str, seed: int = 0) -> np.ndarray:
    x = np.zeros((len(FLOAT_ROWS), 3, N), dtype=np.float64)
    for k, row in enumerate(FLOAT_ROWS):
        x[k, : row.arity] = float_inputs(row, seed + k)
    if in_dtype == "float16":  # inputs inside float16's range, exactly representable
        x = np.clip(x, -60000, 60000).astype(np.float16)
        return x
    return x.astype(in_dtype)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Float32 or float64 steps between a and b (0 when both are NaN, huge when one is)."""
    a, b = np.asarray(a), np.asarray(b)
    width = np.int32 if a.dtype == np.float32 else np.int64
    ia, ib = a.view(width).astype(np.int64), b.view(width).astype(np.int64)
    top = np.int64(np.iinfo(width).min)
    oa = np.where(ia < 0, top - ia, ia)  # monotone in the value; -0 and +0 coincide
    ob = np.where(ib < 0, top - ib, ib)
    dist = np.abs(oa - ob).astype(np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    return np.where(nan_a & nan_b, 0, np.where(nan_a | nan_b, np.inf, dist))


def test_float_intrinsics_golden_cuda(float_kernels):
    """Each row's CUDA call, by operand width: expf for float32 (and for float16 operands,
    which compute as float32), exp for float64."""
    for dt, kernel in float_kernels.items():
        source = tirx.compile(kernel, target="cuda -arch=sm_90").source
        for row in FLOAT_ROWS:
            call = row.c64 if dt == "float64" else row.c32
            assert call in source, (dt, row.name, call)
        assert "--use_fast_math" not in source


def test_float_intrinsics_golden_lines(tmp_path):
    """The statement the golden excerpt shows: the call on the loaded value, nothing else."""
    k = define(
        """
        @T.function
        def k(A: T.Tensor((32,), "float32"), H: T.Tensor((32,), "float16"),
              O: T.Tensor((32,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            i = T.cuda.lane_id()
            O[i] = T.exp(A[i]) + T.exp2(H[i]) * T.rsqrt(A[i])
        """,
        tmp_path,
        "k",
    )
    source = tirx.compile(k, target="cuda -arch=sm_90").source
    assert (
        "O[(tirx_tid & 31)] = (expf(A[(tirx_tid & 31)]) + (exp2f(((float)(tirx_h2f("
        "H[(tirx_tid & 31)])))) * rsqrtf(A[(tirx_tid & 31)])));" in source
    )


@pytest.mark.parametrize("in_dtype", ["float32", "float64"])
def test_float_intrinsics_simulator_semantics(float_kernels, in_dtype):
    """The simulator against Python's math module (float64, within an ulp of exact) rounded
    to the output type: exact where CUDA documents 0 ulp, within one step otherwise for
    float32 (the simulator rounds its float64 value once; the GPU is then within the bound of
    both); float64 results come from numpy's float64 functions, within CUDA's float64 bound."""
    x = _all_float_inputs(in_dtype)
    out = np.zeros((len(FLOAT_ROWS), N), dtype=in_dtype)
    tirx.compile(float_kernels[in_dtype], target="sim")(x, out)
    bits = 32 if in_dtype == "float32" else 64
    for k, row in enumerate(FLOAT_ROWS):
        if row.op is M.NEXTAFTER:  # a step of float32 or float64, not of Python's float
            want = np.nextafter(x[k, 0], x[k, 1])
        else:
            args = x[k, : row.arity].astype(np.float64)
            values = [row.reference(*(float(a) for a in col)) for col in args.T]
            want = np.array([_rounded(v, in_dtype) for v in values]).astype(in_dtype)
        d = ulp_distance(out[k], want)
        bound = ULP_BOUND[(row.op, bits)]
        allowed = 0 if bound == 0 else 1 if bits == 32 else bound  # numpy's float64: ~1 ulp
        assert d.max() <= allowed, (row.name, int(np.argmax(d)), out[k][np.argmax(d)])


def test_fma_is_rounded_once_where_two_roundings_differ():
    """A case where rounding x*y+z to float64 and then to float32 is wrong by one step: the
    simulator's fmaf rounds once, as the GPU's fma.rn.f32 does."""
    from tirx.families.math.sim import fma_exact

    rng = np.random.default_rng(7)
    x, y, z = (rng.standard_normal(2000).astype(np.float32) for _ in range(3))
    # (1 + 2**-12)**2 = 1 + 2**-11 + 2**-24 is a float32 tie; 2**-70 above it rounds up, but
    # float64 drops the 2**-70 and the tie then goes to even (down)
    x[0] = y[0] = 1 + 2**-12
    z[0] = 2**-70
    twice = (x.astype(np.float64) * y + z).astype(np.float32)
    once = fma_exact(x, y, z, 32)
    exact = [
        _rounded(_fma_exact(float(a), float(b), float(c)), "float32") for a, b, c in zip(x, y, z)
    ]
    exact = np.array(exact)
    np.testing.assert_array_equal(once, exact.astype(np.float32))
    assert np.any(twice != once)  # the inputs do reach a double-rounding case


def test_float_specials_follow_c99():
    """NaN, infinities and signed zeros as C99's Annex F (and CUDA) has them."""
    from tirx.families.math.sim import math_eval
    from tirx.ir import nodes as ir

    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=np.float32)
    for op, ref in [
        (M.EXP, np.exp), (M.LOG, np.log), (M.SQRT, np.sqrt), (M.TANH, np.tanh),
        (M.FLOOR, np.floor), (M.CEIL, np.ceil), (M.TRUNC, np.trunc), (M.NEARBYINT, np.rint),
        (M.FABS, np.abs), (M.EXP2, np.exp2), (M.LOG2, np.log2),
    ]:  # fmt: skip
        e = MathCall(op, (ir.Var("x", ir.F32),), ir.F32)
        with np.errstate(all="ignore"):
            got, want = math_eval(e, None)(None, specials), ref(specials)
        np.testing.assert_array_equal(got.view(np.uint32) & 0x7FFFFFFF == 0, want == 0)
        number = ~np.isnan(want)  # a NaN's sign is no part of C99's rule (numpy's varies by CPU)
        np.testing.assert_array_equal(
            np.signbit(got[number]), np.signbit(want[number]), err_msg=op.value
        )
        np.testing.assert_array_equal(got, want, err_msg=op.value)


def test_max_min_propagate_nan_like_the_real_tirx(tmp_path):
    """T.max/T.min on floats: ``a if (a > b or a != a) else b`` — NaN in either operand gives
    NaN (fmaxf would return the other operand); Python's max keeps its own rule."""
    k = define(
        """
        @T.function
        def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32"),
              O: T.Tensor((3, 4), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=4))
            i = T.cuda.thread_idx("x")
            O[0, i] = T.max(A[i], B[i])
            O[1, i] = T.min(A[i], B[i])
            O[2, i] = max(A[i], B[i])
        """,
        tmp_path,
        "k",
    )
    nan = np.nan
    a = np.array([nan, 1.0, 2.0, -0.0], dtype=np.float32)
    b = np.array([1.0, nan, 3.0, 0.0], dtype=np.float32)
    out = np.zeros((3, 4), dtype=np.float32)
    tirx.compile(k, target="sim")(a, b, out)
    np.testing.assert_array_equal(out[0], [nan, nan, 3.0, 0.0])
    np.testing.assert_array_equal(out[1], [nan, nan, 2.0, 0.0])
    assert not np.signbit(out[0, 3]) and not np.signbit(out[1, 3])  # b when a == b
    np.testing.assert_array_equal(out[2], [nan, 1.0, 3.0, -0.0])  # b > a ? b : a
    source = tirx.compile(k, target="cuda -arch=sm_90").source
    assert "(a > b || a != a) ? a : b" in source


def test_predicates_and_limits(tmp_path):
    k = define(
        """
        @T.function
        def k(A: T.Tensor((5,), "float32"), I: T.Tensor((5,), "int32"),
              O: T.Tensor((4, 5), "int32"), L: T.Tensor((8,), "float32"),
              Q: T.Tensor((4,), "int32"), H: T.Tensor((2,), "float16")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=5))
            i = T.cuda.thread_idx("x")
            O[0, i] = T.isnan(A[i])
            O[1, i] = T.isinf(A[i])
            O[2, i] = T.isfinite(A[i])
            O[3, i] = T.isnan(I[i]) + 2 * T.isfinite(I[i])
            if i == 0:
                L[0] = T.infinity(ty="float32")
                L[1] = T.min_value(ty="float32")
                L[2] = T.max_value(ty="float32")
                L[3] = T.max_value("float16")
                L[4] = T.max_value(ty="float8_e4m3fn")
                L[5] = T.max_value(ty="float8_e5m2")
                L[6] = T.min_value(ty="bfloat16")
                L[7] = -T.infinity(ty="float64")
                Q[0] = T.max_value(ty="int32")
                Q[1] = T.min_value(ty="int32")
                Q[2] = T.max_value(ty="uint8")
                Q[3] = T.min_value(ty="int8")
                H[0] = T.infinity(ty="float16")
                H[1] = T.max_value(ty="float16")
        """,
        tmp_path,
        "k",
    )
    a = np.array([np.nan, np.inf, -np.inf, 0.0, 1e30], dtype=np.float32)
    ints = np.arange(5, dtype=np.int32)
    o, lim = np.zeros((4, 5), np.int32), np.zeros(8, np.float32)
    q, h = np.zeros(4, np.int32), np.zeros(2, np.float16)
    tirx.compile(k, target="sim")(a, ints, o, lim, q, h)
    np.testing.assert_array_equal(o[:3], [np.isnan(a), np.isinf(a), np.isfinite(a)])
    np.testing.assert_array_equal(o[3], [2] * 5)
    f32 = np.finfo(np.float32)
    np.testing.assert_array_equal(
        lim, [np.inf, f32.min, f32.max, 65504, 448, 57344, -3.3895313892515355e38, -np.inf]
    )
    np.testing.assert_array_equal(q, [2**31 - 1, -(2**31), 255, -128])
    np.testing.assert_array_equal(h, [np.inf, 65504])
    source = tirx.compile(k, target="cuda -arch=sm_90").source
    assert "isnan(A[" in source and "isinf(A[" in source and "isfinite(A[" in source


def test_a_variable_named_like_a_cuda_math_function(tmp_path):
    """The C names the intrinsics call cannot be shadowed by a kernel variable."""
    k = define(
        """
        @T.function
        def k(A: T.Tensor((32,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            expf = A[T.cuda.lane_id()]
            A[T.cuda.lane_id()] = T.exp(expf)
        """,
        tmp_path,
        "k",
    )
    assert tirx.compile(k, target="cuda -arch=sm_90").source  # NVRTC compiles it
    a = np.linspace(-1, 1, 32, dtype=np.float32)
    want = np.exp(a.astype(np.float64)).astype(np.float32)
    tirx.compile(k, target="sim")(a)
    np.testing.assert_array_equal(a, want)


# -------------------------------------------------------------------------- bit intrinsics


def _wrap(v: int, dtype: str) -> int:
    bits = np.dtype(dtype).itemsize * 8
    v &= (1 << bits) - 1
    return v - (1 << bits) if dtype.startswith("int") and v >= 1 << (bits - 1) else v


def _clz(a, b, dt):
    bits = np.dtype(dt).itemsize * 8
    return bits - (a & ((1 << bits) - 1)).bit_length()


def _popcount(a, b, dt):
    return bin(a & ((1 << (np.dtype(dt).itemsize * 8)) - 1)).count("1")


def _truncdiv(a, b, dt):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@dataclass(frozen=True)
class IntRow:
    """``expr`` over int values ``a`` and ``b`` of ``dtype``; ``c`` in the generated C."""

    expr: str
    dtype: str
    c: str
    reference: object  # (a, b, dtype) -> int, from Python's integers
    b_range: tuple[int, int] | None = None  # b drawn from this range (a shift count, a divisor)


INT_ROWS = [
    IntRow("T.clz(a)", "int32", "__clz((int)(", _clz),
    IntRow("T.clz(a)", "uint32", "__clz((int)(", _clz),
    IntRow("T.clz(a)", "int64", "__clzll((long long)(", _clz),
    IntRow("T.popcount(a)", "uint32", "__popc((unsigned int)(", _popcount),
    IntRow("T.popcount(a)", "int64", "__popcll((unsigned long long)(", _popcount),
    IntRow("T.cuda.ffs_u32(a)", "uint32", "__ffs((int)(", lambda a, b, dt: (a & -a).bit_length()),
    IntRow("T.bitwise_and(a, b)", "int32", " & ", lambda a, b, dt: a & b),
    IntRow("T.bitwise_or(a, b)", "uint32", " | ", lambda a, b, dt: a | b),
    IntRow("T.bitwise_xor(a, b)", "int64", " ^ ", lambda a, b, dt: a ^ b),
    IntRow("T.bitwise_not(a)", "int32", " ^ -1)", lambda a, b, dt: ~a),
    IntRow("T.shift_left(a, b)", "int32", " << ", lambda a, b, dt: a << b, (0, 31)),
    IntRow("T.shift_right(a, b)", "int32", " >> ", lambda a, b, dt: a >> b, (0, 31)),  # arith
    IntRow("T.shift_right(a, b)", "uint32", " >> ", lambda a, b, dt: a >> b, (0, 31)),  # logic
    IntRow("T.shift_left(a, b)", "uint64", " << ", lambda a, b, dt: a << b, (0, 63)),
    IntRow("T.truncdiv(a, b)", "int32", " / ", _truncdiv, (-40, 40)),
    IntRow(
        "T.truncmod(a, b)", "int32", " % ", lambda a, b, dt: a - b * _truncdiv(a, b, dt), (-40, 40)
    ),  # fmt: skip
    IntRow("T.truncdiv(a, b)", "uint32", " / ", lambda a, b, dt: a // b, (1, 40)),
    IntRow("T.floordiv(a, b)", "int32", "tirx_floordiv", lambda a, b, dt: a // b, (-40, 40)),
    IntRow("T.floormod(a, b)", "int32", "tirx_floormod", lambda a, b, dt: a % b, (-40, 40)),
    IntRow("T.ceildiv(a, b)", "int32", "tirx_floordiv", lambda a, b, dt: -(-a // b), (1, 40)),
    IntRow("T.abs(a)", "int32", "tirx_max", lambda a, b, dt: abs(a)),
]


def int_inputs(row: IntRow, seed: int):
    info = np.iinfo(row.dtype)
    rng = np.random.default_rng(seed)
    a = rng.integers(info.min, info.max, N, dtype=row.dtype, endpoint=True)
    a[:6] = np.array([0, 1, info.max, info.min, info.max // 3, 1 << 7], dtype=row.dtype)
    if row.b_range is not None and row.b_range[0] < 0 or row.expr.startswith("T.abs"):
        a[3] = info.min + 1  # INT_MIN / -1 and -INT_MIN overflow: undefined in C
    if row.expr.startswith("T.ceildiv"):
        a = rng.integers(-(2**20), 2**20, N).astype(row.dtype)  # a + b - 1 stays in range
    if row.b_range is None:
        b = rng.integers(info.min, info.max, N, dtype=row.dtype, endpoint=True)
    else:
        b = rng.integers(*row.b_range, N, endpoint=True).astype(row.dtype)
        if row.b_range[0] < 0:
            b[b == 0] = 7  # a nonzero divisor
    return a, b


def _int_kernel(row: IntRow, tmp):
    return define(
        f"""
        @T.function
        def k(A: T.Tensor(({N},), "{row.dtype}"), B: T.Tensor(({N},), "{row.dtype}"),
              O: T.Tensor(({N},), "int64")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={N}))
            i = T.cuda.thread_idx("x")
            a = A[i]
            b = B[i]
            O[i] = {row.expr}
        """,
        tmp,
        "k",
    )


def _int_row_id(row):
    return f"{row.expr.split('(')[0]}-{row.dtype}"


@pytest.mark.parametrize("row", INT_ROWS, ids=_int_row_id)
def test_bit_intrinsics_golden_and_simulator(row, tmp_path):
    k = _int_kernel(row, tmp_path)
    source = tirx.compile(k, target="cuda -arch=sm_90").source
    body = source.split("O[", 1)[1] if "O[" in source else ""
    assert row.c in body, (row, body[:300])
    a, b = int_inputs(row, INT_ROWS.index(row))
    out = np.zeros(N, dtype=np.int64)
    tirx.compile(k, target="sim")(a, b, out)
    result_dtype = "int32" if "clz" in row.expr or "ffs" in row.expr else row.dtype
    want = [  # the result's dtype, then the int64 the store converts it to
        _wrap(_wrap(row.reference(int(x), int(y), row.dtype), result_dtype), "int64")
        for x, y in zip(a, b)
    ]
    np.testing.assert_array_equal(out, np.array(want, dtype=np.int64), err_msg=row.expr)


def test_float_bits_reinterpretation(tmp_path):
    k = define(
        """
        @T.function
        def k(A: T.Tensor((8,), "float32"), U: T.Tensor((8,), "uint32"),
              B: T.Tensor((8,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
            i = T.cuda.thread_idx("x")
            U[i] = T.cuda.float_as_uint(A[i])
            B[i] = T.cuda.uint_as_float(U[i] ^ T.uint32(0x80000000))
        """,
        tmp_path,
        "k",
    )
    a = np.array([0.0, -0.0, 1.0, -2.5, np.inf, np.nan, 1e-45, 3e38], dtype=np.float32)
    u, b = np.zeros(8, np.uint32), np.zeros(8, np.float32)
    tirx.compile(k, target="sim")(a, u, b)
    np.testing.assert_array_equal(u, a.view(np.uint32))
    np.testing.assert_array_equal(b.view(np.uint32), a.view(np.uint32) ^ np.uint32(0x80000000))
    source = tirx.compile(k, target="cuda -arch=sm_90").source
    assert "__float_as_uint(A[" in source and "__uint_as_float(" in source


BITS16_SOURCE = """
@T.function
def k(H: T.Tensor((8,), "float16"), B: T.Tensor((8,), "bfloat16"), R: T.Tensor((2, 8), "uint16"),
      C: T.Tensor((8,), "float16"), O: T.Tensor((8,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
    i = T.cuda.thread_idx("x")
    R[0, i] = T.reinterpret(H[i], ty="uint16")
    R[1, i] = T.reinterpret(B[i], ty="uint16")
    C[i] = H[i]
    O[i] = T.float32(H[i])
"""
# float16 NaNs (quiet, signalling, negative, with payloads), then numbers; bfloat16 alike
_H_BITS = [0x7E00, 0x7C01, 0xFE00, 0x7D55, 0x3C00, 0x8000, 0x7C00, 0x0001]
_B_BITS = [0x7FC0, 0x7F81, 0xFFC0, 0x7FA5, 0x3F80, 0x8000, 0x7F80, 0x0001]


def _bits16_inputs():
    h = np.array(_H_BITS, np.uint16).view(np.float16)
    return [h, np.array(_B_BITS, np.uint16), np.zeros((2, 8), np.uint16),
            np.zeros(8, np.float16), np.zeros(8, np.float32)]  # fmt: skip


def test_16_bit_floats_from_memory_keep_their_bits_where_the_c_keeps_them(tmp_path):
    """T.reinterpret of a 16-bit float load and a copy into the same type move the bits as
    stored (a NaN's payload too), in the generated C and in the simulator alike; converting
    a float16 NaN to float32 gives the canonical NaN, as cvt.f32.f16 does."""
    k = define(BITS16_SOURCE, tmp_path, "k")
    h, b, r, c, o = _bits16_inputs()
    tirx.compile(k, target="sim")(h, b, r, c, o)
    np.testing.assert_array_equal(r[0], _H_BITS)
    np.testing.assert_array_equal(r[1], _B_BITS)
    np.testing.assert_array_equal(c.view(np.uint16), _H_BITS)
    want = np.where(np.isnan(h), np.uint32(0x7FFFFFFF), h.astype(np.float32).view(np.uint32))
    np.testing.assert_array_equal(o.view(np.uint32), want)
    source = tirx.compile(k, target="cuda -arch=sm_90").source
    assert "((unsigned short)(H[((int)threadIdx.x)]))" in source
    assert "((unsigned short)(B[((int)threadIdx.x)]))" in source
    body = source.split('extern "C"')[1]
    assert "tirx_f2h(" not in body and "tirx_f2b(" not in body


def _sim_and_gpu(source: str, inputs, tmp_path, bfloat16=(1,)):
    """Kernel ``source`` on the simulator and on the GPU, each on fresh ``inputs()``: the
    simulator's arrays and the GPU's tensors (the arguments at ``bfloat16``, uint16 bits
    here, travel as torch bfloat16: numpy has no such type)."""
    import torch

    k = define(source, tmp_path, "k")
    sim = inputs()
    tirx.compile(k, target="sim")(*sim)
    tensors = [torch.from_numpy(a).cuda() for a in inputs()]
    for i in bfloat16:
        tensors[i] = tensors[i].view(torch.bfloat16)
    tirx.compile(k, target="cuda -arch=sm_90")(*tensors)
    torch.cuda.synchronize()
    return sim, tensors


@pytest.mark.gpu
def test_gpu_16_bit_floats_from_memory_keep_their_bits(tmp_path):
    sim, gpu = _sim_and_gpu(BITS16_SOURCE, _bits16_inputs, tmp_path)
    for got, want in zip(gpu[2:], sim[2:]):  # bit for bit (NaN payloads included)
        bits = f"u{want.itemsize}"
        np.testing.assert_array_equal(got.cpu().numpy().view(bits), want.view(bits))


NAN_SOURCE = """
@T.function
def k(X: T.Tensor((8,), "float32"), B: T.Tensor((8,), "bfloat16"), H: T.Tensor((8,), "float16"),
      Xh: T.Tensor((8,), "float16"), Xb: T.Tensor((8,), "bfloat16"), Bh: T.Tensor((8,), "float16"),
      Hb: T.Tensor((8,), "bfloat16"), O: T.Tensor((4, 8), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
    i = T.cuda.thread_idx("x")
    Xh[i] = X[i]
    Xb[i] = X[i]
    Bh[i] = B[i]
    Hb[i] = H[i]
    O[0, i] = T.float32(B[i])
    O[1, i] = X[i] + T.float32(1)
    O[2, i] = X[i] * X[i]
    O[3, i] = X[i] - X[i]
"""
# float32 NaNs (quiet, signalling, negative, with payloads) and numbers; bfloat16 and float16 alike
_X_BITS = [0x7FC00000, 0x7F800001, 0xFFC00000, 0x7FA5A5A5, 0xFFFFFFFF, 0x3F800000, 0x7F800000, 0x1]


def _nan_inputs():
    x = np.array(_X_BITS, np.uint32).view(np.float32)
    h = np.array(_H_BITS, np.uint16).view(np.float16)
    return [x, np.array(_B_BITS, np.uint16), h, np.zeros(8, np.float16),
            np.zeros(8, np.uint16), np.zeros(8, np.float16), np.zeros(8, np.uint16),
            np.zeros((4, 8), np.float32)]  # fmt: skip


@pytest.mark.gpu
def test_gpu_nan_bits_of_conversions_and_arithmetic_equal_the_simulator(tmp_path):
    """Every float conversion a store or a cast makes, on NaNs with signs and payloads: the
    GPU's bits are the simulator's. Float arithmetic: the same NaNs and the same numbers (a NaN
    result's bits are not modelled, docs/simulator.md)."""
    sim, gpu = _sim_and_gpu(NAN_SOURCE, _nan_inputs, tmp_path, bfloat16=(1, 4, 6))
    import torch

    names = ["Xh", "Xb", "Bh", "Hb", "O[0]"]
    got_all = [g.cpu().view({2: torch.int16, 4: torch.int32}[w.itemsize]).numpy() for g, w in
               zip(gpu[3:], sim[3:])]  # fmt: skip
    rows = [*got_all[:4], got_all[4][0]], [*sim[3:7], sim[7][0]]
    differ = []
    for name, got, want in zip(names, *rows):
        got, want = got.view(f"u{want.itemsize}"), want.view(f"u{want.itemsize}")
        if not np.array_equal(got, want):  # every difference, in hex, not just the first
            differ.append(f"{name}: GPU {[hex(v) for v in got.ravel()]}")
            differ.append(f"{name}: sim {[hex(v) for v in want.ravel()]}")
    assert not differ, "\n".join(differ)
    arith_gpu, arith_sim = got_all[4][1:].view(np.float32), sim[7][1:]
    np.testing.assert_array_equal(np.isnan(arith_gpu), np.isnan(arith_sim))
    number = ~np.isnan(arith_sim)
    np.testing.assert_array_equal(
        arith_gpu[number].view(np.uint32), arith_sim[number].view(np.uint32)
    )


FLOAT2_SOURCE = """
@T.function
def k(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32"),
      W: T.Tensor((3, 64), "uint64"), F: T.Tensor((3, 64), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    i = T.cuda.thread_idx("x")
    F[0, i] = T.cuda.fdividef(X[i], Y[i])
    a = T.cuda.make_float2(X[i], Y[i])
    b = T.cuda.make_float2(Y[i], 0.75)
    W[0, i] = a
    W[1, i] = T.cuda.fadd2_rn(a, b)
    W[2, i] = T.cuda.fmul2_rn(a, b)
    F[1, i] = T.cuda.float2_x(W[1, i])
    F[2, i] = T.cuda.float2_y(W[2, i])
"""
# fdividef's operands: ordinary quotients, then its special ranges (2**126 < |y| < 2**128,
# zeros, infinities, NaN, subnormal y and x), then random ones
_DIV_SPECIAL = [
    (1.0, 3.0), (-7.0, 0.5), (1e30, 2.0**127), (np.inf, 2.0**127), (5.0, -(2.0**127)),
    (1.0, 2.0**126), (0.0, 0.0), (1.0, 0.0), (-1.0, -0.0), (np.inf, 3.0), (3.0, np.inf),
    (np.nan, 1.0), (5.0, 2.0**-127), (1e-40, 3.0), (1.0, 2.0**-126), (6e-39, 0.25),
    (2.5, 1e-38),
]  # fmt: skip


def _float2_inputs():
    rng = np.random.default_rng(11)
    x, y = (rng.standard_normal(64).astype(np.float32) * 1e3 for _ in range(2))
    x[: len(_DIV_SPECIAL)], y[: len(_DIV_SPECIAL)] = np.array(_DIV_SPECIAL, np.float32).T
    return x, y, np.zeros((3, 64), np.uint64), np.zeros((3, 64), np.float32)


def _exact_quotient(x, y):
    with np.errstate(all="ignore"):
        return (x.astype(np.float64) / y.astype(np.float64)).astype(np.float32)


def test_fdividef_and_float2_words(tmp_path):
    """``T.cuda.fdividef``: within 1 ulp of x / y in the ISA's range in the simulator (the GPU
    test checks the ISA's 2), and its documented special cases; ``make_float2`` and the
    float2 lane operations on the bits a uint64 holds, x the low word, each lane one rounded
    float32 operation."""
    k = define(FLOAT2_SOURCE, tmp_path, "k")
    x, y, w, f = _float2_inputs()
    tirx.compile(k, target="sim")(x, y, w, f)
    normal = (np.abs(y) >= 2.0**-126) & (np.abs(y) <= 2.0**126) & np.isfinite(x)
    assert ulp_distance(f[0][normal], _exact_quotient(x, y)[normal]).max() <= 1
    got = dict(zip(map(tuple, np.array(_DIV_SPECIAL, np.float32).tolist()), f[0].tolist()))
    assert got[(np.float32(1e30).item(), 2.0**127)] == 0.0  # 2**126 < |y| < 2**128: 0 ...
    assert np.isnan(got[(np.inf, 2.0**127)])  # ... or NaN for an infinite x
    assert got[(5.0, -(2.0**127))] == 0.0 and got[(1.0, 2.0**126)] == 2.0**-126
    assert np.isnan(got[(0.0, 0.0)]) and got[(1.0, 0.0)] == np.inf and got[(-1.0, -0.0)] == np.inf
    assert got[(5.0, np.float32(2.0**-127).item())] == np.inf  # past the largest float32
    # a subnormal y is taken as it is: 2.5 / 1e-38 is 2.5e38 (an H100's answer), not inf
    assert got[(2.5, np.float32(1e-38).item())] == np.float32(2.5e38)
    nan = np.isnan(f[0])
    assert (f[0][nan].view(np.uint32) == 0x7FFFFFFF).all()  # the canonical NaN
    pairs = w.view(np.float32).reshape(3, 64, 2)
    np.testing.assert_array_equal(pairs[0], np.stack([x, y], 1))
    b = np.stack([y, np.full(64, 0.75, np.float32)], 1)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(pairs[1], pairs[0] + b)
        np.testing.assert_array_equal(pairs[2], pairs[0] * b)
    np.testing.assert_array_equal(f[1], x + y)
    np.testing.assert_array_equal(f[2], y * np.float32(0.75))
    exe = tirx.compile(k, target="cuda -arch=sm_90")
    assert "__fdividef(X[" in exe.source and "div.approx.f32" in exe.ptx


@pytest.mark.parametrize(
    ("call", "words"),
    [
        ("T.cuda.fdividef(A[i], 2.0)", "T.cuda.fdividef takes a float value, not an int32 value"),
        ("T.cuda.float2_x(A[i])", "T.cuda.float2_x takes a 64-bit integer, not int32"),
        ("T.cuda.fadd2_rn(W[i], X[i])", "T.cuda.fadd2_rn takes an integer value, not"),
        ("T.cuda.make_float2(X[i])", "T.cuda.make_float2 takes two values, got 1"),
    ],
)
def test_fdividef_and_float2_misuse(call, words, tmp_path):
    src = f"""
    @T.function
    def k(A: T.Tensor((8,), "int32"), X: T.Tensor((8,), "float32"), W: T.Tensor((8,), "uint64")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
        i = T.cuda.thread_idx("x")
        X[i] = T.float32({call})
    """
    with pytest.raises(TirxError) as e:
        define(src, tmp_path, "k")
    assert words in str(e.value)
    assert call in caret_line(str(e.value))


@pytest.mark.parametrize(
    "key", [k for k in FORMS if k not in ("infinity", "min_value", "max_value")]
)
def test_every_intrinsic_names_its_count_when_given_one_value_too_many(key, tmp_path):
    # a form of any arity (fp8x4_e4m3_from_float4 takes four) is told in words, with a hint
    # that spells its values, never an exception from inside tirx
    arity = FORMS[key].arity
    call = f"T.{key}({', '.join(['X[i]'] * (arity + 1))})"
    src = f"""
    @T.function
    def k(X: T.Tensor((8,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
        i = T.cuda.thread_idx("x")
        X[i] = T.float32({call})
    """
    with pytest.raises(TirxError) as e:
        define(src, tmp_path, "k")
    assert f"takes {'' if arity else 'no values'}" in str(e.value)
    assert f"got {arity + 1}" in str(e.value)
    assert call in caret_line(str(e.value))


@pytest.mark.gpu
def test_gpu_fdividef_and_float2_words(tmp_path):
    """The GPU's __fdividef within the ISA's 2 ulp of x / y for 2**-126 <= |y| <= 2**126, and
    equal to the simulator bit for bit in the special ranges; the float2 words bit for bit."""
    sim, gpu = _sim_and_gpu(FLOAT2_SOURCE, _float2_inputs, tmp_path, bfloat16=())
    x, y = sim[0], sim[1]
    got = gpu[3].cpu().numpy()
    normal = (np.abs(y) >= 2.0**-126) & (np.abs(y) <= 2.0**126) & np.isfinite(x)
    assert ulp_distance(got[0][normal], _exact_quotient(x, y)[normal]).max() <= 2
    special = ~normal
    np.testing.assert_array_equal(
        got[0][special].view(np.uint32), sim[3][0][special].view(np.uint32)
    )
    # the float2 words and lanes bit for bit, but for a computed NaN's payload
    words, want = gpu[2].cpu().numpy().view(np.float32), sim[2].view(np.float32)
    for g, w in ((words, want), (got[1:], sim[3][1:])):
        nan = np.isnan(w)
        np.testing.assert_array_equal(np.isnan(g), nan)
        np.testing.assert_array_equal(g[~nan].view(np.uint32), w[~nan].view(np.uint32))


HALVES_SOURCE = """
@T.function
def k(H: T.Tensor((8,), "float16"), B: T.Tensor((8,), "bfloat16"), W: T.Tensor((8,), "uint64"),
      O: T.Tensor((2, 8), "float32"), L: T.Tensor((8,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
    i = T.cuda.thread_idx("x")
    O[0, i] = T.cuda.half2float(H[i])
    O[1, i] = T.cuda.bfloat162float(B[i])
    L[i] = T.cuda.smem_addr_from_uint64(W[i])
"""


def _halves_inputs():
    h = np.array([0.0, -0.0, 1.5, -65504.0, 6e-8, np.inf, np.nan, 0.1], np.float16)
    b16 = (np.array([0.0, -1.0, 3.0e38, 1e-40, -np.inf, np.nan, 0.1, 7.0], np.float32)
           .view(np.uint32) >> 16).astype(np.uint16)  # fmt: skip
    w = np.array([0, 1, 0xFFFFFFFF, 1 << 32, (1 << 32) + 5, 0x12345678_9ABCDEF0,
                  (1 << 64) - 1, 0x400], np.uint64)  # fmt: skip
    return [h, b16, w, np.zeros((2, 8), np.float32), np.zeros(8, np.uint32)]


def test_half_and_bfloat16_to_float_and_the_low_word_of_an_address(tmp_path):
    """The real TIRx's T.cuda.half2float / bfloat162float / smem_addr_from_uint64: exact
    conversions and the low 32 bits, on the simulator, and the CUDA tirx writes for them."""
    k = define(HALVES_SOURCE, tmp_path, "k")
    h, b16, w, o, low = _halves_inputs()
    tirx.compile(k, target="sim")(h, b16, w, o, low)
    # a float16 NaN becomes the canonical 0x7fffffff, as cvt.f32.f16 makes it on the GPU
    want = np.where(np.isnan(h), np.uint32(0x7FFFFFFF), h.astype(np.float32).view(np.uint32))
    np.testing.assert_array_equal(o[0].view(np.uint32), want)
    np.testing.assert_array_equal(o[1].view(np.uint32), b16.astype(np.uint32) << 16)
    np.testing.assert_array_equal(low, (w & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    source = tirx.compile(k, target="cuda -arch=sm_90").source
    assert "tirx_h2f(H[" in source and "tirx_b2f(B[" in source
    assert "((unsigned int)(W[" in source


@pytest.mark.gpu
def test_gpu_half_and_bfloat16_to_float_equal_the_simulator(tmp_path):
    sim, gpu = _sim_and_gpu(HALVES_SOURCE, _halves_inputs, tmp_path)
    np.testing.assert_array_equal(gpu[3].cpu().numpy().view(np.uint32), sim[3].view(np.uint32))
    np.testing.assert_array_equal(gpu[4].cpu().numpy(), sim[4])


BF16X2_SOURCE = """
@T.function
def k(A: T.Tensor((64,), "uint32"), B: T.Tensor((64,), "uint32"), X: T.Tensor((64,), "float32"),
      Y: T.Tensor((64,), "float32"), W: T.Tensor((64,), "uint64"), O: T.Tensor((4, 64), "uint32"),
      F: T.Tensor((64,), "uint64")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    i = T.cuda.thread_idx("x")
    O[0, i] = T.cuda.hmax2(A[i], B[i])
    O[1, i] = T.cuda.hmin2(A[i], B[i])
    O[2, i] = T.cuda.float22bfloat162_rn(X[i], Y[i])
    O[3, i] = T.cuda.float22bfloat162_rn_from_float2(W[i])
    F[i] = T.cuda.bfloat1622float2(A[i])
"""

# bfloat16 bit patterns: zeros, ones, infinities, the largest and smallest, NaNs (quiet,
# signalling, negative), a subnormal
_BF16_SPECIALS = [0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F80, 0xFF80, 0x7F7F, 0x0080, 0x7FC0,
                  0x7F81, 0xFFC1, 0x0001, 0x4049, 0xC049, 0x4048, 0x3F81]  # fmt: skip


def _bf16x2_inputs():
    rng = np.random.default_rng(7)
    sp = np.array(_BF16_SPECIALS, np.uint32)
    lo, hi = np.meshgrid(sp, sp[::-1])
    a = (lo.ravel()[:64] | (hi.ravel()[:64] << 16)).astype(np.uint32)
    b = a[rng.permutation(64)]
    b[:8] = a[:8] ^ np.uint32(0x80008000)  # the same magnitudes, other signs (+0 against -0)
    # float32 values at bfloat16 rounding ties (even and odd), NaNs, infinities, overflow
    ties = np.array([0x3F808000, 0x3F818000, 0x3F80C000, 0x7F7FFFFF, 0x7FC00001, 0xFF800000,
                     0x80000001, 0x7F800001, 0xFFC12345, 0xBF808000], np.uint32).view(np.float32)  # fmt: skip
    x = np.concatenate([ties, rng.standard_normal(54).astype(np.float32)])
    y = np.concatenate([ties[::-1], rng.standard_normal(54).astype(np.float32) * 1e30])
    w = x.view(np.uint32).astype(np.uint64) | (y.view(np.uint32).astype(np.uint64) << 32)
    return [a, b, x, y, w, np.zeros((4, 64), np.uint32), np.zeros(64, np.uint64)]


def _bf16_model(h: int) -> float:
    return float(np.uint32(h << 16).view(np.float32))


def _hmax_model(a: int, b: int, is_max: bool) -> int:
    """max.bf16x2 / min.bf16x2 on one half, from the PTX ISA: a NaN loses to a number, two
    NaNs give 0x7FFF, +0 is above -0."""
    x, y = _bf16_model(a), _bf16_model(b)
    if x != x and y != y:
        return 0x7FFF
    if x != x or y != y:
        return b if x != x else a
    if x == y:  # equal values: the zeros by their sign
        return (a if not a & 0x8000 else b) if is_max else (a if a & 0x8000 else b)
    return a if (x > y) == is_max else b


def _round_bf16_model(f: np.float32) -> int:
    """float32 -> bfloat16 to nearest even, as cvt.rn.bf16x2.f32 does it: every NaN gives the
    canonical 0x7FFF (the GPU's answer; the ISA leaves NaN payloads to the implementation)."""
    u = int(np.float32(f).view(np.uint32))
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return 0x7FFF
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def test_packed_bfloat16_pairs_follow_the_isa(tmp_path):
    """T.cuda.hmax2 / hmin2 / float22bfloat162_rn(_from_float2) / bfloat1622float2 (the real
    TIRx's names, on bfloat16 pairs in 32-bit words): the simulator against models written
    from the PTX ISA, and the one-instruction CUDA tirx writes."""
    k = define(BF16X2_SOURCE, tmp_path, "k")
    a, b, x, y, w, o, f = _bf16x2_inputs()
    tirx.compile(k, target="sim")(a, b, x, y, w, o, f)
    for i in range(64):
        for shift in (0, 16):
            ha, hb = int(a[i] >> shift) & 0xFFFF, int(b[i] >> shift) & 0xFFFF
            assert int(o[0, i] >> shift) & 0xFFFF == _hmax_model(ha, hb, True), (i, ha, hb)
            assert int(o[1, i] >> shift) & 0xFFFF == _hmax_model(ha, hb, False), (i, ha, hb)
        want = _round_bf16_model(x[i]) | (_round_bf16_model(y[i]) << 16)
        assert int(o[2, i]) == want == int(o[3, i]), (i, x[i], y[i])
        lo, hi = int(a[i]) & 0xFFFF, int(a[i]) >> 16
        assert int(f[i]) == (lo << 16) | (hi << 48), i
    source = tirx.compile(k, target="cuda -arch=sm_90").source
    assert 'asm("max.bf16x2 %0, %1, %2;"' in source and 'asm("min.bf16x2' in source
    assert '"cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(y), "f"(x)' in source
    assert source.count("tirx_pack_bf16x2(") == 3  # its definition and two calls


def test_kernels_without_packed_pairs_get_no_packed_helpers(tmp_path):
    k = _misuse_kernel("O[i] = T.max(X[i], 1.0)", tmp_path)
    source = tirx.compile(k, target="cuda -arch=sm_90").source
    assert "tirx_fmax" in source and "tirx_hmax2" not in source


@pytest.mark.gpu
def test_gpu_packed_bfloat16_pairs_equal_the_simulator(tmp_path):
    k = define(BF16X2_SOURCE, tmp_path, "k")
    sim = _bf16x2_inputs()
    tirx.compile(k, target="sim")(*sim)
    gpu = _cuda_run(k, *_bf16x2_inputs())
    np.testing.assert_array_equal(gpu[5], sim[5])
    np.testing.assert_array_equal(gpu[6], sim[6])


def test_truncdiv_by_zero_at_run_time_is_a_simulation_error(tmp_path):
    k = define(
        """
        @T.function
        def k(A: T.Tensor((32,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            i = T.cuda.lane_id()
            A[i] = T.truncdiv(7, A[i])
        """,
        tmp_path,
        "k",
    )
    a = np.ones(32, dtype=np.int32)
    a[5] = 0
    with pytest.raises(tirx.SimulationError, match=r"division by zero \(T.truncdiv\)") as e:
        tirx.compile(k, target="sim")(a)
    assert "lane 5" in str(e.value)


def test_shift_counts_out_of_range_stop_the_simulator(tmp_path):
    """A shift by the operand's width or more is undefined in C (the GPU's shl clamps, nvcc
    may fold anything): the simulator stops at the first lane that does it."""
    k = define(
        """
        @T.function
        def k(A: T.Tensor((32,), "int32"), S: T.Tensor((32,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            i = T.cuda.lane_id()
            A[i] = T.shift_left(A[i], S[i])
        """,
        tmp_path,
        "k",
    )
    s = np.full(32, 3, dtype=np.int32)
    s[9] = 32
    with pytest.raises(tirx.SimulationError, match="shift count out of range") as e:
        tirx.compile(k, target="sim")(np.ones(32, np.int32), s)
    assert "lane 9" in str(e.value)


# ----------------------------------------------------------------------------------- misuse

MISUSE = [
    # (the wrong line, what the message says, the hint says, the corrected twin)
    ("O[i] = T.exp(I[i])", "T.exp takes a float value", r"T.exp\(T.float32\(x\)\)",
     "O[i] = T.exp(T.float32(I[i]))"),
    ("O[i] = T.exp(1)", "T.exp takes a float value, not an integer constant", "1.0",
     "O[i] = T.exp(1.0)"),
    ("O[i] = T.sqrt(I[i])", "T.sqrt takes a float value", "T.float32", "O[i] = T.sqrt(X[i])"),
    ("O[i] = T.pow(I[i], I[i])", "T.pow takes a float value", "T.float32",
     "O[i] = T.pow(X[i], X[i])"),
    ("O[i] = T.ldexp(X[i], X[i])", "T.ldexp's exponent is an integer, not a float32 value",
     r"T.ldexp\(x, T.int32\(n\)\)", "O[i] = T.ldexp(X[i], I[i])"),
    ("I[i] = T.clz(X[i])", "T.clz takes an integer value", "float_as_uint",
     "I[i] = T.clz(T.cuda.float_as_uint(X[i]))"),
    ("I[i] = T.clz(C[i])", "T.clz takes a 32-bit or 64-bit integer, not int8", "T.uint32",
     "I[i] = T.clz(T.int32(C[i]))"),
    ("I[i] = T.popcount(X[i])", "T.popcount takes an integer value", "T.int32",
     "I[i] = T.popcount(I[i])"),
    ("I[i] = T.bitwise_and(X[i], I[i])", "T.bitwise_and takes an integer value", "float_as_uint",
     "I[i] = T.bitwise_and(I[i], I[i])"),
    ("I[i] = T.shift_left(I[i], 32)", "shift", "", "I[i] = T.shift_left(I[i], 31)"),
    ("O[i] = T.exp(X[i], X[i])", "T.exp takes one value, got 2", r"T.exp\(x\)",
     "O[i] = T.exp(X[i])"),
    ("O[i] = T.fma(X[i], X[i])", "T.fma takes three values, got 2", r"T.fma\(x, y, z\)",
     "O[i] = T.fma(X[i], X[i], X[i])"),
    ("O[i] = T.exp(x=X[i])", "T.exp takes no keyword argument 'x'", "positionally",
     "O[i] = T.exp(X[i])"),
    ("O[i] = T.exp(X)", "T.exp takes scalar values, got a tensor", r"x\[i\]",
     "O[i] = T.exp(X[i])"),
    ("I[i] = T.truncdiv(I[i], 0)", "T.truncdiv by zero", "nonzero",
     "I[i] = T.truncdiv(I[i], 3)"),
    ("O[i] = T.infinity(ty=\"int32\")", "int32 has no infinity", "max_value",
     "O[i] = T.infinity(ty=\"float32\")"),
    ("O[i] = T.infinity(ty=\"float8_e4m3fn\")", "float8_e4m3fn has no infinity", "448",
     "O[i] = T.max_value(ty=\"float8_e4m3fn\")"),
    ("O[i] = T.max_value()", "needs the dtype", "ty=", "O[i] = T.max_value(ty=\"float32\")"),
    ("O[i] = T.exp(F[i])", "T.exp does not compute on float8_e4m3fn", r"T.float32\(x\)",
     "O[i] = T.exp(T.float32(F[i]))"),
    ("O[i] = F[i] + 1.0", "'\\+' does not compute on float8_e4m3fn", "T.float32",
     "O[i] = T.float32(F[i]) + 1.0"),
    ("O[i] = T.max(F[i], X[i])", "T.max does not compute on float8_e4m3fn", "T.float32",
     "O[i] = T.max(T.float32(F[i]), X[i])"),
    ("O[i] = T.cuda.half2float(X[i])", "T.cuda.half2float takes a float16 value, not a float32",
     r"T.float32\(T.float16\(x\)\)", "O[i] = T.cuda.half2float(T.float16(X[i]))"),
    ("O[i] = T.cuda.bfloat162float(T.float16(X[i]))",
     "T.cuda.bfloat162float takes a bfloat16 value, not a float16", "T.bfloat16",
     "O[i] = T.cuda.bfloat162float(T.bfloat16(X[i]))"),
    ("I[i] = T.cuda.smem_addr_from_uint64(X[i])", "takes an integer value, not a float32",
     "T.int32", "I[i] = T.cuda.smem_addr_from_uint64(T.uint64(I[i]))"),
    ("I[i] = T.cuda.hmax2(X[i], I[i])", "T.cuda.hmax2 takes an integer value, not a float32",
     "float_as_uint", "I[i] = T.cuda.hmax2(I[i], I[i])"),
    ("I[i] = T.cuda.float22bfloat162_rn(I[i], X[i])",
     "T.cuda.float22bfloat162_rn takes a float value, not an int32", "T.float32",
     "I[i] = T.cuda.float22bfloat162_rn(X[i], X[i])"),
    ("I[i] = T.cuda.bfloat1622float2(C[i])", "takes a 32-bit integer, not int8", "T.uint32",
     "I[i] = T.cuda.bfloat1622float2(T.uint32(C[i]))"),
]  # fmt: skip


def _misuse_kernel(line: str, tmp_path):
    return define(
        f"""
        @T.function
        def k(X: T.Tensor((32,), "float32"), I: T.Tensor((32,), "int32"),
              C: T.Tensor((32,), "int8"), F: T.Tensor((32,), "float8_e4m3fn"),
              O: T.Tensor((32,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            i = T.cuda.lane_id()
            {line}
        """,
        tmp_path,
        "k",
    )


@pytest.mark.parametrize("line,message,hint,twin", MISUSE, ids=[m[0] for m in MISUSE])
def test_misuse_is_refused_at_the_users_line(line, message, hint, twin, tmp_path):
    with pytest.raises(TirxError) as e:
        tirx.compile(_misuse_kernel(line, tmp_path), target="sim")
    text = str(e.value)
    assert re.search(message, text), text
    assert re.search(hint, e.value.hint or ""), e.value.hint
    assert caret_line(text) == line
    tirx.compile(_misuse_kernel(twin, tmp_path), target="sim")  # the corrected twin compiles


ODD_CALLS = [
    'T.exp("a")', "T.exp(True)", "T.clz(2**70)", "T.infinity(ty=None)", "T.infinity(ty=123)",
    'T.max(X[i], "a")', "T.abs(-2**70)", "T.shift_left(1.5, 2)", "T.exp()",
    'T.min_value(ty="bool")', 'T.max_value("float32", 1)', "T.exp(*X)", "T.exp(**{})",
    "T.clz(I)", "T.cuda.ffs_u32(X[i])", "T.cuda.float_as_uint(T.float64(1.0))",
    "T.cuda.uint_as_float(X[i])", "T.fma(1.0, 2.0, 3)", "T.ceildiv(7, 0)", "T.ceildiv(I[i], 0)",
    "T.bitwise_not(X[i])", "T.exp(X[0:2])", "T.round(I[i])", "T.truncdiv(X[i], 2)",
]  # fmt: skip


@pytest.mark.parametrize("call", ODD_CALLS)
def test_odd_calls_get_a_tirx_error_and_nothing_else(call, tmp_path):
    """No internal exception reaches the user: each of these is a TirxError with a hint."""
    with pytest.raises(TirxError) as e:
        tirx.compile(_misuse_kernel(f"O[i] = {call}", tmp_path), target="sim")
    assert caret_line(str(e.value)) == f"O[i] = {call}"


def test_floordiv_and_floormod_on_floats_are_floor_division(tmp_path):
    k = _misuse_kernel("O[i] = T.floordiv(X[i], 2.0) + 100.0 * T.floormod(X[i], 3.0)", tmp_path)
    x = np.linspace(-9, 9, 32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    tirx.compile(k, target="sim")(x, np.zeros(32, np.int32), np.zeros(32, np.int8),
                                  np.zeros(32, np.uint8), out)  # fmt: skip
    want = np.floor(x / np.float32(2)) + np.float32(100) * (x - np.floor(x / 3) * 3)
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-4)


def test_an_fp8_mma_is_refused_with_what_to_do(tmp_path):
    body = (
        'T.ptx["mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"](d[0], d[1], d[2], d[3], '
        "a[0], a[1], a[2], a[3], b[0], b[1], d[0], d[1], d[2], d[3])"
    )
    k = define(
        f"""
        @T.function
        def k(O: T.Tensor((4,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            a = T.alloc_local((4,), "uint32")
            b = T.alloc_local((2,), "uint32")
            d = T.alloc_local((4,), "float32")
            {body}
        """,
        tmp_path,
        "k",
    )
    with pytest.raises(ContractError) as e:
        tirx.compile(k, target="sim")
    assert ".e4m3" in str(e.value)
    assert "8-bit float mma" in e.value.hint and "T.float16(x)" in e.value.hint


# ------------------------------------------------------------------------------------ GPU


def _cuda_run(kernel, *arrays, arch: str = "sm_90"):
    import torch

    exe = tirx.compile(kernel, target=f"cuda -arch={arch}")
    tensors = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in arrays]
    exe(*tensors)
    torch.cuda.synchronize()
    return [t.cpu().numpy() for t in tensors]


@pytest.mark.gpu
@pytest.mark.parametrize("in_dtype", ["float32", "float64", "float16"])
def test_gpu_float_intrinsics_within_cudas_bound_of_the_simulator(float_kernels, in_dtype):
    """GPU and simulator on the same inputs: bit-equal where CUDA documents 0 ulp, within
    the documented bound otherwise (the simulator rounds once, so float32 results differ by
    at most the bound; float64 ones by the bound plus numpy's own ulp)."""
    out_dtype = "float64" if in_dtype == "float64" else "float32"
    x = _all_float_inputs(in_dtype, seed=11)
    sim = np.zeros((len(FLOAT_ROWS), N), dtype=out_dtype)
    tirx.compile(float_kernels[in_dtype], target="sim")(x, sim)
    _, gpu = _cuda_run(float_kernels[in_dtype], x, np.zeros_like(sim))
    bits = 64 if in_dtype == "float64" else 32
    for k, row in enumerate(FLOAT_ROWS):
        bound = ULP_BOUND[(row.op, bits)]
        bound += 1 if bits == 64 and bound else 0
        d = ulp_distance(gpu[k], sim[k])
        assert d.max() <= bound, (row.name, in_dtype, gpu[k][np.argmax(d)], sim[k][np.argmax(d)])


@pytest.mark.gpu
@pytest.mark.parametrize("row", INT_ROWS, ids=_int_row_id)
def test_gpu_bit_intrinsics_equal_the_simulator(row, tmp_path):
    k = _int_kernel(row, tmp_path)
    a, b = int_inputs(row, 100 + INT_ROWS.index(row))
    sim = np.zeros(N, dtype=np.int64)
    tirx.compile(k, target="sim")(a, b, sim)
    gpu = _cuda_run(k, a, b, np.zeros(N, np.int64))[2]
    np.testing.assert_array_equal(gpu, sim, err_msg=row.expr)


_LDEXP = """
@T.function
def k(X: T.Tensor((64,), "float32"), N: T.Tensor((64,), "int32"), W: T.Tensor((64,), "int64"),
      O: T.Tensor((3, 64), "float32"), D: T.Tensor((64,), "float64")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    i = T.cuda.thread_idx("x")
    O[0, i] = T.ldexp(X[i], N[i])
    O[1, i] = T.ldexp(X[i], 3)
    O[2, i] = T.ldexp(X[i], W[i])
    D[i] = T.ldexp(T.float64(X[i]), N[i] * 8)
"""


def _ldexp_inputs():
    rng = np.random.default_rng(5)
    x = rng.uniform(-4, 4, 64).astype(np.float32)
    x[:4] = [np.inf, np.nan, -0.0, 1.5e-45]  # a subnormal
    n = np.concatenate([np.arange(-160, 160, 10), rng.integers(-20, 20, 32)]).astype(np.int32)
    w = n.astype(np.int64)
    return x, n, w


def test_ldexp_is_exact_and_takes_an_integer_exponent(tmp_path):
    """``T.ldexp(x, n)`` = x · 2**n rounded once (CUDA's ldexpf is exact): subnormal results,
    overflow to infinity and underflow to zero included; the exponent is C's int."""
    k = define(_LDEXP, tmp_path, "k")
    x, n, w = _ldexp_inputs()
    o, d = np.zeros((3, 64), np.float32), np.zeros(64)
    tirx.compile(k, target="sim")(x, n, w, o, d)
    with np.errstate(over="ignore"):  # the overflows to infinity are part of the check
        np.testing.assert_array_equal(o[0], np.ldexp(x, n))
        np.testing.assert_array_equal(d, np.ldexp(x.astype(np.float64), n * 8))
    np.testing.assert_array_equal(o[1], x * np.float32(8))
    np.testing.assert_array_equal(o[2], o[0])
    src = tirx.compile(k, target="cuda -arch=sm_90").source
    assert "ldexpf(X[((int)threadIdx.x)], N[((int)threadIdx.x)])" in src
    assert "ldexpf(X[((int)threadIdx.x)], 3)" in src and "ldexp(((double)(X[" in src


@pytest.mark.gpu
def test_gpu_ldexp_equals_the_simulator(tmp_path):
    k = define(_LDEXP, tmp_path, "k")
    x, n, w = _ldexp_inputs()
    o, d = np.zeros((3, 64), np.float32), np.zeros(64)
    tirx.compile(k, target="sim")(x, n, w, o, d)
    got = _cuda_run(k, x, n, w, np.zeros_like(o), np.zeros_like(d))
    assert (ulp_distance(got[3], o) == 0).all()
    assert (ulp_distance(got[4], d) == 0).all()


@pytest.mark.gpu
def test_gpu_max_min_nan_and_predicates_equal_the_simulator(tmp_path):
    k = define(
        """
        @T.function
        def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"),
              O: T.Tensor((4, 64), "float32"), P: T.Tensor((3, 64), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            i = T.cuda.thread_idx("x")
            O[0, i] = T.max(A[i], B[i])
            O[1, i] = T.min(A[i], B[i])
            O[2, i] = T.cuda.uint_as_float(T.cuda.float_as_uint(A[i]) ^ T.uint32(1))
            O[3, i] = T.fma(A[i], B[i], -A[i])
            P[0, i] = T.isnan(A[i])
            P[1, i] = T.isinf(B[i])
            P[2, i] = T.isfinite(A[i] * B[i])
        """,
        tmp_path,
        "k",
    )
    rng = np.random.default_rng(3)
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    a[:8] = [np.nan, 1, np.inf, -np.inf, -0.0, 0.0, np.nan, 5]
    b[:8] = [1, np.nan, -np.inf, np.inf, 0.0, -0.0, np.nan, 5]
    sim_o, sim_p = np.zeros((4, 64), np.float32), np.zeros((3, 64), np.int32)
    tirx.compile(k, target="sim")(a, b, sim_o, sim_p)
    _, _, gpu_o, gpu_p = _cuda_run(k, a, b, np.zeros_like(sim_o), np.zeros_like(sim_p))
    np.testing.assert_array_equal(gpu_p, sim_p)
    assert (ulp_distance(gpu_o, sim_o) == 0).all()


# ------------------------------------------------------------------- against the real TIRx

# the rows whose C the real TIRx 0.1.0a4 spells as tirx does (it has no CUDA for T.fma; its
# T.max/T.min are inline selects, the same expression as tirx's helper)
_SAME_C = [r for r in FLOAT_ROWS if r.op not in (M.FMA, M.FMAX, M.FMIN)]


@pytest.mark.reference
def test_the_real_tirx_calls_the_same_cuda_functions(tmp_path):
    """The CUDA function each float32 intrinsic calls is the one the real TIRx calls (opt-in:
    ``TIRX_REFERENCE_PYTHON`` names a python with apache-tvm-tirx==0.1.0a4)."""
    lines = "\n".join(
        f"    O[{k}, i] = T.{r.name}({', '.join(f'X[{k}, {j}, i]' for j in range(r.arity))})"
        for k, r in enumerate(_SAME_C)
    )
    path = tmp_path / "ref_kernel.py"
    path.write_text(
        "from tvm_tirx.script import tirx as T\n\n\n@T.function\n"
        f'def kernel(X: T.Tensor(({len(_SAME_C)}, 3, {N}), "float32"), '
        f'O: T.Tensor(({len(_SAME_C)}, {N}), "float32")):\n'
        f"    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={N}))\n"
        f'    i = T.cuda.thread_idx("x")\n{lines}\n'
    )
    theirs = reference_cuda(path, "kernel")
    for r in _SAME_C:
        name = r.c32.split("(")[0] if r.op is not M.SIGMOID else "expf"
        assert f"{name}(" in theirs, (r.name, name)
    assert "1.0" in theirs and "expf((" in theirs  # sigmoid: 1 / (1 + expf(0 - x))
