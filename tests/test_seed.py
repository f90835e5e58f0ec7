"""The seed guide (docs/seed/warp_matrix_instructions.rst) runs as written.

CPU: the guide's kernel parses, lowers and compiles through NVRTC to CUBIN for sm_80 and
sm_90 with the three matrix instructions in its PTX and no spills. GPU: the guide's code
blocks run verbatim as a script, and random inputs match torch for 100 draws.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tirx

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "seed" / "warp_matrix_instructions.rst"


def guide_blocks() -> list[str]:
    text = GUIDE.read_text()
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", text)
    return [textwrap.dedent(b).strip() + "\n" for b in blocks]


def test_guide_has_two_python_blocks():
    blocks = guide_blocks()
    assert len(blocks) == 2
    assert "@T.function" in blocks[0]
    assert "tvm_tirx.compile(warp_matmul" in blocks[1]


def test_example_module_is_the_guide_verbatim():
    source = (ROOT / "tirx" / "examples" / "warp_matmul.py").read_text()
    body = source.split("# --- begin verbatim ---\n")[1].split("# --- end verbatim ---")[0]
    assert body.strip() == guide_blocks()[0].strip()


@pytest.fixture(scope="module")
def seed():
    from tirx.examples.warp_matmul import warp_matmul

    return warp_matmul


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_seed_compiles_to_cubin(seed, arch):
    exe = tirx.compile(seed, target=f"cuda -arch={arch}")
    assert exe.cubin[:4] == b"\x7fELF"
    assert exe.nvrtc.log == "", exe.nvrtc.log  # NVRTC has nothing to say about tirx's code
    assert f".target {arch}" in exe.ptx
    ptx_lines = [ln.strip() for ln in exe.ptx.splitlines()]
    assert any(ln.startswith("ldmatrix.sync.aligned.m8n8.x4.shared.b16") for ln in ptx_lines)
    assert any(ln.startswith("ldmatrix.sync.aligned.m8n8.x2.shared.b16") for ln in ptx_lines)
    assert any(
        ln.startswith("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") for ln in ptx_lines
    )
    stats = exe.stats
    assert stats["spill_stores"] == 0 and stats["spill_loads"] == 0
    assert stats["registers"] and stats["registers"] < 64
    assert stats["shared_bytes"] == (16 * 16 + 8 * 16) * 2


def test_seed_inspection_surface(seed):
    exe = tirx.compile(seed, target="cuda -arch=sm_90")
    assert 'extern "C" __global__' in exe.source
    # every user statement is mapped back to the kernel's file
    assert "#line" in exe.source and "warp_matmul.py" in exe.source
    assert set(exe.timings) >= {"parse", "lower", "codegen", "nvrtc"}
    script = exe.script()
    assert "T.cuda.tile.apply" in script and "def warp_matmul(" in script
    lowered = exe.script(lowered=True)
    assert lowered.count('ptx("') == 3
    assert "cuda -arch=sm_90" in repr(exe)


def test_second_compile_hits_the_cache(seed):
    tirx.compile(seed, target="cuda -arch=sm_80")
    again = tirx.compile(seed, target="cuda -arch=sm_80")
    assert again.cache == "hit"


@pytest.mark.gpu
def test_guide_runs_verbatim_on_gpu(tmp_path):
    script = tmp_path / "guide.py"
    script.write_text("\n\n".join(guide_blocks()) + "\nprint('GUIDE OK')\n")
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "GUIDE OK" in proc.stdout


@pytest.mark.gpu
def test_seed_matches_torch_for_100_draws(seed):
    import torch

    exe = tirx.compile(seed, target="cuda")
    gen = torch.Generator(device="cuda").manual_seed(1234)
    out = torch.empty((16, 8), dtype=torch.float32, device="cuda")
    for _ in range(100):
        a = torch.randn((16, 16), dtype=torch.float16, device="cuda", generator=gen)
        b = torch.randn((8, 16), dtype=torch.float16, device="cuda", generator=gen)
        exe(a, b, out)
        torch.testing.assert_close(out, a.float() @ b.float().T, rtol=2e-4, atol=2e-4)
