"""The float64 reference of attention and the error bounds the attention tests hold the
kernels to (tests/test_attention.py, tests/test_attention_mma.py)."""

from __future__ import annotations

import math

import torch


def inputs(batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype, device="cpu", seed=0):
    gen = torch.Generator(device=device).manual_seed(seed)
    shapes = ((batch, heads, seq_q, head_dim), (batch, kv_heads, seq_k, head_dim))
    q = torch.randn(shapes[0], generator=gen, device=device).to(dtype)
    k = torch.randn(shapes[1], generator=gen, device=device).to(dtype)
    v = torch.randn(shapes[1], generator=gen, device=device).to(dtype)
    return q, k, v


def reference(q, k, v, causal: bool, scale: float | None = None):
    """``softmax(q kᵀ · scale + mask) v``, the row log-sum-exp, and ``softmax · |v|`` (for the
    bound), in float64 from the same 16-bit inputs; the mask as torch's ``is_causal``
    (top-left: query i sees keys 0 .. i); k and v repeated for grouped-query attention."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    group = q.shape[1] // k.shape[1]
    qd = q.double()
    kd = k.double().repeat_interleave(group, 1)
    vd = v.double().repeat_interleave(group, 1)
    s = qd @ kd.transpose(-1, -2) * scale
    if causal:
        seen = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~seen, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return p @ vd, torch.logsumexp(s, dim=-1), p @ vd.abs()


def check(o, lse, q, k, v, causal: bool, scale: float | None = None, slack: float = 1.0):
    """``o`` within what rounding P and O to the inputs' type allows, ``lse`` within float32
    arithmetic's error; ``slack`` widens both (for a comparison of two kernels).

    P is rounded to the 16-bit type before ``P V`` (relative error at most eps/2 per element,
    ``eps`` the type's machine epsilon) and O once when stored (eps/2 of |O|), while the sums
    are float32: ``|o - ref| <= eps (|ref| + softmax · |v|)`` holds with a factor 2 to spare.
    The scores are float32 sums of ``head_dim`` exact products and lse a float32 log of a sum
    of ``seq_k`` terms: ``|lse - ref| <= 2^-20 (|ref| + scale · max_j |q|·|k_j| + seq_k)``."""
    ref, ref_lse, spread = reference(q.cpu(), k.cpu(), v.cpu(), causal, scale)
    eps = torch.finfo(q.dtype).eps
    err = (o.cpu().double() - ref).abs()
    bound = slack * eps * (ref.abs() + spread) + 1e-6
    worst = (err / bound).max().item()
    assert worst <= 1.0, f"O is {worst:.2f} x its bound from the float64 result"
    if lse is None:
        return
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    group = q.shape[1] // k.shape[1]
    qk = q.cpu().double().abs() @ k.cpu().double().abs().repeat_interleave(group, 1).mT
    lse_bound = slack * 2.0**-20 * (ref_lse.abs() + abs(scale) * qk.amax(-1) + k.shape[2])
    lse_worst = ((lse.cpu().double() - ref_lse).abs() / lse_bound).max().item()
    assert lse_worst <= 1.0, f"lse is {lse_worst:.2f} x its bound from the float64 result"
