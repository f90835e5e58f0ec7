"""``exe.profile`` on the cuda target: Nsight Compute's CSV read back (recorded sample text in
ncu's "details" format: tests/goldens/ncu_*.csv), where ncu is looked for, the command it
runs, the errors without ncu or a GPU, and (marked ``gpu``) a real profile compared with the
simulator's counts."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tirx
from tirx.backend.cuda import driver, ncu
from tirx.backend.cuda.ncu_report import METRICS, parse_csv, to_base
from tirx.backend.cuda.tools import find_tool
from tirx.errors import TirxError
from tirx.examples.warp_matmul import warp_matmul

from .helpers import attach_recorder, define

GOLDENS = Path(__file__).parent / "goldens"
SEED_CSV = (GOLDENS / "ncu_seed_details.csv").read_text()
GEMM_CSV = (GOLDENS / "ncu_gemm_base.csv").read_text()


# ------------------------------------------------------------------------ the CSV


@pytest.mark.parametrize(
    "value, unit, want",
    [
        ("3.20", "usecond", (3.2e-6, "s")),
        ("1,048,576", "nsecond", (1048576e-9, "s")),
        # what Nsight Compute 2025.3.1 prints on the H200 (--print-units base, and auto)
        ("41,984", "ns", (41984e-9, "s")),
        ("42.11", "us", (42.11e-6, "s")),
        ("2.5", "Gbyte/s", (2.5e9, "B/s")),
        ("1.54", "Kbyte", (1540.0, "B")),
        ("2", "KiB", (2048.0, "B")),
        ("3.35", "Tbyte/second", (3.35e12, "B/s")),
        ("12.5", "%", (12.5, "%")),
        ("40", "register/thread", (40.0, "register/thread")),
        ("4,096", "", (4096.0, "")),
        ("n/a", "%", (None, "%")),
    ],
)
def test_units_become_base_units(value, unit, want):
    got, base = to_base(value, unit)
    assert base == want[1]
    assert got == pytest.approx(want[0]) if want[0] is not None else got is None


def test_the_details_page_of_one_launch():
    (p,) = parse_csv(SEED_CSV)
    assert p.kernel == "warp_matmul"
    assert p.info == {"Block Size": "(32, 1, 1)", "Grid Size": "(1, 1, 1)", "Device": "0",
                      "CC": "9.0"}  # fmt: skip
    assert p.duration_us == pytest.approx(3.2)
    assert p.dram_bytes == pytest.approx(1540 + 512)
    assert p.l2_bytes == pytest.approx(4100)
    assert (p.sm_throughput, p.dram_throughput, p.l2_throughput) == (0.33, 0.41, 1.02)
    assert p.tensor_pipe == 0.05  # gmma's "n/a" is no value
    assert p.occupancy == 1.56 and p.registers == 40
    assert p.spills == (0, 0) and p.bank_conflicts == (6, 0)
    assert p.flops == 4096  # the tensor counter; no FP32 work
    assert p.flop_rate == pytest.approx(4096 / 3.2e-6)
    assert p.intensity == pytest.approx(4096 / 2052)


def test_base_units_thousands_separators_and_the_busier_tensor_pipe():
    (p,) = parse_csv(GEMM_CSV)
    assert p.kernel == "gemm_wgmma" and p.info["Grid Size"] == "(132, 1, 1)"
    assert p.duration_us == pytest.approx(1048.576)
    assert p.tensor_pipe == 81.25  # wgmma's GMMA pipe, not mma.sync's HMMA
    assert p.spills == (1024, 512)
    assert p.flops == 549_755_813_888 + 2 * 1000 + 10 + 6
    assert p.bank_conflicts == (None, None)  # not in this sample


def test_the_table_reads_the_numbers():
    (p,) = parse_csv(SEED_CSV)
    text = str(p)
    assert text.splitlines()[0] == (
        "ncu profile of 'warp_matmul' (block size (32, 1, 1), grid size (1, 1, 1), device 0, "
        "cc 9.0)"
    )
    rows = {line.split("  ")[1].strip(): line for line in text.splitlines()[1:]}
    assert "3.20 µs" in rows["duration"]
    assert "0.1 %" in rows["tensor pipe"]
    assert "6 ld / 0 st" in rows["bank conflicts"]
    assert "40" in rows["registers"] and "1.28 GFLOP/s" in rows["FLOP/s"]
    assert "<table" in p._repr_html_() and "warp_matmul" in p._repr_html_()


def test_flops_given_by_the_caller_win():
    (p,) = parse_csv(GEMM_CSV)
    p.flops_given = 2 * 4096**3
    assert p.flops == 2 * 4096**3 and "(given)" in str(p)


def test_text_without_a_metric_table_is_an_error():
    with pytest.raises(TirxError, match="no metric table"):
        parse_csv("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n")


# ------------------------------------------------------------------------ finding ncu


@pytest.fixture
def no_tools(monkeypatch, tmp_path):
    """An environment where no ncu can be found unless a test puts one somewhere."""
    for key in ("TIRX_NCU", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(ncu, "_SEARCH", ())
    find_tool.cache_clear()
    yield
    find_tool.cache_clear()


def _executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_ncu_is_found_in_a_toolkit_or_by_setting(no_tools, monkeypatch, tmp_path):
    if find_tool("ncu") is not None:
        pytest.skip("a pip-installed ncu is visible to cuda.pathfinder here")
    assert ncu.find_ncu() is None
    tool = _executable(tmp_path / "cuda" / "nsight-compute-2025.3.0" / "ncu")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert ncu.find_ncu() == str(tool)
    monkeypatch.setenv("TIRX_NCU", "/opt/my/ncu")
    assert ncu.find_ncu() == "/opt/my/ncu"


def test_without_ncu_profile_says_what_to_install(monkeypatch):
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    exe = tirx.compile(warp_matmul, "cuda -arch=sm_90")
    with pytest.raises(TirxError) as e:
        exe.profile()
    message = str(e.value)
    assert "needs Nsight Compute (ncu), which is not installed here" in message
    assert "install NVIDIA Nsight Compute" in message and "GPU" in message
    assert "tirx.compile(kernel, 'sim').profile(*args)" in message


def test_without_a_gpu_profile_says_where_to_run(monkeypatch):
    monkeypatch.setattr(ncu, "find_ncu", lambda: "/usr/bin/true")
    monkeypatch.setattr(driver, "gpu_count", lambda: 0)
    exe = tirx.compile(warp_matmul, "cuda -arch=sm_90")
    with pytest.raises(TirxError, match="no CUDA GPU is visible here"):
        exe.profile()


FAKE_NCU = """\
#!{python}
# stands in for ncu: logs its command line and the runner's folder, answers like ncu
import json, os, sys
args = sys.argv[1:]
metrics = args[args.index("--metrics") + 1].split(",")
folder = args[-1]
import torch
from tirx.backend.cuda.codegen import generate
from tirx.ir import serial
lowered = serial.loads(open(os.path.join(folder, "kernel.tirx"), "rb").read())
same = generate(lowered) == open(os.path.join(folder, "kernel.cu")).read()
saved = torch.load(os.path.join(folder, "args.pt"), weights_only=True)
entry = {{"args": args, "files": sorted(os.listdir(folder)), "same_source": same,
          "meta": json.load(open(os.path.join(folder, "kernel.json"))),
          "shapes": [list(t.shape) for t in saved]}}
with open({log!r}, "a") as log:
    log.write(json.dumps(entry) + "\\n")
if "sm__ops_path_tensor_src_tf32_dst_fp32.sum" in metrics:
    print("==ERROR== Failed to find metric sm__ops_path_tensor_src_tf32_dst_fp32.sum")
    sys.exit(1)
sys.stdout.write(open({csv!r}).read())
"""


def test_the_command_the_runner_folder_and_a_metric_this_ncu_lacks(monkeypatch, tmp_path):
    log = tmp_path / "ncu.log"
    fake = _executable(tmp_path / "ncu", FAKE_NCU.format(
        python=sys.executable, log=str(log), csv=str(GOLDENS / "ncu_seed_details.csv")))  # fmt: skip
    monkeypatch.setenv("TIRX_NCU", str(fake))
    monkeypatch.setattr(driver, "gpu_count", lambda: 1)
    exe = tirx.compile(warp_matmul, "cuda -arch=sm_90")
    attach_recorder(exe)  # takes CPU tensors: nothing runs here
    a, b = torch.ones(16, 16, dtype=torch.float16), torch.ones(8, 16, dtype=torch.float16)
    p = exe.profile(a, b, torch.zeros(16, 8), flops=4096)
    assert p.kernel == "warp_matmul" and p.flops == 4096
    assert p.missing == ("sm__ops_path_tensor_src_tf32_dst_fp32.sum",)
    first, second = [__import__("json").loads(x) for x in log.read_text().splitlines()]
    args = first["args"]
    assert args[: args.index("--metrics")] == [
        "--csv", "--print-units", "base", "--clock-control", "none",
        "--kernel-name", "warp_matmul", "--launch-count", "1",
    ]  # fmt: skip
    assert args[-4:-1] == [sys.executable, "-m", "tirx.profile_runner"]
    assert set(args[args.index("--metrics") + 1].split(",")) == set(METRICS)
    again = second["args"][second["args"].index("--metrics") + 1].split(",")
    assert set(again) == set(METRICS) - {"sm__ops_path_tensor_src_tf32_dst_fp32.sum"}
    assert first["files"] == ["args.pt", "kernel.cu", "kernel.json", "kernel.tirx"]
    # the child rebuilds the very code from the saved kernel, and has the arguments
    assert first["same_source"] and first["meta"] == {"name": "warp_matmul", "arch": "sm_90"}
    assert first["shapes"] == [[16, 16], [8, 16], [16, 8]]
    assert not os.path.exists(args[-1])  # the folder is gone afterwards


def test_a_bad_argument_is_reported_before_ncu_runs(monkeypatch, tmp_path):
    monkeypatch.setenv("TIRX_NCU", str(_executable(tmp_path / "ncu", "#!/bin/sh\nexit 3\n")))
    monkeypatch.setattr(driver, "gpu_count", lambda: 1)
    exe = tirx.compile(warp_matmul, "cuda -arch=sm_90")
    attach_recorder(exe)
    with pytest.raises(TypeError, match="parameter 'A' expects dtype float16"):
        exe.profile(torch.ones(16, 16), torch.ones(8, 16, dtype=torch.float16), torch.zeros(16, 8))


def test_ncu_failing_is_a_tirx_error_with_its_output(monkeypatch, tmp_path):
    script = "#!/bin/sh\necho '==ERROR== The application returned an error code (1).'\nexit 1\n"
    monkeypatch.setenv("TIRX_NCU", str(_executable(tmp_path / "ncu", script)))
    monkeypatch.setattr(driver, "gpu_count", lambda: 1)
    exe = tirx.compile(warp_matmul, "cuda -arch=sm_90")
    attach_recorder(exe)
    a, b = torch.ones(16, 16, dtype=torch.float16), torch.ones(8, 16, dtype=torch.float16)
    with pytest.raises(TirxError, match="(?s)Nsight Compute failed.*returned an error code"):
        exe.profile(a, b, torch.zeros(16, 8))


# ------------------------------------------------------------------------ on the GPU

COPY = """
@T.function
def kernel(A: T.Tensor((4096,), "float32"), B: T.Tensor((4096,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=128))
    tid = T.cuda.thread_idx("x")
    lane = T.cuda.lane_id()
    B[T.cuda.block_idx("x") * 128 + tid] = A[lane * 32 + T.cuda.warp_id()]
"""


@pytest.mark.gpu
def test_ncu_agrees_with_the_simulators_counts(tmp_path):
    """A real profile: the simulator's sectors and wavefronts are the hardware's."""
    if ncu.find_ncu() is None:
        pytest.skip("ncu is not installed")
    from .test_sim_profile import LDMATRIX, LOAD_X4, PLAIN, SWIZZLE_128B

    kernel = define(COPY, tmp_path, "kernel")
    a = torch.arange(4096, dtype=torch.float32)
    sim = tirx.compile(kernel, "sim").profile(a, torch.zeros(4096)).total()
    gpu = tirx.compile(kernel, "cuda").profile(a.cuda(), torch.zeros(4096, device="cuda"))
    assert gpu.duration_us > 0 and gpu.registers > 0
    assert (
        gpu.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
        == sim.cost("global", "load").units
    )
    assert (
        gpu.get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum")
        == sim.cost("global", "store").units
    )
    assert (
        gpu.get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
        == sim.cost("global", "load").requests
    )
    for layout, conflicts in ((PLAIN, 28), (SWIZZLE_128B, 0)):
        kernel = define(LDMATRIX, tmp_path, "kernel", layout=layout, load=LOAD_X4)
        x = (np.arange(16 * 64) % 2039).astype(np.float16).reshape(16, 64)
        sim = tirx.compile(kernel, "sim").profile(x, np.zeros((32, 4), np.uint32)).total()
        gpu = tirx.compile(kernel, "cuda").profile(
            torch.from_numpy(x).cuda(),
            torch.zeros(32, 4, dtype=torch.int32, device="cuda").view(torch.uint32),
        )
        assert (
            gpu.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")
            == sim.cost("shared", "load").units
        )
        assert gpu.bank_conflicts[0] == conflicts == sim.cost("shared", "load").excess


def test_the_runner_wants_one_folder(capsys):
    from tirx import profile_runner

    assert profile_runner.main([]) == 2
    assert "usage: python -m tirx.profile_runner FOLDER" in capsys.readouterr().err
