"""ComposeLayout: the XOR swizzle against SPEC §2's bit recipe, bijectivity and bank spread."""

from __future__ import annotations

import itertools

import pytest

import tirx.layout as L
from tirx.errors import LayoutError
from tirx.layout import ComposeLayout, S, TileLayout, laneid, transpose

NAMES = {name: getattr(L, name) for name in L.__all__}


def spec_swizzle(addr: int, per_element: int, swizzle_len: int, atom_len: int, inner: bool):
    """SPEC §2 / TVM docs, bit by bit."""
    x = addr >> per_element
    low = addr % (1 << per_element)
    mask = (1 << swizzle_len) - 1
    if inner:
        x ^= (x & (mask << atom_len)) >> atom_len
    else:
        x ^= (x & mask) << atom_len
    return (x << per_element) + low


PARAMS = [
    (p, s, a, inner)
    for p, s, a in itertools.product(range(4), range(4), range(4))
    if a >= s
    for inner in (True, False)
]


@pytest.mark.parametrize("params", PARAMS, ids=str)
def test_swizzle_matches_the_bit_recipe_and_is_a_bijection(params):
    p, s, a, inner = params
    layout = ComposeLayout(p, s, a, TileLayout(S[1024]), swizzle_inner=inner)
    got = [layout.apply(i)["m"] for i in range(1024)]
    assert got == [spec_swizzle(i, p, s, a, inner) for i in range(1024)]
    assert sorted(got) == list(range(1024))
    assert max(got) < layout.span() <= 1024


def test_tvm_doc_example():
    assert ComposeLayout(0, 2, 3, TileLayout(S[8, 8])).apply(1, 2) == {"m": 11}


def test_f16_128_byte_swizzle_is_bank_conflict_free():
    tile = ComposeLayout(3, 3, 3, TileLayout(S[8, 64]))  # 8 rows of 64 halves = 128 bytes
    addrs = {(r, c): tile.apply(r, c, shape=(8, 64))["m"] for r in range(8) for c in range(64)}
    assert sorted(addrs.values()) == list(range(512))
    for (r, c), a in addrs.items():
        assert a // 64 == r and a % 8 == c % 8  # rows stay rows, 16-byte units stay whole
    for chunk in range(8):  # one 16-byte column of the 8 rows: 8 different 16-byte chunks
        assert len({addrs[r, chunk * 8] // 8 % 8 for r in range(8)}) == 8
    assert tile.span() == 512 and tile.size() == 512


def test_identity_repr_and_structure():
    tile = TileLayout(S[(8, 64) : (64, 1)])
    a = ComposeLayout(3, 3, 3, tile)
    assert a == ComposeLayout(3, 3, 3, TileLayout(S[512])) and hash(a) == hash(
        ComposeLayout(3, 3, 3, TileLayout(S[512]))
    )
    assert a != ComposeLayout(3, 3, 3, tile, swizzle_inner=False) and a != tile
    assert ComposeLayout(0, 0, 2, tile) == ComposeLayout(1, 0, 0, tile)
    for layout in [a, ComposeLayout(1, 2, 2, tile, swizzle_inner=False)]:
        assert eval(repr(layout), NAMES) == layout
    assert repr(a) == "ComposeLayout(3, 3, 3, TileLayout(S[(8, 64):(64, 1)]))"
    assert a.storage() is a and a.is_memory_only() and a.axes() == {"m"}
    assert a.canonicalize().tile_layout.shard == TileLayout(S[512]).shard
    assert (a.inner_mask, a.outer_mask) == (0b111000, 0b111000000)
    moved = transpose(a, (8, 64), (1, 0))
    for r, c in itertools.product(range(8), range(64)):
        assert moved.apply(c, r, shape=(64, 8)) == a.apply(r, c, shape=(8, 64))
    grouped, seps = a.group((8, 8, 8))
    assert seps == [0, 1, 2, 3] and grouped.apply(5) == a.apply(5)
    assert a.permute_dims((0, 1)) == a


def test_pack_keeps_the_swizzle_on_wide_elements():
    a = ComposeLayout(3, 3, 3, TileLayout(S[8, 64]))
    packed = a.pack(2)
    assert packed == ComposeLayout(2, 3, 3, TileLayout(S[(8, 32) : (32, 1)]))
    for r, w in itertools.product(range(8), range(32)):
        wide = packed.apply(r, w, shape=(8, 32))["m"]
        assert a.apply(r, 2 * w, shape=(8, 64))["m"] == 2 * wide
        assert a.apply(r, 2 * w + 1, shape=(8, 64))["m"] == 2 * wide + 1
    assert packed.unpack(2) == a and a.pack(8).pack(1).per_element == 0


def test_a_pack_wider_than_the_swizzle_unit_names_per_element():
    with pytest.raises(LayoutError) as e:
        ComposeLayout(0, 2, 3, TileLayout(S[16, 32])).pack(2)
    msg, hint = e.value.message, e.value.hint
    assert "units of 2**per_element = 1 element (per_element=0)" in msg
    assert "give per_element (the first argument) at least 1" in hint
    assert "unit is 2**per_element elements" in hint


BAD = [
    lambda: ComposeLayout(3, 3, 2, TileLayout(S[8, 64])),  # atom_len < swizzle_len
    lambda: ComposeLayout(-1, 3, 3, TileLayout(S[8, 64])),
    lambda: ComposeLayout(3.0, 3, 3, TileLayout(S[8, 64])),
    lambda: ComposeLayout(3, 3, 3, S[8, 64]),
    lambda: ComposeLayout(3, 3, 3, TileLayout(S[(8, 4) : (4 @ laneid, 1)])),
    lambda: ComposeLayout(3, 3, 3, TileLayout(S[8, 64]), swizzle_inner=1),
    lambda: ComposeLayout(3, 3, 3, TileLayout(S[8, 64])).pack(3),
    lambda: ComposeLayout(3, 3, 3, TileLayout(S[8, 64])).pack(16),
    lambda: ComposeLayout(3, 3, 3, TileLayout(S[8, 64])).unpack(0),
    lambda: ComposeLayout(3, 3, 3, TileLayout(S[8, 64])).apply(1, 2, 3),
]


@pytest.mark.parametrize("make", BAD, ids=range(len(BAD)))
def test_bad_compose_raises_layout_error(make):
    with pytest.raises(LayoutError):
        make()


@pytest.mark.parametrize("inner", [True, False])
@pytest.mark.parametrize("bits", [(0, 0, 0), (3, 3, 3), (2, 3, 4), (1, 2, 3)])
def test_swizzle_ints_is_swizzle_over_a_list(bits, inner):
    c = ComposeLayout(*bits, TileLayout(S[(64, 64)]), swizzle_inner=inner)
    addrs = list(range(0, 4096, 3)) + [1 << 20, (1 << 20) + 77]
    assert c.swizzle_ints(addrs) == [c.swizzle(a) for a in addrs]


@pytest.mark.parametrize("swizzle", [0, 1, 2, 3])
@pytest.mark.parametrize("nbytes", [1, 2, 4])
def test_tma_swizzle_offsets_over_a_range_are_the_single_ones(swizzle, nbytes):
    from tirx.families.tma.isa_operands import swizzle_byte_offset, swizzle_byte_offsets

    assert swizzle_byte_offsets(3000, nbytes, swizzle) == [
        swizzle_byte_offset(f * nbytes, swizzle) for f in range(3000)
    ]
