"""tirx.examples.gemm (the tiled mma.sync GEMM): its arguments (its numbers: the simulator,
the GPU and the compiler tests in test_gpu.py, test_simplify_index.py and the kernel zoo)."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx.examples.gemm import make_gemm
from tirx.examples.gemm_config import positive_int


def test_make_gemm_takes_the_dtype_names_tirx_takes_and_refuses_the_rest():
    # "half" is float16 (it was multiplied as bfloat16: wrong sums, no error); 16-bit integers
    # and float32 are refused before a kernel is built
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 16)).astype(np.float16) for _ in range(2))
    out = np.zeros((64, 64), np.float32)
    exe = tirx.compile(make_gemm(64, 64, 16, "half"), target="sim")
    exe(a, b, out)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32).T, rtol=1e-5,
                               atol=1e-4)  # fmt: skip
    for dtype in ("int16", "uint16", "float32", "int8"):
        with pytest.raises(ValueError, match=f"float16 or bfloat16 matrices, not {dtype}"):
            make_gemm(64, 64, 16, dtype)


@pytest.mark.parametrize(
    "value, error, message",
    [
        (0, ValueError, "x must be a positive int, got 0"),
        (-3, ValueError, "x must be a positive int, got -3"),
        (True, TypeError, "x must be an int, not a bool"),
        (np.True_, TypeError, "x must be an int"),
        (2.0, TypeError, "x must be an int, got 2.0"),
        (np.float64(2.0), TypeError, "x must be an int"),
        ("2", TypeError, "x must be an int, got '2'"),
        (None, TypeError, "x must be an int, got None"),
    ],
)
def test_the_examples_integer_check_refuses_what_is_not_a_positive_int(value, error, message):
    with pytest.raises(error, match=message):
        positive_int("x", value)


def test_the_examples_integer_check_takes_numpy_integers_and_a_lower_bound():
    assert positive_int("x", np.int64(3)) == 3 and type(positive_int("x", np.int16(3))) is int
    assert positive_int("x", 0, 0) == 0
    with pytest.raises(ValueError, match=r"x must be an int of at least 2 \(note\), got 1"):
        positive_int("x", 1, 2, " (note)")


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((0, 64, 16), ValueError, "M must be a positive int, got 0"),
        ((64, -64, 16), ValueError, "N must be a positive int, got -64"),
        ((64, 64, 0), ValueError, "K must be a positive int, got 0"),
        (("64", 64, 16), TypeError, "M must be an int"),
        ((None, 64, 16), TypeError, "M must be an int"),
        ((64, 64.0, 16), TypeError, "N must be an int"),
        ((64, 64, True), TypeError, "K must be an int, not a bool"),
    ],
)
def test_make_gemm_refuses_sizes_that_are_not_positive_ints(args, error, message):
    with pytest.raises(error, match=message):
        make_gemm(*args)


def test_make_gemm_takes_numpy_integers():
    want = str(make_gemm(64, 128, 32).ir)
    assert str(make_gemm(np.int64(64), np.int32(128), np.int64(32)).ir) == want


@pytest.mark.parametrize("dtype", ["int16", "float32"])
def test_make_gemm_persistent_refuses_what_it_cannot_multiply(dtype):
    from tirx.examples.gemm_persistent import make_gemm_persistent

    with pytest.raises(ValueError, match=f"float16 or bfloat16 matrices, not {dtype}"):
        make_gemm_persistent(64, 64, 16, dtype)
    assert make_gemm_persistent(64, 64, 16, "half").ir.params[0].dtype.name == "float16"


def test_the_missing_load_barrier_is_told_to_be_a_cta_barrier(tmp_path):
    """Without the barrier after the tile loads, the first race found is within one warp, but
    other warps wrote rows the ldmatrix reads too: the hint names cta_sync, not warp_sync."""
    import importlib.util
    import sys

    from tirx.errors import SimulationError
    from tirx.examples import gemm

    text = open(gemm.__file__).read()
    old = "                b_w[idx // 8, idx % 8] = B_w[bn * BN + idx // 8, kt * 8 + idx % 8]\n"
    assert text.count(old + "            T.cuda.cta_sync()\n") == 1
    path = tmp_path / "gemm_nobarrier.py"
    text = text.replace(old + "            T.cuda.cta_sync()\n", old, 1)
    path.write_text(text.replace("\nfrom .", "\nfrom tirx.examples."))
    spec = importlib.util.spec_from_file_location("gemm_nobarrier", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gemm_nobarrier"] = module
    spec.loader.exec_module(module)
    exe = tirx.compile(module.make_gemm(64, 64, 32), "sim")
    a, b = np.ones((64, 32), np.float16), np.ones((64, 32), np.float16)
    with pytest.raises(SimulationError, match="shared-memory race") as e:
        exe(a, b, np.zeros((64, 64), np.float32))
    assert "T.cuda.cta_sync()" in e.value.hint
    assert "or T.cuda.warp_sync() within one warp" not in e.value.hint
