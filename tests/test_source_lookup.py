"""``@T.function`` finds a kernel's ``def`` by parsing its own lines (else its whole file's AST,
memoized per file), not through ``inspect.getsourcelines``; it falls back to inspect when the
def cannot be placed."""

from __future__ import annotations

import ast
import inspect
import itertools
import linecache
import os
import textwrap

import pytest

import tirx
from tests.helpers import PRELUDE, caret_line, define
from tirx.script import parser, source

_cells = itertools.count()

KERNEL = """\
@T.function
def k(A: T.Tensor((4,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=4))
    A[0] = {value}
"""


@pytest.fixture
def no_inspect(monkeypatch):
    """Fail the test if the slow path (inspect.getsourcelines) runs."""

    def boom(*args, **kwargs):
        raise AssertionError("inspect.getsourcelines was called")

    monkeypatch.setattr(inspect, "getsourcelines", boom)


def _lines_of(path) -> list[str]:
    return linecache.getlines(str(path))


def _line_of(path, text: str, start: int = 1) -> int:
    """1-based number of the first line at or after ``start`` that contains ``text``."""
    for n, line in enumerate(_lines_of(path), 1):
        if n >= start and text in line:
            return n
    raise AssertionError(f"{text!r} not in {path}")


def test_same_name_twice_in_one_file_parses_the_right_def(tmp_path, no_inspect):
    ns = define(
        KERNEL.format(value=1) + "\nfirst = k\n\n\n" + KERNEL.format(value=2),
        tmp_path,
    )
    first, second = ns["first"], ns["k"]
    assert "A[0] = 1" in first.script() and "A[0] = 2" not in first.script()
    assert "A[0] = 2" in second.script()
    path = first.ir.span.file
    assert first.ir.span.line == _line_of(path, "def k(")
    assert second.ir.span.line == _line_of(path, "def k(", first.ir.span.line + 1)
    assert first.source == KERNEL.format(value=1)
    assert second.source == KERNEL.format(value=2)


def test_kernel_inside_a_function_of_the_same_name(tmp_path, no_inspect):
    ns = define(
        """
        def k(v):
            @T.function
            def k(A: T.Tensor((4,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=4))
                A[0] = v
            return k

        inner = k(3)
        """,
        tmp_path,
    )
    inner = ns["inner"]
    assert "A[0] = 3" in inner.script()
    assert inner.ir.span.line == _line_of(inner.ir.span.file, "def k(A")


def test_kernel_in_a_factory_uses_closure_values(tmp_path, no_inspect):
    ns = define(
        """
        def make(n, value):
            scale = value * 10

            @T.function
            def k(A: T.Tensor((n,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=n))
                A[0] = scale + value

            return k

        k3 = make(4, 3)
        k5 = make(8, 5)
        """,
        tmp_path,
    )
    k3, k5 = ns["k3"], ns["k5"]
    assert "A[0] = 33" in k3.script() and "T.Tensor((4,)" in k3.script()
    assert "A[0] = 55" in k5.script() and "T.Tensor((8,)" in k5.script()
    assert k3.ir.span == k5.ir.span  # the same def, at its absolute line and column
    assert k3.ir.span.col == 4
    assert k3.source.startswith("    @T.function\n    def k(")
    assert k3.source.endswith("        A[0] = scale + value\n")


def test_factory_twice_shares_one_def_node_and_leaves_it_intact(no_inspect, monkeypatch):
    from tirx.examples import gemm

    monkeypatch.setenv("TIRX_CACHE", "0")  # parsed here, not found in the front-end cache

    small = gemm.make_gemm(64, 64, 16)
    key = (small.pyfunc.__code__.co_filename, small.pyfunc.__code__.co_firstlineno)
    lines, fdef = source._DEFS[key]
    assert lines is source.source_lines(small.pyfunc)
    before = ast.dump(fdef, include_attributes=True)
    big = gemm.make_gemm(128, 128, 32, "bfloat16")
    again = gemm.make_gemm(64, 64, 16)
    assert source._DEFS[key][1] is fdef  # parsed once, reused
    assert ast.dump(fdef, include_attributes=True) == before  # the parser did not mutate it
    assert small.script() == again.script()
    assert "T.Tensor((64, 16)" in small.script() and "T.Tensor((128, 32)" in big.script()
    assert "bf16" in big.script() and "bf16" not in small.script()
    target = "cuda -arch=sm_80"
    assert tirx.compile(small, target).source == tirx.compile(again, target).source


def _code_objects(code):
    for c in code.co_consts:
        if isinstance(c, type(code)):
            yield c
            yield from _code_objects(c)


def test_a_def_parsed_alone_is_the_def_of_the_whole_file():
    """Every function of tirx's own files, parsed from its own lines, is node for node (line
    and column numbers included) what the whole file's AST holds; the few whose lines cannot
    be told without tokenizing are left to the whole-file parse."""
    root = os.path.dirname(tirx.__file__)
    same = alone_failed = 0
    for folder, _, files in os.walk(root):
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            lines = text.splitlines(keepends=True)
            tree = ast.parse(text, path)
            for code in _code_objects(compile(text, path, "exec")):
                whole = source._find_def(tree, code.co_name, code.co_firstlineno)
                if whole is None:  # a lambda, a comprehension, a class body
                    continue
                alone = source._parse_def(code, code.co_name, lines)
                if alone is None:
                    alone_failed += 1
                    continue
                assert ast.dump(alone, include_attributes=True) == ast.dump(
                    whole, include_attributes=True
                ), f"{path}:{code.co_firstlineno} {code.co_name}"
                same += 1
    assert same > 1000 and alone_failed <= same // 100


STRINGS = """
def plain():
    return 1


class Holder:
    def method(self, x):
        y = (x +
  1)  # code on a line shallower than the body: co_lines names it
        return \"\"\"a string whose lines
start at the first column
\"\"\"

    def after(self):
        return 2
"""


def test_lines_that_run_on_at_a_shallower_indent_fall_back_to_the_whole_file(tmp_path):
    path = tmp_path / "strings_mod.py"
    path.write_text(STRINGS)
    ns: dict = {}
    exec(compile(STRINGS, str(path), "exec"), ns)  # noqa: S102
    method, after = ns["Holder"].method, ns["Holder"].after
    lines = source.source_lines(method)
    # the def's own lines, told without tokenizing, end inside the string: they do not parse
    assert source._parse_def(method.__code__, "method", lines) is None
    # ... and the whole file places the def, as it places the defs around it alone
    fdef, text = source.lookup_def(method, lines)
    assert (fdef.name, fdef.lineno, fdef.col_offset, fdef.end_lineno) == ("method", 7, 4, 12)
    assert text.startswith("    def method(self, x):\n        y = (x +\n  1)")
    assert text.endswith('start at the first column\n"""\n')
    assert source._parse_def(after.__code__, "after", lines).lineno == 14
    assert source.lookup_def(ns["plain"], lines)[0].lineno == 2


def test_decorators_above_t_function(tmp_path, no_inspect):
    ns = define(
        """
        def tag(*names):
            return lambda kernel: kernel

        @tag(
            "a",
            "b",
        )
        @tag()
        @T.function
        def k(A: T.Tensor((4,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=4))
            A[0] = 9
        """,
        tmp_path,
    )
    k = ns["k"]
    assert "A[0] = 9" in k.script()
    assert k.source.startswith('@tag(\n    "a",\n    "b",\n)\n@tag()\n@T.function\ndef k(')
    assert k.ir.span.line == _line_of(k.ir.span.file, "def k(")


def test_file_edited_after_import_falls_back_to_inspect(tmp_path):
    k = define(KERNEL.format(value=1), tmp_path, "k")
    path = k.ir.span.file
    old_first = k.pyfunc.__code__.co_firstlineno
    # Two lines more above the kernel, which now writes 2: the def is no longer at the line
    # the code object names, so the lookup cannot place it ...
    with open(path, "w") as f:
        f.write(PRELUDE + "x = 1\ny = 2\n" + KERNEL.format(value=2))
    os.utime(path, ns=(1, 1))  # a different mtime for linecache.checkcache, whatever the clock
    assert source.lookup_def(k.pyfunc, source.source_lines(k.pyfunc)) is None
    # ... and inspect, which reads on from that line to the next def, parses the file as it is
    # now (as @T.function always did for a file changed on disk).
    again = tirx.T.function(k.pyfunc)
    assert "A[0] = 2" in again.script()
    assert again.ir.span.line == old_first + 3  # the def line of the edited file


def test_file_deleted_after_import_says_so(tmp_path):
    k = define(KERNEL.format(value=1), tmp_path, "k")
    os.remove(k.ir.span.file)
    with pytest.raises(tirx.TirxSyntaxError, match="cannot read the source of 'k'"):
        tirx.T.function(k.pyfunc)


NESTED = """
class Kernels:
    def make(self):
        if True:
            @T.function
            def k(A: T.Tensor((4,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=4))
                lane = T.cuda.lane_id()
                A[0] = lane +   undefined_thing
            return k

Kernels().make()
"""


def _nested_error(tmp_path):
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(NESTED, tmp_path)
    return info.value


def test_error_in_a_nested_kernel_points_at_its_absolute_line_and_column(
    tmp_path, monkeypatch, no_inspect
):
    err = _nested_error(tmp_path)
    line = _line_of(err.span.file, "undefined_thing")
    text = _lines_of(err.span.file)[line - 1]
    assert (err.span.line, err.span.col) == (line, text.index("undefined_thing"))
    assert err.span.end_col == text.index("undefined_thing") + len("undefined_thing")
    assert caret_line(str(err)) == "A[0] = lane +   undefined_thing"
    assert str(err).splitlines()[-1].strip() == "^" * len("undefined_thing")
    # the slow path (dedent, parse, shift back) reports exactly the same place
    monkeypatch.undo()
    monkeypatch.setattr(parser, "lookup_def", lambda pyfunc, lines: None)
    slow = _nested_error(tmp_path)
    assert slow.span.line == _line_of(slow.span.file, "undefined_thing")
    assert (slow.span.col, slow.span.end_col) == (err.span.col, err.span.end_col)
    assert str(slow).replace(slow.span.file, "F") == str(err).replace(err.span.file, "F")


@pytest.fixture
def cell():
    """``cell(text)``: register ``text`` in linecache only (as a notebook cell is), run it and
    return its name and namespace; the entries go away after the test."""
    names = []

    def run(text: str) -> tuple[str, dict]:
        name = f"<test-cell-{next(_cells)}>"
        names.append(name)
        lines = text.splitlines(keepends=True)
        linecache.cache[name] = (len(text), None, lines, name)
        g: dict = {"__name__": "test_cell"}
        exec(compile(text, name, "exec"), g)  # noqa: S102
        return name, g

    yield run
    for name in names:
        linecache.cache.pop(name, None)


def test_source_registered_only_in_linecache(cell, no_inspect):
    text = PRELUDE + textwrap.dedent(
        """
        def make():
            @T.function
            def k(A: T.Tensor((4,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=4))
                A[0] = 4
            return k

        k = make()
        """
    )
    name, g = cell(text)
    k = g["k"]
    assert "A[0] = 4" in k.script()
    assert k.ir.span.file == name
    assert k.ir.span.line == text.splitlines().index('    def k(A: T.Tensor((4,), "int32")):') + 1
    assert k.source == textwrap.indent(KERNEL.format(value=4), "    ")


def test_error_in_a_linecache_cell_quotes_the_cell(cell, no_inspect):
    text = PRELUDE + KERNEL.format(value="no_such_name")
    with pytest.raises(tirx.TirxSyntaxError) as info:
        cell(text)
    err = info.value
    assert err.span.file.startswith("<test-cell-")
    assert (err.span.line, err.span.col) == (len(text.splitlines()), len("    A[0] = "))
    assert caret_line(str(err)) == "A[0] = no_such_name"


def test_parse_source_still_parses_an_indented_snippet():
    snippet = textwrap.indent(KERNEL.format(value=3), "        ")
    func = parser.parse_source(snippet, "snippet.py", 20, {"T": tirx.T})
    assert func.name == "k"
    assert (func.span.file, func.span.line, func.span.col) == ("snippet.py", 21, 8)
