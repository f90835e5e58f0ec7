"""A kernel's or a macro's source: where its ``def`` is (without ``inspect``'s tokenizer), and
what its body assigns (which names must become kernel variables)."""

from __future__ import annotations

import ast
import linecache

__all__ = ["source_lines", "lookup_def", "is_docstring", "assigned_names", "mutable_names"]


# Source lookup without inspect.getsourcelines, whose inspect.getblock runs the pure-Python
# tokenizer (and compiles tokenize's large regular expressions on first use): several
# milliseconds per process. Instead the def's own lines (as linecache holds them, which
# includes notebook cells) are parsed with ast.parse, placed at their own line and column
# numbers: the lines before them are left blank, and an indented def (a method, a def in a
# function) is put under an ``if 1:`` on the line above it. The Parser then gets the node as
# it is. Where the def's lines cannot be told that way (see _def_lines) the whole file is
# parsed, and its tree kept per file name while linecache still returns the very same list of
# lines (a re-read, after checkcache sees the file changed, is a new list). The Parser only
# reads the AST: one memoized node serves the same kernel made twice by a factory function.
_TREES: dict[str, tuple[list, ast.Module | None]] = {}
_TREES_MAX = 16  # files remembered (notebooks make a new "file" per cell run)
_DEFS: dict[tuple[str, int], tuple[list, ast.FunctionDef]] = {}
_DEFS_MAX = 256  # defs remembered


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
    """``(FunctionDef node, source text)`` of ``pyfunc`` from ``lines`` (its file's, from
    :func:`source_lines`), or None when it cannot be placed there (a file that does not parse,
    a file edited since the function was compiled, code from an exec string)."""
    code = pyfunc.__code__
    first = code.co_firstlineno  # the first decorator's line when there are decorators
    key = (code.co_filename, first)
    memo = _DEFS.get(key)
    if memo is not None and memo[0] is lines and memo[1].name == pyfunc.__name__:
        fdef = memo[1]
    else:
        fdef = _parse_def(code, pyfunc.__name__, lines)
        if fdef is None:
            fdef = _file_def(code, pyfunc.__name__, lines)
        if fdef is not None:
            _remember(_DEFS, key, (lines, fdef), _DEFS_MAX)
    if fdef is None:
        return None
    return fdef, "".join(lines[first - 1 : fdef.end_lineno])


def _parse_def(code, name: str, lines: list[str]):
    """The ``def`` that starts at ``code``'s first line, parsed from its own lines (see
    :func:`_def_lines`) at their line and column numbers; None where those lines do not parse
    to exactly that def."""
    span = _def_lines(code, lines)
    if span is None:
        return None
    first, end, indented = span
    if indented:  # under an ``if 1:`` on the line above, which is blank then
        text = "\n" * (first - 2) + "if 1:\n" + "".join(lines[first - 1 : end])
    else:
        text = "\n" * (first - 1) + "".join(lines[first - 1 : end])
    try:
        tree = ast.parse(text, code.co_filename)
    except (SyntaxError, ValueError):  # lines not told right (or a file that does not parse)
        return None
    body = tree.body[0].body if indented and len(tree.body) == 1 else tree.body
    if len(body) != 1 or not isinstance(body[0], ast.FunctionDef):
        return None
    fdef = body[0]
    start = fdef.decorator_list[0].lineno if fdef.decorator_list else fdef.lineno
    return fdef if fdef.name == name and start == first else None


def _def_lines(code, lines: list[str]):
    """``(first, end, indented)``: the def of ``code`` spans lines ``first..end`` (1-based,
    inclusive) of ``lines``, told without tokenizing. It runs to the last line the body has
    code on (``co_lines``), then on over the lines deeper than the def's own, blank lines and
    comments: the rest of that last statement, and nested defs (whose code is in their own
    code objects). A line that breaks this (a string running on at a shallower indent) ends
    the span early; the parse then fails and the caller parses the whole file."""
    first = code.co_firstlineno
    if not 1 <= first <= len(lines):
        return None
    head = lines[first - 1]
    indent = len(head) - len(head.lstrip(" \t"))
    if indent and first < 2:
        return None
    end = max((line for *_, line in code.co_lines() if line is not None), default=first)
    end = max(end, first)
    if end > len(lines):
        return None
    while end < len(lines):
        text = lines[end]
        stripped = text.lstrip(" \t")
        deeper = len(text) - len(stripped) > indent
        if stripped.strip() and not stripped.startswith("#") and not deeper:
            break
        end += 1
    return first, end, bool(indent)


def _file_def(code, name: str, lines: list[str]):
    """The def from the AST of the whole file (``lines``), kept per file name."""
    filename = code.co_filename
    memo = _TREES.get(filename)
    if memo is None or memo[0] is not lines:
        try:
            tree = ast.parse("".join(lines), filename)
        except (SyntaxError, ValueError):  # ValueError: null bytes in the source
            tree = None
        _remember(_TREES, filename, (lines, tree), _TREES_MAX)
        memo = _TREES[filename]
    tree = memo[1]
    return None if tree is None else _find_def(tree, name, code.co_firstlineno)


def _remember(memo: dict, key, value, most: int) -> None:
    """``memo[key] = value``, as the newest entry, dropping the oldest beyond ``most``."""
    memo.pop(key, None)
    for old in list(memo)[: len(memo) - most + 1]:  # the oldest first
        memo.pop(old, None)
    memo[key] = value


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
    """Names that must be kernel variables: assigned more than once on one path through the
    body (the two branches of an ``if`` are two paths: only one of a static ``if``'s is built),
    in a loop, or by annotated or augmented assignment. A name assigned once at the top level,
    or in the taken branch of a static ``if``, may stay a compile-time value (an int, a view, a
    layout); one assigned in a run-time branch becomes a variable there
    (:meth:`~tirx.script.builder.FunctionBuilder.assign`)."""
    mutable: set[str] = set()
    blocks: list = []  # every statement list, each after the one that holds it
    todo = [(fdef.body, False)]  # (statements, in a loop): an explicit stack, for elif chains
    while todo:
        stmts, looped = todo.pop()
        blocks.append(stmts)
        for s in stmts:
            if isinstance(s, (ast.AnnAssign, ast.AugAssign)) and isinstance(s.target, ast.Name):
                mutable.add(s.target.id)
            if looped:
                mutable.update(_assigned(s))
            if isinstance(s, ast.FunctionDef):
                continue
            inner_looped = looped or not isinstance(s, ast.If)  # a loop (or a with, a try)
            for field in ("body", "orelse"):
                inner = getattr(s, field, None)
                if isinstance(inner, list) and inner:
                    todo.append((inner, inner_looped))
    counts: dict[int, dict[str, int]] = {}  # a statement list's assignments on one path
    for stmts in reversed(blocks):
        total: dict[str, int] = {}
        for s in stmts:
            for name in _assigned(s):
                total[name] = total.get(name, 0) + 1
            if isinstance(s, ast.FunctionDef):
                continue
            inner = [
                counts.pop(id(b), {})
                for b in (getattr(s, "body", None), getattr(s, "orelse", None))
                if isinstance(b, list) and b
            ]
            if isinstance(s, ast.If) and len(inner) == 2:  # one branch runs: the larger count
                big, small = sorted(inner, key=len, reverse=True)
                for name, k in small.items():
                    big[name] = max(big.get(name, 0), k)
                inner = [big]
            for part in inner:
                if len(part) > len(total):
                    total, part = part, total
                for name, k in part.items():
                    total[name] = total.get(name, 0) + k
        counts[id(stmts)] = total
    mutable.update(n for n, k in counts[id(fdef.body)].items() if k > 1)
    return frozenset(mutable)


def _assigned(s) -> list[str]:
    """The names statement ``s`` itself assigns (not the statements inside it)."""
    if isinstance(s, ast.Assign):
        return [t.id for t in s.targets if isinstance(t, ast.Name)]
    if isinstance(s, (ast.AnnAssign, ast.AugAssign)) and isinstance(s.target, ast.Name):
        return [s.target.id]
    return []
