"""The launcher's check that each tensor starts where the kernel's aligned accesses need it to:
``T.vectorized`` loops, the global sources of ``cp.async`` and the global addresses of
``cp.async.bulk`` (tirx/ir/aligned_access.py).

Such an access sits at an offset that lowering proved a multiple of its size (a vectorized
copy becomes one ``uint2``/``uint4`` load or store, tirx/backend/cuda/vector.py; a 16-byte
``cp.async`` reads 16 aligned bytes); a data pointer that is not a multiple too (a view such as
``torch.empty(1025, dtype=torch.float16)[1:]``) makes the GPU stop the kernel with "misaligned
address", a sticky error that poisons the CUDA context. So the launcher refuses such a pointer
first, with a LaunchError naming the parameter, the alignment, the instruction and the line.
The requirement per parameter is what the simulator checks too; it is found once per
executable, and costs a call one ``&`` per tensor that has one, on the calls that check (a
remembered tensor kept its pointer and passed already).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import LaunchError, Span
from ...ir import nodes as ir
from ...ir.aligned_access import AccessKind, parameter_alignments

__all__ = ["Alignment", "Requirements", "misalignment", "pointer_alignment"]


@dataclass(frozen=True)
class Alignment:
    """Parameter ``name`` (at position ``index``) needs a data pointer that is a multiple of
    ``nbytes`` (a power of two) for the access at ``span``: ``what`` says which (the
    phrase of :attr:`tirx.ir.aligned_access.AlignedAccess.what`), ``kind`` its kind."""

    index: int
    name: str
    nbytes: int
    what: str
    kind: AccessKind
    span: Span | None = None

    @property
    def mask(self) -> int:
        """The low pointer bits that must be zero."""
        return self.nbytes - 1


@dataclass(frozen=True)
class Requirements:
    """What one kernel asks of its parameters' data pointers: per parameter its
    :class:`Alignment`, or None when it has none (scalars, tensors read as elements only)."""

    per_param: tuple[Alignment | None, ...]

    @classmethod
    def of(cls, fn: ir.Function) -> Requirements:
        """The requirements of the lowered ``fn`` (tirx/ir/aligned_access.py)."""
        return cls(
            tuple(
                None if a is None else Alignment(i, p.name, a.nbytes, a.what, a.kind, a.span)
                for i, (p, a) in enumerate(zip(fn.params, parameter_alignments(fn)))
            )
        )

    @property
    def masks(self) -> tuple[int, ...]:
        """Per parameter, the bits of its pointer that must be zero (0: any pointer)."""
        return tuple(0 if r is None else r.mask for r in self.per_param)

    def check(self, i: int, pointer: int) -> None:
        """Raise the LaunchError of :func:`misalignment` for parameter ``i``'s ``pointer``."""
        error = misalignment(pointer, self.per_param[i])
        if error is not None:
            raise error


def pointer_alignment(pointer: int) -> int:
    """The largest power of two that divides ``pointer`` (0 for the null pointer, which any
    alignment divides)."""
    return pointer & -pointer


def misalignment(pointer: int, requirement: Alignment | None) -> LaunchError | None:
    """The error for a tensor whose data pointer ``pointer`` breaks ``requirement``, or None
    when it keeps it (or there is none). Pure: the launch paths raise what it returns."""
    if requirement is None or not pointer & requirement.mask:
        return None
    name, size, have = requirement.name, requirement.nbytes, pointer_alignment(pointer)
    other = (
        ", or loop with T.unroll instead of T.vectorized"
        if requirement.kind is AccessKind.VECTOR
        else ""
    )
    return LaunchError(
        f"parameter {name!r} is {requirement.what}, so its data pointer must be a multiple of "
        f"{size}; {pointer:#x} is aligned to {have} byte{'s' if have > 1 else ''} only",
        requirement.span,
        hint=f"pass {name} as a tensor of its own storage, e.g. {name}.clone() (a view that "
        "starts inside another tensor, like x[1:], keeps its offset; .contiguous() returns a "
        f"contiguous view as it is){other}",
    )
