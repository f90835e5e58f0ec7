"""A model of cp.reduce.async.bulk.tensor's arithmetic for the tests, written from the PTX ISA
with exact rationals (independently of tirx/families/tma/sim_reduce.py): the exact result of
``old op v``, rounded once to nearest even in the element's format; integers wrap; an f32 add
keeps subnormal inputs and results (an H100 does; docs/simulator.md).

Values are numpy scalars or 1x1 arrays of the tensor's storage type (bfloat16 as uint16 bits).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

# significand bits (with the hidden one), smallest normal exponent, largest exponent
FORMATS = {"float16": (11, -14, 15), "bfloat16": (8, -126, 127), "float32": (24, -126, 127)}


def round_even(x: Fraction, fmt: str) -> float:
    """``x`` rounded to the nearest value of ``fmt`` (ties to the even significand), as a
    Python float (every value of these formats is one); overflow gives an infinity."""
    p, emin, emax = FORMATS[fmt]
    if x == 0:
        return 0.0
    sign, a = (-1 if x < 0 else 1), abs(x)
    e = max(math.floor(math.log2(a)), emin)
    while Fraction(2) ** e > a and e > emin:  # log2 of a Fraction may be off by one
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    ulp = Fraction(2) ** (e - p + 1)
    q = a / ulp
    n = math.floor(q)
    rest = q - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2):
        n += 1
    value = n * ulp
    if value >= Fraction(2) ** (emax + 1):
        return sign * math.inf
    return sign * float(value)


def bf16_bits(x: float) -> int:
    """The bits of a bfloat16 value ``x`` (exactly representable)."""
    return int(np.array(x, dtype=np.float32).view(np.uint32)) >> 16


def bf16_value(bits: int) -> float:
    return float(np.array(int(bits) << 16, dtype=np.uint32).view(np.float32))


def _exact(value, fmt: str) -> Fraction:
    return Fraction(bf16_value(value) if fmt == "bfloat16" else float(value))


def combine_model(op: str, dtype: str, old, v):
    """``old op v`` for one element of ``dtype`` (storage values: bfloat16 as uint16 bits),
    as a storage value."""
    if dtype in FORMATS:
        if op == "add":
            a, b = _exact(old, dtype), _exact(v, dtype)
            r = round_even(a + b, dtype)
            if dtype == "float32" and a + b == 0:  # IEEE: -0 only for -0 + -0
                both_negative = math.copysign(1, float(old)) < 0 and math.copysign(1, float(v)) < 0
                r = -0.0 if both_negative else 0.0
        elif op in ("min", "max"):
            a, b = _exact(old, dtype), _exact(v, dtype)
            r = float(min(a, b) if op == "min" else max(a, b))
        else:
            raise ValueError(op)
        if dtype == "bfloat16":
            return np.uint16(bf16_bits(r))
        return np.dtype(dtype).type(r)
    kind = np.dtype(dtype)
    bits = 8 * kind.itemsize
    a, b = int(old), int(v)
    r = {
        "add": lambda: a + b,
        "min": lambda: min(a, b),
        "max": lambda: max(a, b),
        "inc": lambda: 0 if a >= b else a + 1,
        "dec": lambda: b if (a == 0 or a > b) else a - 1,
        "and": lambda: a & b,
        "or": lambda: a | b,
        "xor": lambda: a ^ b,
    }[op]()
    r %= 1 << bits
    if kind.kind == "i" and r >= 1 << (bits - 1):
        r -= 1 << bits
    return kind.type(r)
