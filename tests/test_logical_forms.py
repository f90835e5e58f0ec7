"""The real TIRx's ``T.select``, ``T.logical_and``/``or``/``not``, ``T.likely`` and
``T.static_assert``: the same values on the simulator as Python's operators, the C operators
in the generated code, compile-time operands folded, and misuse refused at its line."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.helpers import caret_line, define
from tirx.errors import TirxSyntaxError

KERNEL = """
N = 32

@T.function
def k(X: T.Tensor((N,), "int32"), O: T.Tensor((6, N), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=N))
    T.static_assert(N % 32 == 0, "N is a multiple of a warp")
    i = T.cuda.lane_id()
    O[0, i] = T.select(X[i] > 3, X[i], -X[i])
    O[1, i] = T.logical_and(X[i] > 3, X[i] < 10, True)
    O[2, i] = T.logical_or(X[i] < 3, X[i] > 30)
    O[3, i] = T.logical_not(X[i] > 3)
    O[4, i] = T.select(condition=N > 8, true_value=1, false_value=X[i])
    O[5, i] = 0
    if T.likely(X[i] != 7):
        O[5, i] = 1
"""


def test_values_on_the_simulator_are_pythons(tmp_path):
    k = define(KERNEL, tmp_path, "k")
    x = np.arange(-5, 27, dtype=np.int32)
    o = np.zeros((6, 32), np.int32)
    tirx.compile(k, target="sim")(x, o)
    np.testing.assert_array_equal(o[0], np.where(x > 3, x, -x))
    np.testing.assert_array_equal(o[1], (x > 3) & (x < 10))
    np.testing.assert_array_equal(o[2], (x < 3) | (x > 30))
    np.testing.assert_array_equal(o[3], ~(x > 3))
    np.testing.assert_array_equal(o[4], 1)  # a compile-time condition picks its side
    np.testing.assert_array_equal(o[5], x != 7)


def test_the_c_is_cs_operators(tmp_path):
    src = tirx.compile(define(KERNEL, tmp_path, "k"), target="cuda -arch=sm_90").source
    x = "X[(tirx_tid & 31)]"
    assert f"(({x} > 3) ? {x} : (0 - {x}))" in src
    assert f"((({x} > 3) && ({x} < 10)))" in src  # the constant True folded away
    assert f"((({x} < 3) || ({x} > 30)))" in src
    assert f"((!({x} > 3)))" in src
    assert "if ((X[i] != 7))" in src or f"if (({x} != 7))" in src


BAD = [
    ('T.static_assert(N == 64, "N is 64")', "T.static_assert failed: N is 64"),
    ("T.static_assert(N == 64)", "T.static_assert failed"),
    ("T.static_assert(X[0] > 0)", "needs a compile-time condition"),
    ("O[0, 0] = T.logical_and()", "takes one or more values"),
    ("O[0, 0] = T.logical_not(X[0], X[1])", "takes one value"),
    ("O[0, 0] = T.likely(X[0] > 0, hint=1)", "takes no keyword arguments"),
    ("O[0, 0] = T.select(X[0] > 0, 1)", "T.select takes 3 arguments"),
    ("O[0, 0] = T.logical_and(X, X[0] > 0)", "a tensor is not a condition"),
]


@pytest.mark.parametrize("line, message", BAD, ids=[b[0] for b in BAD])
def test_misuse_is_refused_at_its_line(line, message, tmp_path):
    src = f"""
N = 32

@T.function
def k(X: T.Tensor((N,), "int32"), O: T.Tensor((6, N), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=N))
    {line}
"""
    with pytest.raises(TirxSyntaxError) as e:
        define(src, tmp_path, "k")
    assert message in str(e.value)
    assert caret_line(str(e.value)) == line
