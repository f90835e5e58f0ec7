"""Settings read from the environment: the only module in tirx that looks at ``os.environ``.

Every value is read when its function is called, never at import, so a test (or a notebook)
can change the environment and see the change at once.

=================  ====================================================================
``TIRX_CACHE_DIR`` directory of the on-disk compile cache (default ``$XDG_CACHE_HOME/tirx``,
                   else ``~/.cache/tirx``)
``TIRX_CACHE``     ``0`` (or ``false``/``off``/``no``) turns the on-disk cache off; the
                   per-process in-memory cache stays on
``TIRX_TARGET``    the default target (``"cuda"``, ``"sim"`` ...) when the caller names none
``TIRX_NATIVE_LAUNCH``  ``0`` (or ``false``/``off``/``no``): executables built from now on
                   launch through their Python runner, not the compiled one
``TIRX_SIM_BUDGET``  seconds of wall-clock time one simulator run may take before it stops
                   with a SimulationError (default 20; ``0`` or ``off``: no limit)
``CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM``  cuda-bindings' own setting (``1``: stream 0
                   is the per-thread default stream), which the compiled launch follows too
``TIRX_NCU``       the Nsight Compute command line (``ncu``) ``exe.profile`` runs, when it is
                   not on ``PATH`` nor in a CUDA toolkit tirx knows
``CUDA_HOME``, ``CUDA_PATH``  CUDA toolkit directories, searched for ``ncu`` (also
                   ``nsight-compute-*`` folders inside them)
=================  ====================================================================
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

__all__ = [
    "cache_dir", "cache_enabled", "default_target", "native_launch", "per_thread_default_stream",
    "sim_budget", "ncu_command", "cuda_homes",
]  # fmt: skip

_FALSE = {"0", "false", "off", "no"}


def cache_dir() -> Path:
    """The on-disk compile cache directory (not created here)."""
    explicit = os.environ.get("TIRX_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tirx"


def cache_enabled() -> bool:
    """False when ``TIRX_CACHE`` says off: compiled code is then kept in memory only."""
    return os.environ.get("TIRX_CACHE", "1").strip().lower() not in _FALSE


def default_target() -> str | None:
    """``$TIRX_TARGET`` when set and not empty, else None (the caller decides)."""
    value = os.environ.get("TIRX_TARGET", "").strip()
    return value or None


def native_launch() -> bool:
    """False when ``TIRX_NATIVE_LAUNCH`` says off: the compiled launch is not used."""
    return os.environ.get("TIRX_NATIVE_LAUNCH", "1").strip().lower() not in _FALSE


def per_thread_default_stream() -> bool:
    """cuda-bindings' ``CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM``: True when set and not
    ``0``, as cuda-bindings reads it."""
    value = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "").strip()
    return value not in ("", "0")


def sim_budget() -> float | None:
    """``$TIRX_SIM_BUDGET`` in seconds: None when unset or unreadable (the simulator's
    default applies), 0.0 for no limit (``0``, ``off``, ...)."""
    value = os.environ.get("TIRX_SIM_BUDGET", "").strip().lower()
    if not value:
        return None
    if value in _FALSE:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if seconds >= 0:
        return seconds
    _warn_once(f"TIRX_SIM_BUDGET={os.environ['TIRX_SIM_BUDGET']!r} is not a number of seconds "
               ">= 0 (or off); the simulator keeps its default budget")  # fmt: skip
    return None


@functools.cache
def _warn_once(message: str) -> None:
    import warnings

    warnings.warn(f"tirx: {message}", RuntimeWarning, stacklevel=4)


def ncu_command() -> str | None:
    """``$TIRX_NCU``: the path of Nsight Compute's ``ncu`` to use, or None when unset."""
    value = os.environ.get("TIRX_NCU", "").strip()
    return value or None


def cuda_homes() -> list[str]:
    """The CUDA toolkit directories ``$CUDA_HOME`` and ``$CUDA_PATH`` name (those set)."""
    found = [os.environ.get(k, "").strip() for k in ("CUDA_HOME", "CUDA_PATH")]
    return [d for d in dict.fromkeys(found) if d]
