"""``tirx.examples.attention.flash_attention``: torch-shaped attention on the simulator (CPU
tensors) and the GPU (CUDA tensors, marked ``gpu``), against the float64 reference and
``torch.nn.functional.scaled_dot_product_attention``; the compiled-kernel cache; bad input."""

from __future__ import annotations

import pytest
import torch

import tirx
from tests.attention_reference import check, inputs, reference
from tirx.examples import attention as attn
from tirx.examples.attention import attention_executable, flash_attention

F16, BF16 = torch.float16, torch.bfloat16

# (batch, heads, kv_heads, seq_q, seq_k, head_dim), dtype, causal
GRID = [
    ((1, 1, 1, 64, 64, 64), F16, False),  # whole tiles
    ((1, 2, 1, 100, 77, 64), F16, True),  # ragged, GQA, causal with seq_q > seq_k
    ((1, 1, 1, 50, 130, 64), BF16, True),  # causal with seq_q < seq_k
    ((2, 1, 1, 1, 1, 64), BF16, False),  # one query, one key
    ((2, 2, 2, 33, 65, 128), BF16, False),
    ((1, 4, 2, 70, 70, 128), F16, True),
]


def _id(case):
    (b, h, hk, sq, sk, d), dtype, causal = case
    return f"{b}x{h}/{hk}-{sq}x{sk}-d{d}-{str(dtype)[6:]}{'-causal' if causal else ''}"


@pytest.mark.parametrize("case", GRID, ids=[_id(c) for c in GRID])
def test_simulator_matches_float64(case):
    shape, dtype, causal = case
    q, k, v = inputs(*shape, dtype)
    o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
    assert o.dtype == dtype and o.shape == q.shape and lse.shape == q.shape[:3]
    check(o, lse, q, k, v, causal)


def test_cpu_tensors_run_on_the_simulator_and_a_kernel_can_be_named():
    q, k, v = inputs(1, 1, 1, 16, 16, 64, F16)
    exe = attention_executable(q, k, v, kernel="mma_sync")
    assert exe.target.kind == "sim"
    assert exe is attention_executable(q, k, v)  # the default on the CPU is the same one
    o = flash_attention(q, k, v, scale=0.5, kernel="mma_sync")
    check(o, None, q, k, v, False, scale=0.5)


def test_a_second_call_of_a_shape_class_compiles_nothing(monkeypatch):
    q, k, v = inputs(1, 2, 2, 24, 40, 64, F16)
    first = attention_executable(q, k, v, causal=True)
    built, real = [], tirx.compile
    monkeypatch.setattr(attn.tirx, "compile", lambda *a, **kw: built.append(a) or real(*a, **kw))
    assert attention_executable(q, k, v, causal=True) is first
    flash_attention(q, k, v, causal=True)
    flash_attention(q * 2, k, v, causal=True, scale=0.01)  # other values, other scale
    assert built == []
    other = attention_executable(
        q, k[:, :, :39].contiguous(), v[:, :, :39].contiguous(), causal=True
    )
    assert other is not first and len(built) == 1  # another key length is another class


@pytest.mark.parametrize("limit", ["bytes", "grid"])
def test_a_batch_too_large_for_one_launch_runs_in_several(monkeypatch, limit):
    # each launch's tensors must stay under 2 GiB (32-bit offsets) and its grid's batch x heads
    # rows within 65535: shrunk here so that 5 batch entries need launches of 2, 2 and 1
    q, k, v = inputs(5, 2, 1, 20, 36, 64, F16)
    whole = flash_attention(q, k, v, causal=True, return_lse=True)
    per_entry = q[0].numel() * q.element_size()  # the largest tensor of one entry
    if limit == "bytes":
        monkeypatch.setattr(attn, "MOST_TENSOR_BYTES", 2 * per_entry + 1)
    else:
        monkeypatch.setattr(attn, "MOST_GRID_Y", 2 * 2 + 1)  # two entries of 2 heads
    launched = []
    real = attn._executable

    def spy(name, target, shapes, causal):
        launched.append(shapes.batch)
        return real(name, target, shapes, causal)

    monkeypatch.setattr(attn, "_executable", spy)
    o, lse = flash_attention(q, k, v, causal=True, return_lse=True)
    assert launched == [2, 2, 1]
    assert torch.equal(o, whole[0]) and torch.equal(lse, whole[1])  # the same sums, bit for bit
    assert attention_executable(q, k, v, causal=True).lowered.params[0].shape[0] == 2


def _tirx_and_float64_grads(q, k, v, causal, o_weight, lse_weight):
    """The gradients through flash_attention, and through the float64 reference."""

    def tirx_attention(q, k, v, causal):
        return flash_attention(q, k, v, causal=causal, return_lse=True)

    def float64(q, k, v, causal):
        return reference(q.double(), k.double(), v.double(), causal)[:2]

    got = _grads(q, k, v, causal, o_weight, lse_weight, tirx_attention)
    want = _grads(q.double(), k.double(), v.double(), causal, o_weight, lse_weight, float64)
    return got, want


def _grads(q, k, v, causal, o_weight, lse_weight, fn):
    """dq, dk, dv of ``sum(o · o_weight) + sum(lse · lse_weight)`` through ``fn``."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    o, lse = fn(*leaves, causal)
    loss = 0.0 if o_weight is None else (o.double() * o_weight).sum()
    if lse_weight is not None:
        loss = loss + (lse.double() * lse_weight).sum()
    got = torch.autograd.grad(loss, leaves, allow_unused=True)  # lse alone does not read v
    return [torch.zeros_like(t) if g is None else g for g, t in zip(got, leaves)]


@pytest.mark.parametrize("use", ["o", "o-and-lse", "lse"])
@pytest.mark.parametrize(
    "shape,causal", [((1, 2, 1, 33, 20, 64), True), ((2, 1, 1, 16, 40, 128), False)],
    ids=["gqa-causal", "d128"],
)  # fmt: skip
def test_gradients_reach_q_k_v_and_match_float64(shape, causal, use):
    q, k, v = inputs(*shape, F16, seed=5)
    gen = torch.Generator().manual_seed(6)
    # weights the outputs' dtypes hold exactly (o's gradient is float16, lse's float32)
    o_weight = torch.randn(q.shape, generator=gen).half().double()
    lse_weight = torch.randn(q.shape[:3], generator=gen).double()
    o_weight = None if use == "lse" else o_weight  # lse alone: no gradient reaches o
    lse_weight = None if use == "o" else lse_weight

    got, want = _tirx_and_float64_grads(q, k, v, causal, o_weight, lse_weight)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert g.dtype == F16 and g.shape == w.shape, name
        # torch's float32 arithmetic, then one rounding to float16
        bound = torch.finfo(F16).eps * w.abs() + 1e-4 * w.abs().max() + 1e-12  # dv of lse: 0
        worst = ((g.double() - w).abs() / bound).max().item()
        assert worst <= 1.0, f"{name} is {worst:.2f} x its bound from the float64 gradient"


def test_no_query_rows_give_empty_outputs():
    q, k, v = inputs(1, 2, 1, 0, 5, 64, F16)
    o, lse = flash_attention(q, k, v, return_lse=True)
    assert o.shape == (1, 2, 0, 64) and lse.shape == (1, 2, 0)


def _good():
    return inputs(1, 4, 2, 8, 8, 64, F16)


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda q, k, v: (q.numpy(), k, v), TypeError, "q must be a torch.Tensor"),
        (lambda q, k, v: (q[0], k, v), ValueError, "q must be 4-D"),
        (lambda q, k, v: (q.float(), k, v), ValueError, "q must be float16 or bfloat16"),
        (lambda q, k, v: (q, k.bfloat16(), v), ValueError, "k is torch.bfloat16 but q is"),
        (lambda q, k, v: (q, k, v.transpose(2, 3)), ValueError, "v must be contiguous"),
        (lambda q, k, v: (q, k, v[:, :1].contiguous()), ValueError, "k and v must have one shape"),
        (
            lambda q, k, v: (q, k[:, :, :, :32].contiguous(), v[:, :, :, :32].contiguous()),
            ValueError,
            "k has head_dim 32 but q has head_dim 64",
        ),  # fmt: skip
        (
            lambda q, k, v: (
                q[..., :32].contiguous(),
                k[..., :32].contiguous(),
                v[..., :32].contiguous(),
            ),
            ValueError,
            r"head_dim \(q.shape\[3\]\) must be one of \(64, 128\)",
        ),  # fmt: skip
        (
            lambda q, k, v: (q[:, :3].contiguous(), k, v),
            ValueError,
            r"q's heads \(3\) must be a multiple",
        ),
        (lambda q, k, v: (torch.cat([q, q]), k, v), ValueError, "k has batch 1 but q has batch 2"),
        (lambda q, k, v: (q, k[:, :, :0], v[:, :, :0]), ValueError, "no keys"),
        (lambda q, k, v: (q, k.to("meta"), v), ValueError, "k is on meta"),
    ],
    ids=[
        "not-a-tensor",
        "3-d",
        "float32",
        "mixed-dtype",
        "non-contiguous",
        "k-v-shapes",
        "head-dims-differ",
        "head-dim-32",
        "heads-do-not-divide",
        "batch",
        "no-keys",
        "device",
    ],  # fmt: skip
)
def test_bad_tensors_are_refused_naming_the_argument(change, error, message):
    with pytest.raises(error, match=message):
        flash_attention(*change(*_good()))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"causal": 1}, "causal must be True or False"),
        ({"return_lse": "yes"}, "return_lse must be True or False"),
        ({"scale": float("nan")}, "scale must be a finite number"),
        ({"scale": torch.tensor(0.5)}, "scale must be a finite number"),
        ({"kernel": "tcgen05"}, r"kernel must be one of \['mma_sync', 'wgmma'\]"),
    ],
)
def test_bad_options_are_refused_naming_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        flash_attention(*_good(), **kwargs)


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

    q, k, v = inputs(*shape, dtype, device="cuda", seed=3)
    o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
    assert attention_executable(q, k, v, causal).target.kind == "cuda"
    check(o, lse, q, k, v, causal)
    want = sdpa(q, k, v, is_causal=causal, enable_gqa=True)
    # two results each within about eps/2 of the float64 one, elementwise relative
    err = ((o.float() - want.float()).norm() / want.float().norm()).item()
    assert err <= torch.finfo(dtype).eps, err


@pytest.mark.gpu
def test_gpu_refuses_mixed_devices():
    q, k, v = inputs(1, 1, 1, 8, 8, 64, F16)
    with pytest.raises(ValueError, match="k is on cuda"):
        flash_attention(q, k.cuda(), v)


@pytest.mark.gpu
@pytest.mark.parametrize("use_lse", [False, True], ids=["o", "o-and-lse"])
@pytest.mark.parametrize("dtype", [F16, BF16])
def test_gpu_gradients_match_float64(dtype, use_lse):
    q, k, v = inputs(2, 4, 2, 300, 257, 128, dtype, device="cuda", seed=7)
    gen = torch.Generator(device="cuda").manual_seed(8)
    o_weight = torch.randn(q.shape, generator=gen, device="cuda").to(dtype).double()
    lse_weight = (
        torch.randn(q.shape[:3], generator=gen, device="cuda").double() if use_lse else None
    )

    got, want = _tirx_and_float64_grads(q, k, v, True, o_weight, lse_weight)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert g.dtype == dtype and g.is_cuda, name
        # SDPA's backward on the GPU (float32 sums of 16-bit products), or float32 throughout
        err = ((g.double() - w).norm() / w.norm()).item()
        assert err <= 2 * torch.finfo(dtype).eps, (name, err)


@pytest.mark.parametrize("kernel", ["mma_sync", "wgmma"])
def test_inputs_whose_data_is_not_16_byte_aligned_are_copied(kernel):
    """Contiguous q, k, v that start one element into their storage: the kernels' 16-byte
    cp.async/TMA reads need aligned pointers, so the entry copies them (it raised a
    SimulationError inside the library's kernel)."""
    shape = (1, 1, 16, 64)
    n = 16 * 64

    def moved(seed):
        base = torch.randn(1 + n, generator=torch.Generator().manual_seed(seed)).half()
        return base[1:].view(shape)

    q, k, v = moved(0), moved(1), moved(2)
    assert q.is_contiguous() and q.data_ptr() % 16
    o = flash_attention(q, k, v, kernel=kernel)
    want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert (o.float() - want).abs().max().item() < 2e-3
