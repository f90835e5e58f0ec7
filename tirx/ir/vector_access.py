"""Which global tensors the ``T.vectorized`` loops of a lowered program access as vectors, and
the alignment that asks of their data pointers.

Lowering (tirx/transform/vectorize.py) proved that each access in a vectorized loop of ``n``
iterations that depends on the loop variable covers ``n`` consecutive elements starting at an
offset from the tensor's start that is a multiple of ``n``. The GPU makes it one access of
``n * bytes`` bytes, which must be naturally aligned (PTX ISA, "Vectors"; a ``uint4`` in C), so
what is left is the tensor's data pointer: a multiple of the vector's size. The simulator
checks it when such a loop runs (tirx/sim/vectorized.py), the CUDA launcher on each call's
pointers (tirx/backend/cuda/alignment.py); both read the requirement from here, so the two
targets refuse the same tensors. (The CUDA code makes one vector access only of a loop that is
a plain copy, tirx/backend/cuda/vector.py; the requirement covers every vectorized loop, since
that is what ``T.vectorized`` promises.)
"""

from __future__ import annotations

from dataclasses import dataclass

from . import nodes as ir
from .visitor import walk

__all__ = ["VectorAccess", "vector_accesses", "parameter_alignments"]


@dataclass(frozen=True)
class VectorAccess:
    """One load or store of ``loop`` that touches ``nbytes`` bytes of the global tensor
    ``buffer`` at once: its data pointer must be a multiple of ``nbytes`` (a power of two)."""

    buffer: ir.Buffer
    nbytes: int
    loop: ir.For


def vector_accesses(loop: ir.For) -> list[VectorAccess]:
    """The accesses of the vectorized ``loop`` (lowered, checked) to global tensors that depend
    on its variable; a load of the same element in every iteration (a broadcast) is none."""
    n = int(loop.stop.value) - int(loop.start.value)
    found = []
    for node in walk(loop.body):
        if not isinstance(node, (ir.Load, ir.Store)) or node.buffer.scope is not ir.Scope.GLOBAL:
            continue
        if any(x is loop.var for x in walk(node.index)):
            found.append(VectorAccess(node.buffer, n * node.dtype.bytes, loop))
    return found


def parameter_alignments(fn: ir.Function) -> tuple[VectorAccess | None, ...]:
    """Per parameter of the lowered ``fn``: the vector access that needs its data pointer the
    most aligned (the first such loop on a tie), or None when none needs more than one byte
    (scalars, tensors no vectorized loop reads or writes)."""
    index = {p: i for i, p in enumerate(fn.params) if isinstance(p, ir.Buffer)}
    most: list[VectorAccess | None] = [None] * len(fn.params)
    for node in walk(fn.body):
        if not (isinstance(node, ir.For) and node.kind is ir.LoopKind.VECTORIZED):
            continue
        for access in vector_accesses(node):
            i = index.get(access.buffer)
            if i is None or access.nbytes <= 1:
                continue
            if most[i] is None or access.nbytes > most[i].nbytes:
                most[i] = access
    return tuple(most)
