"""Test helpers: define kernels from source text in a real file (so errors show its lines)."""

from __future__ import annotations

import itertools
import linecache
import textwrap
from pathlib import Path

_counter = itertools.count()

PRELUDE = """\
import tirx
from tirx import T
from tirx.layout import S, R, TileLayout, ComposeLayout, laneid, warpid, m
"""


def define(source: str, tmp_dir: Path, name: str | None = None, **scope):
    """Execute ``PRELUDE + source`` from a file in ``tmp_dir``; return the namespace, or the
    object called ``name`` in it."""
    text = PRELUDE + textwrap.dedent(source)
    path = Path(tmp_dir) / f"kernel_{next(_counter)}.py"
    path.write_text(text)
    linecache.checkcache(str(path))
    ns = {"__name__": path.stem, **scope}
    exec(compile(text, str(path), "exec"), ns)
    return ns[name] if name else ns


def caret_line(message: str) -> str:
    """The source line an error message quotes (the line above the carets)."""
    lines = message.splitlines()
    for i, ln in enumerate(lines):
        if ln.strip() and set(ln.strip()) == {"^"} and i > 0:
            return lines[i - 1].strip()
    raise AssertionError(f"no caret line in:\n{message}")
