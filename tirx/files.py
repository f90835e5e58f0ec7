"""Files and digests that every cache of tirx uses (the compile cache, NVRTC's version probe,
the front-end cache): reading a file only when it is a regular one, writing one atomically, and
sha256 without loading OpenSSL for small inputs. Nothing here knows what it stores."""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import sys
from pathlib import Path

__all__ = ["sha256", "read_regular", "write_atomic"]

# Inputs smaller than this are hashed by CPython's built-in sha256 while hashlib is not loaded.
_BUILTIN_MAX = 1 << 16


def sha256(data=b""):
    """``hashlib.sha256(data)``: the same digests, without loading OpenSSL for small inputs.

    ``import hashlib`` loads ``_hashlib`` and with it libcrypto, about 2 ms, in a process
    that only reads a kernel from the disk cache (it hashes a few kilobytes: the key's text and
    the entry's payload). CPython's own sha256 module loads at once; it is about five times
    slower per byte than OpenSSL's, so it serves inputs under 64 KiB while hashlib is not
    loaded, and hashlib (loaded on demand, or already loaded by the program) serves the rest.
    """
    if len(data) < _BUILTIN_MAX and "hashlib" not in sys.modules:
        return _builtin_sha256()(data)
    import hashlib

    return hashlib.sha256(data)


@functools.cache
def _builtin_sha256():
    """The sha256 constructor of CPython's built-in module (``_sha2`` on 3.12+, ``_sha256``
    on 3.11 and older); ``hashlib.sha256`` where neither exists (another Python)."""
    names = ("_sha2", "_sha256") if sys.version_info >= (3, 12) else ("_sha256", "_sha2")
    for name in names:  # the expected one first: a failed import searches the whole path
        try:
            return __import__(name).sha256
        except (ImportError, AttributeError):
            pass
    import hashlib

    return hashlib.sha256


def read_regular(path: str | os.PathLike, limit: int = 1 << 31) -> bytes | None:
    """The bytes of ``path`` when it is a regular file (a symbolic link to one counts) of at
    most ``limit`` bytes; None for anything else or when it cannot be read.

    The file is opened without blocking and checked with ``fstat`` before a byte is read, so a
    named pipe (whose open and read would wait for a writer forever), a device or a directory
    put where a cache entry belongs is skipped at once."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks, left = [], st.st_size
        while True:  # a regular file never blocks; read to its end (it may have grown)
            chunk = os.read(fd, max(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left = 0
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def write_atomic(final: Path, data: bytes) -> None:
    """Write ``data`` to ``final`` (in an existing directory) through a temporary file in the
    same directory renamed over it: readers see the old file, the new one, or none. The
    temporary file (``.<name prefix>-*.tmp``, readable by the user only) is removed if the
    write fails; OSError propagates."""
    import tempfile  # only a write needs it

    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name[:16]}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
