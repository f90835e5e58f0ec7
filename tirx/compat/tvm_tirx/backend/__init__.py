"""``tvm_tirx.backend``: only the CUDA axes are provided."""

from . import cuda  # noqa: F401
