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
def test_deep_expressions_compute_the_right_values(tmp_path, shape):
    # depth the simulator's own expression compiler handles (see the cuda test for more)
    n = 300
    exe = tirx.compile(_load(tmp_path, SHAPES[shape](n), f"deep_value_{shape}"), target="sim")
    out = np.zeros(32, np.int32)
    exe(out, 1)
    assert np.array_equal(out, _expected(shape, n, np.arange(32), 1))


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
    assert text.count("else:") == n
    assert print_function(serial.loads(serial.dumps(lowered))) == text
