"""Torch operators made of the example kernels; importing this module registers them.

* ``tirx::softmax(X) -> Y``: the row softmax (tirx/examples/softmax.py), differentiable: its
  backward is ``tirx::softmax_backward``, a tirx kernel too (tirx/examples/softmax_backward.py);
* ``tirx::softmax_backward(Y, dY) -> dX``;
* ``tirx::gemm(A, B) -> Out``: ``A @ B.T`` in float32 (tirx/examples/gemm.py).

Each is a kernel factory: the kernel is made (and compiled once per device) for the shapes and
dtypes of the inputs, float16 or bfloat16. CUDA tensors run on the GPU, CPU tensors on the
simulator.
"""

from __future__ import annotations

import tirx

from .gemm import make_gemm
from .softmax import make_softmax
from .softmax_backward import make_softmax_backward

__all__ = ["softmax", "softmax_backward", "gemm"]

softmax_backward = tirx.torch_op(
    lambda Y, dY: make_softmax_backward(*Y.shape, Y.dtype),
    name="tirx::softmax_backward",
    outputs=["dX"],
)


def _save_output(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_grad(ctx, dY):
    (Y,) = ctx.saved_tensors
    return softmax_backward(Y, dY)


softmax = tirx.torch_op(
    lambda X: make_softmax(*X.shape, X.dtype),
    name="tirx::softmax",
    outputs=["Y"],
    backward=_softmax_grad,
    setup_context=_save_output,
)

gemm = tirx.torch_op(
    lambda A, B: make_gemm(A.shape[0], B.shape[0], A.shape[1], A.dtype),
    name="tirx::gemm",
    outputs=["Out"],
)
