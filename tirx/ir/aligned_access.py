"""Which accesses of a lowered program need a global tensor's data pointer aligned, and to how
many bytes: the one requirement the simulator and the CUDA launcher both check.

Lowering proves offsets from the start of a tensor; what it cannot know is where the tensor
starts. These accesses turn that into a requirement on the data pointer:

* a ``T.vectorized`` loop of ``n`` iterations: lowering proved (tirx/transform/vectorize.py)
  that each of its accesses that depends on the loop variable covers ``n`` consecutive
  elements starting at a multiple of ``n``; the GPU makes it one access of ``n * bytes`` bytes,
  which must be naturally aligned (PTX ISA, "Vectors"; a ``uint4`` in C). The CUDA code makes
  one vector access only of a loop that is a plain copy (tirx/backend/cuda/vector.py); the
  requirement covers every vectorized loop, since that is what ``T.vectorized`` promises.
* ``cp.async`` (PTX ISA, "cp.async"): the global source of a copy of ``cp-size`` (4, 8 or 16)
  bytes must be aligned to ``cp-size``. Lowering proved the offset (tirx/families/cp_async/isa.py) or
  left it to run time; either way the pointer must be aligned to ``cp-size`` too.
* ``cp.async.bulk`` (PTX ISA, "cp.async.bulk"): its global address (the bulk store's
  destination) must be 16-byte aligned; so must a tensor map's (``cp.async.bulk.tensor``,
  ``cp.reduce.async.bulk.tensor``; PTX ISA, "Tensor Map": globalAddress).
* the float32/float16 pair conversions (``T.cuda.float22half2``, ``half8tofloat8``,
  ``float8tohalf8``): a global float32 side is accessed as ``float2`` (8 bytes), a global
  float16 side as ``half2`` (4 bytes), at offsets lowering proved aligned or left to the
  simulator (tirx/families/half_conversions/lower.py); the node says so itself
  (``HalfConversion.aligned_accesses()``, tirx/families/half_conversions/nodes.py), as any
  family's statement node that needs a global tensor's pointer aligned does.
* an element read or written in a dtype wider than the tensor's own (a reinterpreted view:
  the softmax reads float16 rows as ``uint64`` words): lowering proved its offset a multiple
  of the width, so the pointer must be one too (:func:`element_access`). The simulator checks
  it at the access itself (tirx/sim/memory.py), the launcher before the launch.

The requirement is read off the lowered IR only (the instruction text and its operands, as the
ISA spells them), not from the compiler's instruction tables, so the simulator can use it. Both
targets check every such access of the kernel, whether or not a thread reaches it: the
simulator when it builds the statement (tirx/sim/pointer_alignment.py, from the loop and from
tirx/families/cp_async/sim.py and tirx/families/cp_async_bulk/sim.py), the CUDA launcher on each call's pointers
(tirx/backend/cuda/alignment.py).
"""

from __future__ import annotations

import enum

from ..errors import Span
from ..frozen import Frozen, frozen
from . import nodes as ir
from .visitor import walk

__all__ = [
    "AccessKind",
    "CopyOperand",
    "AlignedAccess",
    "BULK_ALIGN",
    "FLOAT2_BYTES",
    "HALF2_BYTES",
    "vector_accesses",
    "copy_access",
    "element_access",
    "parameter_alignments",
]

BULK_ALIGN = 16  # bytes: a bulk copy's addresses (PTX ISA, cp.async.bulk)
#: bytes of one access of each side of a pair conversion: a float2 (two float32), a half2 (two
#: float16)
FLOAT2_BYTES, HALF2_BYTES = 8, 4


class AccessKind(enum.Enum):
    """What makes an access need its tensor's data pointer aligned."""

    VECTOR = "vector"  # a T.vectorized loop's load or store
    COPY = "cp.async"  # the global source of a cp.async
    BULK = "cp.async.bulk"  # the global address of a bulk copy
    CONVERSION = "half conversion"  # a float2 or half2 access of T.cuda.float22half2, ...
    ELEMENT = "wide element"  # an element read or written in a wider dtype than the tensor's


class CopyOperand(enum.Enum):
    """Which of a copy's addresses is the global one (PTX order: ``[dst], [src]``)."""

    DESTINATION = "destination"
    SOURCE = "source"


@frozen
class AlignedAccess(Frozen):
    """One access that touches the global tensor ``buffer`` in units that need its data
    pointer to be a multiple of ``nbytes`` (a power of two): a ``T.vectorized`` loop, or the
    PTX ``instruction`` of a copy; ``span`` is the user's line (the loop, the copy)."""

    buffer: ir.Buffer
    nbytes: int
    kind: AccessKind
    instruction: str
    span: Span | None = None
    operand: CopyOperand | None = None  # a copy's global address; None for a vector

    @property
    def what(self) -> str:
        """How the tensor is accessed, for messages: "accessed as vectors of 16 bytes
        (T.vectorized)", "the global source of a 16-byte cp.async.cg.shared.global", ..."""
        if self.kind is AccessKind.VECTOR:
            return f"accessed as vectors of {self.nbytes} bytes (T.vectorized)"
        if self.kind is AccessKind.ELEMENT:
            return f"read or written as {self.instruction} ({self.nbytes}-byte elements)"
        if self.kind is AccessKind.COPY:
            return f"the global {self.operand.value} of a {self.nbytes}-byte {self.instruction}"
        if self.kind is AccessKind.CONVERSION:
            pair = "float2" if self.nbytes == FLOAT2_BYTES else "half2"
            return (
                f"the {self.operand.value} of T.cuda.{self.instruction}, read or written as "
                f"{pair} ({self.nbytes}-byte aligned)"
            )
        return (
            f"the global {self.operand.value} of {self.instruction} (a bulk copy's addresses are "
            f"{self.nbytes}-byte aligned)"
        )


def vector_accesses(loop: ir.For) -> list[AlignedAccess]:
    """The accesses of the vectorized ``loop`` (lowered, checked) to global tensors that depend
    on its variable; a load of the same element in every iteration (a broadcast) is none."""
    n = int(loop.stop.value) - int(loop.start.value)
    found = []
    for node in walk(loop.body):
        if not isinstance(node, (ir.Load, ir.Store)) or node.buffer.scope is not ir.Scope.GLOBAL:
            continue
        if any(x is loop.var for x in walk(node.index)):
            nbytes = n * node.dtype.bytes
            found.append(
                AlignedAccess(node.buffer, nbytes, AccessKind.VECTOR, "T.vectorized", loop.span)
            )
    return found


def _global_operand(call: ir.PtxCall) -> tuple[ir.GlobalAddress, CopyOperand] | None:
    for i, op in enumerate(call.operands):
        if isinstance(op, ir.AddressOperand) and isinstance(op.address, ir.GlobalAddress):
            return op.address, CopyOperand.DESTINATION if i == 0 else CopyOperand.SOURCE
    return None


def copy_access(call: ir.PtxCall) -> AlignedAccess | None:
    """The global operand of the copy ``call`` and the alignment it needs of that tensor's
    data pointer: ``cp-size`` bytes for a ``cp.async`` (its third operand, an immediate),
    16 for any ``cp.async.bulk`` copy; None for other instructions (group calls, waits)."""
    found = _global_operand(call)
    if found is None or found[0].buffer.scope is not ir.Scope.GLOBAL:
        return None
    (address, operand), text = found, call.instruction
    if text.startswith(("cp.async.bulk.", "cp.reduce.async.bulk.")):
        kind, nbytes = AccessKind.BULK, BULK_ALIGN
    elif text.startswith("cp.async.") and len(call.operands) >= 3:
        size = call.operands[2]
        if not (isinstance(size, ir.Immediate) and isinstance(size.value, int)):
            return None
        kind, nbytes = AccessKind.COPY, size.value
    else:
        return None
    return AlignedAccess(address.buffer, nbytes, kind, text, call.span, operand)


def element_access(node, span: Span | None = None) -> AlignedAccess | None:
    """The lowered ``Load`` or ``Store`` ``node`` of a global tensor in a dtype wider than the
    tensor's own (a reinterpreted view: float16 rows read as uint64 words), which needs the
    tensor's data pointer to be a multiple of that width (a ``uint64`` access of a pointer
    that is not makes the GPU stop with "misaligned address"); None for any other access."""
    if not isinstance(node, (ir.Load, ir.Store)):
        return None
    buf = node.buffer
    if buf.scope is not ir.Scope.GLOBAL or node.dtype.bytes <= buf.dtype.bytes:
        return None
    span = getattr(node, "span", None) or span
    return AlignedAccess(buf, node.dtype.bytes, AccessKind.ELEMENT, node.dtype.name, span)


def _accesses(fn: ir.Function):
    span = None  # the innermost statement's, for a load (an expression has none)
    for node in walk(fn.body):
        if isinstance(node, ir.Stmt):
            span = getattr(node, "span", None) or span
        access = element_access(node, span)
        if access is not None:
            yield access
        elif isinstance(node, ir.For) and node.kind is ir.LoopKind.VECTORIZED:
            yield from vector_accesses(node)
        elif hasattr(node, "aligned_accesses"):  # a family's statement that says
            yield from node.aligned_accesses()
        elif isinstance(node, ir.PtxCall):
            access = copy_access(node)
            if access is not None:
                yield access


def parameter_alignments(fn: ir.Function) -> tuple[AlignedAccess | None, ...]:
    """Per parameter of the lowered ``fn``: the access that needs its data pointer the most
    aligned (the first in program order on a tie), or None when none needs more than one byte
    (scalars, tensors only read and written as elements)."""
    index = {p: i for i, p in enumerate(fn.params) if isinstance(p, ir.Buffer)}
    most: list[AlignedAccess | None] = [None] * len(fn.params)
    for access in _accesses(fn):
        i = index.get(access.buffer)
        if i is None or access.nbytes <= 1:
            continue
        if most[i] is None or access.nbytes > most[i].nbytes:
            most[i] = access
    return tuple(most)
