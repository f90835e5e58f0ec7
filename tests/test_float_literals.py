"""Float constants in generated CUDA: subnormals, which NVRTC refuses as literals, and values
the constant's type cannot hold exactly."""

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


INEXACT = [
    (0.1, "float32"),
    (1.4426950408889634, "float32"),  # log2(e), as the attention kernels scale by it
    (-0.6931471805599453, "float32"),
    (3.40282346e38, "float32"),  # rounds to float32's largest finite value
    (1e39, "float32"),  # past float32's range: infinity
    (0.1, "float16"),
    (0.1, "float64"),
]


@pytest.mark.parametrize("value,dtype", INEXACT)
def test_inexact_constants_compile_without_warnings_to_the_simulators_value(value, dtype):
    """A constant that its type cannot hold exactly is written as the value of that type (for
    32-bit and narrower floats, the float32 it rounds to): NVRTC has nothing to round, says
    nothing about it, and the kernel writes the bits the simulator writes."""
    exe = tirx.compile(_kernel(value, dtype), "cuda -arch=sm_90")
    assert "#1046" not in exe.nvrtc.log and "out of range" not in exe.nvrtc.log, exe.nvrtc.log
    out = np.zeros(32, dtype=dtype)
    with np.errstate(over="ignore"):
        expect = np.array(value, dtype=dtype)
        tirx.compile(_kernel(value, dtype), target="sim")(out)
    assert (out.view(np.uint8) == np.full(32, expect).view(np.uint8)).all()
    with np.errstate(over="ignore"):
        literal = float(np.float32(value)) if dtype != "float64" else value
    if np.isfinite(literal) and dtype == "float32":
        assert f"{literal.hex()}f" in exe.source


@pytest.mark.gpu
@pytest.mark.parametrize("value,dtype", INEXACT)
def test_gpu_writes_the_inexact_constants_as_the_simulator_does(value, dtype):
    import torch

    out = torch.zeros(32, dtype=getattr(torch, dtype), device="cuda")
    tirx.compile(_kernel(value, dtype), target="cuda")(out)
    with np.errstate(over="ignore"):
        expect = np.array(value, dtype=dtype)
    assert (out.cpu().numpy().view(np.uint8) == np.full(32, expect).view(np.uint8)).all()


def test_a_literal_keeps_its_value_to_float64_and_a_float32_constant_its_float32_value():
    @T.function
    def k(O: T.Tensor((4,), "float64")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        O[0] = T.float64(0.1)
        O[1] = T.float64(T.float32(0.1))
        O[2] = T.float64(T.float32(0.1) + T.float32(0.2))  # float32 arithmetic, folded
        O[3] = T.float64(T.float32(16777216.0) + 1.0 + 1.0)

    out = np.zeros(4)
    tirx.compile(k, target="sim")(out)
    f32 = np.float32
    assert out.tolist() == [0.1, float(f32(0.1)), float(f32(0.1) + f32(0.2)), 16777216.0]
    src = tirx.compile(k, "cuda -arch=sm_90").source
    assert "O[0] = 0x1.999999999999ap-4;" in src and "O[1] = 0x1.99999a0000000p-4;" in src
