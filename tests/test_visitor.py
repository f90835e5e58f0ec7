"""The IR visitor: children and rebuild derived from every node class's fields, a node class
added to nodes.py handled with no new visitor code, and an unknown node raising (naming the
class and the pass) in each pass instead of passing through."""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing

import pytest

import tirx
from tirx import catalog
from tirx.dtypes import DType, DTypeKind, dtype_of
from tirx.errors import Span, TirxSyntaxError
from tirx.executable import CacheState
from tirx.frozen import Frozen
from tirx.ir import nodes as ir
from tirx.ir import serial, simplify, visitor
from tirx.ir.nodes import Expr, Stmt
from tirx.ir.printer import print_expr, print_function
from tirx.ir.visitor import UnknownNodeError
from tirx.target import Target, TargetKind

I32 = ir.I32


def _core_node_classes():
    """Read from nodes.py itself (its classes and those of the tirx.ir modules it imports: the
    expression nodes and the launch shape), not from the visitor's registry."""
    family = ("tirx.ir.expr_nodes", "tirx.ir.launch")
    return [
        v
        for v in vars(ir).values()
        if isinstance(v, type)
        and dataclasses.is_dataclass(v)
        and v.__module__ in (ir.__name__, *family)
    ]


def _family_node_classes():
    """The node classes the families' own nodes.py define, read from those modules: every
    dataclass there (each must be named by its catalog row)."""
    out = []
    for row in catalog.ROWS:
        if "nodes" in row.stages:
            module = catalog.stage(row, "nodes")
            out.extend(
                v
                for v in vars(module).values()
                if isinstance(v, type)
                and dataclasses.is_dataclass(v)
                and v.__module__ == module.__name__
            )
    return out


def _all_node_classes():
    return _core_node_classes() + _family_node_classes()


class _Samples:
    """A fresh value for any annotation of a node field (a new object each time)."""

    def __init__(self):
        self.count = 0

    def buffer(self):
        self.count += 1
        return ir.Buffer(f"b{self.count}", I32, ir.Scope.LOCAL, (4,), None, 4)

    def of(self, t):
        if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
            members = [a for a in typing.get_args(t) if a is not type(None)]
            return self.of(members[0])
        if typing.get_origin(t) is tuple:
            args = typing.get_args(t)
            if len(args) == 2 and args[1] is Ellipsis:
                return (self.of(args[0]), self.of(args[0]))
            return tuple(self.of(a) for a in args)
        if t is ir.Expr:
            self.count += 1
            return ir.Var(f"v{self.count}")
        if t is ir.Stmt:
            return ir.Break()
        if t is ir.Buffer:
            return self.buffer()
        if isinstance(t, type) and issubclass(t, enum.Enum):
            return next(iter(t))
        if t is DType:
            return I32
        if t is Span:
            return Span("k.py", 1)
        if t in (int, float, bool, str):
            return t(1) if t is not str else "s"
        if t is dict:
            return {}
        if t is object:
            return None
        if isinstance(t, type) and dataclasses.is_dataclass(t):
            return self.node(t)
        raise AssertionError(f"no sample for {t!r}")

    def node(self, cls):
        hints = typing.get_type_hints(cls, {**vars(ir), **vars(sys.modules[cls.__module__])})
        return cls(**{f.name: self.of(hints[f.name]) for f in dataclasses.fields(cls)})


def _is_node(v) -> bool:
    return type(v) in _all_node_classes()


def test_the_registry_is_every_dataclass_of_nodes_py():
    assert list(visitor.node_classes()) == _core_node_classes()
    assert len(_core_node_classes()) >= 30


def test_a_familys_node_classes_are_those_its_nodes_module_defines_and_its_row_names():
    """Every dataclass of a family's nodes.py is a node class, named by the family's catalog
    row and found by name (catalog.node_class); a dataclass of such a module that the row does
    not name is not one, nor is a class of the same name defined elsewhere."""
    family = _family_node_classes()
    assert {c.__name__ for c in family} >= {"Atomic", "HalfConversion", "NanoSleep", "MathCall"}
    for cls in family:
        assert visitor.is_node_class(cls), cls
        row = catalog.row_of_node(cls.__name__)
        assert row is not None and cls.__module__ == catalog.module_name(row, "nodes")
        assert catalog.node_class(cls.__name__) is cls
        assert cls not in visitor.node_classes()
    module = catalog.stage("thread_ops", "nodes")
    stray = dataclasses.make_dataclass("Stray", [("x", int)], bases=(ir.Stmt,), frozen=True)
    stray.__module__ = module.__name__
    assert not visitor.is_node_class(stray)
    imposter = dataclasses.make_dataclass("NanoSleep", [("x", int)], bases=(ir.Stmt,))
    assert not visitor.is_node_class(imposter)
    with pytest.raises(UnknownNodeError, match="NanoSleep"):
        visitor.child_fields(imposter)
    assert catalog.node_class("Seq") is None and catalog.node_class("ElemSharedAddress") is None
    # a class another family's nodes.py defines under a name a row names is not that row's
    crossed = dataclasses.make_dataclass("ThreadFence", [("x", int)], bases=(ir.Stmt,))
    crossed.__module__ = module.__name__  # thread_ops' nodes.py; ThreadFence is cta_ops'
    assert not visitor.is_node_class(crossed)
    with pytest.raises(UnknownNodeError, match="not an IR node class.*'thread_ops' row"):
        visitor.child_fields(crossed)


def test_a_familys_own_node_names_are_no_core_class_names():
    """A row's ``nodes`` may name a core class whose stage rules the family holds
    (``ElemSharedAddress``), but a class of a family's nodes.py must not share a core class's
    name: rules are found by class name, so the core's rule would get the family's node."""
    for name in catalog.node_names():
        own = catalog.node_class(name)
        assert own is None or not hasattr(ir, name), name


def test_a_missing_rule_of_a_familys_class_names_where_it_goes():
    from tirx.families.thread_ops.nodes import NanoSleep

    class Plain(visitor.Walker):  # a walker whose stage module (lower.py) has no visit_
        pass_name = "a test pass"
        stage = "lower"

    with pytest.raises(UnknownNodeError, match=r"a test pass has no rule for the IR node "
                       r"NanoSleep.*tirx/families/thread_ops/lower\.py"):  # fmt: skip
        Plain().run(NanoSleep(ir.const(1, ir.U32)))


@pytest.mark.parametrize("cls", _all_node_classes(), ids=lambda c: c.__name__)
def test_children_and_rebuild_come_from_the_fields(cls):
    samples = _Samples()
    node = samples.node(cls)
    fields = visitor.child_fields(cls)
    # every field holding a node (or a tuple of nodes) is a child field, and no other
    for f in dataclasses.fields(cls):
        v = getattr(node, f.name)
        holds = _is_node(v) or (isinstance(v, tuple) and v and all(map(_is_node, v)))
        assert (f.name in fields) == holds, f.name
    kids = visitor.children(node)
    expected = []
    for name in fields:
        v = getattr(node, name)
        expected.extend(v if isinstance(v, tuple) else [v])
    assert [id(k) for k in kids] == [id(k) for k in expected]
    # rebuilding with the same children is the node itself; with new ones, a new node
    same = [getattr(node, name) for name in fields]
    assert visitor.rebuild(node, same) is node
    if fields:

        def new(x):
            return samples.of(type(x)) if not isinstance(x, ir.Expr) else ir.Var("n")

        fresh = []
        for name in fields:
            v = getattr(node, name)
            fresh.append(tuple(new(x) for x in v) if isinstance(v, tuple) else new(v))
        other = visitor.rebuild(node, fresh)
        assert other is not node and type(other) is cls
        for name, value in zip(fields, fresh):
            assert getattr(other, name) == value or getattr(other, name) is value
        data = [f.name for f in dataclasses.fields(cls) if f.name not in fields]
        assert all(getattr(other, n) == getattr(node, n) for n in data)
    assert list(visitor.walk(node))[0] is node


# --------------------------------------------------------------- a class nodes.py gains


@dataclasses.dataclass(frozen=True, eq=False)
class Fma(ir.Expr):
    """A node the passes have never heard of: ``a * b + c`` over a tuple of extras."""

    # (annotations name what nodes.py itself imports, as a class written there would)
    a: Expr
    b: Expr
    c: Expr | int
    extras: tuple[Expr, ...] = ()
    dtype: DType = I32


@dataclasses.dataclass(frozen=True, eq=False)
class Fence(ir.Stmt):
    body: Stmt
    span: Span | None = None


@pytest.fixture
def new_nodes(monkeypatch):
    """Fma and Fence added to nodes.py, as another change would add them."""
    for cls in (Fma, Fence):
        cls.__module__ = ir.__name__
        monkeypatch.setattr(ir, cls.__name__, cls, raising=False)
    visitor.node_classes.cache_clear()
    yield
    monkeypatch.undo()
    for cls in (Fma, Fence):
        cls.__module__ = __name__
    visitor.node_classes.cache_clear()
    visitor._spec.cache_clear()
    visitor._RULES.clear()


@pytest.mark.parametrize("cls", _all_node_classes(), ids=lambda c: c.__name__)
def test_every_node_class_has_the_dataclass_repr(cls):
    """Node classes share one ``__repr__`` (tirx.frozen.Frozen) instead of a generated one each; it
    writes what dataclass would, and no class falls back to object's."""
    assert cls.__repr__ is not object.__repr__
    if not cls.__dataclass_params__.repr:
        assert issubclass(cls, Frozen)


def test_the_shared_repr_writes_what_dataclass_would():
    assert repr(ir.Var("a", I32)) == f"Var(name='a', dtype={I32!r})"
    assert repr(ir.Seq((ir.Break(),))) == "Seq(stmts=(Break(span=None),), span=None)"
    hidden = dataclasses.make_dataclass(
        "Hidden", [("shown", int), ("secret", int, dataclasses.field(repr=False))],
        bases=(Frozen,), frozen=True, eq=False, repr=False,
    )  # fmt: skip
    assert repr(hidden(1, 2)) == "Hidden(shown=1)"


def test_field_kinds_read_from_the_text_agree_with_the_evaluated_annotations():
    """The visitor reads most field annotations without eval (names, unions, tuple[...] of
    them); what it reads must be what the evaluated annotation says, and the rest is left to
    eval (None)."""
    fast = 0
    for cls in _all_node_classes():
        module = ir.__name__ if cls in visitor.node_classes() else cls.__module__
        for f in dataclasses.fields(cls):
            t = visitor._annotation(f.type, module)
            if typing.get_origin(t) is tuple:
                args = [a for a in typing.get_args(t) if a is not Ellipsis]
                evaluated = (any(visitor._holds_node(a) for a in args), True)
            else:
                evaluated = (visitor._holds_node(t), False)
            read = visitor._text_kind(f.type, module)
            assert read in (None, evaluated), (cls.__name__, f.name, f.type)
            fast += read is not None
    assert fast > 150
    for text in ("tuple[tuple[Expr, Expr], ...]", "tuple[Expr, ...] | None", "list[Expr]", "Nope"):
        assert visitor._text_kind(text) is None, text


def test_a_node_cannot_be_changed_and_copies_as_a_dataclass():
    import copy
    import pickle

    x = ir.Var("x", I32)
    with pytest.raises(dataclasses.FrozenInstanceError):
        x.name = "y"
    with pytest.raises(dataclasses.FrozenInstanceError):
        del x.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        x.other = 1  # not even a new attribute
    with pytest.raises(TypeError):
        ir.Var()  # a missing argument is refused as dataclass refuses it
    y = dataclasses.replace(x, name="y")
    assert (y.name, y.dtype, x.name) == ("y", I32, "x")
    for twin in (copy.copy(x), copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
        assert (twin.name, twin.dtype) == ("x", I32) and twin is not x


def test_a_new_node_class_needs_no_visitor_code(new_nodes):
    x, y = ir.Var("x"), ir.Var("y")
    e = Fma(x, y, 3, (x,))
    assert visitor.child_fields(Fma) == ("a", "b", "c", "extras")
    assert visitor.children(e) == (x, y, x)
    z = ir.Var("z")
    e2 = visitor.rebuild(e, (z, y, 3, (z,)))
    assert (e2.a, e2.b, e2.c, e2.extras) == (z, y, 3, (z,))
    assert visitor.child_fields(Fence) == ("body",)
    assert [type(n) for n in visitor.walk(Fence(ir.Assign(x, e)))] == [
        Fence,
        ir.Assign,
        ir.Var,
        Fma,
        ir.Var,
        ir.Var,
        ir.Var,
    ]


def _fn(body, lowered=True):
    return ir.Function("k", (), body, ir.LaunchConfig((1, 1, 1), (32, 1, 1)), lowered=lowered)


def _raises(pass_name, node_type, call):
    with pytest.raises(UnknownNodeError) as info:
        call()
    assert info.value.node_type is node_type
    assert pass_name in str(info.value) and node_type.__name__ in str(info.value)
    assert "internal error" in str(info.value)


def test_an_unknown_expression_raises_in_every_pass(new_nodes):
    from tirx.backend.cuda.codegen import generate
    from tirx.transform.lower import lower_function

    x = ir.Var("x")
    e = Fma(x, x, 1)
    body = ir.Seq((ir.Assign(x, e),))
    _raises("lowering", Fma, lambda: lower_function(_fn(body, lowered=False)))
    _raises("non-negativity", Fma, lambda: generate(_fn(body)))
    store = ir.Store(_Samples().buffer(), 0, e, I32)
    _raises("codegen", Fma, lambda: generate(_fn(store)))
    _raises("printer", Fma, lambda: print_expr(e))
    _raises("printer", Fma, lambda: print_function(_fn(body)))
    _raises("linear-form", Fma, lambda: simplify.static_value(e + 1))
    _raises("non-negativity", Fma, lambda: simplify.is_nonnegative(e // 2))
    # the serializer writes only tirx's own classes; an Expr it does not know is named
    Fma.__module__ = __name__
    _raises("serializer", Fma, lambda: serial.dumps(_fn(body)))


def test_an_unknown_statement_raises_in_every_pass(new_nodes):
    from tirx.backend.cuda.codegen import generate
    from tirx.transform.lower import lower_function

    x = ir.Var("x")
    # a statement codegen's non-negativity analysis cannot see into used to leave x "never
    # negative", and x // 4 was then written as C's truncating "/"
    body = ir.Seq((ir.Assign(x, ir.const(1)), Fence(ir.Assign(x, ir.const(-7)))))
    store = ir.Store(_Samples().buffer(), 0, x // 4, I32)
    fn = _fn(ir.Seq((body, store)))
    _raises("variable-write analysis", Fence, lambda: generate(fn))
    _raises("lowering", Fence, lambda: lower_function(_fn(body, lowered=False)))
    _raises("printer", Fence, lambda: print_function(fn))


def test_the_index_pass_raises_on_an_unknown_statement(new_nodes):
    from tirx.transform.inline_indices import inline_indices

    x = ir.Var("x")
    body = ir.Seq((ir.Assign(x, ir.const(1)), Fence(ir.Assign(x, ir.const(2)))))
    _raises("index pass", Fence, lambda: inline_indices(_fn(body), body))
    known = ir.Seq((ir.Assign(x, ir.const(1)), ir.Barrier(ir.BarrierScope.CTA)))
    assert inline_indices(_fn(known), known) is known  # nothing to rewrite: itself


def test_an_object_that_is_no_node_raises():
    x = ir.Var("x")
    bad = ir.BinOp(ir.Op.ADD, x, "oops", I32)  # a str where an expression belongs
    _raises("printer", str, lambda: print_expr(bad))
    with pytest.raises(UnknownNodeError):
        list(visitor.walk(ir.Seq(("not a statement",))))


def test_writes_inside_any_statement_reach_the_floor_division_check():
    from tirx.backend.cuda.codegen import generate

    x, i = ir.Var("x"), ir.Var("i")
    buf = _Samples().buffer()
    store = ir.Store(buf, 0, x // 4, I32)
    hidden = ir.While(ir.cmp(ir.CmpOp.LT, x, 3), ir.If(ir.const(True), ir.Assign(x, i - 9)))
    loop = ir.For(i, ir.const(0), ir.const(4), 1, hidden)
    fn = dataclasses.replace(
        _fn(ir.Seq((ir.Assign(x, ir.const(1)), loop, store))), variables=(x, i)
    )
    assert "tirx_floordiv<int>(x, 4)" in generate(fn)
    safe = dataclasses.replace(fn, body=ir.Seq((ir.Assign(x, ir.const(1)), store)))
    assert "(x / 4)" in generate(safe)


# ------------------------------------------------------------------------------ passes


def test_lowering_keeps_shared_subexpressions_shared():
    from tirx.transform.lower import lower_function

    x = ir.Var("x")
    shared = ir.Special(ir.Builtin.LANE_ID) * 3 + x
    buf = _Samples().buffer()
    body = ir.Seq((ir.Store(buf, 0, shared, I32), ir.Assign(x, shared * 2)))
    lowered = lower_function(_fn(body, lowered=False))
    (store, assign) = lowered.body.stmts
    assert store is body.stmts[0]  # lowered already: kept
    assert assign.value.a is shared  # nothing in it to lower: the same object


def test_lowering_errors_point_at_the_innermost_statement(tmp_path):
    src = (
        "from tirx import T\n\n\n"
        "@T.function\n"
        "def k(out: T.Tensor((4,), 'int32')):\n"
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))\n"
        "    for i in range(2):\n"
        "        if T.cuda.lane_id() == 0:\n"
        "            out[i] = out[7] + 1\n"
    )
    path = tmp_path / "bad_index.py"
    path.write_text(src)
    scope: dict = {}
    exec(compile(src, str(path), "exec"), scope)
    with pytest.raises(tirx.TirxError) as info:
        tirx.compile(scope["k"], target="sim")
    assert info.value.span.line == 9 and "out of range" in info.value.message


def test_serial_round_trip_keeps_sharing():
    x = ir.Var("x")
    shared = x * 3
    fn = _fn(ir.Seq((ir.Assign(x, shared + shared),)))
    back = serial.loads(serial.dumps(fn))
    value = back.body.stmts[0].value
    assert value.a is value.b and value.a.a is back.body.stmts[0].var


# ------------------------------------------------------------------------------- kinds


def test_kinds_are_enums_that_read_as_their_strings():
    b = ir.Barrier("cta")
    assert b.scope is ir.BarrierScope.CTA and b.scope == "cta" and f"{b.scope}" == "cta"
    assert ir.TileOp("x", (), "warp").scope is ir.ExecScope.WARP
    assert dtype_of("uint8").kind is DTypeKind.UINT and dtype_of("float16").kind == "float"
    assert str(DTypeKind.INT) == "int"
    t = Target.parse("sim")
    assert t.kind is TargetKind.SIM and t == Target("sim") and str(t) == "sim"
    assert Target.parse("cuda -arch=sm_90").kind is TargetKind.CUDA
    with pytest.raises(ValueError):
        ir.Barrier("grid")


def test_exe_cache_is_an_enum(tmp_path):
    from tirx.examples.warp_matmul import warp_matmul

    tirx.clear_cache()
    first = tirx.compile(warp_matmul, target="sim")
    again = tirx.compile(warp_matmul, target="sim")
    assert first.cache is CacheState.MISS and again.cache is CacheState.HIT
    assert again.cache == "hit" and f"cache {again.cache}" == "cache hit"


def test_an_unknown_tile_scope_is_a_user_error(tmp_path):
    src = (
        "from tirx import T\n\n\n"
        "@T.function\n"
        "def k(a: T.Tensor((16, 16), 'float16')):\n"
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))\n"
        "    s = T.alloc_shared((16, 16), 'float16')\n"
        "    r = T.alloc_local((8,), 'float16')\n"
        "    T.cuda.tile.apply(T.ptx['ldmatrix.sync.aligned.m8n8.x4.shared.b16'], r, s,"
        " scope='wrap')\n"
    )
    path = tmp_path / "bad_scope.py"
    path.write_text(src)
    with pytest.raises(TirxSyntaxError) as info:
        exec(compile(src, str(path), "exec"), {})
    err = info.value
    assert "unknown scope 'wrap'" in err.message and "'warp'" in err.hint
    assert err.span.line == 9
