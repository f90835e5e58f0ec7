"""The real TIRx's short dtype names (``T.f32``, ``T.bf16``, ``T.i32``, ``T.u8``,
``T.boolean``, ...) are the long ones: the same objects, so a kernel written with either
spelling lowers to the same program."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tirx
from tests.helpers import define
from tirx import T
from tirx.script.namespace import DTYPE_ALIASES

BODY = """
@T.function
def k(X: T.Tensor((32,), {f16}), O: T.Tensor((32,), {f32}), I: T.Tensor((32,), {i32})):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.lane_id()
    a = T.alloc_local((1,), {f32})
    a[0] = {f32}(X[i]) * {f32}(2)
    O[i] = a[0] + {f32}({bf16}(X[i]))
    I[i] = {i32}({u8}({i64}(i) + {i64}(250)))
    b: {boolean} = i > 3
    if b:
        I[i] = I[i] + 1
"""


@pytest.mark.parametrize("short, long", sorted(DTYPE_ALIASES.items()))
def test_each_short_name_is_the_long_one(short, long):
    assert getattr(T, short) is getattr(T, long)


def test_a_kernel_in_short_names_is_the_kernel_in_long_names(tmp_path):
    names = ("f16", "f32", "i32", "bf16", "u8", "i64", "boolean")
    short = define(BODY.format(**{n: f"T.{n}" for n in names}), tmp_path, "k")
    long = define(BODY.format(**{n: f"T.{DTYPE_ALIASES[n]}" for n in names}), tmp_path, "k")
    src = [tirx.compile(k, target="cuda -arch=sm_90").source for k in (short, long)]
    # the same program but for the #line directives, which name each kernel's file
    body = [re.sub(r'"[^"]*kernel_\d+\.py"', "FILE", s[s.index("__global__") :]) for s in src]
    assert body[0] == body[1]
    x = np.arange(32, dtype=np.float16)
    o, iv = np.zeros(32, np.float32), np.zeros(32, np.int32)
    tirx.compile(short, target="sim")(x, o, iv)
    np.testing.assert_array_equal(o, 3 * x.astype(np.float32))
    want = (np.arange(32) + 250) % 256 + (np.arange(32) > 3)
    np.testing.assert_array_equal(iv, want)
