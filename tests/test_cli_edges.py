"""The command line at its edges: output piped into a reader that stops early, files the
user's kernel module does unusual things in, damaged --arg files, --check with infinities and
NaN, a kernel written as a factory call."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import numpy as np
import pytest
import torch

from tests.test_cli import SCALED, SEED, tirx_cli, write
from tirx.cli_run import compare

TWICE = """\
from tirx import T


@T.function
def twice(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    t = T.cuda.thread_idx("x")
    Y[t] = X[t] * 2.0
"""


def _piped(argv: list[str], reader: str = "head -1") -> tuple[int, str]:
    """``tirx ARGV | READER`` in a shell: (tirx's exit status, what the reader printed)."""
    tirx = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "tirx", *argv])
    done = subprocess.run(["bash", "-c", f'{tirx} | {reader}; exit "${{PIPESTATUS[0]}}"'],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout


def test_a_failed_check_fails_when_the_output_is_cut_short():
    # the reader takes the first line and goes; the check still runs, and its FAIL is the status
    rc, first = _piped(["run", str(SEED), "--sim", "--check", "Out = A.float() @ B.float().T + 1"])
    assert rc == 1 and first.startswith("ran warp_matmul on the simulator")
    rc, _ = _piped(["run", str(SEED), "--sim", "--check", "Out = A.float() @ B.float().T"])
    assert rc == 0


def test_a_layout_picture_is_written_when_the_table_is_cut_short(tmp_path):
    svg = tmp_path / "a.svg"
    spec = "S[(4,8,4):(1,4@laneid,1@laneid)]"
    rc, _ = _piped(["layout", spec, "--shape", "4,8,4", "--svg", str(svg)], reader="true")
    assert rc == 0 and svg.read_text().startswith("<svg")


def test_a_picture_path_that_cannot_be_written_is_refused_before_the_table(capsys, tmp_path):
    rc, out, err = tirx_cli(capsys, "layout", "S[(16,16):(16,1)]", "--svg",
                            str(tmp_path / "no" / "m.svg"))  # fmt: skip
    assert rc == 2 and out == "" and "there is no folder" in err


def test_a_kernel_file_that_exits_is_a_mistake_in_it(capsys, tmp_path):
    path = write(tmp_path, "leaves.py", "import sys\nsys.exit(3)\n")
    rc, out, err = tirx_cli(capsys, "compile", path)
    assert rc == 1
    assert "leaves.py called sys.exit(3) while it was imported" in err
    assert 'if __name__ == "__main__":' in err


FACTORY_EXITS = """\
import sys

from tirx import T


def make(n):
    if n % 32:
        print("n must be a multiple of 32")
        sys.exit(0)

    @T.function
    def k(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        Y[T.cuda.thread_idx("x")] = X[T.cuda.thread_idx("x")]

    return k
"""


def test_a_factory_that_exits_is_a_mistake_in_the_file_not_a_pass(capsys, tmp_path):
    # its sys.exit(0) ended `tirx run ... --check` with status 0, no kernel run, no check
    path = write(tmp_path, "factory.py", FACTORY_EXITS)
    rc, _, err = tirx_cli(capsys, "run", f"{path}:make(33)", "--sim", "--check", "Y = X")
    assert rc == 1
    assert "make(33) called sys.exit(0): the kernel expression must return a kernel" in err


@pytest.mark.parametrize("option, text", [("--arg", "X=exit(3)"), ("--check", "Y = exit(0)")])
def test_an_expression_that_exits_is_a_usage_error(capsys, tmp_path, option, text):
    kernel = write(tmp_path, "twice.py", TWICE)
    rc, _, err = tirx_cli(capsys, "run", kernel, "--sim", option, text)
    assert rc == 2
    assert "the expression called exit(" in err and "instead of giving a value" in err


def test_a_kernel_called_as_if_it_were_a_factory_is_a_usage_error(capsys, tmp_path):
    path = write(tmp_path, "scaled.py", SCALED)
    rc, _, err = tirx_cli(capsys, "compile", f"{path}:copied(1)")
    assert rc == 2
    assert "copied is a kernel, not a factory that makes one" in err
    assert f"write {path}:copied" in err


@pytest.mark.parametrize("name, kind", [("bad.npy", "a .npy file"), ("bad.pt", "a .pt file")])
def test_an_unreadable_arg_file_is_named_without_advice_to_unpickle(capsys, tmp_path, name, kind):
    kernel = write(tmp_path, "twice.py", TWICE)
    bad = tmp_path / name
    bad.write_text("garbage")
    rc, _, err = tirx_cli(capsys, "run", kernel, "--sim", "--arg", f"X={bad}")
    assert rc == 2 and f"--arg X={bad}: not {kind}" in err and "of a tensor" in err
    assert "pickle" not in err and "weights_only" not in err


def test_arg_files_that_hold_no_tensor_or_do_not_exist(capsys, tmp_path):
    kernel = write(tmp_path, "twice.py", TWICE)
    torch.save({"a": 1}, tmp_path / "dict.pt")
    rc, _, err = tirx_cli(capsys, "run", kernel, "--sim", "--arg", f"X={tmp_path / 'dict.pt'}")
    assert rc == 2 and "the file holds a dict, not a tensor" in err
    rc, _, err = tirx_cli(capsys, "run", kernel, "--sim", "--arg", f"X={tmp_path / 'no.npy'}")
    assert rc == 2 and "cannot read it: No such file or directory" in err
    np.save(tmp_path / "x.npy", np.ones(32, np.float32))
    rc, out, _ = tirx_cli(capsys, "run", kernel, "--sim", "--arg", f"X={tmp_path / 'x.npy'}",
                          "--check", "Y = 2 * X")  # fmt: skip
    assert rc == 0 and "PASS" in out


def test_check_counts_and_names_infinities_and_nan_as_its_verdict_does():
    ones = torch.ones(32, dtype=torch.float64)
    x = ones.clone()
    x[0] = float("inf")
    ok, text = compare(2 * x, 2 * x, 1e-3, 1e-3)  # equal infinities agree
    assert ok and "over the 31 finite pairs" in text and "nan" not in text
    ok, text = compare(2 * x, -2 * x.where(x.isinf(), -x), 1e-3, 1e-3)  # inf against -inf
    assert not ok and "FAIL, 1 of 32 elements; worst at (0,): out inf, ref -inf" in text
    ok, text = compare(2 * x, 2 * x + 0.5, 1e-3, 1e-3)
    # 31 finite elements off by 0.5; the infinities agree, so the worst is a finite one
    assert not ok and "FAIL, 31 of 32 elements; worst at (1,): out 2, ref 2.5" in text
    y = ones.clone()
    y[3] = float("nan")
    ok, text = compare(y, y, 1e-3, 1e-3)  # NaN is not close to NaN (torch.allclose's rule)
    assert not ok and "FAIL, 1 of 32 elements; worst at (3,): out nan, ref nan" in text


def test_the_kernel_twice_passes_its_check(capsys, tmp_path):
    kernel = write(tmp_path, "twice.py", TWICE)
    rc, out, _ = tirx_cli(capsys, "run", kernel, "--sim", "--check", "Y = 2 * X")
    assert rc == 0 and "PASS" in out


def test_hints_are_spelled_as_the_command_line_spells_targets(capsys):
    # a wgmma kernel compiled without --arch (sm_80 on a machine without a GPU) was told
    # 'compile with target="cuda -arch=sm_90"', the Python API's spelling
    from tirx.cli import command_line_hint

    assert command_line_hint('compile with target="cuda -arch=sm_90" or newer') == (
        "compile with --arch sm_90 or newer"
    )
    assert (
        command_line_hint('compile with target="sim" to run it') == "compile with --sim to run it"
    )
    rc, _, err = tirx_cli(capsys, "compile", "tirx.examples.gemm_wgmma:make_gemm_wgmma(256, 128, 256)",
                          "--arch", "sm_80")  # fmt: skip
    assert rc == 1 and "hint: compile with --arch sm_90 or newer" in err, err


def test_the_summary_names_the_arch_built_where_it_is_not_the_one_asked(capsys, tmp_path):
    rc, out, err = tirx_cli(capsys, "compile", "tirx.examples.gemm_wgmma:make_gemm_wgmma(256, 128, 256)",
                            "--arch", "sm_90", "--stats", "-o", str(tmp_path / "k.cu"))  # fmt: skip
    assert rc == 0, err
    assert "gemm_wgmma: cuda -arch=sm_90 (built for sm_90a), cache" in out + err
