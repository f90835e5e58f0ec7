"""The warp-specialized persistent GEMM of ``tirx.examples.gemm_hopper``: its argument checks,
the simulator against numpy on integer data for each stage count, tile width, output type and
cluster shape, copies of the example with one synchronisation removed or wrong (each reported
at its line), its machine code for sm_90a, and on the GPU equality with torch."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import tirx
from tirx.errors import ContractError, SimulationError
from tirx.examples import gemm_hopper as gh

EXAMPLE = Path(gh.__file__)


def _operands(M, N, K, dtype, seed=0):
    """Integer operands in -1..1: every product sum (|sum| <= K <= 256) is exact in f32, f16
    and bf16."""
    import torch

    rng = np.random.default_rng(seed)
    a = torch.from_numpy(rng.integers(-1, 2, size=(M, K)).astype(np.float32))
    b = torch.from_numpy(rng.integers(-1, 2, size=(N, K)).astype(np.float32))
    return a.to(getattr(torch, dtype)), b.to(getattr(torch, dtype))


def _simulate(kernel, M, N, K, dtype="float16", out_dtype="float32", sms=2, seed=0):
    import torch

    a, b = _operands(M, N, K, dtype, seed)
    out = torch.full((M, N), float("nan"), dtype=getattr(torch, out_dtype))
    tirx.compile(kernel, target=f"sim -sms={sms}")(a, b, out)
    return a, b, out


def _exact(a, b, out):
    want = a.double().numpy() @ b.double().numpy().T
    np.testing.assert_array_equal(out.double().numpy(), want)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="multiples of 128, 128, 64"):
        gh.make_gemm_hopper(192, 128, 128, bn=128)
    with pytest.raises(ValueError, match="multiples of 256, 256, 64"):
        gh.make_gemm_hopper(128, 256, 128, out_dtype="bfloat16", cluster=2)
    with pytest.raises(ValueError, match="multiples of 128, 128, 64"):
        gh.make_gemm_hopper(128, 128, 96, bn=128)
    with pytest.raises(ValueError, match="M must be a positive int"):
        gh.make_gemm_hopper(0, 128, 128)
    with pytest.raises(ValueError, match="dtype must be"):
        gh.make_gemm_hopper(128, 128, 128, "float32")
    with pytest.raises(ValueError, match="out_dtype must be"):
        gh.make_gemm_hopper(128, 128, 128, out_dtype="int8")
    with pytest.raises(ValueError, match="cluster must be 1 or 2"):
        gh.make_gemm_hopper(512, 128, 128, cluster=4)
    with pytest.raises(ValueError, match="bn must be 128 or 256"):
        gh.make_gemm_hopper(128, 192, 128, bn=192)
    with pytest.raises(ValueError, match="stages must be"):
        gh.make_gemm_hopper(128, 128, 128, stages=1)
    # 4 stages of 48 KB and a 64 KB bf16 staging tile: 256 KB
    with pytest.raises(ValueError, match="shared memory"):
        gh.make_gemm_hopper(128, 256, 128, out_dtype="bfloat16", bn=256, stages=4)


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        ((True, 128, 64), {}, TypeError, "M must be an int, not a bool"),
        ((128.0, 128, 64), {}, TypeError, "M must be an int"),
        ((128, None, 64), {}, TypeError, "N must be an int"),
        ((128, 128, -64), {}, ValueError, "K must be a positive int"),
        ((128, 128, 64), {"stages": "4"}, TypeError, "stages must be an int"),
        ((128, 128, 64), {"cluster": True}, TypeError, "cluster must be an int, not a bool"),
        ((128, 128, 64), {"bn": 128.0}, TypeError, "bn must be an int"),
        ((128, 128, 64), {"group": None}, TypeError, "group must be an int"),
        ((512, 128, 64), {"group": 2.5}, TypeError, "group must be an int"),
        ((128, 128, 64), {"group": True}, TypeError, "group must be an int, not a bool"),
        ((128, 128, 64), {"group": 0}, ValueError, "group must be a positive int, got 0"),
        ((128, 128, 64), {"group": -3}, ValueError, "group must be a positive int, got -3"),
    ],
)
def test_arguments_that_are_not_ints_are_refused_by_name(args, kwargs, error, message):
    """Not a comparison's TypeError, a ContractError from the TMA lowering (group=2.5), or a
    group below 1 quietly taken as 1."""
    with pytest.raises(error, match=message):
        gh.make_gemm_hopper(*args, **kwargs)


def test_numpy_integers_are_taken():
    want = str(gh.make_gemm_hopper(256, 128, 128, stages=3, group=2).ir)
    got = gh.make_gemm_hopper(np.int64(256), np.int32(128), np.int64(128), stages=np.int64(3),
                              group=np.int64(2))  # fmt: skip
    assert str(got.ir) == want
    # a group larger than the tile rows is one band, as documented for the grouped order
    assert str(gh.make_gemm_hopper(256, 128, 128, group=2).ir) == str(
        gh.make_gemm_hopper(256, 128, 128, group=100).ir
    )


@pytest.mark.parametrize(
    "kwargs, fix",
    [
        # bn is already 128: only fewer stages helps
        (dict(stages=6), "use at most 5 stages$"),
        (dict(out_dtype="bfloat16", bn=256, stages=4), "use at most 3 stages or bn=128$"),
    ],
)
def test_the_shared_memory_error_suggests_only_what_fits(kwargs, fix):
    with pytest.raises(ValueError, match="shared memory") as e:
        gh.make_gemm_hopper(128, 256, 128, **kwargs)
    assert re.search(fix, str(e.value)), str(e.value)


def test_shared_bytes_fit_a_block():
    assert gh.shared_bytes(128, 4, 2, 4) == 4 * 32768 + 65536 == 196608
    assert gh.shared_bytes(256, 3, 2, 2) == 3 * 49152 + 65536 == 212992
    assert gh.shared_bytes(128, 5, 2, 2) == 5 * 32768 + 32768 == 196608
    assert gh.shared_bytes(256, 2, 2, 4) + gh.BARRIER_BYTES <= gh.SHARED_LIMIT  # the largest


# (dtype, out_dtype, bn, stages, cluster, M, N, K, sms): two or more tiles per block (the ring
# runs on across tiles and the staging tile is reused), K tiles past the ring's length
CASES = [
    ("float16", "float32", 128, 2, 1, 256, 256, 256, 2),
    ("float16", "float32", 128, 3, 1, 256, 256, 192, 2),
    ("bfloat16", "float32", 128, 4, 1, 256, 256, 320, 2),
    ("float16", "float16", 128, 5, 1, 384, 128, 384, 2),
    ("bfloat16", "bfloat16", 256, 3, 1, 256, 512, 256, 2),
    ("float16", "float32", 128, 2, 2, 512, 256, 256, 4),
    ("bfloat16", "bfloat16", 128, 4, 2, 512, 256, 192, 2),
    ("float16", "bfloat16", 256, 3, 2, 512, 512, 128, 4),
    # the widest tile with a float32 output: 2 stages, 8 store boxes per consumer
    ("bfloat16", "float32", 256, 2, 1, 256, 512, 128, 2),
    # one K tile per output tile: every stage is freed by the tile's last release
    ("float16", "float32", 128, 3, 1, 256, 256, 64, 2),
    ("bfloat16", "float32", 128, 2, 2, 512, 256, 64, 2),
]


@pytest.mark.parametrize(
    ("dtype", "out_dtype", "bn", "stages", "cluster", "M", "N", "K", "sms"), CASES
)
def test_simulator_equals_numpy_on_integer_data(
    dtype, out_dtype, bn, stages, cluster, M, N, K, sms
):
    kernel = gh.make_gemm_hopper(M, N, K, dtype, out_dtype, stages, cluster, bn)
    _exact(*_simulate(kernel, M, N, K, dtype, out_dtype, sms))


def test_simulator_result_does_not_depend_on_the_grid():
    kernel = gh.make_gemm_hopper(384, 256, 128, bn=128, stages=3)
    for sms in (1, 3, 8):  # 6 tiles: 6, 2 and 1 (or none) per block
        _exact(*_simulate(kernel, 384, 256, 128, sms=sms))


# -- one synchronisation taken out or wrong -------------------------------------------------------


def _twin(tmp_path, edits, name):
    """The example's source with each ``old`` (present exactly once) replaced by ``new``,
    imported as a module of its own; returns (module, text)."""
    text = EXAMPLE.read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    text = text.replace("\nfrom .", "\nfrom tirx.examples.")  # its relative imports
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module, text


def _line(text, needle, after=None):
    """The line number of the one line containing ``needle`` (after the line containing
    ``after``, if given)."""
    lines = text.splitlines()
    start = 0 if after is None else _line(text, after)
    hits = [i + 1 for i, ln in enumerate(lines) if i >= start and needle in ln]
    assert hits, needle
    return hits[0]


def _fault(tmp_path, edits, name, cluster=1, error=SimulationError):
    twin, text = _twin(tmp_path, edits, name)
    M = 256 * cluster
    with pytest.raises(error) as e:
        _simulate(
            twin.make_gemm_hopper(M, 256, 256, stages=2, cluster=cluster, bn=128), M, 256, 256
        )
    assert e.value.span is not None and e.value.span.file.endswith(f"{name}.py")
    return e.value, text


def test_producer_parity_flipped_refills_a_stage_in_use(tmp_path):
    """Waiting for the parity of the stage's current use instead of the one before passes at
    once: the producer arms the stage's full barrier again before it observed the phase its
    last copy completes (and would refill a stage whose last copy nobody has consumed yet)."""
    err, text = _fault(
        tmp_path,
        [("(empty[s], (it // STAGES - 1) % 2)", "(empty[s], (it // STAGES) % 2)")],
        "gh_parity",
    )
    assert "tensor copy" in str(err) and "has not observed phase 0 complete" in str(err)
    assert err.span.line == _line(text, 'T.ptx["mbarrier.arrive.expect_tx')


def test_consumer_parity_flipped_is_a_deadlock_named_at_the_wait(tmp_path):
    err, text = _fault(
        tmp_path,
        [("(full[s], (it // STAGES) % 2)", "(full[s], (it // STAGES + 1) % 2)")],
        "gh_full_parity",
    )
    assert "deadlock" in str(err)
    assert (
        f"mbarrier 'full'[0] (byte 0, shared address 131072) at line {_line(text, '(full[s], (it')}"
        in str(err)
    )


def test_multicast_mask_without_the_peer_deadlocks_the_cluster(tmp_path):
    err, text = _fault(tmp_path, [("cta_mask=0b11,", "cta_mask=0b01,")], "gh_mask", cluster=2)
    assert "deadlock across the cluster" in str(err) and "tx-count 16384" in str(err)
    assert "ctaMask" in err.hint
    assert err.span.line == _line(text, "mbarrier_wait_acquire_cluster(")


def test_empty_handshake_of_one_block_only_lets_the_peer_overwrite_a_stage(tmp_path):
    """Each block's consumers free the stage on their own barrier only: the peer's producer
    multicasts the next K tile into this block while its wgmma still reads the stage."""
    err, text = _fault(
        tmp_path,
        [
            ("EMPTY = 8 * CLUSTER", "EMPTY = 8"),
            (
                'if CLUSTER > 1:\n                T.ptx["mapa',
                'if False:\n                T.ptx["mapa',
            ),
        ],
        "gh_handshake",
        cluster=2,
    )
    msg = str(err)
    assert "reads 'b_s'" in msg and "multicast by block" in msg and "has not completed" in msg
    assert f"at line {_line(text, 'T.ptx[MCAST],') - 1}" in msg  # the multicast copy
    assert err.span.line == _line(text, "T.cuda.tile.apply(", after="def multiply")  # the wgmma


def test_staging_tile_rewritten_before_wait_group_read(tmp_path):
    err, text = _fault(tmp_path, [('T.ptx["cp.async.bulk.wait_group.read"](0)', "pass")], "gh_read")
    assert "writes 'o_s'" in str(err) and "not known to be done" in str(err)
    assert err.span.line == _line(text, "o_w[g, col // CW,")


def test_staging_tile_stored_without_the_proxy_fence(tmp_path):
    err, text = _fault(tmp_path, [('T.ptx["fence.proxy.async.shared::cta"]()', "pass")], "gh_fence")
    assert "may read stale bytes" in str(err)
    assert err.span.line == _line(text, "T.ptx[STORE],") - 1


def test_staging_tile_stored_before_the_warpgroup_meets(tmp_path):
    err, text = _fault(tmp_path, [("meet(staged[g], 1)", "pass")], "gh_meet")
    assert "shared-memory race" in str(err) and "reads 'o_s'" in str(err)
    assert err.span.line == _line(text, "T.ptx[STORE],") - 1


def test_setmaxnreg_in_one_warp_only(tmp_path):
    err, text = _fault(
        tmp_path,
        [
            (
                "T.ptx[DEC](PRODUCER_REGISTERS)",
                "if T.cuda.warp_id() == 0:\n                T.ptx[DEC](PRODUCER_REGISTERS)",
            )
        ],
        "gh_setmaxnreg",
        error=ContractError,
    )
    assert "does not execute setmaxnreg.dec 40" in str(err)
    assert err.span.line == _line(text, "T.ptx[DEC](PRODUCER_REGISTERS)")


# -- the machine code -----------------------------------------------------------------------------

BUILDS = [  # (dtype, out_dtype, bn, stages, cluster)
    ("float16", "float32", 128, 4, 1),
    ("bfloat16", "bfloat16", 256, 3, 1),
    ("float16", "float16", 128, 5, 1),
    ("bfloat16", "float32", 128, 4, 2),
    ("float16", "bfloat16", 256, 3, 2),
]


@pytest.mark.parametrize(("dtype", "out_dtype", "bn", "stages", "cluster"), BUILDS)
def test_sm90a_build_has_no_spills(dtype, out_dtype, bn, stages, cluster):
    kernel = gh.make_gemm_hopper(4096, 4096, 4096, dtype, out_dtype, stages, cluster, bn)
    exe = tirx.compile(kernel, target="cuda -arch=sm_90a")
    stats = exe.nvrtc.stats
    # __launch_bounds__(384, 1): 168 per thread, which setmaxnreg trades (40 + 232 + 232)
    assert stats["registers"] == 168
    assert stats["spill_stores"] == stats["spill_loads"] == stats["stack_bytes"] == 0
    out_bytes = 4 if out_dtype == "float32" else 2
    barriers = exe.lowered.shared_bytes - gh.shared_bytes(bn, stages, 2, out_bytes)
    assert 8 * (2 * stages + 2) <= barriers <= 128  # full, empty, staged (16-byte aligned)
    assert exe.lowered.shared_bytes <= gh.SHARED_LIMIT
    sass = exe.sass
    if sass is None:
        pytest.skip("no disassembler installed (the sass extra)")
    # the consumers' code (between setmaxnreg.inc and .dec) fits the 232 registers it takes
    lines = sass.splitlines()
    inc = next(i for i, ln in enumerate(lines) if "USETMAXREG.TRY_ALLOC.CTAPOOL" in ln)
    dec = next(i for i, ln in enumerate(lines) if "USETMAXREG.DEALLOC.CTAPOOL" in ln)
    used = {int(r) for ln in lines[inc:dec] for r in re.findall(r"\bR(\d+)\b", ln)}
    assert bn // 2 < max(used) < gh.CONSUMER_REGISTERS  # the accumulator and then some
    assert sass.count(f"HGMMA.64x{bn}x16.F32") == 4  # the 4 K steps of a 64-deep K tile
    assert sass.count("UTMALDG.2D.MULTICAST") == (cluster == 2)
    assert sass.count("UTMALDG.2D") == 2  # A's box, B's box (or its multicast half)
    assert sass.count("UTMASTG.2D") == bn // (128 // out_bytes)  # one per 128-byte column box
    assert "SYNCS.PHASECHK.TRANS64.TRYWAIT" in sass and "SYNCS.ARRIVE.TRANS64" in sass
    assert "USETMAXREG.DEALLOC.CTAPOOL" in sass and "USETMAXREG.TRY_ALLOC.CTAPOOL" in sass
    assert "LDSM" not in sass and "STL" not in sass and "LDL" not in sass


# -- on the GPU -----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "out_dtype", "bn", "stages", "cluster"), BUILDS)
def test_gpu_equals_the_simulator_on_integer_data(dtype, out_dtype, bn, stages, cluster):
    import torch

    M, N, K = 512, 512, 256
    kernel = gh.make_gemm_hopper(M, N, K, dtype, out_dtype, stages, cluster, bn)
    a, b = _operands(M, N, K, dtype, seed=3)
    out = torch.full((M, N), float("nan"), dtype=getattr(torch, out_dtype), device="cuda")
    tirx.compile(kernel, target="cuda")(a.cuda(), b.cuda(), out)
    _exact(a, b, out.cpu())


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "out_dtype", "bn", "stages", "cluster"), BUILDS)
def test_gpu_equals_torch_matmul(dtype, out_dtype, bn, stages, cluster):
    import torch

    n = 2048
    g = torch.Generator(device="cuda").manual_seed(stages)
    tdtype = getattr(torch, dtype)
    a = torch.randn((n, n), device="cuda", generator=g).to(tdtype)
    b = torch.randn((n, n), device="cuda", generator=g).to(tdtype)
    out = torch.full((n, n), float("nan"), dtype=getattr(torch, out_dtype), device="cuda")
    kernel = gh.make_gemm_hopper(n, n, n, dtype, out_dtype, stages, cluster, bn)
    tirx.compile(kernel, target="cuda")(a, b, out)
    want = a.float() @ b.float().T
    torch.testing.assert_close(
        out.float(), want, rtol=1e-2 if out_dtype != "float32" else 1e-4, atol=1e-2
    )


# -- the benchmark's additions (benchmarks/gemm_speed.py) ---------------------------------------


def _speed():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gemm_kernels
    import gemm_speed

    return gemm_speed, gemm_kernels


def test_benchmark_has_the_hopper_variants():
    _, kernels = _speed()
    for name, out in [("hopper", "float32"), ("hopper-c2", "float32")]:
        assert kernels.output_dtype(kernels.TIRX_VARIANTS[name](512, 512, 256, "bfloat16")) == out
    for name in ("hopper-out16", "hopper-out16-c2"):
        kernel = kernels.TIRX_VARIANTS[name](512, 512, 256, "bfloat16")
        assert kernels.output_dtype(kernel) == "bfloat16"


def test_benchmark_parses_fp8_sizes():
    speed, _ = _speed()
    assert speed.fp8_sizes(speed.FP8_SIZES) == [
        (4096, 4096, 4096),
        (8192, 8192, 8192),
        (8192, 8192, 4096),
    ]
    with pytest.raises(ValueError, match="MxNxK"):
        speed.fp8_sizes("4096x4096")
    with pytest.raises(ValueError, match="multiples"):
        speed.fp8_sizes("4096x4000x4096")


def test_benchmark_tables_of_the_fp8_and_same_output_runners():
    speed, _ = _speed()
    flops = 2 * 4096**3
    fp8 = speed.Fp8Cell(4096, 4096, 4096)
    for name, tf in (("tirx fp8", 900.0), ("tirx fp8 c2", 1000.0), ("torch._scaled_mm", 1250.0)):
        fp8.ms[name] = flops / (tf * 1e12) * 1e3
    row = speed.fp8_table([fp8]).splitlines()[-1]
    assert row == "| 4096 | 4096 | 4096 | 900.0 | 1000.0 | 1250.0 | 0.72 | 0.80 |"
    fp8.ms["torch._scaled_mm fast"] = flops / (1500.0 * 1e12) * 1e3
    head, _, row = speed.fp8_table([fp8]).splitlines()
    assert head.endswith("| tirx fp8 / _scaled_mm fast | tirx fp8 c2 / _scaled_mm fast |")
    assert row == (
        "| 4096 | 4096 | 4096 | 900.0 | 1000.0 | 1250.0 | 1500.0 | 0.72 | 0.80 | 0.60 | 0.67 |"
    )
    cell = speed.Cell("bfloat16", 4096)
    cell.out.update({"tirx": "float32", "hopper-out16": "bfloat16"})
    for name, tf in (("tirx", 500.0), ("hopper-out16", 600.0), ("cublas", 750.0)):
        cell.ms[name] = flops / (tf * 1e12) * 1e3
    lines = speed.same_output_table([cell]).splitlines()
    assert lines[0] == "| dtype | n | cuBLAS | hopper-out16 | hopper-out16 / cuBLAS |"
    assert lines[2] == "| bfloat16 | 4096 | 750.0 | 600.0 | 0.80 |"
    assert speed.same_output_table([speed.Cell("float16", 4096)]) == ""


def test_benchmark_compiles_on_a_machine_without_a_gpu(capsys):
    speed, _ = _speed()
    if speed.gpu_visible():
        pytest.skip("a GPU is visible: the script would time")
    argv = ["--sizes", "512", "--dtypes", "bfloat16", "--variants", "hopper-out16-c2"]
    assert speed.main([*argv, "--fp8", "also", "--fp8-sizes", "512x512x256"]) == 0
    out = capsys.readouterr().out
    assert "tirx fp8 c2 512x512x256: 168 registers" in out and "0 spill stores" in out
    assert "bfloat16 hopper-out16-c2 n=512: 168 registers" in out
    with pytest.raises(SystemExit):
        speed.main(["--fp8", "only", "--fp8-sizes", "512x512"])
