"""An fp8 GEMM for Hopper: ``Out = (scale_a * scale_b) * (A @ B.T)`` with e4m3 operands, the
warp-specialized persistent kernel of :mod:`tirx.examples.gemm_hopper` with an 8-bit K step.

The operands are those ``torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=...)`` takes:
A ``(M, K)`` and B ``(N, K)``, both ``float8_e4m3fn`` and K-major (``b.t()`` is the
column-major second operand ``_scaled_mm`` asks for), ``scale_a`` and ``scale_b`` float32
tensors of one element (per-tensor scales), Out ``(M, N)`` bfloat16 or float16. The kernel's
scale parameters are ``(1,)`` tensors (a compiled kernel checks each argument's shape);
:func:`scaled_mm`, shaped like ``torch._scaled_mm``, takes a 0-d scale (``torch.tensor(1.0)``)
as well and hands the kernel its ``(1,)`` view, whose data pointer is the same element.

What changes from the 16-bit kernel (the code is the same, :func:`gemm_hopper.build`):

* a K tile is still one 128-byte row per operand row, now 128 elements deep, so a stage holds
  as many bytes as a 16-bit one and the 128-byte swizzle is the same (16 elements per 16-byte
  chunk);
* per K tile each consumer issues four ``wgmma.mma_async.m64nNk32.f32.e4m3.e4m3`` (K step 32),
  accumulating in float32;
* the epilogue multiplies the accumulator by ``scale_a * scale_b`` (read once per consumer
  thread from the two tensors) before rounding it to the output type, as ``_scaled_mm`` does.
"""

import contextlib
import functools

from tirx.torch_ops import aligned_inputs, compile_for

from .gemm_hopper import GROUP_M, build, check_arguments

__all__ = ["make_gemm_fp8", "scaled_mm", "BK_FP8", "OUT_DTYPES"]

BK_FP8 = 128  # e4m3 elements of a 128-byte K tile row
OUT_DTYPES = ("bfloat16", "float16")


def make_gemm_fp8(
    M: int,
    N: int,
    K: int,
    out_dtype: str = "bfloat16",
    stages: int | None = None,
    cluster: int = 1,
    bn: int | None = None,
    group: int = GROUP_M,
):
    """A kernel for fixed sizes (M a multiple of 128, or of 256 with ``cluster=2``; N of
    ``bn``; K of 128). ``bn``: 128 or 256 (None: 256, :func:`make_gemm_hopper`'s default for
    a 16-bit output, which every fp8 output is); ``stages``: shared stages of one K tile
    (default 4 with ``bn=128``, 3 with ``bn=256``); ``cluster``, ``bn`` and ``group`` as for
    :func:`tirx.examples.gemm_hopper.make_gemm_hopper`. The kernel's parameters are
    ``(A, B, scale_a, scale_b, Out)``, the scales ``(1,)`` float32 tensors."""
    M, N, K, stages, cluster, bn, group = _arguments(M, N, K, out_dtype, stages, cluster, bn, group)
    return build(M, N, K, "float8_e4m3fn", out_dtype, stages, cluster, bn, group, scaled=True)


def _arguments(M, N, K, out_dtype, stages, cluster, bn, group):
    """The checked ints ``(M, N, K, stages, cluster, bn, group)``, defaults filled in."""
    if bn is None:
        bn = 256
    if stages is None:
        stages = 4 if bn == 128 else 3
    return check_arguments(
        M, N, K, "float8_e4m3fn", out_dtype, stages, cluster, bn, BK_FP8,
        ("float8_e4m3fn",), OUT_DTYPES, group,
    )  # fmt: skip


def scaled_mm(a, b, scale_a, scale_b, out_dtype=None, *, stages=None, cluster=1, bn=None,
              group=GROUP_M):  # fmt: skip
    """``torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)`` with
    per-tensor scales, computed by this kernel. ``a`` is ``(M, K)`` row-major and ``b``
    ``(K, N)`` column-major (``w.t()`` of a contiguous ``(N, K)`` tensor), both float8_e4m3fn;
    ``scale_a`` and ``scale_b`` are float32 tensors of one element on their device, a 0-d
    tensor (``torch.tensor(1.0)``) or a ``(1,)`` one, as ``_scaled_mm`` takes them;
    ``out_dtype`` is bfloat16 (None: the default) or float16, a torch dtype or its name.
    CUDA tensors run on the GPU (an sm_90 one), CPU tensors on the simulator. The sizes,
    ``stages``, ``cluster``, ``bn`` and ``group`` are :func:`make_gemm_fp8`'s; its kernel is
    compiled once per shape and arguments, and kept. Returns the new ``(M, N)`` output."""
    import torch

    out = _out_dtype(out_dtype)
    for name, t, shape in (("a", a, "(M, K)"), ("b", b, "(K, N)")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D {shape}, got shape {tuple(t.shape)}")
        if t.dtype != torch.float8_e4m3fn:
            raise ValueError(f"{name} must be float8_e4m3fn, got {t.dtype}")
        if t.device != a.device:
            raise ValueError(f"{name} is on {t.device} but a is on {a.device}")
    if not a.is_contiguous():
        raise ValueError("a must be row-major (contiguous): call a.contiguous() first")
    if not b.t().is_contiguous():
        raise ValueError("b must be column-major, the .t() of a contiguous (N, K) tensor, as "
                         "torch._scaled_mm takes it: pass w.t() for w of shape (N, K)")  # fmt: skip
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns (K) "
                         "must be b's rows")  # fmt: skip
    scales = [_scale(name, s, a.device) for name, s in (("scale_a", scale_a), ("scale_b", scale_b))]
    M, K = a.shape
    sizes = _arguments(M, b.shape[1], K, out, stages, cluster, bn, group)
    result = torch.empty((M, sizes[1]), dtype=getattr(torch, out), device=a.device)
    on_cuda = a.device.type == "cuda"
    with torch.cuda.device(a.device) if on_cuda else contextlib.nullcontext():
        exe = _executable(a.device.type, a.device.index, out, *sizes)
        exe(*aligned_inputs(exe, (a, b.t(), *scales)), result)  # (copies of misaligned data)
    return result


def _out_dtype(value) -> str:
    name = value if isinstance(value, str) or value is None else str(value)
    name = "bfloat16" if name is None else name.removeprefix("torch.")
    if name not in OUT_DTYPES:
        raise ValueError(f"out_dtype must be torch.bfloat16 or torch.float16 (None: bfloat16), "
                         f"got {value!r}")  # fmt: skip
    return name


def _scale(name: str, value, device):
    """A per-tensor scale as the kernel's ``(1,)`` parameter: ``value.reshape(1)``, a view of
    the one element (for a 0-d tensor its data pointer is that element)."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a float32 tensor of one element, got "
                        f"{type(value).__name__}: pass torch.tensor({value!r})")  # fmt: skip
    if value.dtype != torch.float32 or value.numel() != 1:
        raise ValueError(f"{name} must be a float32 tensor of one element (a per-tensor scale: "
                         f"shape () or (1,)), got {value.dtype} of shape {tuple(value.shape)}")  # fmt: skip
    if value.device != device:
        raise ValueError(f"{name} is on {value.device} but a is on {device}")
    return value.reshape(1)


@functools.lru_cache(maxsize=32)
def _executable(device, ordinal, out_dtype, M, N, K, stages, cluster, bn, group):
    """The kernel for these sizes, compiled for tensors of ``device`` (a type; ``ordinal``
    keeps each GPU's apart): the GPU or the simulator (``tirx.torch_ops.compile_for``)."""
    kernel = build(M, N, K, "float8_e4m3fn", out_dtype, stages, cluster, bn, group, scaled=True)
    return compile_for(kernel, device)
