"""The errors tirx raises, and the one renderer that shows a user's own line with a caret.

Every user mistake becomes a :class:`TirxError` subclass. When the error knows where in the
user's source it comes from (a :class:`Span`), its message shows ``file:line:col``, the line
itself and a caret under the offending text, followed by what to change.
"""

from __future__ import annotations

import ast
import linecache
import sys
from dataclasses import field as _field

from .frozen import Frozen, frozen

__all__ = [
    "Span",
    "TirxError",
    "TirxSyntaxError",
    "LayoutError",
    "ContractError",
    "CompileError",
    "UnsupportedArchError",
    "LaunchError",
    "SimulationError",
    "render_location",
    "did_you_mean",
    "label_source",
    "source_label",
    "layout_definition",
    "built_definition",
]


@frozen
class Span(Frozen):
    """A place in user source: file name, 1-based line, 0-based columns ``[col, end_col)``."""

    file: str
    line: int
    col: int = 0
    end_col: int | None = None
    # where a macro's body was expanded: (the macro's name, the call's Span), or None; not part
    # of equality (a line is one place whichever call reached it)
    called: tuple | None = _field(default=None, compare=False, repr=False)

    def macro_calls(self) -> list[tuple[str, Span]]:
        """The macro calls that reached this place, innermost first."""
        out, span = [], self
        while span.called is not None:
            out.append(span.called)
            span = span.called[1]
        return out

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
    definition: Span | None = None  # where the offending value was bound (a second place)
    context: tuple[tuple[str, Span], ...] = ()  # (what, where) after the place: a macro's call

    def __init__(self, message: str, span: Span | None = None, hint: str | None = None):
        self.message = message
        self.span = span
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.message]
        if self.span is not None:
            parts.append(render_location(self.span))
        if self.definition is not None:
            parts.append("the layout was defined here:")
            parts.append(render_location(self.definition))
        context = self.context
        if not context and self.span is not None and self.span.called is not None:
            # found after the macro's expansion (lowering, the simulator): its calls, innermost
            # first, as an error raised while expanding it shows them
            calls = self.span.macro_calls()
            context = tuple((f"in the macro {name!r}, called here:", at) for name, at in calls)
        for what, where in context:
            parts += [what, render_location(where)]
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)

    def with_span(self, span: Span | None) -> TirxError:
        """The same error located at ``span`` unless it already has a place."""
        if self.span is not None or span is None:
            return self
        return self._with(span=span)

    def with_definition(self, definition: Span | None) -> TirxError:
        """The same error also showing where the offending layout was defined."""
        if self.definition is not None or definition is None:
            return self
        return self._with(definition=definition)

    def _with(self, **fields) -> TirxError:
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        err.__dict__.update(fields)
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


class UnsupportedArchError(CompileError):
    """The installed NVRTC does not compile for the architecture asked for (``arch``, spelt
    right: ``sm_999``, or ``sm_86a`` with no arch-specific features before sm_90). Raised by
    the NVRTC compile step before NVRTC runs, its message listing the archs NVRTC compiles
    for; a saved kernel's ``archs`` are checked through it (tirx/artifact.py)."""

    def __init__(self, message: str, span: Span | None = None, hint: str | None = None,
                 arch: str = ""):  # fmt: skip
        self.arch = arch
        super().__init__(message, span, hint)


class LaunchError(TirxError):
    """A kernel could not be loaded or launched (no GPU, driver error, bad launch shape)."""


class SimulationError(TirxError):
    """The simulator caught a fault: out-of-bounds, misalignment, uninitialized read, race."""


# --- Where a layout named at a tile operand was defined ---------------------------------------
# A contract error is located at the operand's use (``ar.view(1, 1, 16, 8, layout=a_mma)``);
# the layout is usually built elsewhere: at module level, in an earlier notebook cell, in the
# caller of a kernel factory. The layout object knows where it was built (the line of the call
# that made it, ``tirx.layout.origin``); the statement holding that line, in the file as
# linecache holds it (notebook cells included), is the definition shown. A layout with no such
# place (one made by tirx itself) is looked for in the source text alone, following the parser's
# resolution: a name assigned in the kernel body before the use is kernel-local; otherwise it
# is captured from the enclosing functions or the module; and that binding is shown only when
# it surely ran: a binding under an ``if``, a loop or a ``try`` of its scope may not have, and
# then nothing is shown. A layout written as an expression at the operand
# (``layout=TileLayout(...)``) has no definition of its own.


def layout_definition(
    use: Span | None, keyword: str = "layout", built: Span | None = None
) -> Span | None:
    """The span of the statement that built the layout passed as ``keyword=`` in the call at
    ``use``: the statement holding ``built`` (where the layout object was made) when known;
    else the statement binding the name passed, when the value is a plain name whose binding
    surely ran. None when there is no such call, the layout was written at the operand, or
    the place cannot be known for sure."""
    if use is None:
        return None
    tree = _tree(use.file)
    call = _call_at(tree, use) if tree is not None else None
    if built is not None:
        if call is not None and built.file == use.file:
            if call.lineno <= built.line <= (call.end_lineno or call.lineno):
                return None  # written at the operand
        return built_definition(built)
    if call is None:
        return None
    value = next((k.value for k in call.keywords if k.arg == keyword), None)
    if not isinstance(value, ast.Name):
        return None
    name = value.id
    scopes = _enclosing_functions(tree, use.line)
    for func in reversed(scopes):  # the kernel first, then the functions around it
        found = _last_binding(func.body, name, use.line)
        if found is not None:
            return _span(use.file, found) if _surely_runs(func.body, found) else None
        arg = _parameter(func, name)  # a kernel factory's parameter: ``def make(lay): ...``
        if arg is not None:
            return Span(use.file, arg.lineno, arg.col_offset, arg.end_col_offset)
    found = _last_binding(tree.body, name, None)
    if found is not None:
        return _span(use.file, found) if _surely_runs(tree.body, found) else None
    return _in_other_cells(use.file, name)


def _surely_runs(body, stmt) -> bool:
    """Whether ``stmt`` is a statement of ``body`` itself (a for or with header included), not
    one under a branch, loop or try of it that may not have run."""
    return any(s is stmt for s in body)


def built_definition(built: Span | None) -> Span | None:
    """What to show for a layout built at ``built`` (the line of the call that made it): the
    innermost statement holding that line when it starts there, else the line itself (an
    entry of a list over several lines); ``built`` as it is when the file's text is not at
    hand."""
    if built is None:
        return None
    tree = _tree(built.file)
    if tree is None:
        return built
    holding = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.stmt) and n.lineno <= built.line <= (n.end_lineno or n.lineno)
    ]
    if not holding:
        return built
    inner = max(holding, key=lambda n: (n.lineno, n.col_offset))
    if inner.lineno != built.line:
        text = linecache.getline(built.file, built.line)
        indent = len(text) - len(text.lstrip())
        return Span(built.file, built.line, indent, len(text.rstrip()))
    return _span(built.file, inner)


def _tree(file: str) -> ast.Module | None:
    lines = linecache.getlines(file)
    if not lines:
        return None
    try:
        return ast.parse("".join(lines), file)
    except (SyntaxError, ValueError):
        return None


def _call_at(tree: ast.Module, use: Span) -> ast.Call | None:
    """The call expression starting exactly at ``use`` (the operand's span)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno == use.line and node.col_offset == use.col:
            return node
    return None


def _enclosing_functions(tree: ast.Module, line: int) -> list[ast.AST]:
    """The function definitions whose lines contain ``line``, outermost first."""
    chain: list[ast.AST] = []
    body = tree.body
    while True:
        inner = next(
            (
                n
                for n in _statements(body)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.lineno <= line <= (n.end_lineno or n.lineno)
            ),
            None,
        )
        if inner is None:
            return chain
        chain.append(inner)
        body = inner.body


def _statements(body):
    """Statements of ``body``, entering compound statements (if/for/with/try) but not
    nested function or class bodies."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(stmt, field, None) or [])
        for handler in getattr(stmt, "handlers", None) or []:
            yield from _statements(handler.body)


def _last_binding(body, name: str, before: int | None):
    """The last statement binding ``name`` in ``body`` (before line ``before``, when given):
    an assignment (a tuple-unpacking one included), a for-target or a ``with ... as``."""
    found = None
    for stmt in _statements(body):
        if before is not None and stmt.lineno >= before:
            continue
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets = [stmt.target]
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            targets = [stmt.target]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in stmt.items if item.optional_vars]
        else:
            continue
        if any(name in _bound_names(t) for t in targets):
            found = stmt
    return found


def _parameter(func, name: str) -> ast.arg | None:
    a = func.args
    every = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
    return next((arg for arg in every if arg.arg == name), None)


def _bound_names(target: ast.expr) -> set[str]:
    """The names a target binds: ``a``, ``a, b``, ``(a, [b, *c])``."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_bound_names(t) for t in target.elts))
    return set()  # an attribute or a subscript binds no name


def _span(file: str, stmt: ast.stmt) -> Span:
    # a compound statement (for, with) is shown by its header, up to its iterable or last item
    last = stmt.iter if isinstance(stmt, (ast.For, ast.AsyncFor)) else stmt
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        last = stmt.items[-1].optional_vars or stmt.items[-1].context_expr
    end = last.end_col_offset if last.end_lineno == stmt.lineno else None
    return Span(file, stmt.lineno, stmt.col_offset, end)


def _in_other_cells(file: str, name: str) -> Span | None:
    """A global defined in an earlier notebook cell: the latest cell (other than ``file``)
    that IPython compiled and that binds ``name`` at its top level. Only asked of an
    IPython already running in this process, and only when ``file`` is itself a cell."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    cells = list(getattr(getattr(shell, "compile", None), "_filename_map", None) or ())
    if shell is None or (file not in cells and file not in _LABELS):
        return None
    for other in [*reversed(cells), *reversed(list(_LABELS))]:
        if other == file:
            continue
        tree = _tree(other)
        found = _last_binding(tree.body, name, None) if tree is not None else None
        if found is not None:
            return _span(other, found)
    return None
