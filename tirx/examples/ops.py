"""Torch operators made of the example kernels; importing this module registers them.

* ``tirx::softmax(X) -> Y``: the row softmax (tirx/examples/softmax.py), differentiable: its
  backward is ``tirx::softmax_backward``, a tirx kernel too (tirx/examples/softmax_backward.py);
* ``tirx::softmax_backward(Y, dY) -> dX``;
* ``tirx::gemm(A, B) -> Out``: ``A @ B.T`` in float32 (tirx/examples/gemm.py), differentiable:
  its backward is two matrix products in torch (``dA = dOut @ B``, ``dB = dOutᵀ @ A``, rounded
  to the inputs' dtypes), so a model with trainable weights can call it, compiled or not;
* ``tirx::flash_attention(q, k, v, causal=False, scale=None, kernel=None) -> (o, lse)``:
  attention, differentiable, its backward torch's (defined in tirx/examples/attention.py,
  whose import registers it and whose ``flash_attention`` calls it).

Each is a kernel factory: the kernel is made (and compiled once per device) for the shapes and
dtypes of the inputs, float16 or bfloat16 (attention: its kernel once per shape class, see
there). CUDA tensors run on the GPU, CPU tensors on the simulator.
"""

from __future__ import annotations

import tirx

from .attention import operator as flash_attention
from .gemm import make_gemm
from .softmax import make_softmax
from .softmax_backward import make_softmax_backward

__all__ = ["softmax", "softmax_backward", "gemm", "flash_attention"]


def _matrix(op: str, **tensors) -> None:
    """Refuse, naming the operator and the input, a tensor that is not 2-D or is empty (the
    kernels take rows × columns of at least one element)."""
    for name, t in tensors.items():
        if len(t.shape) != 2 or 0 in t.shape:
            what = "not 2-D" if len(t.shape) != 2 else "empty"
            raise ValueError(f"tirx::{op}: {name} must be a 2-D tensor (rows, columns) with "
                             f"at least one element; got shape {tuple(t.shape)} ({what})")  # fmt: skip


def _make_softmax_backward(Y, dY):
    _matrix("softmax_backward", Y=Y, dY=dY)
    return make_softmax_backward(*Y.shape, Y.dtype)


def _make_softmax(X):
    _matrix("softmax", X=X)
    return make_softmax(*X.shape, X.dtype)


def _make_gemm(A, B):
    _matrix("gemm", A=A, B=B)
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"tirx::gemm: A @ B.T needs A and B of one row length (K); got "
                         f"A {tuple(A.shape)} and B {tuple(B.shape)}")  # fmt: skip
    return make_gemm(A.shape[0], B.shape[0], A.shape[1], A.dtype)


softmax_backward = tirx.torch_op(
    _make_softmax_backward,
    name="tirx::softmax_backward",
    outputs=["dX"],
)


def _save_output(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_grad(ctx, dY):
    (Y,) = ctx.saved_tensors
    return softmax_backward(Y, dY)


softmax = tirx.torch_op(
    _make_softmax,
    name="tirx::softmax",
    outputs=["Y"],
    backward=_softmax_grad,
    setup_context=_save_output,
)


def _save_inputs(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _gemm_grad(ctx, dOut):
    A, B = ctx.saved_tensors
    dA = (dOut @ B.float()).to(A.dtype) if ctx.needs_input_grad[0] else None
    dB = (dOut.T @ A.float()).to(B.dtype) if ctx.needs_input_grad[1] else None
    return dA, dB


gemm = tirx.torch_op(
    _make_gemm,
    name="tirx::gemm",
    outputs=["Out"],
    backward=_gemm_grad,
    setup_context=_save_inputs,
)
