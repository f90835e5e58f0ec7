"""``@T.function``: parse a kernel's Python AST into script-level IR.

The parser handles an explicit list of statement and expression kinds and rejects the rest
with the user's own line and a caret. It is a partial evaluator: anything whose value is known
at compile time (ints, layouts, views, dtypes, captured names) is computed in Python; anything
that depends on a thread or a run-time value becomes an IR expression. Names bound to run-time
values become kernel variables (:class:`~tirx.ir.nodes.Var`).
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import time

from ..errors import Span, TirxError, TirxSyntaxError
from ..ir import nodes as ir
from .builder import FunctionBuilder
from .evaluator import BUILTINS, IR_BINOPS, Evaluator  # noqa: F401 - BUILTINS re-exported
from .namespace import LaunchSpec, ScalarType, TensorAnnotation

__all__ = ["function", "KernelFunction", "parse_source"]


class KernelFunction:
    """What ``@T.function`` returns: the parsed kernel, ready for ``tirx.compile``.

    A kernel that the front-end cache (tirx/frontend.py) found, compiled by an earlier process,
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


# The front-end cache (tirx/frontend.py) installs itself here when tirx is imported; the script
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
    t0 = time.perf_counter()
    lines = _source_lines(pyfunc)
    cache = frontend_cache if lines is not None else None
    record = cache.lookup(pyfunc, lines, scope, annotations, options) if cache else None
    if record is not None and record.found:
        parser = Parser(filename, scope, annotations)
        kernel = KernelFunction(
            None, record.source, pyfunc, name=record.name,
            parse=lambda: parser.parse(_lookup_def(pyfunc, lines)[0]),
        )  # fmt: skip
        kernel.frontend = record
        return kernel
    found = _lookup_def(pyfunc, lines) if lines is not None else None
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


# Source lookup without inspect.getsourcelines, whose inspect.getblock runs the pure-Python
# tokenizer (and compiles tokenize's large regular expressions on first use): several
# milliseconds per process. Instead the whole file (as linecache holds it, which includes
# notebook cells) is parsed once with ast.parse, and the tree is kept per file name while
# linecache still returns the very same list of lines (a re-read, after checkcache sees the
# file changed, is a new list). Line and column numbers in that tree are the file's own, so
# the def node goes to the Parser as it is. The Parser only reads the AST: one memoized tree
# serves every kernel of the file, and the same kernel made twice by a factory function.
_TREES: dict[str, tuple[list, ast.Module | None]] = {}
_TREES_MAX = 16  # files remembered (notebooks make a new "file" per cell run)


def _source_lines(pyfunc) -> list[str] | None:
    """The lines of ``pyfunc``'s file as :mod:`linecache` holds them now (a notebook cell's
    too), or None when there are none or ``pyfunc`` is a wrapper (inspect unwraps it; leave
    that case to inspect). Everything ``@T.function`` reads of the file comes from this one
    list: the front-end cache's key and the parse agree on the text."""
    if getattr(pyfunc, "__wrapped__", None) is not None:
        return None
    filename = pyfunc.__code__.co_filename
    linecache.checkcache(filename)  # as inspect does: a file changed on disk is read again
    try:
        lines = linecache.getlines(filename, pyfunc.__globals__)
    except Exception:  # noqa: BLE001 - a module loader's get_source may raise anything
        return None
    return lines or None


def _lookup_def(pyfunc, lines: list[str]):
    """``(FunctionDef node, source text)`` of ``pyfunc`` from the AST of its whole file
    (``lines``, from :func:`_source_lines`), or None when it cannot be placed there (a file
    that does not parse, a file edited since the function was compiled, code from an exec
    string)."""
    code = pyfunc.__code__
    filename = code.co_filename
    memo = _TREES.get(filename)
    if memo is None or memo[0] is not lines:
        try:
            tree = ast.parse("".join(lines), filename)
        except (SyntaxError, ValueError):  # ValueError: null bytes in the source
            tree = None
        _TREES.pop(filename, None)
        for name in list(_TREES)[: len(_TREES) - _TREES_MAX + 1]:  # the oldest first
            _TREES.pop(name, None)
        _TREES[filename] = memo = (lines, tree)
    tree = memo[1]
    if tree is None:
        return None
    first = code.co_firstlineno  # the first decorator's line when there are decorators
    fdef = _find_def(tree, pyfunc.__name__, first)
    if fdef is None:
        return None
    return fdef, "".join(lines[first - 1 : fdef.end_lineno])


def _find_def(tree: ast.Module, name: str, first: int):
    """The ``def name`` (at any depth) whose first line (decorators included) is ``first``.

    Only statements whose lines contain ``first`` are entered, so this touches the path to
    the def and the siblings along it, not the whole tree."""
    todo = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                decorators = getattr(child, "decorator_list", None)
                start = decorators[0].lineno if decorators else child.lineno
                if not start <= first <= child.end_lineno:
                    continue
                if isinstance(child, ast.FunctionDef) and start == first and child.name == name:
                    return child
                todo.append(child)
            elif isinstance(child, (ast.excepthandler, ast.match_case)):
                todo.append(child)
    return None


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


def _indent_of(source: str) -> int:
    for line in source.splitlines():
        if line.strip():
            return len(line) - len(line.lstrip())
    return 0


class Parser:
    """Drives a :class:`FunctionBuilder` from the AST of one ``def``."""

    def __init__(self, filename: str, scope: dict, annotations=None):
        self.filename = filename
        self.scope = scope
        self.annotations = annotations or {}
        # What the parse depended on besides the def's text, for the front-end cache: the
        # names the body resolved outside itself (scope, builtins; in order), and whether it
        # compared objects by identity (``is`` with neither side None, True or False).
        self.free_names: dict[str, None] = {}
        self.compared_identity = False

    def span(self, node) -> Span:
        end = node.end_col_offset if getattr(node, "end_lineno", None) == node.lineno else None
        return Span(self.filename, node.lineno, node.col_offset, end)

    def parse(self, fdef: ast.FunctionDef) -> ir.Function:
        b = FunctionBuilder(fdef.name, self.span(fdef))
        self.b = b
        self.ev = Evaluator(self, b)
        self._check_signature(fdef)
        b.mutable_names = _mutable_names(fdef)
        assigned = _assigned_names(fdef)
        for arg in fdef.args.args:
            self._param(arg, arg.arg in assigned)
        body = list(fdef.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        if not body or not self._is_device_entry(body[0]):
            where = body[0] if body else fdef
            raise TirxSyntaxError(
                "a kernel must start with T.device_entry(launch=T.cuda.LaunchConfig(...))",
                self.span(where),
                hint="add T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32)) "
                "as the first statement",
            )
        self._device_entry(body[0])
        self.block(body[1:])
        return b.finish()

    # ------------------------------------------------------------------ signature

    def _check_signature(self, fdef):
        a = fdef.args
        extras = a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults
        if extras:
            raise TirxSyntaxError(
                "kernel parameters must be plain positional parameters with annotations",
                self.span(fdef),
            )
        if fdef.returns is not None:
            raise TirxSyntaxError(
                "a kernel returns nothing; remove the return annotation", self.span(fdef.returns)
            )

    def _param(self, arg: ast.arg, assigned: bool = False):
        span = self.span(arg)
        if arg.annotation is None:
            raise TirxSyntaxError(
                f"parameter {arg.arg!r} needs an annotation",
                span,
                hint='annotate it, e.g. A: T.Tensor((16, 16), "float16") or n: T.int32',
            )
        if arg.arg in self.annotations:
            ann = self.annotations[arg.arg]
        else:
            ann = self.ev.const(arg.annotation)
        if isinstance(ann, TensorAnnotation):
            self.b.add_tensor_param(arg.arg, ann.shape, ann.dtype, span)
        elif isinstance(ann, ScalarType):
            self.b.add_scalar_param(arg.arg, ann.dtype, span, assigned)
        else:
            raise TirxSyntaxError(
                f"parameter {arg.arg!r}: annotation must be T.Tensor(shape, dtype) or a scalar "
                f"type such as T.int32, got {ann!r}",
                self.span(arg.annotation),
            )

    def _is_device_entry(self, stmt) -> bool:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return False
        try:
            f = self.ev.const(stmt.value.func)
        except TirxError:
            return False
        return getattr(f, "key", None) == "device_entry"

    def _device_entry(self, stmt):
        call = stmt.value
        kw = {k.arg: self.ev.const(k.value) for k in call.keywords}
        launch = kw.pop("launch", None)
        if call.args and launch is None:
            launch = self.ev.const(call.args[0])
        if not isinstance(launch, LaunchSpec) or kw:
            raise TirxSyntaxError(
                "T.device_entry takes launch=T.cuda.LaunchConfig(grid=..., block=...)",
                self.span(call),
            )
        self.b.launch = ir.LaunchConfig(launch.grid, launch.block, launch.dynamic_smem_bytes)

    # ----------------------------------------------------------------- statements

    def block(self, stmts) -> None:
        """Parse a list of statements, and everything nested in them, without recursion.

        An ``elif`` chain nests each arm in the previous one's ``orelse``, and CPython compiles
        chains of thousands of arms: more than Python's recursion limit allows a recursive
        parser. So the handlers of compound statements (``if``, ``for``, ``while``) are
        generators: each yields the blocks inside it in order and resumes when that block is
        done, and this loop runs them from its own stack. A simple statement is parsed at once
        (:meth:`stmt`)."""
        stack: list = [(None, iter(stmts))]  # (compound node or None for a block, iterator)
        try:
            while stack:
                node, steps = stack[-1]
                if node is None:  # a block: its next statement
                    s = next(steps, None)
                    if s is None:
                        stack.pop()
                    elif type(s) in _COMPOUND:
                        stack.append((s, self._compound(s)))
                    else:
                        self.stmt(s)
                    continue
                try:
                    inner = next(steps, None)  # a compound statement's next block
                except TirxError as e:
                    raise e.with_span(self.span(node)) from None
                except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
                    raise TirxSyntaxError(str(e), self.span(node)) from None
                if inner is None:
                    stack.pop()
                else:
                    stack.append((None, iter(inner)))
        except BaseException:
            # leave the builder's scopes as the handlers' with-blocks would: innermost first
            for node, steps in reversed(stack):
                if node is not None:
                    steps.close()
            raise

    def _compound(self, node):
        return getattr(self, "stmt_" + type(node).__name__)(node)

    def stmt(self, node) -> None:
        """Parse one statement (a compound one with everything inside it)."""
        if type(node) in _COMPOUND:
            self.block([node])
            return
        handler = getattr(self, "stmt_" + type(node).__name__, None)
        if handler is None:
            raise TirxSyntaxError(
                f"{_describe(node)} is not supported in a tirx kernel",
                self.span(node),
                hint=_HINTS.get(type(node).__name__),
            )
        try:
            handler(node)
        except TirxError as e:
            raise e.with_span(self.span(node)) from None
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
            raise TirxSyntaxError(str(e), self.span(node)) from None

    def stmt_Pass(self, node):
        pass

    def stmt_Expr(self, node):
        if _is_docstring(node):
            return
        if not isinstance(node.value, ast.Call):
            raise TirxSyntaxError("an expression statement has no effect", self.span(node))
        value = self.ev.call(node.value)
        if value is not None:
            raise TirxSyntaxError(
                "this value is computed and dropped",
                self.span(node),
                hint="assign it to a name or remove the line",
            )

    def stmt_Assign(self, node):
        if len(node.targets) != 1:
            raise TirxSyntaxError(
                "chained assignment (a = b = ...) is not supported", self.span(node)
            )
        target = node.targets[0]
        if isinstance(target, ast.Name):
            value = self.ev.value(node.value, name_hint=target.id)
            self.b.assign(target.id, value, self.span(node))
        elif isinstance(target, ast.Subscript):
            self._store(target, self.ev.value(node.value), node)
        else:
            raise TirxSyntaxError(
                "only names and tensor elements can be assigned (no tuple unpacking)",
                self.span(target),
            )

    def stmt_AnnAssign(self, node):
        if not isinstance(node.target, ast.Name) or node.value is None:
            raise TirxSyntaxError("annotated assignment needs a name and a value", self.span(node))
        ann = self.ev.const(node.annotation)
        if not isinstance(ann, ScalarType):
            raise TirxSyntaxError(
                "annotate local variables with a scalar type, e.g. x: T.int32",
                self.span(node.annotation),
            )
        value = ir.cast(self.ev.value(node.value), ann.dtype)
        self.b.assign(node.target.id, value, self.span(node), force_var=True)

    def stmt_AugAssign(self, node):
        op = IR_BINOPS.get(type(node.op))
        if op is None:
            raise TirxSyntaxError(
                f"operator {type(node.op).__name__} is not supported", self.span(node)
            )
        rhs = self.ev.value(node.value)
        if isinstance(node.target, ast.Name):
            cur = self.ev.value(node.target)
            self.b.assign(node.target.id, self.ev.binop(op, cur, rhs), self.span(node))
        elif isinstance(node.target, ast.Subscript):
            cur = self.ev.value(node.target)
            self._store(node.target, self.ev.binop(op, cur, rhs), node)
        else:
            raise TirxSyntaxError("unsupported augmented assignment target", self.span(node))

    def _store(self, target: ast.Subscript, value, node):
        view = self.ev.value(target.value)
        if not isinstance(view, ir.View):
            raise TirxSyntaxError("only tensor elements can be assigned", self.span(target))
        indices = self.ev.indices(target.slice)
        self.b.store(view, indices, value, self.span(node))

    # The compound statements' handlers are generators that yield their inner blocks (see
    # :meth:`block`); a ``with`` around a ``yield`` closes its scope after that block.

    def stmt_For(self, node):
        if node.orelse:
            raise TirxSyntaxError("for ... else is not supported", self.span(node))
        if not isinstance(node.target, ast.Name):
            raise TirxSyntaxError("the loop variable must be a single name", self.span(node.target))
        start, stop, step, kind = self.ev.loop_range(node.iter)
        with self.b.loop(node.target.id, start, stop, step, kind, self.span(node)):
            yield node.body

    def stmt_While(self, node):
        if node.orelse:
            raise TirxSyntaxError("while ... else is not supported", self.span(node))
        cond = self.ev.condition(node.test)
        with self.b.while_loop(cond, self.span(node)):
            yield node.body

    def stmt_If(self, node):
        cond = self.ev.condition(node.test)
        if isinstance(cond, bool):  # static if: trace only the taken branch
            with self.b.static_branch():
                yield node.body if cond else node.orelse
            return
        with self.b.branch(cond, self.span(node)) as br:
            yield node.body
            if node.orelse:
                br.else_()
                yield node.orelse

    def stmt_Break(self, node):
        self.b.loop_control(ir.Break(self.span(node)))

    def stmt_Continue(self, node):
        self.b.loop_control(ir.Continue(self.span(node)))


# Statements whose handlers are generators over their inner blocks (see Parser.block).
_COMPOUND = frozenset({ast.If, ast.For, ast.While})

_HINTS = {
    "Return": "kernels write their results into tensor parameters; use an if around the rest",
    "With": "with-blocks are not part of the language",
    "Try": "exceptions do not exist on the GPU",
    "FunctionDef": "define helper functions outside the kernel",
    "Import": "import at module level; the kernel can use captured names",
    "ImportFrom": "import at module level; the kernel can use captured names",
    "Global": "kernels cannot write Python globals",
    "Nonlocal": "kernels cannot write Python variables",
    "Delete": "kernel variables live until the kernel ends",
    "Raise": "exceptions do not exist on the GPU",
    "Assert": "use an if and T.cuda.printf to report a condition",
}


def _describe(node) -> str:
    names = {
        "Return": "return",
        "With": "a with-statement",
        "Try": "try/except",
        "FunctionDef": "a nested function",
        "ClassDef": "a class definition",
        "Import": "import",
        "ImportFrom": "import",
        "Raise": "raise",
        "Assert": "assert",
        "Delete": "del",
        "Global": "global",
        "Nonlocal": "nonlocal",
        "AsyncFor": "async for",
        "AsyncWith": "async with",
        "AsyncFunctionDef": "an async function",
        "Match": "match",
    }
    return names.get(type(node).__name__, f"the statement {type(node).__name__}")


def _is_docstring(node) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _assigned_names(fdef) -> frozenset[str]:
    """Every name the body assigns (plain, annotated or augmented assignment, loop target)."""
    names = set()
    for node in ast.walk(fdef):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


def _mutable_names(fdef) -> frozenset[str]:
    """Names that must be kernel variables: assigned more than once, in a loop, in a branch,
    or by augmented assignment. A name assigned once at the top level may stay a compile-time
    value (an int, a view, a layout)."""
    counts: dict[str, int] = {}
    mutable: set[str] = set()
    todo = [(fdef.body, False)]  # (statements, nested): an explicit stack, for elif chains
    while todo:
        stmts, nested = todo.pop()
        for s in stmts:
            targets = []
            if isinstance(s, ast.Assign):
                targets = [t.id for t in s.targets if isinstance(t, ast.Name)]
            elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                targets = [s.target.id]
                mutable.add(s.target.id)
            elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
                mutable.add(s.target.id)
            for t in targets:
                counts[t] = counts.get(t, 0) + 1
                if nested:
                    mutable.add(t)
            for field in ("body", "orelse"):
                inner = getattr(s, field, None)
                if isinstance(inner, list) and not isinstance(s, ast.FunctionDef):
                    todo.append((inner, True))
    mutable.update(n for n, c in counts.items() if c > 1)
    return frozenset(mutable)
