"""IR to bytes and back, for the front-end cache (tirx/frontend_cache.py): one process stores a
lowered kernel, the next reads it.

Not pickle: importing pickle's C core costs about 0.5 ms in a process that only reads (a tenth
of a warm compile), and unpickling runs whatever code the file names. Here the value is
flattened into a table that :mod:`marshal` writes (the format of this Python version, which the
cache key holds): one row per distinct value, children before parents, so that reading is one
loop building each row from rows already built, and what the IR shares (a buffer, a variable)
is shared again.

The table holds the atoms (None, bool, int, float, str) first, as one tuple, then a row per
compound value: ``(0, items)`` a tuple, ``(1, keys, values)`` a dict, ``(2, class, member
name)`` an enum member, ``(3, class, fields)`` a dataclass instance. Items, keys, values and
fields are value numbers (the atoms count first), a class is an index into a table of
``(module, qualified name, field names)`` (None for an enum). Only tirx's own enums and
dataclasses are written and read back: anything else in the value makes :func:`dumps` raise
TypeError, and a table naming anything else makes :func:`loads` raise ValueError. A dataclass
is rebuilt without calling its ``__init__`` (as pickle does): its fields get the values the
validated original had; caches kept beside them (a layout's canonical form) are rebuilt on use.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import marshal
import sys

from .. import catalog
from .nodes import Expr, Stmt
from .visitor import UnknownNodeError

__all__ = ["dumps", "loads"]

_TUPLE, _DICT, _ENUM, _DATA = range(4)
_ATOMS = frozenset({type(None), bool, int, float, str})


def _ours(cls) -> bool:
    return isinstance(cls.__module__, str) and cls.__module__.split(".", 1)[0] == "tirx"


def dumps(value) -> bytes:
    """``value`` (tirx dataclasses and enums, tuples, dicts, atoms) as bytes; TypeError for a
    value holding anything else."""
    class_rows: list[tuple] = []
    # class -> (index, field names or None for an enum), once per class: a cold compile
    # stores a kernel once, and per-value class tests were most of the time this took
    classes: dict[type, tuple[int, tuple[str, ...] | None]] = {}
    atoms: list = []
    rows: list[tuple] = []
    seen: dict = {}  # id(value), or (type, value) for atoms other than floats (0.0 == -0.0)

    def class_of(cls) -> tuple[int, tuple[str, ...] | None]:
        known = classes.get(cls)
        if known is None:
            if issubclass(cls, enum.Enum) and _ours(cls):
                names = None
            elif "__dataclass_fields__" in vars(cls) and _ours(cls):
                names = tuple(f.name for f in dataclasses.fields(cls))
            elif issubclass(cls, (Expr, Stmt)):
                raise UnknownNodeError(cls, "the IR serializer")
            else:
                raise TypeError(f"cannot store a {cls.__qualname__} (only tirx's IR)")
            known = classes[cls] = (len(class_rows), names)
            class_rows.append((cls.__module__, cls.__qualname__, names))
        return known

    def ref(value):
        """The atom's number, or ``[row]`` for a compound value (numbered once all atoms are
        known); children get their rows before their parents, over an explicit stack (no
        recursion: an expression may be thousands of levels deep)."""
        todo = [(value, None)]
        pop, push, extend = todo.pop, todo.append, todo.extend
        while todo:
            v, held = pop()
            t = type(v)
            key = (t, v) if t in _ATOMS and t is not float else id(v)
            if held is None:
                if key in seen:
                    continue
                if t in _ATOMS:
                    seen[key] = len(atoms)
                    atoms.append(v)
                    continue
                if t is tuple:
                    held = list(v)
                elif t is dict:
                    held = [*v, *v.values()]
                else:
                    names = class_of(t)[1]
                    held = [] if names is None else [getattr(v, f) for f in names]
                push((v, held))
                extend((x, None) for x in reversed(held))
                continue
            if key in seen:  # reached again below itself (a shared child): already a row
                continue
            nums = [
                seen[(type(x), x) if type(x) in _ATOMS and type(x) is not float else id(x)]
                for x in held
            ]
            if t is tuple:
                r = (_TUPLE, nums)
            elif t is dict:
                r = (_DICT, nums[: len(v)], nums[len(v) :])
            elif classes[t][1] is None:
                r = (_ENUM, classes[t][0], v.name)
            else:
                r = (_DATA, classes[t][0], nums)
            seen[key] = [len(rows)]
            rows.append(r)
        t = type(value)
        return seen[(t, value) if t in _ATOMS and t is not float else id(value)]

    root = ref(value)
    base = len(atoms)

    def number(n) -> int:
        return n if type(n) is int else base + n[0]

    final = []
    for r in rows:
        if r[0] == _TUPLE:
            final.append((_TUPLE, tuple(map(number, r[1]))))
        elif r[0] == _DICT:
            final.append((_DICT, tuple(map(number, r[1])), tuple(map(number, r[2]))))
        elif r[0] == _DATA:
            final.append((_DATA, r[1], tuple(map(number, r[2]))))
        else:
            final.append(r)
    return marshal.dumps((tuple(class_rows), tuple(atoms), tuple(final), number(root)))


def loads(data: bytes):
    """The value :func:`dumps` wrote. Bytes that are not such a table raise ValueError, or
    whatever reading them runs into (marshal's errors, IndexError, TypeError)."""
    class_rows, atoms, rows, root = marshal.loads(data)
    classes = []
    for module, qualname, names in class_rows:
        cls = sys.modules.get(module)
        if cls is None and catalog.is_node_module(module):  # a family's node classes
            cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part, None)
        if not isinstance(cls, type) or not _ours(cls):
            raise ValueError(f"not a tirx class: {module}.{qualname}")
        if issubclass(cls, enum.Enum):
            expected = None
        elif "__dataclass_fields__" in vars(cls):
            expected = tuple(f.name for f in dataclasses.fields(cls))
        else:
            raise ValueError(f"{module}.{qualname} is neither an enum nor a dataclass")
        if names != expected:
            raise ValueError(f"{module}.{qualname} does not have the fields stored")
        classes.append((cls, names))
    objs = list(atoms)
    append = objs.append
    new = object.__new__
    for r in rows:
        tag = r[0]
        if tag == _DATA:
            cls, names = classes[r[1]]
            obj = new(cls)
            obj.__dict__.update(zip(names, [objs[i] for i in r[2]]))
            append(obj)
        elif tag == _TUPLE:
            append(tuple([objs[i] for i in r[1]]))
        elif tag == _DICT:
            append(dict(zip([objs[i] for i in r[1]], [objs[i] for i in r[2]])))
        elif tag == _ENUM:
            append(classes[r[1]][0][r[2]])
        else:
            raise ValueError(f"unknown row kind {tag!r}")
    return objs[root]
