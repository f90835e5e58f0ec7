"""The simulator's check of ``T.vectorized`` loops over global tensors: the GPU accesses the
``n`` elements as one vector, which must be aligned to its size (PTX ISA, "Vectors": a vector
access is naturally aligned). Lowering proved each vector's offset from the start of the tensor a
multiple of its size (tirx/transform/vectorize.py); what remains is the tensor's data pointer,
known once the arguments are bound."""

from __future__ import annotations

from ..errors import SimulationError
from ..ir import nodes as ir
from ..ir.visitor import walk

__all__ = ["check_vector_alignment"]


def check_vector_alignment(loop: ir.For, regions: dict) -> None:
    """Raise a SimulationError at ``loop`` when a global tensor it accesses as vectors has a
    data pointer that is not a multiple of the vector's size."""
    n = int(loop.stop.value) - int(loop.start.value)
    for node in walk(loop.body):
        if not isinstance(node, (ir.Load, ir.Store)) or node.buffer.scope is not ir.Scope.GLOBAL:
            continue
        if not any(x is loop.var for x in walk(node.index)):
            continue
        size = n * node.dtype.bytes
        address = regions[node.buffer].address
        if address % size:
            raise SimulationError(
                f"'{node.buffer.name}' is accessed as vectors of {size} bytes, but its data "
                f"pointer {address:#x} is not a multiple of {size}",
                loop.span,
                hint="pass a tensor whose storage starts aligned (a fresh allocation, not a "
                "slice at an odd offset), or use T.unroll",
            )
