"""Value representation and C conversions for the simulator.

Every run-time value is a numpy array (or a 0-d array for a constant) in the *compute type*
of its IR dtype: integers and bool in their own numpy type (so arithmetic wraps two's
complement at the dtype's width), float32/float64 as themselves, and the 16-bit floats
(float16, bfloat16) as float32 values that are exactly representable in the 16-bit type.
16-bit floats only exist as bits in memory; :func:`decode` and :func:`encode` convert.

Conversions follow C as nvcc compiles it: float→16-bit float rounds to nearest even (one
rounding, also from float64), float→int truncates toward zero and saturates like PTX
``cvt.rzi`` (NaN → 0), int→int wraps, anything→bool is ``!= 0``.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType, is_fp8

__all__ = [
    "compute_type",
    "constant",
    "convert",
    "decode",
    "encode",
    "f32_to_bf16_bits",
    "bf16_bits_to_f32",
    "storage_type",
]

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
U16 = np.dtype(np.uint16)
U32 = np.dtype(np.uint32)
_CANONICAL_F32 = np.uint32(0x7FFFFFFF).view(F32)
_CANONICAL_F16 = np.uint16(0x7FFF).view(np.float16)
_SIGN, _EXPONENT, _MANTISSA = np.uint32(0x80000000), np.uint32(0x7F800000), np.uint32(0x7FFFFF)


def compute_type(d: DType) -> np.dtype:
    """The numpy dtype that holds values of ``d`` during evaluation."""
    if d.name in ("float16", "bfloat16") or is_fp8(d):
        return F32
    return np.dtype(d.numpy)


def storage_type(d: DType) -> np.dtype:
    """The numpy dtype of ``d``'s bits in memory (bfloat16 as uint16)."""
    return U16 if d.name == "bfloat16" else np.dtype(d.numpy)


def constant(value, d: DType) -> np.ndarray:
    """A 0-d array holding the Python constant ``value`` converted to ``d`` (C rules)."""
    if isinstance(value, bool) or d.kind == "bool":
        raw = np.array(bool(value))
    elif isinstance(value, int) and d.kind in ("int", "uint"):
        mod = 1 << d.bits
        v = value % mod
        if d.kind == "int" and v >= mod // 2:
            v -= mod
        return np.array(v, dtype=compute_type(d))
    elif isinstance(value, int):
        raw = np.array(value, dtype=np.int64) if abs(value) < 2**63 else np.array(float(value))
    else:
        raw = np.array(float(value), dtype=F64)
    return convert(raw, d)


# ------------------------------------------------------------------- 16-bit float bits


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest even) and return the uint16 bits; a NaN of
    any sign and payload gives the canonical ``0x7fff``, as ``cvt.rn.bf16.f32`` does (measured
    on an H100)."""
    u = np.asarray(x, dtype=F32).view(U32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, np.uint32(0x7FFF), rounded).astype(U16)


def canonical_nan(x: np.ndarray, nan=_CANONICAL_F32) -> np.ndarray:
    """``x`` with every NaN replaced by ``nan``, by default float32's canonical NaN
    ``0x7fffffff``, which the GPU writes wherever it makes a NaN (conversions, the approximate
    functions); ``x`` itself where it holds none."""
    x = np.asarray(x)
    found = np.isnan(x)
    return np.where(found, nan, x) if found.any() else x


def flush(x: np.ndarray) -> np.ndarray:
    """``.ftz``: each subnormal of the float32 array ``x`` replaced by zero of its sign."""
    bits = np.asarray(x, dtype=F32).view(U32)
    subnormal = ((bits & _EXPONENT) == 0) & ((bits & _MANTISSA) != 0)
    return np.where(subnormal, bits & _SIGN, bits).astype(U32).view(F32)


def f32_to_half(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to float16 (nearest even), as ``cvt.rn.f16.f32`` does: a NaN of
    any sign and payload gives the canonical ``0x7fff`` (measured on an H100)."""
    return canonical_nan(np.asarray(x).astype(np.float16), _CANONICAL_F16)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits).astype(U32) << np.uint32(16)).view(F32)


def _f64_to_f32_round_odd(x: np.ndarray) -> np.ndarray:
    """float64 → float32 rounding to odd: rounding that result once more to a format with at
    least two fewer significand bits equals rounding ``x`` directly (no double rounding)."""
    r = x.astype(F32)
    back = r.astype(F64)
    inexact = np.isfinite(x) & (back != x)
    if not np.any(inexact):
        return r
    bits = r.view(U32).copy()
    toward_zero = inexact & (np.abs(back) > np.abs(x))
    bits = np.where(toward_zero, bits - np.uint32(1), bits)
    bits = np.where(inexact, bits | np.uint32(1), bits)
    return bits.view(F32)


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 or float64 values rounded once to bfloat16 (nearest even), as uint16 bits; a
    NaN the canonical ``0x7fff``."""
    x = np.asarray(x)
    if x.dtype != F32:
        x = _f64_to_f32_round_odd(np.asarray(x, dtype=F64))
    return f32_to_bf16_bits(x)


def _to_bf16_values(x: np.ndarray) -> np.ndarray:
    return bf16_bits_to_f32(to_bf16_bits(x))


def half_to_f32(h: np.ndarray) -> np.ndarray:
    """float16 values as float32, as ``cvt.f32.f16`` gives them: exact, and a NaN of any sign
    and payload the canonical NaN ``0x7fffffff`` (measured on an H100 for ``0x7e00``; numpy
    would keep the sign and payload)."""
    return canonical_nan(np.asarray(h).astype(F32))


def min_max_choice(op: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PTX's float ``min``/``max`` without ``.NaN`` (ISA, "min", "max"; the bulk reductions'
    ``.min``/``.max`` alike) on the values ``a`` and ``b``: per element, whether the result is
    ``a`` (else ``b``) and whether both are NaN (the result is then the type's canonical NaN).
    The smaller (larger) value, ``-0`` below ``+0``, a NaN losing to a number."""
    with np.errstate(invalid="ignore"):
        if op == "max":  # a when a > b, or a is +0 and b -0 (or +0: the same bits)
            take_a = (a > b) | ((a == b) & ~np.signbit(a))
        else:
            take_a = (a < b) | ((a == b) & np.signbit(a))
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    return (take_a & ~a_nan) | b_nan, a_nan & b_nan


def decode(bits: np.ndarray, d: DType) -> np.ndarray:
    """Values (compute type) from memory contents read as ``storage_type(d)``."""
    if d.name == "float16":
        return half_to_f32(bits)
    if d.name == "bfloat16":
        return bf16_bits_to_f32(bits)
    if is_fp8(d):
        from .fp8 import fp8_decode  # the 8-bit floats' codecs, loaded with the first one

        return fp8_decode(bits, d.name)
    if d.kind == "bool":
        return bits.view(np.uint8) != 0
    return bits


def encode(values: np.ndarray, d: DType) -> np.ndarray:
    """Memory contents (``storage_type(d)``) for values already in ``d``'s compute type."""
    if d.name == "float16":
        return f32_to_half(values)
    if d.name == "bfloat16":
        return f32_to_bf16_bits(values)
    if is_fp8(d):
        from .fp8 import fp8_encode

        return fp8_encode(values, d.name)
    return values


# ------------------------------------------------------------------------- conversion


def _float_to_int(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """A float converted to an integer type as the generated C converts it: ``cvt.rzi``
    toward zero, saturating, to a 32- or 64-bit integer of the target's signedness (a NaN
    gives 0 from a float32 to 32 bits, else that integer with only its top bit set: measured on
    an H100); a narrower target then takes the low bits (NVCC converts to 8 and 16 bits through 32: ``cvt.rzi.s32.f32`` then ``cvt.s32.s8``,
    so 300.0 becomes 44 in a uint8, not 255)."""
    wide = (
        target if target.itemsize >= 4 else np.dtype(np.int32 if target.kind == "i" else np.uint32)
    )
    info = np.iinfo(wide)
    t = np.trunc(x.astype(F64))
    nan = np.isnan(t)
    t = np.where(nan, 0.0, t)
    # float64 cannot hold 2**63 - 1 exactly: compare in floats, then place the bounds as ints.
    high = t >= float(info.max)
    low = t <= float(info.min)
    mid = np.where(high | low, 0.0, t).astype(wide)
    out = np.where(high, info.max, np.where(low, info.min, mid)).astype(wide)
    if wide.itemsize == 8 or x.dtype == F64:
        top = np.array(1 << (8 * wide.itemsize - 1), np.uint64).astype(wide)
        out = np.where(nan, top, out)
    return out if wide == target else out.astype(target)  # the low bits (numpy wraps)


def convert(x: np.ndarray, d: DType) -> np.ndarray:
    """Convert compute-type values ``x`` to dtype ``d`` (result in ``compute_type(d)``)."""
    x = np.asarray(x)
    src = x.dtype
    if d.kind == "bool":
        return x if src == np.bool_ else x != 0
    if d.name == "float16":  # rounded, then read back as cvt.f32.f16 does (a NaN canonical)
        if src == np.bool_:
            x = x.astype(F32)
        return half_to_f32(x.astype(np.float16))
    if d.name == "bfloat16":  # an integer as the C converts it: to float32 first (rounded)
        if src.kind in "biu":
            x = x.astype(F32)
        return _to_bf16_values(x)
    if is_fp8(d):  # round to nearest even, saturating (tirx/sim/fp8.py)
        from .fp8 import fp8_decode, fp8_encode

        return fp8_decode(fp8_encode(x, d.name), d.name)
    target = np.dtype(d.numpy)
    if src == target:
        return x
    if d.kind in ("int", "uint") and src.kind == "f":
        return _float_to_int(x, target)
    return x.astype(target)
