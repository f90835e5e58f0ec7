"""The value a tensor core multiplies for a ``.tf32`` operand (mma.sync and wgmma both read
tf32 elements as 32-bit registers or shared words holding an f32 bit pattern).

tf32 keeps f32's sign, 8-bit exponent and the 10 high mantissa bits. What the tensor core
does with the 13 low mantissa bits of an operand was measured on the H200
(docs/simulator.md, "tf32"): it ignores them, i.e. the value is the f32 bit pattern with bits
0..12 cleared (truncation toward zero, not rounding). Written once here for every family that
multiplies tf32.
"""

from __future__ import annotations

import numpy as np

__all__ = ["tf32_value"]

_KEEP = np.uint32(0xFFFFE000)  # sign, exponent and the 10 high mantissa bits


def tf32_value(bits: np.ndarray) -> np.ndarray:
    """float64 values of the tf32 elements whose 32-bit patterns are ``bits``."""
    return (np.asarray(bits).astype(np.uint32) & _KEEP).view(np.float32).astype(np.float64)
