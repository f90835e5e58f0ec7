"""Capture what C code writes to the process's standard output (file descriptor 1).

A CUDA kernel's ``printf`` text is written by the driver into the process's C ``stdout`` when
the device synchronizes, below Python's ``sys.stdout``; a notebook cell would not show it (or
would show it late, in another cell). :func:`c_stdout` points descriptor 1 at a temporary file
around the launch and the synchronize, then gives the text back so the magic can print it in
the cell.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile

__all__ = ["Captured", "c_stdout"]


class Captured:
    """The text captured by :func:`c_stdout` (filled in when the block ends)."""

    text: str = ""


def _flush_c_stdio() -> None:
    try:
        ctypes.CDLL(None).fflush(None)  # flush every C stdio stream, stdout included
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def c_stdout():
    """``with c_stdout() as cap: ...`` — everything written to fd 1 meanwhile (C ``printf``,
    ``os.write(1, ...)``, the CUDA driver's printf buffer) ends up in ``cap.text``.

    Python's ``sys.stdout`` is flushed before, so earlier text is not captured by mistake; C's
    stdio buffers are flushed before and after, so text still buffered in C is not lost.
    """
    captured = Captured()
    for stream in (sys.stdout, sys.__stdout__):
        with contextlib.suppress(Exception):
            stream.flush()
    _flush_c_stdio()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            yield captured
        finally:
            _flush_c_stdio()
            with contextlib.suppress(Exception):
                sys.__stdout__.flush()
            os.dup2(saved, 1)
            os.close(saved)
            tmp.seek(0)
            captured.text = tmp.read().decode("utf-8", errors="replace")
