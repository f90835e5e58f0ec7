"""Expressions as deep as CPython compiles go through every stage without a RecursionError:
parser, evaluator, lowering, simplifier, printer, serializer and codegen (both targets'
compile paths; NVRTC runs here without a GPU), with the recursion limit left as it was.

The depth is found, not assumed: the largest N for which CPython itself compiles a kernel
body of N terms (about 3000 on CPython 3.11 and 3.12 with the default recursion limit).
"""

from __future__ import annotations

import functools
import importlib.util
import sys

import numpy as np
import pytest

import tirx
from tirx.errors import TirxSyntaxError
from tirx.ir import nodes as ir
from tirx.ir import serial
from tirx.ir.printer import print_function

_KERNEL = """
from tirx import T


@T.function
def deep(out: T.Tensor((32,), "int32"), c: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    x = T.cuda.lane_id()
    out[x] = {expr}
"""

SHAPES = {
    "sum": lambda n: " + ".join(["x"] * n),
    "difference": lambda n: " - ".join(["x"] * n),
    "negations": lambda n: "-" * n + "x",
    "conditionals": lambda n: " if c > 0 else ".join(["x"] * n),
    "mixed": lambda n: " ".join(f"x {'+-*'[i % 3]}" for i in range(n - 1)) + " x",
}


def _compiles(source: str) -> bool:
    try:
        compile(source, "<deep>", "exec")
    except (RecursionError, MemoryError, SyntaxError):
        return False
    return True


@functools.cache
def deepest(shape: str) -> int:
    """The largest N whose kernel CPython compiles here (bisection), less 2%: CPython's own
    limit counts the frames already running, and importing the kernel file adds a few."""
    lo, hi = 1, 20_000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _compiles(_KERNEL.format(expr=SHAPES[shape](mid))):
            lo = mid
        else:
            hi = mid - 1
    return lo * 49 // 50


def _load(tmp_path, expr: str, name="deep_kernel"):
    path = tmp_path / f"{name}.py"
    path.write_text(_KERNEL.format(expr=expr))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.deep


def _expected(shape: str, n: int, lane: np.ndarray, c: int) -> np.ndarray:
    x = lane.astype(np.int64)
    if shape == "sum":
        v = n * x
    elif shape == "difference":
        v = x - (n - 1) * x
    elif shape == "negations":
        v = x if n % 2 == 0 else -x
    elif shape == "conditionals":
        v = x
    else:
        v = eval(SHAPES["mixed"](n), {"x": x})  # numpy, not tirx: the reference
    return v.astype(np.int32)


def test_cpython_compiles_thousands_of_levels():
    # the depth the tests below use is CPython's, and it is far past tirx's old limits
    assert deepest("sum") > 2000


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_deepest_kernel_compiles_for_the_simulator(tmp_path, shape):
    n = deepest(shape)
    limit = sys.getrecursionlimit()
    kernel = _load(tmp_path, SHAPES[shape](n), f"deep_{shape}")
    exe = tirx.compile(kernel, target="sim")
    assert sys.getrecursionlimit() == limit
    script = exe.script()
    lowered = exe.script(lowered=True)
    if shape in ("sum", "difference"):
        assert script.count("x") >= n and lowered.count("T.cuda.lane_id()") >= 1
    # the serializer (front-end cache) round-trips it: the same text comes back
    back = serial.loads(serial.dumps(exe.lowered))
    assert print_function(back) == lowered


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_deepest_kernel_compiles_for_cuda(tmp_path, shape):
    n = deepest(shape)
    kernel = _load(tmp_path, SHAPES[shape](n), f"deep_cuda_{shape}")
    exe = tirx.compile(kernel, target="cuda -arch=sm_90")
    assert "out[" in exe.source
    assert exe.ptx and ".entry deep" in exe.ptx


def test_a_long_sum_is_written_without_nested_parentheses(tmp_path):
    n = deepest("sum")
    exe = tirx.compile(_load(tmp_path, SHAPES["sum"](n), "deep_parens"), target="cuda")
    (line,) = [ln for ln in exe.source.splitlines() if ln.strip().startswith("out[")]
    assert line.count("(") < 20  # "(x + x + ... + x)", not n nested pairs


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_deepest_kernel_computes_the_right_values_on_the_simulator(tmp_path, shape):
    # CPython's full depth: the simulator compiles and evaluates it without recursion
    n = deepest(shape)
    limit = sys.getrecursionlimit()
    exe = tirx.compile(_load(tmp_path, SHAPES[shape](n), f"deep_value_{shape}"), target="sim")
    for c in (1, 0):  # c == 0 walks the whole chain of conditionals
        out = np.full(32, -7, np.int32)
        exe(out, c)
        assert np.array_equal(out, _expected(shape, n, np.arange(32), c)), c
    assert sys.getrecursionlimit() == limit


def test_a_deep_condition_chain_runs_its_sides_on_the_threads_that_choose_them(tmp_path):
    # x < 1 and x < 2 and ... : lanes drop out one term at a time, deep in the chain
    n = deepest("sum")
    expr = " and ".join(f"x < {1 + i % 40}" for i in range(n))
    exe = tirx.compile(_load(tmp_path, f"(100 + x) if {expr} else x", "deep_and"), target="sim")
    out = np.zeros(32, np.int32)
    exe(out, 1)
    assert out.tolist() == [100] + list(range(1, 32))


def test_an_error_deep_inside_is_located_at_its_term(tmp_path):
    n = deepest("sum")
    terms = ["x"] * n
    terms[n // 2] = "y"  # not defined
    with pytest.raises(TirxSyntaxError) as info:
        _load(tmp_path, " + ".join(terms), "deep_error")
    err = info.value
    assert "'y' is not defined" in err.message
    assert err.span.line == 9
    assert err.span.col == len("    out[x] = ") + (n // 2) * len("x + ")


def test_deep_conditions_and_indices(tmp_path):
    n = deepest("sum") // 2
    src = _KERNEL.replace(
        "    out[x] = {expr}",
        "    if {expr} >= 0:\n        out[({expr}) % 32] = x",
    ).format(expr=" + ".join(["x"] * n))
    path = tmp_path / "deep_cond.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("deep_cond", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    exe = tirx.compile(module.deep, target="cuda -arch=sm_90")
    assert "if (" in exe.source and exe.ptx
    assert tirx.compile(module.deep, target="sim").lowered.body is not None


def _seq_depth(e) -> int:
    depth = 0
    while isinstance(e, ir.BinOp):
        e, depth = e.a, depth + 1
    return depth


def test_the_ir_is_as_deep_as_the_source(tmp_path):
    n = deepest("sum")
    kernel = _load(tmp_path, SHAPES["sum"](n), "deep_ir")
    store = kernel.ir.body.stmts[-1]
    assert _seq_depth(store.value) == n - 1


@pytest.mark.gpu
def test_deepest_sum_runs_on_the_gpu(tmp_path):
    import torch

    n = deepest("sum")
    exe = tirx.compile(_load(tmp_path, SHAPES["sum"](n), "deep_gpu"), target="cuda")
    out = torch.zeros(32, dtype=torch.int32, device="cuda")
    exe(out, 1)
    torch.cuda.synchronize()
    assert out.cpu().tolist() == [n * lane for lane in range(32)]


def test_deeply_nested_statements_pass_every_ir_stage():
    # an elif chain of thousands nests If in else_body (built here directly: the parser's
    # own statement nesting is another matter); every IR pass walks it without recursion
    from tirx.backend.cuda.codegen import generate
    from tirx.transform.lower import lower_function

    n = deepest("sum")
    c = ir.Var("c")
    out = ir.Buffer("out", ir.I32, ir.Scope.GLOBAL, (32,), None, 32)
    body = ir.Store(out, 0, ir.const(-1), ir.I32)
    for i in reversed(range(n)):
        body = ir.If(ir.cmp(ir.CmpOp.EQ, c, i), ir.Store(out, 0, ir.const(i), ir.I32), body)
    fn = ir.Function("chain", (out, c), body, ir.LaunchConfig((1, 1, 1), (32, 1, 1)))
    lowered = lower_function(fn, 90)
    source = generate(lowered)
    assert source.count("} else {") == n
    text = print_function(lowered)
    assert text.count("\n    elif ") + text.count("else:") == n  # every arm, at one depth
    assert print_function(serial.loads(serial.dumps(lowered))) == text
    # and the simulator runs it, to the end of the chain and out of it
    from tirx import sim

    for c_value, want in ((0, 0), (n - 1, n - 1), (n + 5, -1)):
        got = np.zeros(32, np.int32)
        sim.run(lowered, [got, c_value])
        assert got[0] == want, c_value


# ------------------------------------------------------------------ deep statements

_CHAIN_HEAD = """
from tirx import T


@T.function
def deep(out: T.Tensor((32,), "int32"), c: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    x = T.cuda.lane_id()
"""


def _elif_chain(n: int, arm=lambda i: f"y = {i}") -> str:
    """A kernel whose body is an ``if``/``elif`` chain of ``n`` arms on the parameter ``c``;
    each arm assigns ``y`` (so ``y`` is a kernel variable), the ``else`` too."""
    lines = [_CHAIN_HEAD.rstrip("\n")]
    for i in range(n):
        lines += [f"    {'if' if i == 0 else 'elif'} c == {i}:", f"        {arm(i)}"]
    lines += ["    else:", "        y = -1", "    out[x] = y + x", ""]
    return "\n".join(lines)


@functools.cache
def deepest_chain() -> int:
    """The most ``elif`` arms CPython compiles in a kernel here (about 2990 on 3.11), less 2%,
    as :func:`deepest` finds it."""
    lo, hi = 1, 20_000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _compiles(_elif_chain(mid)):
            lo = mid
        else:
            hi = mid - 1
    return lo * 49 // 50


def _load_source(tmp_path, source: str, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.deep


def test_cpython_compiles_thousands_of_elif_arms():
    # far past the old parser's limit (RecursionError between 250 and 400 arms)
    assert deepest_chain() > 1000


def _chain_depth(s) -> int:
    depth = 0
    while isinstance(s, ir.If):
        s, depth = s.else_body, depth + 1
    return depth


@pytest.mark.parametrize("target", ["sim", "cuda -arch=sm_90"])
def test_the_longest_elif_chain_compiles(tmp_path, target):
    n = deepest_chain()
    limit = sys.getrecursionlimit()
    kernel = _load_source(tmp_path, _elif_chain(n), "deep_chain_" + target.split()[0])
    assert sys.getrecursionlimit() == limit
    chain = next(s for s in kernel.ir.body.stmts if isinstance(s, ir.If))
    assert _chain_depth(chain) == n  # one If per arm, each in the previous one's else
    exe = tirx.compile(kernel, target=target)
    assert sys.getrecursionlimit() == limit
    lowered = exe.script(lowered=True)
    assert lowered.count("\n    elif ") + lowered.count("else:") == n  # every arm, at one depth
    assert print_function(serial.loads(serial.dumps(exe.lowered))) == lowered
    if target == "sim":
        return
    assert exe.source.count("} else {") >= n
    assert exe.ptx and ".entry deep" in exe.ptx


def test_an_elif_chain_of_compile_time_conditions_keeps_the_taken_arm(tmp_path):
    # static conditions: each arm is traced in its own scope, only the taken one is kept
    n = deepest_chain()
    src = (
        _elif_chain(n).replace("c == ", "K == ").replace("    x = T", f"    K = {n - 1}\n    x = T")
    )
    exe = tirx.compile(_load_source(tmp_path, src, "deep_static_chain"), target="sim")
    assert "else:" not in exe.script(lowered=True)
    out = np.zeros(32, np.int32)
    exe(out, 0)
    assert out.tolist() == [n - 1 + lane for lane in range(32)]


def test_an_error_deep_in_an_elif_chain_is_located_at_its_arm(tmp_path):
    n = deepest_chain()
    bad = n // 2
    src = _elif_chain(n, lambda i: "y = undefined_name" if i == bad else f"y = {i}")
    with pytest.raises(TirxSyntaxError) as info:
        _load_source(tmp_path, src, "deep_chain_error")
    err = info.value
    assert "'undefined_name' is not defined" in err.message
    head_lines = _CHAIN_HEAD.count("\n")
    assert err.span.line == head_lines + 2 * bad + 2
    assert err.span.col == len("        y = ")


def test_an_elif_chain_inside_loops_and_nested_ifs(tmp_path):
    # the chain sits under a while, a for and an if: every stage walks the mix
    n = deepest_chain() // 2
    chain = _elif_chain(n).split("    x = T.cuda.lane_id()\n", 1)[1].splitlines()[:-1]
    src = (
        _CHAIN_HEAD
        + "    y = 0\n    k = 0\n    while k < 1:\n        for j in range(2):\n"
        + "            if j == 1:\n"
        + "".join(" " * 12 + ln + "\n" for ln in chain)
        + "        k = k + 1\n    out[x] = y + x\n"
    )
    kernel = _load_source(tmp_path, src, "deep_nested_chain")
    exe = tirx.compile(kernel, target="sim")
    # the CUDA source too (NVRTC itself, whose time grows with the square of the nesting, is
    # run at full depth by test_the_longest_elif_chain_compiles)
    from tirx.backend.cuda.codegen import generate

    assert generate(exe.lowered).count("} else {") == n
    text = exe.script(lowered=True)
    assert text.count("elif ") + text.count("else:") == n  # every arm printed


# ------------------------------------------------- deep statements on the simulator

_STATEMENTS_KERNEL = """
from tirx import T


@T.function
def deep(out: T.Tensor((32,), "int32"), c: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    x = T.cuda.lane_id()
{body}
"""


def _elif_out_chain(n: int) -> str:
    lines = []
    for i in range(n):
        lines += [f"    {'if' if i == 0 else 'elif'} c == {i} + x:", f"        out[x] = {i}"]
    return "\n".join([*lines, "    else:", "        out[x] = -1"])


def _nested_ifs(n: int) -> str:
    lines = [f"{'    ' * (i + 1)}if c >= {i}:" for i in range(n)]
    return "\n".join([*lines, "    " * (n + 1) + "out[x] = c"])


def _load_statements(tmp_path, body: str, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(_STATEMENTS_KERNEL.format(body=body))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.deep


def _parses(tmp_path, body: str, name: str) -> bool:
    try:
        _load_statements(tmp_path, body, name)
    except (RecursionError, SyntaxError, TirxSyntaxError):
        return False
    return True


_STATEMENT_DEPTHS: dict = {}


def deepest_statements(tmp_path, shape: str) -> int:
    """The largest N (up to CPython's own limit) whose kernel tirx's parser accepts: an elif
    chain of N links, or N nested ifs. (The parser's own limit is below CPython's for elif
    chains; see the report of this change.)"""
    if shape not in _STATEMENT_DEPTHS:
        make = _elif_out_chain if shape == "elif" else _nested_ifs
        lo, hi = 1, 20_000
        while lo < hi:
            mid = (lo + hi + 1) // 2
            src = _STATEMENTS_KERNEL.format(body=make(mid))
            if _compiles(src) and _parses(tmp_path, make(mid), f"probe_{shape}_{mid}"):
                lo = mid
            else:
                hi = mid - 1
        _STATEMENT_DEPTHS[shape] = lo * 49 // 50
    return _STATEMENT_DEPTHS[shape]


def test_the_longest_elif_chain_runs_on_the_simulator(tmp_path):
    n = deepest_statements(tmp_path, "elif")
    assert n > 200  # the parser's own limit (below CPython's); the IR test below goes further
    exe = tirx.compile(_load_statements(tmp_path, _elif_out_chain(n), "deep_elif"), target="sim")
    lane = np.arange(32)
    for c in (0, 5, n - 1, n + 40):
        out = np.full(32, -7, np.int32)
        exe(out, c)
        want = np.where((c - lane >= 0) & (c - lane < n), c - lane, -1)
        assert np.array_equal(out, want), c


def test_the_deepest_nested_ifs_run_on_the_simulator(tmp_path):
    n = deepest_statements(tmp_path, "nested")  # CPython's indentation limit (about 100)
    exe = tirx.compile(_load_statements(tmp_path, _nested_ifs(n), "deep_nested"), target="sim")
    for c in (n - 1, n - 2):
        out = np.full(32, -7, np.int32)
        exe(out, c)
        assert out.tolist() == [c if c >= n - 1 else -7] * 32, c


@pytest.mark.parametrize("op", ["//", "*", "%"])
def test_a_deep_index_compiles_for_both_targets(tmp_path, op):
    # an index of thousands of nested operators: simplification leaves it as written
    n = deepest("sum")
    name = "deep_index_" + {"//": "div", "*": "mul", "%": "mod"}[op]
    path = tmp_path / f"{name}.py"
    index = "x" + f" {op} 1" * n
    path.write_text(_KERNEL.replace("out[x] = {expr}", f"out[{index}] = x"))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = np.full(32, -1, np.int32)
    tirx.compile(module.deep, target="sim")(out, 0)
    assert out.tolist() == (list(range(32)) if op != "%" else [31] + [-1] * 31)
    assert tirx.compile(module.deep, target="cuda -arch=sm_90").ptx
