"""``python -m tirx.demo`` (and ``tirx demo``): the seed end to end, and a clear one-line refusal
where it cannot run."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tirx
from tirx import demo


def run_demo(*args, module=("-m", "tirx.demo")):
    return subprocess.run([sys.executable, *module, *args], capture_output=True, text=True,
                          timeout=600)  # fmt: skip


@pytest.mark.skipif(tirx.gpu_available(), reason="a GPU is visible")
@pytest.mark.parametrize("module", [("-m", "tirx.demo"), ("-m", "tirx", "demo")])
def test_cuda_without_a_gpu_says_so_in_one_line(module):
    out = run_demo("--target", "cuda", module=module)
    assert out.returncode == 1 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert "--target cuda needs an NVIDIA GPU and none is visible" in line
    assert "--target sim" in line


def test_cuda_with_a_torch_that_lacks_cuda_says_so(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(tirx, "gpu_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert demo.main(["--target", "cuda -arch=sm_90"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "needs a CUDA build of torch" in err


def test_a_bad_target_is_a_usage_error():
    out = run_demo("--target", "gpu")
    assert out.returncode == 2 and "unknown target 'gpu'" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_demo_runs_the_seed_and_matches_torch():
    out = run_demo() if not tirx.gpu_available() else run_demo("--target", "sim")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("compiled warp_matmul for cuda -arch=sm_")
    assert "mma.sync.aligned.m16n8k16" in out.stdout
    assert lines[-1].startswith("ran on the CPU simulator") and "matches torch" in lines[-1]


@pytest.mark.gpu
def test_the_demo_runs_on_the_gpu():
    out = run_demo("--target", "cuda")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1].startswith("ran on the GPU: Out = A @ B.T matches torch")
