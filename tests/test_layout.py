"""TileLayout by enumeration: every point of small layouts against a reference written from
SPEC §2, the seed guide's layouts, the structural operations and every error path."""

from __future__ import annotations

import ast
import itertools
import pathlib
from collections import defaultdict

import pytest

import tirx.layout as L
from tirx.errors import LayoutError
from tirx.layout import (
    Axis,
    ComposeLayout,
    Iter,
    R,
    S,
    TileLayout,
    bx,
    laneid,
    m,
    transpose,
    warpid,
)

NAMES = {name: getattr(L, name) for name in L.__all__}


# ---------------------------------------------------------------------- the reference


def reference(layout: TileLayout, coord, shape) -> list[dict]:
    """SPEC §2 literally: flatten, split innermost-first, sum per axis, offsets, replicas."""
    f = 0
    for c, d in zip(coord, shape):
        f = f * d + c
    pieces = []
    for it in reversed(layout.shard[1:]):
        pieces.append(f % it.extent)
        f //= it.extent
    pieces.append(f)
    pieces.reverse()
    base = defaultdict(int)
    for it, c in zip(layout.shard, pieces):
        base[it.axis.name] += c * it.stride
    for axis, value in layout.offset:
        base[axis.name] += value
    copies = []
    for combo in itertools.product(*(range(it.extent) for it in layout.replica)):
        point = defaultdict(int, base)
        for it, r in zip(layout.replica, combo):
            point[it.axis.name] += r * it.stride
        copies.append(point)
    return copies


def same_point(got: dict, want: dict) -> bool:
    return all(got.get(k, 0) == want.get(k, 0) for k in set(got) | set(want))


def points(shape):
    return itertools.product(*(range(d) for d in shape))


SMALL = [
    S[4, 8],
    S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)],
    S[(2, 3, 2) : (1, 2 @ warpid, 6)] + 3,
    S[(2, 4) : (0, 1 @ laneid)] + R[2 : 1 @ warpid] + 5 @ warpid,
    S[(1, 4, 1, 2) : (7, 2, 9 @ laneid, 1)] + R[(2, 2) : (8 @ laneid, 4)] + 1 @ laneid,
    S[(3, 4) : (1 @ laneid, 3)],
]


@pytest.mark.parametrize("spec", SMALL, ids=repr)
def test_every_point_matches_the_reference(spec):
    layout = TileLayout(spec)
    n = layout.size()
    for shape in [(n,), tuple(it.extent for it in layout.shard)]:
        for x in points(shape):
            want = reference(layout, x, shape)
            got_all = layout.apply_all(*x, shape=shape)
            assert same_point(layout.apply(*x, shape=shape), want[0])
            assert len(got_all) == len(want)
            key = lambda p: sorted((k, v) for k, v in p.items() if v)  # noqa: E731
            assert sorted(map(key, got_all)) == sorted(map(key, want))
    for f in range(n):
        assert same_point(layout.apply(f), reference(layout, (f,), (n,))[0])


def test_the_three_forms_of_apply():
    layout = TileLayout(S[(2, 3, 4) : (1 @ laneid, 8, 1)])
    assert layout.apply(17) == {"m": 1 * 8 + 1, "laneid": 1}
    assert layout.apply(1, 1, 1) == {"m": 9, "laneid": 1}  # one value per shard iter
    assert layout.apply(1, 5, shape=(2, 12)) == layout.apply(17)
    assert layout.apply((1, 5), shape=(2, 12)) == layout.apply(17)
    assert layout.apply(23) == {"m": 2 * 8 + 3, "laneid": 1}  # the last element


# The outermost piece of the split is not reduced (no remainder is taken): that shows only for a
# symbolic index (test_layout_properties: ``(lane // 4) * 4``, not ``((lane // 4) % 8) * 4``).


# An integer coordinate outside the tile (F8 of a student's walk-through: ``apply(16, 0,
# shape=(16, 8))`` gave the lane of row 0 of the next tile) is refused, naming the coordinate and
# its extent; the map is defined on the tile only.
OUT_OF_RANGE = [
    (
        (16, 0),
        (16, 8),
        "coordinate 16 of dimension 0",
        "dimension 0 of shape (16, 8) has extent 16",
    ),
    ((0, 8), (16, 8), "coordinate 8 of dimension 1", "dimension 1 of shape (16, 8) has extent 8"),
    ((-1, 0), (16, 8), "coordinate -1 of dimension 0", "has extent 16 (0 to 15)"),
    ((200,), None, "linear index 200", "the layout has 128 elements (0 to 127)"),
    ((-1,), None, "linear index -1", "the layout has 128 elements"),
    ((2, 0, 0, 0), None, "value 2 for shard iter 0", "that iter has extent 2 (0 to 1)"),
    ((0, 0, 0, -1), None, "value -1 for shard iter 3", "that iter has extent 2"),
]


@pytest.mark.parametrize("coord, shape, names, extent", OUT_OF_RANGE)
def test_an_integer_coordinate_outside_the_tile_is_refused(coord, shape, names, extent):
    d = TileLayout(S[(2, 8, 4, 2) : (2, 4 @ laneid, 1 @ laneid, 1)])
    with pytest.raises(LayoutError) as err:
        d.apply(*coord, shape=shape)
    assert names in err.value.message and extent in err.value.message
    assert "off-by-one" in err.value.hint
    with pytest.raises(LayoutError):
        d.apply_all(*coord, shape=shape)
    with pytest.raises(LayoutError):
        ComposeLayout(0, 1, 1, TileLayout(S[16, 8])).apply(*coord, shape=shape)


def test_the_corners_of_the_tile_apply():
    d = TileLayout(S[(2, 8, 4, 2) : (2, 4 @ laneid, 1 @ laneid, 1)])
    assert d.apply(15, 7, shape=(16, 8)) == d.apply(127) == {"m": 3, "laneid": 31}
    assert d.apply(1, 7, 3, 1) == d.apply(127)


def test_result_always_holds_m_and_the_axes_used():
    assert TileLayout(S[8 : 1 @ laneid]).apply(3) == {"m": 0, "laneid": 3}
    # a unit iter does not count as using its axis: equal layouts give equal results
    assert TileLayout(S[(8, 1) : (1 @ laneid, 1 @ warpid)]).apply(3) == {"m": 0, "laneid": 3}
    layout = TileLayout(S[4:1] + R[2 : 1 @ warpid] + 0 @ laneid)
    assert layout.apply(2) == {"m": 2, "warpid": 0}
    assert layout.apply_all(2) == [{"m": 2, "warpid": 0}, {"m": 2, "warpid": 1}]


# ---------------------------------------------------------------------- the seed's layouts


def test_seed_ldmatrix_load_layouts():
    a = TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])
    b = TileLayout(S[(2, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])
    for layout, count in [(a, 4), (b, 2)]:
        for i, r, w in points((count, 8, 4)):
            assert layout.apply(i, r, w, shape=(count, 8, 4)) == {"m": i, "laneid": 4 * r + w}


def test_seed_mma_layouts_match_spec_section_5():
    d = TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
    a = TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
    b = TileLayout(S[(1, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)])
    for row, col in points((16, 8)):
        got = d.apply(0, 0, row, col, shape=(1, 1, 16, 8))
        assert got == {"laneid": 4 * (row % 8) + col // 2, "m": 2 * (row // 8) + col % 2}
        got = a.apply(0, 0, row, col, shape=(1, 1, 16, 8))
        assert got == {"laneid": 4 * (row % 8) + col % 4, "m": row // 8 + 2 * (col // 4)}
    for n, word in points((8, 8)):
        assert b.apply(0, 0, n, word, shape=(1, 1, 8, 8)) == {
            "laneid": 4 * n + word % 4,
            "m": word // 4,
        }
    for layout, shape in [(d, (1, 1, 16, 8)), (a, (1, 1, 16, 8)), (b, (1, 1, 8, 8))]:
        owned = {tuple(layout.apply(*x, shape=shape).values()) for x in points(shape)}
        assert len(owned) == layout.size()  # each (lane, slot) holds one element
    assert (d.span(), a.span(), b.span(), d.span("laneid")) == (4, 4, 2, 32)


def test_seed_rearrange_is_group_then_transpose():
    # a.view("uint32").rearrange("(group row) (chunk word) -> (chunk group) row word", ...)
    words = TileLayout(S[16, 16]).pack(2)
    assert words == TileLayout(S[(16, 8) : (8, 1)])
    view = transpose(words, (2, 8, 2, 4), (2, 0, 1, 3))
    for chunk, group, row, word in points((2, 2, 8, 4)):
        mat = chunk * 2 + group
        want = (group * 8 + row) * 8 + chunk * 4 + word
        assert view.apply(mat, row, word, shape=(4, 8, 4)) == {"m": want}


# ---------------------------------------------------------------------- spec syntax


def test_spec_spellings():
    row_major = TileLayout(S[(4, 8) : (8, 1)])
    assert TileLayout(S[4, 8]).shard == row_major.shard
    assert TileLayout(S[(4, 8)]).shard == row_major.shard
    assert TileLayout(S[[4, 8]]).shard == row_major.shard
    assert TileLayout(S[16]).shard == (Iter(16, 1, m),)
    assert TileLayout(S[16 : 4 @ laneid]).shard == (Iter(16, 4, laneid),)
    layout = TileLayout(S[4:1] + R[2 : 1 @ warpid] + 5 @ warpid + 2 + 1 @ warpid)
    assert layout.replica == (Iter(2, 1, warpid),)
    assert layout.offsets() == {"m": 2, "warpid": 6}
    assert TileLayout(S[4:1] + (5 @ warpid + 2)).offsets() == {"m": 2, "warpid": 5}
    assert TileLayout(2 + S[4:1]).offsets() == {"m": 2}
    assert TileLayout(S[()]).size() == 1 and TileLayout(S[()]).apply() == {"m": 0}


def test_from_iters_and_iters():
    layout = TileLayout.from_iters([Iter(8, 4, "laneid"), (4, 1, laneid)], [], {"m": 3, warpid: 1})
    assert layout == TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)] + 3 + 1 @ warpid)
    assert TileLayout.from_iters() == TileLayout(S[()])
    assert Iter(4, 2, "m") == Iter(4, 2, m) and hash(Iter(4, 2, "m")) == hash(Iter(4, 2, m))


def test_axes():
    assert Axis.get("laneid") is laneid and Axis.laneid is laneid
    assert laneid.is_thread and m.is_memory and laneid.kind == "thread" and m.kind == "memory"
    assert {a.name for a in NAMES.values() if isinstance(a, Axis)} == {
        "laneid", "warpid", "tx", "bx", "by", "bz", "wgid", "tid_in_wg", "wid_in_wg", "m",
    }  # fmt: skip
    assert 4 @ laneid == L.axes.AxisTerm(4, laneid)
    assert laneid == "laneid" and laneid != m and laneid != 3 and {m: 1}["m"] == 1
    assert dict(TileLayout(S[4] + 2 + 1 @ warpid).offset)["warpid"] == 1


BAD_SPECS = [
    lambda: S[(4, 8) : (1,)],  # mismatched lengths
    lambda: S[(4, 8) : 1],
    lambda: S[0],  # zero extent
    lambda: S[(4, -2) : (1, 1)],  # negative extent
    lambda: S[4:1.5],  # non-int strides
    lambda: S[4:"1"],
    lambda: S[4 : (1 @ laneid + 1)],
    lambda: S[2.0],
    lambda: S[(2, (2, 2))],
    lambda: S[4:],
    lambda: S[4:1:2],
    lambda: S[True],
    lambda: 1.5 @ laneid,
    lambda: laneid @ laneid,
    lambda: laneid @ 4,
    lambda: S[4] + S[4],
    lambda: S[4] + 1.5,
    lambda: S[4] + "x",
    lambda: Axis.get("lane"),  # unknown axes
    lambda: Axis.get(3),
    lambda: Axis("foo", "thread"),
    lambda: Axis("m", "thread"),
    lambda: Iter(4, 1, "TLane"),
    lambda: Iter(0, 1, m),
    lambda: TileLayout(5),
    lambda: TileLayout(L.LayoutSpec(shard=(4, 8))),
    lambda: TileLayout(L.LayoutSpec(offset=(("m", 1),))),
    lambda: TileLayout(L.LayoutSpec(shard=[Iter(4, 1, m)])),
    lambda: TileLayout(L.LayoutSpec(offset=((m,),))),
    lambda: TileLayout(S[4]).apply(1, 2),  # wrong number of coordinates
    lambda: TileLayout(S[4, 8]).apply(1, shape=(4, 8)),
    lambda: TileLayout(S[4, 8]).apply(1, 2, shape=(4, 4)),  # shape does not match size
    lambda: TileLayout(S[4, 8]).apply(1, 2, shape=(0, 8)),
    lambda: TileLayout(S[4, 8]).apply(1.5),  # not a coordinate
    lambda: TileLayout(S[4, 8]).apply(None, 1, shape=(4, 8)),
    lambda: TileLayout(S[4, 8]).apply(),
    lambda: TileLayout(S[4, 8]).size("nope"),
    lambda: TileLayout(S[4, 8]).span("nope"),
    lambda: TileLayout.from_iters([(4, 1)]),
    lambda: TileLayout.from_iters(4),
    lambda: TileLayout.from_iters([], [], {"lane": 1}),
    lambda: TileLayout.from_iters([], [], {"m": 1.5}),
    lambda: TileLayout.from_iters([], [], [("m", 1)]),
    lambda: TileLayout(S[(3, 2) : (1 @ laneid, 1)]).group((2, 3)),  # impossible
    lambda: TileLayout(S[4, 8]).group((4, 4)),
    lambda: TileLayout(S[4, 8]).group("ab"),
    lambda: TileLayout(S[4, 8]).permute_dims((0, 0)),
    lambda: TileLayout(S[4, 8]).permute_dims(1),
    lambda: TileLayout(S[4, 8]).permute_by_groups([0, 3], (0,)),
    lambda: TileLayout(S[4, 8]).permute_by_groups(None, (0,)),
    lambda: transpose(TileLayout(S[4, 8]), (4, 8), (1, 2)),
    lambda: TileLayout(S[4, 8]).pack(3),  # not divisible
    lambda: TileLayout(S[4, 8]).pack(0),
    lambda: TileLayout(S[4, 8]).pack(2.0),
    lambda: TileLayout(S[(4, 8) : (1, 4)]).pack(2),  # innermost not contiguous
    lambda: TileLayout(S[8 : 1 @ laneid]).pack(2),
    lambda: TileLayout(S[(4, 8) : (3, 1)]).pack(2),  # a stride not divisible
    lambda: TileLayout(S[4, 8] + 1).pack(2),  # m offset not divisible
    lambda: TileLayout(S[4, 8] + R[2:3]).pack(2),
    lambda: TileLayout(S[4, 8]).unpack(-1),
]


@pytest.mark.parametrize("make", BAD_SPECS, ids=range(len(BAD_SPECS)))
def test_bad_input_raises_layout_error(make):
    with pytest.raises(LayoutError) as info:
        make()
    assert info.value.hint  # every error says what to do


# ---------------------------------------------------------------------- queries


def test_size_span_storage_axes():
    layout = TileLayout(S[(2, 8, 4, 2) : (2, 4 @ laneid, 1 @ laneid, 1)] + R[2 : 1 @ warpid] + 3)
    assert layout.size() == 128 and layout.size("laneid") == 32 and layout.size(m) == 4
    # span counts the m offset (3), as TIRx does: 1 + (2 - 1) * 2 + (2 - 1) * 1 + 3
    assert layout.span() == 7 and layout.span("laneid") == 32 and layout.span("warpid") == 2
    assert layout.span("bx") == 1
    assert layout.axes() == {"m", "laneid", "warpid"} and not layout.is_memory_only()
    storage = layout.storage()
    assert storage == TileLayout(S[(2, 2) : (2, 1)] + 3) and storage.is_memory_only()
    assert TileLayout(S[(4, 1) : (1, 1 @ laneid)] + 0 @ warpid).is_memory_only()


def test_canonicalize():
    assert TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)]).canonicalize().shard == (
        Iter(4, 1, m),
        Iter(32, 1, laneid),
    )
    assert TileLayout(S[4, 8]) == TileLayout(S[32])
    assert hash(TileLayout(S[4, 8])) == hash(TileLayout(S[32]))
    assert TileLayout(S[(1, 4, 1) : (9, 1, 3)] + 0 + 0 @ laneid) == TileLayout(S[4])
    assert TileLayout(S[(2, 3) : (0, 0)]) == TileLayout(S[6:0])
    assert TileLayout(S[4] + R[(2, 2) : (2 @ warpid, 1 @ warpid)]) == TileLayout(
        S[4] + R[4 : 1 @ warpid]
    )
    assert TileLayout(S[4] + R[(2, 2) : (1 @ laneid, 1 @ warpid)]) == TileLayout(
        S[4] + R[(2, 2) : (1 @ warpid, 1 @ laneid)]
    )
    assert TileLayout(S[4, 8]) != TileLayout(S[(4, 8) : (1, 4)]) and TileLayout(S[4]) != "S[4]"
    canon = TileLayout(S[(4, 8) : (8, 1)] + 0).canonicalize()
    assert repr(canon) == "TileLayout(S[32:1])" and canon.canonicalize() is canon


def test_repr_round_trips():
    for spec in SMALL + [S[()], S[16:0], S[(2, 2) : (-0, 0 @ bx)] + -3 @ m]:
        layout = TileLayout(spec)
        again = eval(repr(layout), NAMES)
        assert again == layout and again.shard == layout.shard and again.offset == layout.offset
    assert repr(TileLayout(S[8 : 4 @ laneid] + 1)) == "TileLayout(S[8:4 @ laneid] + 1)"
    assert repr(Iter(4, 1, laneid)) == "Iter(4, 1, laneid)"


# ---------------------------------------------------------------------- structure


def test_group_keeps_iters_and_splits_where_needed():
    d = TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
    grouped, seps = d.group((1, 1, 16, 8))
    assert grouped.shard == d.shard and seps == [0, 1, 2, 4, 6]
    grouped, seps = TileLayout(S[32:1]).group((4, 8))
    assert grouped.shard == (Iter(4, 8, m), Iter(8, 1, m)) and seps == [0, 1, 2]
    # (2, 3) cannot hold shape (3, 2) as written, but its canonical form (6:1) can
    grouped, seps = TileLayout(S[(2, 3) : (3, 1)]).group((3, 2))
    assert grouped.shard == (Iter(3, 2, m), Iter(2, 1, m)) and seps == [0, 1, 2]
    grouped, seps = TileLayout(S[(4, 1) : (1, 1)]).group((4,))
    assert seps == [0, 2]
    layout = TileLayout(S[()])
    assert layout.group(()) == (layout, [0])


def test_transpose_by_definition():
    layout = TileLayout(S[(2, 4, 3) : (1 @ laneid, 3, 1)] + R[2 : 1 @ warpid])
    shape = (2, 12)
    t = transpose(layout, shape, (1, 0))
    for x in points(shape):
        y = (x[1], x[0])
        assert t.apply(*y, shape=(12, 2)) == layout.apply(*x, shape=shape)
        assert t.apply_all(*y, shape=(12, 2)) == layout.apply_all(*x, shape=shape)
    assert transpose(TileLayout(S[4, 8]), (4, 8), (1, 0)) == TileLayout(S[(8, 4) : (1, 8)])


def test_permute_dims_and_by_groups():
    layout = TileLayout(S[(2, 3, 4) : (12, 4, 1)])
    assert layout.permute_dims((2, 0, 1)).shard == (Iter(4, 1, m), Iter(2, 12, m), Iter(3, 4, m))
    assert layout.permute_by_groups([0, 2, 3], (1, 0)).shard == (
        Iter(4, 1, m),
        Iter(2, 12, m),
        Iter(3, 4, m),
    )


def test_pack_and_unpack():
    assert TileLayout(S[16, 16]).pack(2) == TileLayout(S[(16, 8) : (8, 1)])
    assert TileLayout(S[16, 16]).pack(2).unpack(2).shard == TileLayout(S[16, 16]).shard
    regs = TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)])
    assert regs.unpack(2) == TileLayout(S[(8, 4, 2) : (4 @ laneid, 1 @ laneid, 1)])
    assert regs.unpack(2).pack(2) == regs and regs.pack(1) == regs
    layout = TileLayout(S[(2, 4, 4) : (1 @ laneid, 16, 1)] + R[2:64] + 8)
    packed = layout.pack(4)
    assert packed == TileLayout(S[(2, 4, 1) : (1 @ laneid, 4, 1)] + R[2:16] + 2)
    for i, j, t in points((8, 1, 4)):
        wide = packed.apply(i, j, shape=(8, 1))
        narrow = layout.apply(i, 4 * j + t, shape=(8, 4))
        assert narrow == {**wide, "m": wide["m"] * 4 + t}


# ---------------------------------------------------------------------- layering


def test_layout_imports_only_errors_and_frozen_from_tirx():
    """The layout algebra stands on its own: of tirx it uses only the error classes and the
    frozen-dataclass helper (tirx/frozen.py, which imports nothing of tirx)."""
    root = pathlib.Path(L.__file__).parent
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level == 2:
                    assert mod in ("errors", "frozen"), f"{path.name} imports tirx.{mod}"
                elif node.level == 0:
                    assert mod.split(".")[0] not in {"tirx", "numpy", "torch"}, path.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] not in {"tirx", "numpy", "torch"}, path.name
        assert len(path.read_text().splitlines()) < 400, path.name


# ---------------------------------------------------------------------- span as TIRx counts it

# (spec, span(), span("laneid")) as apache-tvm-tirx 0.1.0a4's TileLayout.span reports them
# (measured on that package; for non-negative strides it is 1 + offset + sum((e - 1) * s)).
TIRX_SPANS = [
    (S[8], 8, 1),
    (S[(4, 8)], 32, 1),
    (S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)], 4, 32),
    (S[(4, 2) : (1, 8)], 12, 1),
    (S[(4,) : (1,)] + R[2:4], 8, 1),
    (S[(8,) : (1 @ laneid,)] + R[4 : 8 @ laneid], 1, 32),
    (S[(4,) : (1,)] + 5, 9, 1),
    (S[(4, 2) : (0, 1)], 2, 1),
    (S[(2, 4) : (3, 2)], 10, 1),
    (S[(3, 3) : (1, 1)], 5, 1),
    (S[(8,) : (1,)] + 3 @ laneid, 8, 4),
]


@pytest.mark.parametrize("spec, span_m, span_lane", TIRX_SPANS, ids=range(len(TIRX_SPANS)))
def test_span_counts_offsets_as_tirx_does(spec, span_m, span_lane):
    layout = TileLayout(spec)
    assert (layout.span(), layout.span("laneid")) == (span_m, span_lane)


@pytest.mark.parametrize("spec", [spec for spec, _, _ in TIRX_SPANS] + [
    S[4:-1] + 3, S[(2, 4) : (4, -1)] + 3, S[(2, 4) : (-4, 1)] + 4, S[(4, 2) : (-2, 1)] + 6,
])  # fmt: skip
def test_span_is_one_past_the_highest_position_and_lowest_the_lowest(spec):
    layout = TileLayout(spec)
    for axis in ("m", "laneid"):
        positions = [layout.apply(i)[axis] if axis in layout.apply(i) else 0
                     for i in range(layout.size())]  # fmt: skip
        copies = [p.get(axis, 0) for i in range(layout.size()) for p in layout.apply_all(i)]
        assert layout.span(axis) == max(positions + copies) + 1
        assert layout.lowest(axis) == min(positions + copies + [layout.offsets().get(axis, 0)])


def test_negative_strides_walk_backwards():
    reversed_regs = TileLayout(S[(4, 8, 4) : (-1, 4 @ laneid, 1 @ laneid)] + 3)
    assert [reversed_regs.apply(i, 0, 0)["m"] for i in range(4)] == [3, 2, 1, 0]
    assert reversed_regs.span() == 4 and reversed_regs.lowest() == 0
    assert TileLayout(S[4:-1]).lowest() == -3  # below 0 until an offset lifts it
    rows_bottom_up = TileLayout(S[(4, 8) : (-8, 1)] + 24)
    assert rows_bottom_up.apply(0, 0)["m"] == 24 and rows_bottom_up.apply(3, 7)["m"] == 7
    assert eval(repr(rows_bottom_up)) == rows_bottom_up


# ------------------------------------------------------------- negative strides in tile ops

_REVERSED_REGISTERS = """
@T.function
def k(Src: T.Tensor((32, 8), "float16"), Out: T.Tensor((32, 8), "float16"),
      Regs: T.Tensor((32, 4), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    s = T.alloc_shared((32, 8), "float16")
    t = T.alloc_shared((32, 8), "float16")
    for i in range(lane, 256, 32):
        s[i // 8, i % 8] = Src[i // 8, i % 8]
    T.cuda.cta_sync()
    regs = T.alloc_local((4,), "uint32")
    load = TileLayout(S[(4, 8, 4) : ({stride}, 4 @ laneid, 1 @ laneid)] + {offset})
    src = s.view("uint32").rearrange("(mat row) w -> mat row w", mat=4)
    dst = t.view("uint32").rearrange("(mat row) w -> mat row w", mat=4)
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
                      regs.view(4, 8, 4, layout=load), src)
    T.cuda.tile.apply(T.ptx["stmatrix.sync.aligned.m8n8.x4.shared.b16"],
                      dst, regs.view(4, 8, 4, layout=load))
    T.cuda.cta_sync()
    for i in range(lane, 256, 32):
        Out[i // 8, i % 8] = t[i // 8, i % 8]
    for j in range(4):
        Regs[lane, j] = regs[j]
"""


def test_reversed_register_order_for_ldmatrix_and_stmatrix(tmp_path):
    """Registers in reverse slot order (a negative m stride): the data round-trips unchanged
    through ldmatrix and stmatrix, and slot j holds what slot 3 - j holds in the plain order."""
    np = pytest.importorskip("numpy")
    import tirx
    from tests.helpers import define

    src = np.arange(256, dtype=np.float16).reshape(32, 8)
    regs = {}
    for name, stride, offset in (("plain", 1, 0), ("reversed", -1, 3)):
        k = define(_REVERSED_REGISTERS.format(stride=stride, offset=offset), tmp_path, "k")
        assert tirx.compile(k, target="cuda -arch=sm_90").source  # NVRTC takes it too
        out = np.zeros((32, 8), dtype=np.float16)
        regs[name] = np.zeros((32, 4), dtype=np.uint32)
        tirx.compile(k, target="sim")(src, out, regs[name])
        np.testing.assert_array_equal(out, src)
    np.testing.assert_array_equal(regs["reversed"], regs["plain"][:, ::-1])


@pytest.mark.gpu
def test_gpu_reversed_register_order_matches_the_simulator(tmp_path):
    torch = pytest.importorskip("torch")
    import tirx
    from tests.helpers import define

    src = torch.arange(256, dtype=torch.float16).reshape(32, 8)
    k = define(_REVERSED_REGISTERS.format(stride=-1, offset=3), tmp_path, "k")
    out, regs = torch.zeros((32, 8), dtype=torch.float16), torch.zeros((32, 4), dtype=torch.uint32)
    tirx.compile(k, target="sim")(src, out, regs)
    gout = torch.zeros_like(out, device="cuda")
    gregs = torch.zeros_like(regs, device="cuda")
    tirx.compile(k, target="cuda")(src.cuda(), gout, gregs)
    torch.cuda.synchronize()
    assert torch.equal(gout.cpu(), src)
    assert (gregs.cpu().numpy() == regs.numpy()).all()  # (few torch ops take uint32)


# ------------------------------------------------------- thread axes of a kernel's views

_LANE_VIEW = """
@T.function
def k(Out: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    r = T.alloc_local((2,), "float32")
    v = r.view(8, 8, layout=TileLayout(S[{spec}]))
    r[0] = 1.0
    Out[lane] = r[0]
"""


def test_a_register_view_reaching_lane_32_is_refused_in_a_kernel(tmp_path):
    """The layout algebra alone accepts a laneid span of 64 (nothing binds its axis to a
    warp there: a layout is a map); a register view in a kernel binds laneid to the lanes of
    a warp, 0 to 31, so the view names the lane that does not exist."""
    from tests.helpers import define
    from tirx.errors import LayoutError as Refused

    wide = TileLayout(S[(8, 8) : (8 @ laneid, 1 @ laneid)])
    assert wide.apply(7, 7, shape=(8, 8)) == {"m": 0, "laneid": 63}  # a map, accepted
    with pytest.raises(Refused) as e:
        define(_LANE_VIEW.format(spec="(8, 8) : (8 @ laneid, 1 @ laneid)"), tmp_path, "k")
    assert "reaches laneid 63, but a warp has lanes 0 to 31" in e.value.message
    assert "r.view(8, 8, layout=" in str(e.value)
    twin = "(8, 4, 2) : (4 @ laneid, 1 @ laneid, 1)"  # lanes 0 to 31, two registers each
    define(_LANE_VIEW.format(spec=twin), tmp_path, "k")


def test_mismatched_counts_name_them_in_words():
    with pytest.raises(LayoutError, match=r"S\[\.\.\.\] has 2 extents but 1 stride\n"):
        S[(4, 8) : (1,)]
    with pytest.raises(LayoutError, match=r"has 1 extent but 2 strides\n"):
        S[(4,) : (1, 2)]
