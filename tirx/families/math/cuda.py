"""CUDA C for the math and bit intrinsics (:class:`.nodes.MathCall`).

The names are the CUDA math library's, as the real TIRx emits them: ``expf``/``exp`` by
operand width, ``nearbyintf`` for ``T.round``, ``__clz``/``__clzll``, ``__popc``/``__popcll``.
tirx compiles without ``--use_fast_math``, so ``expf`` is the full-range library function
(2 ulp), not ``__expf``; the simulator's bounds (tirx/sim/intrinsics.py) are the library's.
The operands arrive in the call's compute type (the IR casts them), so no conversion is
written here. All of these functions are built into NVRTC: no header is needed.
"""

from __future__ import annotations

from .nodes import MathCall, MathOp

__all__ = ["PRELUDE", "PRELUDE_BF16X2", "PRELUDES", "c_math", "leave_MathCall"]

M = MathOp

#: Helpers the generated code declares once. ``T.max``/``T.min`` on floats give NaN when
#: either operand is NaN (the real TIRx's ``(a > b || a != a) ? a : b``), unlike ``fmaxf``.
PRELUDE = r"""template <typename T> TIRX_DEVICE T tirx_fmax(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> TIRX_DEVICE T tirx_fmin(T a, T b) { return (a < b || a != a) ? a : b; }
"""
#: bfloat16 pairs in 32-bit words (sm_80), without CUDA's bf16 header: ``T.cuda.hmax2`` / ``hmin2``
#: are PTX's ``max``/``min.bf16x2`` (CUDA's ``__hmax2`` on ``__nv_bfloat162``), and
#: ``T.cuda.float22bfloat162_rn`` is ``cvt.rn.bf16x2.f32``, whose first source is the high half
#: (emitted only where called)
PRELUDE_BF16X2 = r"""TIRX_DEVICE unsigned int tirx_hmax2(unsigned int a, unsigned int b) { unsigned int d; asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b)); return d; }
TIRX_DEVICE unsigned int tirx_hmin2(unsigned int a, unsigned int b) { unsigned int d; asm("min.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b)); return d; }
TIRX_DEVICE unsigned int tirx_pack_bf16x2(float x, float y) { unsigned int d; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(y), "f"(x)); return d; }
"""
PRELUDES = (PRELUDE, PRELUDE_BF16X2)

# the float32 function names; the float64 ones drop the trailing "f"
_FLOAT_FNS = {
    M.EXP: "expf",
    M.EXP2: "exp2f",
    M.EXP10: "exp10f",
    M.LOG: "logf",
    M.LOG2: "log2f",
    M.LOG10: "log10f",
    M.SQRT: "sqrtf",
    M.RSQRT: "rsqrtf",
    M.TANH: "tanhf",
    M.SIN: "sinf",
    M.COS: "cosf",
    M.ERF: "erff",
    M.TAN: "tanf",
    M.ASIN: "asinf",
    M.ACOS: "acosf",
    M.ATAN: "atanf",
    M.SINH: "sinhf",
    M.COSH: "coshf",
    M.ASINH: "asinhf",
    M.ACOSH: "acoshf",
    M.ATANH: "atanhf",
    M.LOG1P: "log1pf",
    M.ATAN2: "atan2f",
    M.HYPOT: "hypotf",
    M.FMOD: "fmodf",
    M.COPYSIGN: "copysignf",
    M.NEXTAFTER: "nextafterf",
    M.LDEXP: "ldexpf",  # its exponent an int, as C's
    M.POW: "powf",
    M.FABS: "fabsf",
    M.FLOOR: "floorf",
    M.CEIL: "ceilf",
    M.NEARBYINT: "nearbyintf",
    M.TRUNC: "truncf",
    M.FMA: "fmaf",
}


def c_math(e: MathCall, args: tuple[str, ...]) -> str:
    """C for ``e`` given the C of its operands."""
    op = e.op
    wide = bool(e.args) and e.args[0].dtype.bits == 64
    if op in _FLOAT_FNS:
        name = _FLOAT_FNS[op][:-1] if wide else _FLOAT_FNS[op]
        return f"{name}({', '.join(args)})"
    if op is M.SIGMOID:  # the real TIRx's expansion: 1 / (1 + exp(-x))
        one, exp = ("1.0", "exp") if wide else ("1.0f", "expf")
        return f"({one} / ({one} + {exp}(-({args[0]}))))"
    if op in (M.FMAX, M.FMIN):
        return f"tirx_{op.value}({args[0]}, {args[1]})"
    if op in (M.ISNAN, M.ISINF, M.ISFINITE):
        return f"{op.value}({args[0]})"
    if op is M.TRUNCDIV:
        return f"({args[0]} / {args[1]})"
    if op is M.TRUNCMOD:
        return f"({args[0]} % {args[1]})"
    if op is M.CLZ:
        return f"__clzll((long long)({args[0]}))" if wide else f"__clz((int)({args[0]}))"
    if op is M.POPCOUNT:
        ctype = e.dtype.c_type
        if wide:
            return f"(({ctype})__popcll((unsigned long long)({args[0]})))"
        return f"(({ctype})__popc((unsigned int)({args[0]})))"
    if op is M.FFS:
        return f"__ffs((int)({args[0]}))"
    if op is M.FDIVIDEF:
        return f"__fdividef({args[0]}, {args[1]})"
    if op in (M.HMAX2, M.HMIN2, M.PACK_BF16X2):
        return f"tirx_{op.value}({args[0]}, {args[1]})"
    raise NotImplementedError(f"codegen has no C for T.{op.value}")


def leave_MathCall(visitor, e: MathCall, args: tuple[str, ...]) -> str:
    """The codegen expression visitor's rule for :class:`.nodes.MathCall`."""
    return c_math(e, args)
