"""Every mma form run end to end on the seed-structured kernel (tests/isa_kernels.py): the
simulator against torch, and (marked gpu) the H200 against torch and the simulator, on
integer-valued inputs, bit for bit. A form the simulator does not implement yet is skipped,
and only for that reason (its SimulationError says "unknown PTX instruction")."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

import tirx
from tirx import isa

from . import isa_kernels as K

MMA_FORMS = [t for t in isa.supported_forms() if t.startswith("mma")]
SATFINITE = [t for t in MMA_FORMS if ".satfinite." in t]
INT_FORMS = [t for t in MMA_FORMS if ".s32." in t]


def simulated(text: str, c_value=0, seed=0):
    """(Out from the simulator, A, B); skips only while the simulator lacks the form."""
    a, b, out = K.inputs(text, seed)
    result = torch.from_numpy(out)
    with _unless_unknown_to_the_simulator(text):
        exe = tirx.compile(K.mma_kernel(text, c_value=c_value), target="sim")
        exe(a, b, result)
    return result.numpy(), a, b


@contextlib.contextmanager
def _unless_unknown_to_the_simulator(text):
    try:
        yield
    except tirx.SimulationError as e:
        if "unknown PTX instruction" in str(e):
            pytest.skip(f"the simulator does not implement {text} yet")
        raise


def on_gpu(text: str, c_value=0, seed=0):
    exe = tirx.compile(K.mma_kernel(text, c_value=c_value), target="cuda")
    a, b, out = K.inputs(text, seed)
    ta, tb = torch.as_tensor(a).cuda(), torch.as_tensor(b).cuda()
    result = torch.from_numpy(out).cuda()
    exe(ta, tb, result)
    torch.cuda.synchronize()
    return result.cpu().numpy(), a, b


@pytest.mark.parametrize("text", MMA_FORMS)
def test_simulator_matches_torch(text):
    out, a, b = simulated(text)
    assert np.array_equal(out, K.reference(text, a, b))


@pytest.mark.parametrize("text", INT_FORMS)
def test_simulator_integer_overflow_wraps_or_saturates(text):
    """C near INT_MAX plus a positive product: .satfinite clamps, plain .s32 wraps (ISA)."""
    c = 2**31 - 50
    out, a, b = simulated(text, c_value=c, seed=1)
    assert np.array_equal(out, K.reference(text, a, b, c_value=c))


@pytest.mark.gpu
@pytest.mark.parametrize("text", MMA_FORMS)
def test_gpu_matches_torch(text):
    out, a, b = on_gpu(text)
    assert np.array_equal(out, K.reference(text, a, b))


@pytest.mark.gpu
@pytest.mark.parametrize("text", INT_FORMS)
def test_gpu_integer_overflow_wraps_or_saturates(text):
    c = 2**31 - 50
    out, a, b = on_gpu(text, c_value=c, seed=1)
    assert np.array_equal(out, K.reference(text, a, b, c_value=c))


def _tf32_inputs(k: int, seed: int = 5):
    """Nonzero integers of magnitude 1..7 with the 13 mantissa bits tf32 has no room for all
    set: each value lies just under one tf32 step above its integer. Truncating the operand
    reads the integer; rounding to nearest would read the next tf32 value."""
    rng = np.random.default_rng(seed)

    def draw(shape):
        ints = rng.integers(1, 8, shape) * rng.choice([-1, 1], shape)
        bits = ints.astype(np.float32).view(np.uint32) | np.uint32(0x1FFF)
        return ints, bits.view(np.float32)

    (ai, a), (bi, b) = draw((16, k)), draw((8, k))
    return ai, a, bi, b


@pytest.mark.parametrize("text", [t for t in MMA_FORMS if ".tf32." in t])
def test_simulator_tf32_reads_the_truncated_operands(text):
    """The simulator drops the low 13 bits (the rule measured on the H200, below)."""
    k = tirx.instruction_contract(text).param("k")
    ai, a, bi, b = _tf32_inputs(k)
    out = np.zeros((16, 8), np.float32)
    with _unless_unknown_to_the_simulator(text):
        tirx.compile(K.mma_kernel(text), target="sim")(a, b, out)
    assert np.array_equal(out, (ai @ bi.T).astype(np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("text", [t for t in MMA_FORMS if ".tf32." in t])
def test_gpu_tf32_low_mantissa_bits_match_the_simulator(text):
    """What the tensor core does with the 13 bits tf32 has no room for, decided bit for bit:
    with the inputs of :func:`_tf32_inputs` the H200 gives the exact integer products (it
    truncates; rounding to nearest would give other values), and so does the simulator."""
    exe_gpu = tirx.compile(K.mma_kernel(text), target="cuda")
    k = tirx.instruction_contract(text).param("k")
    ai, a, bi, b = _tf32_inputs(k)
    sim_out = np.zeros((16, 8), np.float32)
    with _unless_unknown_to_the_simulator(text):
        tirx.compile(K.mma_kernel(text), target="sim")(a, b, sim_out)
    gpu_out = torch.zeros(16, 8, device="cuda")
    exe_gpu(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), gpu_out)
    torch.cuda.synchronize()
    gpu = gpu_out.cpu().numpy()
    assert np.array_equal(gpu, (ai @ bi.T).astype(np.float32))
    assert np.array_equal(gpu.view(np.uint32), sim_out.view(np.uint32))
