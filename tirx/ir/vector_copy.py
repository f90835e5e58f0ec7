"""The one ``T.vectorized`` loop shape that the GPU runs as a single vector access: a copy
``dst[base + v] = src[base' + v]`` between tensors of one dtype, shared, global or local (a
register array, declared 16-byte aligned; tirx/transform/vectorize.py has proved the offsets
aligned). The CUDA backend emits it as one vector
load and store (tirx/backend/cuda/vector.py); the simulator's profile counts it as one access
of ``nbytes`` per thread (tirx/sim/recorder.py). Any other vectorized body is element
accesses on both."""

from __future__ import annotations

from dataclasses import dataclass

from . import nodes as ir
from .simplify import linear_form, structural_key

__all__ = ["VectorCopy", "vector_copy"]


@dataclass(frozen=True)
class VectorCopy:
    """``dst[dst_index] = src[src_index]`` done as one access of ``nbytes`` bytes (a local
    side is registers: one vector load into them, or one vector store from them)."""

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
    if ld.dtype != st.dtype or n == 1:
        return None
    key = structural_key(loop.var)
    for access in (st, ld):
        terms, _ = linear_form(access.index)
        if terms.get(key, (None, 0))[1] != 1:
            return None
    return VectorCopy(st, ld, n * st.dtype.bytes)
