"""The GEMM's measurement tools: the ablated kernels of ``benchmarks/gemm_ablation.py`` and the
cluster/TMA rewrite of ``benchmarks/gemm_cluster_tma.py`` (their GPU figures are in
docs/gpu-runs/gemm.md, the fifth session of 2026-12-01)."""

import sys
from pathlib import Path

import pytest

import tirx
from tirx.examples import gemm_pipelined as gp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gemm_ablation  # noqa: E402
import gemm_cluster_tma  # noqa: E402

N = 512
ARCH = "cuda -arch=sm_90"


def _cuda(kernel) -> str:
    src = tirx.compile(kernel, target=ARCH).source
    return "\n".join(line for line in src.splitlines() if not line.startswith("#line"))


@pytest.fixture(scope="module")
def default_cuda():
    return _cuda(gp.make_gemm_pipelined(N, N, N, "float16"))


def test_ablation_hooks_off_give_the_default_kernel(default_cuda):
    """With nothing left out, the edited source generates the default kernel byte for byte."""
    assert _cuda(gemm_ablation.ablated_gemm(N, N, N, "float16", None)) == default_cuda


@pytest.mark.parametrize(
    "ablation, copies, ldmatrix",
    [("no-copy", 12, 16), ("no-copy-b", 20, 16), ("same-k", 24, 16), ("no-ldmatrix", 24, 8)],
)
def test_each_ablation_leaves_out_its_part(default_cuda, ablation, copies, ldmatrix):
    """The default issues 12 cp.async per thread in its prologue and 12 in its loop (8 of A, 4 of
    B) and 8 ldmatrix before the loop; each ablation removes what it names and nothing else."""
    assert default_cuda.count("cp.async.cg.shared.global") == 24
    src = _cuda(gemm_ablation.ablated_gemm(N, N, N, "float16", ablation))
    assert src != default_cuda
    assert src.count("cp.async.cg.shared.global") == copies
    loads = src.count("ldmatrix.sync")
    assert loads == ldmatrix or (ldmatrix == 16 and loads == default_cuda.count("ldmatrix.sync"))
    assert src.count("mma.sync") == default_cuda.count("mma.sync")


def test_ablation_refuses_a_changed_example(monkeypatch):
    real = gemm_ablation.inspect.getsource
    monkeypatch.setattr(
        gemm_ablation.inspect,
        "getsource",
        lambda obj: real(obj).replace("def fetch(", "def fetch_tiles("),
    )
    with pytest.raises(RuntimeError, match="gemm_pipelined.py"):
        gemm_ablation.ablated_source((True, True, False, True))


def test_ablation_names_are_checked():
    with pytest.raises(ValueError, match="no-copy"):
        gemm_ablation.ablated_gemm(N, N, N, "float16", "no-mma")


@pytest.mark.parametrize("name", sorted(gemm_cluster_tma.VARIANTS))
def test_cluster_rewrite_compiles_with_tma_and_no_cp_async(name):
    stages, ahead, fill_at, sync = gemm_cluster_tma.VARIANTS[name]
    _, text, cubin = gemm_cluster_tma.compile_cluster(
        N, "float16", stages, ahead=ahead, fill_at=fill_at, sync=sync
    )
    assert "cp.async.cg" not in text
    assert ("__cluster_dims__(2, 1, 1)" in text) == (sync != "solo")
    fill = "tirx_fill_solo(" if sync == "solo" else "tirx_fill("
    assert text.count(fill) == 3  # its definition, the prologue's fills, the loop's
    assert text.count("tirx_release(") == 1 + (sync == "release")  # defined; called
    assert cubin[:4] == b"\x7fELF"


def test_cluster_rewrite_checks_its_arguments(default_cuda):
    with pytest.raises(ValueError, match="ahead"):
        gemm_cluster_tma.cluster_source(default_cuda, N, stages=3, ahead=3)
    with pytest.raises(ValueError, match="sync"):
        gemm_cluster_tma.cluster_source(default_cuda, N, sync="grid")
    with pytest.raises(gemm_cluster_tma.RewriteError, match="prologue"):
        gemm_cluster_tma.cluster_source(
            default_cuda.replace("for (st = 0; st < 2; ++st) {", "for (st = 0; st < 2; st++) {"),
            N,
            stages=3,
        )


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(gemm_cluster_tma.VARIANTS))
@pytest.mark.parametrize("n", [512, 1024])
def test_gpu_cluster_kernel_is_bit_equal_to_the_default(name, n):
    import torch

    stages, ahead, fill_at, sync = gemm_cluster_tma.VARIANTS[name]
    exe, _, cubin = gemm_cluster_tma.compile_cluster(
        n, "float16", stages, ahead=ahead, fill_at=fill_at, sync=sync
    )
    g = torch.Generator(device="cuda").manual_seed(n)
    a = torch.randn((n, n), device="cuda", generator=g).half()
    b = torch.randn((n, n), device="cuda", generator=g).half()
    want = torch.full((n, n), float("nan"), device="cuda")
    got = torch.full((n, n), float("nan"), device="cuda")
    exe(a, b, want)
    gemm_cluster_tma.cluster_runner(cubin, stages, a, b, got, solo=sync == "solo")()
    torch.cuda.synchronize()
    assert torch.equal(got, want)


# ------------------------------------------------------------------ the wgmma measurement

import gemm_wgmma  # noqa: E402


def test_wgmma_kernel_checks_its_arguments():
    with pytest.raises(ValueError, match="multiple of 256"):
        gemm_wgmma.wgmma_source(640)
    with pytest.raises(ValueError, match="stages"):
        gemm_wgmma.wgmma_source(1024, stages=5)
    with pytest.raises(ValueError, match="dtype"):
        gemm_wgmma.wgmma_source(1024, "float32")
    with pytest.raises(ValueError, match="loads"):
        gemm_wgmma.wgmma_source(1024, loads="ldg")
    with pytest.raises(ValueError, match="stages"):  # cp.async keeps stages - 2 tiles ahead
        gemm_wgmma.wgmma_source(1024, stages=2, loads="cp.async")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_wgmma_kernel_compiles_to_hgmma_fed_by_tma(dtype):
    from tirx.backend.cuda.tools import disassemble

    cubin = gemm_wgmma.compile_wgmma(1024, dtype, 4)
    assert cubin[:4] == b"\x7fELF"
    sass = disassemble(cubin)
    if sass is None:
        pytest.skip("no disassembler installed (the sass extra)")
    assert sass.count("HGMMA.64x128x16.F32") == 8  # 4 K slices x 2 row halves per K tile
    assert "UTMALDG.2D" in sass and "LDSM" not in sass
    assert "STL" not in sass and "LDL" not in sass  # accumulators stay in registers


@pytest.mark.parametrize("stages", [3, 4])
def test_wgmma_kernel_fed_by_cp_async_compiles_to_hgmma_and_ldgsts(stages):
    from tirx.backend.cuda.tools import disassemble

    sass = disassemble(gemm_wgmma.compile_wgmma(1024, "float16", stages, "cp.async"))
    if sass is None:
        pytest.skip("no disassembler installed (the sass extra)")
    assert sass.count("HGMMA.64x128x16.F32") == 8
    # 12 copies per K tile: the prologue's stages - 2 tiles and the loop's one
    assert sass.count("LDGSTS.E.BYPASS.128") == 12 * (stages - 1)
    assert "UTMALDG" not in sass and "LDSM" not in sass
    assert "STL" not in sass and "LDL" not in sass


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("stages", [3, 4])
@pytest.mark.parametrize("loads", gemm_wgmma.LOADS)
def test_gpu_wgmma_kernel_agrees_with_the_default(dtype, stages, loads):
    import torch

    n = 1024
    g = torch.Generator(device="cuda").manual_seed(stages)
    tdtype = getattr(torch, dtype)
    a = torch.randn((n, n), device="cuda", generator=g).to(tdtype)
    b = torch.randn((n, n), device="cuda", generator=g).to(tdtype)
    want = torch.full((n, n), float("nan"), device="cuda")
    got = torch.full((n, n), float("nan"), device="cuda")
    tirx.compile(gp.make_gemm_pipelined(n, n, n, dtype), target="cuda")(a, b, want)
    cubin = gemm_wgmma.compile_wgmma(n, dtype, stages, loads)
    gemm_wgmma.wgmma_runner(cubin, stages, a, b, got, loads)()
    torch.cuda.synchronize()
    ref = a.double() @ b.double().T
    assert ((got.double() - ref).norm() / ref.norm()).item() < 1e-5
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-3)
