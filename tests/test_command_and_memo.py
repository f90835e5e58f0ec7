"""One NVRTC command line (built by ``nvrtc.command_line``) compiles a kernel and names it in
the cache; one memo layout (``runner_text.MEMO``) is read by the Python runner, the memo builder
and the C launcher."""

from __future__ import annotations

import sys

import pytest

import tirx
from tirx.backend.cuda import build, executable, nvrtc, runner_text
from tirx.examples.warp_matmul import warp_matmul

from .helpers import attach_recorder, seed_cpu_args


def _recording_keys(monkeypatch):
    seen = []
    real = build.cache_key

    def key(source, options, *rest):
        seen.append(tuple(options))
        return real(source, options, *rest)

    monkeypatch.setattr(build, "cache_key", key)
    return seen


def test_the_key_hashes_the_command_line_that_compiles(cache_dir, monkeypatch):
    seen = _recording_keys(monkeypatch)
    exe = tirx.compile(warp_matmul, target="cuda -arch=sm_90")
    assert seen == [exe.nvrtc.options]
    assert exe.nvrtc.options[0] == "--gpu-architecture=sm_90"
    assert "--fmad=false" in exe.nvrtc.options and "--ptxas-options=-v" in exe.nvrtc.options


def test_generated_code_compiles_minimal_where_nvrtc_has_it(cache_dir, monkeypatch):
    """-minimal (NVRTC 12.4+) drops builtin declarations tirx's code never uses: the same
    PTX and CUBIN, built faster. An older NVRTC does not get the option."""
    from tirx.backend.cuda.nvrtc import command_line, compile_cuda, nvrtc_version

    exe = tirx.compile(warp_matmul, target="cuda -arch=sm_90")
    assert ("-minimal" in exe.nvrtc.options) == (nvrtc_version() >= (12, 4))
    if "-minimal" in exe.nvrtc.options:
        full = [o for o in exe.nvrtc.options if o != "-minimal"]
        plain = compile_cuda(exe.source, arch="sm_90", filename="warp_matmul.cu", command=full)
        assert (plain.ptx, plain.cubin) == (exe.ptx, exe.cubin)
    assert build.nvrtc_options((12, 3)) == build.NVRTC_OPTIONS
    assert command_line("sm_90", build.nvrtc_options((12, 4)))[-1] == "-minimal"


def test_a_changed_default_option_changes_the_key_and_the_compile(cache_dir, monkeypatch):
    seen = _recording_keys(monkeypatch)
    first = tirx.compile(warp_matmul, target="cuda -arch=sm_90")
    sys.modules["tirx.compile"]._MEMO.clear()  # compile again, the compile cache kept
    assert tirx.compile(warp_matmul, target="cuda -arch=sm_90").cache == "hit"
    sys.modules["tirx.compile"]._MEMO.clear()
    monkeypatch.setattr(nvrtc, "DEFAULT_OPTIONS", (*nvrtc.DEFAULT_OPTIONS, "-lineinfo"))
    exe = tirx.compile(warp_matmul, target="cuda -arch=sm_90")
    assert exe.cache == "miss" and first.cache == "miss"  # not the entry without -lineinfo
    assert seen[0] == seen[1] != seen[2] == exe.nvrtc.options
    assert "-lineinfo" in seen[2]


def test_compile_cuda_refuses_a_command_line_for_another_arch():
    with pytest.raises(ValueError, match="not one for 'sm_80'"):
        nvrtc.compile_cuda("__global__ void k() {}", arch="sm_80",
                           command=nvrtc.command_line("sm_90"))  # fmt: skip


def test_the_c_launcher_is_built_from_the_same_layout():
    native = executable._built_native_module()
    if native is None:
        pytest.skip("the C extension was not built here")
    assert native.MEMO_LAYOUT == tuple(runner_text.MEMO)


def test_a_launcher_built_from_another_layout_is_not_used(monkeypatch):
    class Other:
        MEMO_LAYOUT = (3, 2, 1, 0, 0, 1)

        def Runner(self, *args):  # noqa: N802 - the extension's spelling
            raise AssertionError("must not be used")

    class Launcher:
        entry_address = 1234

    monkeypatch.setattr(executable, "_native_module", lambda: Other())
    got = executable.native_runner(Launcher(), (1, 1, 1), (32, 1, 1), 0, (), (), [], None, 0, None)
    assert got is None


def test_the_python_runner_reads_the_memo_through_the_layout(cache_dir, monkeypatch):
    """A permuted layout still launches, hits and misses right: nothing indexes it by hand."""
    permuted = runner_text.MemoLayout(per_tensor=3, ref=2, version=0, pointer=1, block=1, params=0)
    monkeypatch.setattr(runner_text, "MEMO", permuted)
    runner_text.runner_code.cache_clear()
    try:
        exe = tirx.compile(warp_matmul, target="cuda -arch=sm_90")
        rec = attach_recorder(exe)
        exe._forget_runner()
        a, b, out = seed_cpu_args()
        for _ in range(3):
            exe(a, b, out)
        assert len(rec.calls) == 3
        assert rec.calls[0][4:] == (a.data_ptr(), b.data_ptr(), out.data_ptr())
        out.add_(1)  # an in-place change: checked again, launched again
        exe(a, b, out)
        assert len(rec.calls) == 4
    finally:
        runner_text.runner_code.cache_clear()
