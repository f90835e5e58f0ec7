"""A content-addressed compile cache: in memory per process, and one file per key on disk.

The key is the sha256 of everything that decides the compiler's output (generated source,
NVRTC options including the arch, NVRTC version, tirx codegen version). An entry on disk is

    header: magic, format version, key, sha256 of the payload, the three payload lengths
    payload: PTX (utf-8) + CUBIN + metadata JSON (log, options, nvrtc_ms, stats)

Writes go to a temporary file in the cache directory and are renamed over the entry
(``os.replace`` is atomic), so a reader sees a whole old entry, a whole new one, or nothing,
and two processes writing the same key both succeed. Reads check magic, version, key, lengths
and checksum: a corrupt, truncated or foreign file is a miss (and the next ``put`` overwrites
it), never a result. The disk is an optimization: a failed write only warns. Only regular
files are read (:func:`read_regular`): a named pipe, device or directory where an entry
should be is a miss, never a blocking read.
"""

from __future__ import annotations

import ast
import contextlib
import os
import struct
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from tirx import config

from ...files import read_regular, sha256, write_atomic
from .nvrtc import NvrtcOutput

__all__ = [
    "CompileCache",
    "cache_key",
    "default_cache",
    "FORMAT_VERSION",
]

MAGIC = b"TIRXCUBN"
FORMAT_VERSION = 2  # 2: metadata written as a Python literal (was JSON)
_HEADER = struct.Struct("<8sI64s32sQQQ")  # magic, version, key, sha256(payload), 3 lengths
_SUFFIX = ".entry"


def cache_key(
    source: str,
    options: Sequence[str],
    arch: str,
    nvrtc_version: Sequence[int],
    codegen_version: str | int,
) -> str:
    """sha256 hex digest naming one compile: same inputs, same key, across processes.
    ``options`` is the whole NVRTC command line that runs (:func:`nvrtc.command_line`).

    The hashed text is the ``repr`` of a tuple of strings and ints, which Python writes the
    same way in every process and version."""
    blob = repr(
        (
            "tirx-compile",
            FORMAT_VERSION,
            source,
            tuple(str(o) for o in options),
            arch,
            tuple(int(v) for v in nvrtc_version),
            str(codegen_version),
        )
    )
    return sha256(blob.encode()).hexdigest()


def _encode(key: str, out: NvrtcOutput) -> bytes:
    ptx = out.ptx.encode()
    # A Python literal, read back with ast.literal_eval (which evaluates nothing else): the
    # process that reads a warm entry then needs no json module.
    meta = repr(
        {
            "log": out.log,
            "options": list(out.options),
            "nvrtc_ms": float(out.nvrtc_ms),
            "stats": out._stats,  # None: not measured yet (measured on first use)
            "arch": out._arch,
        }
    ).encode()
    payload = ptx + out.cubin + meta
    digest = sha256(payload).digest()
    header = _HEADER.pack(
        MAGIC, FORMAT_VERSION, key.encode(), digest, len(ptx), len(out.cubin), len(meta)
    )
    return header + payload


def _decode(key: str, data: bytes) -> NvrtcOutput | None:
    """The entry in ``data`` if it is whole, ours, of this format and for ``key``; else None."""
    if len(data) < _HEADER.size:
        return None
    magic, version, k, digest, n_ptx, n_cubin, n_meta = _HEADER.unpack_from(data)
    if magic != MAGIC or version != FORMAT_VERSION or k != key.encode():
        return None
    payload = memoryview(data)[_HEADER.size :]
    if len(payload) != n_ptx + n_cubin + n_meta or sha256(payload).digest() != digest:
        return None
    try:
        ptx = bytes(payload[:n_ptx]).decode()
        cubin = bytes(payload[n_ptx : n_ptx + n_cubin])
        meta = ast.literal_eval(bytes(payload[n_ptx + n_cubin :]).decode())
        return NvrtcOutput(
            ptx,
            cubin,
            meta["log"],
            tuple(meta["options"]),
            float(meta["nvrtc_ms"]),
            stats=meta["stats"],
            arch=meta["arch"],
        )
    except (ValueError, KeyError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


class CompileCache:
    """Compiled outputs by key: a dict, backed by a directory unless the disk cache is off.

    ``directory=None`` follows :func:`tirx.config.cache_dir` (read at each use);
    ``disk=None`` follows :func:`tirx.config.cache_enabled`.
    """

    def __init__(self, directory: str | os.PathLike | None = None, *, disk: bool | None = None):
        self._directory = Path(directory) if directory is not None else None
        self._disk = disk
        self._memory: dict[str, NvrtcOutput] = {}
        self._warned = False

    @property
    def directory(self) -> Path:
        return self._directory if self._directory is not None else config.cache_dir()

    @property
    def disk_enabled(self) -> bool:
        return self._disk if self._disk is not None else config.cache_enabled()

    def path(self, key: str) -> Path:
        """Where the entry for ``key`` lives on disk (whether or not it exists)."""
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"not a cache key (64 lowercase hex digits): {key!r}")
        return self.directory / (key + _SUFFIX)

    def get(self, key: str) -> NvrtcOutput | None:
        """The entry for ``key`` from memory, else from disk when it verifies; else None."""
        hit = self._memory.get(key)
        if hit is not None or not self.disk_enabled:
            return hit
        data = read_regular(self.path(key))
        if data is None:
            return None
        out = _decode(key, data)
        if out is not None:
            self._memory[key] = out
        return out

    def put(self, key: str, out: NvrtcOutput) -> None:
        """Store ``out`` under ``key`` in memory and (atomically) on disk."""
        self._memory[key] = out
        if not self.disk_enabled:
            return
        final = self.path(key)
        try:
            final.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_atomic(final, _encode(key, out))
        except OSError as e:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"tirx: compile cache not written to {final.parent}: {e}",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def get_or_compile(
        self, key: str, compile_fn: Callable[[], NvrtcOutput]
    ) -> tuple[NvrtcOutput, str]:
        """``(entry, "hit")`` when cached, else ``(compile_fn(), "miss")`` after storing it."""
        out = self.get(key)
        if out is not None:
            return out, "hit"
        out = compile_fn()
        self.put(key, out)
        return out, "miss"

    def clear(self) -> None:
        """Forget every entry, in memory and on disk (only files this cache wrote)."""
        self._memory.clear()
        try:
            names = os.listdir(self.directory)
        except OSError:
            return
        for name in names:
            if name.endswith(_SUFFIX) or (name.startswith(".") and name.endswith(".tmp")):
                with contextlib.suppress(OSError):
                    os.unlink(self.directory / name)

    def __len__(self) -> int:
        return len(self._memory)

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None


_DEFAULT: CompileCache | None = None


def default_cache() -> CompileCache:
    """The process-wide cache (directory and on/off follow :mod:`tirx.config` at each use)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = CompileCache()
    return _DEFAULT
