"""The simulator's check of global tensors' data pointers against the accesses that need them
aligned (tirx/ir/aligned_access.py, the requirement the CUDA launcher reads too):

* a ``T.vectorized`` loop over global tensors: the GPU accesses the ``n`` elements as one
  vector, which must be aligned to its size (PTX ISA, "Vectors": a vector access is naturally
  aligned);
* the global operand of a ``cp.async`` (``cp-size`` bytes) or a ``cp.async.bulk`` (16 bytes)
  (PTX ISA, "cp.async", "cp.async.bulk").

Each is checked when the machine builds the statement, before the block runs, so a loop or
copy that no thread reaches is checked too: the simulator refuses the tensors the launcher
refuses (which checks every access of the kernel).

Lowering proved the offsets from the start of the tensor (tirx/transform/vectorize.py,
tirx/isa/cp_async.py, tirx/isa/cp_async_bulk.py) or left them to the copies' own run-time
checks; what remains here is the tensor's data pointer, known once the arguments are bound.
"""

from __future__ import annotations

from ..errors import SimulationError
from ..ir import nodes as ir
from ..ir.aligned_access import AccessKind, AlignedAccess, vector_accesses

__all__ = ["check_vector_alignment", "check_pointer"]


def check_pointer(access: AlignedAccess | None, address: int) -> None:
    """Raise a SimulationError at ``access.span`` when ``address``, the data pointer of the
    tensor ``access`` touches, is not a multiple of ``access.nbytes`` (None: no access that
    needs one)."""
    if access is None or address % access.nbytes == 0:
        return
    size = access.nbytes
    fix = "pass a tensor whose storage starts aligned (a fresh allocation or a copy, not a slice "
    fix += "at an odd offset)" + (", or use T.unroll" if access.kind is AccessKind.VECTOR else "")
    raise SimulationError(
        f"'{access.buffer.name}' is {access.what}, but its data pointer {address:#x} is not a "
        f"multiple of {size}",
        access.span,
        hint=fix,
    )


def check_vector_alignment(loop: ir.For, regions: dict) -> None:
    """Raise a SimulationError at ``loop`` when a global tensor it accesses as vectors has a
    data pointer that is not a multiple of the vector's size."""
    for access in vector_accesses(loop):
        check_pointer(access, regions[access.buffer].address)
