"""A kernel's or a macro's source: where its ``def`` is (without ``inspect``'s tokenizer), and
what its body assigns (which names must become kernel variables)."""

from __future__ import annotations

import ast
import linecache

__all__ = ["source_lines", "lookup_def", "is_docstring", "assigned_names", "mutable_names"]


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


def source_lines(pyfunc) -> list[str] | None:
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


def lookup_def(pyfunc, lines: list[str]):
    """``(FunctionDef node, source text)`` of ``pyfunc`` from the AST of its whole file
    (``lines``, from :func:`source_lines`), or None when it cannot be placed there (a file
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


def is_docstring(node) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def assigned_names(fdef) -> frozenset[str]:
    """Every name the body assigns (plain, annotated or augmented assignment, loop target).

    Only statements assign, so only statement lists are walked (every field that holds one,
    ``except`` handlers' and ``match`` cases' included), not the expressions: a whole-tree
    ``ast.walk`` costs a cold parse about a millisecond."""
    names = set()
    todo = [fdef]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list and value and isinstance(value[0], _HOLDERS):
                todo.extend(value)
    return frozenset(names)


_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)  # nodes with statement bodies


def mutable_names(fdef) -> frozenset[str]:
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
