"""The kernel language: the ``T`` namespace (the vocabulary, :mod:`tirx.script.namespace`) and
the ``@T.function`` parser. The parser imports the vocabulary, never the other way round:
``T.function``, ``T.macro`` and ``T.inline`` are set on ``T`` here."""

from .macros import inline, macro
from .namespace import T
from .parser import function

T.function, T.macro, T.inline = function, macro, inline

__all__ = ["T"]
