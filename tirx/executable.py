"""Executables: what ``tirx.compile`` returns, for the simulator and (in backend/cuda) the GPU.

An executable checks its arguments against the kernel's parameters (count, dtype, shape,
device, contiguity) with messages that name the parameter, runs the kernel, and offers the
inspection surface: ``source``, ``ptx``, ``sass``, ``script()``, ``stats``, ``timings``,
``cache``.
"""

from __future__ import annotations

import copy
import sys

from .dtypes import DTypeKind, StrKind
from .ir import nodes as ir
from .ir.printer import print_function

__all__ = ["Executable", "SimExecutable", "ArgChecker", "CacheState"]


class CacheState(StrKind):
    """Where an executable's compiled code came from (``exe.cache``)."""

    HIT = "hit"  # a cache: this process's memory, or the disk cache for the cuda target
    MISS = "miss"  # built by this compile


class ArgChecker:
    """Checks call arguments against a function's parameters, prepared once per executable."""

    def __init__(self, fn: ir.Function, device: str, ordinal: int = 0):
        self.fn = fn
        self.device = device  # "cuda" or "cpu"
        self.ordinal = ordinal  # the CUDA device the kernel is loaded on (device "cuda" only)
        self.params = fn.params
        self._torch_dtypes = None

    def _names(self):
        return ", ".join(p.name for p in self.params)

    def torch_dtypes(self):
        if self._torch_dtypes is None:
            import torch

            self._torch_dtypes = [
                getattr(torch, p.dtype.torch_name) if isinstance(p, ir.Buffer) else None
                for p in self.params
            ]
        return self._torch_dtypes

    def keywords(self, kw: dict) -> None:
        """A call with keyword arguments: the kernel takes its arguments by position only."""
        names = ", ".join(repr(k) for k in kw)
        raise TypeError(
            f"{self.fn.name}() takes its arguments by position ({self._names()}), got "
            f"keyword argument{'s' if len(kw) > 1 else ''} {names}"
        )

    def count(self, args) -> None:
        if len(args) != len(self.params):
            raise TypeError(
                f"{self.fn.name}() takes {len(self.params)} arguments ({self._names()}), "
                f"got {len(args)}"
            )

    def scalar(self, p: ir.Var, value):
        kind = p.dtype.kind
        if isinstance(value, bool) and kind is not DTypeKind.BOOL:
            raise TypeError(f"parameter {p.name!r} expects {p.dtype}, got bool")
        if kind is DTypeKind.FLOAT:
            if not isinstance(value, (int, float)):
                raise TypeError(
                    f"parameter {p.name!r} expects a number ({p.dtype}), got {type(value).__name__}"
                )
            return float(value)
        if not isinstance(value, int):
            raise TypeError(
                f"parameter {p.name!r} expects an int ({p.dtype}), got {type(value).__name__}"
            )
        lo, hi = _int_range(p.dtype)
        if not lo <= value <= hi:
            raise ValueError(f"parameter {p.name!r}: {value} does not fit in {p.dtype}")
        return int(value)

    def tensor(self, i: int, p: ir.Buffer, t):
        """Validate a tensor argument; returns it (torch) or a numpy view of it."""
        mod = type(t).__module__
        if mod.startswith("torch"):
            want = self.torch_dtypes()[i]
            if t.dtype != want:
                raise TypeError(f"parameter {p.name!r} expects dtype {p.dtype}, got {t.dtype}")
            if tuple(t.shape) != p.shape:
                raise ValueError(
                    f"parameter {p.name!r} expects shape {p.shape}, got {tuple(t.shape)}"
                )
            dev = t.device.type
            if dev != self.device:
                where = "a CUDA tensor" if self.device == "cuda" else "a CPU tensor"
                raise ValueError(
                    f"parameter {p.name!r} must be {where} for this target, got device {t.device}"
                )
            if dev == "cuda" and t.device.index != self.ordinal:
                raise ValueError(
                    f"parameter {p.name!r} must be on cuda:{self.ordinal}, where the kernel is "
                    f"loaded, got device {t.device}"
                )
            if not t.is_contiguous():
                raise ValueError(
                    f"parameter {p.name!r} must be contiguous (call .contiguous() first)"
                )
            return t
        if mod.startswith("numpy") and hasattr(t, "dtype") and hasattr(t, "shape"):
            if self.device == "cuda":
                raise TypeError(
                    f"parameter {p.name!r}: the cuda target takes torch CUDA "
                    f"tensors, got a numpy array"
                )
            want = p.dtype.np
            if t.dtype != want:
                raise TypeError(
                    f"parameter {p.name!r} expects dtype {p.dtype} (numpy {want}), got {t.dtype}"
                )
            if tuple(t.shape) != p.shape:
                raise ValueError(
                    f"parameter {p.name!r} expects shape {p.shape}, got {tuple(t.shape)}"
                )
            if not t.flags["C_CONTIGUOUS"] or not t.flags["WRITEABLE"]:
                raise ValueError(f"parameter {p.name!r} must be a writeable C-contiguous array")
            return t
        raise TypeError(f"parameter {p.name!r} expects a tensor, got {type(t).__name__}")


def _int_range(d):
    if d.kind is DTypeKind.BOOL:
        return 0, 1
    if d.kind is DTypeKind.UINT:
        return 0, 2**d.bits - 1
    return -(2 ** (d.bits - 1)), 2 ** (d.bits - 1) - 1


class Executable:
    """Common surface of compiled kernels."""

    def __init__(self, kernel, lowered: ir.Function, target, timings: dict):
        self.kernel = kernel
        self.lowered = lowered
        self.target = target
        self.timings = timings
        self.cache = CacheState.MISS
        self.name = lowered.name

    source: str | None = None
    ptx: str | None = None
    sass: str | None = None

    @property
    def stats(self) -> dict:
        return {"shared_bytes": self.lowered.shared_bytes}

    def script(self, lowered: bool = False) -> str:
        """The kernel's IR as readable text (``lowered=True``: after tile lowering)."""
        return print_function(self.lowered if lowered else self.kernel.ir)

    def twin(self, kernel, cache: CacheState | str, timings: dict) -> Executable:
        """Another handle on the same compiled code (lowered IR, binary, loaded module), with
        its own ``kernel``, ``cache``, ``timings`` and per-call state. ``tirx.compile`` keeps
        one twin per (kernel, target) and hands out twins of it on a repeat compile."""
        other = copy.copy(self)
        other.kernel, other.cache, other.timings = kernel, CacheState(cache), timings
        return other

    def __repr__(self) -> str:
        return f"<tirx.Executable {self.name} target={self.target} cache={self.cache}>"


class SimExecutable(Executable):
    """Runs the lowered kernel on the CPU simulator (torch CPU tensors or numpy arrays)."""

    def __init__(self, kernel, lowered, target, timings):
        super().__init__(kernel, lowered, target, timings)
        self.checker = ArgChecker(lowered, "cpu")
        self.last_run = None

    def twin(self, kernel, cache: CacheState | str, timings: dict) -> SimExecutable:
        other = super().twin(kernel, cache, timings)
        other.last_run = None
        return other

    def __call__(self, *args, trace: bool = False, stdout=None, **kw):
        if kw:
            self.checker.keywords(kw)
        self.checker.count(args)
        values = []
        for i, (p, a) in enumerate(zip(self.lowered.params, args)):
            if isinstance(p, ir.Var):
                values.append(self.checker.scalar(p, a))
                continue
            # sim.run writes in place into torch CPU tensors and numpy arrays alike
            values.append(self.checker.tensor(i, p, a))
        from . import sim

        result = sim.run(self.lowered, values, trace=trace, stdout=stdout or sys.stdout)
        self.last_run = result
        return result if trace else None
