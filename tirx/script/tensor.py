"""Tensor views (SPEC §3): ``view(dtype)``, ``view(*shape[, layout=])``, ``rearrange`` and regions.

A :class:`~tirx.ir.nodes.View` is (buffer, dtype, shape, layout, elem_offset). Every operation
here is pure and compile-time: it returns a new View over the same storage, computed with the
layout algebra. Run-time values only enter through region starts (``elem_offset``).
"""

from __future__ import annotations

import math
import re

from ..dtypes import DType, dtype_of
from ..errors import LayoutError, TirxSyntaxError, built_definition
from ..ir.nodes import Buffer, Expr, Scope, Var, View, as_expr
from ..ir.printer import print_expr
from ..ir.simplify import linear_form, static_value
from ..layout import TileLayout, transpose
from ..layout.origin import built_at
from ..layout.swizzle import ComposeLayout

__all__ = [
    "make_buffer",
    "view_dtype",
    "view_shape",
    "rearrange",
    "permute",
    "region",
    "memory_span",
]


def default_layout(shape: tuple[int, ...]):
    from ..layout import S

    return TileLayout(S[tuple(shape)])


def memory_span(layout) -> int:
    """Elements of storage a layout touches on ``m`` (its footprint), at least 1."""
    return max(int(layout.span("m")), 1)


def make_buffer(
    name, shape, dtype, scope: Scope, layout="default", align=16, span=None, dynamic=False
):
    """A new buffer and the view of it that the kernel's name binds to (``dynamic``: a shared
    buffer in the dynamic shared-memory segment, ``scope="shared.dyn"``)."""
    shape = _shape_tuple(shape)
    dtype = _dtype(dtype)
    if isinstance(layout, str):
        if layout != "default":
            raise TirxSyntaxError(f'layout must be "default" or a layout object, got {layout!r}')
        layout = default_layout(shape)
    elif not isinstance(layout, (TileLayout, ComposeLayout)):
        raise TirxSyntaxError(f"layout must be a TileLayout or ComposeLayout, got {layout!r}")
    _check_layout_size(layout, shape, dtype, scope is Scope.LOCAL)
    _check_lowest(layout, 0, name)
    _check_thread_range(layout)
    if scope is not Scope.LOCAL and _thread_axes(layout):
        raise LayoutError(
            f"a {scope.value} allocation's layout must use only the memory axis m, got {layout!r}"
        )
    if not isinstance(align, int) or align <= 0 or align & (align - 1):
        raise TirxSyntaxError(f"align must be a power of two, got {align!r}")
    buf = Buffer(name, dtype, scope, shape, layout, memory_span(layout), align, span, dynamic)
    return buf, View(buf, dtype, shape, layout, 0, name)


def view_dtype(v: View, dtype) -> View:
    """Reinterpret the bits as another dtype (zero copy): pack or unpack the layout."""
    new = _dtype(dtype)
    old = v.dtype
    if new.bits == old.bits:
        return View(v.buffer, new, v.shape, v.layout, v.elem_offset, v.name)
    if new.bits > old.bits:
        r = new.bits // old.bits
        if v.shape[-1] % r:
            raise LayoutError(
                f"cannot view {old} as {new}: the last dimension ({v.shape[-1]}) "
                f"is not a multiple of {r}"
            )
        _check_swizzle_unit(v.layout, r, old, new)
        layout = v.layout.pack(r)
        offset = _scale_offset(v.elem_offset, r, old, new)
        shape = v.shape[:-1] + (v.shape[-1] // r,)
    else:
        r = old.bits // new.bits
        layout = v.layout.unpack(r)
        offset = v.elem_offset * r
        shape = v.shape[:-1] + (v.shape[-1] * r,)
    return View(v.buffer, new, shape, layout, offset, v.name)


def view_shape(v: View, shape, layout=None) -> View:
    """Re-shape over the same layout, or re-describe the storage with ``layout``."""
    shape = _infer_shape(shape, math.prod(v.shape) if layout is None else None)
    if layout is None:
        if math.prod(shape) != math.prod(v.shape):
            raise LayoutError(
                f"cannot view shape {v.shape} as {shape}: {math.prod(v.shape)} elements "
                f"vs {math.prod(shape)}"
            )
        return View(v.buffer, v.dtype, shape, v.layout, v.elem_offset, v.name)
    if not isinstance(layout, (TileLayout, ComposeLayout)):
        raise TirxSyntaxError(f"layout= must be a TileLayout or ComposeLayout, got {layout!r}")
    _check_layout_size(layout, shape, v.dtype, v.buffer.scope is Scope.LOCAL)
    _check_thread_range(layout)
    threads = _thread_axes(layout)
    if threads and v.buffer.scope is not Scope.LOCAL:
        raise LayoutError(
            f"only a local (register) buffer can be viewed with thread axes "
            f"({', '.join(sorted(threads))}); {v.buffer.name!r} is {v.buffer.scope.value}"
        )
    capacity = v.buffer.nbytes // v.dtype.bytes
    start = static_value(v.elem_offset)
    _check_lowest(layout, start or 0, v.name or v.buffer.name)
    need = memory_span(layout) + (start or 0)
    if need > capacity:
        raise LayoutError(
            f"the view needs {need} {v.dtype} slots but {v.buffer.name!r} holds only "
            f"{capacity} ({v.buffer.elements} x {v.buffer.dtype})",
            hint="allocate more registers or use a layout whose m strides fit",
        )
    return View(v.buffer, v.dtype, shape, layout, v.elem_offset, v.name)


_GROUP = re.compile(r"\(([^()]*)\)|([A-Za-z_][A-Za-z0-9_]*)|(\S)")


def _parse_side(pattern: str, side: str, where: str) -> list[list[str]]:
    groups = []
    for m in _GROUP.finditer(side):
        inner, bare, bad = m.groups()
        if bad is not None:
            if bad == "(":
                raise LayoutError(
                    f"rearrange {pattern!r}: a '(' is not closed on the {where} side",
                    hint="a group is names in one pair of parentheses, '(a b)', not nested",
                )
            raise LayoutError(
                f"rearrange {pattern!r}: unexpected {bad!r}",
                hint="each side is names and parenthesized groups of names, as in "
                "'(a b) c -> b (a c)'",
            )
        names = inner.split() if inner is not None else [bare]
        for n in names:
            if not n.isidentifier():
                raise LayoutError(f"rearrange {pattern!r}: {n!r} is not a name")
        groups.append(names)
    return groups


def rearrange(v: View, pattern: str, **sizes: int) -> View:
    """einops-style ``"(a b) c -> b (a c)"``: split dims to atoms, permute, merge (a pure view)."""
    if not isinstance(pattern, str) or pattern.count("->") != 1:
        raise LayoutError(f"rearrange pattern must look like 'lhs -> rhs', got {pattern!r}")
    lhs_text, rhs_text = pattern.split("->")
    lhs, rhs = _parse_side(pattern, lhs_text, "left"), _parse_side(pattern, rhs_text, "right")
    if len(lhs) != len(v.shape):
        raise LayoutError(
            f"rearrange {pattern!r}: the left side has {len(lhs)} groups but the tensor "
            f"has {len(v.shape)} dimensions {v.shape}"
        )
    lhs_names = [n for g in lhs for n in g]
    rhs_names = [n for g in rhs for n in g]
    for names, where in ((lhs_names, "left"), (rhs_names, "right")):
        if len(set(names)) != len(names):
            raise LayoutError(f"rearrange {pattern!r}: a name repeats on the {where} side")
    if set(lhs_names) != set(rhs_names):
        raise LayoutError(
            f"rearrange {pattern!r}: both sides must name the same axes "
            f"(left {sorted(lhs_names)}, right {sorted(rhs_names)})"
        )
    unknown_kw = set(sizes) - set(lhs_names)
    if unknown_kw:
        raise LayoutError(
            f"rearrange {pattern!r}: sizes given for unknown axes {sorted(unknown_kw)}"
        )
    size_of: dict[str, int] = {}
    for group, extent in zip(lhs, v.shape):
        missing = [n for n in group if n not in sizes]
        known = math.prod(int(sizes[n]) for n in group if n in sizes)
        if len(missing) > 1:
            given = " and ".join(f"{n}=..." for n in missing[:-1])
            raise LayoutError(
                f"rearrange {pattern!r}: group ({' '.join(group)}) splits a dimension of "
                f"extent {extent} with {len(missing)} sizes unknown ({', '.join(missing)})",
                hint=f"give all but one of them as keywords, e.g. rearrange(..., {given})",
            )
        if missing:
            if known <= 0 or extent % known:
                raise LayoutError(
                    f"rearrange {pattern!r}: dimension of extent {extent} cannot be split "
                    f"into ({' '.join(group)}) with the given sizes"
                )
            sizes_here = {
                **{n: int(sizes[n]) for n in group if n in sizes},
                missing[0]: extent // known,
            }
        else:
            if known != extent:
                raise LayoutError(
                    f"rearrange {pattern!r}: ({' '.join(group)}) multiplies to {known}, "
                    f"but the dimension has extent {extent}"
                )
            sizes_here = {n: int(sizes[n]) for n in group}
        size_of.update(sizes_here)
    atom_shape = tuple(size_of[n] for n in lhs_names)
    perm = [lhs_names.index(n) for n in rhs_names]
    layout = transpose(v.layout, atom_shape, perm)
    new_shape = tuple(math.prod(size_of[n] for n in g) for g in rhs)
    return View(v.buffer, v.dtype, new_shape, layout, v.elem_offset, v.name)


def permute(v: View, dims) -> View:
    """``t.permute(*dims)``: dimension ``i`` of the result is dimension ``dims[i]`` of ``v``
    (a pure view, as ``torch.Tensor.permute``; the layout is reordered, not the data)."""
    dims = list(dims)
    if sorted(d for d in dims if isinstance(d, int)) != list(range(len(v.shape))):
        raise LayoutError(
            f"permute{tuple(dims)}: expected a permutation of the {len(v.shape)} dimensions "
            f"of a tensor of shape {v.shape}",
            hint=f"give each of 0..{len(v.shape) - 1} once, e.g. "
            f"permute({', '.join(str(d) for d in reversed(range(len(v.shape))))})",
        )
    layout = transpose(v.layout, v.shape, dims)
    return View(v.buffer, v.dtype, tuple(v.shape[d] for d in dims), layout, v.elem_offset, v.name)


def region(v: View, indices: list) -> View | None:
    """``t[i, a:b, :]``: integer indices drop their dimension, slices keep it.

    Returns ``None`` when every index is a scalar for every dimension (an element access).
    Starts may be run-time expressions; extents must be compile-time. A region of a swizzled
    (``ComposeLayout``) view keeps the swizzle: the region is taken on its tile layout and the
    start is added before the swizzle (see tirx/isa/shared_rows.py).
    """
    if len(indices) > len(v.shape):
        raise TirxSyntaxError(f"{len(indices)} indices for a tensor of rank {len(v.shape)}")
    if len(indices) == len(v.shape) and not any(isinstance(i, slice) for i in indices):
        return None
    swizzle = v.layout if isinstance(v.layout, ComposeLayout) else None
    tile = swizzle.tile_layout if swizzle is not None else v.layout
    indices = list(indices) + [slice(None)] * (len(v.shape) - len(indices))
    grouped, seps = tile.group(v.shape)
    shard = list(grouped.shard)
    new_iters, new_shape, starts = [], [], []
    for d, (idx, extent) in enumerate(zip(indices, v.shape)):
        if isinstance(idx, slice):
            start, count = _slice_bounds(idx, extent, d)
            new_iters.extend(_sub_iters(shard[seps[d] : seps[d + 1]], start, count, d))
            new_shape.append(count)
        else:
            start = idx
            if static_value(idx) is not None and not 0 <= static_value(idx) < extent:
                raise TirxSyntaxError(
                    f"index {static_value(idx)} is out of range for dimension {d} "
                    f"of extent {extent}"
                )
        starts.append(start)
    # where the region starts, from the layout's iters alone (its offsets stay in the layout)
    origin = TileLayout.from_iters(shard, (), None).apply(*starts, shape=v.shape)
    for name, value in origin.items():
        if name != "m" and static_value(value) != 0:
            raise LayoutError("a region must not start inside a thread-distributed dimension")
    offset: Expr | int = v.elem_offset + origin.get("m", 0)
    replica = list(grouped.replica)
    layout = TileLayout.from_iters(new_iters, replica, dict(grouped.offset) or None)
    if swizzle is not None:
        layout = ComposeLayout(
            swizzle.per_element,
            swizzle.swizzle_len,
            swizzle.atom_len,
            layout,
            swizzle.swizzle_inner,
        )
    return View(v.buffer, v.dtype, tuple(new_shape), layout, offset, v.name)


# ------------------------------------------------------------------------------ helpers


def _dtype(d) -> DType:
    try:
        return dtype_of(d)
    except ValueError as e:
        raise TirxSyntaxError(str(e)) from None


def _shape_tuple(shape) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape:
        raise TirxSyntaxError(
            f"a shape must be an int or a non-empty tuple of ints, got {_entry(shape)}",
            hint=_VARIABLE_HINT if isinstance(shape, Var) else None,
        )
    bad = [s for s in shape if not (isinstance(s, int) and s > 0)]
    if bad:
        raise TirxSyntaxError(
            f"shape entries must be positive compile-time ints, got {', '.join(map(_entry, bad))}",
            hint=_VARIABLE_HINT if any(isinstance(s, Var) for s in bad) else None,
        )
    return tuple(shape)


_VARIABLE_HINT = (
    "a name is a kernel variable when it is assigned a run-time value, or more than once on "
    "a path, in a loop, in a run-time branch or with +=: assign the size once, with a value "
    "known when the kernel is built (a Python int)"
)


def _entry(s) -> str:
    """A shape entry that is not a positive int, in the kernel's words (not an IR repr)."""
    if isinstance(s, Var):
        return f"{s.name!r}, a run-time {s.dtype.name} variable"
    if isinstance(s, Expr):
        return f"a run-time {s.dtype.name} value"
    if isinstance(s, View):
        return "a tensor"
    return repr(s)[:60]


def _infer_shape(shape, total) -> tuple[int, ...]:
    shape = list(shape)
    if shape.count(-1) > 1:
        raise TirxSyntaxError("at most one -1 may be inferred in a view shape")
    if -1 in shape:
        if total is None:
            raise TirxSyntaxError("a -1 dimension cannot be inferred when a layout is given")
        rest = math.prod(s for s in shape if s != -1)
        if rest <= 0 or total % rest:
            raise LayoutError(f"cannot infer -1 in {tuple(shape)} for {total} elements")
        shape[shape.index(-1)] = total // rest
    return _shape_tuple(tuple(shape))


def _check_swizzle_unit(layout, r: int, old: DType, new: DType) -> None:
    """Viewing ``old`` as the ``r`` times wider ``new`` packs ``r`` elements into one: a
    swizzle whose unit (``2**per_element`` elements) is smaller would split it."""
    if not isinstance(layout, ComposeLayout) or r <= 2**layout.per_element:
        return
    p, pc = layout.per_element, (128 // old.bits).bit_length() - 1  # pc: 16 bytes of old
    unit = f"2**{p} = {2**p} element{'s' if p else ''}"
    err = LayoutError(
        f"cannot view {old} as {new} ({r} elements per {new}): the swizzle of {layout!r} "
        f"moves units of 2**per_element = {unit} (per_element={p}), which a {new} would split",
        hint=f"per_element, ComposeLayout's first argument, makes the swizzle unit "
        f"2**per_element elements (this view needs per_element >= {r.bit_length() - 1}); "
        f"16-byte chunks of {old} (an ldmatrix row) are {2**pc} = 2**{pc} elements, so "
        f"per_element={pc}: ComposeLayout({pc}, {layout.swizzle_len}, {layout.atom_len}, ...)",
    )
    raise err.with_definition(built_definition(built_at(layout)))


def _check_layout_size(layout, shape, dtype: DType, registers: bool):
    size, want = int(layout.size()), math.prod(shape)
    if size != want:
        hint = None
        if registers and dtype.bits == 8 and want in (2 * size, 4 * size):
            # an 8-bit element view written with the 16-bit habit (.unpack(2)), or of words
            habit = ", not 2 as 16-bit elements do" if want == 2 * size else ""
            hint = (
                f"{dtype} elements (s8/u8) pack 4 to a 32-bit register{habit}: the element "
                f"layout of the registers' word layout is word_layout.unpack(4)"
            )
        raise LayoutError(
            f"layout {layout!r} describes {size} elements but the shape {tuple(shape)} has {want}",
            hint=hint,
        )


def _check_lowest(layout, start: int, name: str) -> None:
    """A layout with negative strides must not reach below the start of its storage."""
    low = layout.lowest("m") + start
    if low < 0:
        raise LayoutError(
            f"layout {layout!r} reaches position {low} of {name!r}, before its first element "
            "(a negative stride walks down from the offset)",
            hint=f"add an offset of at least {-low} on m, e.g. S[...] + {-low}, so that every "
            "position is >= 0",
        )


# the thread axes whose range a kernel fixes whatever its launch: a lane of a warp, a thread and
# a warp of a warpgroup (the others, warpid, tx, ..., depend on the launch)
_THREAD_RANGES = {"laneid": ("a warp has lanes", 32), "tid_in_wg": ("a warpgroup has threads", 128),
                  "wid_in_wg": ("a warpgroup has warps", 4)}  # fmt: skip


def _check_thread_range(layout) -> None:
    """In a kernel a layout's thread axes are the hardware's: a layout reaching lane 32 (or
    below 0) gives elements to a lane that does not exist."""
    inner = layout.tile_layout if isinstance(layout, ComposeLayout) else layout
    for axis in sorted(inner.axes() & set(_THREAD_RANGES)):
        what, count = _THREAD_RANGES[axis]
        low, high = inner.lowest(axis), inner.span(axis) - 1
        if low < 0 or high >= count:
            raise LayoutError(
                f"layout {layout!r} reaches {axis} {high if high >= count else low}, but "
                f"{what} 0 to {count - 1}",
                hint=f"the {axis} strides and extents must keep every element within 0 to "
                f"{count - 1}: for example S[(8, 4) : (4 @ laneid, 1 @ laneid)] covers lanes 0 to 31",
            )


def _thread_axes(layout) -> set[str]:
    inner = layout.tile_layout if isinstance(layout, ComposeLayout) else layout
    return {a for a in inner.axes() if a != "m"}


def _scale_offset(offset, r: int, old: DType, new: DType):
    value = static_value(offset)
    if value is not None:
        if value % r:
            raise LayoutError(
                f"cannot view {old} data at element offset {value} as {new}: "
                f"the offset is not a multiple of {r}"
            )
        return value // r
    if not _multiple_of(offset, r):  # an odd run-time start would drop its half element
        raise LayoutError(
            f"cannot view {old} data at element offset {print_expr(as_expr(offset))} as {new}: "
            f"the offset must be a multiple of {r}, and tirx cannot prove it is",
            hint=f"start the region at a multiple of {r} written as such ({r} * k), or view "
            f"the whole tensor as {new} first and index the view in {new} elements",
        )
    return as_expr(offset) // r


def _slice_bounds(idx: slice, extent: int, d: int):
    if idx.step not in (None, 1):
        raise TirxSyntaxError(f"slice steps are not supported (dimension {d})")
    start = 0 if idx.start is None else idx.start
    stop = extent if idx.stop is None else idx.stop
    count = (
        static_value(as_expr(stop) - as_expr(start))
        if not (isinstance(start, int) and isinstance(stop, int))
        else stop - start
    )
    if count is None:
        raise TirxSyntaxError(
            f"the extent of a region (dimension {d}) must be a compile-time constant",
            hint="write slices as a[k * 16 : k * 16 + 16]: the start may vary, the size not",
        )
    if count <= 0 or count > extent:
        raise TirxSyntaxError(
            f"region extent {count} is out of range for dimension {d} of extent {extent}"
        )
    s = static_value(start)
    if s is not None and not 0 <= s <= extent - count:
        raise TirxSyntaxError(
            f"region {s}:{s + count} is out of range for dimension {d} of extent {extent}"
        )
    return start, count


def _sub_iters(iters, start, count, d):
    if len(iters) == 1:
        it = iters[0]
        return [type(it)(count, it.stride, it.axis)]
    out, remaining = [], count
    for it in reversed(iters):
        if remaining == 1:
            break
        if remaining % it.extent == 0:
            out.append(it)
            remaining //= it.extent
        elif it.extent % remaining == 0:
            out.append(type(it)(remaining, it.stride, it.axis))
            remaining = 1
        else:
            break
    if remaining != 1 or not _multiple_of(start, count):
        shown = start if isinstance(start, int) else print_expr(start)
        raise LayoutError(
            f"region of extent {count} at start {shown} does not follow the layout's "
            f"split of dimension {d}",
            hint=_split_hint(iters, count),
        )
    return list(reversed(out))


def _multiple_of(start, count: int) -> bool:
    """Whether ``start`` is a multiple of ``count`` for every value of its run-time parts
    (``kk * 32`` of a loop variable ``kk`` is one of 32)."""
    s = static_value(start)
    if s is not None:
        return s % count == 0
    form = linear_form(as_expr(start))
    if form is None:
        return False
    terms, c = form
    return c % count == 0 and all(coef % count == 0 for _, coef in terms.values())


def _split_hint(iters, count: int) -> str:
    extents = [it.extent for it in iters]
    hint = (f"the layout splits this dimension into {' x '.join(map(str, extents))}: a region "
            f"must be whole inner parts (or part of the innermost) and start at a multiple of "
            f"its extent, as t[{count} * k : {count} * k + {count}]")  # fmt: skip
    if math.prod(extents) % count == 0:
        hint += (f"; or rearrange the dimension and index its outer part, "
                 f"t.rearrange(\"r (s k) -> s r k\", k={count})[s]")  # fmt: skip
    return hint
