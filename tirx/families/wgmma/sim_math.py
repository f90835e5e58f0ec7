"""``wgmma.mma_async`` arithmetic and register fragments, written from the PTX ISA
(9.7.15.5.1.1 "Register Fragments", 9.7.15.5.2 "wgmma.mma_async") independently of tirx's
compiler tables.

* **Fragments** (the ISA's figures for m64nNk8/k16/k32): thread ``32 w + lane`` of the
  warpgroup (``g = lane / 4``, ``t = lane % 4``) holds rows ``16 w ..`` of A and D.
  Accumulator element ``i`` (0 .. N/2 - 1): row ``16 w + g + 8 ((i / 2) % 2)``, column
  ``8 (i / 4) + 2 t + i % 2``; .f32 and .s32 keep element ``i`` in register ``i``, .f16 packs
  elements ``2 r`` (low half) and ``2 r + 1`` into register ``r``. A in registers, four .b32
  registers: register ``r`` holds row ``16 w + g + 8 (r % 2)``, the 4 bytes
  ``4 (t + 4 (r / 2)) ..`` of the row's 32 K bytes (two f16/bf16, four fp8/int8 or one tf32
  element, the lower K in the lower bits).
* **Element values**: .f16/.bf16 exactly; .e4m3/.e5m2 exactly (every fp8 value is a float32,
  :mod:`tirx.sim.fp8`); .tf32 as the tensor core reads it, the low 13 mantissa bits dropped
  (:mod:`tirx.sim.tf32`); .s8/.u8 as integers.
* **The operation**: ``D = (scale_a · A) · (scale_b · B) + (scale-d ? D : 0)`` with A 64xK and
  B KxN given as N rows of K. Floating point: products and sum exact in float64, rounded once
  to the accumulator type (.f32, or .f16), as mma.sync is computed (exactly representable
  data give exact results). Integer: exact; the result wraps to 32 bits, or with
  ``.satfinite`` is clamped to [-2^31, 2^31 - 1].
"""

from __future__ import annotations

import functools

import numpy as np

from ...sim.fp8 import fp8_decode
from ...sim.tf32 import tf32_value
from .sim_forms import ROWS, WARPGROUP, MmaAsync

__all__ = [
    "element_values", "register_bytes", "accumulator_map", "pack_accumulator",
    "unpack_accumulator", "product",
]  # fmt: skip

_FP8 = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def element_values(raw: np.ndarray, element: str) -> np.ndarray:
    """uint8 ``[rows, 32]`` K bytes -> ``[rows, K]`` values (float64, or int64 for integers)."""
    raw = np.ascontiguousarray(raw)
    if element == "f16":
        return raw.view(np.float16).astype(np.float64)
    if element == "bf16":
        return (
            (raw.view(np.uint16).astype(np.uint32) << np.uint32(16))
            .view(np.float32)
            .astype(np.float64)
        )
    if element == "tf32":
        return tf32_value(raw.view(np.uint32))
    if element in _FP8:
        return fp8_decode(raw, _FP8[element]).astype(np.float64)
    return raw.view(np.int8).astype(np.int64) if element == "s8" else raw.astype(np.int64)


def register_bytes(regs: np.ndarray) -> np.ndarray:
    """uint32 ``[128, 4]`` (A's registers, thread by thread) -> uint8 ``[64, 32]``, A's rows
    of K bytes."""
    t = np.arange(WARPGROUP)[:, None]
    r = np.arange(4)[None, :]
    w, lane = t >> 5, t & 31
    rows = 16 * w + (lane >> 2) + 8 * (r & 1)
    word = (lane & 3) + 4 * (r >> 1)
    out = np.zeros((ROWS, 8), dtype=np.uint32)
    out[rows, word] = regs
    return out.view(np.uint8).reshape(ROWS, 32)


@functools.lru_cache(maxsize=64)
def accumulator_map(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), int ``[128, n/2]``: the element of D each thread's element ``i`` is."""
    t = np.arange(WARPGROUP)[:, None]
    i = np.arange(n // 2)[None, :]
    w, lane = t >> 5, t & 31
    j, h, e = i >> 2, (i >> 1) & 1, i & 1
    rows = 16 * w + (lane >> 2) + 8 * h
    cols = 8 * j + 2 * (lane & 3) + e
    rows = np.ascontiguousarray(np.broadcast_to(rows, cols.shape))
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


def unpack_accumulator(bits: np.ndarray, acc: str) -> np.ndarray:
    """uint32 registers ``[threads, regs]`` -> element values ``[threads, N/2]``."""
    bits = np.ascontiguousarray(bits, dtype=np.uint32)
    if acc == "f32":
        return bits.view(np.float32).astype(np.float64)
    if acc == "s32":
        return bits.view(np.int32).astype(np.int64)
    return bits.view(np.float16).astype(np.float64)  # .f16: lower element in the low half


def pack_accumulator(values: np.ndarray, acc: str) -> np.ndarray:
    """Element values ``[threads, N/2]`` (already of the accumulator type) -> uint32 registers."""
    if acc == "f32":
        return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    if acc == "s32":
        return np.ascontiguousarray(values.astype(np.int64).astype(np.int32)).view(np.uint32)
    return np.ascontiguousarray(values, dtype=np.float16).view(np.uint32)


def product(form: MmaAsync, a: np.ndarray, b: np.ndarray, sa: int, sb: int, d=None):
    """``[64, N]`` result values of the accumulator type for A ``[64, K]`` and B ``[N, K]``
    element values and the old accumulator values ``d`` (None for scale-d = 0)."""
    if form.integer:
        acc = a.astype(np.int64) @ b.astype(np.int64).T
        if d is not None:
            acc = acc + d.astype(np.int64)
        if form.satfinite:
            return np.clip(acc, -(2**31), 2**31 - 1)
        return (acc & 0xFFFFFFFF).astype(np.uint32).view(np.int32).astype(np.int64)
    acc = (a * sa) @ (b * sb).T
    if d is not None:
        acc = acc + d
    return acc.astype(np.float16 if form.acc == "f16" else np.float32)
