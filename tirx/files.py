"""Files and digests that every cache of tirx uses (the compile cache, NVRTC's version probe,
the front-end cache, the tuning store) and saved kernels: reading a file only when it is a
regular one, writing one atomically (private for a cache, shared for a saved kernel), and
sha256 without loading OpenSSL for small inputs, and an exclusive lock that is given up after a
bounded wait. Nothing here knows what it stores."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import sys
import time
from pathlib import Path

__all__ = [
    "sha256",
    "read_regular",
    "write_atomic",
    "write_temporary",
    "exclusive_lock",
    "lock_holder",
]

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


def read_regular(
    path: str | os.PathLike, limit: int = 1 << 31, head: int | None = None
) -> bytes | None:
    """The bytes of ``path`` when it is a regular file (a symbolic link to one counts) of at
    most ``limit`` bytes (only its first ``head`` bytes, when given); None for anything else or
    when it cannot be read.

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
        if head is not None:
            return os.read(fd, head)  # a regular file: one read gives what it has, up to head
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


def write_atomic(final: Path, data: bytes, *, shared: bool = False) -> None:
    """Write ``data`` to ``final`` (in an existing directory) through a temporary file in the
    same directory renamed over it: readers see the old file, the new one, or none. The
    temporary file is removed if the write fails; OSError propagates.

    By default the file is private (mode 0600), as a cache entry is. ``shared=True`` writes a
    file the user makes for others to read (a saved kernel): it gets the mode of the file it
    replaces, or, when new, the mode ``open`` gives (0666 less the umask); and when ``final``
    is a symbolic link, the link's target is replaced and the link stays."""
    mode = 0o600
    if shared:
        final, mode = _shared_target(Path(final))
    tmp = write_temporary(final, data, mode)
    try:
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _shared_target(final: Path) -> tuple[Path, int | None]:
    """The file to replace for ``final`` (the end of its chain of links) and the mode to keep
    (None: a new file, which gets the umask's). A loop of links is an OSError (ELOOP)."""
    if os.path.islink(final):
        final = Path(os.path.realpath(final))
        if os.path.islink(final):  # realpath stops where the links loop
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(final))
    try:
        st = os.stat(final)
    except FileNotFoundError:
        return final, None
    return final, (stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None)


def write_temporary(final: Path, data: bytes, mode: int | None = 0o600) -> str:
    """A new file holding ``data`` beside ``final`` (``.<name prefix>-*.tmp``), for the caller
    to rename over ``final`` (or remove); its path. Nothing is left behind when the write
    fails; OSError propagates. ``mode``: the file's permission bits (default 0600, readable by
    the user only); None: those ``open`` gives a new file (0666 less the umask).

    The file is made as ``tempfile.mkstemp`` makes one (a random name, created exclusively,
    not through a symbolic link, mode 0600 unless ``mode`` says otherwise), without importing ``tempfile``: its imports
    (``shutil``, ``random``, ``bz2``, ``lzma``) cost a cold compile's writing thread several
    milliseconds of CPU while NVRTC compiles beside it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    prefix = os.path.join(final.parent, f".{final.name[:16]}-")
    for _ in range(100):
        tmp = f"{prefix}{os.urandom(6).hex()}.tmp"
        try:
            fd = os.open(tmp, flags, 0o666 if mode is None else 0o600)
            break
        except FileExistsError:
            continue
    else:  # 100 collisions of 48 random bits: something else is wrong
        raise FileExistsError(f"no unused temporary name beside {final}")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if mode not in (None, 0o600):  # exact bits, whatever the umask
                os.chmod(f.fileno() if os.chmod in os.supports_fd else tmp, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


@contextlib.contextmanager
def exclusive_lock(path: Path, wait: float):
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the with-block, which
    gets True; False when another process held it for ``wait`` seconds (the block runs
    unlocked: the caller decides what to skip); None where no lock can be taken (no
    ``fcntl``, or ``path`` is not a regular file).

    Never waits longer than ``wait``: a process stopped while it holds the lock (a ``kill
    -STOP``, a debugger, a laptop's suspended terminal) keeps it for as long as it lives, and
    a blocking ``flock`` would wait that long. The holder writes its pid into the file, so that
    :func:`lock_holder` can name it in a message. The lock goes with the holder's process."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield None
        return
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        yield None
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            yield None
            return
        deadline, pause = time.monotonic() + wait, 0.001
        while not (held := _try_lock(fcntl, fd)):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(pause, left))
            pause = min(2 * pause, 0.05)
        if held:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield held
    finally:
        os.close(fd)  # releases the lock


def _try_lock(fcntl, fd: int) -> bool:
    """Take the exclusive flock on ``fd`` if no other process holds it; whether it is held."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def lock_holder(path: Path) -> int | None:
    """The pid the last holder of the lock at ``path`` wrote there, if it reads as one."""
    data = read_regular(path, limit=64)
    try:
        return int(data) if data else None
    except ValueError:
        return None
