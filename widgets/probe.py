"""Probe kernels: run one warp-matrix instruction on the real machine (the GPU when one is
visible, else the simulator) and read every lane's registers back.

The kernels are ordinary tirx kernels. Each lane copies its register inputs from a global
``[32, slots]`` array into a local array, the instruction runs through ``T.cuda.tile.apply``
with the layout under test on one operand (and the canonical fragment layouts on the others),
and each lane writes its output registers to a global ``[32, slots]`` array. The host fills and
reads the other operands with the PTX ISA's fragment formulas, written out below.

This module holds what the families' probes share (the fragment formulas, codes, packing,
launching, the records a run returns); each drawable family's own probe kernels, checks and
runs are in its picture module (:mod:`widgets.families` lists them). Used by
:func:`widgets.check_layout` (codes that identify lane, slot and element) and by
:func:`widgets.run_instruction` (real data for :func:`widgets.show_trace`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

import tirx
from tirx.errors import TirxError

__all__ = [
    "acc_coord", "a_word", "b_word", "half_bits", "half_values", "pack", "native_registers",
    "launch", "ProbeRegisters", "ProbeStep", "ProbeRun", "as_array", "as_bits16", "registers",
    "coords", "code", "decode",
]  # fmt: skip

# The PTX ISA's fragment formulas (lane l, g = l // 4, t = l % 4, native register r), used to
# fill and read the operands that are not under test.


def acc_coord(lane: int, r: int) -> tuple[int, int]:
    """mma C/D: register r of lane l holds (row, col) of the 16x8 f32 tile."""
    return lane // 4 + 8 * (r // 2), 2 * (lane % 4) + r % 2


def a_word(lane: int, r: int) -> tuple[int, int]:
    """mma A: register r of lane l holds (row, word) of the 16 x k/2 tile of u32 words."""
    return lane // 4 + 8 * (r % 2), lane % 4 + 4 * (r // 2)


def b_word(lane: int, r: int) -> tuple[int, int]:
    """mma B: register r of lane l holds (n, word) of the 8 x k/2 tile of u32 words."""
    return lane // 4, lane % 4 + 4 * r


def half_bits(values, ab_type: str = "f16") -> np.ndarray:
    """16-bit patterns of ``values`` as f16 or bf16 (uint16)."""
    values = np.asarray(values, dtype=np.float32)
    if ab_type == "bf16":
        return (values.view(np.uint32) >> 16).astype(np.uint16)
    return values.astype(np.float16).view(np.uint16)


def half_values(bits, ab_type: str = "f16") -> np.ndarray:
    """The numbers that 16-bit patterns stand for (f16 or bf16) as float32."""
    bits = np.asarray(bits).astype(np.uint16)
    if ab_type == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(np.float16).astype(np.float32)


def pack(lo, hi) -> np.ndarray:
    """u32 words from their low and high 16-bit halves."""
    return np.asarray(lo, np.uint32) | (np.asarray(hi, np.uint32) << np.uint32(16))


def native_registers(matrix, word_of, nregs: int, ab_type: str = "f16") -> np.ndarray:
    """[32, nregs] u32: an mma A or B operand holding ``matrix`` (rows x k values) in its
    native registers; ``word_of`` is :func:`a_word` or :func:`b_word`."""
    bits = half_bits(matrix, ab_type)
    out = np.zeros((32, nregs), np.uint32)
    for lane in range(32):
        for r in range(nregs):
            row, w = word_of(lane, r)
            out[lane, r] = pack(bits[row, 2 * w], bits[row, 2 * w + 1])
    return out


# ------------------------------------------------------------------------- launching


def require_target(target) -> None:
    """A TirxError for a GPU target on a machine where no GPU is visible."""
    name = getattr(target, "kind", target)
    if isinstance(name, str) and name.startswith(("cuda", "sm_")) and not tirx.gpu_available():
        raise TirxError(
            f"target={target!r} runs the probe on a GPU, and no GPU is visible here",
            hint="use target='sim' (the simulator), or leave target= out to pick it",
        )


def launch(kernel, arrays: list, target=None) -> tuple[list, str]:
    """Compile ``kernel`` for ``target`` (None: the GPU when visible, else the simulator), run
    it on numpy ``arrays`` (outputs are written back into them) and say where it ran."""
    require_target(target)
    exe = tirx.compile(kernel, target=target)
    if exe.target.kind == "cuda":
        import torch

        tensors = [torch.from_numpy(a).cuda() for a in arrays]
        exe(*tensors)
        torch.cuda.synchronize()
        for a, t in zip(arrays, tensors):
            a[...] = t.cpu().numpy()
        return arrays, f"GPU ({exe.target.arch})"
    exe(*arrays)
    return arrays, "simulator"


# ---------------------------------------------------------------- what a probe returns


@dataclass(frozen=True, eq=False)
class ProbeRegisters:
    """One operand's registers, shaped like the simulator's trace records: [32, n] uint32."""

    operand: int
    role: str
    is_output: bool
    dtypes: tuple
    sources: tuple
    before: np.ndarray
    after: np.ndarray


@dataclass(frozen=True, eq=False)
class ProbeStep:
    step: int
    instruction: str
    registers: tuple
    span: object = None
    block: tuple = (0, 0, 0)
    warp: int = 0


@dataclass(eq=False)
class ProbeRun:
    """What :func:`run_instruction` returns: ``traces`` like a simulator RunResult, and where
    the instruction ran."""

    traces: list = field(default_factory=list)
    where: str = ""


def as_array(x, shape):
    if hasattr(x, "detach"):
        x = x.detach().cpu().float().numpy()
    x = _numbers(x, np.float32, shape)
    if x.shape != shape:
        raise TirxError(f"expected an operand of shape {shape}, got {x.shape}")
    return x


def _numbers(x, dtype, shape):
    """``x`` as a numpy array of ``dtype``, or a TirxError (a TypeError) saying what it takes."""
    from .args import ArgumentTypeError

    try:
        return np.asarray(x, dtype)
    except (TypeError, ValueError):
        raise ArgumentTypeError(
            f"expected an operand of shape {shape} of numbers, got {type(x).__name__} {x!r:.60}",
            hint="pass a numpy array or a torch tensor",
        ) from None


def as_words(x, shape):
    """u32 register words of ``shape`` ([32, count]: lane by register)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    x = _numbers(x, np.int64, shape)
    if x.shape != shape:
        raise TirxError(f"expected registers of shape {shape} (lane by register), got {x.shape}",
                        hint="registers= holds one row of u32 words per lane")  # fmt: skip
    return (x & 0xFFFFFFFF).astype(np.uint32)


def as_bits16(x, shape):
    if x is None:
        return np.zeros(shape, np.uint16)
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    x = np.asarray(x)
    if x.dtype != np.uint16:
        x = half_bits(_numbers(x, np.float32, shape))
    if x.shape != shape:
        raise TirxError(f"expected shared data of shape {shape}, got {x.shape}")
    return x


def registers(pos, role, is_output, after, dtype, before=None):
    n = after.shape[1]
    return ProbeRegisters(
        pos, role, is_output, (dtype,) * n, tuple(f"{role}[{i}]" for i in range(n)),
        after if before is None else before, after,
    )  # fmt: skip


def coords(shape):
    return itertools.product(*(range(e) for e in shape))


def code(lane, slot, half, slots):
    return (lane * slots + slot) * 2 + half


def decode(code, slots):
    pair, half = divmod(int(code), 2)
    return divmod(pair, slots) + (half,)
