"""Named axes: the coordinates a layout maps a logical element to.

A layout's result is a point on named axes: thread axes say which thread (lane, warp, CTA, ...)
owns an element, the memory axis ``m`` says where it sits in that thread's storage (a register
slot for a local buffer, an element offset for shared or global memory).

The set of axes is fixed. ``Axis.get("laneid")`` returns the axis; an unknown name is a
:class:`~tirx.errors.LayoutError` (TVM registers unknown names silently; we do not, so a typo
cannot become a new axis). ``v @ axis`` is the value ``v`` on that axis: a stride inside
``S[...]``/``R[...]`` or an offset term.
"""

from __future__ import annotations

import enum
import operator

from ..errors import LayoutError
from ..frozen import Frozen, frozen

__all__ = [
    "AxisKind",
    "Axis",
    "AxisTerm",
    "as_axis",
    "as_int",
    "laneid",
    "warpid",
    "tx",
    "bx",
    "by",
    "bz",
    "wgid",
    "tid_in_wg",
    "wid_in_wg",
    "m",
]


class AxisKind(str, enum.Enum):
    """Whether an axis names a thread (who owns an element) or storage (where it sits)."""

    THREAD = "thread"
    MEMORY = "memory"


_KNOWN_AXES: dict[str, AxisKind] = {
    "laneid": AxisKind.THREAD,  # lane within a warp, 0..31
    "warpid": AxisKind.THREAD,  # warp within the CTA
    "tx": AxisKind.THREAD,  # thread within the CTA
    "bx": AxisKind.THREAD,  # CTA within the grid
    "by": AxisKind.THREAD,
    "bz": AxisKind.THREAD,
    "wgid": AxisKind.THREAD,  # warpgroup within the CTA
    "tid_in_wg": AxisKind.THREAD,  # thread within its warpgroup
    "wid_in_wg": AxisKind.THREAD,  # warp within its warpgroup
    "m": AxisKind.MEMORY,  # register slot (local) or element offset (shared/global)
}


def as_int(value: object, what: str) -> int:
    """``value`` as a Python int, or a LayoutError naming ``what`` (bools are not ints here)."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise LayoutError(
            f"{what} must be an integer, got {value!r}",
            hint="layout extents, strides and offsets are compile-time integers",
        )
    return operator.index(value)


@frozen(eq=False)
class Axis(Frozen):
    """A named output coordinate of a layout. Only the fixed set of axes exists.

    An axis equals (and hashes like) its name, so ``{m: 1}["m"]`` and ``axis == "laneid"``
    work as TVM-style code expects.
    """

    name: str
    kind: AxisKind

    def __post_init__(self) -> None:
        expected = _KNOWN_AXES.get(self.name) if isinstance(self.name, str) else None
        if expected is None:
            raise _unknown_axis(self.name)
        if self.kind != expected:
            raise LayoutError(
                f"axis {self.name!r} is a {expected.value} axis, not {self.kind!r}",
                hint=f"use Axis.get({self.name!r})",
            )
        object.__setattr__(self, "kind", expected)

    @staticmethod
    def get(name: str | Axis) -> Axis:
        """The axis called ``name``; LayoutError for a name that is not an axis."""
        if isinstance(name, Axis):
            return name
        axis = _REGISTRY.get(name) if isinstance(name, str) else None
        if axis is None:
            raise _unknown_axis(name)
        return axis

    @property
    def is_thread(self) -> bool:
        return self.kind is AxisKind.THREAD

    @property
    def is_memory(self) -> bool:
        return self.kind is AxisKind.MEMORY

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Axis, str)):
            return self.name == (other.name if isinstance(other, Axis) else other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    def __rmatmul__(self, value: object) -> AxisTerm:
        return AxisTerm(as_int(value, f"the value in '{value!r} @ {self.name}'"), self)

    def __matmul__(self, other: object):
        raise LayoutError(
            f"'{self.name} @ {other!r}' puts the axis first",
            hint=f"write the value first: 4 @ {self.name}",
        )

    def __repr__(self) -> str:
        # The bare name: layouts print as spec syntax that evaluates back.
        return self.name


@frozen
class AxisTerm(Frozen):
    """``value @ axis``: a stride on ``axis`` inside a spec, or an offset term after ``+``."""

    value: int
    axis: Axis

    def __add__(self, other: object):
        # Imported here because specs build on axes, not the other way round.
        from .spec import LayoutSpec

        return LayoutSpec.of(self) + other

    def __radd__(self, other: object):
        from .spec import LayoutSpec

        return LayoutSpec.of(other) + self

    def __repr__(self) -> str:
        return f"{self.value} @ {self.axis.name}"


def as_axis(axis: object) -> Axis:
    """An :class:`Axis` from an axis or its name."""
    return Axis.get(axis)  # type: ignore[arg-type]


def _unknown_axis(name: object) -> LayoutError:
    return LayoutError(
        f"unknown axis {name!r}",
        hint=f"the axes are {', '.join(_KNOWN_AXES)} (tirx does not create axes on first use)",
    )


_REGISTRY: dict[str, Axis] = {name: Axis(name, kind) for name, kind in _KNOWN_AXES.items()}

laneid = _REGISTRY["laneid"]
warpid = _REGISTRY["warpid"]
tx = _REGISTRY["tx"]
bx = _REGISTRY["bx"]
by = _REGISTRY["by"]
bz = _REGISTRY["bz"]
wgid = _REGISTRY["wgid"]
tid_in_wg = _REGISTRY["tid_in_wg"]
wid_in_wg = _REGISTRY["wid_in_wg"]
m = _REGISTRY["m"]

# TVM code spells axes as ``Axis.laneid``; keep that spelling working.
for _name, _axis in _REGISTRY.items():
    setattr(Axis, _name, _axis)
del _name, _axis
