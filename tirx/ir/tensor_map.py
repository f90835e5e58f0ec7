"""The tensor maps a lowered program needs: what a ``cp.async.bulk.tensor`` (or
``cp.reduce.async.bulk.tensor``) call says about the map it reads, in the form the CUDA
codegen, the launcher and the simulator share.

A lowered tensor copy (tirx/families/tma/isa.py, isa_store.py) carries its map in its operands
-- a load right after its shared destination, a store or reduction first, as PTX lists them:
``AddressOperand(GlobalAddress(tensor, origin))`` -- the map's global address is that byte of
the tensor parameter -- then ``Immediate`` fields in the order of the driver's
``cuTensorMapEncodeTiled``, each list innermost dimension first:

* ``dims``: the tensor's extents in elements (``rank`` values);
* ``strides``: the bytes between consecutive indices of dimensions 1 .. rank-1 (``rank - 1``
  values; dimension 0 is dense);
* ``box``: the box's extents in elements (``rank`` values);
* ``swizzle`` (0 none, 1 32B, 2 64B, 3 128B) and ``l2_promotion`` (0 none, 1 64B, 2 128B,
  3 256B), one value each.

Then come the ``rank`` coordinates and, for a load, the mbarrier; for a store, the shared
source. The element type is the tensor's. These fields are the map's whole content (tiled
mode, element strides 1, no interleave, zero fill out of bounds), so two calls with equal
:class:`TensorMap` share one encoded map -- a load and a store of the same box of a tensor
too: one hidden kernel parameter per distinct map (:func:`tensor_maps`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import dtype_of
from . import nodes as ir
from .visitor import walk

__all__ = [
    "store_start_below_zero",
    "SWIZZLE_SPAN", "TensorMapFields", "TensorMap", "tensor_map_of", "tensor_maps", "map_position",
]  # fmt: skip

SWIZZLE_SPAN = {0: 0, 1: 32, 2: 64, 3: 128}  # bytes of one swizzled row, per swizzle code
PREFIXES = ("cp.async.bulk.tensor.", "cp.reduce.async.bulk.tensor.")


@dataclass(frozen=True)
class TensorMapFields:
    """A tensor map's geometry, innermost dimension first (see the module docstring)."""

    dtype: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]  # bytes, dimensions 1..rank-1
    box: tuple[int, ...]
    swizzle: int = 0
    l2_promotion: int = 0

    @property
    def rank(self) -> int:
        return len(self.dims)

    def immediates(self) -> tuple[ir.Immediate, ...]:
        values = (*self.dims, *self.strides, *self.box, self.swizzle, self.l2_promotion)
        return tuple(ir.Immediate(int(v)) for v in values)

    @classmethod
    def from_immediates(cls, dtype: str, rank: int, values) -> TensorMapFields:
        v = [int(x) for x in values]
        dims, strides = tuple(v[:rank]), tuple(v[rank : 2 * rank - 1])
        box = tuple(v[2 * rank - 1 : 3 * rank - 1])
        return cls(dtype, dims, strides, box, v[3 * rank - 1], v[3 * rank])

    @property
    def box_bytes(self) -> int:
        """The bytes one copy moves (its complete-tx count)."""
        n = dtype_of(self.dtype).bytes
        for b in self.box:
            n *= b
        return n


@dataclass(frozen=True)
class TensorMap:
    """One map: the tensor parameter ``buffer``, the byte ``origin`` of its global address,
    its ``fields``."""

    buffer: ir.Buffer
    origin: int
    fields: TensorMapFields


def store_start_below_zero(text: str, axis: int, value: int) -> tuple[str, str]:
    """(message, hint) for a tensor store or reduction ``text`` whose box coordinate ``axis``
    (outer to inner, as ``coords=`` is written) is ``value`` < 0: an H100 runs it as an
    illegal instruction (docs/gpu-runs/sessions.md, 2026-12-05). The lowering refuses a
    compile-time one, the simulator a run-time one."""
    return (
        f"{text}: box coordinate {axis} is {value}, below 0: a tensor store or reduction whose "
        "box starts before the tensor stops the kernel with an illegal instruction (measured "
        "on an H100)",
        "start the box at 0 or above; a box past the tensor's far end is fine (its elements "
        "outside are not written)",
    )


def fields_count(rank: int) -> int:
    """How many ``Immediate`` operands a map of ``rank`` dimensions takes."""
    return 3 * rank + 1


def map_position(call: ir.PtxCall) -> tuple[int, int] | None:
    """``(index of the map's address operand, rank)`` of a lowered tensor copy, or None for any
    other call: 0 for a store or reduction (``[tensorMap, coords], [srcMem]``), 1 for a load
    (``[dstMem], [tensorMap, coords], [mbar]``)."""
    text = call.instruction
    prefix = next((p for p in PREFIXES if text.startswith(p)), None)
    if prefix is None:
        return None
    ops = call.operands
    first = ops[0] if ops else None
    at = 0 if isinstance(getattr(first, "address", None), ir.GlobalAddress) else 1
    return at, int(text[len(prefix)])


def tensor_map_of(call: ir.PtxCall) -> TensorMap | None:
    """The map a lowered tensor copy reads, or None for any other call."""
    found = map_position(call)
    if found is None:
        return None
    at, rank = found
    ops = call.operands
    address = ops[at].address
    n = fields_count(rank)
    values = [op.value for op in ops[at + 1 : at + 1 + n]]
    fields = TensorMapFields.from_immediates(address.buffer.dtype.name, rank, values)
    return TensorMap(address.buffer, int(address.byte_offset), fields)


def tensor_maps(fn: ir.Function) -> tuple[TensorMap, ...]:
    """The distinct maps of the lowered ``fn``, in program order (hidden parameter ``k`` of the
    CUDA kernel is map ``k``)."""
    found: dict[TensorMap, TensorMap] = {}  # a Buffer compares by identity
    for node in walk(fn.body):
        if isinstance(node, ir.PtxCall):
            tm = tensor_map_of(node)
            if tm is not None:
                found.setdefault(tm, tm)
    return tuple(found.values())
