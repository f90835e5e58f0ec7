"""tirx.examples.gemm (the tiled mma.sync GEMM): its arguments (its numbers: the simulator,
the GPU and the compiler tests in test_gpu.py, test_simplify_index.py and the kernel zoo)."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx.examples.gemm import make_gemm


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
