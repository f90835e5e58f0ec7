"""Where ``tirx.autotune`` keeps its winners: one JSON file per key in tirx's cache directory.

``<cache dir>/autotune/<sha256>.json``, the hash taken over the record's identity: the tuner's
name, the device's name, the tirx version, the hash of the factory's code, the hash of the
configuration space and the key. The file repeats that identity in readable form with the
winner's index and configuration and every trial, so ``cat`` shows what was measured. A file
that does not parse (nested too deeply included), is of another format or disagrees with the
identity it is found under is ignored (and replaced after the next tuning); one whose winner
no longer builds is removed by the tuner (:func:`forget`). Writes go through a temporary file
renamed over the old one, so a reader sees a whole record or none; nothing is written when the
disk cache is off (``TIRX_CACHE=0``).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from . import config

__all__ = ["path_of", "save", "load", "forget"]

FORMAT = 1


def _identity(tuner, device: str, key) -> dict:
    from .version import __version__

    return {
        "tuner": tuner.name,
        "device": device,
        "tirx": __version__,
        "code": tuner.code_hash,
        "space": tuner.space_hash,
        "key": json.loads(json.dumps(key, default=repr)),
    }


def path_of(tuner, device: str, key) -> Path:
    """The file that holds (or would hold) the winner for ``key`` on ``device``."""
    import hashlib

    text = json.dumps(_identity(tuner, device, key), sort_keys=True)
    return config.cache_dir() / "autotune" / (hashlib.sha256(text.encode()).hexdigest() + ".json")


def save(tuner, device: str, report) -> None:
    """Store ``report``'s winner (a failed write only warns: the disk is an optimization)."""
    if not config.cache_enabled():
        return
    from .files import write_atomic

    record = {
        "format": FORMAT,
        **_identity(tuner, device, report.key),
        "configs": tuner.configs,
        "method": report.method,
        "winner": report.winner,
        "config": report.config,
        "trials": [{"config": t.config, "ms": t.ms, "note": t.note} for t in report.trials],
    }
    path = path_of(tuner, device, report.key)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(path, (json.dumps(record, indent=1) + "\n").encode())
    except OSError as e:
        warnings.warn(f"tirx.autotune: could not store the result in {path}: {e}", stacklevel=3)


def load(tuner, device: str, key) -> int | None:
    """The index in ``tuner.configs`` of the stored winner for ``key``, or None."""
    if not config.cache_enabled():
        return None
    from .files import read_regular

    data = read_regular(path_of(tuner, device, key), limit=1 << 24)
    if data is None:
        return None
    try:
        record = json.loads(data)
        ok = record["format"] == FORMAT and all(
            record[k] == v for k, v in _identity(tuner, device, key).items()
        )
        winner = record["winner"]
        ok = ok and isinstance(winner, int) and 0 <= winner < len(tuner.configs)
        ok = ok and record["config"] == _as_json(tuner.configs[winner])  # a tuple reads as a list
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: nested too deeply
        return None
    if not ok:
        return None
    return winner


def forget(tuner, device: str, key) -> None:
    """Remove the record for ``key`` on ``device``, if there is one (a failure is ignored: the
    next tuning replaces it)."""
    try:
        path_of(tuner, device, key).unlink(missing_ok=True)
    except OSError:
        pass


def _as_json(value):
    return json.loads(json.dumps(value))
