"""``T.reinterpret`` in the simulator: a value's storage bits read as another dtype.

Written from the meaning of a bit cast (C++'s ``std::bit_cast``, PTX's ``mov.b32`` between
typed registers): the value is put in its memory representation, that memory is viewed as the
target type, and the result is decoded as a load of that type would decode it.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType
from .numeric import decode, encode, storage_type

__all__ = ["reinterpret"]


def reinterpret(values: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """``values`` (compute type of ``src``) as values of ``dst`` (same width)."""
    bits = np.asarray(encode(np.asarray(values), src)).astype(storage_type(src), copy=False)
    return decode(bits.view(storage_type(dst)), dst)
