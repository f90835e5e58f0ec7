"""Building expressions: dtype promotion and light constant folding (x+0, x*1, x//1, consts)."""

from __future__ import annotations

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
    if _is_const(a) and _is_const(b):
        if op in (Op.FLOORDIV, Op.FLOORMOD, Op.DIV) and b.value == 0:
            raise ZeroDivisionError("division by a constant zero")
        x, y = _as_type(a.value, dtype), b.value
        if op not in (Op.SHL, Op.SHR):
            y = _as_type(y, dtype)
        value = _fold(op, x, y)
        if not is_float(dtype):
            value = _wrap_int(int(value), dtype)
        return Const(value, dtype)
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
        return value
    if isinstance(value, Const):
        v = value.value
        if is_float(dtype):
            return Const(float(v), dtype)
        if dtype.kind is DTypeKind.BOOL:
            return Const(bool(v), dtype)
        return Const(_wrap_int(int(v), dtype), dtype)
    return Cast(value, dtype)


def _wrap_int(v: int, dtype: DType) -> int:
    mod = 1 << dtype.bits
    v %= mod
    if dtype.kind is DTypeKind.INT and v >= mod // 2:
        v -= mod
    return v


def _as_type(v, dtype: DType):
    """A folded constant as C sees it after conversion to ``dtype``."""
    if is_float(dtype):
        return float(v)
    return _wrap_int(int(v), dtype)
