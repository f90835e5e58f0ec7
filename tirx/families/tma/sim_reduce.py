"""The arithmetic of ``cp.reduce.async.bulk.tensor``, written from the PTX ISA
("cp.reduce.async.bulk.tensor"; the operations as "atom"/"red" define them): each element of
the tensor becomes ``old redOp v``, ``v`` the box element from shared memory, both of the
tensor map's element type.

* ``.add``: integers wrap modulo 2^bits; ``.f32`` is the sum rounded to nearest even,
  subnormal inputs and results kept: the tensor section names no flush, and an H100 keeps
  them (docs/gpu-runs/sessions.md, 2026-12-05: ``-2^-126 + 2^-149`` lands as the subnormal
  ``0x807fffff``), unlike ``atom.add.f32``, which flushes (the float64 sum of two float32
  values, rounded once to float32, is the correctly rounded sum); ``.f16``/``.bf16`` the
  exact sum rounded once to nearest even, no
  flush (computed in float64, which holds the sum of two such values exactly or closer than
  any rounding of it to 16 bits can tell apart, then rounded straight to the 16-bit format);
  a NaN sum (a NaN operand, or infinities of opposite signs) is the canonical NaN 0x7fff,
  whatever the operands' payloads, as the H200 writes it (docs/gpu-runs/tma-store.md).
* ``.min``/``.max``: integers compared as the type's signedness; ``.f16``/``.bf16`` as
  numbers, a NaN operand giving the other one (both NaN: the canonical NaN), ``-0`` below
  ``+0``.
* ``.inc``: ``old >= v ? 0 : old + 1``; ``.dec``: ``(old == 0 || old > v) ? v : old - 1``
  (unsigned 32-bit).
* ``.and``/``.or``/``.xor``: bitwise.

Values travel as their storage bits (``storage``: bfloat16 as uint16)."""

from __future__ import annotations

import numpy as np

from ...sim.numeric import f32_to_half, min_max_choice, to_bf16_bits

__all__ = ["REDUCTIONS", "storage", "combine"]

REDUCTIONS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")

_STORAGE = {
    "float16": np.float16, "bfloat16": np.uint16, "float32": np.float32, "float64": np.float64,
    "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
    "int16": np.int16, "uint16": np.uint16, "int8": np.int8, "uint8": np.uint8,
}  # fmt: skip
_CANONICAL_NAN = {"float16": 0x7FFF, "bfloat16": 0x7FFF}  # PTX's canonical 16-bit NaN


def storage(dtype: str) -> np.dtype:
    """The numpy dtype of one element's bits."""
    return np.dtype(_STORAGE[dtype])


def _bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def _floats(dtype: str, bits: np.ndarray) -> np.ndarray:
    return _bf16_values(bits) if dtype == "bfloat16" else bits.astype(np.float64)


def _from_floats(dtype: str, x: np.ndarray) -> np.ndarray:
    """The float64 values ``x`` rounded once to the 16-bit ``dtype``, as its storage bits (a
    NaN the canonical 0x7fff)."""
    return to_bf16_bits(x) if dtype == "bfloat16" else f32_to_half(x)


def _min_max(redop: str, dtype: str, old: np.ndarray, v: np.ndarray) -> np.ndarray:
    if dtype not in ("float16", "bfloat16"):
        return np.minimum(old, v) if redop == "min" else np.maximum(old, v)
    take_old, both = min_max_choice(redop, _floats(dtype, old), _floats(dtype, v))
    out = np.where(take_old, old, v)
    if both.any():
        nan = np.array(_CANONICAL_NAN[dtype], dtype=np.uint16).view(out.dtype)
        out = np.where(both, nan, out)
    return out


def combine(redop: str, dtype: str, old: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The new bits of elements holding ``old`` reduced with ``v`` (both storage bits of
    ``dtype``, the map's element type)."""
    if redop == "add":
        if dtype == "float32":
            return (old.astype(np.float64) + v.astype(np.float64)).astype(np.float32)
        if dtype in ("float16", "bfloat16"):
            # any NaN sum is the canonical NaN (the H200 writes 0x7fff), as the conversions give it
            return _from_floats(dtype, _floats(dtype, old) + _floats(dtype, v))
        return (old + v).astype(old.dtype)  # numpy's integer arithmetic wraps
    if redop in ("min", "max"):
        return _min_max(redop, dtype, old, v)
    if redop == "inc":
        return np.where(old >= v, 0, old + 1).astype(old.dtype)
    if redop == "dec":
        return np.where((old == 0) | (old > v), v, old - 1).astype(old.dtype)
    if redop == "and":
        return old & v
    if redop == "or":
        return old | v
    if redop == "xor":
        return old ^ v
    raise ValueError(f"unknown reduction .{redop}")
