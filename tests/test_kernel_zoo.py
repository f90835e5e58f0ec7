"""Every kernel of tests/kernel_zoo.py: simulated results equal the ISA-derived numpy models
exactly (integer-valued inputs), and each compiles to CUBIN for sm_80 and sm_90 (stmatrix:
sm_90 only, and sm_80 is refused with a ContractError)."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.kernel_zoo import CASES, to_torch

IDS = [c.name for c in CASES]


def _dtypes(kernel):
    return [p.dtype.name for p in kernel.ir.params]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_simulator_matches_the_isa_model(case):
    kernel = case.build()
    args = case.inputs(np.random.default_rng(7))
    expected = case.model([a.copy() if isinstance(a, np.ndarray) else a for a in args])
    targs = to_torch(args, _dtypes(kernel))
    tirx.compile(kernel, target="sim")(*targs)
    for index, want in expected.items():
        got = targs[index]
        if str(got.dtype) == "torch.bfloat16":
            import torch

            got = got.view(torch.int16)
        got = got.numpy()
        if got.dtype != want.dtype:
            got = got.view(want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"{case.name}: argument {index}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_compiles_to_cubin(case):
    kernel = case.build()
    for arch in ("sm_80", "sm_90"):
        if int(arch[3:]) < case.min_arch:
            with pytest.raises(tirx.ContractError, match=f"sm_{case.min_arch}"):
                tirx.compile(kernel, target=f"cuda -arch={arch}")
            continue
        exe = tirx.compile(kernel, target=f"cuda -arch={arch}")
        assert exe.cubin[:4] == b"\x7fELF"
        assert exe.nvrtc.log == "", exe.nvrtc.log  # no warning about tirx's generated code
        assert exe.stats["spill_stores"] == 0
