"""The fast GEMMs of tirx.examples: gemm_staged and gemm_pipelined.

On the CPU: the simulator's result equals the exact product bit for bit on small
integer-valued problems (every product and partial sum is an integer below 2**24, so float32
accumulation is exact in any order), for each configuration the benchmark and notebook 07 use;
and bad sizes are refused. On the GPU (marked ``gpu``): the compiled kernels agree with torch
on random data, agree with the simulator bit for bit on integer data, and the pipelined
kernel's SASS has the instructions the design asks for (LDGSTS, LDSM, HMMA).
"""

import functools

import numpy as np
import pytest

import tirx
from tirx.examples import gemm_pipelined as gp
from tirx.examples.gemm_staged import make_gemm_staged

ONE_SM = functools.partial(gp.make_gemm_pipelined, sms=1)

CONFIGS = {
    "staged-pad": (make_gemm_staged, gp.GemmConfig(bk=32, warps_n=4, stages=2, smem="pad")),
    "staged-plain": (make_gemm_staged, gp.GemmConfig(bk=32, warps_n=4, stages=2, smem="plain")),
    "default": (gp.make_gemm_pipelined, gp.DEFAULT),
    "128x128x64": (gp.make_gemm_pipelined, gp.GemmConfig()),
    "default-direct": (
        gp.make_gemm_pipelined,
        gp.GemmConfig(bm=256, warps_m=4, stage_output=False),
    ),
    "8w-2s-plain": (
        gp.make_gemm_pipelined,
        gp.GemmConfig(bk=32, warps_n=4, stages=2, smem="plain"),
    ),
    "8w-3s-pad": (gp.make_gemm_pipelined, gp.GemmConfig(bk=32, warps_n=4, smem="pad")),
    "4s-nodbuf": (gp.make_gemm_pipelined, gp.GemmConfig(stages=4, double_buffer=False)),
    "128x256x64": (gp.make_gemm_pipelined, gp.GemmConfig(bn=256, warps_n=4)),
    # persistent kernels sized for one multiprocessor: every block computes several tiles
    "persistent-2": (ONE_SM, gp.GemmConfig(persistent=2)),
    "persistent-256x128": (ONE_SM, gp.GemmConfig(bm=256, warps_m=4, persistent=1)),
    # the staged tile out through cp.async.bulk: through A's stages, and (persistent) through
    # a buffer of its own while the next tile's copies are in flight
    "bulk": (gp.make_gemm_pipelined, gp.GemmConfig(bulk_store=True)),
    "bulk-persistent-256x128": (
        ONE_SM,
        gp.GemmConfig(bm=256, warps_m=4, persistent=1, bulk_store=True),
    ),
}


@pytest.fixture(autouse=True)
def _patient_simulator(monkeypatch):
    """A 256-thread block of these kernels takes seconds in the simulator, more on a busy
    machine: a wider budget than the default 20 s, so a slow runner is not a failure."""
    monkeypatch.setenv("TIRX_SIM_BUDGET", "300")


def _integer_problem(M, N, K, dtype, seed=0):
    rng = np.random.default_rng(seed)
    np_dtype = np.float16
    a = rng.integers(-4, 5, (M, K)).astype(np.float32)
    b = rng.integers(-4, 5, (N, K)).astype(np.float32)
    return a, b, np_dtype


def _run_sim(factory, cfg, M, N, K, dtype):
    import torch

    a, b, _ = _integer_problem(M, N, K, dtype)
    tdtype = getattr(torch, dtype)
    ta, tb = torch.from_numpy(a).to(tdtype), torch.from_numpy(b).to(tdtype)
    out = torch.full((M, N), float("nan"), dtype=torch.float32)
    exe = tirx.compile(factory(M, N, K, dtype, cfg), target="sim")
    exe(ta, tb, out)
    return out.numpy(), a @ b.T


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_simulator_result_is_exact(name):
    factory, cfg = CONFIGS[name]
    # two block rows and columns (one block for the largest tile, to keep the simulation
    # short), five K tiles: every stage is reused and the raster runs
    blocks = 2 if cfg.bm * cfg.bn <= 128 * 128 else 1
    cols = 2 if cfg.persistent else blocks  # a persistent block goes on to a second tile
    got, want = _run_sim(factory, cfg, blocks * cfg.bm, cols * cfg.bn, 5 * cfg.bk, "float16")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sms, persistent", [(1, 2), (2, 2), (4, 1)])
def test_persistent_blocks_cover_a_ragged_raster(sms, persistent):
    """Six tiles in raster groups of two block rows (the last group has one row), on fewer
    blocks than tiles: blocks that take 2 or 3 tiles, and some that take fewer than others.
    Every tile is computed once (the output starts as NaN), its pipeline fed from the previous
    tile's last K steps."""
    cfg = gp.GemmConfig(bk=32, persistent=persistent, group_m=2)
    factory = functools.partial(gp.make_gemm_pipelined, sms=sms)
    assert factory(384, 256, 96, "float16", cfg).ir.launch.grid[0] == min(6, sms * persistent)
    got, want = _run_sim(factory, cfg, 3 * cfg.bm, 2 * cfg.bn, 3 * cfg.bk, "float16")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    "persistent, bulk",
    [(1, False), (0, False), (1, True)],
    ids=["from-registers", "staged", "bulk"],
)
def test_16_bit_output_is_the_f32_result_rounded_once(dtype, persistent, bulk):
    """Through shared memory (the default epilogue), from registers (a persistent kernel's)
    and through a persistent kernel's own staging buffer and cp.async.bulk."""
    import torch

    cfg = gp.GemmConfig(persistent=persistent, bulk_store=bulk)
    factory = functools.partial(gp.make_gemm_pipelined, sms=2)
    a, b, _ = _integer_problem(3 * cfg.bm, 2 * cfg.bn, 3 * cfg.bk, dtype)  # sums up to 3072
    tdtype = getattr(torch, dtype)
    ta, tb = (torch.from_numpy(x).to(tdtype) for x in (a, b))
    want = torch.from_numpy(a @ b.T).to(tdtype)  # exact in f32, then rounded to nearest even
    out = torch.zeros(want.shape, dtype=tdtype)
    kernel = factory(*want.shape, a.shape[1], dtype, cfg, out_dtype=dtype)
    tirx.compile(kernel, target="sim")(ta, tb, out)
    assert torch.equal(out, want)
    source = tirx.compile(kernel, target="cuda -arch=sm_90").source
    staged = "uint4" in source  # 16-byte stores
    assert staged == (not persistent and not bulk)
    assert ("cp.async.bulk.global" in source) == bulk
    with pytest.raises(ValueError, match="out_dtype must be float32 or"):
        gp.make_gemm_pipelined(256, 128, 128, dtype, out_dtype="float64")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_16_bit_output_equals_torch_rounding_of_f32(dtype):
    import torch

    M, N, K = 512, 384, 1024
    g = torch.Generator(device="cuda").manual_seed(3)
    tdtype = getattr(torch, dtype)
    a = torch.randn((M, K), device="cuda", generator=g).to(tdtype)
    b = torch.randn((N, K), device="cuda", generator=g).to(tdtype)
    f32 = torch.empty((M, N), device="cuda", dtype=torch.float32)
    tirx.compile(gp.make_gemm_pipelined(M, N, K, dtype), target="cuda")(a, b, f32)
    out = torch.empty((M, N), device="cuda", dtype=tdtype)
    kernel = gp.make_gemm_pipelined(M, N, K, dtype, out_dtype=dtype)
    tirx.compile(kernel, target="cuda")(a, b, out)
    assert torch.equal(out, f32.to(tdtype))


def test_default_configuration_follows_m():
    """256-row blocks where M allows them, the 128-row block of 4 warps where it does not."""
    big = gp.make_gemm_pipelined(512, 256, 128)
    small = gp.make_gemm_pipelined(384, 256, 128)
    assert big.ir.launch.grid[0] == 4 and big.ir.launch.block[0] == 256
    assert small.ir.launch.grid[0] == 6 and small.ir.launch.block[0] == 128
    with pytest.raises(ValueError, match="multiples of 128, 128, 64"):
        gp.make_gemm_pipelined(320, 256, 128)


def test_persistent_grid_is_one_block_per_tile_at_most():
    cfg = gp.GemmConfig(persistent=2)
    assert gp.make_gemm_pipelined(256, 256, 128, "float16", cfg, sms=8).ir.launch.grid[0] == 4
    assert gp.make_gemm_pipelined(1024, 1024, 128, "float16", cfg, sms=8).ir.launch.grid[0] == 16
    assert gp.make_gemm_pipelined(1024, 1024, 128, "float16", gp.DEFAULT).ir.launch.grid[0] == 32


def test_simulator_result_is_exact_bfloat16():
    factory, cfg = CONFIGS["staged-pad"]
    got, want = _run_sim(factory, cfg, cfg.bm, cfg.bn, 2 * cfg.bk, "bfloat16")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"M": 100, "N": 128, "K": 64}, "multiples of 128, 128, 64"),
        ({"M": 128, "N": 128, "K": 96}, "multiples of 128, 128, 64"),
        ({"N": 128, "cfg": gp.GemmConfig(bn=256)}, "multiples of 128, 256, 64"),
        ({"dtype": "float32"}, "float16 or bfloat16"),
        ({"cfg": gp.GemmConfig(bk=16)}, "bk must be 32 or 64"),
        ({"cfg": gp.GemmConfig(stages=1)}, "at least 2 stages"),
        ({"cfg": gp.GemmConfig(smem="banks")}, "'swizzle', 'pad' or 'plain'"),
        ({"cfg": gp.GemmConfig(bn=96, warps_n=4)}, "multiple of 16x16"),
        ({"cfg": gp.GemmConfig(persistent=-1)}, "blocks per multiprocessor"),
        ({"K": 64}, "fewer than the 2 K tiles of 64"),
        (
            {
                "M": 256,
                "K": 256,
                "cfg": gp.GemmConfig(
                    bm=256, warps_m=4, stages=4, smem="pad", persistent=1, bulk_store=True
                ),
            },
            "needs a staging buffer of at least 64 rows",
        ),
    ],
)
def test_bad_sizes_are_refused(kwargs, message):
    args = {"M": 128, "N": 128, "K": 128, "dtype": "float16", "cfg": gp.GemmConfig(), **kwargs}
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        gp.make_gemm_pipelined(args["M"], args["N"], args["K"], args["dtype"], args["cfg"])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"M": 0}, ValueError, "M must be a positive int, got 0"),
        ({"N": 0}, ValueError, "N must be a positive int, got 0"),
        ({"M": -256}, ValueError, "M must be a positive int, got -256"),
        ({"K": "128"}, TypeError, "K must be an int"),
        ({"M": None}, TypeError, "M must be an int"),
        ({"M": True}, TypeError, "M must be an int, not a bool"),
        ({"N": 128.0}, TypeError, "N must be an int"),
        ({"cfg": gp.GemmConfig(bm=0)}, ValueError, "bm must be a positive int"),
        ({"cfg": gp.GemmConfig(bn=0)}, ValueError, "bn must be a positive int"),
        ({"cfg": gp.GemmConfig(warps_m=0)}, ValueError, "warps_m must be a positive int"),
        ({"cfg": gp.GemmConfig(warps_n=0)}, ValueError, "warps_n must be a positive int"),
        ({"cfg": gp.GemmConfig(group_m=0)}, ValueError, "group_m must be a positive int"),
        ({"cfg": gp.GemmConfig(group_m=-1)}, ValueError, "group_m must be a positive int"),
        ({"cfg": gp.GemmConfig(group_m=2.5)}, TypeError, "group_m must be an int"),
        ({"cfg": gp.GemmConfig(bk=32.0)}, TypeError, "bk must be an int"),
        ({"cfg": gp.GemmConfig(stages=None)}, TypeError, "stages must be an int"),
        ({"cfg": gp.GemmConfig(persistent="1")}, TypeError, "persistent must be an int"),
        ({"cfg": {"bm": 128}}, TypeError, r"cfg must be a GemmConfig, e.g. GemmConfig\(bm=128\)"),
        ({"cfg": gp.GemmConfig(persistent=1), "sms": "4"}, TypeError, "sms must be an int"),
        ({"cfg": gp.GemmConfig(persistent=1), "sms": 0}, ValueError, "sms must be a positive"),
    ],
)
def test_arguments_that_are_not_ints_are_refused_by_name(kwargs, error, message):
    """Before any kernel is built, and not as a ZeroDivisionError, an AttributeError or a
    comparison's TypeError from inside the factory (or a division by zero at run time)."""
    args = {"M": 512, "N": 256, "K": 128, "dtype": "float16", "cfg": gp.GemmConfig(), **kwargs}
    with pytest.raises(error, match=message):
        gp.make_gemm_pipelined(**args)


def test_numpy_integers_are_taken_for_sizes_and_configuration():
    want = str(gp.make_gemm_pipelined(512, 256, 128, cfg=gp.GemmConfig(persistent=1), sms=2).ir)
    cfg = gp.GemmConfig(bm=np.int64(128), group_m=np.int32(8), persistent=np.int64(1))
    assert cfg == gp.GemmConfig(persistent=1) and type(cfg.bm) is int
    got = gp.make_gemm_pipelined(np.int64(512), np.int32(256), np.int64(128), cfg=cfg,
                                 sms=np.int64(2))  # fmt: skip
    assert str(got.ir) == want


def test_bulk_store_epilogue_shape():
    """One bulk copy per row of a round, issued by threads 0 .. rows-1 after a proxy fence;
    a persistent kernel's staging buffer is counted in its shared memory; the block waits for
    the copies' reads before it exits."""
    cfg = gp.GemmConfig(bm=256, warps_m=4, persistent=1, bulk_store=True)
    assert cfg.bulk_rows() == 128  # 3 stages of 48 KB and 128 rows of 544 bytes fit in 227 KB
    assert cfg.shared_bytes() == 3 * 48 * 1024 + 128 * 136 * 4
    assert gp.GemmConfig(bulk_store=True).shared_bytes() == 3 * 32 * 1024  # A's stages stage
    kernel = gp.make_gemm_pipelined(512, 256, 128, "float16", cfg, sms=1)
    source = tirx.compile(kernel, target="cuda -arch=sm_90").source
    fence = source.index("fence.proxy.async.shared::cta")
    assert fence < source.index("cp.async.bulk.global.shared::cta.bulk_group")
    assert "cp.async.bulk.wait_group.read" in source[source.rindex("cp.async.wait_all") :]
    with pytest.raises(tirx.errors.ContractError, match="sm_90"):
        tirx.compile(kernel, target="cuda -arch=sm_80")


def test_staged_kernel_refuses_swizzle():
    with pytest.raises(ValueError, match="pads its rows"):
        make_gemm_staged(128, 128, 64, "float16", gp.GemmConfig(bk=32, smem="swizzle"))


# ------------------------------------------------------------------------------ GPU


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_matches_torch(name, dtype):
    import torch

    factory, cfg = CONFIGS[name]
    M, N, K = 2 * cfg.bm, 3 * cfg.bn, 8 * cfg.bk
    g = torch.Generator(device="cuda").manual_seed(1)
    tdtype = getattr(torch, dtype)
    a = torch.randn((M, K), device="cuda", generator=g).to(tdtype)
    b = torch.randn((N, K), device="cuda", generator=g).to(tdtype)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    tirx.compile(factory(M, N, K, dtype, cfg), target="cuda")(a, b, out)
    ref = a.double() @ b.double().T
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 1e-5, err


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_gpu_equals_simulator_on_integers(name):
    import torch

    factory, cfg = CONFIGS[name]
    M, N, K = cfg.bm, 2 * cfg.bn, 3 * cfg.bk
    on_sim, _ = _run_sim(factory, cfg, M, N, K, "float16")
    a, b, _ = _integer_problem(M, N, K, "float16")
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    exe = tirx.compile(factory(M, N, K, "float16", cfg), target="cuda")
    exe(torch.from_numpy(a).half().cuda(), torch.from_numpy(b).half().cuda(), out)
    np.testing.assert_array_equal(out.cpu().numpy(), on_sim)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_pipelined_sass_has_async_copies_ldmatrix_and_hmma(dtype):
    """The machine code of the default kernel: cp.async (LDGSTS), ldmatrix (LDSM), mma.sync
    (HMMA), all fragments and accumulators in registers (no local memory)."""
    exe = tirx.compile(gp.make_gemm_pipelined(1024, 1024, 1024, dtype), target="cuda -arch=sm_90")
    sass = exe.sass
    if sass is None:
        pytest.skip("no disassembler installed (the sass extra)")
    for opcode in ("LDGSTS.E.BYPASS", "LDSM.16.M88.4", "HMMA.16816.F32", "DEPBAR", "BAR.SYNC"):
        assert opcode in sass, opcode
    assert "LDL" not in sass and "STL" not in sass
    assert exe.stats["spill_stores"] == 0


# ------------------------------------------------------------------- the benchmark's tables


def _benchmark_modules():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gemm_kernels
    import gemm_speed

    return gemm_speed, gemm_kernels


def test_benchmark_table_ratios_come_from_the_timings():
    speed, kernels = _benchmark_modules()
    cell = speed.Cell("float16", 4096)
    flops = 2 * 4096**3
    per_ms = {"tirx": 400.0, "cublas": 800.0}  # TFLOP/s wanted
    for cfg in kernels.TRITON_CONFIGS:
        per_ms[f"triton {cfg}"] = 500.0 if cfg == kernels.TRITON_NAMED else 450.0
    per_ms[f"triton {kernels.TRITON_CONFIGS[0]}"] = 600.0
    for name, tf in per_ms.items():
        cell.ms[name] = flops / (tf * 1e12) * 1e3
    row = speed.main_table([cell], {"float16": 640.0}).splitlines()[-1]
    cols = [c.strip() for c in row.strip("|").split("|")]
    assert cols[2] == "400.0" and cols[3] == f"600.0 ({kernels.TRITON_CONFIGS[0]})"
    assert cols[4] == "500.0" and cols[5] == "800.0" and cols[6] == "640.0"
    assert cols[7:] == ["0.67", "0.80", "0.50", "0.62"]


def test_benchmark_shuffles_the_runners_every_round(monkeypatch):
    """Every runner is timed once per round; over the rounds the runner before any given one
    changes (no runner always follows the same one, as tirx always followed cuBLAS in a fixed
    cycle); the order is the same in every run."""
    speed, _ = _benchmark_modules()
    seen = []
    monkeypatch.setattr(speed, "_batch_size", lambda fn, torch: 1)
    monkeypatch.setattr(speed, "_sample", lambda fn, calls, torch, warm: seen.append(fn()) or 1.0)
    names = [f"r{i}" for i in range(12)]
    runners = {name: (lambda name=name: name) for name in names}
    assert speed.time_runners(runners, 9, None) == dict.fromkeys(names, 1.0)
    rounds = [seen[i : i + 12] for i in range(0, len(seen), 12)]
    assert all(sorted(r) == sorted(names) for r in rounds) and len(rounds) == 9
    flat = [None] + seen  # the runner timed before each sample (None: the first)
    before_r0 = {flat[i] for i, name in enumerate(seen) if name == "r0"}
    assert len(before_r0) >= 5
    assert len({r[0] for r in rounds}) >= 5  # and the first of a round varies too
    again = []
    monkeypatch.setattr(speed, "_sample", lambda fn, calls, torch, warm: again.append(fn()) or 1.0)
    speed.time_runners(runners, 9, None)
    assert again == seen


def test_benchmark_warms_each_runner_right_before_its_sample(monkeypatch):
    """Each timed batch is queued right behind the same runner's untimed calls (WARM_MS of
    them, sized from the runner's own call time): nothing of another runner in between."""

    class Event:
        def __init__(self, **_):
            pass

        def record(self):
            calls.append("event")

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return 2.0

    import types

    Torch = types.SimpleNamespace(cuda=types.SimpleNamespace(Event=Event, synchronize=lambda: None))

    speed, _ = _benchmark_modules()
    calls = []
    monkeypatch.setattr(speed, "_batch_size", lambda fn, torch: 4)  # 4 calls = BATCH_MS
    runners = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    speed.time_runners(runners, 1, Torch, warm_ms=2 * speed.BATCH_MS)
    a, b, event = ["a"], ["b"], ["event"]
    assert calls == a * 8 + event + a * 4 + event + b * 8 + event + b * 4 + event


def test_benchmark_peak_table_divides_by_the_random_operand_peak():
    speed, _ = _benchmark_modules()
    cells = []
    for n, tf in ((4096, 400.0), (8192, 450.0)):
        cell = speed.Cell("float16", n)
        cell.ms["tirx"] = 2 * n**3 / (tf * 1e12) * 1e3
        cells.append(cell)
    lines = speed.peak_table(cells, {"float16": 640.0}, {"float16": 500.0}).splitlines()
    assert lines[0].count("tirx / random peak") == 2
    assert lines[2] == "| float16 | 640.0 | 500.0 | 0.80 | 0.90 |"


def test_benchmark_variant_names_are_unique_and_decode():
    _, kernels = _benchmark_modules()
    names = [kernels.variant_name(cfg) for cfg in kernels.PIPELINED]
    assert len(set(names)) == len(names)
    for cfg, name in zip(kernels.PIPELINED, names):
        tile, warps, stages, smem = name.split("-")[:4]
        assert tile == f"{cfg.bm}x{cfg.bn}x{cfg.bk}" and warps == f"{cfg.warps_m * cfg.warps_n}w"
        assert stages == f"{cfg.stages}s" and smem == cfg.smem
        assert name in kernels.TIRX_VARIANTS


def test_benchmark_finds_other_builds_sources(tmp_path):
    speed, _ = _benchmark_modules()
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "old" / "tirx-float16-4096.cu").write_text("// old tirx")
    (tmp_path / "old" / "tirx-bfloat16-4096.cu").write_text("// old bf16")
    (tmp_path / "old" / "no-such-variant-float16-4096.cu").write_text("// ignored")
    (tmp_path / "new" / "128x256x64-8w-3s-swizzle-float16-4096.cu").write_text("// new")
    found = speed.other_builds(str(tmp_path), 4096, "float16")
    assert found == [
        ("128x256x64-8w-3s-swizzle@new", "128x256x64-8w-3s-swizzle", "// new"),
        ("tirx@old", "tirx", "// old tirx"),
    ]
    assert speed.other_builds(None, 4096, "float16") == []
    # the variants table gets a column per other build, empty where a cell lacks it
    a, b = speed.Cell("float16", 4096), speed.Cell("float16", 8192)
    a.ms.update({"tirx": 1.0, "tirx@old": 2.0})
    b.ms.update({"tirx": 1.0})
    lines = speed.variant_table([a, b], []).splitlines()
    assert lines[0] == "| dtype | n | tirx | tirx@old |"
    assert lines[3].endswith("|  |")


def test_fixed_cost_fit_recovers_a_line():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from gemm_fixed_cost import fit

    fixed, per_k = fit([512, 1024, 2048, 4096], [0.02 + 1e-4 * k for k in (512, 1024, 2048, 4096)])
    assert abs(fixed - 0.02) < 1e-12 and abs(per_k - 1e-4) < 1e-15
