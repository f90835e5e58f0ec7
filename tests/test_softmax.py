"""The softmax example (tirx.examples.softmax) against torch.softmax on both targets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tirx
from tirx.examples.softmax import default_warps_per_row, make_softmax


def _within_one_ulp(got: torch.Tensor, x: torch.Tensor) -> float:
    """The largest error from the float64 softmax, in units of the output dtype's last place
    (subnormal outputs measured at the smallest normal)."""
    ref = torch.softmax(x.double(), dim=-1)
    eps = torch.finfo(got.dtype).eps
    bound = eps * ref.abs().clamp_min(2.0**-14)
    return ((got.double() - ref).abs() / bound).max().item()


def _rows(rows, cols, dtype, device="cpu", seed=0):
    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn((rows, cols), generator=gen, device=device) * 3).to(dtype)


@pytest.mark.parametrize(
    "rows,cols,dtype,warps,per_row",
    [
        (4, 128, torch.float16, 4, 1),
        (5, 256, torch.float16, 2, 1),  # rows not a multiple of the warps per block
        (3, 1024, torch.bfloat16, 4, 1),
        (3, 1024, torch.float16, 4, 2),  # a block of two warps per row: cta_max / cta_sum
        (2, 2048, torch.bfloat16, 4, None),  # the default for wide rows
    ],
)
def test_simulated_softmax_is_within_one_ulp_of_float64(rows, cols, dtype, warps, per_row):
    x = _rows(rows, cols, dtype)
    y = torch.full_like(x, float("nan"))
    name = "float16" if dtype == torch.float16 else "bfloat16"
    tirx.compile(make_softmax(rows, cols, name, warps, per_row), target="sim")(x, y)
    assert not torch.isnan(y).any()
    assert _within_one_ulp(y, x) <= 1.0


def test_large_inputs_do_not_overflow():
    """Subtracting the row maximum first: a row of 60000s is still uniform."""
    x = torch.full((1, 128), 60000.0, dtype=torch.float16)
    x[0, 7] = 65504.0
    y = torch.empty_like(x)
    tirx.compile(make_softmax(1, 128), target="sim")(x, y)
    assert y[0, 7].item() == pytest.approx(1.0)
    assert torch.isfinite(y).all()


def test_wide_rows_spread_over_a_block():
    assert default_warps_per_row(1024) == 1
    assert default_warps_per_row(4096) == 4
    assert default_warps_per_row(65536) == 8


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(rows=4, cols=100), "multiple of 128"),
        (dict(rows=4, cols=128, dtype="float32"), "float16 or bfloat16"),
        (dict(rows=4, cols=128, dtype="int16"), "float16 or bfloat16"),
        (dict(rows=4, cols=128, dtype="bf16"), "unknown dtype 'bf16'"),
        (dict(rows=4, cols=128, warps=3), "powers of two"),
        (dict(rows=4, cols=256, warps_per_row=4), "multiple of 512"),
    ],
)
def test_bad_shapes_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        make_softmax(**bad)


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (dict(rows=None, cols=128), TypeError, "rows must be an int, got None"),
        (dict(rows="4", cols=128), TypeError, "rows must be an int, got '4'"),
        (dict(rows=0, cols=128), ValueError, "rows must be a positive int, got 0"),
        (dict(rows=-4, cols=128), ValueError, "rows must be a positive int, got -4"),
        (dict(rows=4, cols=0), ValueError, "cols must be a positive int, got 0"),
        (dict(rows=4, cols=128.0), TypeError, "cols must be an int"),
        (dict(rows=True, cols=128), TypeError, "rows must be an int, not a bool"),
        (dict(rows=4, cols=128, warps=4.0), TypeError, "warps must be an int"),
        (dict(rows=4, cols=128, warps_per_row="1"), TypeError, "warps_per_row must be an int"),
        (dict(rows=4, cols=256, warps_per_row=True), TypeError, "warps_per_row must be an int"),
    ],
)
def test_arguments_that_are_not_ints_are_refused_by_name(bad, error, match):
    with pytest.raises(error, match=match):
        make_softmax(**bad)


def test_numpy_integers_are_taken():
    want = str(make_softmax(6, 256, warps=2).ir)
    assert str(make_softmax(np.int64(6), np.int32(256), warps=np.int64(2)).ir) == want
    want = str(make_softmax(3, 1024, warps_per_row=2).ir)
    assert str(make_softmax(3, np.int64(1024), warps_per_row=np.int64(2)).ir) == want


@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,cols,dtype",
    [
        (4096, 1024, torch.float16),
        (1000, 4096, torch.float16),
        (77, 1024, torch.bfloat16),
        (300, 8192, torch.bfloat16),
    ],
)
def test_gpu_softmax_is_within_one_ulp_of_float64(rows, cols, dtype):
    x = _rows(rows, cols, dtype, device="cuda", seed=1)
    y = torch.full_like(x, float("nan"))
    name = "float16" if dtype == torch.float16 else "bfloat16"
    tirx.compile(make_softmax(rows, cols, name), target="cuda")(x, y)
    assert _within_one_ulp(y, x) <= 1.0


@pytest.mark.gpu
def test_gpu_and_simulator_agree_to_one_ulp():
    x = _rows(8, 512, torch.float16, seed=2)
    outs = []
    for target, dev in (("sim", "cpu"), ("cuda", "cuda")):
        y = torch.empty_like(x, device=dev)
        tirx.compile(make_softmax(8, 512), target=target)(x.to(dev), y)
        outs.append(y.cpu().double())
    eps = torch.finfo(torch.float16).eps
    assert ((outs[0] - outs[1]).abs() <= eps * outs[1].abs().clamp_min(2.0**-14)).all()
