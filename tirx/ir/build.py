"""Building expressions: dtype promotion and light constant folding (x+0, x*1, x//1, consts).

A folded constant is the value the operation gives at run time: float32 operations round to
float32 (each one, operands first), float ``//`` and ``%`` are C's ``floor(a / b)`` and
``a - floor(a / b) * b`` (what the generated code and the simulator compute), and a float
converted to an integer type truncates and saturates at 32 or 64 bits, NaN giving 0 from a
float32 to 32 bits and else the top bit alone, as ``cvt.rzi`` does on the GPU (8 and 16 bits
then keep the low bits). Constants of the types without a cheap exact rounding here
(bfloat16, fp8) are not folded into float arithmetic, and a constant converted to a 16- or
8-bit float type is folded only where that type holds it exactly: otherwise the operation
stays and both targets compute it.
"""

from __future__ import annotations

import math
import struct

from ..dtypes import DType, DTypeKind, dtype_of, is_float, is_fp8
from ..errors import TirxSyntaxError
from .nodes import BOOL, F32, I32, BinOp, Cast, Cmp, CmpOp, Const, Expr, Op

__all__ = ["const", "as_expr", "promote", "binop", "cmp", "cast"]


def const(value, dtype: DType | str | None = None) -> Const:
    if dtype is None:
        if isinstance(value, bool):
            dtype = BOOL
        elif isinstance(value, int):
            dtype = I32 if -(2**31) <= value < 2**31 else dtype_of("int64")
        else:
            dtype = F32
    return Const(value, dtype_of(dtype))


def as_expr(v) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, (bool, int, float)):
        return const(v)
    raise TypeError(f"cannot use {type(v).__name__} {v!r} as a value")


_RANK = {"bool": 0, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 3, "uint32": 3}


def promote(a: DType, b: DType) -> DType:
    """The result dtype of ``a op b``: floats win (f64 > f32; 16-bit floats compute in f32);
    among ints the wider wins, and at equal width unsigned wins (C's rule); bool acts as int32."""
    if is_float(a) or is_float(b):
        if a.name == "float64" or b.name == "float64":
            return dtype_of("float64")
        return F32
    if a.bits < 32 and b.bits < 32:
        return I32  # C's integer promotion
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.kind is DTypeKind.UINT else b


def _fold(op: Op, x, y):
    if op is Op.ADD:
        return x + y
    if op is Op.SUB:
        return x - y
    if op is Op.MUL:
        return x * y
    if op is Op.DIV:
        return x / y
    if op is Op.FLOORDIV:
        return x // y
    if op is Op.FLOORMOD:
        return x % y
    if op is Op.MIN:
        return min(x, y)
    if op is Op.MAX:
        return max(x, y)
    if op is Op.SHL:
        return x << y
    if op is Op.SHR:
        return x >> y
    if op is Op.BITAND:
        return x & y
    if op is Op.BITOR:
        return x | y
    return x ^ y


def _float_value(v, dtype: DType) -> float:
    """``v`` as a value of the float type ``dtype`` holds it: float64 as it is, float16 and
    float32 rounded to nearest even (overflowing to an infinity); an integer type's value
    as a float. bfloat16 and fp8 are not rounded here (see :func:`_unfoldable`). (``struct``,
    not numpy: the kernel's builder must not pay numpy's import.)"""
    v = float(v)
    if not is_float(dtype) or dtype.bits == 64 or dtype.name == "bfloat16" or is_fp8(dtype):
        return v
    return _rounded(v, "<e" if dtype.bits == 16 else "<f")


def _rounded(v: float, fmt: str) -> float:
    """``v`` rounded to nearest even to the IEEE format ``fmt`` of :mod:`struct`."""
    try:
        return struct.unpack(fmt, struct.pack(fmt, v))[0]
    except OverflowError:  # it rounds past the largest finite value
        return math.copysign(math.inf, v)


def _exact_in(v: float, dtype: DType) -> bool:
    """Whether the 16- or 8-bit float type ``dtype`` holds ``v`` exactly (so that a constant
    of that type may hold it as a float: the generated C writes it as a float literal)."""
    if v != v:
        return False  # (a NaN's bits are the conversion's to give)
    if v in (math.inf, -math.inf):
        return dtype.name in ("float16", "bfloat16")
    if dtype.name == "float16":
        return _rounded(v, "<e") == v
    if dtype.name == "bfloat16":  # a float32 whose low 16 bits are zero
        return _rounded(v, "<f") == v and struct.unpack("<I", struct.pack("<f", v))[0] & 0xFFFF == 0
    return v == 0.0  # fp8: zero only (the rest is left to the saturating conversion)


def _unfoldable(*consts) -> bool:
    return any(c.dtype.name == "bfloat16" or is_fp8(c.dtype) for c in consts)


def _fold_float(op: Op, x: float, y: float, dtype: DType) -> float:
    """``x op y`` in float ``dtype`` (float32 or float64), rounded as the GPU rounds it."""
    if op in (Op.MIN, Op.MAX):
        return _fold(op, x, y)
    if op not in (Op.DIV, Op.FLOORDIV, Op.FLOORMOD):
        return _float_value(_fold(op, x, y), dtype)
    q = _float_value(x / y, dtype)  # (a constant zero divisor was refused before)
    if op is Op.DIV:
        return q
    f = float(math.floor(q)) if math.isfinite(q) else q
    return f if op is Op.FLOORDIV else _float_value(x - _float_value(f * y, dtype), dtype)


def _is_const(e, value=None) -> bool:
    return isinstance(e, Const) and (value is None or e.value == value)


def binop(op: Op, a, b) -> Expr:
    """Build ``a op b`` with dtype promotion and light folding (x+0, x*1, x//1, consts)."""
    if not isinstance(a, Expr):
        a = as_expr(a)
    if not isinstance(b, Expr):
        b = as_expr(b)
    dtype = a.dtype
    if dtype is not b.dtype or dtype.kind is DTypeKind.FLOAT or dtype.bits < 32 or op is Op.DIV:
        # (the common case skipped: one 32- or 64-bit integer dtype, promoted to itself)
        _no_fp8_arithmetic(op, a, b)
        dtype = F32 if op is Op.DIV and not is_float(promote(a.dtype, b.dtype)) else None
        dtype = dtype or promote(a.dtype, b.dtype)
        if op in (Op.SHL, Op.SHR, Op.BITAND, Op.BITOR, Op.BITXOR) and is_float(dtype):
            raise TypeError(f"bitwise {op.value} needs integer operands, not {dtype}")
    if _is_const(a) and _is_const(b) and not (is_float(dtype) and _unfoldable(a, b)):
        if op in (Op.FLOORDIV, Op.FLOORMOD, Op.DIV) and b.value == 0:
            raise ZeroDivisionError(f"{a.value} {op.value} {b.value}")
        if is_float(dtype):
            x, y = (_float_value(_float_value(c.value, c.dtype), dtype) for c in (a, b))
            return Const(_fold_float(op, x, y, dtype), dtype)
        x, y = _as_type(a.value, dtype), b.value
        if op not in (Op.SHL, Op.SHR):
            y = _as_type(y, dtype)
        return Const(_wrap_int(int(_fold(op, x, y)), dtype), dtype)
    if op is Op.ADD:
        if _is_const(b, 0):
            return _retype(a, dtype)
        if _is_const(a, 0):
            return _retype(b, dtype)
    elif op is Op.SUB and _is_const(b, 0):
        return _retype(a, dtype)
    elif op is Op.MUL:
        if _is_const(b, 1):
            return _retype(a, dtype)
        if _is_const(a, 1):
            return _retype(b, dtype)
        if (_is_const(a, 0) or _is_const(b, 0)) and not is_float(dtype):
            return Const(0, dtype)
    elif op is Op.FLOORDIV and _is_const(b, 1) and not is_float(dtype):
        return _retype(a, dtype)
    elif op is Op.FLOORMOD and _is_const(b, 1) and not is_float(dtype):
        return Const(0, dtype)
    return BinOp(op, a, b, dtype)


def _retype(e: Expr, dtype: DType) -> Expr:
    return e if e.dtype == dtype else Cast(e, dtype)


def _no_fp8_arithmetic(op: Op | CmpOp, a: Expr, b: Expr) -> None:
    """8-bit floats are storage types (as in the real TIRx, whose CUDA codegen has no
    arithmetic on them): operators refuse them; conversions are the way in and out."""
    for e in (a, b):
        if is_fp8(e.dtype):
            what = op.value
            raise TirxSyntaxError(
                f"{what!r} does not compute on {e.dtype}: 8-bit floats are storage types",
                hint=f"convert first, T.float32(x) {what} ..., and back when storing, "
                f"T.{e.dtype.name}(y) (a store into a {e.dtype} tensor converts by itself)",
            )


def cmp(op: CmpOp, a, b) -> Expr:
    a, b = as_expr(a), as_expr(b)
    _no_fp8_arithmetic(op, a, b)
    if _is_const(a) and _is_const(b):
        common = promote(a.dtype, b.dtype)
        x, y = _as_type(a.value, common), _as_type(b.value, common)
        result = {
            CmpOp.EQ: x == y,
            CmpOp.NE: x != y,
            CmpOp.LT: x < y,
            CmpOp.LE: x <= y,
            CmpOp.GT: x > y,
            CmpOp.GE: x >= y,
        }[op]
        return Const(bool(result), BOOL)
    return Cmp(op, a, b)


def cast(value, dtype: DType | str) -> Expr:
    dtype = dtype_of(dtype)
    value = as_expr(value)
    if value.dtype == dtype:
        if isinstance(value, Const) and dtype == F32:  # T.float32(0.1): the float32 value
            r = _float_value(value.value, dtype)
            return Const(r, dtype) if r == r and r != value.value else value
        return value
    if isinstance(value, Const):
        # (a float32 constant's value is its own: a Python literal, 0.1, converts to float64
        # as 0.1 is, T.float32(0.1) as the float32 it rounded to)
        v, src = value.value, value.dtype
        if is_float(src) and _unfoldable(value) and dtype.kind is not DTypeKind.BOOL:
            return Cast(value, dtype)  # (the conversion computes the narrow value)
        if is_float(dtype):
            if dtype.bits < 32 and not _exact_in(float(v), dtype):
                return Cast(value, dtype)  # rounded (and saturated, fp8) by the conversion
            return Const(_float_value(v, dtype), dtype)
        if dtype.kind is DTypeKind.BOOL:
            return Const(bool(v), dtype)
        if is_float(src):
            return Const(_saturated(_float_value(v, src), dtype, src.bits == 64), dtype)
        return Const(_wrap_int(int(v), dtype), dtype)
    return Cast(value, dtype)


def _saturated(v: float, dtype: DType, double: bool = False) -> int:
    """A float (a float64 if ``double``) converted to an integer type as the generated C
    converts it (``cvt.rzi``): toward zero, clamped to the range of a 32- or 64-bit integer of
    the type's signedness; a NaN gives the integer with only its top bit set, but 0 from a
    float32 to 32 bits (as the GPU gives them); an 8- or 16-bit type then keeps the low bits,
    as NVCC converts through 32 bits."""
    bits = max(dtype.bits, 32)
    signed = dtype.kind is DTypeKind.INT
    if v != v:
        return _wrap_int(1 << (bits - 1), dtype) if bits == 64 or double else 0
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    w = hi if v >= hi else lo if v <= lo else int(v)
    return _wrap_int(w, dtype)


def _wrap_int(v: int, dtype: DType) -> int:
    mod = 1 << dtype.bits
    v %= mod
    if dtype.kind is DTypeKind.INT and v >= mod // 2:
        v -= mod
    return v


def _as_type(v, dtype: DType):
    """A folded constant as C sees it after conversion to ``dtype``."""
    if is_float(dtype):
        return _float_value(v, dtype)
    return _wrap_int(int(v), dtype)
