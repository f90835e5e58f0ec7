"""tirx.frozen: classes that behave as ``@dataclass(frozen=True)`` ones, made for less."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import sys

import pytest

import tirx  # noqa: F401 - every module that makes frozen classes at import
from tirx.frozen import Frozen, frozen


def _tirx_frozen_classes():
    from tirx import catalog

    for row in catalog.ROWS:  # the families' node classes load with their first use
        if "nodes" in row.stages:
            catalog.stage(row, "nodes")
    return sorted(
        {
            v
            for name, m in list(sys.modules.items())
            if name.startswith("tirx")
            for v in vars(m).values()
            if isinstance(v, type) and issubclass(v, Frozen) and dataclasses.is_dataclass(v)
        },
        key=lambda c: (c.__module__, c.__qualname__),
    )


@frozen
class Point(Frozen):
    x: int
    y: int = 0
    tag: str = dataclasses.field(default="", compare=False)
    seen: list = dataclasses.field(default_factory=list, repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class RefPoint:
    """The same fields made by dataclass itself."""

    x: int
    y: int = 0
    tag: str = dataclasses.field(default="", compare=False)
    seen: list = dataclasses.field(default_factory=list, repr=False, compare=False)


def test_a_frozen_class_is_what_dataclass_would_make():
    p, r = Point(1, 2, "a"), RefPoint(1, 2, "a")
    assert repr(p) == repr(r).replace("RefPoint", "Point")
    assert p == Point(1, 2, "b") and p != Point(1, 3) and p != (1, 2)  # tag is not compared
    assert hash(p) == hash(Point(1, 2, "b")) == hash((1, 2))
    assert [p.name for p in inspect.signature(Point).parameters.values()] == [
        p.name for p in inspect.signature(RefPoint).parameters.values()
    ]
    assert Point(1).seen == [] and Point(1).seen is not Point(1).seen  # a fresh default
    assert dataclasses.is_dataclass(Point) and Point.__dataclass_params__.frozen
    assert [f.name for f in dataclasses.fields(Point)] == ["x", "y", "tag", "seen"]
    with pytest.raises(TypeError):
        Point()


def test_a_frozen_instance_cannot_change_and_copies_as_a_dataclass():
    p = Point(1, 2)
    for change in (lambda: setattr(p, "x", 5), lambda: delattr(p, "x"), lambda: setattr(p, "z", 1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            change()
    assert dataclasses.replace(p, y=7) == Point(1, 7) and p.y == 2
    for twin in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert twin == p and twin is not p


def test_a_class_keeps_its_own_methods_and_runs_post_init():
    made = []

    @frozen
    class Named(Frozen):
        name: str

        def __post_init__(self):
            object.__setattr__(self, "name", self.name.upper())  # as in a frozen dataclass
            made.append(self.name)

        def __repr__(self):
            return f"<{self.name}>"

        def __hash__(self):
            return 7

    assert (repr(Named("a")), hash(Named("b")), made) == ("<A>", 7, ["A", "B"])
    assert Named("a") == Named("A")


def test_identity_classes_compare_by_identity():
    @frozen(eq=False)
    class Node(Frozen):
        value: int

    a = Node(1)
    assert a != Node(1) and a == a and hash(a) == object.__hash__(a)


def test_subclasses_follow_the_frozen_dataclass_rules():
    @dataclasses.dataclass(frozen=True)
    class Labelled(Point):
        label: str = "l"

    q = Labelled(1, 2, "t", [], "m")
    assert (q.x, q.label) == (1, "m") and q == Labelled(1, 2, label="m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.label = "n"
    with pytest.raises(TypeError, match="non-frozen"):

        @dataclasses.dataclass
        class Loose(Point):
            pass

    @frozen
    class Scaled(Point):
        scale: int = 1

    assert Scaled(1, 2, scale=3) == Scaled(1, 2, "x", [], 3) and Scaled(1).scale == 1


def test_what_frozen_does_not_make_is_refused():
    with pytest.raises(TypeError, match="must derive from"):

        @frozen
        class Plain:
            x: int

    with pytest.raises(TypeError, match="kw_only"):

        @frozen
        class Late(Frozen):
            x: int = dataclasses.field(default=0, kw_only=True)


@pytest.mark.parametrize(
    "cls",
    [c for c in _tirx_frozen_classes() if c.__init__.__code__.co_filename == "<string>"],
    ids=lambda c: c.__qualname__,
)  # (TileLayout has its own __init__)
def test_every_tirx_frozen_class_takes_its_fields_as_dataclass_would(cls):
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in dataclasses.fields(cls)]
    for p, f in zip(params, dataclasses.fields(cls)):
        if f.default is not dataclasses.MISSING:
            assert p.default is f.default
        elif f.default_factory is dataclasses.MISSING:
            assert p.default is inspect.Parameter.empty
    assert cls.__dataclass_params__.frozen
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
