"""The errors tirx raises, and the one renderer that shows a user's own line with a caret.

Every user mistake becomes a :class:`TirxError` subclass. When the error knows where in the
user's source it comes from (a :class:`Span`), its message shows ``file:line:col``, the line
itself and a caret under the offending text, followed by what to change.
"""

from __future__ import annotations

import linecache
import sys
from dataclasses import dataclass

__all__ = [
    "Span",
    "TirxError",
    "TirxSyntaxError",
    "LayoutError",
    "ContractError",
    "CompileError",
    "LaunchError",
    "SimulationError",
    "render_location",
    "did_you_mean",
    "label_source",
    "source_label",
]


@dataclass(frozen=True)
class Span:
    """A place in user source: file name, 1-based line, 0-based columns ``[col, end_col)``."""

    file: str
    line: int
    col: int = 0
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def source_line(self) -> str:
        """The text of the line, read through :mod:`linecache` (which also holds notebook cells)."""
        return linecache.getline(self.file, self.line).rstrip("\n")


_LABELS: dict[str, str] = {}


def label_source(file: str, label: str) -> None:
    """Name ``file`` ``label`` in every error from now on (``%%tirx`` names its cells
    ``Cell In[4]``, after the prompt)."""
    _LABELS[file] = label


def source_label(file: str) -> str:
    """How errors name a source file: its label (:func:`label_source`); for the code of a
    notebook cell, compiled under a temporary file name, ``Cell In[4]`` as IPython's own
    tracebacks say; else ``File <file>``. IPython is asked only when it already runs this
    process (tirx never imports it)."""
    label = _LABELS.get(file)
    if label is not None:
        return label
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    try:
        named = shell.compile.format_code_name(file) if shell is not None else None
    except Exception:  # noqa: BLE001 - an IPython without it, or another shell: the plain name
        named = None
    return " ".join(named) if named else f"File {file}"


def render_location(span: Span) -> str:
    """``file, line, column`` then the source line and a caret line under ``[col, end_col)``."""
    text = span.source_line()
    head = f"  {source_label(span.file)}, line {span.line}, column {span.col + 1}"
    if not text:
        return head
    stripped = text.lstrip()
    indent = len(text) - len(stripped)
    col = max(span.col - indent, 0)
    end = span.end_col if span.end_col is not None and span.end_col > span.col else len(text)
    width = max(min(end, len(text)) - max(span.col, indent), 1)
    return f"{head}\n    {stripped}\n    {' ' * col}{'^' * width}"


def did_you_mean(name: str, known, what: str = "") -> str | None:
    """A hint naming the known names closest to a misspelt ``name`` (``None``: none close).

    Close means :func:`difflib.get_close_matches` finds it, or one name contains the other
    once underscores are ignored (``laneid`` and ``lane_id``)."""
    import difflib

    known = sorted(set(known))
    flat = name.replace("_", "").lower()
    close = [k for k in known if flat and flat == k.replace("_", "").lower()]
    close += difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    close += [k for k in known if len(flat) > 2 and flat in k.replace("_", "").lower()]
    close = list(dict.fromkeys(close))[:3]
    if not close:
        return None
    names = " or ".join(f"`{what}{k}`" for k in close)
    return f"did you mean {names}?"


class TirxError(Exception):
    """Base class of every error tirx raises for user input.

    ``message`` says what is wrong, ``span`` (optional) where, ``hint`` (optional) what to do.
    """

    kind = "error"

    def __init__(self, message: str, span: Span | None = None, hint: str | None = None):
        self.message = message
        self.span = span
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.message]
        if self.span is not None:
            parts.append(render_location(self.span))
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)

    def with_span(self, span: Span | None) -> TirxError:
        """The same error located at ``span`` unless it already has a place."""
        if self.span is not None or span is None:
            return self
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        err.span = span
        Exception.__init__(err, err._render())
        return err


class TirxSyntaxError(TirxError):
    """The kernel uses Python that tirx does not accept, or uses tirx wrongly."""


class LayoutError(TirxError):
    """A layout is malformed or an operation on it is impossible."""


class ContractError(TirxError):
    """An operand of a tile operation does not implement the instruction's fixed mapping."""


class CompileError(TirxError):
    """The generated code failed to build (NVRTC), with its log mapped to kernel lines."""


class LaunchError(TirxError):
    """A kernel could not be loaded or launched (no GPU, driver error, bad launch shape)."""


class SimulationError(TirxError):
    """The simulator caught a fault: out-of-bounds, misalignment, uninitialized read, race."""
