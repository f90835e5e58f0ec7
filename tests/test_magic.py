"""``%load_ext tirx`` and ``%%tirx`` in IPython's in-process shell."""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import tirx
from widgets.capture import c_stdout
from widgets.magic import CellError

ROOT = Path(__file__).resolve().parents[1]
SEED = (ROOT / "tirx" / "examples" / "warp_matmul.py").read_text()
SEED_CELL = "\n".join(
    line
    for line in SEED.split("# --- begin verbatim ---\n")[1]
    .split("# --- end verbatim ---")[0]
    .splitlines()
    if not line.startswith("from ")  # the cell needs no imports
)
PRINTF_CELL = """\
@T.function
def hello(X: T.Tensor((4,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=4))
    i = T.cuda.thread_idx("x")
    T.cuda.printf("thread %d holds %d\\n", i, X[i])

x = np.arange(10, 14, dtype=np.int32)
"""


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    result = shell.run_cell("%load_ext tirx")
    assert result.success
    shell.run_cell(
        "import torch\n"
        "torch.manual_seed(0)\n"
        "a = torch.randn((16, 16), dtype=torch.float16)\n"
        "b = torch.randn((8, 16), dtype=torch.float16)\n"
        "out = torch.zeros((16, 8))\n"
    )
    return shell


def run(ip, line: str, cell: str):
    """Run a %%tirx cell as a notebook does (its own prompt number); return (ExecutionResult,
    captured outputs)."""
    with capture_output() as cap:
        result = ip.run_cell(f"%%tirx {line}\n{cell}", store_history=True)
    return result, cap


def line_of(text: str, cell: str) -> int:
    """The line of ``text`` in a %%tirx cell as the notebook numbers it (the magic is line 1)."""
    return 2 + next(i for i, ln in enumerate(cell.splitlines()) if text in ln)


def test_load_ext_registers_the_cell_magic(ip):
    assert "tirx" in ip.magics_manager.magics["cell"]
    doc = ip.magics_manager.magics["cell"]["tirx"].__doc__
    assert "--run" in doc and "--check" in doc and "--target" in doc  # what %%tirx? shows


def test_seed_cell_shows_the_panel_and_passes_against_torch(ip):
    result, cap = run(ip, '--run "a, b, out" --check "a.float() @ b.float().T"', SEED_CELL)
    assert result.success, cap.stdout
    (panel,) = [o for o in cap.outputs if "text/html" in o.data]
    text, page = panel.data["text/plain"], panel.data["text/html"]
    assert text.startswith("warp_matmul · target ")
    for words in ("cache", "parse", "lower", "codegen", "NVRTC", "registers",
                  "768 shared bytes", "spill stores", "PASS"):  # fmt: skip
        assert words in text, words
    assert re.search(r"max \|out - ref\| = [0-9.e-]+", text)
    for section in ("cuda", "ptx", "ir"):
        assert f'class="tirx-section tirx-{section}"' in page
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in page  # in the PTX section
    assert 'class="tirx-badge tirx-cache-' in page
    torch = ip.user_ns["torch"]
    a, b, out = (ip.user_ns[n] for n in "a b out".split())
    torch.testing.assert_close(out, a.float() @ b.float().T, rtol=1e-3, atol=1e-3)
    assert ip.user_ns["_tirx"][0].run.passed is True


def test_the_kernel_is_read_from_the_cell_text(ip):
    result, _ = run(ip, "-q", SEED_CELL)
    assert result.success
    kernel = ip.user_ns["warp_matmul"]
    assert kernel.source.startswith("@T.function\ndef warp_matmul(")
    assert kernel.source.rstrip("\n") in SEED_CELL
    assert re.fullmatch(r"<tirx-cell-\d+(\.\d+)?>", kernel.ir.span.file)  # the registered cell


def test_sections_option_chooses_what_is_shown(ip):
    result, cap = run(ip, "-s ir,lowered -t sim", SEED_CELL)
    assert result.success
    page = cap.outputs[0].data["text/html"]
    assert "tirx-ir" in page and "tirx-lowered" in page and "tirx-ptx" not in page
    assert "resources" not in cap.outputs[0].data["text/plain"]


def test_a_failing_check_says_fail(ip):
    result, cap = run(ip, '-q --run "a, b, out" --check "a.float() @ b.float().T + 1"', SEED_CELL)
    assert result.success
    assert ip.user_ns["_tirx"][0].run.passed is False


def test_a_compile_error_shows_the_cell_line_with_a_caret(ip):
    bad = SEED_CELL.replace("ar.view(4, 8, 4, layout=a_load_layout)",
                            "ar.view(4, 8, 4, layout=b_load_layout)")  # fmt: skip
    result, cap = run(ip, "", bad)
    err = result.error_in_exec
    assert isinstance(err, CellError)
    shown = "\n".join(err._render_traceback_())
    assert shown in cap.stdout  # what IPython printed is our short text
    assert shown.startswith("LayoutError: ")
    # the prompt's number and the line as the notebook counts it, the %%tirx line included
    where = f"Cell In[{result.execution_count}], line {line_of('layout=b_load_layout', bad)},"
    assert where in shown and "tirx-cell" not in shown
    lines = shown.splitlines()
    caret = next(i for i, ln in enumerate(lines) if set(ln.strip()) == {"^"})
    assert "layout=b_load_layout" in lines[caret - 1]
    assert "Traceback" not in cap.stdout and len(lines) < 10


def test_a_contract_error_points_at_the_tile_operation(ip):
    bad = SEED_CELL.replace("S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)]",
                            "S[(4, 8, 4) : (1, 1 @ laneid, 8 @ laneid)]")  # fmt: skip
    result, _ = run(ip, "", bad)
    shown = "\n".join(result.error_in_exec._render_traceback_())
    assert shown.startswith("ContractError: ldmatrix.sync.aligned.m8n8.x4.shared.b16")
    assert "ar.view(4, 8, 4, layout=a_load_layout)" in shown and "^" in shown


def test_python_errors_keep_only_the_cell_frames(ip):
    result, cap = run(ip, "", "x = 1\ny = undefined_thing + x\n")
    shown = "\n".join(result.error_in_exec._render_traceback_())
    assert shown.startswith("NameError: name 'undefined_thing' is not defined")
    assert f"Cell In[{result.execution_count}], line 3" in shown  # line 1: %%tirx
    assert "y = undefined_thing + x" in shown
    assert "magic.py" not in shown
    result, _ = run(ip, "", "def f(:\n    pass\n")
    shown = "\n".join(result.error_in_exec._render_traceback_())
    assert shown.startswith("SyntaxError") and "def f(:" in shown and "^" in shown
    assert f"Cell In[{result.execution_count}], line 2" in shown


@pytest.mark.parametrize(
    "line, words",
    [
        ("--bogus", "unrecognized arguments: --bogus"),
        ("-t gpu", "unknown target 'gpu'"),
        ("-s cuda,flops", "unknown section 'flops'"),
        ("--check 'a'", "--check needs --run"),
        ("--arch sm_70", "sm_80 or newer"),
        ("-a banana", "--arch 'banana' is not a CUDA architecture: write it as sm_80"),
        ("-a ''", "--arch is empty"),
        ("-k nothing_here", "no kernel named 'nothing_here'"),
    ],
)
def test_bad_options_give_a_short_usage_error(ip, line, words):
    result, cap = run(ip, line, SEED_CELL)
    err = result.error_in_exec
    assert isinstance(err, UsageError), err
    assert words in str(err)
    assert "Traceback" not in cap.stdout + cap.stderr
    if "unrecognized" in words:
        assert "usage: %%tirx [-t TARGET]" in str(err)


def test_run_needs_one_kernel(ip):
    two = PRINTF_CELL + "\n" + PRINTF_CELL.replace("def hello", "def hello2")
    result, _ = run(ip, '--run "x,"', two)
    assert isinstance(result.error_in_exec, UsageError)
    assert "hello, hello2" in str(result.error_in_exec)
    result, cap = run(ip, '-k hello2 -t sim --run "x,"', two)
    assert result.success and "thread 3 holds 13" in cap.stdout


def test_printf_text_reaches_the_cell(ip):
    result, cap = run(ip, '-t sim -s none --run "x,"', PRINTF_CELL)
    assert result.success
    assert cap.stdout.splitlines()[:4] == [f"thread {i} holds {10 + i}" for i in range(4)]
    assert "ran on the simulator" in cap.outputs[0].data["text/plain"]


def test_run_errors_are_short_too(ip):
    result, _ = run(ip, '-t sim --run "x, x"', PRINTF_CELL)
    shown = "\n".join(result.error_in_exec._render_traceback_())
    assert shown == "TypeError: hello() takes 1 arguments (X), got 2"


@pytest.mark.skipif(tirx.Target.parse(None).kind == "cuda", reason="a GPU is visible")
def test_running_on_cuda_without_a_gpu_says_so(ip):
    result, cap = run(ip, '-t cuda --run "a, b, out"', SEED_CELL)
    shown = "\n".join(result.error_in_exec._render_traceback_())
    assert shown.startswith("LaunchError: no CUDA GPU is visible")
    assert "-t sim" in shown and "Traceback" not in cap.stdout
    assert cap.outputs and "warp_matmul" in cap.outputs[0].data["text/plain"]  # panel first


def test_the_namespace_has_the_language_without_imports(ip):
    ip.user_ns["R"] = "mine"
    result, _ = run(ip, "", "seen = (T, S, TileLayout, ComposeLayout, laneid, warpid, m, torch, R)")
    assert result.success
    seen = ip.user_ns["seen"]
    assert seen[0] is ip.user_ns["tirx"].T and seen[-1] == "mine"  # user names are kept
    del ip.user_ns["R"]


def test_c_level_stdout_is_captured():
    libc = ctypes.CDLL(None)
    with c_stdout() as cap:
        os.write(1, b"from the fd\n")
        libc.printf(b"from C printf %d\n", 42)
    assert cap.text == "from the fd\nfrom C printf 42\n"
    with c_stdout() as empty:
        pass
    assert empty.text == ""


@pytest.mark.gpu
def test_gpu_printf_reaches_the_cell(ip):
    result, cap = run(ip, '-t cuda -s none --run "x,"', PRINTF_CELL)
    assert result.success, cap.stdout
    lines = [ln for ln in cap.stdout.splitlines() if ln.startswith("thread ")]
    assert sorted(lines) == [f"thread {i} holds {10 + i}" for i in range(4)]
    assert "ran on the GPU" in cap.outputs[0].data["text/plain"]


@pytest.mark.gpu
def test_seed_cell_runs_on_the_gpu(ip):
    result, cap = run(ip, '-t cuda --run "a, b, out" --check "a.float() @ b.float().T"', SEED_CELL)
    assert result.success, cap.stdout
    (panel,) = [o for o in cap.outputs if "text/html" in o.data]
    text = panel.data["text/plain"]
    assert "cuda -arch=sm_" in text and "PASS" in text and "ran on the GPU" in text
    assert ip.user_ns["out"].device.type == "cpu"  # results copied back to the user's tensor


def test_panel_timings_name_the_front_end_cache_only_when_it_served():
    from types import SimpleNamespace

    from widgets.panel import KernelPanel

    cuda = SimpleNamespace(kind="cuda")
    cold = SimpleNamespace(target=cuda, timings={"parse": 1.0, "lower": 2.0, "codegen": 0.5,
                                                 "nvrtc": 40.0, "other": 0.25})  # fmt: skip
    text = KernelPanel.timing_text(cold)
    assert text == (
        "lower 2.0 ms · codegen 0.5 ms · NVRTC 40.0 ms · load — · other 0.2 ms = 42.8 ms"
    )
    warm = SimpleNamespace(target=cuda, timings={"parse": 0.0, "frontend": 0.6, "lower": 0.0,
                                                 "codegen": 0.0, "nvrtc": 0.4})  # fmt: skip
    assert KernelPanel.timing_text(warm).startswith("front-end cache 0.6 ms · lower 0.0 ms · ")


def test_the_panel_counts_each_timing_once(ip):
    """The parse is shown once for the sim run and the CUDA build; each compile row adds up to
    its call's wall time, and the total is their sum."""
    from widgets.panel import KernelPanel

    tirx.clear_cache()
    result, cap = run(ip, "-t sim", SEED_CELL)
    assert result.success
    panel = ip.user_ns["_tirx"][0]
    sim, cuda = panel.executables()
    text = cap.outputs[0].data["text/plain"]
    assert text.count("parse") == 1
    for exe in (sim, cuda):
        stages = {k: v for k, v in exe.timings.items() if k != "parse"}
        assert "other" in stages
        assert f"= {sum(stages.values()):.1f} ms" in KernelPanel.timing_text(exe)
    parse = sim.timings["parse"]
    assert parse == cuda.timings["parse"] > 0
    total = parse + sum(sum(v for k, v in e.timings.items() if k != "parse") for e in (sim, cuda))
    assert text.splitlines()[3].strip().endswith(f"= {total:.1f} ms")
    assert 'class="tirx-timings tirx-total"' in cap.outputs[0].data["text/html"]


def test_a_kernel_in_an_ordinary_cell_reports_the_cell(ip):
    """A plain @T.function cell (no magic) is compiled by IPython under a temporary file name;
    the error names the cell as IPython's own tracebacks do."""
    cell = (
        "@T.function\n"
        "def broken(X: T.Tensor((4,), 'int32')):\n"
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=4))\n"
        "    X[T.cuda.thread_idx('x')] = not_defined_anywhere\n"
    )
    with capture_output() as cap:
        result = ip.run_cell(cell, store_history=True)
    err = result.error_in_exec
    assert isinstance(err, tirx.TirxSyntaxError)
    assert f"Cell In[{result.execution_count}], line 4, column" in str(err)
    assert "ipython-input" not in str(err) and "ipykernel" not in str(err)
    assert "not_defined_anywhere" in cap.stdout


def test_cells_run_again_get_names_of_their_own(ip):
    """Without history (the count does not move) each run still has its own source text."""
    first = ip.run_cell("%%tirx -q -t sim\n" + PRINTF_CELL)
    second = ip.run_cell("%%tirx -q -t sim\n" + PRINTF_CELL.replace("holds", "has"))
    assert first.success and second.success
    kernel = ip.user_ns["hello"]
    assert "has" in kernel.source and kernel.ir.span.file.startswith("<tirx-cell-")


# ------------------------------------------------------------------ in place, options, messages

ABS_CELL = """\
@T.function
def abs_inplace(X: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.lane_id()
    X[i] = T.if_then_else(X[i] < T.float32(0), -X[i], X[i])
"""
ACC_CELL = """\
@T.function
def accumulate(X: T.Tensor((32,), "float32"), C: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.lane_id()
    C[i] = C[i] + X[i]
"""


def test_check_reads_the_arguments_as_they_were_before_the_run(ip):
    """A kernel that updates an argument in place is checked against the old value, as
    `tirx run` checks it: an abs kernel standing in for relu fails, an accumulator passes."""
    torch = ip.user_ns["torch"]
    ip.user_ns["xs"] = torch.linspace(-1, 1, 32)
    result, _ = run(ip, '-q -t sim --run "xs" --check "torch.relu(xs)"', ABS_CELL)
    assert result.success and ip.user_ns["_tirx"][0].run.passed is False
    ip.user_ns["xs"], ip.user_ns["cs"] = torch.ones(32), torch.full((32,), 10.0)
    result, _ = run(ip, '-q -t sim --run "xs, cs" --check "cs + xs"', ACC_CELL)
    assert result.success and ip.user_ns["_tirx"][0].run.passed is True
    assert ip.user_ns["cs"].tolist() == [11.0] * 32
    # an expression that gives the argument itself is kept as a copy, not read after the run
    result, _ = run(ip, '-q -t sim --run "xs, cs" --check "cs"', ACC_CELL)
    assert result.success and ip.user_ns["_tirx"][0].run.passed is False


def test_quiet_still_says_a_failed_check(ip):
    result, cap = run(ip, '-q --run "a, b, out" --check "a.float() @ b.float().T + 1"', SEED_CELL)
    assert result.success  # as without -q: the verdict is shown, the cell does not fail
    assert not cap.outputs
    (line,) = [ln for ln in cap.stdout.splitlines() if "FAIL" in ln]
    assert line.startswith("warp_matmul: ran on ") and "max |out - ref|" in line
    result, cap = run(ip, '-q --run "a, b, out" --check "a.float() @ b.float().T"', SEED_CELL)
    assert result.success and "PASS" not in cap.stdout and "FAIL" not in cap.stdout


@pytest.mark.parametrize(
    "line, words",
    [
        ('--run "a, b, out', "not closed"),
        ('--run "a, b, out" --check "a" --atol inf', "inf is not a finite number >= 0"),
        ('--run "a, b, out" --check "a" --atol nan', "nan is not a finite number >= 0"),
        ('--run "a, b, out" --check "a" --rtol -1', "-1 is not a finite number >= 0"),
        ('--run "a, b, out" --check "a" --atol abc', "'abc' is not a number"),
    ],
)
def test_unclosed_quotes_and_bad_tolerances_are_usage_errors(ip, line, words):
    result, cap = run(ip, line, SEED_CELL)
    err = result.error_in_exec
    assert isinstance(err, UsageError), err
    assert words in str(err) and "usage: %%tirx [-t TARGET]" in str(err)
    assert "Traceback" not in cap.stdout + cap.stderr
    assert not cap.outputs  # refused before anything compiled or ran


def test_every_option_value_may_be_quoted(ip):
    line = '-t "sim" -s "ir,lowered" -k "warp_matmul" --profile --heat "sectors" --atol "0.01"'
    result, cap = run(ip, line + ' --run "a, b, out" --check "a.float() @ b.float().T"', SEED_CELL)
    assert result.success, cap.stdout
    (panel,) = ip.user_ns["_tirx"]
    assert panel.exe.target.kind == "sim" and panel.sections == ("ir", "lowered")
    assert panel.heat == "sectors" and panel.run.passed is True and "atol 0.01" in panel.run.note
    result, _ = run(ip, "-q -a 'sm_90' -s 'ptx'", SEED_CELL)
    assert result.success and ip.user_ns["_tirx"][0].code.target.arch == "sm_90"


@pytest.mark.parametrize("flags", ["", "-q"])
def test_a_cell_without_a_kernel_says_what_it_must_hold(ip, flags):
    result, cap = run(ip, flags, "x_plain = 1\n")
    assert result.success and not cap.outputs and ip.user_ns["_tirx"] == []
    (line,) = cap.stdout.splitlines()
    assert "no kernel" in line and "@T.function" in line
    result, _ = run(ip, '--run "x_plain"', "x_plain = 1\n")
    assert isinstance(result.error_in_exec, UsageError)
    assert "no kernel" in str(result.error_in_exec)


def test_a_kernel_bound_by_an_assignment_is_named(ip):
    cell = "from tirx.examples.softmax import make_softmax\nsoft = make_softmax(8, 256)\n"
    result, cap = run(ip, "-s none", cell)
    assert result.success and not cap.outputs
    (line,) = cap.stdout.splitlines()
    assert "no kernel" in line and "soft is a kernel bound by an assignment" in line


@pytest.mark.parametrize(
    "line, words",
    [
        ('--run "a, b, nowhere"', "--run 'a, b, nowhere': NameError"),
        ('--run "a, b,, out"', "--run 'a, b,, out': SyntaxError"),
        ('--run "a, b, out" --check "a @@ b"', "--check 'a @@ b': SyntaxError"),
        ('--run "a, b, out" --check "nowhere"', "--check 'nowhere': NameError"),
        ('--run "a, b, out" --check "a" --out "nowhere"', "--out 'nowhere': NameError"),
        (
            '--run "a, b, out" --check "\'hello\'"',
            "--check must give a tensor, an array or a number (got str",
        ),
        (
            '--run "a, b, out" --check None',
            "--check must give a tensor, an array or a number (got NoneType",
        ),
        (
            '--run "a, b, out" --check "0"',
            "--check '0' has shape (), and the output out has shape (16, 8)",
        ),
        (
            '--run "a, b, out" --check "a.float() @ b.float().T" --out "3"',
            "%%tirx: the output to check, --out '3', is a int, not a tensor or array",
        ),
        ('--run "a, b, out" --heat conflicts', "--heat conflicts colours the profile's heat"),
    ],
)
def test_option_expressions_name_their_option(ip, line, words):
    ip.user_ns["out"].zero_()
    result, cap = run(ip, line, SEED_CELL)
    err = result.error_in_exec
    assert isinstance(err, UsageError), err
    assert words in str(err)
    assert "Traceback" not in cap.stdout + cap.stderr
    assert not cap.outputs and not ip.user_ns["out"].any()  # refused before the kernel ran


def test_an_arch_nvrtc_cannot_compile_for_is_refused_up_front(ip):
    pytest.importorskip("cuda.bindings.nvrtc")
    from cuda.bindings import nvrtc

    err, archs = nvrtc.nvrtcGetSupportedArchs()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        pytest.skip("no NVRTC library here")
    result, cap = run(ip, "-a sm_999", SEED_CELL)
    assert isinstance(result.error_in_exec, UsageError)
    assert "unknown arch sm_999: NVRTC here compiles for" in str(result.error_in_exec)
    assert f"sm_{max(archs)}" in str(result.error_in_exec) and not cap.outputs
    result, _ = run(ip, "-q -a sm_80a", SEED_CELL)  # an 'a' arch only from sm_90a on
    assert isinstance(result.error_in_exec, UsageError)
    result, _ = run(ip, "-q -s none -a sm_90a", SEED_CELL)
    assert result.success
