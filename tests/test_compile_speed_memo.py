"""The memos that make a cold compile cheaper never give a stale answer: the structural keys'
memo (tirx/ir/simplify.py) answers only for the very node it stored, the index simplifier's
shortcut for split pairs changes no result, and an operand's cached owner table is the
contract's own and cannot be changed through what callers are handed."""

from __future__ import annotations

import itertools

import pytest

from tirx.ir import nodes as ir
from tirx.ir.printer import print_expr
from tirx.ir.simplify import linear_form, structural_key
from tirx.ir.simplify_index import simplify_index
from tirx.isa import lookup

from .helpers import evaluate

LANE = ir.Special(ir.Builtin.LANE_ID)
I = ir.Var("i")
J = ir.Var("j")


def _exprs():
    """Expressions sharing subtrees, with loads, casts and constants of two dtypes."""
    buf = ir.Buffer("s", ir.I32, ir.Scope.SHARED, (64,), None, 64)
    shared = (I // 8) * 8 + I % 8
    return [
        shared,
        shared * 4 + LANE % 4,
        (shared + J) // 16,
        ir.Load(buf, shared, ir.I32) + ir.Load(buf, 3, ir.I32),
        ir.cast(shared, ir.U64) * 2,
        (LANE // 4) * 16 + (LANE % 4) * 2 + 1,
        ir.Const(7, ir.I32),
    ]


def test_memoized_keys_are_the_keys():
    memo: dict = {}
    for e in _exprs():
        assert structural_key(e, memo) == structural_key(e)
        assert structural_key(e, memo) == structural_key(e)  # now from the memo
    # every entry holds the node it is the key of, so its id is not reused while it lives
    assert memo and all(id(node) == k for k, (node, _) in memo.items())


def test_memo_entry_of_another_node_is_not_used():
    """An entry whose node is not the one asked about (as if its id had been reused) is
    ignored: the key is computed from the node itself."""
    a, b = I * 4 + J, I * 4 + LANE
    memo = {id(b): (a, structural_key(a)), id(b.a): (a.a, ("bogus",))}
    assert structural_key(b, memo) == structural_key(b)
    assert structural_key(b, memo) != structural_key(a)


def test_keys_tell_variables_apart():
    """Two variables of one name are two values; equal trees of one variable, one value."""
    other_i = ir.Var("i")
    memo: dict = {}
    assert structural_key(I % 8 + 1, memo) == structural_key(I % 8 + 1, memo)
    assert structural_key(I % 8 + 1, memo) != structural_key(other_i % 8 + 1, memo)


def test_linear_form_collects_shared_atoms():
    terms, const = linear_form((I % 8) * 8 + 8 - (I % 8) * 8 + (J // 2) * 3 + (J // 2))
    assert const == 8
    assert [(print_expr(atom), coef) for atom, coef in terms.values()] == [("j // 2", 4)]


# (i % d) * k pairs with (i // d) * k * d, or with ((i // d) % e) * k * d: each case near such a
# pair, with the pair or without it (what the simplifier gave before its pair test was cheap)
PAIRS = [
    ((I % 8) * 4 + (I // 8) * 32, "i * 4"),
    ((I % 8) * 4 + (I // 8) * 16, "i % 8 * 4 + i // 8 * 16"),  # a coefficient off: no pair
    ((I % 8) * 4 + (J // 8) * 32, "i % 8 * 4 + j // 8 * 32"),  # another variable's quotient
    ((I % 4) * 2 + ((I // 4) % 2) * 8, "i % 8 * 2"),
    ((I % 4) * 2 + ((I // 4) % 2) * 8 + (I // 8) * 16, "i * 2"),
    ((I % 4) + ((I // 4) % 8) * 4, "i % 32"),
    ((LANE % 8) * 16 + (LANE // 8) * 128 + (I % 2) * 3, "i % 2 * 3 + T.cuda.lane_id() * 16"),
]


@pytest.mark.parametrize("e, want", PAIRS, ids=[print_expr(c[0]) for c in PAIRS])
def test_split_pairs(e, want):
    got = simplify_index(e)
    assert print_expr(got) == want
    for lane, i, j in itertools.product(range(0, 32, 5), range(-40, 40, 7), range(-9, 9, 4)):
        env = {"lane": lane, "i": i, "j": j}
        assert evaluate(got, env) == evaluate(e, env)


def test_owner_table_is_computed_once_and_handed_out_as_a_copy():
    contract = lookup("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    spec = next(s for s in contract.operands if s.owner is not None)
    coords = itertools.product(*(range(e) for e in spec.atom))
    assert spec.owner_items == tuple((c, spec.owner(c)) for c in coords)
    assert spec.owner_items is spec.owner_items
    table = spec.owner_table()
    table.clear()
    assert spec.owner_table() == dict(spec.owner_items) and spec.owner_table()


def _swizzled(x, shift: int = 4, mask: int = 7):
    """``x ^ ((x >> shift) & mask)`` with one object ``x`` read twice, as layouts build it."""
    g = ir.binop(ir.Op.BITAND, ir.binop(ir.Op.SHR, x, shift), mask)
    return ir.binop(ir.Op.BITXOR, x, g)


def _corpus():
    """Expressions of every shape the keys and ranges below are checked on: the shared-subtree
    ones, swizzles, casts, floats and a sum deeper than either recursion goes."""
    x = I * 64 + (LANE // 8) * 8 + LANE % 8
    deep = LANE % 8
    for k in range(80):
        deep = deep + (I % (k + 2))
    return [*_exprs(), _swizzled(x), _swizzled(x) * 4 + J, ir.cast(I, ir.F32) * 2.0, deep]


def test_keys_by_recursion_are_the_stack_keys(monkeypatch):
    from tirx.ir import simplify
    from tirx.ir.visitor import walk

    nodes = [n for e in _corpus() for n in walk(e) if isinstance(n, ir.Expr)]
    fast = [structural_key(n) for n in nodes]  # the deep sum's top falls back to the stack
    monkeypatch.setattr(simplify, "_RECURSE", 0)  # every key over the explicit stack
    assert [structural_key(n) for n in nodes] == fast
    monkeypatch.setattr(simplify, "_RECURSE", 2)  # recursion handing over at every depth
    memo: dict = {}
    assert [structural_key(n, memo) for n in nodes] == fast


def test_ranges_by_recursion_are_the_visitors(monkeypatch):
    from tirx.ir import simplify_index as si
    from tirx.ir.visitor import walk

    ranges = {I: (0, 9), J: (-3, 3)}
    nodes = [n for e in _corpus() for n in walk(e) if isinstance(n, ir.Expr)]
    visitor = si._Range(ranges)
    want = [visitor.visit(n) for n in nodes]
    assert any(w is not None for w in want) and None in want
    for depth in (si._DEPTH, 2):  # 2: the deep ones handed to the visitor
        monkeypatch.setattr(si, "_DEPTH", depth)
        simplifier = si._Simplifier(ranges)  # one memo of bounds over all of them
        assert [simplifier.range(n) for n in nodes] == want


def test_a_swizzles_operand_is_simplified_once(monkeypatch):
    from tirx.ir import simplify_index as si

    x = I * 64 + (LANE // 8) * 8 + LANE % 8
    seen = []
    original = si._Simplifier._run
    monkeypatch.setattr(si._Simplifier, "_run", lambda self, e: seen.append(e) or original(self, e))
    got = simplify_index(_swizzled(x), {I: (0, 3)})
    assert sum(e is x for e in seen) == 1
    twin = I * 64 + (LANE // 8) * 8 + LANE % 8  # the same value built twice: same result
    g = ir.binop(ir.Op.BITAND, ir.binop(ir.Op.SHR, twin, 4), 7)
    assert print_expr(simplify_index(ir.binop(ir.Op.BITXOR, x, g), {I: (0, 3)})) == print_expr(got)
    for lane, i in itertools.product(range(32), range(4)):
        env = {"lane": lane, "i": i}
        assert evaluate(got, env) == evaluate(_swizzled(x), env)


def test_dtypes_equal_by_fields_whatever_the_object():
    import copy
    import pickle

    for d in (ir.I32, ir.U32, ir.F32, ir.BOOL):
        for twin in (copy.deepcopy(d), pickle.loads(pickle.dumps(d))):
            assert twin == d and hash(twin) == hash(d) and not (twin != d)
            # an expression over the twin builds what one over the table's row builds
            built = ir.binop(ir.Op.ADD, ir.Var("a", twin), ir.Var("b", d))
            assert built.dtype == ir.binop(ir.Op.ADD, ir.Var("a", d), ir.Var("b", d)).dtype
    assert ir.I32 != ir.U32 and ir.I32 != "int32"
    renamed = type(ir.I32)("int32", 32, ir.I32.kind, "int", "int32", "int32")
    assert renamed == ir.I32
    assert type(ir.I32)("int32", 64, ir.I32.kind, "int", "int32", "int32") != ir.I32


def test_ir_enums_hash_as_themselves():
    import pickle

    for member in (ir.Op.ADD, ir.CmpOp.LT, ir.Builtin.LANE_ID, ir.Scope.SHARED):
        back = pickle.loads(pickle.dumps(member))
        assert back is member and hash(back) == hash(member)
        assert {member: 1}[back] == 1
