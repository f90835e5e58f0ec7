"""CUDA C for the 8-bit float storage types (``float8_e4m3fn``, ``float8_e5m2``).

Values of these types are ``float`` in expressions; memory holds their bits
(``unsigned char``). Conversion to fp8 rounds to nearest even and saturates to the largest
finite value (NaN stays NaN), which is what ``cuda_fp8.h``'s ``__nv_cvt_float_to_fp8(x,
__NV_SATFINITE, ...)`` does. The generated code needs no header (NVRTC 13.0 does not find
``cuda_fp8.h`` without an include path, and the rest of the code is header-free too): on
sm_89 and later it uses the same PTX instructions the header does (``cvt.rn.satfinite.e4m3x2.f32``,
``cvt.rn.f16x2.e4m3x2``), earlier it computes the same result in integer arithmetic. A float64
value is first narrowed to float32 rounding to odd, so that it is rounded once.
"""

from __future__ import annotations

from ...dtypes import DType

__all__ = ["PRELUDE", "decode", "encode", "cast"]

_SHORT = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}

PRELUDE = r"""TIRX_DEVICE float tirx_d2f_odd(double d) { float f; asm("cvt.rz.f32.f64 %0, %1;" : "=f"(f) : "d"(d)); unsigned int u = __float_as_uint(f); if ((double)f != d && d == d) u |= 1u; return __uint_as_float(u); }
TIRX_DEVICE unsigned char tirx_f2e4m3(float f) {
#if __CUDA_ARCH__ >= 890
  unsigned short r; asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(f)); return (unsigned char)(r & 0xffu);
#else
  unsigned int u = __float_as_uint(f), s = (u >> 24) & 0x80u, x = u & 0x7fffffffu;
  if (x > 0x7f800000u) return 0x7f;
  if (x < 0x3c800000u) return (unsigned char)(s | (unsigned int)rintf(__uint_as_float(x) * 512.0f));
  unsigned int v = (((x >> 23) - 120u) << 3) | ((x >> 20) & 7u), r = x & 0xfffffu;
  v += (r > 0x80000u || (r == 0x80000u && (v & 1u))) ? 1u : 0u;
  return (unsigned char)(s | (v > 0x7eu ? 0x7eu : v));
#endif
}
TIRX_DEVICE unsigned char tirx_f2e5m2(float f) {
#if __CUDA_ARCH__ >= 890
  unsigned short r; asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(f)); return (unsigned char)(r & 0xffu);
#else
  unsigned int u = __float_as_uint(f), s = (u >> 24) & 0x80u, x = u & 0x7fffffffu;
  if (x > 0x7f800000u) return 0x7f;
  if (x < 0x38800000u) return (unsigned char)(s | (unsigned int)rintf(__uint_as_float(x) * 65536.0f));
  unsigned int v = (((x >> 23) - 112u) << 2) | ((x >> 21) & 3u), r = x & 0x1fffffu;
  v += (r > 0x100000u || (r == 0x100000u && (v & 1u))) ? 1u : 0u;
  return (unsigned char)(s | (v > 0x7bu ? 0x7bu : v));
#endif
}
TIRX_DEVICE float tirx_e4m32f(unsigned char b) {
#if __CUDA_ARCH__ >= 890
  unsigned int h; asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"((unsigned short)b)); return tirx_h2f((unsigned short)(h & 0xffffu));
#else
  unsigned int s = ((unsigned int)b & 0x80u) << 24, e = ((unsigned int)b >> 3) & 15u, m = (unsigned int)b & 7u;
  if ((b & 0x7fu) == 0x7fu) return __uint_as_float(0x7fffffffu);
  if (e == 0u) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f));
  return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
#endif
}
TIRX_DEVICE float tirx_e5m22f(unsigned char b) { return tirx_h2f((unsigned short)(((unsigned int)b) << 8)); }
"""


def decode(ref: str, d: DType) -> str:
    """The float value of the fp8 bits ``ref``."""
    return f"tirx_{_SHORT[d.name]}2f({ref})"


def encode(code: str, source: DType, target: DType) -> str:
    """The fp8 bits of ``code`` (a value of dtype ``source``), rounded once, saturating."""
    value = f"tirx_d2f_odd((double)({code}))" if source.name == "float64" else f"(float)({code})"
    return f"tirx_f2{_SHORT[target.name]}({value})"


def cast(c, inner: str) -> str:
    """C for the conversion ``c`` (a Cast to an fp8 type) of the value ``inner``: the value
    rounded to the fp8 type, as a float."""
    return decode(encode(inner, c.value.dtype, c.dtype), c.dtype)
