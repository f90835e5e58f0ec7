"""The ``tirx`` command line: what each command prints, and its exit codes (0 ok, 1 a mistake
in the kernel or a failed check, 2 a command-line mistake), never a traceback for a user's
mistake."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest

import tirx
import tirx.examples
from tirx import cli_load
from tirx.cli import main

# The examples of the tirx that is imported: the checkout's, or an installed wheel's (.ci/run
# runs this file against a wheel, from outside the checkout).
EXAMPLES = Path(tirx.examples.__file__).resolve().parent
SEED = EXAMPLES / "warp_matmul.py"
CHECK = "Out = A.float() @ B.float().T"

SCALED = """\
from tirx import T


@T.function
def scaled(X: T.Tensor((32,), "int32"), Out: T.Tensor((32,), "int32"), k: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.thread_idx("x")
    Out[i] = X[i] * k


@T.function
def copied(X: T.Tensor((32,), "int32"), Out: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.thread_idx("x")
    Out[i] = X[i]
"""


def tirx_cli(capsys, *argv) -> tuple[int, str, str]:
    """Run ``tirx ARGV`` in this process: (exit status, stdout, stderr)."""
    try:
        rc = main(list(argv))
    except SystemExit as e:  # argparse's own exits (usage, --help)
        rc = e.code
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return rc, out.out, out.err


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


# ------------------------------------------------------------------------ entry points


def test_python_m_tirx_and_the_console_script_run_the_cli():
    out = subprocess.run([sys.executable, "-m", "tirx", "--version"], capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == f"tirx {tirx.__version__}"
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="console_scripts") if e.name == "tirx"]
    assert entry.value == "tirx.cli:main"
    # pip puts the script beside this Python, or in the environment's scripts folder
    candidates = [Path(sys.executable).with_name("tirx"),
                  Path(sysconfig.get_path("scripts")) / "tirx"]  # fmt: skip
    script = next((c for c in candidates if c.exists()), None) or shutil.which("tirx")
    assert script, "pip install -e . installs the `tirx` console script"
    out = subprocess.run([str(script), "layout", "S[(8, 4) : (4 @ laneid, 1 @ laneid)]"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert "28:0" in out.stdout  # element (7, 0): lane 4*7 + 0


@pytest.mark.parametrize("command", [[], ["compile"], ["run"], ["layout"]])
def test_help_on_each_command(capsys, command):
    rc, out, _ = tirx_cli(capsys, *command, "--help")
    assert rc == 0 and out.startswith("usage: tirx")
    for word in {(): "compile", ("compile",): "--emit", ("run",): "--check",
                 ("layout",): "--svg"}[tuple(command)].split():  # fmt: skip
        assert word in out


# ------------------------------------------------------------------------ compile


def test_compile_emits_cuda_ptx_ir_and_writes_files(capsys, tmp_path):
    rc, out, _ = tirx_cli(capsys, "compile", str(SEED), "--arch", "sm_90", "--emit", "ptx")
    assert rc == 0 and "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in out
    assert ".target sm_90" in out
    rc, out, _ = tirx_cli(capsys, "compile", f"{SEED}:warp_matmul", "-t", "sim", "--emit", "ir")
    assert rc == 0 and "def warp_matmul(" in out
    target = tmp_path / "seed.cu"
    rc, out, err = tirx_cli(capsys, "compile", str(SEED), "-a", "sm_80", "-o", str(target),
                            "--stats")  # fmt: skip
    assert rc == 0 and out == ""
    text = target.read_text()
    assert 'extern "C" __global__' in text
    stats, wrote = err.splitlines()
    assert stats.startswith("warp_matmul: cuda -arch=sm_80, cache ") and "shared bytes" in stats
    assert wrote.startswith(f"wrote {target} (cuda, {len(text.splitlines())} lines, ")


def test_compile_sass(capsys):
    """The SASS where a disassembler is installed (the `sass` extra), else why there is none."""
    from tirx.examples.warp_matmul import warp_matmul

    has_tool = tirx.compile(warp_matmul, target="cuda -arch=sm_90").sass is not None
    rc, out, err = tirx_cli(capsys, "compile", str(SEED), "--arch", "sm_90", "--emit", "sass")
    if has_tool:
        assert rc == 0, err
        assert "HMMA.16816.F32" in out  # the mma.sync the PTX asked for
    else:
        assert rc == 1 and "no SASS" in err and "pip install 'tirx[sass]'" in err


def test_compile_from_a_module_name_and_a_kernel_expression(capsys):
    rc, out, _ = tirx_cli(capsys, "compile", "tirx.examples.warp_matmul", "--emit", "lowered",
                          "-t", "sim")  # fmt: skip
    assert rc == 0 and "warp_matmul" in out
    ref = f"{EXAMPLES / 'gemm.py'}:make_gemm(64, 64, 32, dtype='bfloat16')"
    rc, out, _ = tirx_cli(capsys, "compile", ref, "--arch", "sm_90", "--emit", "ptx")
    assert rc == 0 and "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in out


# Each example file, named by its path, with a call that makes its kernel. A new example needs
# an entry: the first test checks that the table covers the folder.
EXAMPLE_REFS = {
    "warp_matmul.py": ("", "warp_matmul"),
    "gemm.py": (":make_gemm(64, 64, 32)", "gemm"),
    "gemm_staged.py": (":make_gemm_staged(128, 128, 64)", "gemm_staged"),
    "gemm_pipelined.py": (":make_gemm_pipelined(256, 128, 128)", "gemm_pipelined"),
    "gemm_wgmma.py": (":make_gemm_wgmma(256, 128, 192)", "gemm_wgmma"),
    "softmax.py": (":make_softmax(4, 128)", "softmax"),
    "attention_mma.py": (":make_attention(1, 1, 1, 64, 64, 64)", "attention"),
    "attention_wgmma.py": (":make_attention(1, 1, 1, 128, 128, 64)", "attention"),
    "attention_wgmma_config.py": None,  # the Hopper attention's configuration: no kernel
    "gemm_config.py": None,  # the GEMMs' shared helpers: no kernel
    "softmax_backward.py": (":make_softmax_backward(4, 128)", "softmax_backward"),
    "attention.py": None,  # the torch-shaped entry: functions that compile kernels
    "ops.py": None,  # torch operators made of the examples' kernels
    "gemm_persistent.py": (":make_gemm_persistent(128, 128, 32)", "gemm_persistent"),
    "warp_specialized.py": (":make_warp_specialized(128, 128)", "warp_specialized"),
    "tile_scheduler.py": None,  # the grouped tile order: a macro and its Python twin
    "gemm_hopper.py": (":make_gemm_hopper(128, 128, 64)", "gemm_hopper"),
    "gemm_fp8.py": (":make_gemm_fp8(128, 256, 128)", "gemm_fp8"),
}
# what the message of a file without a kernel says of its functions
NO_KERNEL_NAMES = {
    "gemm_config.py": "shared_layout",
    "attention.py": "flash_attention",
    "ops.py": "defines no function either",
    "tile_scheduler.py": "tile_order",
    "attention_wgmma_config.py": "default_config",
}


def test_the_example_table_covers_every_example_file():
    assert {p.name for p in EXAMPLES.glob("*.py") if p.name != "__init__.py"} == set(EXAMPLE_REFS)


@pytest.mark.parametrize("name", sorted(EXAMPLE_REFS))
def test_every_example_file_loads_by_its_path(capsys, name):
    """The examples with relative imports (``from .gemm_config import ...``) load as modules of
    tirx.examples; gemm_config.py, which makes no kernel, says which functions it has."""
    path = EXAMPLES / name
    if EXAMPLE_REFS[name] is None:
        rc, _, err = tirx_cli(capsys, "compile", str(path), "-t", "sim", "--emit", "ir")
        assert rc == 2 and "defines no @T.function kernel" in err and NO_KERNEL_NAMES[name] in err
        return
    call, kernel = EXAMPLE_REFS[name]
    rc, out, err = tirx_cli(capsys, "compile", f"{path}{call}", "-t", "sim", "--emit", "ir")
    assert rc == 0 and err == "", err
    assert f"def {kernel}(" in out


KERNEL_IN_PACKAGE = """\
from tirx import T

from ..sizes import N


@T.function
def copied(X: T.Tensor((N,), "int32"), Out: T.Tensor((N,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=N))
    i = T.cuda.thread_idx("x")
    Out[i] = X[i]
"""


def test_a_file_in_a_package_is_imported_by_its_dotted_name(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    top = tmp_path / "cli_user_kernels"
    (top / "inner").mkdir(parents=True)
    for init in (top / "__init__.py", top / "inner" / "__init__.py"):
        init.write_text("")
    (top / "sizes.py").write_text("N = 32\n")
    kern = write(tmp_path, "cli_user_kernels/inner/kern.py", KERNEL_IN_PACKAGE)
    assert cli_load.package_module(kern) == ("cli_user_kernels.inner.kern", str(tmp_path))
    assert cli_load.package_module(str(SEED)) == ("tirx.examples.warp_matmul",
                                                  str(EXAMPLES.parents[1]))  # fmt: skip
    assert cli_load.package_module(write(tmp_path, "loose.py", "")) is None
    try:
        rc, out, err = tirx_cli(capsys, "run", kern, "--sim", "--check", "Out = X")
        assert rc == 0 and "PASS" in out, err
        assert sys.modules["cli_user_kernels.inner.kern"].__file__ == kern
    finally:
        for name in [n for n in sys.modules if n.startswith("cli_user_kernels")]:
            del sys.modules[name]


def test_a_file_of_another_copy_of_tirx_runs_against_the_imported_one(capsys, tmp_path):
    """tirx/examples/gemm_wgmma.py of a checkout while tirx imports from elsewhere (a wheel):
    the file runs, its relative imports use the imported package, which stays as it was."""
    copy = tmp_path / "tirx" / "examples"
    copy.mkdir(parents=True)
    for init in (tmp_path / "tirx" / "__init__.py", copy / "__init__.py"):
        init.write_text("")
    path = copy / "gemm_wgmma.py"
    path.write_text((EXAMPLES / "gemm_wgmma.py").read_text())
    name = "tirx.examples.gemm_wgmma"
    before = sys.modules.get(name)
    rc, out, err = tirx_cli(capsys, "compile", f"{path}:make_gemm_wgmma(256, 128, 192)", "-t",
                            "sim", "--emit", "ir")  # fmt: skip
    assert rc == 0 and "def gemm_wgmma(" in out
    assert err.startswith(f"tirx: note: {path} is module {name}, whose package imports from "
                          f"{EXAMPLES}")  # fmt: skip
    assert sys.modules.get(name) is before


def test_a_contract_error_is_printed_with_its_caret_at_the_users_line(capsys, tmp_path):
    bad = SEED.read_text().replace("ar.view(4, 8, 4, layout=a_load_layout)",
                                   "ar.view(4, 8, 4, layout=b_load_layout)")  # fmt: skip
    path = write(tmp_path, "bad_seed.py", bad)
    line = 1 + next(i for i, ln in enumerate(bad.splitlines()) if "layout=b_load_layout" in ln)
    rc, out, err = tirx_cli(capsys, "compile", path, "--arch", "sm_90")
    assert rc == 1 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith("LayoutError: ")
    assert f"  File {path}, line {line}, column" in err
    caret = next(i for i, ln in enumerate(lines) if set(ln.strip()) == {"^"})
    assert "layout=b_load_layout" in lines[caret - 1]


def test_python_errors_in_the_file_quote_the_files_own_lines(capsys, tmp_path):
    path = write(tmp_path, "oops.py", "from tirx import T\nscale = 2\nx = scale / undefined_name\n")
    rc, _, err = tirx_cli(capsys, "compile", path)
    assert rc == 1
    assert err.splitlines()[0] == "NameError: name 'undefined_name' is not defined"
    assert f"File {path}, line 3" in err and "x = scale / undefined_name" in err
    assert "importlib" not in err and "cli.py" not in err
    path = write(tmp_path, "syntax.py", "def f(:\n    pass\n")
    rc, _, err = tirx_cli(capsys, "compile", path)
    assert rc == 1 and err.startswith("SyntaxError") and "def f(:" in err and "^" in err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["compile", "no/such/file.py"], "no such file or module: no/such/file.py"),
        (["compile", str(SEED), "--emit", "bytes"], "invalid choice: 'bytes'"),
        (["compile", str(SEED), "--bogus"], "unrecognized arguments: --bogus"),
        (["compile", str(SEED), "-t", "gpu"], "unknown target 'gpu'"),
        (["compile", str(SEED), "-t", "sim", "--emit", "ptx"], "--emit ptx needs the cuda target"),
        (["compile", str(SEED), "--arch", "sm_70"], "sm_80 or newer"),
        (["compile", f"{SEED}:nothing_here"], "has no 'nothing_here' (its kernels: warp_matmul;"),
        (["compile", f"{SEED}:make_nothing(1)"], "NameError: name 'make_nothing' is not defined"),
        (["compile", f"{EXAMPLES / 'gemm.py'}:make_gemm(64)"], "missing 2 required positional"),
        (["compile", f"{EXAMPLES / 'gemm.py'}:make_gemm(64,"], "cannot read the kernel expressi"),
        (
            ["compile", str(EXAMPLES / "gemm.py")],
            "no @T.function kernel (call a function that "
            f"makes one: {EXAMPLES / 'gemm.py'}:make_gemm(...)",
        ),
        (["compile", str(EXAMPLES)], "is a folder: name a Python file in it"),
        (["compile", str(EXAMPLES / "gemm.py"), "--arch", "sm_999"], "unknown arch sm_999: NVRTC"),
        (["compile", str(SEED), "-t", "cuda -arch=sm_86a"], "unknown arch sm_86a"),
        (["compile", str(SEED), "--arch", "sm90"], "--arch 'sm90' is not a CUDA architecture"),
        (["compile", str(SEED), "--arch", ""], "--arch is empty: name an arch"),
        (["compile", str(SEED), "--arch", "sm_90", "-t", "cuda -arch=sm_80"], "both say which"),
        (["compile", str(SEED), "-t", "cuda -arch=sm_90 -arch=sm_80"], "names two archs"),
        (["compile", str(SEED), "-t", "cuda -arch=90"], "'90' is not a CUDA architecture"),
        (["compile", str(SEED), "--out", "k.tirx", "-o", "x.cu"], "-o prints what the compiler"),
        (["compile", str(SEED), "--out", "k.tirx", "--emit", "ptx"], "give one of them"),
        (["compile", str(SEED), "--out", "/no/such/dir/k.tirx"], "there is no folder /no/such/"),
        (["compile", str(SEED), "--out", str(EXAMPLES)], "it is a folder (name a file in it)"),
        (["compile", str(SEED), "--out", ""], "--out is empty: name the file to write"),
        (["compile", str(SEED), "-o", ""], "-o is empty: name the file to write"),
        (["compile", "/dev/null"], "/dev/null is not a regular file"),
        (
            ["run", str(SEED), "--sim", "--arg", "A=torch.ones(16, 16, device='meta')"],
            "a meta tensor has no data to run on",
        ),
        (
            ["run", str(SEED), "--sim", "--arg", "Out=torch.zeros(16, 8, requires_grad=True)"],
            "the tensor requires grad",
        ),
        (["run", str(SEED), "--sim", "--arg", "Q=1", "--arg", "Q=2"], "no parameter 'Q'"),
        (["run", str(SEED), "--sim", "--arg", "Out=0", "--arg", "Out=1"], "given twice"),
        (["compile", str(SEED), "-o", "/no/such/dir/seed.cu"], "cannot write /no/such/dir/seed"),
        (["compile", f"{SEED}:a_load_layout"], "is a TileLayout, not a @T.function kernel"),
        (["compile", "tirx.examples.gemm:make_gemm"], "call it to make one: tirx.examples.gemm:"),
        (["run", str(SEED), "--sim", "--check", "Out == "], "--check 'Out == '"),
        (["run", str(SEED), "--sim", "--check", "C = A"], "no parameter 'C'"),
        (["run", str(SEED), "--sim", "--check", "Out = A @ Z"], "name 'Z' is not defined"),
        (["run", str(SEED), "--sim", "--arg", "A=torch.ones(16, 16)"], "expects dtype float16"),
        (["run", str(SEED), "--sim", "--arg", "Q=1"], "the kernel has no parameter 'Q'"),
        (["run", str(SEED), "--sim", "--check", "Out = None"], "that is a NoneType, not a tens"),
        (["run", str(SEED), "--sim", "--check", "[1, 2]"], "has shape (2,), and Out has shape"),
        (["run", str(SEED), "--sim", "--check", "import os"], "write one expression, or NAME ="),
        (["run", str(SEED), "--sim", "--arg", "A=no_such.npy"], "--arg A=no_such.npy: "),
        (["run", str(SEED), "--sim", "--arg", "A=1.5"], "parameter 'A' expects a tensor"),
        (["run", str(SEED), "--sim", "--print", "Q"], "--print Q: the kernel has no parameter"),
        (["run", str(SEED), "--sim", "--atol", "-1"], "argument --atol: -1 is not a finite"),
        (["run", str(SEED), "--sim", "--rtol", "x"], "argument --rtol: 'x' is not a number"),
        (["run", str(SEED), "--sim", "--seed", "-1"], "argument --seed: -1 is not in 0.."),
        (["run", str(SEED), "--sim", "-t", "cuda"], "not allowed with argument --sim"),
        (["run", str(SEED), "--sim", "--arch", "sm_90"], "--arch sm_90 goes with the cuda targ"),
        (["layout", "S[8, 4]", "--shape", "4,x"], "--shape '4,x'"),
        (["layout", "S[8, 4]", "--shape", "3,3"], "--shape 3,3 has 9 elements but the layout"),
        # a value that starts with "-": tirx's own message, not argparse's "expected one argument"
        (["layout", "S[8, 4]", "--shape", "-4,-8,4"], "--shape '-4,-8,4': the extents must be po"),
        (["layout", "S[8, 4]", "-s", "-4,8"], "--shape '-4,8': the extents must be positive"),
        (["layout", "S[8, 4]", "--shape=-4,8"], "--shape '-4,8': the extents must be positive"),
        (["--traceback", "layout", "S[8, 4]", "--shape", "-4"], "--shape '-4': the extents m"),
        (["layout", "S[8, 4]", "--shape"], "argument -s/--shape: expected one argument"),
        (["layout", "S[(4, 8) : (1, 4 @ nowhere)]"], "name 'nowhere' is not defined"),
        (["layout", "S[(4, 8"], "cannot read 'S[(4, 8'"),
        (["layout", ""], "the layout text is empty"),
        (["layout", "S[4096, 4096]"], "covers 16777216 elements; tirx layout shows at most"),
        (["layout", "S[64, 128]", "--png", "big.png"], "--png draws at most 4096"),
        (["layout", "S[8, 4]", "--png", "a.png", "--dpi", "-5"], "argument --dpi: -5 is not in"),
        (["layout", "S[8, 4]", "--lane", "32"], "argument --lane: 32 is not in 0..31"),
        (["layout", "S[8, 4]", "--dtype-bytes", "3"], "argument --dtype-bytes: invalid choice"),
        (["layout", "S[8, 4]", "--png", "/no/such/dir/a.png"], "cannot write /no/such/dir/a.png"),
        (["layout", "S[8, 4]", "--svg", "/no/such/dir/a.svg"], "cannot write /no/such/dir/a.svg"),
    ],
)
def test_command_line_mistakes_exit_2_with_one_line(capsys, argv, words):
    t0 = time.perf_counter()
    rc, out, err = tirx_cli(capsys, *argv)
    assert rc == 2, (out, err)
    assert words in err.splitlines()[0]
    assert len(err.splitlines()) <= 2
    assert out == "" or argv[0] == "layout" and "cannot write" in err  # the table came first
    assert time.perf_counter() - t0 < 30  # refused, not worked at (a 4096 x 4096 layout)


def test_an_unreadable_file_is_a_usage_error(capsys, tmp_path, monkeypatch):
    path = write(tmp_path, "locked.py", "x = 1\n")

    def refuse(name, *args, **kw):
        raise PermissionError(13, "Permission denied", name)

    monkeypatch.setattr(cli_load, "open", refuse, raising=False)  # root reads any file
    rc, _, err = tirx_cli(capsys, "compile", path)
    assert rc == 2 and err.startswith(f"tirx compile: error: cannot read {path}: Permission")


def test_a_file_with_several_kernels_needs_a_name(capsys, tmp_path):
    path = write(tmp_path, "two.py", SCALED)
    rc, _, err = tirx_cli(capsys, "compile", path)
    assert rc == 2 and "defines 2 kernels (scaled, copied): name one" in err
    rc, out, _ = tirx_cli(capsys, "compile", f"{path}:copied", "-t", "sim", "--emit", "ir")
    assert rc == 0 and "def copied(" in out


# ------------------------------------------------------------------------ run


def test_the_seed_runs_and_checks_in_one_line(capsys):
    rc, out, _ = tirx_cli(capsys, "run", str(SEED), "--sim", "--check", CHECK)
    assert rc == 0
    first, verdict = out.splitlines()
    assert first.startswith("ran warp_matmul on the simulator in ")
    assert "A random, B random, Out random (seed 0)" in first
    assert verdict.startswith("Out: max |out - ref| = ") and verdict.endswith(": PASS")


def test_a_wrong_reference_fails_with_exit_1_and_names_the_worst_element(capsys):
    rc, out, _ = tirx_cli(capsys, "run", str(SEED), "--sim", "--check", CHECK + " + 0.5")
    assert rc == 1
    verdict = out.splitlines()[-1]
    assert "FAIL, 128 of 128 elements; worst at (" in verdict


def test_given_inputs_are_used(capsys):
    ones = "torch.ones(16, 16, dtype=torch.float16)"
    rc, out, _ = tirx_cli(capsys, "run", "tirx.examples.warp_matmul", "--sim",
                          "--arg", f"A={ones}", "--arg", "B=torch.full((8, 16), 2.0).half()",
                          "--check", "torch.full((16, 8), 32.0)", "--print", "Out")  # fmt: skip
    assert rc == 0, out
    assert "A given, B given, Out random" in out and "PASS" in out
    assert "32." in out.split("Out =", 1)[1]


def test_inputs_from_files_and_scalars(capsys, tmp_path):
    import numpy as np

    path = write(tmp_path, "scaled.py", SCALED)
    np.save(tmp_path / "x.npy", np.arange(32, dtype=np.int32))
    rc, _, err = tirx_cli(capsys, "run", f"{path}:scaled", "--sim")
    assert rc == 2 and "parameter 'k' is a scalar (int32): give its value with --arg k=VALUE" in err
    rc, out, _ = tirx_cli(capsys, "run", f"{path}:scaled", "--sim", "--arg", f"X={tmp_path}/x.npy",
                          "--arg", "k=3", "--check", "Out = X * k")  # fmt: skip
    assert rc == 0 and "X given, Out random, k given" in out and "PASS" in out
    rc, _, err = tirx_cli(capsys, "run", f"{path}:scaled", "--sim", "--arg", "k=3", "--check",
                          "k = 3")  # fmt: skip
    assert rc == 2 and "k is a scalar parameter, which the kernel cannot write" in err


def test_random_inputs_follow_the_seed(capsys, tmp_path):
    path = write(tmp_path, "two.py", SCALED)
    outs = [
        tirx_cli(capsys, "run", f"{path}:copied", "--sim", "--seed", s, "--print", "Out")[1].split(
            "Out ="
        )[1]
        for s in ("1", "1", "2")
    ]
    assert outs[0] == outs[1] != outs[2]


def test_a_simulator_fault_exits_1_with_the_kernels_line(capsys, tmp_path):
    path = write(tmp_path, "oob.py", SCALED.replace("Out[i] = X[i]\n", "Out[i] = X[i + 1]\n"))
    rc, _, err = tirx_cli(capsys, "run", f"{path}:copied", "--sim")
    assert rc == 1 and err.startswith("SimulationError: ")
    assert "Out[i] = X[i + 1]" in err and "^" in err


@pytest.mark.skipif(tirx.gpu_available(), reason="a GPU is visible")
def test_running_on_cuda_without_a_gpu_says_so(capsys):
    rc, out, err = tirx_cli(capsys, "run", str(SEED), "-t", "cuda")
    assert rc == 1 and out == ""
    assert (
        err.startswith("TirxError: no CUDA GPU is visible") and "hint: " in err and "--sim" in err
    )


@pytest.mark.gpu
def test_the_seed_runs_on_the_gpu(capsys):
    rc, out, _ = tirx_cli(capsys, "run", str(SEED), "--arch", "sm_90", "--check", CHECK)
    assert rc == 0, out
    assert out.startswith("ran warp_matmul on the GPU (cuda -arch=sm_90)") and "PASS" in out


# ------------------------------------------------------------------------ layout


def test_layout_prints_the_table_and_draws_svg_and_png(capsys, tmp_path):
    svg, png = tmp_path / "a.svg", tmp_path / "a.png"
    rc, out, err = tirx_cli(capsys, "layout", "S[(4,8,4):(1,4@laneid,1@laneid)]", "--shape",
                            "4,8,4", "--svg", str(svg), "--png", str(png))  # fmt: skip
    assert rc == 0
    said = err.splitlines()  # what it wrote, on stderr (stdout is the table)
    assert said[0].startswith(f"wrote {svg} (SVG, 128 cells, ") and said[0].endswith(" kB)")
    assert said[1].startswith(f"wrote {png} (PNG, 128 cells at 150 dpi, ")
    rows = out.splitlines()
    assert rows[0] == "TileLayout(S[(4, 8, 4):(1, 4 @ laneid, 1 @ laneid)])"
    assert rows[3].split() == ["0,0", "0:0", "1:0", "2:0", "3:0"]
    assert rows[4].split() == ["0,1", "4:0", "5:0", "6:0", "7:0"]
    assert rows[-1].split()[0] == "3,7" and rows[-1].split()[-1] == "31:3"
    picture = svg.read_text()
    assert picture.startswith("<svg") and picture.count('class="tirx-el"') == 128
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG")
    # pHYs: pixels per metre, 150 dpi = 5906 /m
    phys = data.index(b"pHYs")
    assert int.from_bytes(data[phys + 4 : phys + 8], "big") == round(150 / 0.0254)


def test_png_is_written_as_png_whatever_its_name_and_at_the_dpi_asked(capsys, tmp_path):
    out = tmp_path / "picture.img"
    rc, _, err = tirx_cli(capsys, "layout", "S[8, 4]", "--png", str(out), "--dpi", "72")
    assert rc == 0 and "72 dpi" in err
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG")
    phys = data.index(b"pHYs")
    assert int.from_bytes(data[phys + 4 : phys + 8], "big") == round(72 / 0.0254)


def test_a_bad_layout_is_a_command_line_mistake(capsys):
    """Every input of `tirx layout` is on the command line: a layout it refuses exits 2."""
    rc, out, err = tirx_cli(capsys, "layout", "S[(4, 8) : (1, 4 @ nowhere)]")
    assert rc == 2 and out == ""
    assert err.startswith("tirx layout: error: cannot evaluate") and "nowhere" in err
    assert "(use S, R, TileLayout" in err  # the hint, on the same line


def test_an_output_over_the_kernels_own_source_is_refused(capsys, tmp_path):
    # -o / --out naming the Python file the kernel is in would replace the user's code
    src = tmp_path / "k.py"
    src.write_text(SEED.read_text())
    for argv in (["-o", str(src)], ["--out", str(src)], ["-o", str(tmp_path / "." / "k.py")]):
        rc, out, err = tirx_cli(capsys, "compile", str(src), "--arch", "sm_90", *argv)
        assert rc == 2, err
        assert "is the kernel's own source file" in err
    assert src.read_text() == SEED.read_text()


def test_odd_files_are_told_for_what_they_are(capsys, tmp_path, monkeypatch):
    nul = tmp_path / "bin.py"
    nul.write_bytes(b"x = 1\0\n")
    rc, _, err = tirx_cli(capsys, "compile", str(nul))
    assert rc == 2 and "not a Python file (it holds NUL bytes)" in err
    saved = tmp_path / "k.tirx"
    saved.write_bytes(b"PK")
    rc, _, err = tirx_cli(capsys, "run", str(saved))
    assert rc == 2 and "a saved kernel, not a Python file: it loads with tirx.load" in err
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    rc, _, err = tirx_cli(capsys, "compile", str(fifo))
    assert rc == 2 and "is not a regular file" in err
    # a folder whose name holds a colon, which is also a module name's shape ("co")
    (tmp_path / "co:lon").mkdir()
    (tmp_path / "co:lon" / "k.py").write_text(SEED.read_text())
    monkeypatch.chdir(tmp_path)
    rc, out, err = tirx_cli(capsys, "compile", "co:lon/k.py:warp_matmul", "--arch", "sm_90")
    assert rc == 0, err
    assert "warp_matmul" in out


def test_an_error_at_import_quotes_the_file_not_importlib(capsys, tmp_path, monkeypatch):
    (tmp_path / "raises.py").write_text('raise RuntimeError("boom at import")\n')
    monkeypatch.chdir(tmp_path)  # the frozen frames' "<frozen ...>" names are not in this folder
    rc, _, err = tirx_cli(capsys, "compile", "raises.py")
    assert rc == 1
    assert "RuntimeError: boom at import" in err
    assert "raises.py, line 1" in err
    assert "frozen" not in err


def test_a_random_input_the_machine_cannot_hold_is_a_usage_error(capsys, monkeypatch):
    # (a tensor of 2 GiB or more is refused when the kernel compiles; one under that may still
    # not fit this machine's memory: torch's allocation error becomes one line, exit 2)
    import torch

    def no_memory(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate")

    monkeypatch.setattr(torch, "randn", no_memory)
    rc, out, err = tirx_cli(capsys, "run", str(SEED), "--sim")
    assert rc == 2, err
    assert "cannot make a random float16 input 'A' of shape (16, 16) here" in err
    assert "--arg A=" in err
