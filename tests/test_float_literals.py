"""Float constants in generated CUDA: subnormals, which NVRTC refuses as literals."""

import numpy as np
import pytest

import tirx
from tirx import T


def _kernel(value, dtype):
    @T.function
    def fill(Out: T.Tensor((32,), dtype)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        Out[T.cuda.lane_id()] = T.cast(value, dtype)

    return fill


CASES = [
    (1e-40, "float32"),
    (-(2.0**-149), "float32"),  # the smallest float32 subnormal
    (5e-324, "float64"),
    (1e-310, "float64"),
    (1.5e-38, "float32"),  # normal, just above the subnormals
]


@pytest.mark.parametrize("value,dtype", CASES)
def test_subnormal_constants_compile_and_keep_their_bits(value, dtype):
    exe = tirx.compile(_kernel(value, dtype), "cuda -arch=sm_90")
    assert exe.cubin  # NVRTC accepted the constant
    out = np.zeros(32, dtype=dtype)
    tirx.compile(_kernel(value, dtype), target="sim")(out)
    assert (out == np.array(value, dtype=dtype)).all()


@pytest.mark.gpu
@pytest.mark.parametrize("value,dtype", CASES)
def test_gpu_writes_the_subnormal_constants_bit_for_bit(value, dtype):
    import torch

    out = torch.zeros(32, dtype=getattr(torch, dtype), device="cuda")
    tirx.compile(_kernel(value, dtype), target="cuda")(out)
    expect = np.array(value, dtype=dtype)
    assert (out.cpu().numpy().view(np.uint8) == np.full(32, expect).view(np.uint8)).all()
