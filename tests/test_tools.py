"""CUDA tools: ptxas -v parsing, ptxas stats from PTX, SASS disassembly; all optional."""

from __future__ import annotations

import pytest

from tirx.backend.cuda import tools
from tirx.backend.cuda.nvrtc import compile_cuda

NVRTC_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'mma_kernel' for 'sm_80'
ptxas info    : Function properties for mma_kernel
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 768 bytes smem, 376 bytes cmem[0]
ptxas info    : Compile time = 6.977 ms
"""

STANDALONE_PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
    24 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 16 bytes cumulative stack size
ptxas info    : Compile time = 19.610 ms
"""

SMALL = 'extern "C" __global__ void k(int* x) { x[threadIdx.x] = threadIdx.x * 3; }\n'


def test_parse_nvrtc_ptxas_log():
    stats = tools.parse_ptxas_info(NVRTC_LOG)
    assert {k: stats[k] for k in tools.STAT_KEYS} == {
        "registers": 32,
        "spill_stores": 0,
        "spill_loads": 0,
        "stack_bytes": 0,
        "shared_bytes": 768,
    }
    assert stats["kernels"] == {"mma_kernel": {k: stats[k] for k in tools.STAT_KEYS}}


def test_parse_standalone_ptxas_and_device_functions():
    stats = tools.parse_ptxas_info(STANDALONE_PTXAS)
    assert stats["kernels"]["helper"] == {"stack_bytes": 24, "spill_stores": 8, "spill_loads": 4}
    assert stats["kernels"]["k"]["registers"] == 40
    assert stats["kernels"]["k"]["shared_bytes"] == 0
    # top level: the worst value over all functions
    assert (stats["registers"], stats["spill_stores"], stats["stack_bytes"]) == (40, 8, 24)


def test_parse_nothing():
    assert tools.parse_ptxas_info("") == {}
    assert tools.parse_ptxas_info("kernel.cu(1): warning: something\n") == {}


def test_ptxas_stats_agree_with_nvrtc():
    if tools.find_tool("ptxas") is None:
        pytest.skip("ptxas is not installed")
    out = compile_cuda(SMALL, arch="sm_90")
    stats = tools.ptxas_stats(out.ptx, "sm_90")
    assert stats["registers"] == out.stats["registers"]
    assert stats["spill_stores"] == 0


def test_ptxas_stats_needs_a_real_arch_and_valid_ptx():
    assert tools.ptxas_stats(".version 9.0\n", "compute_90") == {}
    if tools.find_tool("ptxas") is not None:
        assert tools.ptxas_stats("this is not ptx", "sm_90") == {}


def test_disassemble_shows_sass():
    out = compile_cuda(
        r"""extern "C" __global__ void k(float* c, unsigned addr) {
          unsigned a0, a1, a2, a3;
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(addr));
          float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                       "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                       : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                       : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(a0), "r"(a1));
          c[threadIdx.x] = d0 + d1 + d2 + d3;
        }""",
        arch="sm_90",
    )
    sass = tools.disassemble(out.cubin)
    if sass is None:
        pytest.skip("neither nvdisasm nor cuobjdump is installed")
    assert "LDSM" in sass and "HMMA.16816.F32" in sass


def test_disassemble_rejects_garbage_without_hanging():
    assert tools.disassemble(b"") is None
    assert tools.disassemble(b"\x7fELF not really a cubin") is None


def test_find_tool_missing():
    assert tools.find_tool("no-such-cuda-tool-xyz") is None


@pytest.mark.parametrize(
    ("line", "report"),
    [
        ("ptxas info    : Used 32 registers", True),
        ("ptxas         .     0 bytes stack frame", True),
        ("ptxas info\t: tab", True),
        ("ptxas fatal   : Unresolved extern function 'f'", False),  # an error stays in the log
        ("ptxas info:", False),
        ("ptxas .", False),
        ("ptxasinfo : x", False),
        ("kernel.cu(3): warning: ptxas info", False),
    ],
)
def test_ptxas_report_lines_are_told_from_the_rest(line, report):
    assert tools.is_ptxas_info(line) is report


def test_parse_ptxas_log_ignores_lines_that_only_look_like_a_report():
    log = (
        "ptxas info    : Compiling entry function '' for 'sm_90'\n"  # no name
        "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
        "ptxas info    : Function properties for k\n"
        "    x bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"  # no number
        "    8 bytes stack frame, 4 bytes spill stores\n"  # a part missing
        "ptxas info    : Reused 12 registers\n"  # not "Used N registers"
        "ptxas info    : Used 12 registers, 1024 bytes smem\n"
    )
    assert tools.parse_ptxas_info(log)["kernels"] == {"k": {"registers": 12, "shared_bytes": 1024}}


def test_generated_code_marks_what_it_never_reads():
    """A variable or buffer the body only assigns, or never names, is ``[[maybe_unused]]``
    (NVRTC would warn #177-D or #550-D); a shared buffer written through is used."""
    import tirx
    from tirx import T

    @T.function
    def k(Out: T.Tensor((32,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        s = T.alloc_shared((32,), "float32", layout="default")
        idle = T.alloc_shared((32,), "float32", layout="default")  # noqa: F841
        r = T.alloc_local((2,), "float32")
        lane = T.cuda.lane_id()
        dead = lane * 2  # noqa: F841
        r[0] = T.float32(1)
        s[lane] = T.float32(2)
        Out[lane] = s[lane]

    exe = tirx.compile(k, target="cuda -arch=sm_90")
    assert exe.nvrtc.log == "", exe.nvrtc.log
    for line in ("  [[maybe_unused]] float* idle = ", "  float* s = ",  # idle: never named
                 "  [[maybe_unused]] __align__(16) float r[2];",  # only assigned
                 "  [[maybe_unused]] int dead;", "  int lane;"):  # fmt: skip
        assert f"\n{line}" in exe.source, line
