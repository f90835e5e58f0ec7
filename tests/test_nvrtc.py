"""NVRTC: compile headerless warp-MMA code to PTX/CUBIN, stats, and errors mapped to user lines."""

from __future__ import annotations

import linecache

import pytest

from tirx.backend.cuda import nvrtc
from tirx.backend.cuda.nvrtc import Diagnostic, compile_cuda, parse_diagnostics
from tirx.errors import CompileError, UnsupportedArchError

# One warp computes C[16x8] = A[16x16] @ B[16x8] in fp16 → fp32 with ldmatrix x4 (A),
# ldmatrix x2 .trans (B, stored k-major) and one mma.sync m16n8k16. No headers: halves are
# moved as their raw bits, as tirx's generated code does.
MMA_SOURCE = r"""
typedef unsigned short half_bits;
extern "C" __global__ void mma_kernel(const half_bits* __restrict__ A,
                                      const half_bits* __restrict__ B, float* __restrict__ C) {
  __shared__ __align__(16) half_bits sA[16 * 16];
  __shared__ __align__(16) half_bits sB[16 * 8];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) sA[i] = A[i];
  for (int i = lane; i < 128; i += 32) sB[i] = B[i];
  __syncthreads();
  unsigned a0, a1, a2, a3, b0, b1;
  unsigned addr_a = (unsigned)__cvta_generic_to_shared(&sA[(lane % 16) * 16 + (lane / 16) * 8]);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(addr_a));
  unsigned addr_b = (unsigned)__cvta_generic_to_shared(&sB[(lane % 16) * 8]);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
               : "=r"(b0), "=r"(b1) : "r"(addr_b));
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
               : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1),
                 "f"(d0), "f"(d1), "f"(d2), "f"(d3));
  const int row = lane / 4, col = (lane % 4) * 2;
  C[row * 8 + col] = d0;
  C[row * 8 + col + 1] = d1;
  C[(row + 8) * 8 + col] = d2;
  C[(row + 8) * 8 + col + 1] = d3;
}
"""

PTX_LINES = (
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
    "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
)


def register(name: str, text: str) -> str:
    """Put ``text`` in linecache under ``name``, as the notebook layer does for a cell."""
    lines = text.splitlines(keepends=True)
    linecache.cache[name] = (len(text), None, lines, name)
    return name


@pytest.fixture(scope="module")
def mma_outputs():
    return {arch: compile_cuda(MMA_SOURCE, arch=arch) for arch in ("sm_80", "sm_90")}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_kernel_compiles_to_ptx_and_cubin(mma_outputs, arch):
    out = mma_outputs[arch]
    assert out.cubin[:4] == b"\x7fELF"
    assert f".target {arch}" in out.ptx
    for line in PTX_LINES:
        assert line in out.ptx
    assert f"--gpu-architecture={arch}" in out.options
    assert "--std=c++17" in out.options
    assert not any("fast_math" in o for o in out.options)
    assert out.log == ""  # ptxas' info lines go to stats, not to the log
    assert out.nvrtc_ms > 0


def test_virtual_arch_gives_ptx_only():
    out = compile_cuda(MMA_SOURCE, arch="compute_90")
    assert out.cubin == b""
    assert ".target sm_90" in out.ptx and PTX_LINES[2] in out.ptx
    assert out.stats == {}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_stats_of_small_kernel_have_no_spills(mma_outputs, arch):
    stats = mma_outputs[arch].stats
    assert 0 < stats["registers"] <= 64
    assert stats["spill_stores"] == 0 and stats["spill_loads"] == 0
    assert stats["stack_bytes"] == 0
    assert stats["shared_bytes"] == (16 * 16 + 16 * 8) * 2
    assert stats["kernels"]["mma_kernel"]["registers"] == stats["registers"]


def test_stats_report_local_memory_and_every_kernel():
    src = r"""
    extern "C" __global__ void big(float* x, int k) {
      float v[256];
      for (int i = 0; i < 256; ++i) v[i] = x[i * 3];
      x[0] = v[k & 255];
    }
    extern "C" __global__ void small(float* x) { x[threadIdx.x] = 1.f; }
    """
    stats = compile_cuda(src, arch="sm_80").stats
    assert set(stats["kernels"]) == {"big", "small"}
    assert stats["kernels"]["big"]["stack_bytes"] >= 1024
    assert stats["stack_bytes"] == stats["kernels"]["big"]["stack_bytes"]
    assert stats["kernels"]["small"]["stack_bytes"] == 0


def test_cvta_generic_to_shared_needs_no_header():
    src = r"""
    __device__ __noinline__ unsigned to_shared(const void* p) {
      return (unsigned)__cvta_generic_to_shared(p);
    }
    extern "C" __global__ void k(unsigned* out) {
      __shared__ int s[32];
      out[threadIdx.x] = to_shared(&s[threadIdx.x]);
    }
    """
    out = compile_cuda(src, arch="sm_90")
    assert "cvta.to.shared" in out.ptx


def test_syntax_error_points_at_the_user_line():
    name = register("<tirx-test-cell-1>", "import tirx\n\nx = undefined_name\n")
    src = 'extern "C" __global__ void k(int* x) {\n#line 3 "<tirx-test-cell-1>"\n  x[0] = y;\n}\n'
    with pytest.raises(CompileError) as info:
        compile_cuda(src, arch="sm_80")
    err = info.value
    assert err.span is not None and (err.span.file, err.span.line) == (name, 3)
    assert 'identifier "y" is undefined' in err.message
    assert "<tirx-test-cell-1>(3): error" in err.message  # the log itself
    assert "x = undefined_name" in str(err)  # the user's own line, rendered


def test_error_in_an_unknown_file_has_no_span():
    src = 'extern "C" __global__ void k(int* x) {\n#line 9 "no/such/file.py"\n  x[0] = y;\n}\n'
    with pytest.raises(CompileError) as info:
        compile_cuda(src)
    assert info.value.span is None
    assert "no/such/file.py(9)" in info.value.message


def test_error_in_a_real_file_gets_a_span(tmp_path):
    path = tmp_path / "user_kernel.py"
    path.write_text("a = 1\nb = 2\n")
    src = f'extern "C" __global__ void k(int* x) {{\n#line 2 "{path}"\n  x[0] = y;\n}}\n'
    with pytest.raises(CompileError) as info:
        compile_cuda(src)
    assert info.value.span.file == str(path) and info.value.span.line == 2


def test_bad_inline_ptx_maps_through_lineinfo():
    name = register("<tirx-test-cell-2>", "\n" * 6 + "T.mma(c, a, b)\n")
    src = (
        'extern "C" __global__ void k(float* x) {\n'
        '#line 7 "<tirx-test-cell-2>"\n'
        '  asm volatile("mma.snc.aligned.m16n8k16.row.col.f32.f16.f16.f32 '
        '{%0,%0,%0,%0}, {%1,%1,%1,%1}, {%1,%1}, {%0,%0,%0,%0};" : "+f"(x[0]) : "r"(1));\n'
        "}\n"
    )
    with pytest.raises(CompileError) as info:
        compile_cuda(src, arch="sm_80")
    err = info.value
    assert (err.span.file, err.span.line) == (name, 7)
    assert "Unknown modifier '.snc'" in err.message
    assert "PTX: mma.snc.aligned" in err.message
    assert "inline PTX" in err.hint


def test_instruction_needing_a_newer_arch_is_a_compile_error():
    src = r"""extern "C" __global__ void k(float* x) {
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                   "{%0,%0,%0,%0}, {%1,%1,%1,%1}, {%1,%1}, {%0,%0,%0,%0};" : "+f"(x[0]) : "r"(1));
    }"""
    compile_cuda(src, arch="sm_80")
    with pytest.raises(CompileError, match="requires .target sm_80"):
        compile_cuda(src, arch="sm_75")


def test_missing_header_is_a_compile_error():
    with pytest.raises(CompileError, match="cannot open source file"):
        compile_cuda('#include "cuda_fp16.h"\n__global__ void k() {}\n')


@pytest.mark.parametrize("arch", ["sm80", "90", "sm_", "compute_9x", "sm_90b", "SM_90", "sm_1000"])
def test_bad_arch(arch):
    with pytest.raises(CompileError, match="unknown CUDA architecture"):
        compile_cuda("__global__ void k() {}", arch=arch)


@pytest.mark.parametrize("arch", ["sm_999", "sm_86a"])
def test_an_arch_nvrtc_does_not_know_is_refused_before_nvrtc_runs(arch, monkeypatch):
    """Checked against NVRTC's list of archs (tirx.Target.unsupported), not read from NVRTC's
    refusal: no program is made, and the error class says what is wrong."""

    def no_program(*args, **kwargs):
        raise AssertionError("NVRTC was called")

    monkeypatch.setattr(nvrtc, "_Program", no_program)
    with pytest.raises(UnsupportedArchError) as info:
        compile_cuda("__global__ void k() {}", arch=arch)
    assert isinstance(info.value, CompileError) and info.value.arch == arch
    assert f"unknown arch {arch}: NVRTC here compiles for sm_80, " in info.value.message
    listed = info.value.message.split("compiles for ", 1)[1]
    assert "sm_90" in listed and arch not in listed
    assert 'cuda -arch=sm_90"' in info.value.hint


def test_tirx_compile_refuses_an_unknown_arch_with_the_ones_nvrtc_knows(monkeypatch, cache_dir):
    import tirx
    from tirx.examples.warp_matmul import warp_matmul

    monkeypatch.setattr(nvrtc, "_Program", None)  # never reached
    with pytest.raises(UnsupportedArchError, match="unknown arch sm_999: NVRTC here compiles "
                       "for sm_80, "):  # fmt: skip
        tirx.compile(warp_matmul, "cuda -arch=sm_999")


def test_bad_option():
    with pytest.raises(CompileError, match="unrecognized option --bogus") as info:
        compile_cuda("__global__ void k() {}", options=("--bogus",))
    assert info.value.hint


def test_warnings_stay_in_the_log():
    out = compile_cuda('extern "C" __global__ void k(int* x) { int unused; }\n')
    assert "warning" in out.log and "unused" in out.log
    assert "ptxas info" not in out.log


def test_extra_options_are_passed():
    out = compile_cuda('extern "C" __global__ void k(int* x) { x[0] = 1; }', options=("-lineinfo",))
    assert out.options[-1] == "-lineinfo"
    assert ".loc" in out.ptx


def test_parse_diagnostics():
    log = (
        'cell.py(3): error: identifier "y" is undefined\n'
        "    x[0] = y;\n"
        "           ^\n"
        'kernel.cu(1): warning #177-D: variable "u" was declared but never referenced\n'
        'kernel.cu(1): catastrophic error: cannot open source file "cuda_fp16.h"\n'
        "ptxas application ptx input, line 24; error   : Unknown modifier '.instr'\n"
        "ptxas fatal   : Ptx assembly aborted due to errors\n"
        "nvrtc: error: unrecognized option --bogus found\n"
        '2 errors detected in the compilation of "kernel.cu".\n'
    )
    assert parse_diagnostics(log) == [
        Diagnostic("cell.py", 3, "error", 'identifier "y" is undefined'),
        Diagnostic("kernel.cu", 1, "warning", 'variable "u" was declared but never referenced'),
        Diagnostic("kernel.cu", 1, "catastrophic error", 'cannot open source file "cuda_fp16.h"'),
        Diagnostic("<ptx>", 24, "error", "Unknown modifier '.instr'"),
        Diagnostic("<nvrtc>", 0, "error", "unrecognized option --bogus found"),
    ]
    assert parse_diagnostics("") == []


def test_parse_diagnostics_keeps_parentheses_in_paths():
    (d,) = parse_diagnostics('/tmp/my dir(1)/k.cu(12): error: expected a ";"\n')
    assert d == Diagnostic("/tmp/my dir(1)/k.cu", 12, "error", 'expected a ";"')


def test_nvrtc_version_is_the_pinned_one():
    # ENV.md: NVRTC 13.0 emits PTX 9.0, which the system ptxas and the GPU driver accept.
    assert nvrtc.nvrtc_version() == (13, 0)


def test_output_is_frozen(mma_outputs):
    out = mma_outputs["sm_80"]
    with pytest.raises(AttributeError):
        out.ptx = ""  # type: ignore[misc]


def test_stats_are_measured_on_first_use_not_at_compile(monkeypatch):
    from tirx.backend.cuda import nvrtc

    runs = []
    real = nvrtc.ptxas_stats
    monkeypatch.setattr(nvrtc, "ptxas_stats", lambda *a: runs.append(a) or real(*a))
    # as where NVRTC's log carries no resource report (ptxas -v then has to be run)
    monkeypatch.setattr(nvrtc, "parse_ptxas_info", lambda log: {})
    out = compile_cuda(MMA_SOURCE, arch="sm_90")
    assert runs == [] and "not measured yet" in repr(out)  # compiling ran no ptxas
    first = out.stats
    assert runs == [(out.ptx, "sm_90")] and out.stats is first  # once, then remembered
    if first:  # without ptxas the stats are empty
        assert first["registers"] > 0


def test_an_executables_shared_bytes_count_its_dynamic_shared_memory():
    """ptxas reports static shared memory only; a kernel past 48 KB has none (its shared
    memory is dynamic), and exe.stats still says what a block uses."""
    import tirx
    from tirx.examples.gemm_wgmma import make_gemm_wgmma

    exe = tirx.compile(make_gemm_wgmma(256, 128, 256), "cuda -arch=sm_90")
    assert exe.lowered.shared_bytes > 48 * 1024
    assert exe.stats["shared_bytes"] == exe.lowered.shared_bytes
    assert exe.stats["static_shared_bytes"] == exe.nvrtc.stats["shared_bytes"] == 0
    if "kernels" in exe.nvrtc.stats:  # ptxas ran: the kernel's own entry says the same
        mine = exe.stats["kernels"]["gemm_wgmma"]
        assert (mine["shared_bytes"], mine["static_shared_bytes"]) == (exe.lowered.shared_bytes, 0)
        assert exe.nvrtc.stats["kernels"]["gemm_wgmma"]["shared_bytes"] == 0  # not changed
