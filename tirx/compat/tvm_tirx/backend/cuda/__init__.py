"""``tvm_tirx.backend.cuda``: see ``axis``."""

from . import axis  # noqa: F401
