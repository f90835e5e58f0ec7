"""The parser names every Python construct it refuses in the user's words (tirx/script/refusals.py).

Every AST class of Python 3.10, 3.11 and 3.12 is accounted for: a statement or expression the
parser handles, one it refuses with a plain name, an operator named by its spelling, or a node
that only lives inside another one (whose refusal or handling covers it). Each refusal that a
kernel can contain on this Python is then written in a kernel and must come back at that
construct, in words, with a hint; none of the messages names an AST class.
"""

from __future__ import annotations

import ast
import sys

import numpy as np
import pytest

import tirx
from tests.helpers import caret_text, define
from tirx.script import refusals
from tirx.script.evaluator import Evaluator
from tirx.script.statements import SCALAR_PARAMETER_DTYPES, Parser

# The classes of the ast module on each supported Python (module-level names of AST
# subclasses), so that the table is checked for 3.10 and 3.12 on a 3.11 interpreter too.
PY310 = """
Add And AnnAssign Assert Assign AsyncFor AsyncFunctionDef AsyncWith Attribute AugAssign AugLoad
AugStore Await BinOp BitAnd BitOr BitXor BoolOp Break Bytes Call ClassDef Compare Constant
Continue Del Delete Dict DictComp Div Ellipsis Eq ExceptHandler Expr Expression ExtSlice
FloorDiv For FormattedValue FunctionDef FunctionType GeneratorExp Global Gt GtE If IfExp Import
ImportFrom In Index Interactive Invert Is IsNot JoinedStr LShift Lambda List ListComp Load Lt
LtE MatMult Match MatchAs MatchClass MatchMapping MatchOr MatchSequence MatchSingleton MatchStar
MatchValue Mod Module Mult Name NameConstant NamedExpr Nonlocal Not NotEq NotIn Num Or Param
Pass Pow RShift Raise Return Set SetComp Slice Starred Store Str Sub Subscript Suite Try Tuple
TypeIgnore UAdd USub UnaryOp While With Yield YieldFrom alias arg arguments boolop cmpop
comprehension excepthandler expr expr_context keyword match_case mod operator pattern slice
stmt type_ignore unaryop withitem AST
""".split()
PY311 = PY310 + ["TryStar"]
PY312 = PY311 + ["TypeAlias", "TypeVar", "ParamSpec", "TypeVarTuple", "type_param"]

HANDLED_STATEMENTS = {"Assign", "AnnAssign", "AugAssign", "For", "While", "If", "Expr", "Pass",
                      "Break", "Continue"}  # fmt: skip
HANDLED_EXPRESSIONS = {"BoolOp", "BinOp", "UnaryOp", "IfExp", "Compare", "Call", "Constant",
                       "Attribute", "Subscript", "Name", "List", "Tuple", "Slice"}  # fmt: skip
# Nodes that only exist inside another node, with what covers them.
PARTS = {
    **dict.fromkeys(["AST", "mod", "stmt", "expr", "expr_context", "boolop", "operator",
                     "unaryop", "cmpop", "excepthandler", "pattern", "type_ignore", "type_param",
                     "slice"], "an abstract base class"),
    **dict.fromkeys(["Module", "Interactive", "Expression", "FunctionType", "TypeIgnore"],
                    "a whole module or eval input, never inside a def"),
    **dict.fromkeys(["Load", "Store", "Del", "AugLoad", "AugStore", "Param"],
                    "the context of a name (the statement around it decides)"),
    **dict.fromkeys(["Num", "Str", "Bytes", "NameConstant", "Ellipsis", "Index", "ExtSlice",
                     "Suite"], "deprecated: ast.parse makes Constant, Slice or Tuple instead"),
    "comprehension": "the comprehensions (refused)",
    "ExceptHandler": "Try and TryStar (refused)",
    "arguments": "FunctionDef and Lambda (refused), and the kernel's signature (checked)",
    "arg": "FunctionDef and Lambda (refused), and the kernel's parameters (checked)",
    "keyword": "Call (handled; f(**x) is refusals.DOUBLE_STAR)",
    "alias": "Import and ImportFrom (refused)",
    "withitem": "With and AsyncWith (refused)",
    "match_case": "Match (refused)",
    **dict.fromkeys(["MatchAs", "MatchClass", "MatchMapping", "MatchOr", "MatchSequence",
                     "MatchSingleton", "MatchStar", "MatchValue"], "Match (refused)"),
    **dict.fromkeys(["TypeVar", "ParamSpec", "TypeVarTuple"],
                    "a generic def (refused at the kernel's signature) or TypeAlias (refused)"),
}  # fmt: skip


def _running_classes() -> set[str]:
    return {
        name
        for name, value in vars(ast).items()
        if isinstance(value, type) and issubclass(value, ast.AST) and not name.startswith("_")
    }


ALL = sorted(set(PY310) | set(PY311) | set(PY312) | _running_classes())


@pytest.mark.parametrize("name", ALL)
def test_every_ast_class_is_handled_refused_or_part_of_another(name):
    homes = [
        name in HANDLED_STATEMENTS,
        name in HANDLED_EXPRESSIONS,
        name in refusals.CONSTRUCTS,
        name in refusals.OPERATORS,
        name in PARTS,
    ]
    assert sum(homes) == 1, f"{name}: {homes}"


def test_the_tables_agree_with_the_parser():
    """A refused class has no handler; a handled one has one (so neither table is stale)."""
    for name in refusals.CONSTRUCTS:
        assert not hasattr(Parser, "stmt_" + name) and not hasattr(Evaluator, "ex_" + name), name
    for name in HANDLED_STATEMENTS:
        assert hasattr(Parser, "stmt_" + name), name
    for name in HANDLED_EXPRESSIONS - {"Call", "BoolOp", "Compare"}:
        assert hasattr(Evaluator, "ex_" + name), name


@pytest.mark.parametrize("name", sorted(refusals.CONSTRUCTS))
def test_each_refusal_is_in_words_with_a_hint(name):
    what, instead = refusals.CONSTRUCTS[name]
    assert what and instead
    node = type(name, (ast.AST,), {})()  # the class itself may be another Python's
    err = refusals.refusal(node, None)
    assert err.message == f"{what} is not part of the kernel language"
    assert err.hint == instead
    _no_class_names(err)


def _no_class_names(err) -> None:
    """No CamelCase AST class name in the message (lower-case ones are English words)."""
    words = set(str(err).replace("(", " ").replace(")", " ").replace(",", " ").split())
    leaked = {w for w in words & set(ALL) if w[0].isupper()}
    assert not leaked, f"{leaked} in {err}"


HEAD = """
@T.function
def k(A: T.Tensor((16, 16), "float16"), Out: T.Tensor((16, 8), "float32"), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
"""
# A kernel line with each refused construct, and the text the caret must be under. Await,
# async for and async with cannot be written in a plain def (Python refuses them first).
SNIPPETS = {
    "FunctionDef": ("    def f(q):\n        pass\n", "def f(q):"),
    "AsyncFunctionDef": ("    async def f(q):\n        pass\n", "async def f(q):"),
    "ClassDef": ("    class C:\n        pass\n", "class C:"),
    "Return": ("    return\n", "return"),
    "Delete": ("    del lane\n", "del lane"),
    "TypeAlias": ("    type X = int\n", "type X = int"),
    "With": ("    with open('f'):\n        pass\n", "with open('f'):"),
    "Match": ("    match n:\n        case 1:\n            pass\n", "match n:"),
    "Raise": ("    raise ValueError('n')\n", "raise ValueError('n')"),
    "Try": ("    try:\n        pass\n    except Exception:\n        pass\n", "try:"),
    "TryStar": ("    try:\n        pass\n    except* ValueError:\n        pass\n", "try:"),
    "Assert": ("    assert n > 0\n", "assert n > 0"),
    "Import": ("    import math\n", "import math"),
    "ImportFrom": ("    from math import pi\n", "from math import pi"),
    "Global": ("    global g\n", "global g"),
    "Nonlocal": ("    nonlocal g\n", "nonlocal g"),
    "NamedExpr": ("    x = (y := lane) + 1\n", "y := lane"),
    "Lambda": ("    f = lambda q: q\n", "lambda q: q"),
    "Dict": ("    d = {0: 1}\n", "{0: 1}"),
    "Set": ("    s = {0, 1}\n", "{0, 1}"),
    "ListComp": ("    xs = [i for i in range(3)]\n", "[i for i in range(3)]"),
    "SetComp": ("    xs = {i for i in range(3)}\n", "{i for i in range(3)}"),
    "DictComp": ("    xs = {i: i for i in range(3)}\n", "{i: i for i in range(3)}"),
    "GeneratorExp": ("    xs = (i for i in range(3))\n", "(i for i in range(3))"),
    "Yield": ("    x = yield lane\n", "yield lane"),
    "YieldFrom": ("    x = yield from range(3)\n", "yield from range(3)"),
    "JoinedStr": ("    T.cuda.printf(f'{lane}')\n", "f'{lane}'"),
    "FormattedValue": ("    T.cuda.printf(f'{lane}')\n", "f'{lane}'"),  # inside its f-string
    "Starred": ("    T.cuda.printf('%d %d', *n)\n", "*n"),  # a compile-time tuple would spread
}
NOT_IN_A_PLAIN_DEF = {"Await", "AsyncFor", "AsyncWith"}
NEWER = {"TypeAlias": (3, 12), "TryStar": (3, 11)}


def test_every_refusal_has_a_kernel_line():
    assert set(refusals.CONSTRUCTS) == set(SNIPPETS) | NOT_IN_A_PLAIN_DEF


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_each_refused_construct_is_named_at_its_place(name, tmp_path):
    if sys.version_info < NEWER.get(name, (3, 0)):
        pytest.skip(f"{name} is Python {NEWER[name]} syntax")
    body, under = SNIPPETS[name]
    source = HEAD + body
    if name == "Nonlocal":  # nonlocal needs an enclosing binding
        source = "def outer():\n    g = 0\n" + _indent(source) + "    return k\nk = outer()\n"
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(source, tmp_path, "k")
    err = info.value
    what = refusals.CONSTRUCTS["JoinedStr" if name == "FormattedValue" else name][0]
    assert err.message.startswith(what), err
    assert err.hint, err
    _no_class_names(err)
    assert caret_text(str(err)).startswith(under), str(err)


def _indent(text: str) -> str:
    return "".join("    " + ln if ln.strip() else ln for ln in text.splitlines(True))


@pytest.mark.parametrize("name", sorted(refusals.OPERATORS))
def test_operators_are_named_by_their_spelling(name):
    assert refusals.OPERATORS[name] != name


def test_scalar_parameter_types_are_those_the_launcher_packs():
    from tirx.backend.cuda import abi

    assert set(abi._PARAM_KIND) == SCALAR_PARAMETER_DTYPES


def test_an_async_kernel_is_refused_at_its_def(tmp_path):
    src = """
    @T.function
    async def k(Out: T.Tensor((32,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    """
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(src, tmp_path, "k")
    assert "a kernel is a plain def, not an async def" in info.value.message
    assert caret_text(str(info.value)).startswith("async def k(")
    assert "remove async" in info.value.hint
    define(src.replace("async def", "def"), tmp_path, "k")


@pytest.mark.skipif(sys.version_info < (3, 12), reason="def k[T](...) is Python 3.12 syntax")
def test_a_generic_kernel_is_refused_at_its_type_parameters(tmp_path):
    src = """
    @T.function
    def k[D](Out: T.Tensor((32,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    """
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(src, tmp_path, "k")
    assert "a generic kernel" in info.value.message
    assert caret_text(str(info.value)).startswith("D](")
    assert "factory" in info.value.hint
    define(src.replace("k[D](", "k("), tmp_path, "k")


def test_compile_time_only_operators_work_on_compile_time_values(tmp_path):
    """``**`` and ``in`` are Python's on compile-time operands (the kernel writes the folded
    values)."""
    k = define(
        """
        @T.function
        def k(Out: T.Tensor((4,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            K = 3**2
            Out[0] = K
            Out[1] = 2 ** 5
            Out[2] = 1 if K in (9, 16) else 0
            Out[3] = 1 if K not in (9, 16) else 0
        """,
        tmp_path,
        "k",
    )
    import torch

    out = torch.zeros(4, dtype=torch.int32)
    tirx.compile(k, target="sim")(out)
    assert out.tolist() == [9, 32, 1, 0]


def test_tuple_unpacking_names_the_target_and_the_one_value_per_statement_form(tmp_path):
    source = """
    @T.function
    def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        x, y = A[lane], A[lane]
        B[lane] = x + y
    """
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(source, tmp_path, "k")
    assert "no tuple unpacking" in info.value.message
    assert "one value per statement" in info.value.hint
    assert caret_text(str(info.value)).startswith("x, y")
    assert "x, y = T.meta_var((A[lane], A[lane]))" in info.value.hint
    fixed = source.replace("x, y = A[lane], A[lane]", "x = A[lane]\n        y = A[lane]")
    define(fixed, tmp_path, "k")


def test_a_macros_tuple_unpacked_is_told_t_meta_var_and_runs_with_it(tmp_path):
    source = """
    @T.macro
    def minmax(a, b):
        return T.min(a, b), T.max(a, b)

    @T.function
    def k(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        i = T.cuda.lane_id()
        lo, hi = minmax(X[i], X[i + 32])
        Y[i] = lo
        Y[i + 32] = hi
    """
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(source, tmp_path, "k")
    assert "lo, hi = T.meta_var(minmax(X[i], X[i + 32]))" in info.value.hint
    fixed = define(
        source.replace("= minmax(X[i], X[i + 32])", "= T.meta_var(minmax(X[i], X[i + 32]))"),
        tmp_path,
        "k",
    )
    x, y = np.arange(64, dtype=np.float32)[::-1].copy(), np.zeros(64, np.float32)
    tirx.compile(fixed, target="sim")(x, y)
    assert (y[:32] == np.minimum(x[:32], x[32:])).all() and (
        y[32:] == np.maximum(x[:32], x[32:])
    ).all()
