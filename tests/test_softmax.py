"""The softmax example (tirx.examples.softmax) against torch.softmax on both targets."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import tirx
from tirx import T
from tirx.examples import softmax as sm
from tirx.examples import softmax_backward as sb
from tirx.examples.softmax import default_warps_per_row, make_softmax
from tirx.examples.softmax_backward import make_softmax_backward


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


def test_the_default_warps_per_row_is_a_power_of_two_that_divides_the_row():
    """3072 columns got warps_per_row=3 and "warps and warps_per_row must be powers of two"
    though the caller chose none; 2176 (17 x 128) got 2, which does not divide it."""
    assert default_warps_per_row(3072) == 2
    assert default_warps_per_row(2176) == 1
    assert make_softmax(2, 3072) is not None and make_softmax(2, 2176) is not None


@pytest.mark.parametrize(
    "kwargs, words",
    [
        # the report's: 65536 columns over 8 warps spilled (255 registers), 2**18 took 20 s
        (dict(cols=65536), ["256 elements", "default for this width",
                            "more than 32768 columns", "online softmax", "torch.softmax"]),
        (dict(cols=2**18), ["1024 elements", "more than 32768 columns"]),
        (dict(cols=65536, warps_per_row=32), ["64 elements", "more than the 32", "1024 threads"]),
        (dict(cols=8192, warps_per_row=1), ["256 elements", "chosen", "use warps_per_row=2"]),
        (dict(cols=32768, warps_per_row=4), ["use warps_per_row=8"]),
        (dict(cols=4096, warps=16, warps_per_row=1), ["more than the 64", "use warps=8 or fewer"]),
        (dict(cols=2048, warps=32, warps_per_row=1), ["use warps=16 or fewer"]),
        (dict(cols=4224), ["132 elements", "warps_per_row=2", "pad the rows to 4352"]),
    ],
)  # fmt: skip
def test_rows_wider_than_the_registers_hold_are_refused_at_the_factory(kwargs, words):
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as info:
        make_softmax(4, **kwargs)
    assert time.perf_counter() - t0 < 1  # before any kernel is built, let alone compiled
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_every_width_up_to_the_limit_in_1024_steps_is_taken():
    for cols in range(1024, sm.MOST_COLS + 1, 1024):
        make_softmax(2, cols)
    for W, cols in ((1, 4096), (2, 8192), (4, 16384), (8, 32768), (16, 32768), (32, 32768)):
        make_softmax(2, cols, warps_per_row=W)


@pytest.mark.parametrize(
    "make",
    [
        lambda: make_softmax(4, 4096, warps=8, warps_per_row=1),  # 128 a lane, 256 threads
        lambda: make_softmax(4, 2048, warps=16, warps_per_row=1),  # 64 a lane, 512 threads
        lambda: make_softmax(4, 32768),  # 128 a thread over 8 warps
        lambda: make_softmax(4, 32768, warps_per_row=32),  # 32 a thread, 1024 threads
    ],
)
def test_the_widest_rows_taken_compile_without_spills(make):
    """The limits are ptxas's: at each one the kernel still fits its registers (NVRTC, no
    GPU needed)."""
    stats = tirx.compile(make(), "cuda -arch=sm_90").nvrtc.stats
    assert stats["spill_stores"] == stats["spill_loads"] == stats["stack_bytes"] == 0


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


# ------------------------------------------------------------------ the backward (dX from Y, dY)


def _grad_inputs(rows, cols, dtype, device="cpu", seed=0):
    """``Y = softmax(3 * randn)`` and ``dY = randn``, both in ``dtype``."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((rows, cols), generator=gen, device=device) * 3
    dy = torch.randn((rows, cols), generator=gen, device=device)
    return torch.softmax(x, -1).to(dtype), dy.to(dtype)


def _butterfly(v: torch.Tensor) -> torch.Tensor:
    """An xor butterfly over the last axis (32 lanes), in float32, as T.cuda.warp_sum and the
    stages of T.cuda.cta_sum add: every lane ends with the same bits (the adds commute)."""
    for offset in (16, 8, 4, 2, 1):
        v = v + v[..., torch.arange(32) ^ offset]
    return v


def _kernel_order_backward(Y, dY, W):
    """dX in float32 in the kernel's order of operations, on the CPU: thread ``t`` of ``32 W``
    holds columns ``4 (j 32 W + t) + k`` and sums its products ``dY Y`` (exact in float32) in
    the order of ``j`` then ``k``; the warps' butterflies, and for ``W > 1`` the butterfly of
    warp 0 over the ``W`` partials (0 in the other lanes); then ``Y (dY - dot)``, rounded once
    to the dtype. The kernel's arithmetic is IEEE float32 (``--fmad=false``), so its result,
    on the simulator and on the GPU, is this bit for bit."""
    rows, cols = Y.shape
    threads = 32 * W
    y = Y.cpu().float().reshape(rows, -1, threads, 4)
    g = dY.cpu().float().reshape(rows, -1, threads, 4)
    p = y * g
    dot = torch.zeros(rows, threads)
    for j in range(p.shape[1]):
        for k in range(4):
            dot = dot + p[:, j, :, k]
    dot = _butterfly(dot.reshape(rows, W, 32))[:, :, 0]  # each warp's total
    if W > 1:
        dot = _butterfly(torch.nn.functional.pad(dot, (0, 32 - W)))[:, :1]
    dx = y * (g - dot.reshape(rows, 1, 1, 1))
    return dx.reshape(rows, cols).to(Y.dtype)


def _float64_error_bound(Y, dY):
    """How far dX may be from ``Y (dY - sum(dY Y))`` in float64, per element: the float32 dot
    product of ``n = cols`` exact products errs by at most ``gamma = (n-1) u / (1 - (n-1) u)``
    times ``sum |dY Y|`` (``u = 2**-24``, any order of summation); the subtraction and the
    product round once each (``2 u |dX|``); rounding to the dtype adds half its unit in the
    last place (subnormals measured at the smallest normal). Returns (reference, bound)."""
    y, g = Y.double().cpu(), dY.double().cpu()
    dot = (y * g).sum(-1, keepdim=True)
    ref = y * (g - dot)
    n, u = Y.shape[-1], 2.0**-24
    gamma = (n - 1) * u / (1 - (n - 1) * u)
    delta = y * gamma * (y * g).abs().sum(-1, keepdim=True) * (1 + 2 * u) + 2 * u * ref.abs()
    info = torch.finfo(Y.dtype)
    bound = 0.5 * info.eps * (ref.abs() + delta).clamp_min(info.tiny) + delta
    return ref, bound * (1 + 1e-9)


def _check_backward(dx, Y, dY, W):
    assert not torch.isnan(dx).any()
    ref, bound = _float64_error_bound(Y, dY)
    assert ((dx.double().cpu() - ref).abs() <= bound).all()
    assert torch.equal(dx.cpu(), _kernel_order_backward(Y, dY, W))


@pytest.mark.parametrize(
    "rows,cols,dtype,warps,per_row,W",
    [
        (4, 128, torch.float16, 4, None, 1),
        (5, 256, torch.bfloat16, 2, None, 1),  # rows not a multiple of the warps per block
        (3, 2048, torch.float16, 4, None, 1),  # one warp per row up to 2048, as before
        (3, 1024, torch.bfloat16, 4, 2, 2),  # a block of two warps per row: cta_sum
        (2, 3968, torch.bfloat16, 4, None, 1),  # 124 elements a lane: the widest one warp takes
        (3, 4096, torch.float16, 4, None, 4),  # too wide for one warp before
        (2, 4608, torch.float16, 4, None, 4),
        (2, 32768, torch.bfloat16, 4, None, 8),  # the widest: 128 elements a thread
        (2, 8192, torch.float16, 4, 32, 32),  # 32 warps (1024 threads)
    ],
)
def test_simulated_backward_is_the_kernels_order_and_near_float64(
    rows, cols, dtype, warps, per_row, W
):
    assert (per_row or sb.default_warps_per_row(cols)) == W
    Y, dY = _grad_inputs(rows, cols, dtype)
    dx = torch.full_like(Y, float("nan"))
    kernel = make_softmax_backward(rows, cols, dtype, warps, warps_per_row=per_row)
    tirx.compile(kernel, target="sim")(Y, dY, dx)
    _check_backward(dx, Y, dY, W)


def test_the_backward_takes_every_width_the_forward_takes():
    """With their defaults, for every multiple of 128 up to 32768 and a step past it: the same
    warps per row but at 2048 (one warp, as before; the forward takes two)."""
    for cols in range(128, sm.MOST_COLS + 1024 + 1, 128):
        try:
            make_softmax(2, cols)
            forward = True
        except ValueError:
            forward = False
        try:
            make_softmax_backward(2, cols)
            backward = True
        except ValueError:
            backward = False
        assert forward == backward, cols
        want = 1 if cols == 2048 else default_warps_per_row(cols)
        assert sb.default_warps_per_row(cols) == want, cols
    assert sb.MOST_COLS == sm.MOST_COLS == 32768
    # every block size too: one warp a row only where a block of such warps holds it
    for warps in (1, 2, 4, 8, 16, 32):
        for cols in range(128, 4096 + 1, 128):
            outcomes = []
            for make in (make_softmax, make_softmax_backward):
                try:
                    make(2, cols, warps=warps)
                    outcomes.append(True)
                except ValueError:
                    outcomes.append(False)
            assert outcomes[0] == outcomes[1], (cols, warps)
    assert sb.default_warps_per_row(2048, 32) == 2 and sb.default_warps_per_row(2048, 16) == 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(
    "cols, dtype, kwargs",
    [
        (32768, "float16", {}),  # the defaults' widest: 8 warps, 128 elements a thread
        (32768, "bfloat16", {}),
        (3968, "float16", {}),  # the defaults' widest over one warp: 124 a lane
        (3968, "bfloat16", {}),
        (2048, "float16", {}),  # one warp, 64 a lane (139 registers before, 80 now)
        (4096, "float16", dict(warps=8, warps_per_row=1)),  # 128 a lane, 256 threads
        (2048, "bfloat16", dict(warps=16, warps_per_row=1)),  # 64 a lane, 512 threads
        (1024, "float16", dict(warps=32, warps_per_row=1)),  # 32 a lane, 1024 threads
        (32768, "float16", dict(warps_per_row=16)),  # 64 a thread, 512 threads
        (32768, "bfloat16", dict(warps_per_row=32)),  # 32 a thread, 1024 threads
    ],
)
def test_the_widest_backward_rows_compile_without_spills(cols, dtype, kwargs, arch):
    """At each limit the backward still fits its registers (NVRTC, no GPU needed)."""
    kernel = make_softmax_backward(4, cols, dtype, **kwargs)
    stats = tirx.compile(kernel, f"cuda -arch={arch}").nvrtc.stats
    assert stats["spill_stores"] == stats["spill_loads"] == stats["stack_bytes"] == 0


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(cols=65536), ["256 elements of a row of Y and of dY", "default for this width",
                            "more than 32768 columns", "walks the row in tiles",
                            "torch's softmax backward"]),
        (dict(cols=2**18), ["1024 elements", "more than 32768 columns"]),
        (dict(cols=65536, warps_per_row=32), ["64 elements", "more than the 32", "1024 threads"]),
        (dict(cols=8192, warps_per_row=1), ["256 elements", "chosen", "use warps_per_row=2"]),
        (dict(cols=32768, warps_per_row=4), ["use warps_per_row=8"]),
        (dict(cols=4096, warps=16, warps_per_row=1), ["more than the 64", "use warps=8 or fewer"]),
        (dict(cols=2048, warps=32, warps_per_row=1), ["use warps=16 or fewer"]),
        (dict(cols=4224), ["132 elements", "warps_per_row=2",
                           "pad the rows of Y and dY to 4352 with zeros"]),
    ],
)  # fmt: skip
def test_the_backward_refuses_rows_wider_than_its_registers_hold(kwargs, words):
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as info:
        make_softmax_backward(4, **kwargs)
    assert time.perf_counter() - t0 < 1  # before any kernel is built
    for w in words:
        assert w in str(info.value), (w, str(info.value))


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (dict(cols=100), ValueError, "multiple of 128"),
        (dict(cols=256, warps_per_row=4), ValueError, "multiple of 512"),
        (dict(cols=128, warps=3), ValueError, "powers of two"),
        (dict(cols=128, warps_per_row=64), ValueError, "powers of two"),
        (dict(cols=128, dtype="float32"), ValueError, "float16 or bfloat16"),
        (dict(cols=128, dtype=torch.float32), ValueError, "float16 or bfloat16"),
        (dict(cols=128, dtype="bf16"), ValueError, "unknown dtype 'bf16'"),
        (dict(cols=128.0), TypeError, "cols must be an int"),
        (dict(cols=256, warps_per_row=True), TypeError, "warps_per_row must be an int"),
    ],
)
def test_the_backward_refuses_bad_arguments(bad, error, match):
    with pytest.raises(error, match=match):
        make_softmax_backward(4, **bad)


def test_the_backward_takes_dtypes_as_the_forward_does_and_torch_dtypes():
    for spellings in (("float16", "half", T.float16, torch.float16), ("bfloat16", torch.bfloat16)):
        irs = {str(make_softmax_backward(3, 4096, d).ir) for d in spellings}
        assert len(irs) == 1, spellings
    want = str(make_softmax_backward(3, 1024, warps_per_row=2).ir)
    assert str(make_softmax_backward(np.int64(3), 1024, warps_per_row=np.int32(2)).ir) == want


def test_the_torch_op_backward_takes_rows_wider_than_one_warp():
    """ops.softmax(x).backward() on CPU tensors (the simulator) for 4096 columns, which the
    one-warp backward refused: against the float64 gradient of tirx's Y, torch's softmax
    backward of the same Y and dY (float32: its dot product errs by gamma sum |dY Y| as the
    kernel's), and autograd through torch.softmax in float64, from whose Y tirx's differs by
    at most ``dY_ = eps max(Y, 2**-14)`` (the forward's one unit in the last place): the
    gradient by ``dY_ |dY - dot| + Y sum(dY_ |dY|)`` more."""
    from tirx.examples import ops

    x = _rows(3, 4096, torch.float16, seed=3)
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(4)).half()
    xr = x.clone().requires_grad_()
    y = ops.softmax(xr)
    y.backward(dy)
    y = y.detach()
    _check_backward(xr.grad, y, dy, W=4)
    ref, bound = _float64_error_bound(y, dy)
    want = torch.ops.aten._softmax_backward_data(dy.float(), y.float(), -1, torch.float32)
    _, torch_bound = _float64_error_bound(y.float(), dy)  # float32, no rounding to float16
    assert ((want.double() - ref).abs() <= torch_bound).all()
    assert ((xr.grad.double() - want.double()).abs() <= bound + torch_bound).all()
    xd = x.double().requires_grad_()
    torch.softmax(xd, -1).backward(dy.double())
    yd, g = torch.softmax(x.double(), -1), dy.double()
    dy_ = torch.finfo(torch.float16).eps * yd.clamp_min(2.0**-14)
    dot = (yd * g).sum(-1, keepdim=True)
    slack = dy_ * (g - dot).abs() + y.double() * (dy_ * g.abs()).sum(-1, keepdim=True)
    assert ((xr.grad.double() - xd.grad).abs() <= bound + slack * (1 + 1e-9)).all()


@pytest.mark.gpu
@pytest.mark.parametrize(
    "rows,cols,dtype",
    [
        (4096, 1024, torch.float16),  # one warp per row
        (1000, 2048, torch.bfloat16),
        (77, 3968, torch.float16),  # one warp, 124 elements a lane
        (1000, 4096, torch.float16),  # 4 warps per row
        (300, 32768, torch.bfloat16),  # 8 warps per row, 128 elements a thread
    ],
)
def test_gpu_backward_matches_float64_and_the_kernels_order(rows, cols, dtype):
    Y, dY = _grad_inputs(rows, cols, dtype, device="cuda", seed=5)
    dx = torch.full_like(Y, float("nan"))
    tirx.compile(make_softmax_backward(rows, cols, dtype), target="cuda")(Y, dY, dx)
    torch.cuda.synchronize()
    _check_backward(dx.cpu(), Y.cpu(), dY.cpu(), sb.default_warps_per_row(cols))
