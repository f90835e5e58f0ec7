"""C for ``T.reinterpret``: the bits of a value read as another type of the same width.

Values of 16- and 8-bit float types are held as ``float`` in generated expressions
(codegen.py), so their bits are the value rounded back to the narrow type (exact: the value is
representable) and a narrow pattern read as a narrow float is widened with the same helpers
loads use. A narrow float reinterpreted straight from memory takes the bits as stored instead
(no conversion to float and back: one instruction less each way, and a NaN keeps its payload,
which ``cvt.f32.f16`` would make canonical).
"""

from __future__ import annotations

from ...dtypes import DType, is_fp8
from ...ir import nodes as ir

__all__ = ["reinterpret_code", "leave_reinterpret"]

_UINT = {8: "unsigned char", 16: "unsigned short", 32: "unsigned int", 64: "unsigned long long"}


def _bits(code: str, src: DType) -> str:
    if src.name == "float16":
        return f"tirx_f2h((float)({code}))"
    if src.name == "bfloat16":
        return f"tirx_f2b((float)({code}))"
    if src.name == "float32":
        return f"__float_as_uint({code})"
    if src.name == "float64":
        return f"((unsigned long long)__double_as_longlong({code}))"
    if is_fp8(src):
        from . import fp8

        return fp8.encode(code, ir.F32, src)
    return f"(({_UINT[src.bits]})({code}))"


def reinterpret_code(code: str, src: DType, dst: DType) -> str:
    """C for the value ``code`` of dtype ``src`` reinterpreted as ``dst`` (same width)."""
    return _from_bits(_bits(code, src), dst)


def _from_bits(bits: str, dst: DType) -> str:
    if dst.name == "float16":
        return f"tirx_h2f({bits})"
    if dst.name == "bfloat16":
        return f"tirx_b2f({bits})"
    if dst.name == "float32":
        return f"__uint_as_float({bits})"
    if dst.name == "float64":
        return f"__longlong_as_double((long long)({bits}))"
    if is_fp8(dst):
        from . import fp8

        return fp8.decode(f"((unsigned char)({bits}))", dst)
    return f"(({dst.c_type})({bits}))"


def leave_reinterpret(cexprs, x, inner: str) -> str:
    """The codegen expression visitor's rule for :class:`~tirx.ir.nodes.Reinterpret`."""
    v = x.value
    if isinstance(v, ir.Load) and (v.dtype.name in ("float16", "bfloat16") or is_fp8(v.dtype)):
        # the load's bits as stored, not ``inner``'s widened value
        return _from_bits(cexprs.em.ref_code(v.buffer, cexprs.em.e(v.index), v.dtype), x.dtype)
    return reinterpret_code(inner, v.dtype, x.dtype)
