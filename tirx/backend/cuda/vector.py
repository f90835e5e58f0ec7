"""C for a ``T.vectorized`` copy (tirx/transform/vectorize.py proved it aligned): one vector
load and one vector store of 4, 8 or 16 bytes instead of ``n`` element accesses."""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import nodes as ir
from ...ir.simplify import linear_form, structural_key

__all__ = ["VectorCopy", "vector_copy", "emit_vector_copy"]

_VECTOR_TYPE = {2: "unsigned short", 4: "unsigned int", 8: "uint2", 16: "uint4"}


def emit_vector_copy(em, loop: ir.For) -> bool:
    """Write ``loop`` as one vector copy with ``em`` (the codegen's emitter) when it is one
    (:func:`vector_copy`); False when it is not. The loop variable holds the first iteration's
    value while the addresses are computed, and the loop's end value after."""
    copy = vector_copy(loop)
    if copy is None:
        return False
    t = _VECTOR_TYPE[copy.nbytes]
    v = loop.var.name
    dst = em.ref(copy.store.buffer, copy.store.index, copy.store.dtype)
    src = em.ref(copy.load.buffer, copy.load.index, copy.load.dtype)
    em.line(f"{v} = {em.e(loop.start)};")
    em.line(f"*reinterpret_cast<{t}*>(&{dst}) = *reinterpret_cast<const {t}*>(&{src});")
    em.line(f"{v} = {em.e(loop.stop)};")
    return True


@dataclass(frozen=True)
class VectorCopy:
    """``dst[dst_index] = src[src_index]`` done as one access of ``nbytes`` bytes."""

    store: ir.Store
    load: ir.Load
    nbytes: int


def vector_copy(loop: ir.For) -> VectorCopy | None:
    """The single vector copy a vectorized loop is, or None when its body is anything else
    (checked by tirx.transform.vectorize already)."""
    st = loop.body
    if not isinstance(st, ir.Store) or not isinstance(st.value, ir.Load):
        return None
    ld = st.value
    n = int(loop.stop.value) - int(loop.start.value)
    local = ir.Scope.LOCAL
    if ld.dtype != st.dtype or local in (st.buffer.scope, ld.buffer.scope) or n == 1:
        return None
    key = structural_key(loop.var)
    for access in (st, ld):
        terms, _ = linear_form(access.index)
        if terms.get(key, (None, 0))[1] != 1:
            return None
    return VectorCopy(st, ld, n * st.dtype.bytes)
