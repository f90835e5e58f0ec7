"""A TileLayout's element table: every flat index's values on some axes, in whole-list passes
(the enumeration behind contract checks and pictures; a wgmma accumulator or a TMA box has
tens of thousands of elements)."""

from __future__ import annotations

from functools import lru_cache

__all__ = ["element_table", "element_columns"]


@lru_cache(maxsize=1024)
def element_table(layout, axes: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """The values on ``axes`` (names) of every element of ``layout`` (a TileLayout), flat index
    ``0 .. size()-1`` in order, offsets included: :meth:`TileLayout.table`, remembered per
    layout (layouts are immutable; a kernel's checks table the same few again and again)."""
    return tuple(zip(*element_columns(layout, axes)))


@lru_cache(maxsize=1024)
def element_columns(layout, axes: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """:func:`element_table` by axis: one tuple per name of ``axes``, the values of every
    element on it (:meth:`TileLayout.column`)."""
    # The shard iters are the digits of the flat index, outermost first: enumerating the
    # digits in row-major order is splitting each index as apply does. The iters are cut into
    # an outer and an inner run of about the square root of the size each; an axis's column
    # is then one pass over the outer run's values and the inner run's (each a short list).
    shard = layout.shard
    size, cut = 1, 0
    for it in shard:
        size *= it.extent
    outer = 1
    while cut < len(shard) and outer * outer < size:
        outer *= shard[cut].extent
        cut += 1
    offsets = layout.offsets()
    columns = []
    for name in axes:
        outer_values = _digit_values(shard[:cut], name, offsets.get(name, 0))
        inner_values = _digit_values(shard[cut:], name, 0)
        if outer_values.count(outer_values[0]) == len(outer_values):  # no outer digit on it
            column = [outer_values[0] + y for y in inner_values] * len(outer_values)
        elif not any(inner_values):  # no inner digit on it: each outer value repeated
            column = [x for x in outer_values for _ in inner_values]
        else:
            column = [x + y for x in outer_values for y in inner_values]
        columns.append(tuple(column))
    return tuple(columns)


def _digit_values(iters, name: str, start: int) -> list[int]:
    """The values on axis ``name`` of ``iters``' digits, row-major, from ``start``."""
    values = [start]
    for it in iters:
        step = it.stride if it.axis.name == name else 0
        values = [x + d * step for x in values for d in range(it.extent)]
    return values
