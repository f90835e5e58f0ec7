"""Rows of shared (and global) views: element offsets, contiguity and alignment.

ldmatrix and stmatrix read or write 16-byte rows, one address per lane; cp.async copies one
4-, 8- or 16-byte chunk per thread. In each case the instruction sees only the start address
of a row and touches the bytes after it, so the view must place the row's elements at
consecutive addresses starting at a multiple of the row size. This module is the one place
that decides it, for plain (``TileLayout``) and swizzled (``ComposeLayout``) views, regions
and views of them included.

The address of ``view[x]`` (in elements of ``view.dtype`` from the buffer's start) is

* ``elem_offset + layout.apply(x)["m"]`` for a ``TileLayout``;
* ``swizzle(elem_offset + tile_layout.apply(x)["m"])`` for a ``ComposeLayout``: the swizzle is a
  function of the buffer-relative address, so a region's start (``elem_offset``) is added
  *before* it. The swizzle moves whole units of ``2**per_element`` elements and keeps the
  order inside a unit, so a row that lies in one unit stays contiguous and keeps its alignment.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools

from ..errors import ContractError
from ..frozen import Frozen, frozen
from ..ir import nodes as ir
from ..ir.assignments import single_assignments
from ..ir.simplify import linear_form, static_value
from ..ir.simplify_index import simplify_index
from ..layout.swizzle import ComposeLayout

__all__ = ["element_offset", "residue", "RowCheck", "check_rows", "row_starts"]


def element_offset(view: ir.View, coords, swizzled: bool = True) -> ir.Expr | int:
    """Element offset of ``view[coords]`` from the start of its buffer (units of view.dtype),
    simplified (tirx/ir/simplify_index.py); with ``swizzled`` false, before a swizzled
    layout's swizzle."""
    layout = view.layout
    if isinstance(layout, ComposeLayout):
        m = layout.tile_layout.apply(*coords, shape=view.shape).get("m", 0)
        offset = simplify_index(_add(view.elem_offset, m))
        return layout.swizzle(offset) if swizzled else offset
    m = layout.apply(*coords, shape=view.shape).get("m", 0)
    return simplify_index(_add(view.elem_offset, m))


def _add(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return ir.as_expr(a) + b


_DEFINITIONS: contextvars.ContextVar[_Definitions | None] = contextvars.ContextVar(
    "definitions", default=None
)


class _Definitions:
    """A function body's single-assignment definitions, found when first asked for (a kernel
    whose rows all start at compile-time offsets never asks)."""

    __slots__ = ("body", "found", "keys", "expanded")

    def __init__(self, body):
        self.body, self.found = body, None
        # for this lowering: the structural keys of the nodes residue's simplifications met
        # (the definitions' values recur in every row's expanded offset), and _expand's memo
        self.keys: dict = {}
        self.expanded: dict = {}

    def get(self) -> dict:
        if self.found is None:
            self.found = single_assignments(self.body)
        return self.found


@contextlib.contextmanager
def known_definitions(fn: ir.Function):
    """While lowering ``fn``: let :func:`residue` see through its single-assignment integer
    variables (``col = (tid % 8) * 8`` is a multiple of 8 wherever ``col`` is read, since it
    only ever holds a value of that expression)."""
    token = _DEFINITIONS.set(_Definitions(fn.body))
    try:
        yield
    finally:
        _DEFINITIONS.reset(token)


_EXPAND_DEPTH = 8  # definitions followed through at most this many variables


def _expand(e, definitions: dict, memo: dict | None = None):
    """``e`` with defined variables replaced by their values (a few levels deep), over an
    explicit stack; an unchanged subexpression is kept. ``memo`` (the caller's, for one set of
    definitions) remembers each compound node's expansion by (id, depth), beside the node so
    that the id is not reused while the entry lives: every row's offset shares its base."""
    memo = {} if memo is None else memo
    out: list = []
    todo: list = [(e, 0)]
    while todo:
        x, depth = todo.pop()
        if depth < 0:  # rebuild x (met at depth -1 - depth) from the results of its operands
            if isinstance(x, ir.BinOp):
                b, a = out.pop(), out.pop()
                y = x if (a is x.a and b is x.b) else ir.binop(x.op, a, b)
            else:
                inner = out.pop()
                y = x if inner is x.value else ir.cast(inner, x.dtype)
            memo[(id(x), -1 - depth)] = (x, y)
            out.append(y)
        elif depth >= _EXPAND_DEPTH:
            out.append(x)
        elif isinstance(x, ir.Var) and x in definitions:
            todo.append((definitions[x], depth + 1))
        elif isinstance(x, (ir.BinOp, ir.Cast)):
            known = memo.get((id(x), depth))
            if known is not None and known[0] is x:
                out.append(known[1])
            elif isinstance(x, ir.BinOp):
                todo.extend(((x, -1 - depth), (x.b, depth), (x.a, depth)))
            else:
                todo.extend(((x, -1 - depth), (x.value, depth)))
        else:
            out.append(x)
    return out[0]


def residue(e, n: int) -> int | None:
    """``e mod n`` when it is the same for every value of the run-time parts of ``e``, else
    None. Decided on the linear form: a term whose coefficient is a multiple of ``n`` adds
    nothing (single-assignment variables are seen through, see :func:`known_definitions`)."""
    if n == 1:
        return 0
    e = e if isinstance(e, (int, ir.Expr)) else ir.as_expr(e)
    known = _DEFINITIONS.get()
    definitions = known.get() if known is not None and isinstance(e, ir.Expr) else None
    if definitions:
        e = simplify_index(_expand(e, definitions, known.expanded), keys=known.keys)
    form = linear_form(e, known.keys if known is not None else None)
    if form is None:
        return None
    terms, c = form
    if any(coef % n for _, coef in terms.values()):
        return None
    return c % n


@frozen
class RowCheck(Frozen):
    """What one instruction needs of its rows: ``row_bytes`` contiguous bytes per row, each
    starting at a multiple of ``align_bytes``; ``where`` names the operand in messages."""

    where: str
    row_bytes: int
    align_bytes: int
    hint: str = ""


def _rows(view: ir.View):
    """Every leading coordinate (all axes but the last) of ``view``."""
    return itertools.product(*(range(e) for e in view.shape[:-1]))


def check_rows(view: ir.View, need: RowCheck) -> None:
    """Raise :class:`ContractError` unless each row (the last axis) of ``view`` is
    ``need.row_bytes`` contiguous bytes starting at a multiple of ``need.align_bytes``.

    A row start that depends on run-time values is accepted when its alignment follows from
    the offset's linear form; for a swizzled view it must (the swizzle could otherwise split
    the row), for a plain view an unknown alignment is left to the run-time checks.
    """
    nbytes = view.dtype.bytes
    per_row = view.shape[-1]
    if per_row * nbytes != need.row_bytes:
        raise ContractError(
            f"{need.where}: a row must be {need.row_bytes} bytes, the last axis of the view "
            f"holds {per_row} x {view.dtype} = {per_row * nbytes} bytes",
            hint=need.hint or None,
        )
    layout = view.layout
    swizzled = isinstance(layout, ComposeLayout) and layout.swizzle_len > 0
    tile = layout.tile_layout if isinstance(layout, ComposeLayout) else layout
    points = [m for (m,) in tile.table(("m",))]
    align = max(need.align_bytes // nbytes, 1)
    base = static_value(view.elem_offset)
    # A run-time start: its remainder is proven once, and each row's follows by adding the
    # row's constant offset (e + m = r + m mod align); only when it is not proven is each
    # row's start analysed on its own (the simplifier's run per row was most of a large
    # kernel's row checks).
    start = None if base is not None else residue(ir.as_expr(view.elem_offset), align)
    for i, coord in enumerate(_rows(view)):
        ms = points[per_row * i : per_row * (i + 1)]
        if base is not None:
            # a compile-time start: check the addresses themselves, swizzle applied
            addrs = [
                layout.swizzle(base + m) if isinstance(layout, ComposeLayout) else base + m
                for m in ms
            ]
            rem = addrs[0] % align
            pitch = _pitch_hint(view, need, (ms[0] - points[0]) * nbytes) if rem else None
            _check_row(need, coord, addrs, rem, nbytes, swizzled, pitch)
            continue
        _check_row(need, coord, ms, None, nbytes, False)
        if start is not None:
            rem = (start + ms[0]) % align
        else:
            rem = residue(ir.as_expr(view.elem_offset) + ms[0], align)
        if rem is not None and rem:
            at = f"{rem * nbytes} bytes past a multiple of {align * nbytes}"
            _misaligned(need, coord, at, _pitch_hint(view, need, (ms[0] - points[0]) * nbytes))
        if swizzled:
            unit = 1 << layout.per_element
            if rem is None:
                raise ContractError(
                    f"{need.where}: row {coord} of the swizzled view starts at a run-time "
                    f"offset whose alignment to {need.align_bytes} bytes cannot be proven",
                    hint="make the region start a multiple of the row size (e.g. a row index "
                    "times the row stride), so the swizzle keeps each row in one unit",
                )
            if per_row > unit or (unit % per_row and per_row % unit):
                raise ContractError(
                    f"{need.where}: rows of {need.row_bytes} bytes span several swizzle units "
                    f"of {unit * nbytes} bytes, which the swizzle moves apart",
                    hint=f"use a ComposeLayout whose per_element unit (2**per_element "
                    f"elements) holds at least {need.row_bytes} bytes",
                )


def _check_row(need, coord, addrs, rem, nbytes, swizzled, pitch=None):
    if addrs != list(range(addrs[0], addrs[0] + len(addrs))):
        shown = addrs if len(addrs) <= 8 else addrs[:8] + ["..."]
        raise ContractError(
            f"{need.where}: row {coord} is not {need.row_bytes} contiguous bytes "
            f"(element offsets {shown}" + (" after the swizzle)" if swizzled else ")"),
            hint=need.hint or f"each row must be {need.row_bytes} consecutive bytes",
        )
    if rem:
        _misaligned(need, coord, f"byte {addrs[0] * nbytes}", pitch)


def _misaligned(need, coord, at, pitch=None):
    raise ContractError(
        f"{need.where}: row {coord} starts at {at}, not a multiple of {need.align_bytes}",
        hint=pitch
        or f"rows must be {need.align_bytes}-byte aligned: move the region start by whole "
        f"rows or align the allocation (align={max(need.align_bytes, 16)})",
    )


def _pitch_hint(view: ir.View, need: RowCheck, delta: int) -> str | None:
    """The hint for a row ``delta`` bytes from the view's first row that no start can align
    (``delta`` not a multiple of the alignment): the row pitch must be padded. Names the
    allocation's own row pitch where that is what is off (its rows padded to a multiple of the
    alignment), else the step between the two rows; None where ``delta`` is aligned (the
    region start is what is off)."""
    align = need.align_bytes
    if delta % align == 0:
        return None
    buf = view.buffer
    if len(buf.shape) >= 2 and buf.shape[-2] > 1:
        tile = buf.layout.tile_layout if isinstance(buf.layout, ComposeLayout) else buf.layout
        if tile is None:  # no layout: row-major
            pitch = buf.shape[-1] * buf.dtype.bytes
        else:
            zero = (0,) * len(buf.shape)
            one = (*zero[:-2], 1, 0)
            m = tile.apply(*one, shape=buf.shape).get("m", 0)
            pitch = (m - tile.apply(*zero, shape=buf.shape).get("m", 0)) * buf.dtype.bytes
        if pitch % align:
            size = buf.dtype.bytes
            example = ""
            if pitch == buf.shape[-1] * size:  # row-major: pad the last axis
                last = -(-pitch // align) * align // size
                example = f" (e.g. allocate it as {(*buf.shape[:-1], last)})"
            return (
                f"the row pitch of {buf.name!r} ({pitch} bytes) must be a multiple of {align}: "
                f"no region start aligns every row; pad the rows{example}"
            )
    return (
        f"rows of the view are {abs(delta)} bytes apart, not a multiple of {align}: the row "
        f"pitch must be a multiple of {align} bytes; pad the rows"
    )


def row_starts(view: ir.View):
    """``[(leading coordinate, element offset of the row's first element)]`` in row-major
    order of the leading axes."""
    return [(c, element_offset(view, (*c, 0))) for c in _rows(view)]
