"""ComposeLayout: an XOR swizzle on the ``m`` result of a memory-only tile layout.

Shared memory is split into banks; a tile whose rows are a multiple of 128 bytes apart puts a
whole column in one bank. A swizzle XORs some address bits into others so that the rows of a
column land in different banks. With ``p = per_element``, ``s = swizzle_len``,
``a = atom_len`` (bit counts, ``a >= s``) and ``mask = (2**s - 1) << p``:

* inner form (default): ``addr = m ^ ((m >> a) & mask)`` -- bits ``[p+a, p+a+s)`` are XORed
  into bits ``[p, p+s)``;
* outer form (``swizzle_inner=False``): ``addr = m ^ ((m & mask) << a)`` -- bits ``[p, p+s)``
  are XORed into bits ``[p+a, p+a+s)``.

The ``p`` lowest bits (one unit of ``2**p`` elements, 16 bytes for ``p = 3`` with f16) never
change. For f16 the 128-byte swizzle is ``(3, 3, 3)``. Both forms are involutions, hence
bijections of each aligned block of ``2**(p+a+s)`` elements.
"""

from __future__ import annotations

from ..errors import LayoutError
from ..frozen import Frozen, frozen
from .axes import as_axis, as_int, m
from .origin import note_built
from .tile import TileLayout

__all__ = ["ComposeLayout"]


@frozen(eq=False)  # its own __eq__, __hash__ and __repr__
class ComposeLayout(Frozen):
    """``ComposeLayout(per_element, swizzle_len, atom_len, tile_layout, swizzle_inner=True)``."""

    per_element: int
    swizzle_len: int
    atom_len: int
    tile_layout: TileLayout
    swizzle_inner: bool = True

    def __post_init__(self) -> None:
        for name in ("per_element", "swizzle_len", "atom_len"):
            value = as_int(getattr(self, name), f"ComposeLayout {name}")
            if value < 0:
                raise LayoutError(
                    f"ComposeLayout {name} must be non-negative, got {value}",
                    hint="the three numbers are bit counts; f16 128-byte swizzle is (3, 3, 3)",
                )
            object.__setattr__(self, name, value)
        if self.per_element + self.swizzle_len + self.atom_len > 48:
            raise LayoutError(
                f"ComposeLayout({self.per_element}, {self.swizzle_len}, {self.atom_len}, ...) "
                "reaches beyond bit 48 of an address",
                hint="swizzle bit counts are small: f16 128-byte swizzle is (3, 3, 3)",
            )
        if self.atom_len < self.swizzle_len:
            raise LayoutError(
                f"ComposeLayout atom_len ({self.atom_len}) must be at least swizzle_len "
                f"({self.swizzle_len})",
                hint="the two XORed bit groups must not overlap",
            )
        if not isinstance(self.tile_layout, TileLayout):
            raise LayoutError(
                f"ComposeLayout needs a TileLayout, got {self.tile_layout!r}",
                hint="for example ComposeLayout(3, 3, 3, TileLayout(S[8, 64]))",
            )
        if not self.tile_layout.is_memory_only():
            raise LayoutError(
                f"ComposeLayout swizzles memory addresses; {self.tile_layout!r} uses thread axes",
                hint="swizzle the storage() of the layout, or a shared-memory layout",
            )
        if not isinstance(self.swizzle_inner, bool):
            raise LayoutError(
                f"swizzle_inner must be True or False, got {self.swizzle_inner!r}",
                hint="True XORs the high group into the low one",
            )
        note_built(self, skip=1)  # under the dataclass's __init__

    # ------------------------------------------------------------------ the swizzle

    @property
    def inner_mask(self) -> int:
        """The address bits that the inner form changes: ``[p, p+s)``."""
        return ((1 << self.swizzle_len) - 1) << self.per_element

    @property
    def outer_mask(self) -> int:
        """The address bits ``[p+a, p+a+s)`` (read by the inner form, changed by the outer)."""
        return self.inner_mask << self.atom_len

    def swizzle(self, addr: object) -> object:
        """The swizzled address of ``addr`` (an int or a symbolic index expression)."""
        if self.swizzle_len == 0:
            return addr
        if self.swizzle_inner:
            return addr ^ ((addr >> self.atom_len) & self.inner_mask)
        return addr ^ ((addr & self.inner_mask) << self.atom_len)

    def swizzle_ints(self, addrs) -> list[int]:
        """``[self.swizzle(a) for a in addrs]`` for int addresses, in one pass (a box check
        swizzles every element of a tile)."""
        if self.swizzle_len == 0:
            return list(addrs)
        shift, mask = self.atom_len, self.inner_mask
        if self.swizzle_inner:
            return [a ^ ((a >> shift) & mask) for a in addrs]
        return [a ^ ((a & mask) << shift) for a in addrs]

    @property
    def _period(self) -> int:
        top = self.per_element + self.swizzle_len + (0 if self.swizzle_inner else self.atom_len)
        return 1 << top if self.swizzle_len else 1

    # ------------------------------------------------------------------ Layout protocol

    def table(self, axes=("m",)) -> tuple[tuple[int, ...], ...]:
        """Like :meth:`TileLayout.table`, with the swizzle applied to ``m``."""
        names = tuple(as_axis(a).name for a in axes)
        rows = self.tile_layout.table(names)
        if "m" not in names:
            return rows
        k = names.index("m")
        return tuple(r[:k] + (self.swizzle(r[k]),) + r[k + 1 :] for r in rows)

    def apply(self, *coord, shape=None) -> dict:
        """The tile layout's point with its ``m`` swizzled."""
        point = self.tile_layout.apply(*coord, shape=shape)
        point["m"] = self.swizzle(point["m"])
        return point

    def apply_all(self, *coord, shape=None) -> list[dict]:
        points = self.tile_layout.apply_all(*coord, shape=shape)
        for point in points:
            point["m"] = self.swizzle(point["m"])
        return points

    def size(self, axis=None) -> int:
        return self.tile_layout.size(axis)

    def span(self, axis=None) -> int:
        """On ``m`` (the default): the tile span rounded up to a whole swizzle period
        (``2**(p+s)`` inner, ``2**(p+a+s)`` outer), a bound that every address stays below."""
        if axis is not None and as_axis(axis) != m:
            return self.tile_layout.span(axis)
        period = self._period
        return -(-self.tile_layout.span() // period) * period

    def lowest(self, axis=None) -> int:
        """The tile layout's lowest position (a swizzle permutes within periods >= 0)."""
        return self.tile_layout.lowest(axis)

    def axes(self) -> frozenset[str]:
        return self.tile_layout.axes()

    def is_memory_only(self) -> bool:
        return True

    def storage(self) -> ComposeLayout:
        return self

    def canonicalize(self) -> ComposeLayout:
        return self._replace(self.tile_layout.canonicalize())

    def group(self, shape) -> tuple[ComposeLayout, list[int]]:
        tile, seps = self.tile_layout.group(shape)
        return self._replace(tile), seps

    def permute_dims(self, perm) -> ComposeLayout:
        return self._replace(self.tile_layout.permute_dims(perm))

    def permute_by_groups(self, seps, perm) -> ComposeLayout:
        return self._replace(self.tile_layout.permute_by_groups(seps, perm))

    def pack(self, n: int) -> ComposeLayout:
        """``n`` (a power of two, at most ``2**per_element``) elements as one."""
        k = self._log2(n, "pack")
        if k > self.per_element:
            p = self.per_element
            raise LayoutError(
                f"pack({n}) would split the swizzle unit of {self!r}: the swizzle moves units "
                f"of 2**per_element = {2**p} element{'s' if p else ''} (per_element={p}), and "
                f"{n} packed elements would straddle units",
                hint=f"pack by at most {2**p}, or give per_element (the first argument) at "
                f"least {k}: the unit is 2**per_element elements",
            )
        return ComposeLayout(
            self.per_element - k,
            self.swizzle_len,
            self.atom_len,
            self.tile_layout.pack(n),
            self.swizzle_inner,
        )

    def unpack(self, n: int) -> ComposeLayout:
        k = self._log2(n, "unpack")
        return ComposeLayout(
            self.per_element + k,
            self.swizzle_len,
            self.atom_len,
            self.tile_layout.unpack(n),
            self.swizzle_inner,
        )

    # ------------------------------------------------------------------ identity

    def _key(self) -> tuple:
        if self.swizzle_len == 0:  # no swizzle: the other bit counts do not matter
            return (0, 0, 0, True, self.tile_layout)
        return (
            self.per_element,
            self.swizzle_len,
            self.atom_len,
            self.swizzle_inner,
            self.tile_layout,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ComposeLayout):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        inner = "" if self.swizzle_inner else ", swizzle_inner=False"
        return (
            f"ComposeLayout({self.per_element}, {self.swizzle_len}, {self.atom_len}, "
            f"{self.tile_layout!r}{inner})"
        )

    def _replace(self, tile: TileLayout) -> ComposeLayout:
        return ComposeLayout(
            self.per_element, self.swizzle_len, self.atom_len, tile, self.swizzle_inner
        )

    @staticmethod
    def _log2(n, what: str) -> int:
        n = as_int(n, f"{what}: the factor")
        if n < 1 or n & (n - 1):
            raise LayoutError(
                f"{what}({n}): a swizzled layout packs by a power of two",
                hint="use 2 for f16 -> u32, 4 for f8 -> u32",
            )
        return n.bit_length() - 1
