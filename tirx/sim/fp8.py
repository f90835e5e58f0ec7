"""The 8-bit floats (OCP FP8, "OFP8 Formats for Deep Learning", v1.0) as bits and values.

* ``float8_e4m3fn``: sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; only
  ``S.1111.111`` is NaN, so the largest value is ``1.75 * 2**8 = 448``; subnormals step by
  ``2**-9``.
* ``float8_e5m2``: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like: infinities
  ``S.11111.00``, NaNs ``S.11111.{01,10,11}``, largest finite ``1.75 * 2**15 = 57344``;
  subnormals step by ``2**-16``.

Conversion from a wider float rounds to nearest even and saturates (the CUDA conversion with
``__NV_SATFINITE``, PTX ``cvt.rn.satfinite``): a finite value beyond the largest, and an
infinity, become the largest finite value of its sign; NaN becomes the NaN ``0x7f``. The
rounding is done from float64 values, where float32 (and float64) inputs are exact, so it
rounds once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FP8_FORMATS", "fp8_decode", "fp8_encode"]


@dataclass(frozen=True)
class Fp8Format:
    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    largest: float
    largest_bits: int  # the bit pattern of the largest finite value (sign clear)
    has_inf: bool

    @property
    def min_normal_exponent(self) -> int:
        return 1 - self.bias


FP8_FORMATS = {
    "float8_e4m3fn": Fp8Format("float8_e4m3fn", 4, 3, 7, 448.0, 0x7E, False),
    "float8_e5m2": Fp8Format("float8_e5m2", 5, 2, 15, 57344.0, 0x7B, True),
}
_NAN_BITS = 0x7F


def fp8_decode(bits: np.ndarray, name: str) -> np.ndarray:
    """float32 values of the fp8 bit patterns ``bits`` (uint8)."""
    f = FP8_FORMATS[name]
    b = np.asarray(bits).astype(np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    e = (b >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1)
    m = b & ((1 << f.mantissa_bits) - 1)
    scale = float(1 << f.mantissa_bits)
    normal = (1.0 + m / scale) * np.exp2(e.astype(np.float64) - f.bias)
    sub = (m / scale) * 2.0**f.min_normal_exponent
    value = sign * np.where(e == 0, sub, normal)
    top = e == (1 << f.exponent_bits) - 1
    if f.has_inf:  # e5m2: the top exponent is infinity (mantissa 0) or NaN
        value = np.where(top & (m == 0), sign * np.inf, np.where(top, np.nan, value))
    else:  # e4m3fn: only the all-ones pattern is NaN
        value = np.where(top & (m == (1 << f.mantissa_bits) - 1), np.nan, value)
    out = value.astype(np.float32)
    nan = np.isnan(out)  # the canonical NaN, as the GPU's conversion gives it (measured)
    return np.where(nan, np.uint32(0x7FFFFFFF).view(np.float32), out) if nan.any() else out


def fp8_encode(values: np.ndarray, name: str) -> np.ndarray:
    """The fp8 bit patterns (uint8) nearest ``values`` (ties to even), saturating."""
    f = FP8_FORMATS[name]
    x = np.asarray(values, dtype=np.float64)
    neg = np.signbit(x)
    a = np.abs(x)
    with np.errstate(all="ignore"):
        # the step between neighbours at a's binade (never below the subnormal step)
        _, exp = np.frexp(np.where(np.isfinite(a) & (a > 0), a, 1.0))
        binade = np.maximum(exp - 1, f.min_normal_exponent)
        step = np.exp2((binade - f.mantissa_bits).astype(np.float64))
        rounded = np.rint(a / step) * step  # exact scaling by a power of two; rint: half even
        rounded = np.minimum(rounded, f.largest)  # saturate (infinity too)
        # back to bits: exponent field and mantissa of the rounded value
        _, rexp = np.frexp(np.where(rounded > 0, rounded, 1.0))
        field = np.maximum(rexp - 1 + f.bias, 0)  # 0: subnormal
        unit = np.exp2(np.maximum(rexp - 1, f.min_normal_exponent) - f.mantissa_bits)
        mant = np.rint(rounded / unit).astype(np.int64)  # includes the implicit bit if normal
        mant = np.where(field > 0, mant - (1 << f.mantissa_bits), mant)
        bits = np.where(rounded > 0, (field << f.mantissa_bits) | mant, 0)
    bits = np.where(np.isnan(x), _NAN_BITS, bits | np.where(neg, 0x80, 0))
    return bits.astype(np.uint8)
