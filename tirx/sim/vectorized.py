"""The simulator's check of ``T.vectorized`` loops over global tensors: the GPU accesses the
``n`` elements as one vector, which must be aligned to its size (PTX ISA, "Vectors": a vector
access is naturally aligned). Lowering proved each vector's offset from the start of the tensor a
multiple of its size (tirx/transform/vectorize.py); what remains is the tensor's data pointer,
known once the arguments are bound. Which accesses those are is read from
tirx/ir/vector_access.py, as the CUDA launcher reads it."""

from __future__ import annotations

from ..errors import SimulationError
from ..ir import nodes as ir
from ..ir.vector_access import vector_accesses

__all__ = ["check_vector_alignment"]


def check_vector_alignment(loop: ir.For, regions: dict) -> None:
    """Raise a SimulationError at ``loop`` when a global tensor it accesses as vectors has a
    data pointer that is not a multiple of the vector's size."""
    for access in vector_accesses(loop):
        size = access.nbytes
        address = regions[access.buffer].address
        if address % size:
            raise SimulationError(
                f"'{access.buffer.name}' is accessed as vectors of {size} bytes, but its data "
                f"pointer {address:#x} is not a multiple of {size}",
                loop.span,
                hint="pass a tensor whose storage starts aligned (a fresh allocation, not a "
                "slice at an odd offset), or use T.unroll",
            )
