"""TileLayout: shard iters, replica iters and offsets over named axes.

For a logical coordinate ``x`` of a tensor of shape ``shape`` a layout

1. flattens ``x`` row-major over ``shape`` to an integer ``f``;
2. splits ``f`` over the shard extents innermost-first (the outermost piece is not reduced);
3. adds ``piece_k * stride_k`` to iter ``k``'s axis (equal axes sum);
4. adds the offsets.

Replica iters add every combination of their values to that base point (copies of one
element). Layouts are immutable and hashable; ``==`` and ``hash`` use the canonical form, so
two layouts are equal exactly when they spell the same map in different ways.
"""

from __future__ import annotations

import itertools
import math
from functools import cached_property, lru_cache

from ..errors import LayoutError
from ..frozen import Frozen, frozen
from .algebra import (
    canonical_replica,
    canonical_shard,
    check_permutation,
    group_iters,
    pack_iters,
    unpack_iters,
)
from .axes import Axis, as_axis, as_int, m
from .index import add, check_range, coordinate, flatten, is_zero, scale, split
from .origin import note_built
from .spec import Iter, LayoutSpec, Offsets, format_spec, merge_offsets
from .table import element_columns, element_table

__all__ = ["TileLayout", "transpose"]

Iters = tuple[Iter, ...]


@frozen(eq=False)  # its own __init__, __eq__, __hash__ and __repr__
class TileLayout(Frozen):
    """A layout ``(shard, replica, offset)``; build it with ``TileLayout(S[...] + ...)``.

    ``shard`` and ``replica`` are tuples of :class:`Iter`; ``offset`` is a tuple of
    ``(axis, value)`` pairs sorted by axis name (see :meth:`offsets` for a dict).
    """

    shard: Iters
    replica: Iters
    offset: Offsets

    def __init__(self, spec: LayoutSpec | TileLayout):
        if isinstance(spec, TileLayout):
            spec = LayoutSpec(spec.shard, spec.replica, spec.offset)
        if not isinstance(spec, LayoutSpec):
            raise LayoutError(
                f"TileLayout expects a spec built with S[...], got {spec!r}",
                hint="for example TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)])",
            )
        object.__setattr__(self, "shard", spec.shard or ())
        object.__setattr__(self, "replica", spec.replica)
        object.__setattr__(self, "offset", spec.offset)
        note_built(self)

    @classmethod
    def from_iters(cls, shard=(), replica=(), offset=None) -> TileLayout:
        """A layout from iters (``Iter`` or ``(extent, stride, axis)`` triples) and a dict
        ``{axis or name: value}`` of offsets."""
        if offset is not None and not isinstance(offset, dict):
            raise LayoutError(
                f"offset must be a dict {{axis: value}}, got {offset!r}",
                hint="for example {'m': 2, warpid: 1}",
            )
        return cls(LayoutSpec(_as_iters(shard), _as_iters(replica), merge_offsets(offset or {})))

    # ------------------------------------------------------------------ canonical form

    @cached_property
    def _canon(self) -> TileLayout:
        offset = tuple((a, v) for a, v in self.offset if v != 0)
        canon = TileLayout(
            LayoutSpec(canonical_shard(self.shard), canonical_replica(self.replica), offset)
        )
        canon.__dict__["_canon"] = canon
        return canon

    def canonicalize(self) -> TileLayout:
        """The same map with unit iters and zero offsets dropped, neighbouring iters on one axis
        fused where ``e_in * s_in == s_out``, and replicas sorted."""
        return self._canon

    def _key(self) -> tuple:
        canon = self._canon
        return (canon.shard, canon.replica, canon.offset)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TileLayout):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"TileLayout({format_spec(self.shard, self.replica, self.offset)})"

    # ------------------------------------------------------------------ queries

    def offsets(self) -> dict[str, int]:
        """The offsets as ``{axis_name: value}``."""
        return {a.name: v for a, v in self.offset}

    def axes(self) -> frozenset[str]:
        """Names of the axes the map touches (iters of extent > 1 and non-zero offsets)."""
        canon = self._canon
        return frozenset(
            [it.axis.name for it in canon.shard + canon.replica] + [a.name for a, _ in canon.offset]
        )

    def is_memory_only(self) -> bool:
        """True when no thread axis is touched (see :meth:`axes`)."""
        return all(as_axis(name).is_memory for name in self.axes())

    def size(self, axis: Axis | str | None = None) -> int:
        """Number of logical elements (product of shard extents), or of those on ``axis``."""
        if axis is None:
            return math.prod(it.extent for it in self.shard)
        axis = as_axis(axis)
        return math.prod(it.extent for it in self.shard if it.axis == axis)

    def span(self, axis: Axis | str | None = None) -> int:
        """Footprint on ``axis`` (default ``m``), one past the highest position reached:
        ``1 + offset + sum((e - 1) * s)`` over shard and replica iters (the offset counted, as
        TIRx does), a negative stride adding nothing. For a local buffer: the register count."""
        return 1 + self._reach(axis, max)

    def lowest(self, axis: Axis | str | None = None) -> int:
        """The lowest position reached on ``axis`` (default ``m``): the offset plus every
        negative stride's walk down. Below 0 the layout cannot describe storage."""
        return self._reach(axis, min)

    def _reach(self, axis, pick) -> int:
        axis = m if axis is None else as_axis(axis)
        iters = [it for it in self.shard + self.replica if it.axis == axis]
        walks = sum(pick((it.extent - 1) * it.stride, 0) for it in iters)
        return walks + sum(v for a, v in self.offset if a == axis)

    def storage(self) -> TileLayout:
        """The layout with every thread-axis iter and offset dropped."""
        return TileLayout(
            LayoutSpec(
                tuple(it for it in self.shard if it.axis.is_memory),
                tuple(it for it in self.replica if it.axis.is_memory),
                tuple((a, v) for a, v in self.offset if a.is_memory),
            )
        )

    # ------------------------------------------------------------------ the map

    def apply(self, *coord, shape=None) -> dict:
        """The base point ``{axis_name: value}`` of a logical coordinate.

        * ``apply(f)``: split one linear index over the shard extents;
        * ``apply(c0, c1, ...)`` without ``shape``: one value per shard iter;
        * ``apply(x0, x1, ..., shape=shape)``: a coordinate of a tensor of that shape.

        The result always holds ``"m"`` plus every axis in :meth:`axes`. Coordinates may be
        ints or symbolic index expressions (see :mod:`tirx.layout.index`); for ints the result
        is the mapping of SPEC §2 and one outside ``[0, extent)`` is a LayoutError; for
        expressions it is the same map written tidily and assumes in-range coordinates.
        """
        iters, values = self._iter_values(coord, shape)
        result: dict = {name: 0 for name in self._result_axes}
        for it, value in zip(iters, values):
            term = scale(value, it.stride)
            if not is_zero(term):
                result[it.axis.name] = add(result.get(it.axis.name, 0), term)
        for axis, value in self._canon.offset:
            result[axis.name] = add(result[axis.name], value)
        return result

    def apply_all(self, *coord, shape=None) -> list[dict]:
        """Every copy of the element: the base point plus each combination of replica values.
        The first copy is :meth:`apply`'s result."""
        base = self.apply(*coord, shape=shape)
        replica = self._canon.replica
        copies = []
        for combo in itertools.product(*(range(it.extent) for it in replica)):
            point = dict(base)
            for it, r in zip(replica, combo):
                point[it.axis.name] = add(point[it.axis.name], r * it.stride)
            copies.append(point)
        return copies

    def table(self, axes=("m",)) -> tuple[tuple[int, ...], ...]:
        """``apply`` of every flat index ``0 .. size()-1``, in order, as tuples of the values
        on ``axes`` (the base copy; offsets included). One pass over the shard iters instead
        of one ``apply`` per element: the enumeration behind contract checks and pictures."""
        return element_table(self, tuple(as_axis(a).name for a in axes))

    def column(self, axis="m") -> tuple[int, ...]:
        """:meth:`table` on one axis, as a flat tuple (no 1-tuples to unpack)."""
        return self.columns((axis,))[0]

    def columns(self, axes=("m",)) -> tuple[tuple[int, ...], ...]:
        """:meth:`table` by axis: one flat tuple per axis."""
        return element_columns(self, tuple(as_axis(a).name for a in axes))

    @cached_property
    def _result_axes(self) -> tuple[str, ...]:
        return ("m",) + tuple(sorted(self.axes() - {"m"}))

    def _iter_values(self, coord: tuple, shape) -> tuple[Iters, list]:
        if len(coord) == 1 and isinstance(coord[0], (tuple, list)):
            coord = tuple(coord[0])
        coord = tuple(coordinate(c) for c in coord)
        all_ints = all(isinstance(c, int) for c in coord)
        if shape is None:
            if len(coord) == 1:
                check_range(coord, (self.size(),), "index")
                iters = self.shard if all_ints else self._canon.shard
                return iters, split(coord[0], _extents(iters))
            if len(coord) != len(self.shard):
                raise LayoutError(
                    f"apply: {len(coord)} coordinates for a layout with {len(self.shard)} "
                    f"shard iters: {self!r}",
                    hint="pass one linear index, one value per shard iter, or shape=...",
                )
            check_range(coord, _extents(self.shard), "iters")
            return self.shard, list(coord)
        shape = _check_shape(shape, self.size(), "apply")
        if len(coord) != len(shape):
            raise LayoutError(
                f"apply: {len(coord)} coordinates for shape {shape}",
                hint="pass one coordinate per dimension of shape",
            )
        check_range(coord, shape, "shape")
        if all_ints:
            return self.shard, split(flatten(coord, shape), _extents(self.shard))
        plan = _group_plan(self._canon.shard, shape)
        if plan is None:
            iters = self._canon.shard
            return iters, split(flatten(coord, shape), _extents(iters))
        iters, seps = plan
        values: list = []
        for i, c in enumerate(coord):
            values += split(c, _extents(iters[seps[i] : seps[i + 1]]))
        return iters, values

    # ------------------------------------------------------------------ structure

    def group(self, shape) -> tuple[TileLayout, list[int]]:
        """Split shard iters at the dimension boundaries of ``shape`` (same map).

        Returns ``(layout, seps)``: dimension ``i`` is ``layout.shard[seps[i]:seps[i + 1]]``.
        The iters are kept as written when possible, else the canonical form is split.
        """
        shape = _check_shape(shape, self.size(), "group")
        for source in (self.shard, self._canon.shard):
            plan = group_iters(source, shape)
            if plan is not None:
                return self._with_shard(plan[0]), plan[1]
        raise LayoutError(
            f"group: {self!r} cannot be split at the boundaries of shape {shape}",
            hint="each dimension must be a product of whole (or evenly divided) shard iters",
        )

    def permute_dims(self, perm) -> TileLayout:
        """Reorder shard iters: the new iter ``i`` is ``shard[perm[i]]`` (as in TVM)."""
        perm = check_permutation(perm, len(self.shard), "permute_dims")
        return self._with_shard(tuple(self.shard[p] for p in perm))

    def permute_by_groups(self, seps, perm) -> TileLayout:
        """Reorder groups of shard iters (``seps`` as returned by :meth:`group`): the new
        group ``i`` is old group ``perm[i]``."""
        seps = _check_seps(seps, len(self.shard))
        perm = check_permutation(perm, len(seps) - 1, "permute_by_groups")
        return self._with_shard(
            tuple(self.shard[k] for g in perm for k in range(seps[g], seps[g + 1]))
        )

    def pack(self, n: int) -> TileLayout:
        """Reinterpret ``n`` consecutive elements as one ``n`` times wider element.

        The innermost iter must be ``(e, 1, m)`` with ``n | e``; it becomes ``(e // n, 1, m)``,
        and every other m stride and the m offset are divided by ``n`` (LayoutError when one
        is not divisible). A ``(16, 16)`` row-major layout packed by 2 is ``S[(16, 8):(8, 1)]``.
        """
        n = _check_factor(n, "pack")
        if n == 1:
            return self
        shard, replica = pack_iters(self.shard, self.replica, n)
        return TileLayout(LayoutSpec(shard, replica, _scale_offset(self.offset, n, True)))

    def unpack(self, n: int) -> TileLayout:
        """Reinterpret each element as ``n`` consecutive narrower ones (inverse of :meth:`pack`).

        m strides and the m offset are multiplied by ``n``; an innermost ``(e, 1, m)`` iter
        becomes ``(e * n, 1, m)``, otherwise an iter ``(n, 1, m)`` is appended.
        """
        n = _check_factor(n, "unpack")
        if n == 1:
            return self
        shard, replica = unpack_iters(self.shard, self.replica, n)
        return TileLayout(LayoutSpec(shard, replica, _scale_offset(self.offset, n, False)))

    def _with_shard(self, shard: Iters) -> TileLayout:
        return TileLayout(LayoutSpec(shard, self.replica, self.offset))


def transpose(layout, shape, perm):
    """The layout of the permuted tensor: for logical shape ``[shape[p] for p in perm]`` the
    result ``L2`` satisfies ``L2.apply(*y, shape=new_shape) == layout.apply(*x, shape=shape)``
    where ``y[i] = x[perm[i]]``. Works for TileLayout and ComposeLayout."""
    grouped, seps = layout.group(shape)
    perm = check_permutation(perm, len(seps) - 1, "transpose")
    return grouped.permute_by_groups(seps, perm)


# ---------------------------------------------------------------------- helpers


def _extents(iters: Iters) -> tuple[int, ...]:
    return tuple(it.extent for it in iters)


@lru_cache(maxsize=1024)
def _group_plan(shard: Iters, shape: tuple[int, ...]):
    return group_iters(shard, shape)


def _as_iters(iters) -> Iters:
    if not isinstance(iters, (tuple, list)):
        raise LayoutError(
            f"expected a sequence of iters, got {iters!r}",
            hint="for example [Iter(8, 4, laneid), Iter(4, 1, 'm')]",
        )
    out = []
    for it in iters:
        if isinstance(it, Iter):
            out.append(it)
        elif isinstance(it, (tuple, list)) and len(it) == 3:
            out.append(Iter(*it))
        else:
            raise LayoutError(
                f"expected an Iter or an (extent, stride, axis) triple, got {it!r}",
                hint="for example Iter(8, 4, laneid)",
            )
    return tuple(out)


def _check_shape(shape, size: int, what: str) -> tuple[int, ...]:
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    dims = tuple(as_int(d, f"{what}: a shape entry") for d in dims)
    if any(d < 1 for d in dims):
        raise LayoutError(f"{what}: shape {dims} has an extent below 1", hint="extents are >= 1")
    if math.prod(dims) != size:
        raise LayoutError(
            f"{what}: shape {dims} has {math.prod(dims)} elements but the layout has {size}",
            hint="the product of the shape must equal layout.size()",
        )
    return dims


def _check_seps(seps, n: int) -> list[int]:
    if not isinstance(seps, (tuple, list)):
        raise LayoutError(f"seps must be a list of ints, got {seps!r}", hint="use group()'s seps")
    seps = [as_int(s, "a group separator") for s in seps]
    if not seps or seps[0] != 0 or seps[-1] != n or any(a > b for a, b in zip(seps, seps[1:])):
        raise LayoutError(
            f"seps {seps} do not split {n} shard iters into groups",
            hint="seps start at 0, never decrease and end at the number of shard iters",
        )
    return seps


def _check_factor(n, what: str) -> int:
    n = as_int(n, f"{what}: the factor")
    if n < 1:
        raise LayoutError(f"{what}({n}): the factor must be at least 1", hint="e.g. 2 for f16->u32")
    return n


def _scale_offset(offset: Offsets, n: int, divide: bool) -> Offsets:
    out = []
    for axis, value in offset:
        if axis.is_memory and divide:
            if value % n:
                raise LayoutError(
                    f"pack({n}): the m offset {value} is not divisible by {n}",
                    hint="a packed layout must start at a whole wide element",
                )
            value //= n
        elif axis.is_memory:
            value *= n
        out.append((axis, value))
    return tuple(out)
