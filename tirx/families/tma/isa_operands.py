"""The operands of a TMA tensor copy (tirx/families/tma/isa.py, isa_store.py): the global region
its tensor map describes and the shared view that holds the box image -- a load's destination,
a store's or reduction's source.

The copy engine keeps a box in shared memory as its *image*: the box's elements in row-major
order (the innermost coordinate fastest), dense, from the shared address on, each 16-byte unit
of a ``128 << s``-byte repeat permuted by the map's swizzle (PTX ISA, "Tensor Map: swizzling
modes": the unit number's low ``s`` bits XOR-ed with the 128-byte row's). A shared view is a
legal operand when every element's address through its layout is where the image has it.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...ir.tensor_map import SWIZZLE_SPAN
from ...isa.operands import passed
from ...isa.raw_forms import byte_offset
from ...isa.shared_rows import element_offset, residue
from ...layout.swizzle import ComposeLayout

__all__ = [
    "swizzle_byte_offset", "global_region", "check_shared_box", "ALIGN_UNSWIZZLED", "LOAD",
    "STORE", "Direction",
]  # fmt: skip

ALIGN_UNSWIZZLED = 128  # bytes: the shared box of a tensor copy
MAX_STRIDE = 1 << 40  # bytes: a global stride (cuTensorMapEncodeTiled)


def swizzle_byte_offset(offset: int, swizzle: int) -> int:
    """Where the byte ``offset`` of a dense box image lands under the map's ``swizzle`` code:
    the 16-byte unit number's low ``swizzle`` bits XOR-ed with the bits of the 128-byte row
    number (``bits[4:4+s] ^= bits[7:7+s]``, PTX ISA "Tensor Map: swizzling modes")."""
    return offset ^ ((offset >> 3) & (((1 << swizzle) - 1) << 4))


def swizzle_byte_offsets(count: int, nbytes: int, swizzle: int) -> list[int]:
    """``swizzle_byte_offset(f * nbytes, swizzle)`` for ``f`` in ``range(count)``, in one pass."""
    return list(_byte_offsets(count, nbytes, swizzle))


@functools.lru_cache(maxsize=64)
def _byte_offsets(count: int, nbytes: int, swizzle: int) -> list[int]:
    # remembered: a kernel's boxes share a few sizes (never mutated: compared and zipped)
    mask = ((1 << swizzle) - 1) << 4
    return [o ^ ((o >> 3) & mask) for o in range(0, count * nbytes, nbytes)]


@dataclass(frozen=True)
class Direction:
    """How messages name a copy's operands: the shared box view and the global region (their
    operand names), what the shared view is to the copy, and an example of each."""

    shared: str
    global_: str
    shared_role: str
    shared_example: str


LOAD = Direction("dst", "src", "a tensor load's destination", "dst = sA[stage, :, :]")
STORE = Direction("src", "dst", "a tensor store's source", "src = sC[stage, :, :]")


def _what(v) -> str:
    """An operand as an error message names it: its buffer's scope and name, or "a value"."""
    return (
        f"{v.buffer.scope.value} buffer {v.buffer.name!r}" if isinstance(v, ir.View) else "a value"
    )


def global_region(text: str, v, rank: int, way: Direction = LOAD):
    """(dims, element strides, origin bytes) of the global region ``v``, outer to inner."""
    where = f"{text}: operand {way.global_}"
    if not isinstance(v, ir.View) or v.buffer.scope is not ir.Scope.GLOBAL:
        got = _what(v)
        raise ContractError(
            f"{where} must be a region of a global tensor parameter, got {got}",
            hint="the tensor map describes a kernel parameter: pass A[:, :] (or a region of it "
            "with compile-time bounds); the box's place in it is coords=",
        )
    if isinstance(v.layout, ComposeLayout) or v.dtype != v.buffer.dtype:
        raise ContractError(
            f"{where} must be a plain region of {v.buffer.name!r} in its own dtype "
            f"({v.buffer.dtype})",
            hint="a tensor map reads the tensor's elements as they are stored",
        )
    if len(v.shape) != rank:
        raise ContractError(
            f"{where} has {len(v.shape)} axes; this is a {rank}-d tensor copy",
            hint=f"pass a {rank}-d region (slices keep an axis, integer indices drop it) or "
            f"use .{len(v.shape)}d",
        )
    origin = static_value(v.elem_offset)
    if origin is None:
        raise ContractError(
            f"{where}: the region must start at a compile-time place (the tensor map is "
            "encoded before the launch)",
            hint="pass the whole tensor (or fixed bounds) and move the box with coords=",
        )
    zero = [0] * rank
    base = static_value(element_offset(v, zero))
    strides = []
    for d in range(rank):
        unit = list(zero)
        if v.shape[d] > 1:
            unit[d] = 1
            strides.append(static_value(element_offset(v, unit)) - base)
        else:
            strides.append(0)
    for d in range(rank):
        corner = list(zero)
        corner[d] = v.shape[d] - 1
        if static_value(element_offset(v, corner)) - base != strides[d] * (v.shape[d] - 1):
            raise ContractError(
                f"{where}: axis {d} of the region is not evenly strided",
                hint="a tensor map needs one stride per axis: pass a rectangular region",
            )
    if strides[-1] not in (0, 1):
        raise ContractError(
            f"{where}: the inner axis must be contiguous (stride 1), got stride {strides[-1]}",
            hint="a tensor map's innermost dimension is dense",
        )
    strides[-1] = 1
    nbytes = v.dtype.bytes
    for d in range(rank - 1):
        if strides[d] == 0:  # an axis of one element: any legal stride
            strides[d] = math.prod(v.shape[d + 1 :]) * 16
        if strides[d] * nbytes % 16 or not 0 < strides[d] * nbytes < MAX_STRIDE:
            raise ContractError(
                f"{where}: axis {d} is {strides[d] * nbytes} bytes apart, not a multiple of 16",
                hint="a tensor map's strides are multiples of 16 bytes: pad the rows",
            )
    origin_bytes = base * nbytes
    if origin_bytes % 16:
        raise ContractError(
            f"{where}: the region starts {origin_bytes % 16} bytes past a multiple of 16",
            hint="a tensor map's global address is 16-byte aligned: start the region on a "
            "16-byte boundary (or pass the whole tensor and use coords=)",
        )
    return tuple(v.shape), strides, origin_bytes


def check_shared_box(
    text: str, v, box: tuple[int, ...], dtype, swizzle: int, reps: int, way: Direction = LOAD
):
    """Per repeat (the ``reps`` leading axes of ``v``), its coordinate and the byte offset of
    its box image, after checking that each holds the box image (``v`` is the shared operand
    of a copy in direction ``way``)."""
    where = f"{text}: operand {way.shared}"
    if not isinstance(v, ir.View) or v.buffer.scope is not ir.Scope.SHARED:
        got = _what(v)
        raise ContractError(
            f"{where} must be a view of shared memory (T.alloc_shared), got {got}",
            hint=f"{way.shared_role} is a box in shared memory: {way.shared_example}",
        )
    if v.dtype.bits != dtype.bits:
        raise ContractError(
            f"{where} has {v.dtype.bits}-bit elements, the tensor {dtype.bits}-bit ones",
            hint="view the shared tile in the tensor's element width",
        )
    if tuple(v.shape[reps:]) != box or len(v.shape) != reps + len(box):
        raise ContractError(
            f"{where} has shape {tuple(v.shape)}; the box is {box}"
            + (f" after {reps} repeat axes (coord_steps)" if reps else ""),
            hint=f"{way.shared_role} is one box image per repeat: shape it (*repeats, *box), "
            "one repeat axis per coord_steps entry",
        )
    # the image first (a layout of another swizzle is the mistake the alignment would only
    # hint at); it reads only the layout and the shapes: once per distinct operand
    key = ("tma image", v.layout, tuple(v.shape), box, dtype.bytes, swizzle, reps)
    bases = passed(key, lambda: _check_image(where, v, box, dtype.bytes, swizzle, reps))
    period = 128 << swizzle if swizzle else ALIGN_UNSWIZZLED
    kind = (
        f"the {SWIZZLE_SPAN[swizzle]}B swizzle's {period}-byte repeat" if swizzle else "128 bytes"
    )
    if v.buffer.align < period:
        raise ContractError(
            f"{where}: {v.buffer.name!r} has align={v.buffer.align}; {way.shared_role} is "
            f"aligned to {kind}",
            hint=f"allocate it with T.alloc_shared(..., align={period})",
        )
    start = byte_offset(v.elem_offset, v.dtype)
    if isinstance(v.layout, ComposeLayout):  # the layout's own swizzle repeats too
        c = v.layout
        period = max(period, v.dtype.bytes << (c.per_element + c.swizzle_len + c.atom_len))
    rem = residue(start, period)
    if rem != 0:
        at = "an unknown offset" if rem is None else f"{rem} bytes past a multiple of {period}"
        raise ContractError(
            f"{where} starts at {at}; it must start at a multiple of {period} bytes ({kind})",
            hint=f"start {way.shared_role} on a whole stage/tile of the allocation",
        )
    return [(rep, _plus(start, base)) for rep, base in bases]


def _plus(a, b: int):
    return a + b if isinstance(a, int) else ir.as_expr(a) + b


def _check_image(where: str, v, box, nbytes: int, swizzle: int, reps: int = 0):
    """Every box element must sit where the copy engine puts it: byte ``f * nbytes`` of the
    dense image (``f`` its row-major index) after its repeat's first byte, swizzled; each
    repeat starts on a swizzle repeat (128 bytes unswizzled). The view's start is one, so it
    is compared as if it started at 0. Returns per repeat its coordinate and first byte."""
    layout = v.layout
    if isinstance(layout, ComposeLayout):
        tile = layout.tile_layout
    else:
        tile = layout
    if tile.replica or set(tile.axes()) - {"m"}:
        raise ContractError(f"{where}: the layout must use only the memory axis m, got {layout!r}")
    column = tile.column("m")
    size = math.prod(box)
    period = 128 << swizzle if swizzle else ALIGN_UNSWIZZLED
    out = []
    for r, rep in enumerate(itertools.product(*(range(e) for e in v.shape[:reps]))):
        base = column[r * size] * nbytes
        if base % period:
            raise ContractError(
                f"{where}: repeat {rep} starts at byte {base}, not a multiple of {period}",
                hint="each repeat's box image must start on a whole swizzle repeat (128 bytes "
                "unswizzled): lay the repeats out one after another",
            )
        out.append((rep, base))
        _check_box(where, layout, column[r * size : (r + 1) * size], base, box, nbytes, swizzle)
    return out


def _check_box(where, layout, ms, base: int, box, nbytes: int, swizzle: int) -> None:
    # every element of the box (``ms``: their m values), so in whole-list passes (a tile holds
    # tens of thousands)
    gots = layout.swizzle_ints(ms) if isinstance(layout, ComposeLayout) else ms
    wants = _byte_offsets(len(ms), nbytes, swizzle)
    image = [g * nbytes - base for g in gots]
    if image == wants:
        return
    # the tile may be laid out as another mode's box image: name that mode
    other = next(
        (s for s in range(4) if s != swizzle and image == _byte_offsets(len(ms), nbytes, s)), None
    )
    for f, (got, want) in enumerate(zip(gots, wants)):  # the first element out of place
        want += base
        if got * nbytes != want:
            coord = _unflatten(f, box)
            detail = f"byte {got * nbytes} of the stage, where the box image has byte {want}"
            per = (16 // nbytes).bit_length() - 1  # log2 of the elements in 16 bytes
            fix = (
                f"with swizzle={swizzle} lay the tile out as ComposeLayout({per}, {swizzle}, 3, "
                f"TileLayout(S[box])) of {SWIZZLE_SPAN[swizzle]}-byte rows ({per}: 16 bytes are "
                f"{16 // nbytes} elements of {nbytes} byte{'s' if nbytes > 1 else ''}, log2)"
                if swizzle
                else "without a swizzle the tile is the dense row-major box (the default layout)"
            )
            if other is not None:
                fix = f"the tile's layout is the box image of swizzle={other}: pass swizzle={other}"
            raise ContractError(
                f"{where}: element {coord} is at {detail}"
                + (f" (swizzle={swizzle})" if swizzle else ""),
                hint=fix,
            )


def _unflatten(f: int, shape) -> tuple[int, ...]:
    out = []
    for e in reversed(shape):
        out.append(f % e)
        f //= e
    return tuple(reversed(out))
