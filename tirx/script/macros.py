"""``@T.macro`` and ``@T.inline``: Python functions whose body is kernel code, expanded at
each call site inside a ``@T.function``.

A macro's body is parsed like a kernel's, where it is called, with its parameters bound to the
call's arguments (tensors, kernel values and Python values alike; defaults and keywords as
Python binds them). Expansion is *hygienic*: the body sees its parameters, its own names and
the names of the place it was defined (module globals, closure), never the caller's local
names, and the variables it makes are its own (C names are made unique). ``T.macro`` reads its
closure as it was when decorated, ``T.inline`` as it is at each call. A last top-level
``return value`` gives the call its value; a ``return`` anywhere else is refused.

Errors in a macro's body point at the macro's own line, and their message names the call.
This module is the vocabulary (what ``@T.macro`` makes); :mod:`tirx.script.expansion` parses a
macro's body where it is called.
"""

from __future__ import annotations

import inspect

from ..errors import TirxSyntaxError

__all__ = ["Macro", "macro", "inline"]


class Macro:
    """A function decorated with ``@T.macro`` (``late_binding`` False) or ``@T.inline``."""

    def __init__(self, function, late_binding: bool, hygienic: bool = True):
        if not inspect.isfunction(function):
            raise TirxSyntaxError(f"@T.macro decorates a Python function, got {function!r}")
        if not hygienic:
            raise TirxSyntaxError(
                "tirx macros are always hygienic",
                hint="pass the caller's values to the macro as arguments",
            )
        self.function = function
        self.late_binding = late_binding
        self.closure = None if late_binding else _closure(function)
        self.__name__ = function.__name__
        self.__doc__ = function.__doc__

    def __call__(self, *args, **kwargs):
        raise TirxSyntaxError(
            f"the macro {self.__name__!r} can only be called inside a @T.function kernel body"
        )

    def __repr__(self) -> str:
        return f"<tirx {'inline' if self.late_binding else 'macro'} {self.__name__}>"

    def scope(self) -> dict:
        """The names the body may resolve outside itself."""
        scope = dict(self.function.__globals__)
        scope.update(self.closure if self.closure is not None else _closure(self.function))
        return scope


def _closure(function) -> dict:
    out = {}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # a cell not yet assigned
            pass
    return out


def _decorator(late_binding: bool):
    def decorate(function=None, **options):
        unknown = set(options) - {"hygienic"}
        if unknown:
            raise TirxSyntaxError(f"unknown macro option {sorted(unknown)[0]!r}")
        hygienic = options.get("hygienic", True)
        if function is None:
            return lambda f: Macro(f, late_binding, hygienic)
        return Macro(function, late_binding, hygienic)

    return decorate


macro = _decorator(late_binding=False)
inline = _decorator(late_binding=True)
