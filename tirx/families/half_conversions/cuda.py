"""CUDA C for the float32/float16 pair conversions (:class:`.nodes.HalfConversion`).

The real TIRx's helpers are CUDA's ``__float22half2_rn`` and ``__half22float2`` on
``float2*``/``half2*`` casts of its ``void*`` arguments. tirx's C needs no header (NVRTC does
not find ``cuda_fp16.h`` without an include path), so the helpers below spell what those
functions are on sm_80 and later: ``cvt.rn.f16x2.f32 d, a, b`` (``a`` to the upper half,
``b`` to the lower: the ``float2``'s ``y`` then ``x``) and ``cvt.f32.f16`` of each half. The
accesses are the real TIRx's: a ``float2`` load or store (8-byte aligned), a 32-bit word for a
``half2`` (4-byte aligned), and the eight-element forms convert pair by pair, each pair read
then written. Each operand is a byte pointer into its buffer (a global parameter, the shared
buffer's pointer, or a local array, whose address the C takes) plus the lowered byte offset.
"""

from __future__ import annotations

from ...ir import nodes as ir
from .nodes import HalfConversion, HalfConversionKind

__all__ = ["PRELUDE", "visit_HalfConversion"]

#: the helpers, emitted only where the kernel calls one (their names are the real TIRx's calls)
PRELUDE = r"""TIRX_DEVICE void tirx_float22half2(void* dst, const void* src) { const float2 f = *reinterpret_cast<const float2*>(src); unsigned int h; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h) : "f"(f.y), "f"(f.x)); *reinterpret_cast<unsigned int*>(dst) = h; }
TIRX_DEVICE void tirx_half8tofloat8(const void* src, void* dst) { const unsigned int* s = reinterpret_cast<const unsigned int*>(src); float2* d = reinterpret_cast<float2*>(dst); for (int i = 0; i < 4; ++i) { const unsigned int w = s[i]; float2 f; f.x = tirx_h2f((unsigned short)(w & 0xffffu)); f.y = tirx_h2f((unsigned short)(w >> 16)); d[i] = f; } }
TIRX_DEVICE void tirx_float8tohalf8(const void* src, void* dst) { const float2* s = reinterpret_cast<const float2*>(src); unsigned int* d = reinterpret_cast<unsigned int*>(dst); for (int i = 0; i < 4; ++i) tirx_float22half2(d + i, s + i); }
"""


def _pointer(em, buf: ir.Buffer, offset, write: bool) -> str:
    """C for the byte address ``offset`` into ``buf`` (a ``unsigned char*``)."""
    em.named.add(buf.name)
    if not write:
        em.read.add(buf.name)
    return f"(reinterpret_cast<unsigned char*>({buf.name}) + ({em.e(offset)}))"


def visit_HalfConversion(em, st: HalfConversion) -> None:
    """The codegen emitter's rule: one call of the helper, arguments in the real TIRx's order
    (``float22half2(dst, src)``, the others ``(src, dst)``)."""
    em.mark(st.span)
    dst = _pointer(em, st.dst, st.dst_at[0], write=True)
    src = _pointer(em, st.src, st.src_at[0], write=False)
    first, second = (dst, src) if st.kind is HalfConversionKind.FLOAT2_TO_HALF2 else (src, dst)
    em.line(f"tirx_{st.kind}({first}, {second});")
