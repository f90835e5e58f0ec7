"""The driver layer: safe probe, LaunchError without a GPU, argument packing; GPU launches."""

from __future__ import annotations

import ctypes
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tirx.backend.cuda import driver
from tirx.backend.cuda.cache import CompileCache, cache_key
from tirx.backend.cuda.nvrtc import compile_cuda
from tirx.errors import LaunchError

REPO = Path(__file__).resolve().parents[1]
needs_gpu = pytest.mark.skipif(driver.gpu_count() == 0, reason="no CUDA GPU is visible")

LANE_IDS = r"""
extern "C" __global__ void lane_ids(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  if (i < n) out[i] = (int)lane;
}
"""

ALL_TYPES = r"""
extern "C" __global__ void all_types(double* out, int a, unsigned b, long long c,
                                     unsigned long long d, float e, double f) {
  out[0] = a; out[1] = b; out[2] = (double)c; out[3] = (double)d; out[4] = e; out[5] = f;
}
"""

EMPTY = 'extern "C" __global__ void empty() {}\n'

BIG_SMEM = r"""
extern "C" __global__ void big_smem(int* out, int n) {
  extern __shared__ int buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = i;
  __syncthreads();
  int s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += buf[n - 1 - i];
  atomicAdd(out, s);
}
"""

from tests.test_nvrtc import MMA_SOURCE as MMA  # noqa: E402  (the same inline-PTX kernel)


class FakeKernel:
    """Enough of a Kernel to build a Launcher without a GPU (packing is pure Python)."""

    name, handle, max_dynamic_smem = "fake", None, 48 * 1024


# --- without a GPU ----------------------------------------------------------------------


def test_importing_tirx_runtime_loads_no_cuda_or_torch():
    code = (
        "import sys, tirx.config, tirx.backend.cuda.nvrtc, tirx.backend.cuda.driver, "
        "tirx.backend.cuda.cache, tirx.backend.cuda.tools\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('cuda', 'torch')]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_probe_is_safe_and_cached():
    n = driver.gpu_count()
    assert isinstance(n, int) and n >= 0
    assert driver.gpu_count() == n


def test_without_gpu_loading_raises_launch_error():
    if driver.gpu_count() > 0:
        pytest.skip("a GPU is visible")
    assert driver.device_arch() is None
    cubin = compile_cuda(LANE_IDS, arch="sm_90").cubin
    with pytest.raises(LaunchError, match="no CUDA GPU is visible") as info:
        driver.Module(cubin)
    assert "target='sim'" in info.value.hint
    with pytest.raises(LaunchError):
        driver.synchronize()
    assert driver.current_torch_stream() == 0


def test_launcher_packs_every_type_into_8_byte_slots():
    types = ("ptr", "i32", "u32", "i64", "u64", "f32", "f64")
    la = driver.Launcher(FakeKernel(), types)
    values = (0x7F00_1234_5678, -5, 4_000_000_000, -(2**40), 2**63 + 1, 1.5, -2.25)
    block, params = la.pack(*values)
    n = len(types)
    base = ctypes.addressof(block)
    assert ctypes.sizeof(block) == 16 * n and params == base + 8 * n
    raw = bytes(block)
    fmts = ("<Q", "<i", "<I", "<q", "<Q", "<f", "<d")
    for i, (fmt, v) in enumerate(zip(fmts, values)):
        assert struct.unpack_from(fmt, raw, 8 * i)[0] == v
    # the void* array the driver reads points at the slots, in order
    assert list((ctypes.c_uint64 * n).from_address(params)) == [base + 8 * i for i in range(n)]


def test_each_packing_is_a_new_block():
    la = driver.Launcher(FakeKernel(), ("ptr",))
    first, p1 = la.pack(1)
    second, p2 = la.pack(2)
    assert p1 != p2 and bytes(first)[:8] == struct.pack("<Q", 1)


def test_launcher_without_parameters_passes_null():
    assert driver.Launcher(FakeKernel(), ()).pack() == (None, 0)


def test_launcher_calls_its_entry_with_the_packed_block():
    seen = []

    def entry(fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        slot = ctypes.c_uint64.from_address(params).value
        seen.append(
            (
                (gx, gy, gz),
                (bx, by, bz),
                smem,
                int(stream),
                ctypes.c_int32.from_address(slot).value,
                extra,
            )
        )
        return (0,)

    la = driver.Launcher(FakeKernel(), ("i32",), entry=entry)
    la(4, (2, 3), 0, 0, -7)
    la((1, 1, 1), (32, 1, 1), 0, 5, 9)
    assert seen == [((4, 1, 1), (2, 3, 1), 0, 0, -7, 0), ((1, 1, 1), (32, 1, 1), 0, 5, 9, 0)]


@pytest.mark.parametrize(
    "values, match",
    [
        ((1,), "takes 2 arguments"),
        ((1, 2, 3), "takes 2 arguments"),
        ((1.5, 2), r"argument 0 \(ptr\)"),
        ((-1, 2), r"argument 0 \(ptr\)"),
        ((1, 2**31), r"argument 1 \(i32\)"),
        ((1, "3"), r"argument 1 \(i32\)"),
    ],
)
def test_launcher_rejects_bad_values_before_launching(values, match):
    la = driver.Launcher(FakeKernel(), ("ptr", "i32"))
    with pytest.raises(LaunchError, match=match):
        la((1, 1, 1), (32, 1, 1), 0, 0, *values)


def test_launcher_rejects_unknown_types():
    with pytest.raises(LaunchError, match="unknown parameter type"):
        driver.Launcher(FakeKernel(), ("ptr", "half"))


# --- with a GPU -------------------------------------------------------------------------


def _kernel(source: str, name: str):
    arch = driver.device_arch()
    return driver.Module(compile_cuda(source, arch=arch).cubin).function(name)


@pytest.mark.gpu
@needs_gpu
def test_launch_writes_lane_ids():
    import torch

    n = 100
    out = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    launch = _kernel(LANE_IDS, "lane_ids").launcher(("ptr", "i32"))
    launch((2, 1, 1), (64, 1, 1), 0, driver.current_torch_stream(), out.data_ptr(), n)
    torch.cuda.synchronize()
    assert out.cpu().tolist() == [i % 32 for i in range(n)]


@pytest.mark.gpu
@needs_gpu
def test_launch_passes_every_parameter_type():
    import torch

    out = torch.zeros(6, dtype=torch.float64, device="cuda")
    launch = _kernel(ALL_TYPES, "all_types").launcher(
        ("ptr", "i32", "u32", "i64", "u64", "f32", "f64")
    )
    values = (-7, 4_000_000_000, -(2**40) - 3, 2**52 + 5, 1.25, -3.0e100)
    launch(1, 1, 0, driver.current_torch_stream(), out.data_ptr(), *values)
    torch.cuda.synchronize()
    assert out.cpu().tolist() == [float(v) for v in values]


@pytest.mark.gpu
@needs_gpu
def test_mma_m16n8k16_matches_torch():
    import torch

    g = torch.Generator().manual_seed(0)
    a = torch.randint(-4, 5, (16, 16), generator=g).to(torch.float16)
    b = torch.randint(-4, 5, (16, 8), generator=g).to(torch.float16)
    c = torch.zeros(16, 8, dtype=torch.float32, device="cuda")
    a_d, b_d = a.cuda(), b.cuda()  # B is stored k-major: [k][n]
    launch = _kernel(MMA, "mma_kernel").launcher(("ptr", "ptr", "ptr"))
    launch(
        (1, 1, 1),
        (32, 1, 1),
        0,
        driver.current_torch_stream(),
        a_d.data_ptr(),
        b_d.data_ptr(),
        c.data_ptr(),
    )
    torch.cuda.synchronize()
    assert torch.equal(c.cpu(), a.float() @ b.float())


@pytest.mark.gpu
@needs_gpu
def test_launch_on_torch_side_stream():
    import torch

    out = torch.zeros(64, dtype=torch.int32, device="cuda")
    launch = _kernel(LANE_IDS, "lane_ids").launcher(("ptr", "i32"))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        stream = driver.current_torch_stream()
        assert stream == side.cuda_stream != torch.cuda.default_stream().cuda_stream
        launch(2, 32, 0, stream, out.data_ptr(), 64)
        side.synchronize()
    assert driver.current_torch_stream() == torch.cuda.current_stream().cuda_stream
    assert out.cpu().tolist() == [i % 32 for i in range(64)]


@pytest.mark.gpu
@needs_gpu
def test_module_from_ptx_text():
    import torch

    ptx = compile_cuda(LANE_IDS, arch="compute_" + driver.device_arch()[3:]).ptx
    out = torch.zeros(32, dtype=torch.int32, device="cuda")
    driver.Module(ptx).function("lane_ids").launcher(("ptr", "i32"))(
        1, 32, 0, driver.current_torch_stream(), out.data_ptr(), 32
    )
    torch.cuda.synchronize()
    assert out.cpu().tolist() == list(range(32))


@pytest.mark.gpu
@needs_gpu
def test_large_dynamic_shared_memory_is_opted_in():
    import torch

    n = 24 * 1024  # 96 KiB of ints
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    launch = _kernel(BIG_SMEM, "big_smem").launcher(("ptr", "i32"))
    launch(1, 256, n * 4, driver.current_torch_stream(), out.data_ptr(), n)
    torch.cuda.synchronize()
    assert out.item() == n * (n - 1) // 2


@pytest.mark.gpu
@needs_gpu
def test_launch_from_a_fresh_thread():
    import torch

    out = torch.zeros(32, dtype=torch.int32, device="cuda")
    launch = _kernel(LANE_IDS, "lane_ids").launcher(("ptr", "i32"))
    errors = []

    def work():
        try:
            launch(1, 32, 0, 0, out.data_ptr(), 32)
        except Exception as e:  # report in the main thread
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    torch.cuda.synchronize()
    assert not errors, errors
    assert out.cpu().tolist() == list(range(32))


@pytest.mark.gpu
@needs_gpu
def test_driver_errors_become_launch_errors():
    kernel = _kernel(LANE_IDS, "lane_ids")
    with pytest.raises(LaunchError, match="CUDA_ERROR_NOT_FOUND") as info:
        kernel.module.function("no_such_kernel")
    assert "extern" in info.value.hint
    launch = kernel.launcher(("ptr", "i32"))
    with pytest.raises(LaunchError, match="CUDA_ERROR_INVALID_VALUE") as info:
        launch(1, (2048, 1, 1), 0, 0, 0, 0)
    assert info.value.hint
    with pytest.raises(LaunchError):
        driver.Module(b"\x7fELF this is not a cubin")
    arch = driver.device_arch()
    if arch != "sm_80":
        with pytest.raises(LaunchError, match="NO_BINARY_FOR_GPU|INVALID_IMAGE"):
            driver.Module(compile_cuda(LANE_IDS, arch="sm_80").cubin)


@pytest.mark.gpu
@needs_gpu
def test_device_facts_and_attributes():
    arch = driver.device_arch()
    assert arch is not None and arch.startswith("sm_")
    assert driver.device_arch(driver.gpu_count()) is None
    attrs = _kernel(MMA, "mma_kernel").attributes()
    assert attrs["registers"] > 0 and attrs["shared_bytes"] == 768
    assert attrs["max_threads_per_block"] >= 32


@pytest.mark.gpu
@needs_gpu
def test_cached_cubin_launches(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    arch = driver.device_arch()
    key = cache_key(LANE_IDS, (), arch, (13, 0), "test")
    CompileCache().get_or_compile(key, lambda: compile_cuda(LANE_IDS, arch=arch))
    out, status = CompileCache().get_or_compile(key, lambda: None)
    assert status == "hit"
    result = torch.zeros(32, dtype=torch.int32, device="cuda")
    driver.Module(out.cubin).function("lane_ids").launcher(("ptr", "i32"))(
        1, 32, 0, driver.current_torch_stream(), result.data_ptr(), 32
    )
    torch.cuda.synchronize()
    assert result.cpu().tolist() == list(range(32))
