"""GPU tests (run on the GPU machine; skipped elsewhere).

- every kernel of the zoo gives bit-identical outputs on the GPU and on the simulator;
- the tiled GEMM matches torch at M = N = K = 512 and on a non-square shape, fp16 and bf16;
- the launcher writes into tensors on the current torch stream.
"""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.kernel_zoo import CASES, to_torch

pytestmark = pytest.mark.gpu


def _run(kernel, args, target):
    import torch

    exe = tirx.compile(kernel, target=target)
    if target == "cuda":
        args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
        exe(*args)
        torch.cuda.synchronize()
        return [a.cpu() if isinstance(a, torch.Tensor) else a for a in args]
    exe(*args)
    return args


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gpu_and_simulator_agree_bit_for_bit(case):
    import torch

    kernel = case.build()
    dtypes = [p.dtype.name for p in kernel.ir.params]
    args = case.inputs(np.random.default_rng(11))
    on_sim = _run(
        kernel,
        to_torch([a.copy() if isinstance(a, np.ndarray) else a for a in args], dtypes),
        "sim",
    )
    on_gpu = _run(kernel, to_torch(args, dtypes), "cuda")
    for i, (s, g) in enumerate(zip(on_sim, on_gpu)):
        if isinstance(s, torch.Tensor):
            sb = s.contiguous().view(torch.uint8)
            gb = g.contiguous().view(torch.uint8)
            assert torch.equal(sb, gb), f"{case.name}: argument {i} differs between GPU and sim"


@pytest.mark.parametrize(
    "M,N,K,dtype",
    [
        (512, 512, 512, "float16"),
        (512, 512, 512, "bfloat16"),
        (192, 320, 96, "float16"),
        (256, 128, 1024, "bfloat16"),
    ],
)
def test_tiled_gemm_matches_torch(M, N, K, dtype):
    import torch

    from tirx.examples.gemm import make_gemm

    exe = tirx.compile(make_gemm(M, N, K, dtype), target="cuda")
    tdt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((M, K), device="cuda", generator=gen).to(tdt)
    b = torch.randn((N, K), device="cuda", generator=gen).to(tdt)
    out = torch.empty((M, N), device="cuda")
    exe(a, b, out)
    ref = a.float() @ b.float().T
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)


def test_runs_on_the_current_torch_stream():
    import torch

    from tirx.examples.warp_matmul import warp_matmul

    exe = tirx.compile(warp_matmul, target="cuda")
    a = torch.randn((16, 16), dtype=torch.float16, device="cuda")
    b = torch.randn((8, 16), dtype=torch.float16, device="cuda")
    out = torch.full((16, 8), 7.0, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # the side stream is busy for a while ...
        out.zero_()  # ... then clears out; a kernel on another stream would run first
        exe(a, b, out)  # and be overwritten
    side.synchronize()
    torch.testing.assert_close(out, a.float() @ b.float().T, rtol=2e-4, atol=2e-4)
