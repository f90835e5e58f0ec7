"""Property tests of the layout algebra on random layouts, and symbolic coordinates."""

from __future__ import annotations

import itertools
import math
import operator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tirx.layout as L
from tirx.errors import LayoutError
from tirx.layout import ComposeLayout, Iter, R, S, TileLayout, laneid, m, transpose, warpid

NAMES = {name: getattr(L, name) for name in L.__all__}
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------- a fake index expression


class Sym:
    """A symbolic index: records its expression text and can evaluate it. It supports only
    ``sym OP int`` and ``sym OP sym``; asking for its truth, hash, int value or a comparison
    fails, so a layout that branches on a coordinate fails the test."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, text: str, fn):
        self.text, self.fn = text, fn

    @staticmethod
    def var(name: str) -> Sym:
        return Sym(name, lambda env: env[name])

    def _op(self, other, sym: str, op) -> Sym:
        if isinstance(other, Sym):
            return Sym(f"({self.text} {sym} {other.text})", lambda e: op(self.fn(e), other.fn(e)))
        assert type(other) is int, f"unexpected operand {other!r}"
        return Sym(f"({self.text} {sym} {other})", lambda e: op(self.fn(e), other))

    def __add__(self, o):
        return self._op(o, "+", operator.add)

    def __sub__(self, o):
        return self._op(o, "-", operator.sub)

    def __mul__(self, o):
        return self._op(o, "*", operator.mul)

    def __floordiv__(self, o):
        return self._op(o, "//", operator.floordiv)

    def __mod__(self, o):
        return self._op(o, "%", operator.mod)

    def __lshift__(self, o):
        return self._op(o, "<<", operator.lshift)

    def __rshift__(self, o):
        return self._op(o, ">>", operator.rshift)

    def __and__(self, o):
        return self._op(o, "&", operator.and_)

    def __xor__(self, o):
        return self._op(o, "^", operator.xor)

    def __repr__(self) -> str:
        return self.text

    def _refuse(self, *args):
        raise AssertionError("a layout inspected a symbolic coordinate")

    __bool__ = __int__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse


def evaluate(point: dict, env: dict) -> dict:
    return {k: v.fn(env) if isinstance(v, Sym) else v for k, v in point.items()}


def test_symbolic_seed_layout_is_tidy():
    d = TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
    row, col = Sym.var("row"), Sym.var("col")
    point = d.apply(0, 0, row, col, shape=(1, 1, 16, 8))
    assert point["m"].text == "(((row // 8) * 2) + (col % 2))"
    assert point["laneid"].text == "(((row % 8) * 4) + (col // 2))"
    load = TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])
    i, r, w = Sym.var("i"), Sym.var("r"), Sym.var("w")
    point = load.apply(i, r, w, shape=(4, 8, 4))
    assert point["m"].text == "i" and point["laneid"].text == "((r * 4) + w)"
    assert TileLayout(S[4, 8] + 3).apply(Sym.var("f"))["m"].text == "(f + 3)"
    lane = Sym.var("lane")
    frag = TileLayout(S[(8, 4) : (4 @ laneid, 1)])
    assert frag.apply(lane)["laneid"].text == "((lane // 4) * 4)"
    assert frag.apply(lane)["m"].text == "(lane % 4)"
    point = frag.apply(lane, 2)
    assert point["m"] == 2 and point["laneid"].text == "(lane * 4)"


def test_symbolic_mixed_with_ints_and_ungroupable_shapes():
    layout = TileLayout(S[(3, 2) : (1 @ laneid, 1)])
    x = Sym.var("x")
    for j in range(3):
        point = layout.apply(j, x, shape=(3, 2))  # (3, 2) does not group as (2, 3) would
        for v in range(2):
            assert evaluate(point, {"x": v}) == layout.apply(j, v, shape=(3, 2))
    point = layout.apply(x, 1, shape=(2, 3))
    for v in range(2):
        assert evaluate(point, {"x": v}) == layout.apply(v, 1, shape=(2, 3))
    assert "% 1" not in str(point) and "// 1" not in str(point)


def test_symbolic_swizzle():
    tile = ComposeLayout(3, 3, 3, TileLayout(S[8, 64]))
    row, col = Sym.var("row"), Sym.var("col")
    point = tile.apply(row, col, shape=(8, 64))
    for r, c in itertools.product(range(8), range(64)):
        assert evaluate(point, {"row": r, "col": c}) == tile.apply(r, c, shape=(8, 64))
    outer = ComposeLayout(1, 2, 2, TileLayout(S[8, 8]), swizzle_inner=False)
    point = outer.apply(Sym.var("f"))
    assert all(evaluate(point, {"f": f}) == outer.apply(f) for f in range(64))


# ---------------------------------------------------------------------- random layouts

AXES = [m, m, laneid, warpid]


@st.composite
def iter_lists(draw, max_size):
    """Iters whose strides are often contiguous with their inner neighbour, so that
    canonicalization has something to fuse."""
    n = draw(st.integers(0, max_size))
    iters: list[Iter] = []
    for _ in range(n):
        extent = draw(st.integers(1, 4))
        axis = draw(st.sampled_from(AXES))
        if iters and draw(st.booleans()):
            inner = iters[0]
            stride, axis = inner.extent * inner.stride, inner.axis
        else:
            stride = draw(st.sampled_from([0, 1, 1, 2, 3, 4, 8]))
        iters.insert(0, Iter(extent, stride, axis))
    return iters


@st.composite
def layouts(draw):
    offset = draw(st.dictionaries(st.sampled_from(["m", "laneid", "warpid"]), st.integers(-2, 6)))
    return TileLayout.from_iters(draw(iter_lists(4)), draw(iter_lists(2)), offset)


def copies(layout, *coord, shape=None):
    return sorted(tuple(sorted(p.items())) for p in layout.apply_all(*coord, shape=shape))


@FAST
@given(layouts())
def test_canonicalize_preserves_the_map(layout):
    canon = layout.canonicalize()
    for f in range(layout.size()):
        assert layout.apply(f) == canon.apply(f)
        assert copies(layout, f) == copies(canon, f)
    assert canon.size() == layout.size() and canon.span() == layout.span()
    assert canon.span("laneid") == layout.span("laneid")
    assert canon.canonicalize() == canon and canon.canonicalize().shard == canon.shard


@FAST
@given(layouts())
def test_table_enumerates_apply(layout):
    names = sorted(layout.axes() | {"m"})
    rows = layout.table(names)
    assert len(rows) == layout.size()
    for f, row in enumerate(rows):
        got = layout.apply(f)
        assert row == tuple(got.get(n, 0) for n in names)


def test_swizzled_table_enumerates_apply():
    layout = ComposeLayout(3, 3, 3, TileLayout(S[8, 64]))
    assert layout.table(("m",)) == tuple((layout.apply(f)["m"],) for f in range(512))


@given(layouts(), layouts())
def test_equality_and_hash_are_consistent(a, b):
    assert a == a.canonicalize() and hash(a) == hash(a.canonicalize())
    if a == b:
        assert hash(a) == hash(b)
        assert all(a.apply(f) == b.apply(f) for f in range(a.size()))
    assert {a: 1}[a.canonicalize()] == 1


@FAST
@given(layouts())
def test_repr_round_trips(layout):
    again = eval(repr(layout), NAMES)
    assert again == layout
    assert (again.shard, again.replica, again.offset) == (
        layout.shard,
        layout.replica,
        layout.offset,
    )


@st.composite
def layouts_with_shapes(draw):
    layout = draw(layouts())
    extents = [it.extent for it in layout.canonicalize().shard]
    factors = [f for e in extents for f in _factors(e, draw)]
    cuts = sorted(draw(st.sets(st.integers(1, max(len(factors) - 1, 1)), max_size=3)))
    bounds = [0] + [c for c in cuts if c < len(factors)] + [len(factors)]
    shape = tuple(math.prod(factors[a:b]) for a, b in zip(bounds, bounds[1:]))
    if draw(st.booleans()):
        shape = draw(st.permutations(shape))  # often not groupable: exercises the error path
    return layout, tuple(shape) or (1,)


def _factors(e: int, draw) -> list[int]:
    if e == 4 and draw(st.booleans()):
        return [2, 2]
    return [e]


@FAST
@given(layouts_with_shapes(), st.randoms(use_true_random=False))
def test_group_and_transpose_by_definition(case, rnd):
    layout, shape = case
    try:
        grouped, seps = layout.group(shape)
    except LayoutError:
        return
    assert len(seps) == len(shape) + 1 and seps[0] == 0 and seps[-1] == len(grouped.shard)
    for i, d in enumerate(shape):
        assert math.prod(it.extent for it in grouped.shard[seps[i] : seps[i + 1]]) == d
    perm = list(range(len(shape)))
    rnd.shuffle(perm)
    new_shape = tuple(shape[p] for p in perm)
    moved = transpose(layout, shape, perm)
    for x in itertools.product(*(range(d) for d in shape)):
        y = tuple(x[p] for p in perm)
        assert grouped.apply(*x, shape=shape) == layout.apply(*x, shape=shape)
        assert moved.apply(*y, shape=new_shape) == layout.apply(*x, shape=shape)
        assert copies(moved, *y, shape=new_shape) == copies(layout, *x, shape=shape)


@FAST
@given(layouts(), st.sampled_from([1, 2, 4]))
def test_pack_unpack_identity(layout, n):
    assert layout.unpack(n).pack(n) == layout
    assert layout.unpack(n).size() == layout.size() * n
    try:
        assert layout.pack(n).unpack(n) == layout
    except LayoutError:
        pass
    wide = layout.unpack(4)  # always packs by 2 and 4: check what packing means
    packed = wide.pack(n)
    assert packed.unpack(n) == wide
    for f, t in itertools.product(range(packed.size()), range(n)):
        point = packed.apply(f)
        assert wide.apply(f * n + t) == {**point, "m": point["m"] * n + t}


@FAST
@given(layouts())
def test_storage_drops_thread_axes(layout):
    storage = layout.storage()
    assert storage.is_memory_only() and storage.axes() <= {"m"}
    assert storage.shard == tuple(it for it in layout.shard if it.axis == m)
    assert storage.span() == layout.span() and storage.offsets().get("m") == layout.offsets().get(
        "m"
    )
    assert layout.axes() <= {"m", "laneid", "warpid"}


@FAST
@given(layouts_with_shapes())
def test_symbolic_apply_evaluates_to_the_int_apply(case):
    layout, shape = case
    names = [f"x{i}" for i in range(len(shape))]
    syms = [Sym.var(n) for n in names]
    point = layout.apply(*syms, shape=shape)
    scalar = layout.apply(Sym.var("f"))
    everything = layout.apply_all(*syms, shape=shape)
    for x in itertools.product(*(range(d) for d in shape)):
        env = dict(zip(names, x))
        want = layout.apply(*x, shape=shape)
        assert evaluate(point, env) == want
        assert [evaluate(p, env) for p in everything] == layout.apply_all(*x, shape=shape)
    for f in range(layout.size()):
        assert evaluate(scalar, {"f": f}) == layout.apply(f)
    text = " ".join(v.text for v in point.values() if isinstance(v, Sym))
    for untidy in ("* 1)", "+ 0)", "// 1)", "% 1)"):
        assert untidy not in text


def test_int_results_are_ints():
    layout = TileLayout(S[(2, 4) : (3, 1 @ laneid)] + R[2:5] + 1)
    for p in layout.apply_all(1, 3, shape=(2, 4)):
        assert all(type(v) is int for v in p.values())


@pytest.mark.parametrize("n", [2, 4])
def test_pack_view_semantics(n):
    layout = TileLayout(S[(4, 2, 8) : (16, 1 @ warpid, 1)] + 8)
    packed = layout.pack(n)
    for i, j, t in itertools.product(range(8), range(8 // n), range(n)):
        wide = packed.apply(i, j, shape=(8, 8 // n))
        assert layout.apply(i, j * n + t, shape=(8, 8)) == {**wide, "m": wide["m"] * n + t}
    assert TileLayout(S[4:1] + R[2 : 1 @ warpid]).pack(2).replica == R[2 : 1 @ warpid].replica


# ---------------------------------------------------------------------- bad input never leaks

JUNK = st.recursive(
    st.one_of(
        st.integers(-3, 70),
        st.sampled_from([1.5, "m", "lane", None, True, object(), laneid, 2 @ laneid, S[4]]),
    ),
    lambda inner: st.one_of(st.tuples(inner, inner), st.lists(inner, max_size=3)),
    max_leaves=6,
)


def only_layout_errors(make):
    try:
        make()
    except LayoutError:
        pass


@settings(max_examples=150, deadline=None)
@given(JUNK, JUNK, JUNK, layouts())
def test_junk_raises_only_layout_error(a, b, c, layout):
    only_layout_errors(lambda: S[a])
    only_layout_errors(lambda: R[a:b])
    only_layout_errors(lambda: S[a:b] + c)
    only_layout_errors(lambda: TileLayout(a))
    only_layout_errors(lambda: TileLayout.from_iters(a, b, c))
    only_layout_errors(lambda: Iter(a, b, c))
    only_layout_errors(lambda: L.Axis.get(a))
    only_layout_errors(lambda: a @ laneid)
    only_layout_errors(lambda: layout.apply(a, b, shape=c))
    only_layout_errors(lambda: layout.apply(a))
    only_layout_errors(lambda: layout.apply_all(a, shape=b))
    only_layout_errors(lambda: layout.group(a))
    only_layout_errors(lambda: transpose(layout, a, b))
    only_layout_errors(lambda: layout.permute_dims(a))
    only_layout_errors(lambda: layout.permute_by_groups(a, b))
    only_layout_errors(lambda: layout.pack(a))
    only_layout_errors(lambda: layout.unpack(a))
    only_layout_errors(lambda: layout.size(a))
    only_layout_errors(lambda: layout.span(a))
    only_layout_errors(lambda: ComposeLayout(a, b, c, layout))
    only_layout_errors(lambda: ComposeLayout(3, 3, 3, layout.storage()).pack(a))
