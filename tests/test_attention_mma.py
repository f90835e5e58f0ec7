"""The mma.sync attention kernel (tirx.examples.attention_mma).

On the CPU: block configurations other than the defaults against the float64 reference on the
simulator (the defaults run through tests/test_attention.py's grid); the fragment identity
between the S accumulator and P's A operand, element by element; copies of the kernel with one
synchronisation taken out (a stage refilled before every warp is done with it, a cp.async
wait removed, a barrier removed), which the simulator reports, and with a wrong view of P,
which the contract check reports at the user's line; the sm_80 and sm_90 builds (no spills,
the instructions of the inner loop). On the GPU (marked ``gpu``): the compiled kernel against
the simulator.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import tirx
from tests.attention_reference import check, inputs
from tirx.errors import ContractError, SimulationError
from tirx.examples import attention_mma as am
from tirx.examples.attention_mma import AttentionConfig, make_attention

EXAMPLE = Path(am.__file__)


def _run(kernel_module, shape, dtype=torch.float16, causal=False, cfg=None, scale=0.125):
    """Run ``kernel_module.make_attention`` on the simulator; (o, lse, q, k, v)."""
    q, k, v = inputs(*shape, dtype)
    name = str(dtype).removeprefix("torch.")
    fn = kernel_module.make_attention(*shape, name, causal, cfg)
    o = torch.full_like(q, float("nan"))
    lse = torch.full(q.shape[:3], float("nan"))
    tirx.compile(fn, target="sim")(q, k, v, o, lse, scale)
    return o, lse, q, k, v


@pytest.mark.parametrize(
    "shape, causal, cfg",
    [
        # (batch, heads, kv_heads, seq_q, seq_k, head_dim)
        ((1, 2, 1, 50, 90, 64), True, AttentionConfig(warps=2, m_tiles=1, block_n=32)),
        ((1, 1, 1, 40, 200, 64), False, AttentionConfig(warps=4, m_tiles=1, block_n=128)),
        ((1, 1, 1, 70, 45, 128), True, AttentionConfig(warps=1, m_tiles=2, block_n=32)),
    ],
    ids=["2w-32keys-causal", "128keys", "1w-2tiles-causal-d128"],
)
def test_other_configurations_match_float64(shape, causal, cfg):
    o, lse, q, k, v = _run(am, shape, causal=causal, cfg=cfg)
    check(o, lse, q, k, v, causal, scale=0.125)


def test_scale_is_a_run_time_argument():
    """One compiled kernel, two scales (a negative one too): both match."""
    shape = (1, 1, 1, 20, 30, 64)
    q, k, v = inputs(*shape, torch.float16)
    exe = tirx.compile(make_attention(*shape), target="sim")
    for scale in (0.3, -0.05):
        o, lse = torch.empty_like(q), torch.empty(q.shape[:3])
        exe(q, k, v, o, lse, scale)
        check(o, lse, q, k, v, False, scale=scale)


@pytest.mark.parametrize(
    "shape, causal, cfg",
    [
        ((1, 2, 1, 50, 90, 64), True, AttentionConfig(warps=2, block_n=32, approx=True)),
        ((1, 1, 1, 40, 200, 64), False, AttentionConfig(warps=4, block_n=128, approx=True)),
        ((1, 1, 1, 70, 45, 128), True, AttentionConfig(warps=1, m_tiles=2, approx=True)),
    ],
    ids=["2w-32keys-causal", "128keys", "1w-2tiles-causal-d128"],
)
def test_the_approx_softmax_matches_float64_for_any_scale(shape, causal, cfg):
    """max.f32 on unscaled scores, fma and ex2.approx for a positive scale; the exact form for
    a negative one or zero (the branch around the loop): all within the reference's bound."""
    q, k, v = inputs(*shape, torch.float16)
    exe = tirx.compile(make_attention(*shape, "float16", causal, cfg), target="sim")
    for scale in (0.125, -0.05, 0.0):
        o, lse = torch.full_like(q, float("nan")), torch.full(q.shape[:3], float("nan"))
        exe(q, k, v, o, lse, scale)
        check(o, lse, q, k, v, causal, scale=scale)


def _p_words(mt: int, nt: int):
    """The kernel's view of P as the A operand, built with tirx's view functions: the S
    accumulator's layout on P's 16-bit slots, viewed as uint32 words, regrouped by P_AS_A."""
    from tirx.ir.nodes import Scope
    from tirx.script.tensor import make_buffer, rearrange, view_dtype, view_shape

    _, p = make_buffer("p", (4 * mt * nt,), "float16", Scope.LOCAL)
    tiles = view_shape(p, (mt, nt, 16, 8), am.score_layout(mt, nt))
    return rearrange(view_dtype(tiles, "uint32"), am.P_AS_A, two=2)


def test_p_as_a_operand_holds_the_s_accumulators_elements():
    """The fragment identity: every (row, key) of a 32 x 64 tile of P is in the lane and slot
    where the S accumulator holds it."""
    mt, nt = 2, 8
    layout = am.score_layout(mt, nt)
    words = _p_words(mt, nt)
    assert words.shape == (mt, nt // 2, 16, 8)
    for mi, kv, row, w in itertools.product(range(mt), range(nt // 2), range(16), range(8)):
        at = words.layout.apply(mi, kv, row, w, shape=words.shape)
        for half in range(2):
            key = 16 * kv + 2 * w + half
            s_at = layout.apply(mi, key // 8, row, key % 8, shape=(mt, nt, 16, 8))
            assert s_at["laneid"] == at["laneid"]
            assert s_at["m"] == 2 * at["m"] + half  # the word's low half first


def identity_table() -> str:
    """docs/attention.md's table: for each lane, the (row, key) of each S accumulator slot
    of one 16 x 16 slice, the (row, keys) of each word of P's A view, and of each register
    of mma.sync's A operand by the PTX ISA's formula."""
    layout = am.score_layout(1, 2)
    words = _p_words(1, 2)
    held, in_words = {}, {}
    for row, key in itertools.product(range(16), range(16)):
        at = layout.apply(0, key // 8, row, key % 8, shape=(1, 2, 16, 8))
        held[at["laneid"], at["m"]] = f"{row},{key}"
    for row, w in itertools.product(range(16), range(8)):
        at = words.layout.apply(0, 0, row, w, shape=words.shape)
        in_words[at["laneid"], at["m"]] = f"{row},{2 * w}:{2 * w + 1}"
    lines = [
        "| lane | S accumulator, slots 0–7: (row, key) | P as A, words 0–3: (row, keys) "
        "| mma.sync A registers 0–3 (ISA) |",
        "|---|---|---|---|",
    ]
    for lane in range(32):
        g, t = lane // 4, lane % 4
        isa = [
            f"{g + 8 * (r % 2)},{2 * t + 8 * (r // 2)}:{2 * t + 8 * (r // 2) + 1}" for r in range(4)
        ]
        lines.append(
            f"| {lane} | {' '.join(held[lane, m] for m in range(8))} "
            f"| {' '.join(in_words[lane, m] for m in range(4))} | {' '.join(isa)} |"
        )
    return "\n".join(lines)


def test_the_docs_table_of_the_identity_is_current():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "attention.md").read_text()
    assert identity_table() in doc


def _twin(tmp_path, old: str, new: str, name: str):
    """The example's source with ``old`` (present exactly once) replaced by ``new``, imported
    as a module of its own (its kernel's lines are that file's)."""
    text = EXAMPLE.read_text()
    assert text.count(old) == 1, old
    path = tmp_path / f"{name}.py"
    path.write_text(text.replace(old, new))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


THREE_TILES = (1, 1, 1, 64, 192, 64)  # the pipeline refills both stages
WAIT = '            T.ptx["cp.async.wait_group"](0)\n'
BARRIER = "            T.cuda.cta_sync()\n"
REFILL = """            if j + 1 < n_kv:
                copy_rows(k_s[1 - st], K, b, hk, (j + 1) * BN, BN, KV_CH, seq_k, r0, c0)
                copy_rows(v_s[1 - st], V, b, hk, (j + 1) * BN, BN, KV_CH, seq_k, r0, c0)
                T.ptx["cp.async.commit_group"]()
"""


def test_the_twin_with_nothing_taken_out_runs_clean(tmp_path):
    twin = _twin(tmp_path, WAIT + BARRIER + REFILL, WAIT + BARRIER + REFILL, "attn_same")
    o, lse, q, k, v = _run(twin, THREE_TILES)
    check(o, lse, q, k, v, False, scale=0.125)


def test_simulator_reports_a_stage_refilled_before_every_warp_is_done_with_it(tmp_path):
    """The next tile's copies issued before the barrier: they overwrite the stage that warps
    read in the previous step, with no barrier between those reads and these writes."""
    twin = _twin(tmp_path, BARRIER + REFILL, REFILL + BARRIER, "attn_early")
    with pytest.raises(SimulationError, match=r"shared-memory race: .* writes 'k_s'"):
        _run(twin, THREE_TILES)


def test_simulator_reports_a_read_before_the_copies_land(tmp_path):
    twin = _twin(tmp_path, WAIT + BARRIER + REFILL, BARRIER + REFILL, "attn_nowait")
    with pytest.raises(SimulationError, match=r"(?s)reads 'k_s'.*cp.async.*not completed"):
        _run(twin, THREE_TILES)


def test_simulator_reports_a_missing_barrier(tmp_path):
    """Without the barrier a lane reads a chunk another lane's copy wrote."""
    twin = _twin(tmp_path, WAIT + BARRIER + REFILL, WAIT + REFILL, "attn_nosync")
    with pytest.raises(SimulationError, match=r"shared-memory race: .* reads 'k_s'"):
        _run(twin, THREE_TILES)


def test_a_wrong_view_of_p_is_a_contract_error_at_the_users_line(tmp_path):
    """The two 8-key tiles' words interleaved the wrong way round ``(w two)``: the element
    (row 0, key 1) would come from lane 0, where mma.sync's A wants lane 1."""
    twin = _twin(tmp_path, am.P_AS_A, am.P_AS_A.replace("(two w)", "(w two)"), "attn_wrong_p")
    with pytest.raises(ContractError, match="operand A: element") as info:
        tirx.compile(twin.make_attention(*THREE_TILES), target="sim")
    err = info.value
    assert err.span.file == str(tmp_path / "attn_wrong_p.py")
    assert "p_a[:, kv : kv + 1, :, :]" in str(err)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"head_dim": 96}, "head_dim must be one of"),
        ({"dtype": "float32"}, "float16 or bfloat16"),
        ({"kv_heads": 3}, "multiple of kv_heads"),
        ({"seq_k": 0}, "must be positive"),
        ({"cfg": AttentionConfig(warps=3)}, "cfg.warps"),
        ({"cfg": AttentionConfig(m_tiles=4)}, "cfg.m_tiles"),
        ({"cfg": AttentionConfig(block_n=48)}, "cfg.block_n"),
    ],
)
def test_bad_sizes_are_refused(kwargs, message):
    args = {"batch": 1, "heads": 4, "kv_heads": 2, "seq_q": 64, "seq_k": 64, "head_dim": 64}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        make_attention(**args)


# ------------------------------------------------------------------ NVRTC builds and SASS


def _nvrtc():
    try:
        from tirx.backend.cuda.nvrtc import nvrtc_version

        nvrtc_version()
    except Exception as e:  # no NVRTC library on this machine
        pytest.skip(f"NVRTC is not available: {e}")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_builds_without_spills_and_its_loop_is_hmma_ldsm_ex2(arch, head_dim):
    _nvrtc()
    kernel = make_attention(2, 8, 8, 1024, 1024, head_dim, "float16", causal=True)
    exe = tirx.compile(kernel, target=f"cuda -arch={arch}")
    st = exe.stats
    assert st["spill_stores"] == 0 and st["spill_loads"] == 0 and st["stack_bytes"] == 0
    assert st["registers"] <= 255
    sass = exe.sass
    if sass is None:
        pytest.skip("no disassembler (nvdisasm/cuobjdump) installed")
    for opcode in ("HMMA.16816.F32", "LDSM.16.M88.4", "LDSM.16.MT88.4", "MUFU.EX2", "LDGSTS"):
        assert opcode in sass, opcode
    assert "SHFL.BFLY" in sass
    assert "STL" not in sass and "LDL" not in sass


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_approx_build_takes_fmnmx_and_one_ex2_per_score(head_dim):
    """The approx form's maxima are FMNMX (the exact form's NaN-propagating T.max is compares
    and selects), and it adds no spill; the kernel holds both forms (the branch on the
    scale's sign), so it has twice the exact build's HMMAs."""
    _nvrtc()
    counts = {}
    for approx in (False, True):
        cfg = replace(am.default_config(head_dim), approx=approx)
        kernel = make_attention(2, 8, 8, 1024, 1024, head_dim, "float16", causal=True, cfg=cfg)
        exe = tirx.compile(kernel, target="cuda -arch=sm_80")
        st = exe.stats
        assert st["spill_stores"] == 0 and st["spill_loads"] == 0 and st["registers"] <= 255
        if exe.sass is None:
            pytest.skip("no disassembler (nvdisasm/cuobjdump) installed")
        counts[approx] = {op: len(re.findall(rf"\b{re.escape(op)}\b", exe.sass))
                          for op in ("FMNMX", "HMMA.16816.F32", "MUFU.EX2")}  # fmt: skip
    assert counts[False]["FMNMX"] == 0 and counts[True]["FMNMX"] > 0
    assert counts[True]["HMMA.16816.F32"] == 2 * counts[False]["HMMA.16816.F32"]
    assert counts[True]["MUFU.EX2"] == 2 * counts[False]["MUFU.EX2"]


# ------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("approx", [False, True], ids=["exact", "approx"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_gpu_equals_the_simulator(head_dim, approx):
    """The same kernel on both targets: equal to within one rounding of the output (the
    GPU's ex2 and the simulator's exp2 may differ in the last float32 bit; the approx form's
    ex2.approx by the ISA's bound, which the simulator models)."""
    shape = (1, 2, 1, 100, 130, head_dim)
    cfg = replace(am.default_config(head_dim), approx=approx)
    o_sim, lse_sim, q, k, v = _run(am, shape, causal=True, cfg=cfg)
    exe = tirx.compile(make_attention(*shape, "float16", True, cfg), target="cuda")
    o = torch.empty_like(q, device="cuda")
    lse = torch.empty(q.shape[:3], device="cuda")
    exe(q.cuda(), k.cuda(), v.cuda(), o, lse, 0.125)
    eps = torch.finfo(torch.float16).eps
    assert ((o.cpu().float() - o_sim.float()).abs() <= eps * o_sim.float().abs() + 1e-3).all()
    torch.testing.assert_close(lse.cpu(), lse_sim, rtol=1e-5, atol=1e-5)
