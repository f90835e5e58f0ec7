"""``tirx.bench``: how long a kernel takes on the GPU, measured the same way every time.

The method (what :func:`measure` does, with CUDA events as its clock):

1. one call, so that loading, the runner's first build and any lazy work are done;
2. an estimate: five calls between two events, averaged;
3. warm-up: enough calls to fill ``warmup`` milliseconds (at least one), so that clocks and
   caches settle;
4. samples: enough to fill ``rep`` milliseconds (at least ``min_samples``, at most
   ``max_samples``). Before each sample a buffer twice the size of the L2 cache is written
   (``flush_l2``), so no sample finds its inputs in L2 from the one before; then an event, the
   call, an event. All of it is queued on the current stream and read after one
   synchronization, so the host's own speed does not enter the samples;
5. the result keeps every sample: the median is the figure to quote (robust to the odd slow
   sample), with the minimum, the mean and any percentile beside it.

Every call gets the same arguments, so a kernel writes the same output tensor each time. The
simulator cannot time a GPU: ``bench`` on a ``target="sim"`` executable raises
:class:`TimingError`, and so does a machine without a CUDA GPU.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .errors import TirxError

__all__ = ["bench", "measure", "BenchResult", "TimingError", "CudaTimer"]


class TimingError(TirxError):
    """A kernel cannot be timed here (the simulator, or no CUDA GPU)."""


@dataclass(frozen=True)
class BenchResult:
    """Every sample of one :func:`bench` run (milliseconds), and how they were taken."""

    name: str
    samples_ms: tuple[float, ...]
    warmup_calls: int
    flushed_l2: bool

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.samples_ms)

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)

    @property
    def max_ms(self) -> float:
        return max(self.samples_ms)

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0..100) of the samples, interpolated between the two
        nearest ones (numpy's default rule)."""
        if not 0 <= q <= 100:
            raise ValueError(f"percentile: q must be in 0..100, got {q}")
        s = sorted(self.samples_ms)
        pos = (len(s) - 1) * q / 100
        lo, hi = math.floor(pos), math.ceil(pos)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    def summary(self) -> dict:
        """The figures as a dict (for tables and JSON)."""
        return {
            "name": self.name, "median_ms": self.median_ms, "min_ms": self.min_ms,
            "mean_ms": self.mean_ms, "p20_ms": self.percentile(20),
            "p80_ms": self.percentile(80), "samples": len(self.samples_ms),
            "warmup_calls": self.warmup_calls, "flushed_l2": self.flushed_l2,
        }  # fmt: skip

    def __str__(self) -> str:
        def t(ms: float) -> str:
            return f"{ms * 1e3:.2f} us" if ms < 1 else f"{ms:.3f} ms"

        flushed = "L2 flushed" if self.flushed_l2 else "L2 not flushed"
        return (
            f"{self.name}: median {t(self.median_ms)} (min {t(self.min_ms)}, p20 "
            f"{t(self.percentile(20))}, p80 {t(self.percentile(80))}, mean {t(self.mean_ms)}; "
            f"{len(self.samples_ms)} samples, {flushed})"
        )


class CudaTimer:
    """The clock of :func:`measure` on a CUDA device: events on torch's current stream, and
    an L2 flush that zeroes a buffer twice the size of the device's L2 cache."""

    def __init__(self, flush_l2: bool = True):
        import torch

        self._torch = torch
        self.flush_l2 = flush_l2
        self._buffer = None
        if flush_l2:
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            nbytes = max(2 * int(getattr(props, "L2_cache_size", 0)), 64 << 20)
            self._buffer = torch.empty(nbytes, dtype=torch.int8, device="cuda")

    def flush(self) -> None:
        if self._buffer is not None:
            self._buffer.zero_()

    def event(self):
        e = self._torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def elapsed(self, start, end) -> float:
        return start.elapsed_time(end)

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()


def measure(call, timer, *, warmup: float = 25.0, rep: float = 100.0, min_samples: int = 10,
            max_samples: int = 1000, name: str = "kernel") -> BenchResult:  # fmt: skip
    """Time ``call()`` with ``timer`` (a :class:`CudaTimer`, or any object with ``flush()``,
    ``event()``, ``elapsed(start, end) -> ms`` and ``synchronize()``) by the method of the
    module docstring; ``warmup`` and ``rep`` in milliseconds."""
    _check_counts(warmup, rep, min_samples, max_samples)
    call()
    timer.synchronize()
    start = timer.event()
    for _ in range(5):
        call()
    end = timer.event()
    timer.synchronize()
    estimate = max(timer.elapsed(start, end) / 5, 1e-6)
    n_warmup = max(1, math.ceil(warmup / estimate))
    n_samples = min(max(math.ceil(rep / estimate), min_samples), max_samples)
    for _ in range(n_warmup):
        call()
    marks = []
    for _ in range(n_samples):
        timer.flush()
        begin = timer.event()
        call()
        marks.append((begin, timer.event()))
    timer.synchronize()
    samples = tuple(timer.elapsed(a, b) for a, b in marks)
    flushed = bool(getattr(timer, "flush_l2", True))
    return BenchResult(name, samples, n_warmup, flushed)


def _check_counts(warmup, rep, min_samples, max_samples) -> None:
    """The arguments of :func:`measure` and :func:`bench`, checked before anything runs."""
    for arg, value in (("warmup", warmup), ("rep", rep)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not 0 <= value < math.inf:  # NaN and infinity too
            raise ValueError(f"{arg} must be a finite number of milliseconds >= 0, got {value!r}")
    for arg, value in (("min_samples", min_samples), ("max_samples", max_samples)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{arg} must be an int, got {value!r}")
    if not 1 <= min_samples <= max_samples:
        raise ValueError(f"need 1 <= min_samples <= max_samples, got {min_samples}, {max_samples}")


def bench(fn, *args, warmup: float = 25.0, rep: float = 100.0, flush_l2: bool = True,
          min_samples: int = 10, max_samples: int = 1000) -> BenchResult:  # fmt: skip
    """Time ``fn(*args)`` on the GPU (a cuda executable, a loaded kernel, a torch op or any
    function that launches on torch's current stream): see the module docstring."""
    if not callable(fn):
        raise TypeError(f"bench: fn must be a kernel or a function, got {type(fn).__name__}")
    _check_counts(warmup, rep, min_samples, max_samples)  # before a GPU is asked anything
    target = getattr(fn, "target", None)
    if target is not None and getattr(target, "kind", None) == "sim":
        raise TimingError(
            f"bench: {fn.name!r} runs on the simulator, which cannot time a GPU",
            hint='compile it for the GPU, tirx.compile(kernel, "cuda"), on a machine with one',
        )
    if not _cuda_available():
        raise TimingError(
            "bench: no CUDA GPU is visible, so nothing can be timed",
            hint="run on a GPU machine; on the CPU the simulator checks what a kernel computes",
        )
    name = getattr(fn, "name", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return measure(lambda: fn(*args), CudaTimer(flush_l2), warmup=warmup, rep=rep,
                   min_samples=min_samples, max_samples=max_samples, name=str(name))  # fmt: skip


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()
