"""``tirx.autotune``: pick the fastest of several configurations of a kernel factory, once.

    @tirx.autotune(configs=[{"warps": 1}, {"warps": 2}, {"warps": 4}, {"warps": 8}])
    def softmax(X, Y, *, warps):                # X, Y: TensorSpecs (shape, dtype, device)
        return make_softmax(*X.shape, X.dtype, warps=warps)

    softmax(x, y)                               # tunes for x's and y's shapes, then launches

The factory receives each argument as a :class:`~tirx.signature.TensorSpec` (tensors) or as
it is (scalars), and one configuration as keyword arguments (as given: a tuple stays a tuple);
it returns a ``@T.function`` kernel, which is launched with every argument, scalars included.
The choice is kept per *key*: the shapes and dtypes of the tensor arguments and the types of
the scalars (``key=`` adds a value of your own, computed from the arguments), on each device.

Tuning a key compiles each configuration in order for the arguments' device (CUDA tensors:
the GPU; CPU tensors: the simulator) and times it with :func:`tirx.bench` (warm-up, L2 flushed
before each sample, CUDA events, the median) on the given arguments: outputs are written in
place, so time with scratch outputs. A configuration whose factory or compile raises (a
ValueError, TypeError or TirxError: too much shared memory, a size that does not divide) or
whose launch fails is skipped with a :class:`TuningWarning` and a note in the report. Long
sweeps show a progress bar (tqdm: in a terminal and in a notebook).

The simulator cannot time a GPU. On CPU tensors the tuner says so (a TuningWarning) and takes
**the first configuration, in the given order, that compiles**, without compiling the rest.
``timer=`` replaces the clock: ``timer(exe, args) -> milliseconds`` (tests use a stand-in).

The winner is stored on disk (tirx's cache directory, ``autotune/``), one JSON file per key,
named by a hash of: the tuner's name, the device's name ("sim" for the simulator), the tirx
version, a hash of the factory's own code, a hash of the configuration space (the
configurations, in order) and the key. A later process with the same factory and space finds
it and does not tune again; changing the factory's code or any configuration changes the hash,
and the space is tuned anew. A stored winner that no longer builds is dropped (a
TuningWarning) and the key is tuned again.
"""

from __future__ import annotations

import copy
import json
import math
import sys
import threading
import types
import warnings
from dataclasses import dataclass

from .errors import LaunchError, TirxError
from .signature import TensorSpec, spec_of

__all__ = ["autotune", "Autotuner", "Trial", "TuningReport", "TuningError", "TuningWarning"]

STORE_FORMAT = 1
SIM_RULE = "the first configuration that compiles (the simulator cannot time a GPU)"


class TuningError(TirxError):
    """No configuration of an autotuned factory compiled (or ran)."""


class TuningWarning(UserWarning):
    """A configuration was skipped, or the simulator chose without timing."""


@dataclass(frozen=True)
class Trial:
    """One configuration's outcome: ``ms`` (None when it was not timed) and a ``note`` (why it
    was skipped, or how it was chosen)."""

    config: dict
    ms: float | None = None
    note: str | None = None


@dataclass(frozen=True)
class TuningReport:
    """How a key was decided: ``method`` ("timed", "timer", "first-compiles" or "stored"),
    the winner's index in the configurations, and every trial (none when "stored")."""

    key: tuple
    device: str
    method: str
    winner: int
    config: dict
    trials: tuple[Trial, ...] = ()

    def __str__(self) -> str:
        lines = [f"{self.device}, {self.method}: {self.config}"]
        for t in self.trials:
            ms = f"{t.ms:.4f} ms" if t.ms is not None else "-"
            lines.append(f"  {t.config}  {ms}" + (f"  ({t.note})" if t.note else ""))
        return "\n".join(lines)


def autotune(factory=None, /, *, configs, key=None, name=None, timer=None, warmup=25.0,
             rep=100.0, progress=None, persist=True):  # fmt: skip
    """An :class:`Autotuner` over ``factory`` and ``configs`` (a list of keyword dicts); used
    as a decorator (``@tirx.autotune(configs=...)``) or called with the factory."""

    def make(f):
        return Autotuner(f, configs, key=key, name=name, timer=timer, warmup=warmup, rep=rep,
                         progress=progress, persist=persist)  # fmt: skip

    return make if factory is None else make(factory)


class Autotuner:
    """A kernel factory with its configurations; calling it launches the chosen kernel."""

    def __init__(self, factory, configs, *, key=None, name=None, timer=None, warmup=25.0,
                 rep=100.0, progress=None, persist=True):  # fmt: skip
        if not callable(factory):
            raise TypeError(f"autotune: factory must be a function, got {type(factory).__name__}")
        if key is not None and not callable(key):
            raise TypeError("autotune: key must be a function of the arguments, or None")
        if timer is not None and not callable(timer):
            raise TypeError("autotune: timer must be a function (exe, args) -> ms, or None")
        self.factory = factory
        self.configs = _check_configs(configs)
        self.space = json.dumps(self.configs, sort_keys=True, separators=(",", ":"))
        self.space_hash = _sha256(self.space)[:16]
        self.code_hash = _code_hash(factory)
        self.name = name or f"{factory.__module__}.{factory.__qualname__}"
        self.key_fn, self.timer, self.persist = key, timer, persist
        self.warmup, self.rep, self.progress = warmup, rep, progress
        self.reports: dict[tuple, TuningReport] = {}  # by (device, key)
        self._exes: dict = {}
        self._lock = threading.RLock()

    def __call__(self, *args):
        """Launch the chosen configuration's kernel on ``args`` (tuning the key first)."""
        return self.executable(*args)(*args)

    def executable(self, *args):
        """The compiled kernel of the chosen configuration for ``args``."""
        report = self.report(*args)
        return self._compile(args, report.winner)

    def best_config(self, *args) -> dict:
        return dict(self.report(*args).config)

    def key(self, *args) -> tuple:
        """What the choice is kept by: the tensor arguments' shapes and dtypes, the scalars'
        types, and ``key(*args)`` when given."""
        parts = []
        for a in args:
            s = spec_of(a)
            parts.append((s.shape, s.dtype) if isinstance(s, TensorSpec) else type(a).__name__)
        if self.key_fn is not None:
            parts.append(_key_value(self.key_fn(*args), self.key_fn))
        return tuple(parts)

    def report(self, *args) -> TuningReport:
        """How the configuration for ``args`` was chosen: from this process, from the disk,
        or by tuning now. Choices are kept per device (its name; "sim" for the simulator)."""
        k, device = self.key(*args), _device_name(args)
        found = self.reports.get((device, k))
        if found is not None:
            return found
        with self._lock:
            found = self.reports.get((device, k))
            if found is None:
                found = self._stored(k, device, args) or self._tune(k, device, args)
            self.reports[(device, k)] = found
            return found

    def tune(self, *args) -> TuningReport:
        """Tune the key of ``args`` now (even when a choice is known) and store the result."""
        with self._lock:
            return self._tune(self.key(*args), _device_name(args), args)

    def _tune(self, k, device, args) -> TuningReport:
        from . import tuning_store

        report = self._sweep(k, device, args)
        self.reports[(device, k)] = report
        if self.persist:
            tuning_store.save(self, device, report)
        return report

    def _stored(self, k, device, args) -> TuningReport | None:
        """The winner stored on disk, when there is one and it still builds; a stored winner
        whose factory or compile now raises (the factory was edited) is dropped with a
        :class:`TuningWarning`, and the key is tuned again."""
        if not self.persist:
            return None
        from . import tuning_store

        winner = tuning_store.load(self, device, k)
        if winner is None:
            return None
        try:
            self._compile(args, winner)
        except (TirxError, ValueError, TypeError) as err:
            tuning_store.forget(self, device, k)
            _warn(f"tirx.autotune({self.name}): the stored choice {self.configs[winner]} for {k} "
                  f"on {device} no longer builds ({type(err).__name__}: {_first_line(err)}); "
                  "its record is dropped and the configurations are tuned again")  # fmt: skip
            return None
        return TuningReport(k, device, "stored", winner, self.configs[winner])

    def _sweep(self, k, device, args) -> TuningReport:
        timer, method = self.timer, "timer"
        if timer is None and _on_cuda(args):
            timer, method = self._bench, "timed"
        elif timer is None:
            method = "first-compiles"
        self._check_call(args)
        trials, best, best_ms = [], None, None
        for i, config in enumerate(self._bar(device)):
            try:
                exe = self._compile(args, i)
            except (TirxError, ValueError, TypeError) as err:
                trials.append(self._skip(config, "does not compile", err))
                continue
            if timer is None:
                trials.append(Trial(config, None, f"chosen: {SIM_RULE}"))
                _warn(
                    f"tirx.autotune({self.name}): the simulator cannot time a GPU; "
                    f"chose {SIM_RULE.split(' (')[0]}: {config}"
                )
                best = i
                break
            try:
                ms = _milliseconds(timer(exe, args), self.name, config)
            except (LaunchError, TirxError) as err:
                trials.append(self._skip(config, "does not run", err))
                continue
            if not 0 <= ms < math.inf:  # a NaN would win every comparison it came first in
                trials.append(self._skip(config, "has no time", ValueError(f"the timer gave {ms}")))
                continue
            trials.append(Trial(config, ms))
            if best_ms is None or ms < best_ms:
                best, best_ms = i, ms
        if best is None:
            notes = "; ".join(f"{t.config}: {t.note}" for t in trials)
            raise TuningError(f"tirx.autotune({self.name}): no configuration compiled and ran "
                              f"for {k}: {notes}")  # fmt: skip
        return TuningReport(k, device, method, best, self.configs[best], tuple(trials))

    def _check_call(self, args) -> None:
        """A call whose arguments the factory cannot take is the caller's mistake, told once,
        rather than every configuration failing to compile."""
        import inspect

        try:
            signature = inspect.signature(self.factory)
        except (TypeError, ValueError):  # no signature to read: the sweep will tell
            return
        specs = tuple(spec_of(a) for a in args)
        try:
            signature.bind(*specs, **self.configs[0])
        except TypeError as e:
            if "missing" in str(e) or "too many positional" in str(e):
                raise TypeError(f"tirx.autotune({self.name}): called with {len(args)} "
                                f"argument(s), which the factory does not take: {e}") from None  # fmt: skip

    def _skip(self, config, why, err) -> Trial:
        text = f"skipped: {why}: {type(err).__name__}: {_first_line(err)}"
        _warn(f"tirx.autotune({self.name}): configuration {config} {text}")
        return Trial(config, None, text)

    def _bench(self, exe, args) -> float:
        from .timing import bench

        return bench(exe, *args, warmup=self.warmup, rep=self.rep).median_ms

    def _compile(self, args, index: int):
        specs = tuple(spec_of(a) for a in args)
        target = "cuda" if _on_cuda(args) else "sim"
        memo_key = (tuple(_hashable(s) for s in specs), index, target)
        exe = self._exes.get(memo_key)
        if exe is None:
            from .compile import compile as tirx_compile

            kernel = self.factory(*specs, **self.configs[index])
            exe = self._exes[memo_key] = tirx_compile(kernel, target)
        return exe

    def _bar(self, device):
        show = self.progress
        if show is None:
            show = len(self.configs) > 1 and _interactive()
        if not show:
            return self.configs
        from tqdm.auto import tqdm

        return tqdm(self.configs, desc=f"tuning {self.name.rsplit('.', 1)[-1]} on {device}",
                    unit="config", leave=False)  # fmt: skip


def _key_value(value, fn):
    """``key=``'s answer as the choice is kept by: lists as tuples (the disk store reads JSON
    back as lists), anything unhashable a TypeError naming ``key=``."""
    if isinstance(value, list):
        value = tuple(_key_value(v, fn) for v in value)
    try:
        hash(value)
    except TypeError:
        name = getattr(fn, "__name__", repr(fn))
        raise TypeError(f"autotune: key={name} returned {value!r}, which cannot key a choice: "
                        "return a hashable value (a number, a string, a tuple of them)") from None  # fmt: skip
    return value


def _milliseconds(value, name: str, config) -> float:
    """A timer's answer as a float, or a TypeError that names the timer: a number (numpy's
    and a one-element tensor too), not a bool or a string that float() would read."""
    if not isinstance(value, (str, bytes, bool)):
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    raise TypeError(f"tirx.autotune({name}): the timer returned {value!r} for {config}; it "
                    "must return the time in milliseconds (a number)")  # fmt: skip


def _check_configs(configs) -> list[dict]:
    if isinstance(configs, dict) or not isinstance(configs, (list, tuple)) or not configs:
        raise TypeError("autotune: configs must be a non-empty list of dicts of keyword arguments")
    out = []
    for i, c in enumerate(configs):
        if not isinstance(c, dict) or not all(isinstance(k, str) for k in c):
            raise TypeError(
                f"autotune: configs[{i}] must be a dict of keyword arguments, got {c!r}"
            )
        try:
            json.dumps(c)
        except (TypeError, ValueError):
            raise TypeError(f"autotune: configs[{i}] = {c!r}: values must be numbers, strings, "
                            f"bools, None, or lists of them (they are stored as JSON)") from None  # fmt: skip
        out.append(copy.deepcopy(c))  # as given (a tuple stays a tuple); the store compares JSON
    if len({json.dumps(c, sort_keys=True) for c in out}) != len(out):
        raise ValueError("autotune: configs holds the same configuration twice")
    return out


def _hashable(v):
    return v if isinstance(v, (TensorSpec, int, float, bool, str, type(None))) else repr(v)


def _warn(text: str) -> None:
    """A :class:`TuningWarning` attributed to the first caller outside this module."""
    frame, level = sys._getframe(0), 1
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame, level = frame.f_back, level + 1
    warnings.warn(text, TuningWarning, stacklevel=level)


def _first_line(err) -> str:
    return (str(err).splitlines() or [""])[0]


def _code_hash(factory) -> str | None:
    """A hash of the factory's own code (bytecode, names and constants, nested functions
    included; not the functions it calls), or None for a callable without Python code."""
    import inspect

    try:
        code = getattr(inspect.unwrap(factory), "__code__", None)
    except ValueError:  # a cycle of __wrapped__
        code = None
    if not isinstance(code, types.CodeType):
        return None
    return _sha256(_code_text(code))[:16]


def _code_text(code: types.CodeType) -> str:
    consts = ",".join(_const_text(c) for c in code.co_consts)
    return f"{code.co_code.hex()}|{code.co_names!r}|{consts}"


def _const_text(c) -> str:
    """A constant as text that is the same in every process (a frozenset's order is not)."""
    if isinstance(c, types.CodeType):
        return f"code({_code_text(c)})"
    if isinstance(c, tuple):
        return "(" + ",".join(_const_text(v) for v in c) + ")"
    if isinstance(c, frozenset):
        return "{" + ",".join(sorted(_const_text(v) for v in c)) + "}"
    return f"{type(c).__name__}:{c!r}"


def _on_cuda(args) -> bool:
    return any(getattr(getattr(a, "device", None), "type", None) == "cuda" for a in args)


def _device_name(args) -> str:
    if not _on_cuda(args):
        return "sim"
    import torch

    index = torch.cuda.current_device()
    name = _NAMES.get(index)
    if name is None:
        name = _NAMES[index] = torch.cuda.get_device_name(index)
    return name


_NAMES: dict[int, str] = {}  # device index -> name (asked of torch once)


def _interactive() -> bool:
    """A terminal, or a notebook's kernel (asked of IPython only when it is loaded already)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if type(shell).__name__ == "ZMQInteractiveShell":
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()
