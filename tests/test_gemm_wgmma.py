"""The warpgroup GEMM of ``tirx.examples.gemm_wgmma`` (cp.async and TMA loads): sizes, the
simulator against numpy on integer data, the faults its synchronisations prevent (a copy of the
example with one of them taken out), its SASS on sm_90a, and on the GPU equality with the
simulator and with the mma.sync GEMM."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import tirx
from tirx.errors import SimulationError
from tirx.examples import gemm_wgmma as gw

EXAMPLE = Path(gw.__file__)


def _ints(shape, seed, dtype="float16"):
    rng = np.random.default_rng(seed)
    return rng.integers(-2, 3, size=shape).astype(np.float16 if dtype == "float16" else np.float32)


def _simulate(kernel, M, N, K, dtype="float16", seed=0):
    import torch

    tdtype = getattr(torch, dtype)
    a = torch.from_numpy(_ints((M, K), seed)).to(tdtype)
    b = torch.from_numpy(_ints((N, K), seed + 1)).to(tdtype)
    out = torch.full((M, N), float("nan"))
    tirx.compile(kernel, target="sim")(a, b, out)
    return a, b, out


def test_sizes_are_checked():
    with pytest.raises(ValueError, match="multiples of 256, 128, 64"):
        gw.make_gemm_wgmma(128, 128, 128)
    with pytest.raises(ValueError, match="dtype"):
        gw.make_gemm_wgmma(256, 128, 128, "float32")
    with pytest.raises(ValueError, match="stages"):
        gw.make_gemm_wgmma(256, 128, 128, stages=2, loads="cp.async")
    with pytest.raises(ValueError, match="K tiles"):
        gw.make_gemm_wgmma(256, 128, 64, stages=4, loads="cp.async")
    with pytest.raises(ValueError, match="loads"):
        gw.make_gemm_wgmma(256, 128, 128, loads="ldg")
    with pytest.raises(ValueError, match="stages"):  # tma keeps stages - 1 tiles ahead
        gw.make_gemm_wgmma(256, 128, 128, stages=1, loads="tma")


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        ((0, 128, 256), {}, ValueError, "M must be a positive int, got 0"),
        ((256, 0, 256), {}, ValueError, "N must be a positive int, got 0"),
        ((256, 128, -64), {}, ValueError, "K must be a positive int, got -64"),
        ((256.0, 128, 256), {}, TypeError, "M must be an int"),
        ((256, "128", 256), {}, TypeError, "N must be an int"),
        ((256, 128, 256), {"stages": None}, TypeError, "stages must be an int"),
        ((256, 128, 256), {"stages": 3.0}, TypeError, "stages must be an int"),
        ((256, 128, 256), {"stages": True}, TypeError, "stages must be an int, not a bool"),
        ((256, 128, 256), {"stages": 0}, ValueError, "stages must be a positive int"),
    ],
)
def test_arguments_that_are_not_ints_are_refused_by_name(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        gw.make_gemm_wgmma(*args, **kwargs)


def test_numpy_integers_are_taken():
    want = str(gw.make_gemm_wgmma(256, 128, 256, stages=3).ir)
    got = gw.make_gemm_wgmma(np.int64(256), np.int32(128), np.int64(256), stages=np.int64(3))
    assert str(got.ir) == want


@pytest.mark.parametrize(
    ("dtype", "stages", "K"), [("float16", 4, 192), ("bfloat16", 4, 128), ("float16", 3, 128)]
)
def test_simulator_equals_numpy_on_integer_data(dtype, stages, K):
    a, b, out = _simulate(
        gw.make_gemm_wgmma(256, 128, K, dtype, stages, "cp.async"), 256, 128, K, dtype
    )
    want = a.double().numpy() @ b.double().numpy().T  # exact: small integers in f32
    np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize(("dtype", "stages"), [("float16", 4), ("bfloat16", 3), ("float16", 2)])
def test_tma_loads_on_the_simulator_equal_numpy(dtype, stages):
    kernel = gw.make_gemm_wgmma(256, 128, 256, dtype, stages, loads="tma")
    a, b, out = _simulate(kernel, 256, 128, 256, dtype)
    np.testing.assert_array_equal(out.numpy(), a.double().numpy() @ b.double().numpy().T)


def _twin(tmp_path, old: str, new: str, name: str):
    """The example's source with ``old`` (present exactly once) replaced by ``new``, imported
    as a module of its own (the kernel's source lines are then that file's)."""
    text = EXAMPLE.read_text()
    assert text.count(old) == 1, old
    path = tmp_path / f"{name}.py"
    path.write_text(text.replace(old, new).replace("\nfrom .", "\nfrom tirx.examples."))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_simulator_reports_the_missing_proxy_fence(tmp_path):
    """cp.async writes through the generic proxy, wgmma reads through the async one."""
    twin = _twin(tmp_path, 'T.ptx["fence.proxy.async.shared::cta"]()', "pass", "wg_nofence")
    with pytest.raises(SimulationError, match="(?i)proxy"):
        _simulate(twin.make_gemm_wgmma(256, 128, 128, loads="cp.async"), 256, 128, 128)


def test_simulator_reports_the_proxy_fence_after_the_barrier(tmp_path):
    """The example with its fence and barrier swapped: every wgmma still follows every fence
    in the lockstep run, but the fence of another warp's thread is not ordered before it."""
    fence = 'T.ptx["fence.proxy.async.shared::cta"]()'
    twin = _twin(
        tmp_path,
        f"{fence}\n                T.cuda.cta_sync()",
        f"T.cuda.cta_sync()\n                {fence}",
        "wg_late_fence",
    )
    with pytest.raises(SimulationError, match="not ordered before the issue") as e:
        _simulate(twin.make_gemm_wgmma(256, 128, 128, stages=3, loads="cp.async"), 256, 128, 128)
    assert "move the fence before the barrier" in e.value.hint


def test_simulator_reports_a_stage_refilled_while_wgmma_reads_it(tmp_path):
    """Refilling the stage of the step before (still read by its wgmma: the wait_group of
    that step lets one group stay in flight) is what the refill two steps back avoids."""
    twin = _twin(
        tmp_path,
        "fetch(a_q, b_q, A_q, B_q, (kt + AHEAD) % STAGES, bm, bn, kf, r0, c0)",
        "fetch(a_q, b_q, A_q, B_q, (kt + STAGES - 1) % STAGES, bm, bn, kf, r0, c0)",
        "wg_early",
    )
    with pytest.raises(SimulationError, match="wgmma"):
        _simulate(twin.make_gemm_wgmma(256, 128, 192, loads="cp.async"), 256, 128, 192)


def test_simulator_reports_a_read_of_a_stage_before_its_tensor_copies_land(tmp_path):
    twin = _twin(tmp_path, "T.cuda.mbarrier_wait(bars[s], (kt // STAGES) % 2)", "pass", "wg_nowait")
    with pytest.raises(
        SimulationError,
        match="(?s)reads 'a_s'.*tensor copy.*whose completion this thread has not observed.*"
        "mbarrier_wait",
    ):
        _simulate(twin.make_gemm_wgmma(256, 128, 256, loads="tma"), 256, 128, 256)


def test_tma_sass_is_hgmma_fed_by_utmaldg():
    exe = tirx.compile(gw.make_gemm_wgmma(1024, 1024, 1024, loads="tma"), target="cuda -arch=sm_90")
    assert exe.nvrtc.log == "", exe.nvrtc.log  # the prelude's unused helpers included
    sass = exe.sass
    if sass is None:
        pytest.skip("no disassembler installed (the sass extra)")
    assert sass.count("HGMMA.64x128x16.F32") == 8
    assert "UTMALDG.2D" in sass and "LDGSTS" not in sass and "LDSM" not in sass
    assert "STL" not in sass and "LDL" not in sass


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sass_is_hgmma_fed_by_ldgsts(dtype):
    exe = tirx.compile(
        gw.make_gemm_wgmma(1024, 1024, 1024, dtype, loads="cp.async"), target="cuda -arch=sm_90"
    )
    sass = exe.sass
    if sass is None:
        pytest.skip("no disassembler installed (the sass extra)")
    assert sass.count("HGMMA.64x128x16.F32") == 8  # 4 K slices x 2 accumulators per K tile
    assert "LDGSTS.E.BYPASS.128" in sass
    assert "LDSM" not in sass  # no operand registers
    assert "STL" not in sass and "LDL" not in sass  # the accumulators stay in registers


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("loads", gw.LOADS)
def test_gpu_equals_the_simulator(dtype, loads):
    import torch

    kernel = gw.make_gemm_wgmma(256, 128, 192, dtype, loads=loads)
    a, b, sim = _simulate(kernel, 256, 128, 192, dtype, seed=3)
    out = torch.full((256, 128), float("nan"), device="cuda")
    tirx.compile(kernel, target="cuda")(a.cuda(), b.cuda(), out)
    assert torch.equal(out.cpu(), sim)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(("stages", "loads"), [(3, "cp.async"), (4, "cp.async"), (4, "tma")])
def test_gpu_equals_the_mma_sync_gemm_bit_for_bit(dtype, stages, loads):
    """The same sums in the same order as the pipelined mma.sync GEMM, on random data."""
    import torch

    from tirx.examples.gemm_pipelined import make_gemm_pipelined

    n = 1024
    g = torch.Generator(device="cuda").manual_seed(stages)
    tdtype = getattr(torch, dtype)
    a = torch.randn((n, n), device="cuda", generator=g).to(tdtype)
    b = torch.randn((n, n), device="cuda", generator=g).to(tdtype)
    want = torch.full((n, n), float("nan"), device="cuda")
    got = torch.full((n, n), float("nan"), device="cuda")
    tirx.compile(make_gemm_pipelined(n, n, n, dtype), target="cuda")(a, b, want)
    tirx.compile(gw.make_gemm_wgmma(n, n, n, dtype, stages, loads), target="cuda")(a, b, got)
    torch.cuda.synchronize()
    assert torch.equal(got, want)
