"""Attention for torch tensors, shaped like ``torch.nn.functional.scaled_dot_product_attention``:

    from tirx.examples.attention import flash_attention

    o = flash_attention(q, k, v, causal=True)
    o, lse = flash_attention(q, k, v, return_lse=True)

``q`` is ``(batch, heads, seq_q, head_dim)``, ``k`` and ``v`` are ``(batch, kv_heads, seq_k,
head_dim)``, all float16 or all bfloat16, contiguous, on one device; ``head_dim`` is 64 or 128
and ``heads`` a multiple of ``kv_heads`` (grouped-query attention: query head ``h`` reads
key/value head ``h // (heads // kv_heads)``, as SDPA's ``enable_gqa=True``). Any sequence
lengths. ``causal=True`` is torch's ``is_causal``: the mask is top-left aligned, query ``i``
sees keys ``0 .. i`` whatever the two lengths (``torch.nn.attention.bias.CausalVariant.
UPPER_LEFT``). ``scale`` defaults to ``1 / sqrt(head_dim)``. ``lse`` is ``(batch, heads,
seq_q)`` float32: the natural log of each row's sum of ``exp(q·k · scale)`` over the keys it sees.

CUDA tensors run on the GPU, CPU tensors on tirx's simulator (slowly: a 256 x 256 head of
dimension 64 takes about half a second; a run longer than the simulator's budget,
``$TIRX_SIM_BUDGET`` seconds, 20 by default, stops with a SimulationError). ``kernel=`` picks an implementation from :data:`KERNELS`
by name; by default the first one that supports the GPU: ``"wgmma"`` (FlashAttention-3's
structure, attention_wgmma.py) on sm_90 (an H100 or H200), ``"mma_sync"`` (FlashAttention-2's
structure, attention_mma.py) on every other GPU from sm_80 on and for CPU tensors. Each kernel is compiled once per shape
class and kept: a second call with the same shapes costs one launch. tirx's tensor parameters
have compile-time shapes, so the class includes the batch, head counts and both sequence
lengths (the scale is a run-time argument).

The call goes through the torch operator ``tirx::flash_attention`` (:data:`operator`, registered
when this module is imported; tirx/examples/ops.py names it too), so
``torch.compile`` captures it whole and gradients reach q, k and v: the forward is the tirx
kernel, the backward is torch's (:func:`attention_backward`).
"""

import contextlib
import functools
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

import tirx
from tirx.torch_ops import aligned_inputs

from . import attention_wgmma
from .attention_mma import HEAD_DIMS, make_attention

__all__ = [
    "flash_attention",
    "operator",
    "attention_forward",
    "attention_backward",
    "check_inputs",
    "attention_executable",
    "KERNELS",
    "AttentionKernel",
    "SIMULATOR_KERNEL",
]


@dataclass(frozen=True)
class AttentionKernel:
    """One implementation: ``build(batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype,
    causal)`` makes the ``@T.function`` ``(Q, K, V, O, LSE, scale)``; ``min_arch`` is the
    oldest GPU (``sm_XX`` as an int) it runs on, ``max_arch`` the newest (None: every later
    one; 90 for a kernel of sm_90a's arch-specific instructions, which later GPUs lack)."""

    build: Callable
    min_arch: int
    max_arch: int | None = None

    def runs_on(self, arch: int) -> bool:
        return self.min_arch <= arch and (self.max_arch is None or arch <= self.max_arch)


# The implementations, in order of preference on a GPU that runs them all. CPU tensors run
# SIMULATOR_KERNEL unless kernel= names another.
KERNELS: dict[str, AttentionKernel] = {
    # wgmma.mma_async and TMA with FlashAttention-3's structure (attention_wgmma.py): sm_90a,
    # so an H100 or H200 only (its GPU tests passed on an H100, docs/gpu-runs/sessions.md)
    "wgmma": AttentionKernel(attention_wgmma.make_attention, 90, 90),
    # mma.sync.m16n8k16 with FlashAttention-2's structure (attention_mma.py): sm_80 on
    "mma_sync": AttentionKernel(make_attention, 80),
}
SIMULATOR_KERNEL = "mma_sync"


# One launch takes as many batch entries as keep every tensor it sees under 2 GiB (tirx
# addresses a global tensor with 32-bit offsets: tirx/transform/limits.py) and its grid's
# batch x heads rows within the hardware's 65535 (grid y); a larger batch runs in launches of
# that many entries each, on slices of the tensors (a batch's slice of a contiguous 4-D tensor
# is contiguous).
MOST_TENSOR_BYTES = 2**31 - 1
MOST_GRID_Y = 65535


@dataclass(frozen=True)
class _Shapes:
    batch: int
    heads: int
    kv_heads: int
    seq_q: int
    seq_k: int
    head_dim: int
    dtype: str


def flash_attention(q, k, v, causal=False, scale=None, return_lse=False, kernel=None):
    """``softmax(q kᵀ · scale + mask) v`` (and the row log-sum-exp with ``return_lse``); see
    the module's documentation for the arguments. Differentiable, and one operator to
    ``torch.compile`` (``tirx::flash_attention``)."""
    if not isinstance(return_lse, bool):
        raise ValueError(f"return_lse must be True or False, got {return_lse!r}")
    check_inputs(q, k, v, causal, scale, kernel)  # here too: errors name this call's arguments
    o, lse = operator(q, k, v, causal, scale if scale is None else float(scale), kernel)
    return (o, lse) if return_lse else o


def check_inputs(q, k, v, causal=False, scale=None, kernel=None) -> None:
    """Raise, naming the argument, for inputs :func:`flash_attention` refuses (shapes, dtypes,
    devices, ``causal``, ``scale``, the kernel's name); tensors on the meta device or fake ones
    are checked alike."""
    shapes = _check(q, k, v, causal)
    _scale(scale, shapes.head_dim)
    _check_kernel(kernel)


def attention_forward(q, k, v, causal=False, scale=None, kernel=None):
    """``(o, lse)`` computed by the tirx kernel: the body of ``tirx::flash_attention``."""
    shapes = _check(q, k, v, causal)
    scale = _scale(scale, shapes.head_dim)
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    if q.numel():  # no query rows (batch, heads or seq_q 0): nothing to compute
        name, target = _dispatch(kernel, q.device)
        step = _batches(q, k, v, shapes)
        on_cuda = q.device.type == "cuda"
        with torch.cuda.device(q.device) if on_cuda else contextlib.nullcontext():
            for b0 in range(0, shapes.batch, step):
                b1 = min(shapes.batch, b0 + step)
                exe = _executable(name, target, replace(shapes, batch=b1 - b0), causal)
                # inputs whose data does not start on the kernel's 16-byte copies are copied
                args = aligned_inputs(exe, (q[b0:b1], k[b0:b1], v[b0:b1]))
                exe(*args, o[b0:b1], lse[b0:b1], scale)
    return o, lse


def attention_backward(q, k, v, do, dlse=None, causal=False, scale=None):
    """``(dq, dk, dv)`` of attention, computed by torch (the backward of
    ``tirx::flash_attention``; no tirx kernel): for ``do`` alone, the gradient of
    ``scaled_dot_product_attention`` (on a GPU its memory-efficient backends; on the CPU in
    float32); with ``dlse``, the gradient of the log-sum-exp too, through the scores in float32
    (memory of batch · heads · seq_q · seq_k floats). Each in its input's dtype."""
    if do is None and dlse is None:  # neither output reached the loss
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    scale = _scale(scale, q.shape[-1])
    group = q.shape[1] // max(k.shape[1], 1)
    work = q.dtype if q.device.type == "cuda" and dlse is None else torch.float32
    with torch.enable_grad():
        leaves = [t.detach().to(work).requires_grad_() for t in (q, k, v)]
        qw, kw, vw = leaves
        if group > 1:  # query head h reads key/value head h // group; grads sum back
            kw, vw = kw.repeat_interleave(group, 1), vw.repeat_interleave(group, 1)
        if dlse is None:
            o = torch.nn.functional.scaled_dot_product_attention(
                qw, kw, vw, is_causal=causal, scale=scale
            )
            outputs, grads = (o,), (do.to(work),)
        else:
            s = (qw @ kw.transpose(-2, -1)) * scale
            if causal:  # query i sees keys 0 .. i (the top-left diagonal)
                seen = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
                s = s.masked_fill(~seen, float("-inf"))
            o = torch.softmax(s, -1) @ vw
            pairs = [(o, do), (torch.logsumexp(s, -1), dlse)]
            outputs, grads = zip(*((out, g.to(work)) for out, g in pairs if g is not None))
        # lse alone does not depend on v: its gradient is zero there
        got = torch.autograd.grad(outputs, leaves, grads, allow_unused=True)
    dq, dk, dv = (torch.zeros_like(t) if g is None else g for g, t in zip(got, leaves))
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _batches(q, k, v, shapes: _Shapes) -> int:
    """Batch entries per launch (see MOST_TENSOR_BYTES): all of them unless a tensor would
    reach 2 GiB or the grid's rows 65535; at least one (a single entry that is too large is
    refused when its kernel compiles, naming the tensor)."""
    per_entry = max(t[0].numel() * t.element_size() for t in (q, k, v))  # o is q's size
    fit = min(MOST_TENSOR_BYTES // max(per_entry, 1), MOST_GRID_Y // shapes.heads)
    return max(1, min(shapes.batch, fit))


def attention_executable(q, k, v, causal=False, kernel=None):
    """The compiled kernel (a :class:`tirx.Executable`: ``.stats``, ``.sass``, ``.source``)
    that :func:`flash_attention` launches for these inputs (the first launch's, where a large
    batch runs in several); the same object for every call of the same shape class (kernel,
    target, shapes, dtype, causal)."""
    shapes = _check(q, k, v, causal)
    if not q.numel():
        raise ValueError("q has no rows (batch, heads or seq_q is 0): no kernel runs")
    first = replace(shapes, batch=_batches(q, k, v, shapes))  # the first launch's, if several
    return _executable(*_dispatch(kernel, q.device), first, causal)


@functools.lru_cache(maxsize=64)
def _executable(name: str, target: str, shapes: _Shapes, causal: bool):
    s = shapes
    fn = KERNELS[name].build(
        s.batch, s.heads, s.kv_heads, s.seq_q, s.seq_k, s.head_dim, s.dtype, causal
    )
    return tirx.compile(fn, target=target)


def _dispatch(kernel, device) -> tuple[str, str]:
    """(kernel name, tirx target) for tensors on ``device``."""
    _check_kernel(kernel)
    if device.type == "cpu":
        return (kernel or SIMULATOR_KERNEL), "sim"
    major, minor = torch.cuda.get_device_capability(device)
    arch = 10 * major + minor
    if kernel is not None:
        entry = KERNELS[kernel]
        if not entry.runs_on(arch):
            span = f"sm_{entry.min_arch}" + (
                " or later" if entry.max_arch is None else f" to sm_{entry.max_arch}"
            )
            raise ValueError(f"kernel={kernel!r} runs on {span}; {device} is sm_{arch}")
        return kernel, "cuda"
    for name, entry in KERNELS.items():
        if entry.runs_on(arch):
            return name, "cuda"
    raise ValueError(f"no attention kernel runs on {device} (sm_{arch}); they need sm_80 or later")


def _check_kernel(kernel) -> None:
    if kernel is not None and kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)} or None, got {kernel!r}")


def _check(q, k, v, causal) -> _Shapes:
    """The shapes of valid inputs; otherwise an error naming the argument."""
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False, got {causal!r}")
    args = {"q": q, "k": k, "v": v}
    for name, t in args.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(
                f"{name} must be 4-D (batch, heads, seq, head_dim), got shape {tuple(t.shape)}"
            )
        if t.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError(f"{name} must be float16 or bfloat16, got {t.dtype}")
        if t.device.type not in ("cuda", "cpu", "meta"):  # meta: the operator's fake
            raise ValueError(f"{name} is on {t.device}: attention runs on CUDA or CPU tensors")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous (call .contiguous() first)")
    for name in ("k", "v"):
        if args[name].dtype != q.dtype:
            raise ValueError(f"{name} is {args[name].dtype} but q is {q.dtype}: use one dtype")
        if args[name].device != q.device:
            raise ValueError(f"{name} is on {args[name].device} but q is on {q.device}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    B, H, SQ, D = q.shape
    _, HK, SK, DK = k.shape
    if k.shape[0] != B:
        raise ValueError(f"k has batch {k.shape[0]} but q has batch {B}")
    if DK != D:
        raise ValueError(f"k has head_dim {DK} but q has head_dim {D}")
    if D not in HEAD_DIMS:
        raise ValueError(f"head_dim (q.shape[3]) must be one of {HEAD_DIMS}, got {D}")
    if HK == 0 or H % HK:
        raise ValueError(
            f"q's heads ({H}) must be a multiple of k's and v's heads ({HK}) "
            "(grouped-query attention)"
        )
    if SK == 0 and q.numel():
        raise ValueError("k and v have no keys (seq_k = 0): softmax over nothing is undefined")
    return _Shapes(B, H, HK, SQ, SK, D, _dtype_name(q))


def _dtype_name(t) -> str:
    return str(t.dtype).removeprefix("torch.")  # "float16" or "bfloat16": _check's


def _scale(scale, head_dim: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite number or None, got {scale!r}")
    return float(scale)


# ------------------------------------------------------------ the torch operator


@torch.library.custom_op("tirx::flash_attention", mutates_args=())
def operator(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
    scale: float | None = None, kernel: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    return attention_forward(q, k, v, causal, scale, kernel)


@operator.register_fake
def _attention_fake(q, k, v, causal=False, scale=None, kernel=None):
    check_inputs(q, k, v, causal, scale, kernel)
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)


def _attention_context(ctx, inputs, output):
    q, k, v, causal, scale, _ = inputs
    ctx.save_for_backward(q, k, v)
    ctx.causal, ctx.scale = causal, scale
    ctx.set_materialize_grads(False)  # None for an output the loss does not use


def _attention_grad(ctx, do, dlse):
    q, k, v = ctx.saved_tensors
    return (*attention_backward(q, k, v, do, dlse, ctx.causal, ctx.scale), None, None, None)


operator.register_autograd(_attention_grad, setup_context=_attention_context)
