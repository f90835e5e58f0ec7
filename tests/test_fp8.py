"""The 8-bit float storage types (float8_e4m3fn, float8_e5m2): conversion to and from
float32 on both targets, torch fp8 tensors as kernel arguments, and what they refuse.

The references are the OCP FP8 definitions written out here as bit patterns, and torch's
own fp8 conversions where they agree with CUDA's saturating one (finite values in range).
"""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.helpers import caret_line, define
from tirx.dtypes import dtype_of
from tirx.errors import TirxError

torch = pytest.importorskip("torch")

FORMATS = ["float8_e4m3fn", "float8_e5m2"]
N = 256


def _kernel(fmt: str, tmp):
    """Every fp8 pattern to float32 (``O``), and float32 values to fp8 three ways: a store
    that converts, an explicit ``T.<fmt>(x)`` and a float64 value (rounded once)."""
    return define(
        f"""
        @T.function
        def k(F: T.Tensor(({N},), "{fmt}"), X: T.Tensor(({N},), "float32"),
              O: T.Tensor(({N},), "float32"), G: T.Tensor((3, {N}), "{fmt}")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128))
            i = T.cuda.block_idx("x") * 128 + T.cuda.thread_idx("x")
            O[i] = T.float32(F[i])
            G[0, i] = X[i]
            G[1, i] = T.{fmt}(X[i] * 1.0)
            G[2, i] = T.float64(X[i]) + T.float64(X[i]) * 1e-12
        """,
        tmp,
        "k",
    )


def _values() -> np.ndarray:
    """Float32 inputs: in range, ties, subnormals, beyond the largest value, specials."""
    rng = np.random.default_rng(0)
    v = rng.standard_normal(N).astype(np.float32) * np.float32(4.0)
    special = [0.0, -0.0, 1.0, -1.0, 448.0, 464.0, 480.0, 1e6, np.inf, -np.inf, np.nan,
               2**-9, 2**-10, 3 * 2**-10, 1.0625, 1.1875, 57344.0, 61440.0, 2**-16, 2**-17,
               -1e30, 240.0, 3 * 2**-17, 65504.0, 2**-6, 2**-14, 17.0, 19.0]  # fmt: skip
    v[: len(special)] = special
    return v


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.uint8).numpy()


def _saturating(values: np.ndarray, fmt: str) -> np.ndarray:
    """CUDA's __NV_SATFINITE conversion from torch's round-to-nearest-even one: values beyond
    the largest finite one (and infinities) become it, with their sign; NaN is 0x7f."""
    largest = 448.0 if fmt == "float8_e4m3fn" else 57344.0
    clipped = np.clip(values, -largest, largest)
    out = _bits(torch.from_numpy(clipped).to(getattr(torch, fmt))).copy()
    out[np.isnan(values)] = 0x7F
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_decode_every_pattern(fmt, tmp_path):
    bits = torch.arange(N, dtype=torch.int32).to(torch.uint8).view(getattr(torch, fmt))
    out = np.zeros(N, np.float32)
    g = torch.zeros((3, N), dtype=getattr(torch, fmt))
    tirx.compile(_kernel(fmt, tmp_path), target="sim")(bits, _values(), out, g)
    want = bits.float().numpy()
    np.testing.assert_array_equal(out, want)  # NaN where torch has NaN, infinities for e5m2
    if fmt == "float8_e4m3fn":
        assert np.isnan(out[[0x7F, 0xFF]]).all() and np.isfinite(np.delete(out, [0x7F, 0xFF])).all()
        assert out[0x7E] == 448 and out[0x01] == 2**-9
    else:
        assert out[0x7C] == np.inf and out[0xFC] == -np.inf and out[0x7B] == 57344
        assert np.isnan(out[[0x7D, 0x7E, 0x7F]]).all()


@pytest.mark.parametrize("fmt", FORMATS)
def test_encode_rounds_to_nearest_even_and_saturates(fmt, tmp_path):
    x = _values()
    out = np.zeros(N, np.float32)
    g = torch.zeros((3, N), dtype=getattr(torch, fmt))
    tirx.compile(_kernel(fmt, tmp_path), target="sim")(torch.zeros(N, dtype=g.dtype), x, out, g)
    want = _saturating(x, fmt)
    for row in range(2):  # (row 2, a float64 a hair above x, breaks ties away from zero)
        np.testing.assert_array_equal(_bits(g[row]), want, err_msg=f"row {row}")
    largest = 0x7E if fmt == "float8_e4m3fn" else 0x7B
    assert _bits(g[0])[[8, 9]].tolist() == [largest, 0x80 | largest]  # +-inf saturate
    if fmt == "float8_e4m3fn":
        # 464 is the tie between 448 and 480 (not a value): saturation keeps 448
        assert _bits(g[0])[[4, 5, 6]].tolist() == [0x7E, 0x7E, 0x7E]
        assert _bits(g[0])[[14, 15]].tolist() == [0x38, 0x3A]  # 1.0625 -> 1.0, 1.1875 -> 1.25


def test_float64_is_rounded_once(tmp_path):
    """A float64 just above an fp8 tie rounds up; rounding to float32 first would land on the
    tie and go to even (down)."""
    k = define(
        """
        @T.function
        def k(D: T.Tensor((2,), "float64"), G: T.Tensor((2,), "float8_e4m3fn")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=2))
            i = T.cuda.thread_idx("x")
            G[i] = D[i]
        """,
        tmp_path,
        "k",
    )
    d = np.array([1.0625 + 2**-40, 1.0625 - 2**-40])  # 1.0625: the tie of 1.0 and 1.125
    g = torch.zeros(2, dtype=torch.float8_e4m3fn)
    tirx.compile(k, target="sim")(d, g)
    assert _bits(g).tolist() == [0x39, 0x38]
    assert "tirx_d2f_odd" in tirx.compile(k, target="cuda -arch=sm_90").source


def test_fp8_dtypes_and_generated_code(tmp_path):
    e4, e5 = dtype_of("float8_e4m3fn"), dtype_of("float8_e5m2")
    assert (e4.bits, e4.c_type, e4.torch_name) == (8, "unsigned char", "float8_e4m3fn")
    assert tirx.T.float8_e5m2.dtype is e5
    source = tirx.compile(_kernel("float8_e4m3fn", tmp_path), target="cuda -arch=sm_90").source
    assert "unsigned char* __restrict__ F" in source
    assert "= ((float)(tirx_e4m32f(F[" in source  # a load decodes the bits
    assert "cvt.rn.satfinite.e4m3x2.f32" in source  # what cuda_fp8.h uses on sm_89+
    assert "#include" not in source


def test_the_launcher_checks_fp8_tensors(tmp_path):
    exe = tirx.compile(_kernel("float8_e5m2", tmp_path), target="sim")
    f = torch.zeros(N, dtype=torch.float8_e4m3fn)  # the other fp8 format
    with pytest.raises((TypeError, ValueError), match="F"):
        exe(f, torch.zeros(N), torch.zeros(N), torch.zeros((3, N), dtype=torch.float8_e5m2))


@pytest.mark.parametrize(
    "line,message",
    [
        ("G[0, i] = F[i] * 2.0", "does not compute on float8_e4m3fn"),
        ("G[0, i] = -F[i]", "does not compute on float8_e4m3fn"),
        ("O[i] = T.sqrt(F[i])", "T.sqrt does not compute on float8_e4m3fn"),
        ("O[i] = T.float32(F[i] < 1.0)", "does not compute on float8_e4m3fn"),
    ],
)
def test_arithmetic_on_fp8_is_refused(line, message, tmp_path):
    """The real TIRx's CUDA codegen has no arithmetic on fp8 (only conversions): refused at
    the user's line, with the conversion to write."""
    k = f"""
        @T.function
        def k(F: T.Tensor((32,), "float8_e4m3fn"), O: T.Tensor((32,), "float32"),
              G: T.Tensor((1, 32), "float8_e4m3fn")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            i = T.cuda.lane_id()
            {line}
        """
    with pytest.raises(TirxError, match=message) as e:
        tirx.compile(define(k, tmp_path, "k"), target="sim")
    assert "T.float32" in e.value.hint
    fixed = line.replace("F[i]", "T.float32(F[i])")
    tirx.compile(define(k.replace(line, fixed), tmp_path, "k"), target="sim")


@pytest.mark.parametrize("fmt", FORMATS)
def test_fp8_scalar_parameters_are_refused_at_their_annotation(fmt, tmp_path):
    """Refused for both targets when the kernel is defined, at the parameter's annotation,
    with the two ways to pass the value; the first of them runs."""
    k = """
        @T.function
        def k(x: T.{dtype}, O: T.Tensor((32,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            O[T.cuda.lane_id()] = T.float32(T.{fmt}(x))
        """
    with pytest.raises(tirx.TirxSyntaxError) as e:
        define(k.format(dtype=fmt, fmt=fmt), tmp_path, "k")
    assert "parameter 'x': fp8 scalars are not a kernel parameter type" in e.value.message
    assert caret_line(str(e.value)) == f'def k(x: T.{fmt}, O: T.Tensor((32,), "float32")):'
    assert "^" * len(f"T.{fmt}") in str(e.value)
    assert f"x: T.float32 and convert inside with T.{fmt}(x)" in e.value.hint
    fixed = define(k.format(dtype="float32", fmt=fmt), tmp_path, "k")
    out = torch.zeros(32)
    tirx.compile(fixed, target="sim")(1.5, out)
    assert torch.equal(out, torch.full((32,), 1.5))
    assert tirx.compile(fixed, target="cuda -arch=sm_90").source


def _reinterpret_kernel(fmt: str, tmp):
    """T.reinterpret between fp8 and uint8, both ways: of a value computed in the kernel (held
    as a float in the C) and of one read from memory (its stored bits)."""
    return define(
        f"""
        @T.function
        def k(F: T.Tensor(({N},), "{fmt}"), X: T.Tensor(({N},), "float32"),
              U: T.Tensor((2, {N}), "uint8"), B: T.Tensor(({N},), "uint8"),
              G: T.Tensor((2, {N}), "{fmt}")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128))
            i = T.cuda.block_idx("x") * 128 + T.cuda.thread_idx("x")
            U[0, i] = T.reinterpret(T.{fmt}(X[i]), ty="uint8")
            U[1, i] = T.reinterpret(F[i], ty="uint8")
            G[0, i] = T.reinterpret(B[i], ty="{fmt}")
            G[1, i] = T.reinterpret(T.uint8(B[i] ^ 1), ty="{fmt}")
        """,
        tmp,
        "k",
    )


def _reinterpret_inputs(fmt: str):
    dt = getattr(torch, fmt)
    pattern = torch.arange(N, dtype=torch.int32).to(torch.uint8)
    return [pattern.view(dt), torch.from_numpy(_values()), torch.zeros((2, N), dtype=torch.uint8),
            pattern.clone(), torch.zeros((2, N), dtype=dt)]  # fmt: skip


@pytest.mark.parametrize("fmt", FORMATS)
def test_fp8_reinterpret_moves_bits(fmt, tmp_path):
    """The bits, not the value: reinterpreting 1.0 gives its pattern (0x38 in e4m3), and a
    pattern read as fp8 is that pattern (the C encodes the float it holds back to fp8; a value
    cast of 1.0 to unsigned char would give 1)."""
    f, x, u, b, g = _reinterpret_inputs(fmt)
    tirx.compile(_reinterpret_kernel(fmt, tmp_path), target="sim")(f, x, u, b, g)
    finite = np.isfinite(x.numpy())
    want = _bits(x.to(getattr(torch, fmt)))  # in range, torch rounds as CUDA does
    inside = finite & (np.abs(x.numpy()) <= (448 if fmt == "float8_e4m3fn" else 57344))
    np.testing.assert_array_equal(u[0].numpy()[inside], want[inside])
    np.testing.assert_array_equal(u[1].numpy(), np.arange(N, dtype=np.uint8))
    # stored back as fp8 values (a saturating conversion): every finite pattern as it was
    finite = f.float().isfinite().numpy()
    for row, flip in ((g[0], 0), (g[1], 1)):
        keep = finite[np.arange(N) ^ flip]
        np.testing.assert_array_equal(_bits(row)[keep], (np.arange(N, dtype=np.uint8) ^ flip)[keep])
    src = tirx.compile(_reinterpret_kernel(fmt, tmp_path), target="cuda -arch=sm_90").source
    short = "e4m3" if fmt == "float8_e4m3fn" else "e5m2"
    body = src.split('extern "C"')[1]
    assert f"((unsigned char)(tirx_f2{short}((float)(tirx_{short}2f(tirx_f2{short}(" in body
    assert "+ 256)] = ((unsigned char)(F[(" in body  # the stored bits


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
def test_gpu_fp8_reinterpret_equals_the_simulator(fmt, tmp_path):
    k = _reinterpret_kernel(fmt, tmp_path)
    sim = _reinterpret_inputs(fmt)
    tirx.compile(k, target="sim")(*sim)
    gpu = [t.cuda() for t in _reinterpret_inputs(fmt)]
    tirx.compile(k, target="cuda")(*gpu)
    torch.cuda.synchronize()
    nan_in = np.isnan(sim[1].numpy())
    _assert_same_bits(gpu[2][0].cpu().numpy(), sim[2][0].numpy(), nan_in, getattr(torch, fmt))
    np.testing.assert_array_equal(gpu[2][1].cpu().numpy(), sim[2][1].numpy())
    nan = sim[0].float().isnan().numpy()
    for row in (0, 1):
        nan_in = nan[np.arange(N) ^ row]
        _assert_same_bits(_bits(gpu[4].cpu())[row], _bits(sim[4])[row], nan_in, sim[0].dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
def test_gpu_fp8_conversions_equal_the_simulator(fmt, tmp_path):
    """Bit-equal on every pattern and every input (sm_90: the hardware's cvt.rn.satfinite)."""
    k = _kernel(fmt, tmp_path)
    dt = getattr(torch, fmt)
    bits = torch.arange(N, dtype=torch.int32).to(torch.uint8).view(dt)
    x = torch.from_numpy(_values())
    sim_o, sim_g = torch.zeros(N), torch.zeros((3, N), dtype=dt)
    tirx.compile(k, target="sim")(bits, x, sim_o, sim_g)
    gpu_o, gpu_g = torch.zeros(N, device="cuda"), torch.zeros((3, N), dtype=dt, device="cuda")
    tirx.compile(k, target="cuda")(bits.cuda(), x.cuda(), gpu_o, gpu_g)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(gpu_o.cpu().numpy(), sim_o.numpy())
    _assert_same_bits(_bits(gpu_g.cpu()), _bits(sim_g), np.isnan(x.numpy()), dt)


def _assert_same_bits(got, want, nan_in, dt):
    np.testing.assert_array_equal(got[..., ~nan_in], want[..., ~nan_in])
    # a NaN input gives a NaN (its sign bit is the hardware's choice)
    decoded = torch.from_numpy(np.ascontiguousarray(got[..., nan_in])).view(dt).float()
    assert decoded.isnan().all()


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
def test_gpu_fp8_integer_fallback_equals_the_simulator(fmt):
    """The conversions generated code uses before sm_89 (integer arithmetic, no cvt to fp8),
    compiled with the fallback forced and run on this GPU: bit-equal to the simulator."""
    cupy = pytest.importorskip("cupy")
    from tirx.backend.cuda import codegen, fp8

    short = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}[fmt]
    prelude = codegen._PRELUDE.format(version="test") + fp8.PRELUDE.replace(">= 890", ">= 99999")
    source = (
        prelude
        + f"""
extern "C" __global__ void conv(const unsigned char* f, const float* x, float* o,
                                unsigned char* g) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    o[i] = tirx_{short}2f(f[i]);
    g[i] = tirx_f2{short}(x[i]);
}}
"""
    )
    conv = cupy.RawKernel(source, "conv")
    x = _values()
    f = np.arange(N, dtype=np.int32).astype(np.uint8)
    o, g = cupy.zeros(N, cupy.float32), cupy.zeros(N, cupy.uint8)
    conv((2,), (128,), (cupy.asarray(f), cupy.asarray(x), o, g))
    dt = getattr(torch, fmt)
    np.testing.assert_array_equal(cupy.asnumpy(o), torch.from_numpy(f).view(dt).float().numpy())
    _assert_same_bits(cupy.asnumpy(g), _saturating(x, fmt), np.isnan(x), dt)


FP8X4 = """
@T.function
def k(X: T.Tensor((4, 256), "float32"), U: T.Tensor((256,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128))
    i = T.cuda.block_idx("x") * 128 + T.cuda.thread_idx("x")
    U[i] = T.cuda.fp8x4_e4m3_from_float4(X[0, i], X[1, i], X[2, i], X[3, i])
"""


def _fp8x4_inputs():
    x = np.stack([np.roll(_values(), 7 * k) for k in range(4)])
    return torch.from_numpy(x), torch.zeros(N, dtype=torch.int32).view(torch.uint32)


def test_fp8x4_e4m3_from_float4_packs_four_saturating_conversions(tmp_path):
    """Each lane as a store to a float8_e4m3fn tensor rounds it (nearest even, saturating),
    x in the lowest byte: torch's conversion of the clamped values, byte by byte."""
    x, u = _fp8x4_inputs()
    k = define(FP8X4, tmp_path, "k")
    tirx.compile(k, target="sim")(x, u)
    lanes = _bits(x.clamp(-448, 448).to(torch.float8_e4m3fn)).astype(np.uint32)
    want = lanes[0] | lanes[1] << 8 | lanes[2] << 16 | lanes[3] << 24
    nan = np.isnan(x.numpy()).any(axis=0)
    np.testing.assert_array_equal(u.numpy().view(np.uint32)[~nan], want[~nan])
    got = u.numpy().view(np.uint32)[nan]
    assert ((got >> 8 * np.arange(4)[:, None]) & 0x7F == 0x7F).any(axis=0).all()  # a NaN byte
    src = tirx.compile(k, target="cuda -arch=sm_90").source
    body = src.split('extern "C"')[1]
    assert body.count("tirx_f2e4m3(") == 8 and "<< ((unsigned int)24)" in body


def test_fp8x4_e4m3_from_float4_takes_four_floats(tmp_path):
    bad = FP8X4.replace("X[3, i])", "i)")
    with pytest.raises(TirxError) as e:
        define(bad, tmp_path, "k")
    assert "T.cuda.fp8x4_e4m3_from_float4 takes a float value, not an int32 value" in str(e.value)
    assert "fp8x4_e4m3_from_float4(" in caret_line(str(e.value))


@pytest.mark.gpu
def test_gpu_fp8x4_e4m3_from_float4_equals_the_simulator(tmp_path):
    k = define(FP8X4, tmp_path, "k")
    x, u = _fp8x4_inputs()
    tirx.compile(k, target="sim")(x, u)
    gu = torch.zeros(N, dtype=torch.int32, device="cuda").view(torch.uint32)
    tirx.compile(k, target="cuda")(x.cuda(), gu)
    torch.cuda.synchronize()
    got, want = gu.cpu().numpy().view(np.uint32), u.numpy().view(np.uint32)
    nan = np.isnan(x.numpy()).any(axis=0)
    np.testing.assert_array_equal(got[~nan], want[~nan])
