"""The wgmma attention kernel (tirx.examples.attention_wgmma, FlashAttention-3's structure).

On the CPU: the kernel on the simulator against the float64 reference (head dims 64 and 128,
causal and not, float16 and bfloat16, ragged lengths, grouped-query heads, a ring refilled
more than once) with lse; ``flash_attention``'s dispatch (wgmma on sm_90 only, when asked for; mma.sync on
other GPUs and on the CPU unless named); the fragment identity, whose wrong view the contract
check reports at the user's line; copies of the kernel with one synchronisation taken out (the
producer's empty-barrier wait, a full-barrier parity flipped, the ``wgmma.wait_group`` before
S is read, a consumer releasing its stage before its multiplies are done; with ping-pong the
first turn never given; with the overlap O rescaled too early and too weak a wait), each
reported by the simulator at the line concerned; the sm_90a builds with and without the
options (no spills, HGMMA with a register A, UTMALDG, MUFU.EX2, setmaxnreg). On the GPU (marked ``gpu``): against
``torch.nn.functional.scaled_dot_product_attention`` and the simulator.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import torch

import tirx
from tests.attention_reference import check, inputs
from tirx.errors import ContractError, SimulationError
from tirx.examples import attention as attn
from tirx.examples import attention_wgmma as aw
from tirx.examples.attention_wgmma import WgmmaAttentionConfig, make_attention

EXAMPLE = Path(aw.__file__)
F16, BF16 = torch.float16, torch.bfloat16


def _run(module, shape, dtype=F16, causal=False, cfg=None, scale=0.125, sms=None):
    """Run ``module.make_attention`` on the simulator (a persistent kernel on ``sms``
    multiprocessors); (o, lse, q, k, v)."""
    q, k, v = inputs(*shape, dtype)
    name = str(dtype).removeprefix("torch.")
    fn = module.make_attention(*shape, name, causal, cfg)
    o = torch.full_like(q, float("nan"))
    lse = torch.full(q.shape[:3], float("nan"))
    tirx.compile(fn, target="sim", sms=sms)(q, k, v, o, lse, scale)
    return o, lse, q, k, v


# (batch, heads, kv_heads, seq_q, seq_k, head_dim), dtype, causal, cfg
CASES = [
    ((1, 1, 1, 128, 128, 64), F16, False, None),
    ((1, 1, 1, 128, 256, 64), BF16, True, None),
    ((1, 1, 1, 128, 128, 128), BF16, False, None),
    ((1, 1, 1, 256, 256, 128), F16, True, None),  # two blocks, the diagonal in each
    ((1, 2, 1, 100, 150, 64), F16, True, WgmmaAttentionConfig(block_n=64)),  # ragged, GQA
    ((1, 1, 1, 70, 45, 128), BF16, True, None),  # seq_q > seq_k, both ragged
    ((1, 1, 1, 128, 448, 64), F16, False, WgmmaAttentionConfig(block_n=64, stages=3)),
    # the consumers taking turns (ping-pong)
    ((1, 1, 1, 128, 384, 64), F16, False, WgmmaAttentionConfig(pingpong=True)),
    ((1, 2, 1, 200, 330, 128), BF16, True, WgmmaAttentionConfig(pingpong=True)),
    ((1, 1, 1, 256, 448, 64), BF16, True, WgmmaAttentionConfig(64, 3, pingpong=True)),
    # each consumer's Q K_jᵀ issued with its P_(j-1) V_(j-1) (intra-warpgroup overlap)
    ((1, 1, 1, 128, 384, 64), F16, False, WgmmaAttentionConfig(overlap=True)),
    ((1, 1, 1, 128, 128, 128), BF16, False, WgmmaAttentionConfig(overlap=True)),  # one tile
    ((1, 2, 1, 200, 330, 128), F16, True, WgmmaAttentionConfig(overlap=True)),
    ((1, 1, 1, 256, 448, 64), BF16, True, WgmmaAttentionConfig(64, 3, True, True)),
    # the softmax as FlashAttention-3 writes it (max.f32, fma, ex2.approx.ftz)
    ((1, 2, 1, 200, 330, 128), BF16, True, WgmmaAttentionConfig(approx=True)),
    ((1, 1, 1, 128, 384, 64), F16, False, WgmmaAttentionConfig(approx=True)),
    ((1, 1, 1, 256, 448, 64), F16, True, WgmmaAttentionConfig(64, 3, True, True, True)),
    # three consumer warpgroups (192 query rows per block), head dim 64
    ((1, 1, 1, 192, 256, 64), F16, False, WgmmaAttentionConfig(consumers=3)),
    ((1, 2, 1, 200, 330, 64), BF16, True, WgmmaAttentionConfig(approx=True, consumers=3)),
    ((1, 1, 1, 384, 448, 64), F16, True, WgmmaAttentionConfig(64, 3, False, True, True, 3)),
    # key tiles of 176 and 192 keys (wgmma m64n176k16, m64n192k16; eleven and twelve k16 slices)
    ((1, 2, 1, 200, 500, 128), BF16, True, WgmmaAttentionConfig(176, approx=True)),
    ((1, 1, 1, 128, 400, 128), F16, False, WgmmaAttentionConfig(176, pingpong=True)),
    ((1, 1, 1, 128, 600, 128), F16, False, WgmmaAttentionConfig(192, approx=True)),
    ((1, 1, 1, 192, 400, 64), BF16, True, WgmmaAttentionConfig(176, approx=True, consumers=3)),
]


def _id(case):
    (b, h, hk, sq, sk, d), dtype, causal, cfg = case
    n = ""
    if cfg:
        n = f"-n{cfg.block_n}s{cfg.stages}"
        n += ("-pingpong" if cfg.pingpong else "") + ("-overlap" if cfg.overlap else "")
        n += "-approx" if cfg.approx else ""
        n += "-c3" if cfg.consumers == 3 else ""
        n += "-persistent" if cfg.persistent else ""
    return f"{b}x{h}/{hk}-{sq}x{sk}-d{d}-{str(dtype)[6:]}{'-causal' if causal else ''}{n}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_simulator_matches_float64(case):
    shape, dtype, causal, cfg = case
    o, lse, q, k, v = _run(aw, shape, dtype, causal, cfg)
    check(o, lse, q, k, v, causal, scale=0.125)


def _persistent(**kw):
    return WgmmaAttentionConfig(persistent=True, **kw)


# a persistent grid of ``sms`` blocks, each walking over two or more query tiles: the ring's
# stages and phases, Q's hand-over and (causal) each tile's own key count carry from tile to tile
PERSISTENT_CASES = [
    ((2, 2, 2, 128, 384, 64), F16, False, _persistent(), 3),
    ((1, 2, 1, 200, 330, 128), BF16, True, _persistent(approx=True), 2),  # GQA, ragged
    ((1, 3, 1, 256, 448, 64), F16, True, _persistent(block_n=64, stages=3), 2),
    ((2, 1, 1, 128, 384, 64), BF16, False, _persistent(pingpong=True), 1),  # one block
    ((1, 2, 1, 200, 330, 128), F16, True, _persistent(overlap=True, approx=True), 3),
    ((1, 2, 2, 256, 330, 64), BF16, True, _persistent(pingpong=True, overlap=True), 2),
    ((1, 2, 1, 384, 448, 64), F16, True, _persistent(approx=True, consumers=3), 2),
    # 17 heads: the causal order's groups of 16 heads and the group of one left over
    ((1, 17, 1, 256, 256, 64), F16, True, _persistent(), 5),
]


@pytest.mark.parametrize(
    "case", PERSISTENT_CASES, ids=[f"{_id(c[:4])}-sms{c[4]}" for c in PERSISTENT_CASES]
)
def test_persistent_simulator_matches_float64(case):
    shape, dtype, causal, cfg, sms = case
    o, lse, q, k, v = _run(aw, shape, dtype, causal, cfg, sms=sms)
    check(o, lse, q, k, v, causal, scale=0.125)


Q_FREE_WAIT = """                    if i > 0:  # every consumer is done with the last tile's Q
                        T.cuda.mbarrier_wait(q_free[0], (i - 1) % 2)
"""


def test_simulator_reports_q_reloaded_without_the_q_free_wait(tmp_path):
    """A persistent block's producer loads the next tile's Q without waiting for the
    consumers to be done with the last one's: the copy lands on Q while their Q Kᵀ reads it."""
    twin = _twin(tmp_path, Q_FREE_WAIT, "", "attn_wg_noqfree")
    with pytest.raises(SimulationError, match=r"writes .q_s.\[.* tensor core") as info:
        _run(twin, (2, 1, 1, 128, 384, 64), cfg=twin.WgmmaAttentionConfig(persistent=True), sms=1)
    assert info.value.span.line == _line(twin, "T.cuda.tile.apply(T.ptx[tma], q_s[")


def test_simulator_reports_q_freed_before_the_last_scores_land(tmp_path):
    """The consumers free Q as soon as it has landed, not after their last ``wait_group``:
    the next tile's Q lands while the tensor cores still read this one's."""
    wait = "            T.cuda.mbarrier_wait(q_full[0], i % 2)\n"
    free = """            if PERSISTENT:  # this thread's multiplies are done with Q: the next tile's may land
                T.ptx[ARRIVE](q_free[0])
"""
    early = wait + "            T.ptx[ARRIVE](q_free[0])\n"
    twin = _twin(tmp_path, wait, early, "attn_wg_early_qfree", (free, ""))
    with pytest.raises(SimulationError, match=r"writes .q_s.\[.* tensor core") as info:
        _run(twin, (2, 1, 1, 128, 384, 64), cfg=twin.WgmmaAttentionConfig(persistent=True), sms=1)
    assert info.value.span.line == _line(twin, "T.cuda.tile.apply(T.ptx[tma], q_s[")


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_default_grid_is_persistent_for_full_attention_only(head_dim):
    """Full attention walks its tiles on one block per multiprocessor; causal attention, whose
    tiles' lengths differ most, keeps a block per tile (docs/attention.md, "Speed")."""
    assert aw.default_config(head_dim).persistent
    assert not aw.default_config(head_dim, causal=True).persistent
    shape = (2, 4, 4, 1024, 1024, head_dim)
    full = make_attention(*shape, "bfloat16", False).ir.launch
    causal = make_attention(*shape, "bfloat16", True).ir.launch
    assert full.sms_grid and not causal.sms_grid
    assert causal.grid == (-(-1024 // aw.default_config(head_dim).block_m), 8, 1)


@pytest.mark.parametrize("scale", [-0.125, 0.0])
@pytest.mark.parametrize("approx", [True, False])
def test_any_scale_is_right(approx, scale):
    """The approx softmax folds a positive scale into its fma; for any other scale the
    consumers run the exact form (one branch on the run-time scale around their code), so both
    configurations are right for every scale."""
    shape = (1, 1, 1, 128, 200, 64)
    cfg = WgmmaAttentionConfig(approx=approx)
    o, lse, q, k, v = _run(aw, shape, BF16, True, cfg, scale=scale)
    check(o, lse, q, k, v, True, scale=scale)


def test_flash_attention_runs_it_on_the_cpu_when_named():
    q, k, v = inputs(1, 2, 1, 90, 100, 64, BF16)
    exe = attn.attention_executable(q, k, v, causal=True, kernel="wgmma")
    assert exe.target.kind == "sim" and exe is not attn.attention_executable(q, k, v, True)
    o, lse = attn.flash_attention(q, k, v, causal=True, return_lse=True, kernel="wgmma")
    check(o, lse, q, k, v, True)


@pytest.mark.parametrize(
    "arch, default", [(80, "mma_sync"), (89, "mma_sync"), (90, "wgmma"), (100, "mma_sync")]
)
def test_dispatch_runs_wgmma_on_sm_90_only(monkeypatch, arch, default):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: divmod(arch, 10))
    cuda = torch.device("cuda", 0)
    assert attn._dispatch(None, cuda) == (default, "cuda")
    assert attn._dispatch("mma_sync", cuda) == ("mma_sync", "cuda")
    if arch == 90:
        assert attn._dispatch("wgmma", cuda) == ("wgmma", "cuda")
    else:
        with pytest.raises(ValueError, match=r"kernel='wgmma' runs on sm_90 to sm_90; "):
            attn._dispatch("wgmma", cuda)
    assert attn._dispatch(None, torch.device("cpu")) == ("mma_sync", "sim")
    assert attn._dispatch("wgmma", torch.device("cpu")) == ("wgmma", "sim")


def _twin(tmp_path, old: str, new: str, name: str, *more: tuple[str, str]):
    """The example's source with ``old`` (present exactly once) replaced by ``new`` (and each
    further ``(old, new)`` pair), imported as a module of its own (its kernel's lines are that
    file's)."""
    text = EXAMPLE.read_text()
    for was, now in ((old, new), *more):
        assert text.count(was) == 1, was
        text = text.replace(was, now)
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _line(module, text: str) -> int:
    """The line of ``module``'s file that holds ``text`` (once)."""
    lines = Path(module.__file__).read_text().splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if text in line]
    assert len(hits) == 1, (text, hits)
    return hits[0]


THREE_TILES = (1, 1, 1, 128, 384, 64)  # 128-key tiles: stage 0 is refilled once
EMPTY_WAIT = """                        if n >= STAGES:  # every consumer is done with the stage's last tile
                            T.cuda.mbarrier_wait(empty[st], (n // STAGES - 1) % 2)
"""
FULL_WAIT = "T.cuda.mbarrier_wait(full[n % STAGES], (n // STAGES) % 2)"
S_WAIT = """                    T.ptx["wgmma.wait_group.sync.aligned"](0)
                    scale_scores(s, cs, ax)"""
RELEASE = """                    T.ptx["wgmma.wait_group.sync.aligned"](0)
                    T.ptx[ARRIVE](empty[st])"""
V_COPY = "T.cuda.tile.apply(T.ptx[tma], v_s[st,"
ARM = "T.ptx[EXPECT](full[st], STAGE_BYTES)"


def test_the_twin_with_nothing_taken_out_runs_clean(tmp_path):
    twin = _twin(tmp_path, EMPTY_WAIT, EMPTY_WAIT, "attn_wg_same")
    o, lse, q, k, v = _run(twin, THREE_TILES)
    check(o, lse, q, k, v, False, scale=0.125)


def test_simulator_reports_a_refill_without_the_empty_barrier_wait(tmp_path):
    """The producer refills stage 0 with tile 2 without waiting for the consumers: it arms the
    stage's full barrier before it observed the phase the stage's last copy completes (and
    its copy would land on bytes no consumer has let go of)."""
    twin = _twin(tmp_path, EMPTY_WAIT, "", "attn_wg_noempty")
    with pytest.raises(
        SimulationError, match=r"mbarrier 'full'\[.* has not observed phase 0"
    ) as info:
        _run(twin, THREE_TILES)
    assert "the tensor copy" in str(info.value) and "expect-tx would count" in str(info.value)
    assert info.value.span.file == str(tmp_path / "attn_wg_noempty.py")
    assert info.value.span.line == _line(twin, ARM)


def test_simulator_reports_a_full_barrier_parity_flipped(tmp_path):
    """Consumers waiting for the phase of the wrong parity wait for a phase no copy completes:
    the simulator stops with the deadlock, naming the full barrier's wait."""
    wrong = "T.cuda.mbarrier_wait(full[n % STAGES], (n // STAGES + 1) % 2)"
    twin = _twin(tmp_path, FULL_WAIT, wrong, "attn_wg_parity")
    with pytest.raises(SimulationError, match="deadlock") as info:
        _run(twin, THREE_TILES)
    line = _line(twin, wrong)
    assert re.search(rf"mbarrier 'full'\[.* at line {line}: thread \d+ .* waits", str(info.value))


@pytest.mark.parametrize(
    "approx, first_read",
    [(True, 'T.ptx["max.f32"](mx[1], s['), (False, "s[i] = s[i] * cs")],
    ids=["approx", "exact"],
)
def test_simulator_reports_s_read_before_its_wgmma_wait_group(tmp_path, approx, first_read):
    twin = _twin(tmp_path, S_WAIT, "                    scale_scores(s, cs, ax)", "attn_wg_nowait")
    with pytest.raises(SimulationError, match=r"reads 's' slot .* in flight") as info:
        _run(twin, THREE_TILES, cfg=twin.WgmmaAttentionConfig(approx=approx))
    assert info.value.span.line == _line(twin, first_read)  # the scores' first read


def test_simulator_reports_a_stage_released_before_its_multiplies_are_done(tmp_path):
    """The consumers arrive on the empty barrier before their ``wgmma.wait_group``: the
    producer's refill of V may land while the tensor cores still read the stage."""
    early = """                    T.ptx[ARRIVE](empty[st])
                    T.ptx["wgmma.wait_group.sync.aligned"](0)"""
    twin = _twin(tmp_path, RELEASE, early, "attn_wg_early")
    with pytest.raises(SimulationError, match=r"writes 'v_s'\[.* tensor core") as info:
        _run(twin, THREE_TILES)
    assert info.value.span.line == _line(twin, V_COPY)


def test_simulator_reports_the_first_turn_never_given(tmp_path):
    """Ping-pong without warpgroup 2's first arrive on warpgroup 1's turn: each waits for the
    other, a deadlock naming the turn barrier's wait."""
    first = "T.ptx[ARRIVE](turn[0])"
    twin = _twin(tmp_path, first, "pass", "attn_wg_noturn")
    with pytest.raises(SimulationError, match="deadlock") as info:
        _run(twin, THREE_TILES, cfg=twin.WgmmaAttentionConfig(pingpong=True))
    line = _line(twin, "T.cuda.mbarrier_wait(turn[cw], n % 2)")
    assert re.search(rf"mbarrier 'turn'\[.* at line {line}: thread \d+ .* waits", str(info.value))


OVERLAP_TAIL = """                    T.ptx["wgmma.wait_group.sync.aligned"](0)  # P_(j-1) V_(j-1) is done too
                    T.ptx[ARRIVE](empty[sp])  # with tile j - 1's stage
                    rescale_and_round(o, p, s, alpha)"""


def test_simulator_reports_o_rescaled_while_the_overlapped_p_v_runs(tmp_path):
    """With the overlap, O's rescale moved before the ``wait_group 0`` that covers the
    previous tile's ``P V``: O is read while that wgmma accumulates into it."""
    early = """                    rescale_and_round(o, p, s, alpha)
                    T.ptx["wgmma.wait_group.sync.aligned"](0)  # P_(j-1) V_(j-1) is done too
                    T.ptx[ARRIVE](empty[sp])  # with tile j - 1's stage"""
    twin = _twin(tmp_path, OVERLAP_TAIL, early, "attn_wg_ov_early")
    with pytest.raises(SimulationError, match=r"reads 'o' slot .* in flight") as info:
        _run(twin, THREE_TILES, cfg=twin.WgmmaAttentionConfig(overlap=True))
    assert info.value.span.line == _line(twin, "o[4 * dn + 2 * hf + e] = o[4 * dn")


def test_simulator_reports_overlapped_s_read_under_too_weak_a_wait(tmp_path):
    """``wait_group 2`` instead of 1 with Q Kᵀ and P V both pending covers neither group:
    the scores are read while their wgmma is in flight."""
    right = 'T.ptx["wgmma.wait_group.sync.aligned"](1)'
    twin = _twin(tmp_path, right, right.replace("(1)", "(2)"), "attn_wg_ov_wait")
    with pytest.raises(SimulationError, match=r"reads 's' slot .* in flight") as info:
        _run(twin, THREE_TILES, cfg=twin.WgmmaAttentionConfig(overlap=True))
    assert info.value.span.line == _line(twin, "s[i] = s[i] * cs")


def test_a_wrong_view_of_p_is_a_contract_error_at_the_users_line(tmp_path):
    """The two 8-key halves of each k16 slice of P's words interleaved ``(w two)``: word 1
    of row 0 (keys 2 and 3), which the rs form's A reads from thread 1, would be in thread 0."""
    right = '.rearrange("r (j w) -> j r w", w=8)'
    wrong = '.rearrange("r (j two w) -> j r (w two)", two=2, w=4)'
    twin = _twin(tmp_path, right, wrong, "attn_wg_wrong_p")
    with pytest.raises(
        ContractError, match=r"operand A: element \(0, 1\) belongs to thread 1 "
    ) as info:
        tirx.compile(twin.make_attention(*THREE_TILES), target="sim")
    assert info.value.span.file == str(tmp_path / "attn_wg_wrong_p.py")
    assert "p_a[kv]" in str(info.value)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"head_dim": 96}, "head_dim must be one of"),
        ({"dtype": "float32"}, "float16 or bfloat16"),
        ({"kv_heads": 3}, "multiple of kv_heads"),
        ({"seq_q": 0}, "must be positive"),
        ({"cfg": WgmmaAttentionConfig(block_n=96)}, "cfg.block_n"),
        ({"cfg": WgmmaAttentionConfig(stages=1)}, "cfg.stages"),
        ({"cfg": WgmmaAttentionConfig(consumers=4)}, "cfg.consumers"),
        ({"cfg": WgmmaAttentionConfig(pingpong=True, consumers=3)}, "two consumer warpgroups"),
        ({"cfg": WgmmaAttentionConfig(consumers=3), "head_dim": 128}, "head dim 64 only"),
        ({"cfg": WgmmaAttentionConfig(192, consumers=3)}, "at most 176 keys"),
        # refused here, not by the compile at the kernel's alloc_shared line
        ({"cfg": WgmmaAttentionConfig(192, stages=3), "head_dim": 128},
         "take 327680 bytes of shared memory, more than the 232448 of an sm_90 block"),
    ],
)  # fmt: skip
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


def _sm_90a_build(head_dim, dtype, cfg):
    """The 1k x 1k causal kernel of ``cfg`` built for sm_90a, checked to spill nothing and to
    fit the launch's registers."""
    _nvrtc()
    kernel = make_attention(2, 8, 8, 1024, 1024, head_dim, dtype, causal=True, cfg=cfg)
    exe = tirx.compile(kernel, target="cuda -arch=sm_90a")
    assert exe.nvrtc.log == "", exe.nvrtc.log
    st = exe.stats
    assert st["spill_stores"] == 0 and st["spill_loads"] == 0 and st["stack_bytes"] == 0
    # the launch's share before setmaxnreg: 65536 / 384 = 168 (three consumers: / 512, 128)
    assert st["registers"] <= 65536 // cfg.threads
    return exe


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize(
    "pingpong, overlap", [(False, False), (True, False), (False, True), (True, True)],
    ids=["", "pingpong", "overlap", "both"],
)  # fmt: skip
def test_sm_90a_build_has_no_spills_and_the_fa3_instructions(head_dim, dtype, pingpong, overlap):
    cfg = WgmmaAttentionConfig(pingpong=pingpong, overlap=overlap)
    exe = _sm_90a_build(head_dim, dtype, cfg)
    # the mbarriers: q_full, q_free, full and empty per stage, the two turns; 16-byte aligned
    assert exe.launch_dims[2] == cfg.shared_bytes(head_dim) + 80
    sass = exe.sass
    if sass is None:
        pytest.skip("no disassembler (nvdisasm/cuobjdump) installed")
    bf = r"\.BF16" if dtype == "bfloat16" else ""
    # S = Q Kᵀ from two descriptors; O += P V with P in registers and V MN-major (.tnspB)
    assert re.search(rf"HGMMA\.64x128x16\.F32{bf} R\d+, gdesc\[UR\d+\], R\d+", sass)
    assert re.search(
        rf"HGMMA\.64x{head_dim}x16\.F32{bf} R\d+, R\d+, gdesc\[UR\d+\]\.tnspB, R\d+", sass
    )
    for opcode in ("UTMALDG.4D", "MUFU.EX2", "SHFL.BFLY", "SYNCS.ARRIVE", "USETMAXREG"):
        assert opcode in sass, opcode
    assert "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xf0" in sass  # 240 for the consumers
    assert "USETMAXREG.DEALLOC.CTAPOOL 0x18" in sass  # 24 for the producer
    assert "STL" not in sass and "LDL" not in sass
    if overlap:  # Q K_jᵀ and P_(j-1) V_(j-1) in flight together, then wait_group 1
        assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass


@pytest.mark.parametrize(
    "cfg",
    [
        WgmmaAttentionConfig(176, approx=True),
        WgmmaAttentionConfig(176, approx=True, pingpong=True),
        WgmmaAttentionConfig(176, approx=True, overlap=True),
        WgmmaAttentionConfig(192, approx=True),
    ],
    ids=["176", "176-pingpong", "176-overlap", "192"],
)
def test_wide_key_tiles_fit_the_consumers_registers_at_head_dim_128(cfg):
    """S of 176 or 192 keys (88 or 96 registers), P and O of head dim 128: the consumer's code
    stays below R240, with no local memory; S = Q Kᵀ is one m64nNk16 per k16 slice."""
    exe = _sm_90a_build(128, "bfloat16", cfg)
    assert exe.launch_dims[2] == cfg.shared_bytes(128) + 80
    sass = exe.sass
    if sass is None:
        pytest.skip("no disassembler (nvdisasm/cuobjdump) installed")
    assert re.search(rf"HGMMA\.64x{cfg.block_n}x16\.F32\.BF16 R\d+, gdesc", sass)
    assert max(int(r) for r in re.findall(r"\bR(\d+)\b", sass)) < 240
    assert "STL" not in sass and "LDL" not in sass


@pytest.mark.parametrize(
    "head_dim, cfg",
    [
        (128, _persistent(approx=True)),
        (128, _persistent(approx=True, overlap=True, pingpong=True)),
        (128, _persistent(block_n=176, approx=True)),
        (64, _persistent(approx=True, consumers=3)),
    ],
    ids=["d128", "d128-both", "d128-n176", "d64-c3"],
)
def test_persistent_builds_fit_the_consumers_registers(head_dim, cfg):
    """The tile loop around the consumers' code costs them no local memory."""
    exe = _sm_90a_build(head_dim, "bfloat16", cfg)
    sass = exe.sass
    if sass is None:
        pytest.skip("no disassembler (nvdisasm/cuobjdump) installed")
    assert max(int(r) for r in re.findall(r"\bR(\d+)\b", sass)) < cfg.consumer_registers
    assert "STL" not in sass and "LDL" not in sass


@pytest.mark.parametrize("overlap", [False, True])
def test_three_consumers_fit_their_160_registers(overlap):
    """512 threads: 128 registers each at launch; setmaxnreg gives the producer's back to the
    three consumers (24 + 3 x 160 per thread of a warpgroup), whose code at head dim 64 stays
    below R160, with no local memory."""
    cfg = WgmmaAttentionConfig(approx=True, overlap=overlap, consumers=3)
    exe = _sm_90a_build(64, "float16", cfg)
    assert exe.launch_dims[1] == (512, 1, 1) and exe.launch_dims[0][0] == -(-1024 // 192)
    assert exe.launch_dims[2] == cfg.shared_bytes(64) + 80
    sass = exe.sass
    if sass is None:
        pytest.skip("no disassembler (nvdisasm/cuobjdump) installed")
    assert "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xa0" in sass  # 160 for the consumers
    assert "USETMAXREG.DEALLOC.CTAPOOL 0x18" in sass
    assert max(int(r) for r in re.findall(r"\bR(\d+)\b", sass)) < 160
    assert "STL" not in sass and "LDL" not in sass


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_approx_softmax_has_fmnmx_and_no_spills(head_dim):
    """max.f32 compiles to FMNMX (the exact form's NaN-propagating T.max to compares and
    selects); the approx build holds both forms (the exact one for a scale that is not
    positive) and still fits the consumers' registers without spills."""
    fmnmx = {}
    for approx in (False, True):
        sass = _sm_90a_build(head_dim, "bfloat16", WgmmaAttentionConfig(approx=approx)).sass
        if sass is None:
            pytest.skip("no disassembler (nvdisasm/cuobjdump) installed")
        fmnmx[approx] = len(re.findall(r"\bFMNMX\b", sass))
    assert fmnmx[False] == 0 and fmnmx[True] >= 2 * (128 // 8), fmnmx


# ------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "shape",
    [(2, 8, 8, 1024, 1024, 64), (1, 8, 2, 1000, 777, 128), (3, 4, 4, 77, 300, 64)],
    ids=["1k-d64", "ragged-gqa-d128", "short"],
)
def test_gpu_matches_sdpa_and_float64(shape, dtype, causal):
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the wgmma kernel runs on sm_90 only")
    q, k, v = inputs(*shape, dtype, device="cuda", seed=3)
    o, lse = attn.flash_attention(q, k, v, causal=causal, return_lse=True, kernel="wgmma")
    check(o, lse, q, k, v, causal)
    want = sdpa(q, k, v, is_causal=causal, enable_gqa=True)
    err = ((o.float() - want.float()).norm() / want.float().norm()).item()
    assert err <= torch.finfo(dtype).eps, err


@pytest.mark.gpu
@pytest.mark.parametrize(
    "cfg",
    [
        WgmmaAttentionConfig(),
        WgmmaAttentionConfig(pingpong=True),
        WgmmaAttentionConfig(overlap=True),
        WgmmaAttentionConfig(64, 3, pingpong=True, overlap=True),
        WgmmaAttentionConfig(approx=True),
        WgmmaAttentionConfig(64, 3, pingpong=True, overlap=True, approx=True),
    ],
    ids=["default", "pingpong", "overlap", "n64s3-both", "approx", "n64s3-both-approx"],
)
@pytest.mark.parametrize("head_dim", [64, 128])
def test_gpu_equals_the_simulator(head_dim, cfg):
    """The same kernel on both targets: equal to within one rounding of the output."""
    _gpu_equals_the_simulator(head_dim, cfg)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "cfg",
    [
        WgmmaAttentionConfig(approx=True, consumers=3),
        WgmmaAttentionConfig(overlap=True, approx=True, consumers=3),
        WgmmaAttentionConfig(64, 3, consumers=3),
        WgmmaAttentionConfig(176, approx=True, consumers=3),
    ],
    ids=["approx", "overlap-approx", "n64s3", "n176-approx"],
)
def test_gpu_equals_the_simulator_with_three_consumers(cfg):
    _gpu_equals_the_simulator(64, cfg)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "cfg",
    [
        WgmmaAttentionConfig(176, approx=True),
        WgmmaAttentionConfig(176, approx=True, pingpong=True),
        WgmmaAttentionConfig(192, approx=True),
    ],
    ids=["n176-approx", "n176-pingpong-approx", "n192-approx"],
)
def test_gpu_equals_the_simulator_with_wide_key_tiles(cfg):
    _gpu_equals_the_simulator(128, cfg)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "head_dim, cfg",
    [
        (128, _persistent(approx=True)),
        (128, _persistent(overlap=True, approx=True)),
        (64, _persistent(pingpong=True)),
        (64, _persistent(approx=True, consumers=3)),
    ],
    ids=["d128-approx", "d128-overlap-approx", "d64-pingpong", "d64-c3-approx"],
)
def test_gpu_equals_the_simulator_persistent(head_dim, cfg):
    """Two blocks walk over the four query tiles on both targets."""
    _gpu_equals_the_simulator(head_dim, cfg, sms=2)


def _gpu_equals_the_simulator(head_dim, cfg, sms=None):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the wgmma kernel runs on sm_90 only")
    shape = (1, 2, 1, 200, 330, head_dim)
    o_sim, lse_sim, q, k, v = _run(aw, shape, causal=True, cfg=cfg, sms=sms)
    exe = tirx.compile(make_attention(*shape, "float16", True, cfg), target="cuda", sms=sms)
    o = torch.empty_like(q, device="cuda")
    lse = torch.empty(q.shape[:3], device="cuda")
    exe(q.cuda(), k.cuda(), v.cuda(), o, lse, 0.125)
    eps = torch.finfo(torch.float16).eps
    assert ((o.cpu().float() - o_sim.float()).abs() <= eps * o_sim.float().abs() + 1e-3).all()
    torch.testing.assert_close(lse.cpu(), lse_sim, rtol=1e-5, atol=1e-5)
