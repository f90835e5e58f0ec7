"""The math and bit intrinsics as the GPU computes them, written from the CUDA documentation.

The sources are the CUDA C++ Programming Guide's "Mathematical Functions" appendix (the
maximum ulp error of each standard function, as CUDA compiles it without ``--use_fast_math``)
and the CUDA Math API's integer intrinsics (``__clz``, ``__popc``, ``__ffs``): this module reads
none of tirx's code generator.

* Functions CUDA documents as exact (0 ulp: ``sqrtf``, ``fmaf``, ``floorf``, ``ceilf``,
  ``truncf``, ``nearbyintf``, ``fabsf``, ``fmaxf``, ``fmodf``, ``copysignf``, ``nextafterf``,
  ``ldexpf``) are computed exactly here: the result equals
  the GPU's bit for bit.
* The others (``expf`` 2 ulp, ``logf`` 1 ulp, ...) are computed in float64 and rounded once to
  float32, which is within half an ulp of the exact value; the GPU is within the documented
  bound (:data:`ULP_BOUND`) of it, so the two differ by at most that many ulps. Tests compare
  against the bound, not for equality.
* float64 functions use numpy's float64 functions (within an ulp or so of exact).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...sim.expr import first_tid
from ...sim.faults import Fault
from ...sim.numeric import canonical_nan, f32_to_bf16_bits, flush, min_max_choice
from .nodes import MathCall, MathOp

__all__ = ["ULP_BOUND", "math_eval", "fma_exact", "eval_MathCall"]

M = MathOp
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)

#: The CUDA Programming Guide's maximum ulp error, by (function, float width); 0 means the
#: result is the correctly rounded one. Sigmoid is no CUDA function: it is ``1 / (1 + exp(-x))``
#: with ``expf``'s 2 ulp, one rounded addition and one IEEE division, at most 6 ulp of the result.
ULP_BOUND: dict[tuple[MathOp, int], int] = {
    **{(op, 32): 0 for op in (M.SQRT, M.FABS, M.FLOOR, M.CEIL, M.NEARBYINT, M.TRUNC, M.FMA)},
    **{(op, 64): 0 for op in (M.SQRT, M.FABS, M.FLOOR, M.CEIL, M.NEARBYINT, M.TRUNC, M.FMA)},
    **{(op, 32): 0 for op in (M.FMAX, M.FMIN)},
    **{(op, 64): 0 for op in (M.FMAX, M.FMIN)},
    **{(op, w): 0 for op in (M.FMOD, M.COPYSIGN, M.NEXTAFTER, M.LDEXP) for w in (32, 64)},
    (M.EXP, 32): 2,
    (M.EXP2, 32): 2,
    (M.EXP10, 32): 2,
    (M.LOG, 32): 1,
    (M.LOG2, 32): 1,
    (M.LOG10, 32): 2,
    (M.RSQRT, 32): 2,
    (M.TANH, 32): 2,
    (M.SIN, 32): 2,
    (M.COS, 32): 2,
    (M.ERF, 32): 2,
    (M.POW, 32): 4,
    (M.SIGMOID, 32): 6,
    (M.TAN, 32): 4,
    (M.ASIN, 32): 2,
    (M.ACOS, 32): 2,
    (M.ATAN, 32): 2,
    (M.SINH, 32): 3,
    (M.COSH, 32): 2,
    (M.ASINH, 32): 3,
    (M.ACOSH, 32): 4,
    (M.ATANH, 32): 3,
    (M.LOG1P, 32): 1,
    (M.ATAN2, 32): 3,
    (M.HYPOT, 32): 3,
    # __fdividef, for 2**-126 <= |y| <= 2**126 (elsewhere: 0, or NaN for an infinite x)
    (M.FDIVIDEF, 32): 2,
    (M.EXP, 64): 1,
    (M.EXP2, 64): 1,
    (M.EXP10, 64): 1,
    (M.LOG, 64): 1,
    (M.LOG2, 64): 1,
    (M.LOG10, 64): 1,
    (M.RSQRT, 64): 1,
    (M.TANH, 64): 2,
    (M.SIN, 64): 2,
    (M.COS, 64): 2,
    (M.ERF, 64): 2,
    (M.POW, 64): 2,
    (M.SIGMOID, 64): 6,
    (M.TAN, 64): 2,
    (M.ASIN, 64): 2,
    (M.ACOS, 64): 2,
    (M.ATAN, 64): 2,
    (M.SINH, 64): 2,
    (M.COSH, 64): 1,
    (M.ASINH, 64): 3,
    (M.ACOSH, 64): 3,
    (M.ATANH, 64): 2,
    (M.LOG1P, 64): 1,
    (M.ATAN2, 64): 2,
    (M.HYPOT, 64): 2,
}


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 (numpy has none): ``math.erf`` per element, which is within an ulp."""
    import math

    flat = np.asarray(x, dtype=F64)
    return np.vectorize(math.erf, otypes=[F64])(flat) if flat.size else flat


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# Each function on float64 operands (the exact-or-nearly value the result is rounded from).
_REAL: dict[MathOp, Callable] = {
    M.EXP: np.exp,
    M.EXP2: np.exp2,
    M.EXP10: lambda x: np.power(10.0, x),
    M.LOG: np.log,
    M.LOG2: np.log2,
    M.LOG10: np.log10,
    M.SQRT: np.sqrt,  # exact after one rounding to float32: 53 >= 2 * 24 + 2 bits
    M.RSQRT: lambda x: 1.0 / np.sqrt(x),
    M.TANH: np.tanh,
    M.SIGMOID: _sigmoid,
    M.SIN: np.sin,
    M.COS: np.cos,
    M.ERF: _erf,
    M.POW: np.power,
    M.FABS: np.abs,
    M.FLOOR: np.floor,
    M.CEIL: np.ceil,
    M.NEARBYINT: np.rint,  # round half to even (the default rounding mode)
    M.TRUNC: np.trunc,
    M.TAN: np.tan,
    M.ASIN: np.arcsin,
    M.ACOS: np.arccos,
    M.ATAN: np.arctan,
    M.SINH: np.sinh,
    M.COSH: np.cosh,
    M.ASINH: np.arcsinh,
    M.ACOSH: np.arccosh,
    M.ATANH: np.arctanh,
    M.LOG1P: np.log1p,
    M.ATAN2: np.arctan2,
    M.HYPOT: np.hypot,
    # exact: the remainder and the sign copy of float32 values are float32 values
    M.FMOD: np.fmod,
    M.COPYSIGN: np.copysign,
}


def _round_to_odd_sum(p: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``p + z`` (float64) rounded to odd: the neighbour of the exact sum whose last bit is
    set when the sum is inexact. Rounding that once more to float32 (24 bits, fewer than
    53 - 2) gives the correctly rounded float32 sum: no double rounding."""
    s = p + z
    bp = s - p
    err = (p - (s - bp)) + (z - bp)  # Knuth's two-sum: p + z == s + err exactly
    bits = s.view(np.uint64)
    fix = np.isfinite(s) & (err != 0) & ((bits & np.uint64(1)) == 0)
    if np.any(fix):
        toward = np.where(err > 0, np.inf, -np.inf)
        s = np.where(fix, np.nextafter(s, toward), s)
    return s


def fma_exact(x, y, z, bits: int) -> np.ndarray:
    """``x * y + z`` rounded once (IEEE fusedMultiplyAdd), in float32 or float64."""
    x, y, z = (np.asarray(v, dtype=F64) for v in (x, y, z))
    if bits == 32:  # the float32 product is exact in float64 (48 significand bits)
        # IEEE's NaN and infinities come out as they should (inf · 0, inf - inf: NaN; the
        # two-sum's error term of an infinite sum is NaN and unused): numpy need not warn
        with np.errstate(invalid="ignore", over="ignore"):
            return _round_to_odd_sum(x * y, z).astype(F32)
    from fractions import Fraction

    def one(a, b, c):
        if not all(np.isfinite((a, b, c))):
            return a * b + c
        exact = Fraction(a) * Fraction(b) + Fraction(c)
        try:
            return float(exact) if exact != 0 else (a * b + c)  # keeps the sign of zero
        except OverflowError:
            return np.inf if exact > 0 else -np.inf

    shape = np.broadcast(x, y, z).shape
    return np.vectorize(one, otypes=[F64])(x, y, z).reshape(shape)


def _fmax(a, b):
    """The real TIRx's ``T.max`` on floats: ``a if (a > b or a != a) else b`` (NaN wins)."""
    return np.where((a > b) | np.isnan(a), a, b)


def _fmin(a, b):
    return np.where((a < b) | np.isnan(a), a, b)


def _clz(x: np.ndarray) -> np.ndarray:
    """``__clz``/``__clzll``: the leading zero bits of the operand's pattern (its width for 0)."""
    bits = x.dtype.itemsize * 8
    u = x.view(np.uint32 if bits == 32 else np.uint64)
    length = np.zeros(u.shape, dtype=np.int32)  # the position of the highest set bit, plus 1
    for i in range(bits):
        length = np.where((u >> u.dtype.type(i)) != 0, i + 1, length)
    return (bits - length).astype(np.int32)


def _popcount(x: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    u = x.view(np.uint32 if bits == 32 else np.uint64)
    n = np.zeros(u.shape, dtype=np.int64)
    for i in range(bits):
        n = n + ((u >> u.dtype.type(i)) & u.dtype.type(1))
    return n.astype(x.dtype)


def _ffs(x: np.ndarray) -> np.ndarray:
    """``__ffs``: 1 + the position of the lowest set bit, 0 when none is set."""
    u = x.astype(np.uint32)
    low = u & (~u + np.uint32(1))  # the lowest set bit alone
    pos = np.zeros(u.shape, dtype=np.int32)
    for i in range(32):
        pos = np.where(low == np.uint32(1 << i), i + 1, pos)
    return pos


def _bf16x2_minmax(op: MathOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """PTX ``max.bf16x2`` / ``min.bf16x2`` (ISA 9.7.4, "Half Precision Floating Point
    Instructions: max, min") on uint32 words, each half separately: the larger (smaller)
    operand, +0 above -0; a NaN loses to a number; two NaNs give the canonical NaN 0x7FFF.
    The result is one operand's bits (nothing is rounded)."""
    a, b = np.asarray(a, dtype=np.uint32), np.asarray(b, dtype=np.uint32)
    out = np.zeros(np.broadcast(a, b).shape, dtype=np.uint32)
    for shift in (0, 16):
        ha = (a >> np.uint32(shift)) & np.uint32(0xFFFF)
        hb = (b >> np.uint32(shift)) & np.uint32(0xFFFF)
        x, y = (np.asarray(h << np.uint32(16), dtype=np.uint32).view(F32) for h in (ha, hb))
        take_a, both_nan = min_max_choice("max" if op is M.HMAX2 else "min", x, y)
        h = np.where(both_nan, np.uint32(0x7FFF), np.where(take_a, ha, hb))
        out |= h.astype(np.uint32) << np.uint32(shift)
    return out


def _fdividef(x, y) -> np.ndarray:
    """CUDA's ``__fdividef(x, y)``, PTX ``div.approx.f32``, computed as the ISA says, ``x *
    (1/y)``: the reciprocal as the GPU's approximate one is (subnormal inputs and results
    flushed to zero), but correctly rounded, then one float32 multiplication. That gives the
    documented special cases: for 2**126 < |y| < 2**128 the reciprocal is flushed, so the
    result is 0 (NaN for an infinite x); y = 0 gives an infinite reciprocal. A subnormal y is
    taken as it is (2.5 / 1e-38 is 2.5e38 on an H100, not infinite). Within the ISA's
    2 ulp of x / y elsewhere (the GPU's reciprocal is not correctly rounded, so the two may
    differ by a few ulp); a NaN result is the canonical NaN, as the GPU writes it."""
    x, y = np.asarray(x, dtype=F32), np.asarray(y, dtype=F32)
    with np.errstate(all="ignore"):
        r = flush((1.0 / y.astype(F64)).astype(F32))
        return canonical_nan(np.asarray(x * r, dtype=F32))


def _bf16_word(x) -> np.ndarray:
    return f32_to_bf16_bits(np.asarray(x, dtype=F32)).astype(np.uint32)


def _trunc_division(op: MathOp, first_tid) -> Callable:
    def f(idx, x, y):
        zero = y == 0
        if np.any(zero):
            raise Fault(
                f"integer division by zero (T.{op.value})",
                first_tid(zero, idx),
                "guard the divisor",
            )
        # C rounds the quotient toward zero and the remainder takes the dividend's sign,
        # which is what numpy's fmod does for integers; the quotient is then exact
        r = np.fmod(x, y)
        return np.floor_divide(x - r, y) if op is M.TRUNCDIV else r

    return f


def math_eval(e: MathCall, first_tid) -> Callable:
    """``f(idx, *operand values) -> values`` for the intrinsic ``e`` (operands already in
    their dtypes' compute types; ``first_tid(mask, idx)`` names the faulting thread)."""
    op = e.op
    bits = e.args[0].dtype.bits if e.args else 32
    if op in _REAL:
        real = _REAL[op]
        out = F32 if bits == 32 else F64

        def f(idx, *xs):
            with np.errstate(all="ignore"):
                r = np.asarray(real(*(np.asarray(x, dtype=F64) for x in xs))).astype(out)
            return canonical_nan(r) if out is F32 else r  # float32's NaN, as the GPU's

        return f
    if op is M.FMA:
        return lambda idx, x, y, z: fma_exact(x, y, z, bits)
    if op is M.NEXTAFTER:  # a step of the result's own type, not of float64
        t = F32 if bits == 32 else F64
        return lambda idx, x, y: np.nextafter(np.asarray(x, dtype=t), np.asarray(y, dtype=t))
    if op is M.LDEXP:  # x * 2**n in float64 is exact for a float32 x: one rounding after it
        t = F32 if bits == 32 else F64

        def ldexp(idx, x, n):
            n = np.clip(np.asarray(n, dtype=np.int64), -2200, 2200)  # beyond: 0 or inf alike
            with np.errstate(all="ignore"):
                return np.ldexp(np.asarray(x, dtype=F64), n).astype(t)

        return ldexp
    if op in (M.FMAX, M.FMIN):
        g = _fmax if op is M.FMAX else _fmin
        return lambda idx, a, b: g(np.asarray(a), np.asarray(b))
    if op is M.ISNAN:
        return lambda idx, x: np.isnan(x)
    if op is M.ISINF:
        return lambda idx, x: np.isinf(x)
    if op is M.ISFINITE:
        return lambda idx, x: np.isfinite(x)
    if op in (M.TRUNCDIV, M.TRUNCMOD):
        return _trunc_division(op, first_tid)
    if op is M.CLZ:
        return lambda idx, x: _clz(np.asarray(x))
    if op is M.POPCOUNT:
        return lambda idx, x: _popcount(np.asarray(x))
    if op is M.FFS:
        return lambda idx, x: _ffs(np.asarray(x))
    if op in (M.HMAX2, M.HMIN2):
        return lambda idx, a, b: _bf16x2_minmax(op, a, b)
    if op is M.FDIVIDEF:
        return lambda idx, x, y: _fdividef(x, y)
    if op is M.PACK_BF16X2:
        # each half as the scalar conversion (cvt.rn.bf16.f32; a NaN 0x7fff, as measured
        # for the packed one too), x the low half
        return lambda idx, x, y: _bf16_word(x) | (_bf16_word(y) << np.uint32(16))
    raise NotImplementedError(f"no simulator semantics for T.{op.value}")


def eval_MathCall(compiler, e: MathCall):
    """The simulator's rule for a math or bit intrinsic (semantics from CUDA's docs, above)."""
    fs = [compiler.compile(a) for a in e.args]
    g = math_eval(e, first_tid)
    return lambda idx: g(idx, *[f(idx) for f in fs])
