"""Executables: what ``tirx.compile`` returns, for the simulator and (in backend/cuda) the GPU.

An executable checks its arguments against the kernel's parameters (count, dtype, shape,
device, contiguity) with messages that name the parameter, runs the kernel, and offers the
inspection surface: ``source``, ``ptx``, ``sass``, ``script()``, ``stats``, ``timings``,
``cache``.

Both targets take the same tensors. Dense (strided) tensors only: sparse, quantized, nested,
meta tensors and lazy conjugate/negative views are refused by name. A tensor the kernel only
reads may require grad. One it writes is refused, as torch refuses an in-place operation on it,
when it is a leaf that requires grad and grad mode is on (``LaunchError`` naming the parameter);
a non-leaf, or any tensor under ``torch.no_grad()``, is written in place unseen by autograd, as
any custom kernel writes it. Tensors that overlap in memory are refused when the kernel writes
one of them: the generated code declares every tensor pointer ``__restrict__``, so the GPU may
reorder the accesses of aliased tensors, and the simulator would then disagree with it.

Which tensors a kernel writes is read from its lowered program (:meth:`ArgChecker.written`,
by :func:`tirx.signature.effects`): stores, atomics, and PTX calls whose first (destination)
operand is a global address.
"""

from __future__ import annotations

import copy
import functools
import math
import numbers
import sys

from .dtypes import DTypeKind, StrKind
from .errors import LaunchError, TirxError
from .ir import nodes as ir
from .ir.printer import print_function

__all__ = ["Executable", "SimExecutable", "ArgChecker", "CacheState"]

# The smallest magnitude each float dtype rounds to an infinity (to nearest even): the largest
# finite value plus half a unit in its last place.
_OVERFLOW = {
    "float32": 2.0**128 * (1 - 2.0**-25),
    "float16": 65520.0,
    "bfloat16": 2.0**128 * (1 - 2.0**-9),
}


class CacheState(StrKind):
    """Where an executable's compiled code came from (``exe.cache``)."""

    HIT = "hit"  # a cache: this process's memory, or the disk cache for the cuda target
    MISS = "miss"  # built by this compile


class ArgChecker:
    """Checks call arguments against a function's parameters, prepared once per executable."""

    def __init__(self, fn: ir.Function, device: str, ordinal: int = 0, written=None):
        self.fn = fn
        self.device = device  # "cuda" or "cpu"
        self.ordinal = ordinal  # the CUDA device the kernel is loaded on (device "cuda" only)
        self.params = fn.params
        self._torch_dtypes = None
        # indices of the tensor parameters the kernel writes: found in fn's body unless given
        # (a saved kernel has no body: tirx/artifact.py)
        self._written = None if written is None else frozenset(written)

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

    def checked(self, args, kw=None) -> list:
        """Every argument checked (errors name the parameter), as the values to run with;
        tensors the kernel writes must not overlap another."""
        if kw:
            self.keywords(kw)
        self.count(args)
        values = [
            self.scalar(p, a) if isinstance(p, ir.Var) else self.tensor(i, p, a)
            for i, (p, a) in enumerate(zip(self.params, args))
        ]
        self.distinct(
            [(i, v) for i, (p, v) in enumerate(zip(self.params, values))
             if isinstance(p, ir.Buffer)]
        )  # fmt: skip
        return values

    def scalar(self, p: ir.Var, value):
        kind = p.dtype.kind
        if isinstance(value, bool) and kind is not DTypeKind.BOOL:
            raise TypeError(f"parameter {p.name!r} expects {p.dtype}, got bool")
        if kind is DTypeKind.FLOAT:
            if not isinstance(value, (int, float)) and not _number(value, numbers.Real):
                raise TypeError(
                    f"parameter {p.name!r} expects a number ({p.dtype}), got {type(value).__name__}"
                )
            value = float(value)
            if math.isfinite(value) and abs(value) >= float_overflow(p.dtype):
                raise ValueError(
                    f"parameter {p.name!r}: {value:g} overflows {p.dtype} (it would round to "
                    "an infinity; pass float('inf') for one)"
                )
            return value
        if not isinstance(value, int):
            if not _number(value, numbers.Integral):
                what = "a bool" if kind is DTypeKind.BOOL else f"an int ({p.dtype})"
                raise TypeError(f"parameter {p.name!r} expects {what}, got {type(value).__name__}")
            value = int(value)  # a numpy integer (np.int64(4)), as Python's int
        lo, hi = int_range(p.dtype)
        if not lo <= value <= hi:
            raise ValueError(f"parameter {p.name!r}: {value} does not fit in {p.dtype}")
        return int(value)

    def tensor(self, i: int, p: ir.Buffer, t):
        """Validate a tensor argument; returns it (torch; for the simulator detached from
        autograd, over the same memory) or the numpy array."""
        mod = type(t).__module__
        torch = sys.modules.get("torch")
        if not mod.startswith("torch") and torch is not None and isinstance(t, torch.Tensor):
            t = t.as_subclass(torch.Tensor)  # a subclass's: a plain tensor over the same memory
            mod = "torch"
        if mod.startswith("torch"):
            _torch_kind(p, t)
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
            if getattr(t, "requires_grad", False) and i in self.written():
                _writable_by_autograd(p, t)
            if dev == "cpu" and getattr(t, "requires_grad", False):
                return t.detach()  # the same memory; the simulator reads it through numpy
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
            if not t.flags["C_CONTIGUOUS"]:
                raise ValueError(f"parameter {p.name!r} must be a C-contiguous array "
                                 "(np.ascontiguousarray(x))")  # fmt: skip
            if not t.flags["WRITEABLE"] and i in self.written():
                raise ValueError(f"parameter {p.name!r} is a read-only array, and the kernel "
                                 "writes it: pass a writeable one (x.copy())")  # fmt: skip
            return t
        raise TypeError(f"parameter {p.name!r} expects a tensor, got {type(t).__name__}")

    def written(self) -> frozenset[int]:
        """Indices of the tensor parameters the kernel writes, found once from the lowered
        program by :func:`tirx.signature.effects` (stores, atomics, PTX calls whose destination
        is a global address), unless given (a saved kernel has no body)."""
        if self._written is None:
            from .signature import effects

            _, written = effects(self.fn)
            self._written = frozenset(i for i, p in enumerate(self.params) if p in written)
        return self._written

    def distinct(self, tensors) -> None:
        """Refuse checked tensor arguments (``(index, tensor)`` pairs) whose memory overlaps
        when the kernel writes one of them: the same tensor as input and output, or two views
        of one storage."""
        written = self.written()
        if not written:
            return
        spans = [(i, *_byte_range(t)) for i, t in tensors]
        for k, (i, lo, hi) in enumerate(spans):
            for j, lo2, hi2 in spans[k + 1 :]:
                if (i in written or j in written) and lo < hi2 and lo2 < hi:
                    a, b = self.params[i].name, self.params[j].name
                    w = a if i in written else b
                    raise ValueError(
                        f"parameters {a!r} and {b!r} overlap in memory (the same tensor, or "
                        f"views of one), and the kernel writes {w!r}: tensor parameters must "
                        f"not alias (the CUDA code declares them __restrict__); pass a "
                        f"separate tensor, e.g. {w}.clone(), and copy it back after the call"
                    )

    def distinct_pointers(self):
        """``distinct(*data_pointers) -> bool`` for the launcher's fast check, over the tensor
        parameters in order (their byte sizes are fixed by dtype and shape): False when two
        ranges overlap and the kernel writes one of them."""
        tensor_params = [(i, p) for i, p in enumerate(self.params) if isinstance(p, ir.Buffer)]
        written = self.written()
        sizes = [p.dtype.bits // 8 * _prod(p.shape) for _, p in tensor_params]
        pairs = [
            (k, n)
            for k, (i, _) in enumerate(tensor_params)
            for n, (j, _) in enumerate(tensor_params)
            if k < n and (i in written or j in written)
        ]

        def distinct(*ptrs) -> bool:
            for k, n in pairs:
                if ptrs[k] < ptrs[n] + sizes[n] and ptrs[n] < ptrs[k] + sizes[k]:
                    return False
            return True

        return distinct


def _prod(shape) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def _byte_range(t) -> tuple[int, int]:
    """``[first byte, one past the last)`` of a checked (contiguous) tensor or array."""
    if type(t).__module__.startswith("torch"):
        start = t.data_ptr()
        return start, start + t.numel() * t.element_size()
    start = t.__array_interface__["data"][0]
    return start, start + t.nbytes


def _writable_by_autograd(p: ir.Buffer, t) -> None:
    """Refuse a write into ``t`` where torch refuses an in-place operation: a leaf tensor that
    requires grad, with grad mode on."""
    import torch

    if t.is_leaf and torch.is_grad_enabled():
        raise LaunchError(
            f"parameter {p.name!r} is a leaf tensor that requires grad, and the kernel writes "
            f"it in place: autograd would not see the write (torch refuses in-place operations "
            f'on such tensors: "a leaf Variable that requires grad is being used in an '
            f'in-place operation")',
            hint=f"write into a tensor that does not require grad (e.g. "
            f"torch.empty_like({p.name})), or call the kernel under `with torch.no_grad():` if "
            f"the write is meant (as an optimizer step's is)",
        )


def _number(value, kind) -> bool:
    """A number of ``kind`` (numbers.Integral, numbers.Real) that is no array: a numpy scalar
    such as ``np.int64(4)`` or ``np.float32(0.5)`` (a 0-d array is not a number here)."""
    return isinstance(value, kind) and getattr(value, "shape", ()) == ()


def _torch_kind(p: ir.Buffer, t) -> None:
    """Refuse the torch tensors that are not dense data in memory, naming the fix. (Read
    with defaults: tensor-like objects from torch's own modules may lack some of these.)"""
    import torch

    if getattr(t, "is_nested", False):
        raise TypeError(
            f"parameter {p.name!r} expects a dense tensor, got a nested tensor; pass "
            f"torch.nested.to_padded_tensor(t, 0)"
        )
    if getattr(t, "layout", torch.strided) is not torch.strided:
        raise TypeError(
            f"parameter {p.name!r} expects a dense tensor, got a {t.layout} tensor; pass "
            f"t.to_dense()"
        )
    if getattr(t, "is_quantized", False):
        raise TypeError(
            f"parameter {p.name!r} expects a {p.dtype} tensor, got a quantized tensor "
            f"({t.dtype}); pass t.dequantize() or t.int_repr()"
        )
    if getattr(t, "is_meta", False):
        raise ValueError(
            f"parameter {p.name!r}: a meta tensor has no data to compute on; create it on a "
            f"real device (torch.empty(..., device='cpu' or 'cuda'))"
        )
    conj = getattr(t, "is_conj", bool)()
    if conj or getattr(t, "is_neg", bool)():
        view = "conjugate" if conj else "negative"
        raise ValueError(
            f"parameter {p.name!r} is a lazy {view} view (its memory holds the values before "
            f"the {view}); pass t.resolve_conj().resolve_neg()"
        )


def float_overflow(d) -> float:
    """The smallest magnitude a float dtype ``d`` rounds to an infinity (inf: none)."""
    return _OVERFLOW.get(d.name, float("inf"))


def int_range(d):
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
    # tirx.compile, set by tirx.compile on what it returns: how an executable compiles its
    # kernel for another target (the simulator's CUDA build, a saved file's other archs)
    compile_kernel = None

    @property
    def stats(self) -> dict:
        return {"shared_bytes": self.lowered.shared_bytes}

    @functools.cached_property
    def signature(self):
        """The kernel's parameters and which tensors it reads and writes
        (:class:`tirx.signature.Signature`)."""
        from .signature import Signature

        return Signature.of(self.lowered)

    @functools.cached_property
    def pointer_alignments(self) -> dict[str, int]:
        """Per tensor parameter whose accesses need more than its elements' own alignment, the
        multiple its data pointer must be (``T.vectorized`` vectors, ``cp.async`` sources,
        elements read in a wider dtype: tirx/ir/aligned_access.py), which the launcher and the
        simulator require."""
        from .ir.aligned_access import parameter_alignments

        fn = self.lowered
        found = zip(fn.params, parameter_alignments(fn))
        return {p.name: a.nbytes for p, a in found if a is not None}

    def save(self, path, archs=None):
        """Write this kernel as a self-contained file that ``tirx.load`` reads without its
        source or NVRTC: cubin and PTX for each of ``archs`` (default: the arch it was compiled
        for; a loaded kernel's, every arch it holds), signature, launch configuration
        (tirx/artifact.py). Returns the path."""
        from .artifact import save

        return save(self, path, archs)

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
    """Runs the lowered kernel on the CPU simulator (torch CPU tensors or numpy arrays).

    ``source``, ``ptx`` and ``sass`` are the CUDA build of the same lowered program for the
    arch the simulator models (``target.arch``, sm_90), made with NVRTC the first time one of
    them is read (no GPU needed), so that compiling for the simulator stays as quick as it is.

    A ``grid="sms"`` kernel's grid is fixed here: ``target.sms`` multiprocessors, else
    :data:`~tirx.target.SIM_SMS`; ``exe.lowered`` holds that grid.
    """

    def __init__(self, kernel, lowered, target, timings):
        if lowered.launch.sms_grid:  # grid="sms": the simulated GPU's multiprocessors
            from dataclasses import replace

            from .target import SIM_SMS

            sms = target.sms or SIM_SMS
            lowered = replace(lowered, launch=lowered.launch.resolved(sms))
        super().__init__(kernel, lowered, target, timings)
        self.checker = ArgChecker(lowered, "cpu")
        self.last_run = None

    def twin(self, kernel, cache: CacheState | str, timings: dict) -> SimExecutable:
        other = super().twin(kernel, cache, timings)
        other.last_run = None
        return other

    def launch_grid(self, ordinal: int = -1) -> tuple[int, int, int]:
        """The grid a run uses (as the cuda executable's): a ``grid="sms"`` kernel's x is
        the simulated multiprocessor count, rounded to whole clusters. ``ordinal`` is
        ignored (there is one simulated device)."""
        return self.lowered.launch.grid

    @property
    def source(self) -> str:
        return self.cuda_build().source

    @property
    def ptx(self) -> str:
        return self.cuda_build().ptx

    @property
    def sass(self) -> str | None:
        return self.cuda_build().sass

    def cuda_build(self) -> Executable:
        """The kernel compiled for ``cuda -arch=<the simulator's arch>``: what ``tirx.compile``
        returns for that target (it shares this executable's lowering, and its memo and disk
        cache make a second call a lookup). A named arch loads no module and asks the GPU nothing."""
        from .target import Target, TargetKind

        if self.compile_kernel is None:
            raise TirxError("this executable was not made by tirx.compile: it has no CUDA build")
        return self.compile_kernel(self.kernel, Target(TargetKind.CUDA, self.target.arch))

    def __call__(self, *args, trace: bool = False, stdout=None, budget=None, **kw):
        """Run on the simulator (writing the outputs in place); ``trace=True`` returns what
        the run did; ``budget``: seconds of wall-clock time it may take (``tirx.sim.run``)."""
        from . import sim

        values = self._checked(args, kw)
        result = sim.run(self.lowered, values, trace=trace, stdout=stdout or sys.stdout,
                         budget=budget)  # fmt: skip
        self.last_run = result
        return result if trace else None

    def profile(self, *args, stdout=None, **kw):
        """Run the kernel on ``args`` (writing its outputs, as a call does) and return what
        it executed, per source line: a :class:`tirx.sim.profile.SimProfile` (instructions
        by class, global sectors against the fewest possible, shared-memory wavefronts and
        bank-conflict replays, bytes per space; docs/profiling.md)."""
        from . import sim

        values = self._checked(args, kw)
        result = sim.run(self.lowered, values, stdout=stdout or sys.stdout, profile=True)
        self.last_run = result
        return result.profile

    def _checked(self, args, kw) -> list:
        """The run's values of ``args`` after the checks (errors name the parameter); sim.run
        writes in place into torch CPU tensors and numpy arrays alike."""
        return self.checker.checked(args, kw)
