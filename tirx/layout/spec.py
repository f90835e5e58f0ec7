"""Iters and the spec syntax ``S[extents : strides] + R[...] + offsets``.

An :class:`Iter` is one factor ``(extent, stride, axis)``. ``S[...]`` builds the shard iters
(they split the logical index), ``R[...]`` the replica iters (every combination of them is
added to the result: copies of an element), and ``+ v @ axis`` / ``+ v`` add offsets (a bare
integer is an offset on ``m``). The result is a :class:`LayoutSpec` that ``TileLayout(spec)``
turns into a layout. Examples::

    S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)]   # strides given; plain ints are on m
    S[4, 8]  ==  S[(4, 8)]  ==  S[(4, 8) : (8, 1)]   # no strides: row-major on m
    S[16]                                          # one iter
    S[(8, 4) : (4 @ laneid, 1 @ laneid)] + R[2 : 1 @ warpid] + 5 @ warpid + 2
"""

from __future__ import annotations

from ..errors import LayoutError
from ..frozen import Frozen, frozen
from .axes import Axis, AxisTerm, as_axis, as_int, m

__all__ = ["Iter", "LayoutSpec", "S", "R", "format_spec", "merge_offsets"]


@frozen
class Iter(Frozen):
    """One factor of a layout: ``extent`` positions, each ``stride`` apart on ``axis``.

    ``extent >= 1`` and ``stride`` are integers; ``axis`` is an :class:`Axis` or its name. A
    stride of 0 broadcasts; a negative stride walks the axis backwards (a reversed register
    order, rows stored bottom-up), which an offset brings back to positions >= 0 where the
    layout is used (allocations and views check it).
    """

    extent: int
    stride: int
    axis: Axis

    def __post_init__(self) -> None:
        extent = as_int(self.extent, "an iter extent")
        stride = as_int(self.stride, "an iter stride")
        if extent < 1:
            raise LayoutError(
                f"iter extent must be at least 1, got {extent}",
                hint="every factor of a layout covers at least one position",
            )
        object.__setattr__(self, "extent", extent)
        object.__setattr__(self, "stride", stride)
        object.__setattr__(self, "axis", as_axis(self.axis))

    def __repr__(self) -> str:
        return f"Iter({self.extent}, {self.stride}, {self.axis.name})"


Offsets = tuple[tuple[Axis, int], ...]


def merge_offsets(*parts: Offsets | dict) -> Offsets:
    """Sum offset terms per axis; the result is sorted by axis name (a canonical order)."""
    total: dict[Axis, int] = {}
    for part in parts:
        items = part.items() if isinstance(part, dict) else part
        for axis, value in items:
            axis = as_axis(axis)
            total[axis] = total.get(axis, 0) + as_int(value, f"the offset on {axis.name}")
    return tuple(sorted(total.items(), key=lambda kv: kv[0].name))


@frozen
class LayoutSpec(Frozen):
    """What ``S[...] + R[...] + offsets`` evaluates to; ``TileLayout(spec)`` builds the layout.

    ``shard`` is None when the expression has no ``S[...]`` term.
    """

    shard: tuple[Iter, ...] | None = None
    replica: tuple[Iter, ...] = ()
    offset: Offsets = ()

    def __post_init__(self) -> None:
        if not _well_formed(self):
            raise LayoutError(
                f"malformed layout spec {self.shard!r}, {self.replica!r}, {self.offset!r}",
                hint="build specs with S[...], R[...] and +, or use TileLayout.from_iters",
            )

    @staticmethod
    def of(term: object) -> LayoutSpec:
        """A spec from one ``+`` operand: a spec, ``v @ axis`` or a bare int (an offset on m)."""
        if isinstance(term, LayoutSpec):
            return term
        if isinstance(term, AxisTerm):
            return LayoutSpec(offset=((term.axis, term.value),))
        if isinstance(term, int) and not isinstance(term, bool):
            return LayoutSpec(offset=((m, term),))
        raise LayoutError(
            f"cannot add {term!r} to a layout spec",
            hint="combine S[...], R[...], 'v @ axis' offsets and integer offsets (on m) with +",
        )

    def __add__(self, other: object) -> LayoutSpec:
        other = LayoutSpec.of(other)
        if self.shard is not None and other.shard is not None:
            raise LayoutError(
                "a layout spec has one S[...] term, this one has two",
                hint="put all shard iters in one S[(extents) : (strides)]",
            )
        return LayoutSpec(
            shard=self.shard if self.shard is not None else other.shard,
            replica=self.replica + other.replica,
            offset=merge_offsets(self.offset, other.offset),
        )

    def __radd__(self, other: object) -> LayoutSpec:
        return LayoutSpec.of(other) + self

    def __repr__(self) -> str:
        return format_spec(self.shard, self.replica, self.offset)


def _well_formed(spec: LayoutSpec) -> bool:
    shard = () if spec.shard is None else spec.shard
    if not all(isinstance(part, tuple) for part in (shard, spec.replica, spec.offset)):
        return False
    return all(isinstance(it, Iter) for it in shard + spec.replica) and all(
        isinstance(term, tuple)
        and len(term) == 2
        and isinstance(term[0], Axis)
        and isinstance(term[1], int)
        for term in spec.offset
    )


class _SpecBuilder:
    """``S`` or ``R``: ``X[extents : strides]`` or ``X[extents]`` (row-major on m)."""

    def __init__(self, name: str):
        self._name = name

    def __getitem__(self, key: object) -> LayoutSpec:
        iters = _parse(self._name, key)
        if self._name == "S":
            return LayoutSpec(shard=iters)
        return LayoutSpec(replica=iters)

    def __repr__(self) -> str:
        return self._name


S = _SpecBuilder("S")
R = _SpecBuilder("R")


def _as_tuple(x: object) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _parse(name: str, key: object) -> tuple[Iter, ...]:
    if isinstance(key, slice):
        if key.step is not None or key.stop is None:
            what = ("has no strides after its colon" if key.step is None
                    else "takes 'extents : strides' with exactly one colon")  # fmt: skip
            raise LayoutError(
                f"{name}[...] {what}",
                hint=f"write {name}[(4, 8) : (8, 1)] or {name}[4, 8] for row-major",
            )
        extents = tuple(as_int(e, f"an extent in {name}[...]") for e in _as_tuple(key.start))
        strides = _as_tuple(key.stop)
        if len(extents) != len(strides):
            raise LayoutError(
                f"{name}[...] has {_count(len(extents), 'extent')} but "
                f"{_count(len(strides), 'stride')}",
                hint="give one stride per extent",
            )
    else:
        extents = tuple(as_int(e, f"an extent in {name}[...]") for e in _as_tuple(key))
        strides = _row_major(extents)
    return tuple(_iter(name, e, s) for e, s in zip(extents, strides))


def _row_major(extents: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for e in reversed(extents):
        strides.append(acc)
        acc *= e
    return tuple(reversed(strides))


def _iter(name: str, extent: int, stride: object) -> Iter:
    if isinstance(stride, AxisTerm):
        return Iter(extent, stride.value, stride.axis)
    if isinstance(stride, bool) or not isinstance(stride, int):
        raise LayoutError(
            f"a stride in {name}[...] must be an int (on m) or 'v @ axis', got {stride!r}",
            hint="for example S[(8, 4) : (4 @ laneid, 1)]",
        )
    return Iter(extent, stride, m)


def _format_stride(it: Iter) -> str:
    return str(it.stride) if it.axis == m else f"{it.stride} @ {it.axis.name}"


def _format_iters(name: str, iters: tuple[Iter, ...]) -> str:
    if not iters:
        return f"{name}[()]"
    if len(iters) == 1:
        return f"{name}[{iters[0].extent}:{_format_stride(iters[0])}]"
    extents = ", ".join(str(it.extent) for it in iters)
    strides = ", ".join(_format_stride(it) for it in iters)
    return f"{name}[({extents}):({strides})]"


def format_spec(shard: tuple[Iter, ...] | None, replica: tuple[Iter, ...], offset: Offsets) -> str:
    """Spec syntax that evaluates back to the same spec (with ``tirx.layout`` names in scope)."""
    parts = [] if shard is None else [_format_iters("S", shard)]
    if replica:
        parts.append(_format_iters("R", replica))
    parts += [str(v) if a == m else f"{v} @ {a.name}" for a, v in offset]
    return " + ".join(parts) if parts else "S[()]"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
