"""Frozen dataclasses made at a fraction of ``dataclass``'s cost: most of tirx's classes are
frozen dataclasses (IR nodes, layouts, dtypes, instruction specs), made at ``import tirx``.

``@dataclass(frozen=True)`` compiles every method it adds, about 50 us each: ``__init__``,
``__repr__``, ``__setattr__``, ``__delattr__``, and with value equality ``__eq__`` and
``__hash__``. Here ``dataclass`` makes the fields (and ``__eq__``/``__hash__`` where asked);
the repr and the refusal to assign are :class:`Frozen`'s, once for every class; and
``__init__`` is the one method compiled per class. The classes behave as frozen dataclasses:
``dataclasses.fields``, ``replace``, ``is_dataclass``, copy and pickle work on them, and
assigning or deleting an attribute raises :class:`dataclasses.FrozenInstanceError`.
"""

from __future__ import annotations

from dataclasses import MISSING, FrozenInstanceError, dataclass, fields

__all__ = ["Frozen", "frozen"]


class Frozen:
    """The base of :func:`frozen` classes: the repr a dataclass writes, ``Name(field=value,
    ...)`` (fields with ``repr=False`` left out), and no assignment after ``__init__``."""

    __slots__ = ()

    def __repr__(self) -> str:
        inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"{type(self).__qualname__}({inner})"

    def __setattr__(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}")


def frozen(cls=None, /, *, eq: bool = True):
    """``@dataclass(frozen=True, eq=eq)`` for a subclass of :class:`Frozen` (``@frozen`` or
    ``@frozen(eq=False)``). A class's own ``__eq__``, ``__hash__`` and ``__repr__`` are kept,
    as dataclass keeps them. Fields may have defaults and default factories; ``__post_init__``
    runs when the class has one."""
    if cls is None:
        return lambda c: frozen(c, eq=eq)
    if not issubclass(cls, Frozen):
        raise TypeError(f"@frozen: {cls.__name__} must derive from tirx.frozen.Frozen")
    if cls.__dict__.get("__doc__") is None:  # dataclass would ask inspect for the signature
        cls.__doc__ = f"{cls.__name__}({', '.join(cls.__dict__.get('__annotations__', ()))})"
    own_hash = cls.__dict__.get("__hash__", MISSING) not in (MISSING, None)  # as dataclass
    # dataclass makes a subclass of a frozen dataclass frozen itself (two more methods)
    sub = any("__dataclass_fields__" in vars(base) for base in cls.__mro__[1:])
    cls = dataclass(init=False, repr=False, eq=eq, unsafe_hash=eq and not own_hash, frozen=sub)(cls)
    if "__init__" not in cls.__dict__:  # a class's own __init__ is kept, as dataclass keeps it
        cls.__init__ = _init(cls)
    # what the class is (Frozen refuses assignment): so a subclass made with
    # @dataclass(frozen=True) is allowed, and one without frozen=True refused, as for any
    # frozen dataclass
    cls.__dataclass_params__.frozen = True
    return cls


def _init(cls):
    """The ``__init__`` dataclass would write for ``cls``, compiled once."""
    scope = {"_set": object.__setattr__, "_NONE": MISSING}
    params, body = [], []
    for f in fields(cls):
        if not f.init or f.kw_only:
            raise TypeError(f"@frozen: field {cls.__name__}.{f.name} is init=False or kw_only")
        value = f.name
        if f.default is not MISSING:
            scope[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        elif f.default_factory is not MISSING:
            scope[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_NONE")
            value = f"_f_{f.name}() if {f.name} is _NONE else {f.name}"
        else:
            params.append(f.name)
        body.append(f"_set(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    text = f"def __init__(self, {', '.join(params)}):\n    " + "\n    ".join(body or ["pass"])
    exec(text, scope)  # noqa: S102 - made above from the class's field names
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init
