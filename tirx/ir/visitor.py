"""One way to walk the IR: children and rebuilding derived from the node dataclasses' fields.

Every pass over the IR (lowering, codegen and its analyses, the printer, the simplifier's
analyses, the serializer) is built on this module instead of on hand-written recursion.

* The node classes are the dataclasses defined in :mod:`tirx.ir.nodes` and those of the
  families' ``nodes`` modules that the catalog names (``tirx/families/<folder>/nodes.py``,
  ``Row.nodes``); a class added to either needs no code here. Their *child fields* are the fields whose annotation can hold a node (an
  ``Expr``, a ``Stmt``, a ``View``, a ``Buffer``, a register or PTX operand, ``None`` or a
  tuple of them); :func:`children` and :func:`rebuild` read and replace exactly those.
* :class:`Visitor` folds a tree bottom-up over an explicit work stack: the result for a node of
  class ``C`` is ``leave_C(node, *results of its child fields)`` (a tuple field gives a tuple);
  ``enter_C(node)`` may answer first and skip the children. :class:`Transformer` is a Visitor
  whose results are nodes: the classes named in ``rebuilt`` are rebuilt from their transformed
  children, those named in ``kept`` are returned unchanged, and a node none of whose children
  changed is returned itself (identity is meaning: a ``Buffer`` or ``Var`` is one object).
* :class:`Walker` runs statements top-down for passes that write text in order (codegen,
  printer): ``visit_C(node)`` does its part and returns the work that follows (nodes and
  callables), which the walker runs from its own stack.

No pass recurses in Python, so expressions as deep as CPython compiles (a sum of thousands of
terms) and long ``elif`` chains need no recursion limit. A node class a pass has no rule for
raises :class:`UnknownNodeError`, naming the class and the pass: nothing passes through
unseen. Rules are found by class *name* (``leave_GlobalAddress``), so a pass can carry the rule
for a class another change is adding. The rules for a family's node classes (the catalog's
``Row.nodes``: ``MathCall``, ``WarpCollective``, the atomics) live in that family's module for
the pass's ``stage`` (``tirx/families/<family>/cuda.py`` for codegen), found through
:mod:`tirx.catalog` and imported when the pass first meets such a node, so a family's code
loads only for the kernels that use it.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import sys
import types

from .. import catalog
from . import nodes as ir

__all__ = [
    "UnknownNodeError",
    "node_classes",
    "is_node_class",
    "is_family_node",
    "leaf_statement",
    "child_fields",
    "children",
    "rebuild",
    "walk",
    "Visitor",
    "Transformer",
    "Walker",
    "DESCEND",
]

_LEAVES = (int, float, bool, type(None))  # values a child field may hold that are no node
_LEAF_TYPES = frozenset(_LEAVES)


class UnknownNodeError(TypeError):
    """A pass met a node class it has no rule for: a tirx bug, not a user mistake."""

    def __init__(self, node_type: type, pass_name: str, stage: str | None = None):
        self.node_type = node_type
        self.pass_name = pass_name
        name, module = node_type.__name__, node_type.__module__
        where = f"{module}.{node_type.__qualname__}"
        if catalog.is_node_module(module) and not is_node_class(node_type):
            folder = module.split(".")[-2]
            text = (
                f"internal error: {pass_name} met {name} ({where}), which is not an IR node "
                f"class: a class of a family's nodes.py is one only when that family's catalog "
                f"row names it (add {name!r} to the {folder!r} row's nodes in tirx/catalog.py)"
            )
        else:
            text = (
                f"internal error: {pass_name} has no rule for the IR node {name} ({where}); "
                f"every node class needs a case in every pass"
            )
            row = catalog.row_of_node(name)
            if stage is not None and row is not None:
                text += f" (a rule of {name} goes in tirx/families/{row.folder}/{stage}.py)"
        super().__init__(text)


@functools.cache
def node_classes() -> tuple[type, ...]:
    """Every dataclass of :mod:`tirx.ir.nodes`, in definition order: its own and those of the
    modules of ``tirx.ir`` it imports (expr_nodes.py, launch.py). A family's own node classes
    (its ``nodes`` module) are not among them: see :func:`is_node_class`."""
    return tuple(
        v
        for v in vars(ir).values()
        if isinstance(v, type)
        and dataclasses.is_dataclass(v)
        and v.__module__.rpartition(".")[0] == ir.__package__
    )


@functools.cache
def is_node_class(cls: type) -> bool:
    """Whether ``cls`` is a node class: one of :func:`node_classes`, or a dataclass of a
    family's ``nodes`` module that the family's catalog row names (``Row.nodes``)."""
    if cls in node_classes():
        return True
    row = catalog.row_of_node(cls.__name__)
    # the row that names it must be the family whose nodes.py defines it
    return (
        row is not None
        and dataclasses.is_dataclass(cls)
        and "nodes" in row.stages
        and cls.__module__ == catalog.module_name(row, "nodes")
    )


@functools.cache
def is_family_node(cls: type) -> bool:
    """Whether ``cls`` is a node class of a family's own ``nodes`` module (not the core's):
    an analysis that knows nothing of a family's operations treats its expressions as opaque
    values."""
    return is_node_class(cls) and cls not in node_classes()


@functools.cache
def leaf_statement(cls: type) -> bool:
    """Whether ``cls`` is a family's own statement class that holds no statement: the passes
    that look into statements (the index pass, the shared-row check) take it as a leaf, and
    a family statement that holds statements must have a rule of its own there instead."""
    if not (is_family_node(cls) and issubclass(cls, ir.Stmt)):
        return False
    children = dict(_spec(cls))
    return not any(
        _can_hold(_annotation(f.type, cls.__module__), ir.Stmt)
        for f in dataclasses.fields(cls)
        if f.name in children
    )


def _can_hold(t, base: type) -> bool:
    """Whether a value of annotation ``t`` (a type, a union, a tuple of them) can be a
    ``base``."""
    if isinstance(t, types.UnionType) or getattr(t, "__origin__", None) is tuple:
        return any(_can_hold(a, base) for a in t.__args__ if a is not Ellipsis)
    typing = sys.modules.get("typing")
    if typing is not None and typing.get_origin(t) is typing.Union:
        return any(_can_hold(a, base) for a in typing.get_args(t))
    return isinstance(t, type) and (issubclass(t, base) or issubclass(base, t))


def _holds_node(t) -> bool:
    if isinstance(t, types.UnionType):  # X | Y
        return any(_holds_node(a) for a in t.__args__)
    typing = sys.modules.get("typing")  # typing.Union/Optional exist only once it is imported
    if typing is not None and typing.get_origin(t) is typing.Union:
        return any(_holds_node(a) for a in typing.get_args(t))
    return isinstance(t, type) and (issubclass(t, (ir.Expr, ir.Stmt)) or is_node_class(t))


@functools.cache
def _spec(cls: type) -> tuple[tuple[str, bool], ...]:
    """``(field name, holds a tuple)`` for each child field of node class ``cls``."""
    if not is_node_class(cls):
        raise UnknownNodeError(cls, "the IR visitor")
    # a family's class names what its own module imports; the core's, what tirx.ir.nodes has
    module = cls.__module__ if catalog.is_node_module(cls.__module__) else ir.__name__
    out = []
    for f in dataclasses.fields(cls):
        holds, many = _field_kind(f.type, module)
        if holds:
            out.append((f.name, many))
    return tuple(out)


@functools.cache
def _field_kind(annotation, module: str = ir.__name__) -> tuple[bool, bool]:
    """``(holds nodes, in a tuple)`` for a field annotated ``annotation`` in the module
    ``module`` (a few dozen distinct texts among all the node classes' fields)."""
    if isinstance(annotation, str):
        kind = _text_kind(annotation, module)
        if kind is not None:
            return kind
    t = _annotation(annotation, module)
    if getattr(t, "__origin__", None) is tuple:  # tuple[...] (or typing.Tuple[...])
        return any(_holds_node(a) for a in t.__args__ if a is not Ellipsis), True
    return _holds_node(t), False


def _text_kind(text: str, module: str = ir.__name__) -> tuple[bool, bool] | None:
    """:func:`_field_kind` read from the text without evaluating it (``eval`` of a
    ``tuple[...]`` text cost a cold compile about 40 us each), for the two common shapes:
    names joined by ``|``, and ``tuple[...]`` of those (and ``...``). None for anything else,
    or a name ``eval`` would not find in :mod:`tirx.ir.nodes` or the builtins."""
    many = text.startswith("tuple[") and text.endswith("]")
    inner = text[6:-1] if many else text
    if "[" in inner or "]" in inner:
        return None
    holds, scope = False, vars(sys.modules[module])
    for part in inner.split(", ") if many else (inner,):
        if part == "..." and many:
            continue
        for name in part.split(" | "):
            if name == "None":
                continue
            value = scope[name] if name in scope else vars(builtins).get(name, _NOWHERE)
            if value is _NOWHERE or not name.isidentifier():
                return None
            holds = holds or _holds_node(value)
    return holds, many


_NOWHERE = object()


@functools.cache
def _annotation(text, module: str = ir.__name__):
    """A field's annotation as a type, for the texts :func:`_text_kind` does not read (nested
    or unioned ``tuple[...]``): evaluated in the namespace of ``module`` (:mod:`tirx.ir.nodes`
    for the core's classes) once per distinct text (``typing.get_type_hints`` per class cost a
    cold compile milliseconds)."""
    if not isinstance(text, str):
        return text
    return eval(text, vars(sys.modules[module]))  # noqa: S307 - our own source


def child_fields(cls: type) -> tuple[str, ...]:
    """The names of the fields of node class ``cls`` that hold nodes (or tuples of nodes)."""
    return tuple(name for name, _ in _spec(cls))


def children(node) -> tuple:
    """The nodes directly under ``node``, in field order (tuple fields flattened; ints and
    ``None`` in child fields left out)."""
    out = []
    for name, many in _spec(type(node)):
        v = getattr(node, name)
        for x in v if many else (v,):
            if not isinstance(x, _LEAVES):
                out.append(x)
    return tuple(out)


def rebuild(node, values):
    """``node`` with its child fields set to ``values`` (one per child field, tuples for tuple
    fields); ``node`` itself when every value is the one it holds."""
    spec = _spec(type(node))
    changed = {}
    for (name, many), new in zip(spec, values, strict=True):
        old = getattr(node, name)
        if many:
            new = tuple(new)
            if len(new) == len(old) and all(a is b for a, b in zip(new, old)):
                continue
        elif new is old:
            continue
        changed[name] = new
    return dataclasses.replace(node, **changed) if changed else node


def walk(root):
    """Every node under ``root`` (``root`` included), parents before children, in field
    order; an object in a child field that is no node raises :class:`UnknownNodeError`."""
    todo = [root]
    while todo:
        node = todo.pop()
        yield node
        kids = children(node)
        todo.extend(reversed(kids))


DESCEND = object()  # enter_C's answer for "go on to the children"


class _Pass:
    """Rule lookup shared by the drivers: methods named ``<prefix><ClassName>``, found once
    per (pass class, node class)."""

    pass_name = "an IR pass"
    _prefixes: tuple[str, ...] = ()
    #: the family stage module (tirx.catalog.STAGES) that holds this pass's rules for the
    #: families' node classes; None: the pass has rules for every class itself
    stage: str | None = None

    def _default(self, cls: type):
        """Rules for a class the pass names no method for (unbound functions), or None."""
        return None

    def _rule(self, cls: type):
        table = _RULES.setdefault(type(self), {})
        rule = table.get(cls)
        if rule is None:
            if not is_node_class(cls):
                raise UnknownNodeError(cls, self.pass_name)
            family = catalog.row_of_node(cls.__name__) if self.stage else None
            found = tuple(self._named_rule(p + cls.__name__, family) for p in self._prefixes)
            if all(f is None for f in found):
                found = self._default(cls)
                if found is None:
                    raise UnknownNodeError(cls, self.pass_name, self.stage)
            table[cls] = rule = (*found, _spec(cls))
        return rule

    def _named_rule(self, name: str, family=None):
        """The pass's rule called ``name`` (a function), from its class or, for a family's
        node class, from the family's module for the pass's stage."""
        rule = getattr(type(self), name, None)
        if rule is None and family is not None:
            rule = catalog.rule(family, self.stage, name)
        return rule


_RULES: dict[type, dict[type, tuple]] = {}  # pass class -> node class -> rule


class _Leave:
    """A node whose children are being folded: what to call once their results are in."""

    __slots__ = ("node", "counts", "leave")

    def __init__(self, node, counts, leave):
        self.node, self.counts, self.leave = node, counts, leave


class Visitor(_Pass):
    """A bottom-up fold over an explicit work stack (see the module docstring).

    ``leaf(value)`` gives the result for an int, float, bool or ``None`` found in a child
    field (itself by default). Results are remembered per node object within one
    :meth:`visit`, so a shared subexpression is folded once. When a rule raises, ``relocate
    (error, path)`` may replace the error (``path``: the nodes from the root to the one whose
    rule raised); the default re-raises it as it is.
    """

    _prefixes = ("enter_", "leave_")

    def leaf(self, value):
        return value

    def relocate(self, error: Exception, path: list):
        return error

    def visit(self, root):
        if isinstance(root, _LEAVES):
            return self.leaf(root)
        rule = self._rule
        table = _RULES.setdefault(type(self), {})
        enter = (table.get(type(root)) or rule(type(root)))[0]
        if enter is not None:  # a leaf node (a constant, a variable) answers at once
            try:
                result = enter(self, root)
            except Exception as e:  # noqa: BLE001 - handed to relocate, then raised
                raise self.relocate(e, [root]) from None
            if result is not DESCEND:
                return result
        memo: dict[int, object] = {}
        out: list = []
        todo: list = [root]
        leaf = self.leaf
        pop, push, extend = todo.pop, todo.append, todo.extend
        while todo:
            item = pop()
            if type(item) is _Leave:
                node, counts = item.node, item.counts
                args = []
                for c in reversed(counts):
                    if c < 0:
                        args.append(out.pop())
                    elif c:
                        args.append(tuple(out[-c:]))
                        del out[-c:]
                    else:
                        args.append(())
                args.reverse()
                try:
                    result = item.leave(self, node, *args)
                except Exception as e:  # noqa: BLE001 - handed to relocate, then raised
                    raise self._relocated(e, todo, node) from None
                memo[id(node)] = result
                out.append(result)
                continue
            cls = type(item)
            if cls in _LEAF_TYPES:
                out.append(leaf(item))
                continue
            known = memo.get(id(item), memo)
            if known is not memo:
                out.append(known)
                continue
            enter, leave, spec = table.get(cls) or rule(cls)
            if enter is not None:
                try:
                    result = enter(self, item)
                except Exception as e:  # noqa: BLE001 - handed to relocate, then raised
                    raise self._relocated(e, todo, item) from None
                if result is not DESCEND:
                    memo[id(item)] = result
                    out.append(result)
                    continue
            if leave is None:
                raise UnknownNodeError(type(item), self.pass_name)
            counts, kids = [], []
            for name, many in spec:
                v = getattr(item, name)
                if many:
                    counts.append(len(v))
                    kids.extend(v)
                else:
                    counts.append(-1)
                    kids.append(v)
            push(_Leave(item, counts, leave))
            kids.reverse()
            extend(kids)
        return out[0]

    def _relocated(self, error, todo, node):
        path = [x.node for x in todo if type(x) is _Leave]
        path.append(node)
        return self.relocate(error, path)


class Transformer(Visitor):
    """A :class:`Visitor` whose results are nodes. ``rebuilt``: names of the classes rebuilt
    from their transformed children by default; ``kept``: names of the classes returned as
    they are, children unvisited. For a pass with a ``stage``, a family's stage module names
    its own classes of either kind (``REBUILT``, ``KEPT``). Any other class needs its own
    ``enter_``/``leave_`` rule."""

    rebuilt: frozenset[str] = frozenset()
    kept: frozenset[str] = frozenset()
    #: rebuild a family's own expression classes (is_family_node) from their transformed
    #: children, as a pass that only rewrites what is inside them does
    rebuilt_family_expressions: bool = False

    def _default(self, cls):
        name = cls.__name__
        family = catalog.row_of_node(name) if self.stage else None

        def named(kind):  # the family stage module's KEPT or REBUILT
            return (family is not None and catalog.rule(family, self.stage, kind)) or ()

        if name in self.kept or name in named("KEPT"):
            return (_keep, None)
        if name in self.rebuilt or name in named("REBUILT"):
            return (None, _rebuild)
        if self.rebuilt_family_expressions and issubclass(cls, ir.Expr) and is_family_node(cls):
            return (None, _rebuild)
        return None


def _keep(self, node):
    return node


def _rebuild(self, node, *values):
    return rebuild(node, values)


class Walker(_Pass):
    """Top-down, in order, over an explicit stack: ``visit_C(node)`` handles a node of class
    ``C`` and returns the work that follows it (an iterable of nodes and zero-argument
    callables, run in that order) or None."""

    _prefixes = ("visit_",)

    def run(self, root) -> None:
        todo = [root]
        while todo:
            item = todo.pop()
            if callable(item):
                item()
                continue
            if item is None:
                continue
            handler, _ = self._rule(type(item))
            more = handler(self, item)
            if more:
                todo.extend(reversed(list(more)))
