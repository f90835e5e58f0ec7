"""The CUDA command-line tools tirx can use when they are installed: nvdisasm/cuobjdump, ptxas;
and the C literals the code generator writes (strings, floats).

None of them is required. Each function answers None (or an empty dict) when its tool is
missing, and every subprocess runs under a timeout so a broken tool cannot hang a notebook.
"""

from __future__ import annotations

import functools
import math
import os
import re
import struct
import sys

__all__ = [
    "find_tool", "disassemble", "ptxas_stats", "parse_ptxas_info", "is_ptxas_info", "STAT_KEYS",
    "c_string", "float_literal",
]  # fmt: skip


class LazyPattern:
    """A regular expression compiled on its first use, with the compiled pattern's methods.

    The log parsers here and in :mod:`.nvrtc` need a dozen patterns, and compiling them at
    import costs about a millisecond that a process reading every kernel from the disk cache
    never uses."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0):
        self._args = (pattern, flags)
        self._compiled = None

    def __getattr__(self, name):  # for what the instance lacks: match, search, findall, ...
        if name in LazyPattern.__slots__:  # not set yet (an instance made without __init__)
            raise AttributeError(name)
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(*self._args)
        return getattr(compiled, name)


TIMEOUT_S = 60.0
STAT_KEYS = ("registers", "spill_stores", "spill_loads", "stack_bytes", "shared_bytes")

_SYSTEM_BIN = ("/usr/local/cuda/bin",)


@functools.cache
def find_tool(name: str) -> str | None:
    """Path of a CUDA binary utility: pip wheels (cuda.pathfinder), PATH, /usr/local/cuda."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        found = find_nvidia_binary_utility(name)
        if found:
            return str(found)
    except Exception:
        pass
    import shutil

    found = shutil.which(name)
    if found:
        return found
    for d in _SYSTEM_BIN:
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    return None


def _run(argv: list[str]):
    """The finished process (``subprocess.CompletedProcess``), None when it could not run."""
    # subprocess, tempfile and shutil are imported where used: a process that takes every kernel
    # from the disk cache never runs a tool, and importing them costs milliseconds.
    import subprocess

    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None


def disassemble(cubin: bytes) -> str | None:
    """SASS text of a cubin (nvdisasm, else cuobjdump -sass); None when neither tool works."""
    if not cubin:
        return None
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tirx-sass-") as d:
        path = os.path.join(d, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        for tool, flags in (("nvdisasm", ["-c"]), ("cuobjdump", ["-sass"])):
            exe = find_tool(tool)
            if exe is None:
                continue
            done = _run([exe, *flags, path])
            if done is not None and done.returncode == 0 and done.stdout.strip():
                return done.stdout
    return None


def ptxas_stats(ptx: str, arch: str) -> dict:
    """Resource use of ``ptx`` built for ``arch`` (``sm_XX``) by ``ptxas -v``; {} without ptxas."""
    exe = find_tool("ptxas")
    if exe is None or not arch.startswith("sm_"):
        return {}
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tirx-ptxas-") as d:
        src = os.path.join(d, "kernel.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        done = _run([exe, "-v", f"--gpu-name={arch}", "-o", os.path.join(d, "k.cubin"), src])
    if done is None or done.returncode != 0:
        return {}
    return parse_ptxas_info(done.stdout + done.stderr)


def parse_ptxas_info(log: str) -> dict:
    """Parse ``ptxas -v`` output (standalone or inside an NVRTC log).

    Returns ``{}`` when the log has no ptxas info, else the keys of :data:`STAT_KEYS` holding
    the worst (largest) value over all functions, and ``"kernels"``: ``{name: {key: value}}``
    per function ptxas reported on (device functions that were not inlined report only their
    stack frame and spills).

    String searches, not regular expressions: every cold compile parses one log, and compiling
    the five patterns cost it about a third of a millisecond.
    """
    kernels: dict[str, dict[str, int]] = {}
    entry = current = None
    for line in log.splitlines():
        if (name := _quoted_after(line, "Compiling entry function '")) is not None:
            entry = current = name
            kernels.setdefault(entry, {})
        elif (i := line.find(_PROPS)) >= 0 and (name := line[i + len(_PROPS) :].split(maxsplit=1)):
            current = name[0]
            kernels.setdefault(current, {})
        elif current is not None and None not in (
            frame := [_number_before(line, words) for words in _FRAME_WORDS]
        ):
            stack, stores, loads = frame
            kernels[current].update(stack_bytes=stack, spill_stores=stores, spill_loads=loads)
        elif entry is not None and (regs := _number_before(line, "registers", "Used ")) is not None:
            kernels[entry]["registers"] = regs
            kernels[entry]["shared_bytes"] = _number_before(line, "bytes smem") or 0
    if not kernels:
        return {}
    stats: dict = {k: max((v.get(k, 0) for v in kernels.values()), default=0) for k in STAT_KEYS}
    stats["kernels"] = kernels
    return stats


_PROPS = "Function properties for "
_FRAME_WORDS = ("bytes stack frame, ", "bytes spill stores, ", "bytes spill loads")


def _number_before(line: str, words: str, lead: str = "") -> int | None:
    """The decimal number written as ``{lead}N {words}`` in ``line`` (its first ``words``),
    or None."""
    end = line.find(" " + words)
    start = end
    while start > 0 and "0" <= line[start - 1] <= "9":
        start -= 1
    if start == end or start < len(lead) or not line.startswith(lead, start - len(lead)):
        return None
    return int(line[start:end])


def _quoted_after(line: str, head: str) -> str | None:
    """The non-empty text between ``head`` (which ends in a quote) and the next quote."""
    i = line.find(head)
    if i < 0:
        return None
    name, quote, _ = line[i + len(head) :].partition("'")
    return name if name and quote else None


def is_ptxas_info(line: str) -> bool:
    """Whether ``line`` of an NVRTC log is one of ptxas' ``-v`` report lines (``ptxas info
    :`` or ``ptxas   .``), which :func:`parse_ptxas_info` reads and the log shown omits."""
    if line.startswith("ptxas info"):
        return line[10:11].isspace()
    if not line.startswith("ptxas"):
        return False
    rest = line[5:].lstrip()
    return len(rest) < len(line) - 5 and rest[:1] == "." and rest[1:2].isspace()


def c_string(s: str) -> str:
    """``s`` as a C string literal (printf's format): quotes, escapes, octal for the rest."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode())
    return '"' + "".join(out) + '"'


def float_literal(v: float, double: bool = False) -> str:
    """``v`` as a C literal of a ``float`` (``double``: of a ``double``), exact: a float is the
    float32 value ``v`` rounds to, so NVRTC has nothing to round (and does not warn "#1046-D:
    floating-point value cannot be represented exactly"); a value past float32's range is the
    infinity it rounds to. NaN, infinities and subnormals (whose literals NVRTC calls "out of
    range") are written through their bits or a division."""
    suffix = "" if double else "f"
    if not double and math.isfinite(v):
        try:
            v = struct.unpack("<f", struct.pack("<f", v))[0]
        except OverflowError:
            v = math.copysign(math.inf, v)
    if math.isnan(v):
        return (
            "__longlong_as_double(0x7ff8000000000000LL)" if double else "__int_as_float(0x7fffffff)"
        )
    if math.isinf(v):
        return f"({'-' if v < 0 else ''}1.0{suffix} / 0.0{suffix})"
    if v.is_integer() and abs(v) < 2**24:
        return f"{v:.1f}{suffix}"
    if v != 0 and abs(v) < (sys.float_info.min if double else 2.0**-126):  # a subnormal
        if double:
            return f"__longlong_as_double({struct.unpack('<q', struct.pack('<d', v))[0]}LL)"
        return f"__int_as_float({struct.unpack('<i', struct.pack('<f', v))[0]})"
    return f"{v.hex()}{suffix}"
