"""``f(*xs)`` and ``f(**kw)`` in a kernel (tirx/script/spread.py): a compile-time tuple, list or
dict spread into a call is the call with each value written out, in every kind of call the
language has; anything else is refused at the ``*``, naming what it is."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tirx
from tests.helpers import caret_text, define

LDMATRIX = """
SHAPE = (4, 8, 4)
SIZES = {{"g": 2, "c": 2, "w": 4}}
L = TileLayout(S[SHAPE : (1, 4 @ laneid, 1 @ laneid)])

@T.function
def k(A: T.Tensor((16, 16), "float16"), Out: T.Tensor((32, 4), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 16), "float16", align=16)
    for q in range(8):
        i = lane + 32 * q
        a[i // 16, i % 16] = A[i // 16, i % 16]
    T.cuda.cta_sync()
    r = T.alloc_local((4,), "uint32")
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"], {view},
        a.view("uint32").rearrange("(g r) (c w) -> (c g) r w", {sizes}), scope="warp")
    for i in range(4):
        Out[lane, i] = r[i]
"""
WRITTEN = {"view": "r.view(4, 8, 4, layout=L)", "sizes": "g=2, c=2, w=4"}
SPREAD = {"view": "r.view(*SHAPE, layout=L)", "sizes": "**SIZES"}


def _source(kernel) -> str:
    """The CUDA of ``kernel``, its file's name (each definition has its own) left out."""
    return re.sub(r"kernel_\d+\.py", "kernel.py", tirx.compile(kernel, "cuda -arch=sm_80").source)


def test_a_spread_shape_and_sizes_compile_to_the_written_out_kernel(tmp_path):
    spread, written = (define(LDMATRIX.format(**p), tmp_path, "k") for p in (SPREAD, WRITTEN))
    assert _source(spread) == _source(written)
    a = (np.arange(256) % 97).astype(np.float16).reshape(16, 16)
    outs = []
    for parts in (SPREAD, WRITTEN):
        out = np.zeros((32, 4), np.uint32)
        tirx.compile(define(LDMATRIX.format(**parts), tmp_path, "k"), "sim")(a, out)
        outs.append(out)
    np.testing.assert_array_equal(*outs)
    assert outs[0].any()


CALLS = """
EXTENT = (4,)
BOUNDS = [2, 6]
PAIR = (3, 5)
FMT = ("%d %d\\n", 1, 2)
ALLOC = ((8,), "float32")

@T.macro
def put(t, i, v):
    t[i] = v

@T.function
def k(Out: T.Tensor((8,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    s = T.alloc_local({alloc})
    for i in T.serial({extent}):
        s[i] = T.float32(i)
    for i in range({bounds}):
        s[i] = T.float32(10 + i)
    for i, j in T.grid({grid}):
        s[i] = T.float32(j)
    s[7] = T.float32(max({pair}))
    put({put})
    if s[0] < 0.0:
        T.cuda.printf({fmt})
    for i in range(8):
        Out[i] = s[i]
"""
CALLS_WRITTEN = {
    "alloc": '(8,), "float32"',
    "extent": "4",
    "bounds": "2, 6",
    "grid": "4, 1",
    "pair": "3, 5",
    "put": "s, 6, T.float32(PAIR[0])",
    "fmt": '"%d %d\\n", 1, 2',
}
CALLS_SPREAD = {
    "alloc": "*ALLOC",
    "extent": "*EXTENT",
    "bounds": "*BOUNDS",
    "grid": "*EXTENT, 1",
    "pair": "*PAIR",
    "put": "s, *(6, T.float32(PAIR[0]))",
    "fmt": "*FMT",
}


def test_every_kind_of_call_takes_a_spread_sequence(tmp_path):
    """T.* calls, loop forms (range, T.serial, T.grid), builtins, macros and a kernel-side
    tuple (holding a kernel value) spread as written out, on both targets."""
    spread = define(CALLS.format(**CALLS_SPREAD), tmp_path, "k")
    written = define(CALLS.format(**CALLS_WRITTEN), tmp_path, "k")
    assert _source(spread) == _source(written)
    out = np.zeros(8, np.float32)
    tirx.compile(spread, "sim")(out)
    np.testing.assert_array_equal(out, [0, 0, 0, 0, 14, 15, 3, 5])


REFUSED = """
@T.function
def k(A: T.Tensor((16, 16), "float16"), Out: T.Tensor((32, 4), "float32"), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    r = T.alloc_local((4,), "float32")
{body}"""


@pytest.mark.parametrize(
    "body, under, what",
    [
        ('    T.cuda.printf("%d %d\\n", *n)\n', "*n", "n is a kernel value"),
        ('    T.cuda.printf("%d %d\\n", *lane)\n', "*lane", "lane is a kernel value"),
        ("    v = r.view(*r, layout=None)\n", "*r", "r is a tensor"),
        ("    T.cuda.printf(*7)\n", "*7", "7 is int 7"),
        ("    x = T.float32(**n)\n", "**n", "n is a kernel value"),
    ],
)
def test_a_spread_run_time_value_is_refused_naming_it(body, under, what, tmp_path):
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(REFUSED.format(body=body), tmp_path, "k")
    err = info.value
    assert err.message.startswith(("a starred expression (*x)", "a dict unpacked")), str(err)
    assert "compile-time" in err.message and what in err.message, str(err)
    assert err.hint and ("write each value out" in err.hint or "by name" in err.hint), str(err)
    assert caret_text(str(err)).startswith(under), str(err)


def test_a_keyword_given_twice_through_a_dict_is_refused(tmp_path):
    body = "    v = r.view(4, **KW, layout=None)\n"
    with pytest.raises(tirx.TirxSyntaxError, match="'layout' given twice"):
        define(REFUSED.format(body=body), tmp_path, "k", KW={"layout": None})


def test_a_spread_pair_is_a_pair_as_written(tmp_path):
    """``T.grid(*((2, 2), 3))`` is ``T.grid((2, 2), 3)``: the tuple item is a (start, extent)
    pair, read from the written-out display."""
    src = """
RANGES = ((2, 2), 3)

@T.function
def k(Out: T.Tensor((8,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    for i, j in T.grid({grid}):
        Out[i] = T.float32(j)
"""
    outs = []
    for grid in ("(2, 2), 3", "*RANGES"):
        out = np.zeros(8, np.float32)
        tirx.compile(define(src.format(grid=grid), tmp_path, "k"), "sim")(out)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[1], [0, 0, 2, 2, 0, 0, 0, 0])
