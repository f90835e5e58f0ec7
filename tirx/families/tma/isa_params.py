"""The keyword parameters of the TMA tile forms (``box=``, ``coords=``, ``coord_steps=``,
``swizzle=``, ``l2_promotion=``) and what a load and a store make of them together with their
operands: the tensor map and, per repeat, the shared box image and its coordinates.

PTX ISA, "Tensor Map": the map's box is 1..256 elements per dimension, its inner extent a
multiple of 16 bytes and, swizzled, at most the swizzle's span; "cp.async.bulk.tensor": the
coordinates are ``.s32`` values, innermost first (the tile form lists them outer to inner).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...ir.tensor_map import SWIZZLE_SPAN, TensorMapFields
from ...isa.raw_forms import reads_memory
from .isa_operands import Direction, check_shared_box, global_region

__all__ = ["MAX_BOX", "Geometry", "geometry", "code_param", "coords_param"]

MAX_BOX = 256  # elements per box dimension (PTX ISA, Tensor Map: boxDim)


@dataclass(frozen=True)
class Geometry:
    """One tile operation's tensor map (``origin`` the byte of the tensor it starts at) and,
    per repeat, the shared byte offset of its box image and its coordinates (outer to inner,
    int32 expressions)."""

    fields: TensorMapFields
    origin: int
    copies: tuple[tuple[object, tuple], ...]  # (shared byte offset, coordinates) per repeat


def geometry(text: str, params: dict, shared, glob, rank: int, way: Direction) -> Geometry:
    """Check a tile form's box, swizzle, coordinates and two operands (the shared view
    ``shared``, the global region ``glob``; ``way`` names them) and plan its copies."""
    swizzle = code_param(text, "swizzle", params.get("swizzle", 0))
    l2 = code_param(text, "l2_promotion", params.get("l2_promotion", 0))
    box = _box(text, params["box"], rank)
    dims, strides, origin = global_region(text, glob, rank, way)
    dtype = glob.dtype
    inner = box[-1] * dtype.bytes
    if inner % 16:
        raise ContractError(
            f"{text}: the box's inner extent is {inner} bytes, not a multiple of 16",
            hint=f"make box[-1] a multiple of {16 // math.gcd(16, dtype.bytes)} {dtype} elements",
        )
    if swizzle and inner > SWIZZLE_SPAN[swizzle]:
        raise ContractError(
            f"{text}: the box's inner extent is {inner} bytes, more than the "
            f"{SWIZZLE_SPAN[swizzle]}-byte span of swizzle={swizzle}",
            hint=f"box[-1] * {dtype.bytes} bytes must be <= {SWIZZLE_SPAN[swizzle]}: split the "
            "box along its inner axis" + (", or use a wider swizzle" if swizzle < 3 else ""),
        )
    fields = TensorMapFields(
        dtype.name, tuple(reversed(dims)), tuple(s * dtype.bytes for s in reversed(strides[:-1])),
        tuple(reversed(box)), swizzle, l2,
    )  # fmt: skip
    steps = _steps(text, params.get("coord_steps", ()), rank)
    starts = check_shared_box(text, shared, box, dtype, swizzle, len(steps), way)
    coords = coords_param(text, params["coords"], rank)
    copies = []
    for rep, offset in starts:
        at = [c + sum(r * step[d] for r, step in zip(rep, steps)) for d, c in enumerate(coords)]
        copies.append((offset, tuple(ir.as_expr(c) for c in at)))
    return Geometry(fields, origin, tuple(copies))


def _steps(text: str, value, rank: int) -> tuple[tuple[int, ...], ...]:
    """``coord_steps``: per leading repeat axis of the shared view, the coordinates' increment
    (outer to inner, compile-time)."""
    items = value if isinstance(value, tuple) else (value,)
    steps = []
    for step in items:
        step = step if isinstance(step, tuple) else (step,)
        vals = tuple(static_value(x) for x in step)
        if len(vals) != rank or None in vals:
            raise ContractError(
                f"{text}: each coord_steps entry must be {rank} compile-time ints, got {step!r}",
                hint="one coordinate increment per repeat axis of the shared view, e.g. "
                "coord_steps=((0, 64),)",
            )
        steps.append(vals)
    return tuple(steps)


def code_param(text: str, name: str, value) -> int:
    """``swizzle=`` or ``l2_promotion=``: a compile-time code 0..3."""
    v = static_value(value)
    if v is None or not 0 <= v <= 3:
        meaning = (
            "0 none, 1 32B, 2 64B, 3 128B" if name == "swizzle" else "0 none, 1 64B, 2 128B, 3 256B"
        )
        raise ContractError(
            f"{text}: {name} must be a compile-time code 0..3 ({meaning}), got {value!r}",
            hint=f"the tensor map's {name} is fixed when it is encoded: pass an int",
        )
    return v


def _box(text: str, value, rank: int) -> tuple[int, ...]:
    items = value if isinstance(value, tuple) else (value,)
    box = tuple(static_value(x) for x in items)
    if len(box) != rank or any(b is None for b in box):
        raise ContractError(
            f"{text}: box must be {rank} compile-time extents (outer to inner), got {value!r}",
            hint=f"one extent per axis of the {rank}-d tensor map, e.g. box=({', '.join(['64'] * rank)})",
        )
    bad = [b for b in box if not 1 <= b <= MAX_BOX]
    if bad:
        raise ContractError(
            f"{text}: box extents must be 1..{MAX_BOX}, got {box}",
            hint=f"a tensor map's box is at most {MAX_BOX} elements per axis: issue several copies",
        )
    return box


def coords_param(text: str, value, rank: int) -> list[ir.Expr]:
    """``coords=``: ``rank`` integer values (outer to inner), as int32 expressions. A float is
    refused, never truncated: the instruction's coordinates are ``.s32`` registers."""
    items = value if isinstance(value, tuple) else (value,)
    if len(items) != rank:
        raise ContractError(
            f"{text}: coords must be {rank} values (outer to inner), got {len(items)}",
            hint="one coordinate per axis of the tensor map, in elements",
        )
    out = []
    for k, c in enumerate(items):
        floating = isinstance(c, float) or (isinstance(c, ir.Expr) and c.dtype.kind == "float")
        if floating:
            got = repr(c) if isinstance(c, float) else f"a {c.dtype} expression"
            raise ContractError(
                f"{text}: coordinate {k} of coords is {got}; coordinates are s32 integers",
                hint="compute the coordinate with integers (// instead of /), or convert it "
                "explicitly where truncation is meant: T.int32(x)",
            )
        if reads_memory(c):
            raise ContractError(
                f"{text}: coords must be computed from indices, parameters or variables, not "
                "read from a tensor",
                hint="load the value into a variable first",
            )
        out.append(ir.cast(ir.as_expr(c), ir.I32))
    return out
