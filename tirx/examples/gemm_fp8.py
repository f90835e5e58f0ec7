"""An fp8 GEMM for Hopper: ``Out = (scale_a * scale_b) * (A @ B.T)`` with e4m3 operands, the
warp-specialized persistent kernel of :mod:`tirx.examples.gemm_hopper` with an 8-bit K step.

The operands are those ``torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=...)`` takes:
A ``(M, K)`` and B ``(N, K)``, both ``float8_e4m3fn`` and K-major (``b.t()`` is the
column-major second operand ``_scaled_mm`` asks for), ``scale_a`` and ``scale_b`` float32
tensors of one element (per-tensor scales), Out ``(M, N)`` bfloat16 or float16.

What changes from the 16-bit kernel (the code is the same, :func:`gemm_hopper.build`):

* a K tile is still one 128-byte row per operand row, now 128 elements deep, so a stage holds
  as many bytes as a 16-bit one and the 128-byte swizzle is the same (16 elements per 16-byte
  chunk);
* per K tile each consumer issues four ``wgmma.mma_async.m64nNk32.f32.e4m3.e4m3`` (K step 32),
  accumulating in float32;
* the epilogue multiplies the accumulator by ``scale_a * scale_b`` (read once per consumer
  thread from the two tensors) before rounding it to the output type, as ``_scaled_mm`` does.
"""

from .gemm_hopper import GROUP_M, build, check_arguments

__all__ = ["make_gemm_fp8", "BK_FP8"]

BK_FP8 = 128  # e4m3 elements of a 128-byte K tile row


def make_gemm_fp8(
    M: int,
    N: int,
    K: int,
    out_dtype: str = "bfloat16",
    stages: int | None = None,
    cluster: int = 1,
    bn: int = 256,
    group: int = GROUP_M,
):
    """A kernel for fixed sizes (M a multiple of 128, or of 256 with ``cluster=2``; N of
    ``bn``; K of 128). ``stages``: shared stages of one K tile (default 4 with ``bn=128``,
    3 with ``bn=256``); ``cluster``, ``bn`` and ``group`` as for
    :func:`tirx.examples.gemm_hopper.make_gemm_hopper`. The kernel's parameters are
    ``(A, B, scale_a, scale_b, Out)``."""
    if stages is None:
        stages = 4 if bn == 128 else 3
    M, N, K, stages, cluster, bn, group = check_arguments(
        M, N, K, "float8_e4m3fn", out_dtype, stages, cluster, bn, BK_FP8,
        ("float8_e4m3fn",), ("bfloat16", "float16"), group,
    )  # fmt: skip
    return build(M, N, K, "float8_e4m3fn", out_dtype, stages, cluster, bn, group, scaled=True)
