"""The IR node of the math and bit intrinsics (script.py beside this: ``T.exp``, ``T.clz``,
``T.max`` on floats, ...): :class:`MathCall`, an expression, and its operations
(:class:`MathOp`). The catalog row names it, so the IR visitor walks it as it walks the core's
node classes (tirx/ir/visitor.py)."""

from __future__ import annotations

import enum

from ...dtypes import DType
from ...ir.nodes import Expr, node

__all__ = ["MathOp", "MathCall"]


class MathOp(enum.Enum):
    """A math or bit intrinsic (``tirx/families/math/script.py`` says which ``T`` name builds
    which, with its dtype rules; docs/semantics.md, "Math and bit intrinsics")."""

    EXP = "exp"
    EXP2 = "exp2"
    EXP10 = "exp10"
    LOG = "log"
    LOG2 = "log2"
    LOG10 = "log10"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    TANH = "tanh"
    SIGMOID = "sigmoid"
    SIN = "sin"
    COS = "cos"
    ERF = "erf"
    TAN = "tan"
    ASIN = "asin"
    ACOS = "acos"
    ATAN = "atan"
    SINH = "sinh"
    COSH = "cosh"
    ASINH = "asinh"
    ACOSH = "acosh"
    ATANH = "atanh"
    LOG1P = "log1p"
    ATAN2 = "atan2"
    HYPOT = "hypot"
    FMOD = "fmod"  # C's fmod: the remainder of truncated division, exact
    COPYSIGN = "copysign"
    NEXTAFTER = "nextafter"  # the next representable value of x toward y
    LDEXP = "ldexp"  # x * 2**n, n an integer
    POW = "pow"
    FABS = "fabs"
    FLOOR = "floor"
    CEIL = "ceil"
    NEARBYINT = "nearbyint"  # round half to even (T.round too)
    TRUNC = "trunc"
    FMA = "fma"
    FMAX = "fmax"  # T.max on floats: NaN if either operand is NaN
    FMIN = "fmin"
    ISNAN = "isnan"
    ISINF = "isinf"
    ISFINITE = "isfinite"
    TRUNCDIV = "truncdiv"  # C's integer "/" (rounds toward zero)
    TRUNCMOD = "truncmod"  # C's integer "%" (sign of the dividend)
    CLZ = "clz"
    POPCOUNT = "popcount"
    FFS = "ffs"
    HMAX2 = "hmax2"  # two bfloat16 pairs packed in uint32 words: max.bf16x2
    HMIN2 = "hmin2"
    PACK_BF16X2 = "pack_bf16x2"  # two float32 rounded to bfloat16, packed: cvt.rn.bf16x2.f32
    FDIVIDEF = "fdividef"  # x / y approximated: div.approx.f32 (CUDA's __fdividef)

    @property
    def script_name(self) -> str:
        """The ``T`` name that spells this operation in kernel source (``T.max`` for FMAX)."""
        return _SCRIPT_NAMES.get(self, self.value)


_SCRIPT_NAMES = {
    MathOp.FMAX: "max",
    MathOp.FMIN: "min",
    MathOp.FFS: "cuda.ffs_u32",
    MathOp.HMAX2: "cuda.hmax2",
    MathOp.HMIN2: "cuda.hmin2",
    MathOp.PACK_BF16X2: "cuda.float22bfloat162_rn",
    MathOp.FDIVIDEF: "cuda.fdividef",
}


@node
class MathCall(Expr):
    """``op(*args)``: a math or bit intrinsic on scalar values; ``dtype`` is the result's
    (float32 for 16-bit float operands, which compute as float32)."""

    op: MathOp
    args: tuple[Expr, ...]
    dtype: DType
