"""``@T.function``: find a kernel's source and parse its Python AST into script-level IR.

This module is the front door (the decorator, :class:`KernelFunction`, the source lookup);
the statements are parsed by :class:`~tirx.script.statements.Parser`, the expressions by
:class:`~tirx.script.evaluator.Evaluator`. The parser handles an explicit list of statement and expression kinds and rejects the rest
with the user's own line and a caret. It is a partial evaluator: anything whose value is known
at compile time (ints, layouts, views, dtypes, captured names) is computed in Python; anything
that depends on a thread or a run-time value becomes an IR expression. Names bound to run-time
values become kernel variables (:class:`~tirx.ir.nodes.Var`).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import time

from .. import collector
from ..errors import Span, TirxSyntaxError
from ..ir import nodes as ir
from .evaluator import BUILTINS  # noqa: F401 - re-exported (it used to live here)
from .source import lookup_def, source_lines
from .statements import Parser

__all__ = ["function", "KernelFunction", "parse_source"]


class KernelFunction:
    """What ``@T.function`` returns: the parsed kernel, ready for ``tirx.compile``.

    A kernel that the front-end cache (tirx/frontend_cache.py) found, compiled by an earlier process,
    is not parsed at decoration: ``tirx.compile`` takes its lowered IR and generated source from
    the cache, and ``ir`` is parsed on first use (``script()``, the simulator, another arch),
    from the very inputs the decorator saw. ``frontend`` is that cache's record of the kernel
    (None: not cached).
    """

    def __init__(
        self, func: ir.Function | None, source: str, pyfunc=None, parse_ms: float = 0.0,
        *, name: str | None = None, parse=None,
    ):  # fmt: skip
        self._ir = func
        self._parse = parse  # () -> ir.Function, for a kernel made without its IR (func None)
        self.parse_ms = parse_ms
        self.source = source
        self.pyfunc = pyfunc
        self.frontend = None
        self.__name__ = func.name if func is not None else name
        self.__doc__ = getattr(pyfunc, "__doc__", None)

    @property
    def ir(self) -> ir.Function:
        """The script-level IR (parsed now if the kernel came from the front-end cache)."""
        if self._ir is None:
            func = self._parse()
            if self._ir is None:  # another thread may have parsed it meanwhile: keep one
                self._ir = func
        return self._ir

    @property
    def name(self) -> str:
        return self.__name__

    def script(self) -> str:
        from ..ir.printer import print_function

        return print_function(self.ir)

    def __call__(self, *args, **kwargs):
        raise TirxSyntaxError(
            f"kernel {self.name!r} cannot be called directly",
            hint=f"compile it first: exe = tirx.compile({self.name}); exe(...)",
        )

    def __repr__(self) -> str:
        return f"<tirx kernel {self.name}>"


# The front-end cache (tirx/frontend_cache.py) installs itself here when tirx is imported; the script
# layer does not import upward. It answers ``lookup(pyfunc, lines, scope, annotations,
# options)`` with a record (``record.found``: the kernel was compiled before) or None (not
# cacheable), and ``remember(record, kernel, parser)`` after a parse with the record to keep
# (or None).
frontend_cache = None


def function(pyfunc=None, **options):
    """Decorator: parse a Python function as a tirx kernel (at decoration time, unless the
    front-end cache has it from an earlier process: then on first use of ``kernel.ir``)."""
    if pyfunc is None:
        return lambda f: function(f, **options)
    if not inspect.isfunction(pyfunc):
        raise TirxSyntaxError(f"@T.function decorates a Python function, got {pyfunc!r}")
    if inspect.iscoroutinefunction(pyfunc) or inspect.isasyncgenfunction(pyfunc):
        raise TirxSyntaxError(
            "a kernel is a plain def, not an async def",
            _def_line(pyfunc),
            hint="remove async: a kernel's threads run it once each, as written",
        )
    filename = pyfunc.__code__.co_filename
    scope = dict(pyfunc.__globals__)
    if pyfunc.__closure__:
        for name, cell in zip(pyfunc.__code__.co_freevars, pyfunc.__closure__):
            try:
                scope[name] = cell.cell_contents
            except ValueError:
                pass
    annotations = {
        k: v for k, v in getattr(pyfunc, "__annotations__", {}).items() if not isinstance(v, str)
    }
    with collector.paused():
        return _parse(pyfunc, filename, scope, annotations, options)


def _parse(pyfunc, filename: str, scope: dict, annotations: dict, options: dict):
    t0 = time.perf_counter()
    lines = source_lines(pyfunc)
    cache = frontend_cache if lines is not None else None
    record = cache.lookup(pyfunc, lines, scope, annotations, options) if cache else None
    if record is not None and record.found:
        parser = Parser(filename, scope, annotations)
        parser.macro_snapshots = record.snapshots
        kernel = KernelFunction(
            None, record.source, pyfunc, name=record.name,
            parse=lambda: parser.parse(lookup_def(pyfunc, lines)[0]),
        )  # fmt: skip
        kernel.frontend = record
        return kernel
    found = lookup_def(pyfunc, lines) if lines is not None else None
    if found is not None:
        fdef, source = found
        parser = Parser(filename, scope, annotations)
        func = parser.parse(fdef)
        kernel = KernelFunction(func, source, pyfunc, (time.perf_counter() - t0) * 1e3)
        if record is not None:
            kernel.frontend = cache.remember(record, kernel, parser)
        return kernel
    # The slow path (inspect's tokenizer), for source the fast lookup cannot place.
    try:
        lines, first = inspect.getsourcelines(pyfunc)
    except (OSError, TypeError):
        raise TirxSyntaxError(
            f"cannot read the source of {pyfunc.__name__!r}",
            hint="define kernels in a file or a notebook cell (or use the %%tirx magic)",
        ) from None
    source = "".join(lines)
    t0 = time.perf_counter()
    func = parse_source(
        source, filename, first, scope, name=pyfunc.__name__, annotations=annotations
    )
    return KernelFunction(func, source, pyfunc, (time.perf_counter() - t0) * 1e3)


def parse_source(
    source: str, filename: str, first_line: int, scope: dict, name=None, annotations=None
):
    """Parse the ``def`` in ``source`` (which starts at ``first_line`` of ``filename``).

    ``annotations`` holds parameter annotations Python already evaluated (they may use names
    of the enclosing scope that the function body does not capture)."""
    dedented = textwrap.dedent(source)
    indent = _indent_of(source)
    try:
        tree = ast.parse(dedented)
    except SyntaxError as e:
        span = Span(filename, (e.lineno or 1) + first_line - 1, (e.offset or 1) - 1 + indent)
        raise TirxSyntaxError(f"invalid Python: {e.msg}", span) from None
    ast.increment_lineno(tree, first_line - 1)
    if indent:
        for node in ast.walk(tree):
            if hasattr(node, "col_offset"):
                node.col_offset += indent
                if getattr(node, "end_col_offset", None) is not None:
                    node.end_col_offset += indent
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if name is not None:
        defs = [d for d in defs if d.name == name] or defs
    if not defs:
        raise TirxSyntaxError("no function definition found in the kernel source")
    return Parser(filename, scope, annotations).parse(defs[0])


def _def_line(pyfunc) -> Span | None:
    """Where the ``def`` of ``pyfunc`` is (past its decorators), when its file can be read."""
    code = pyfunc.__code__
    lines = source_lines(pyfunc) or []
    for number in range(code.co_firstlineno, min(len(lines), code.co_firstlineno + 50) + 1):
        text = lines[number - 1]
        if text.lstrip().startswith(("def ", "async def ")):
            start = len(text) - len(text.lstrip())
            return Span(code.co_filename, number, start, len(text.rstrip()))
    return None


def _indent_of(source: str) -> int:
    for line in source.splitlines():
        if line.strip():
            return len(line) - len(line.lstrip())
    return 0
