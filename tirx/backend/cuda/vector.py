"""C for a ``T.vectorized`` copy (tirx/transform/vectorize.py proved it aligned): one vector
load and one vector store of 4, 8 or 16 bytes instead of ``n`` element accesses."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.vector_copy import VectorCopy, vector_copy

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
    dst = em.ref(copy.store.buffer, copy.store.index, copy.store.dtype, write=True)
    src = em.ref(copy.load.buffer, copy.load.index, copy.load.dtype)
    em.line(f"{v} = {em.e(loop.start)};")
    em.line(f"*reinterpret_cast<{t}*>(&{dst}) = *reinterpret_cast<const {t}*>(&{src});")
    em.line(f"{v} = {em.e(loop.stop)};")
    return True
