"""The e4m3 GEMM of ``tirx.examples.gemm_fp8`` (the warp-specialized kernel of gemm_hopper
with k32 wgmma and per-tensor scales): its argument checks, the simulator against numpy on
integer data (exact in e4m3, scales powers of two), its sm_90a build, and on the GPU
``torch._scaled_mm``. The synchronisation is gemm_hopper's code, whose planted faults
``tests/test_gemm_hopper.py`` checks."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx.examples import gemm_fp8 as gf
from tirx.examples import gemm_hopper as gh

torch = pytest.importorskip("torch")


def _operands(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = torch.from_numpy(rng.integers(-2, 3, size=(M, K)).astype(np.float32))
    b = torch.from_numpy(rng.integers(-2, 3, size=(N, K)).astype(np.float32))
    return a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)


def _want(a, b, sa, sb, out_dtype):
    """The exact product sums, scaled (exactly: powers of two) and rounded once."""
    exact = (a.double().numpy() @ b.double().numpy().T) * (sa * sb)
    return torch.from_numpy(exact).to(getattr(torch, out_dtype)).double().numpy()


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="multiples of 128, 256, 128"):
        gf.make_gemm_fp8(128, 256, 64)
    with pytest.raises(ValueError, match="multiples of 256, 256, 128"):
        gf.make_gemm_fp8(128, 256, 128, cluster=2)
    with pytest.raises(ValueError, match="out_dtype must be"):
        gf.make_gemm_fp8(128, 256, 128, out_dtype="float32")
    with pytest.raises(ValueError, match="bn must be 128 or 256"):
        gf.make_gemm_fp8(128, 64, 128, bn=64)
    with pytest.raises(ValueError, match="shared memory"):
        gf.make_gemm_fp8(128, 256, 128, stages=4)


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        ((0, 256, 128), {}, ValueError, "M must be a positive int, got 0"),
        ((128, 256, None), {}, TypeError, "K must be an int"),
        ((128, 256, 128), {"stages": 2.0}, TypeError, "stages must be an int"),
        ((128, 256, 128), {"group": 0}, ValueError, "group must be a positive int, got 0"),
        ((128, 256, 128), {"group": -1}, ValueError, "group must be a positive int"),
        ((128, 256, 128), {"group": 2.5}, TypeError, "group must be an int"),
    ],
)
def test_arguments_that_are_not_ints_are_refused_by_name(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        gf.make_gemm_fp8(*args, **kwargs)


def test_numpy_integers_are_taken():
    want = str(gf.make_gemm_fp8(256, 256, 128, group=2).ir)
    got = gf.make_gemm_fp8(np.int64(256), np.int32(256), np.int64(128), group=np.int64(2))
    assert str(got.ir) == want


# (out_dtype, bn, stages, cluster, M, N, K, sms)
CASES = [
    ("bfloat16", 128, 2, 1, 256, 256, 384, 2),
    ("float16", 256, 3, 1, 256, 512, 256, 2),
    ("bfloat16", 128, 4, 2, 512, 256, 256, 4),
    ("float16", 256, 3, 2, 512, 256, 256, 2),
]


@pytest.mark.parametrize(("out_dtype", "bn", "stages", "cluster", "M", "N", "K", "sms"), CASES)
def test_simulator_equals_numpy_on_integer_data(out_dtype, bn, stages, cluster, M, N, K, sms):
    kernel = gf.make_gemm_fp8(M, N, K, out_dtype, stages, cluster, bn)
    a, b = _operands(M, N, K)
    sa, sb = 0.5, 0.25
    out = torch.full((M, N), float("nan"), dtype=getattr(torch, out_dtype))
    tirx.compile(kernel, target=f"sim -sms={sms}")(
        a, b, torch.tensor([sa]), torch.tensor([sb]), out
    )
    np.testing.assert_array_equal(out.double().numpy(), _want(a, b, sa, sb, out_dtype))


@pytest.mark.parametrize(
    ("out_dtype", "bn", "stages", "cluster"),
    [("bfloat16", 256, 3, 1), ("float16", 128, 4, 1), ("bfloat16", 256, 3, 2)],
)
def test_sm90a_build_has_no_spills(out_dtype, bn, stages, cluster):
    exe = tirx.compile(
        gf.make_gemm_fp8(4096, 4096, 4096, out_dtype, stages, cluster, bn),
        target="cuda -arch=sm_90a",
    )
    stats = exe.nvrtc.stats
    assert stats["registers"] == 168
    assert stats["spill_stores"] == stats["spill_loads"] == stats["stack_bytes"] == 0
    assert gh.shared_bytes(bn, stages, 1, 2, gf.BK_FP8) < exe.lowered.shared_bytes
    assert exe.lowered.shared_bytes <= gh.SHARED_LIMIT
    sass = exe.sass
    if sass is None:
        pytest.skip("no disassembler installed (the sass extra)")
    assert sass.count(f"QGMMA.64x{bn}x32.F32.E4M3.E4M3") == 4  # 4 K steps of a 128-deep tile
    assert sass.count("UTMALDG.2D.MULTICAST") == (cluster == 2)
    assert "UTMASTG.2D" in sass
    assert "STL" not in sass and "LDL" not in sass


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("out_dtype", "bn", "stages", "cluster"),
    [("bfloat16", 256, 3, 1), ("float16", 128, 4, 1), ("bfloat16", 256, 3, 2)],
)
def test_gpu_equals_scaled_mm(out_dtype, bn, stages, cluster):
    """Bit for bit the product of cuBLAS's fp8 GEMM in its fast-accumulation mode, which
    accumulates in the wgmma accumulator throughout, as this kernel does (measured on an
    H100, benchmarks/results/fp8_accuracy-h100.md: every element equal). cuBLAS's default
    mode moves partial sums into full float32 every few K steps and differs from both by an
    ulp or two of the output in up to 1% of the elements at K = 2048."""
    n = 2048
    g = torch.Generator(device="cuda").manual_seed(stages)
    a = torch.randn((n, n), device="cuda", generator=g).to(torch.float8_e4m3fn)
    b = torch.randn((n, n), device="cuda", generator=g).to(torch.float8_e4m3fn)
    sa = torch.tensor([0.5], device="cuda")
    sb = torch.tensor([2.0], device="cuda")
    odt = getattr(torch, out_dtype)
    want = torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=odt, use_fast_accum=True)
    out = torch.full((n, n), float("nan"), dtype=odt, device="cuda")
    kernel = gf.make_gemm_fp8(n, n, n, out_dtype, stages, cluster, bn)
    tirx.compile(kernel, target="cuda")(a, b, sa, sb, out)
    assert torch.equal(out, want)
    ref = (a.double() @ b.double().T) * (0.5 * 2.0)
    assert ((out.double() - ref).norm() / ref.norm()).item() < 3e-3


def test_bn_none_is_the_default_as_in_make_gemm_hopper():
    want = str(gf.make_gemm_fp8(128, 256, 128).ir)
    assert str(gf.make_gemm_fp8(128, 256, 128, bn=None).ir) == want
    assert str(gf.make_gemm_fp8(128, 256, 128, bn=256).ir) == want
    # bn=128's default stages are 4, as without bn=None
    assert str(gf.make_gemm_fp8(128, 256, 128, bn=128).ir) == str(
        gf.make_gemm_fp8(128, 256, 128, stages=4, bn=128).ir
    )


@pytest.mark.parametrize(
    "make_scale", [lambda s: torch.tensor(s), lambda s: torch.tensor([s])], ids=["0-d", "(1,)"]
)
def test_scaled_mm_takes_a_scale_of_shape_0d_or_1_as_torch_does(make_scale):
    """torch._scaled_mm takes a per-tensor scale as a 0-d tensor or a (1,) one; so does
    scaled_mm, on the simulator, and the kernel reads the element (exact: powers of two)."""
    M, N, K = 128, 256, 128
    a, b = _operands(M, N, K, seed=1)
    sa, sb = make_scale(0.5), make_scale(0.25)
    out = gf.scaled_mm(a, b.t(), sa, sb)
    assert out.dtype == torch.bfloat16 and out.shape == (M, N)
    np.testing.assert_array_equal(out.double().numpy(), _want(a, b, 0.5, 0.25, "bfloat16"))
    half = gf.scaled_mm(a, b.t(), sa, make_scale(4.0), out_dtype=torch.float16)
    np.testing.assert_array_equal(half.double().numpy(), _want(a, b, 0.5, 4.0, "float16"))


def test_scaled_mm_copies_operands_whose_data_is_not_16_byte_aligned():
    """A contiguous ``a`` that starts one byte into its storage (``x[1:].view(...)``): the
    kernel's 16-byte TMA/cp.async reads need its pointer aligned, so the entry copies it (it
    raised a SimulationError inside the library's kernel)."""
    M, N, K = 128, 256, 128
    a, b = _operands(M, N, K, seed=2)
    shifted = torch.empty(1 + M * K, dtype=a.dtype)
    shifted[1:] = a.reshape(-1)
    moved = shifted[1:].view(M, K)
    assert moved.is_contiguous() and moved.data_ptr() % 16
    out = gf.scaled_mm(moved, b.t(), torch.tensor(0.5), torch.tensor(0.25))
    np.testing.assert_array_equal(out.double().numpy(), _want(a, b, 0.5, 0.25, "bfloat16"))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda a, b: gf.scaled_mm(a, b, torch.tensor(1.0), torch.tensor(1.0)), ValueError,
         "b must be column-major"),
        (lambda a, b: gf.scaled_mm(a, b.t(), 1.0, torch.tensor(1.0)), TypeError,
         "scale_a must be a float32 tensor of one element"),
        (lambda a, b: gf.scaled_mm(a, b.t(), torch.tensor(1.0), torch.ones(2)), ValueError,
         r"scale_b must be a float32 tensor of one element \(a per-tensor scale"),
        (lambda a, b: gf.scaled_mm(a, b.t(), torch.tensor(1.0, dtype=torch.float64),
                                   torch.tensor(1.0)), ValueError, "got torch.float64"),
        (lambda a, b: gf.scaled_mm(a, b.t(), torch.tensor(1.0), torch.tensor(1.0),
                                   out_dtype=torch.float32), ValueError, "out_dtype must be"),
        (lambda a, b: gf.scaled_mm(a.float(), b.t(), torch.tensor(1.0), torch.tensor(1.0)),
         ValueError, "a must be float8_e4m3fn"),
        (lambda a, b: gf.scaled_mm(a, b.t(), torch.tensor(1.0), torch.tensor(1.0), bn=64),
         ValueError, "bn must be 128 or 256"),
        (lambda a, b: gf.scaled_mm(a[:, :64].contiguous(), b.t(), torch.tensor(1.0),
                                   torch.tensor(1.0)), ValueError, "a's columns"),
    ],
)  # fmt: skip
def test_scaled_mm_refuses_what_it_cannot_run_by_name(call, error, message):
    a, b = _operands(128, 256, 128)
    with pytest.raises(error, match=message):
        call(a, b)


@pytest.mark.gpu
def test_gpu_scaled_mm_equals_torchs_with_0d_scales():
    n = 1024
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((n, n), device="cuda", generator=g).to(torch.float8_e4m3fn)
    b = torch.randn((n, n), device="cuda", generator=g).to(torch.float8_e4m3fn)
    sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
    want = torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                            use_fast_accum=True)  # fmt: skip
    assert torch.equal(gf.scaled_mm(a, b.t(), sa, sb), want)
