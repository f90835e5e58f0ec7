"""CUDA C++ source → PTX and CUBIN with NVRTC, and NVRTC's log mapped back to the user's lines.

One NVRTC program per compile: for a real architecture (``sm_XX``) NVRTC keeps the PTX it
generated on the way to the CUBIN, so ``nvrtcGetPTX`` and ``nvrtcGetCUBIN`` both answer and a
second (virtual-architecture) compile would only repeat the front end. A virtual architecture
(``compute_XX``) gives PTX and an empty cubin.

Resource use (registers, spills, stack, shared memory) comes from ptxas itself: NVRTC runs it
with ``--ptxas-options=-v`` and its info lines are parsed out of the log.

Generated code carries ``#line N "file"`` directives, so NVRTC reports C++ errors at the
user's lines. Errors ptxas finds in inline PTX name a line of the PTX; those are mapped back by
compiling once more with ``-lineinfo`` and reading the ``.loc`` directive above that line.

NVRTC is pinned to 13.0 (see ENV.md): it emits PTX 9.0, which the GPU machine's driver loads.
The library is found, loaded and called through :mod:`tirx.backend.cuda.libnvrtc` (its C API
through ctypes).
"""

from __future__ import annotations

import functools
import linecache
import os
import re
import time

from tirx.errors import CompileError, Span, UnsupportedArchError

from .libnvrtc import api, beside, nvrtc_version, preloaded  # noqa: F401 - the last two re-exported
from .tools import LazyPattern, is_ptxas_info, parse_ptxas_info, ptxas_stats

__all__ = [
    "NvrtcOutput",
    "Diagnostic",  # noqa: F822 - made on first use (module __getattr__)
    "DEFAULT_OPTIONS",
    "command_line",
    "compile_cuda",
    "check_supported_arch",
    "nvrtc_version",
    "parse_diagnostics",
]

# -default-device: helper functions the code generator writes need no __device__ marker.
# --generate-line-info: PTX .loc and the CUBIN's line table, so the notebook's code view links
# Python lines to PTX and SASS from the normal build; the machine code is the same with or
# without it (measured in docs/notebook.md, "Line information costs nothing at run time").
DEFAULT_OPTIONS = ("--std=c++17", "-default-device", "--generate-line-info")
_VERBOSE = "--ptxas-options=-v"
_LOG_LINES = 40


class NvrtcOutput:
    """What one NVRTC compile produced (immutable).

    ``ptx``: PTX text; ``cubin``: the binary (empty for a ``compute_XX`` arch); ``log``: the
    compiler's diagnostics (warnings) without ptxas' info lines; ``options``: every option
    passed to NVRTC; ``nvrtc_ms``: wall time of the compile; ``stats``: see
    :func:`tirx.backend.cuda.tools.parse_ptxas_info` (empty when ptxas reported nothing).

    When NVRTC's log carries no resource report, ``stats`` is measured on first use by running
    ``ptxas -v`` on the PTX for ``arch`` (tens of milliseconds: a compile does not pay it, a
    look at the stats does). Equality and hashing leave ``stats`` out. (A plain class: a frozen
    dataclass costs half a millisecond to create, at the import a warm disk-cache hit pays.)
    """

    __slots__ = ("ptx", "cubin", "log", "options", "nvrtc_ms", "_stats", "_arch")

    def __init__(
        self, ptx: str, cubin: bytes, log: str, options, nvrtc_ms: float, stats=None, arch=None
    ):
        for name, value in (
            ("ptx", ptx),
            ("cubin", cubin),
            ("log", log),
            ("options", tuple(options)),
            ("nvrtc_ms", nvrtc_ms),
            ("_stats", stats if stats is not None or arch else {}),
            ("_arch", arch),
        ):
            object.__setattr__(self, name, value)

    @property
    def stats(self) -> dict:
        if self._stats is None:  # measured once, on first use
            stats = ptxas_stats(self.ptx, self._arch) if self._arch.startswith("sm_") else {}
            object.__setattr__(self, "_stats", stats)
        return self._stats

    def __setattr__(self, name, value):
        raise AttributeError(f"NvrtcOutput is immutable (cannot set {name!r})")

    def _key(self):
        return (self.ptx, self.cubin, self.log, self.options, self.nvrtc_ms)

    def __reduce__(self):  # copy and pickle through __init__
        return NvrtcOutput, (*self._key(), self._stats, self._arch)

    def __eq__(self, other):
        return self._key() == other._key() if isinstance(other, NvrtcOutput) else NotImplemented

    def __hash__(self):
        return hash(self._key())

    def __repr__(self) -> str:
        stats = "<not measured yet>" if self._stats is None else repr(self._stats)
        return (
            f"NvrtcOutput(ptx=<{len(self.ptx)} chars>, cubin=<{len(self.cubin)} bytes>, "
            f"log={self.log!r}, options={self.options!r}, nvrtc_ms={self.nvrtc_ms:.1f}, "
            f"stats={stats})"
        )


@functools.cache
def _diagnostic_class() -> type:
    """:class:`Diagnostic`, made when first needed: only a failed compile reads its log's
    diagnostics, and making a ``NamedTuple`` class costs a successful cold compile about a
    millisecond (its annotations are compiled one by one), and importing ``typing`` more."""
    from typing import NamedTuple

    class Diagnostic(NamedTuple):
        """One diagnostic of a compile log. ``file`` is ``"<ptx>"`` for ptxas' lines about
        PTX."""

        file: str
        line: int
        severity: str
        message: str

    Diagnostic.__qualname__ = "Diagnostic"
    return Diagnostic


def __getattr__(name: str):
    if name == "Diagnostic":  # the module's attribute, made on first use (_diagnostic_class)
        return _diagnostic_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_CXX_DIAG = LazyPattern(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning|remark|note)"
    r"(?: #[\w-]+)?: (?P<msg>.*)$"
)
_PTX_DIAG = LazyPattern(
    r"^ptxas application ptx input, line (?P<line>\d+); (?P<sev>\w+)\s*: (?P<msg>.*)$"
)
_NVRTC_DIAG = LazyPattern(r"^nvrtc: (?P<sev>error|warning)\s*: (?P<msg>.*)$")
_LINE_DIRECTIVE = LazyPattern(r'^\s*#\s*line\s+\d+\s+"([^"]+)"', re.MULTILINE)
_PTX_FILE = LazyPattern(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_PTX_LOC = LazyPattern(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")


def parse_diagnostics(log: str) -> list[Diagnostic]:  # noqa: F821 - see __getattr__
    """Every ``path(line): severity: message`` of an NVRTC log, and ptxas' errors and warnings
    (file ``"<ptx>"``, line in the PTX); option errors come as file ``"<nvrtc>"``, line 0."""
    Diagnostic = _diagnostic_class()  # noqa: N806 - the class
    out = []
    for line in log.splitlines():
        if m := _CXX_DIAG.match(line):
            out.append(Diagnostic(m["file"], int(m["line"]), m["sev"], m["msg"].strip()))
        elif m := _PTX_DIAG.match(line):
            out.append(Diagnostic("<ptx>", int(m["line"]), m["sev"], m["msg"].strip()))
        elif m := _NVRTC_DIAG.match(line):
            out.append(Diagnostic("<nvrtc>", 0, m["sev"], m["msg"].strip()))
    return out


class _Program:
    """One NVRTC program: compile once, then read the log, PTX and CUBIN.

    ``meanwhile()``, if given, runs in a thread started just before NVRTC's compile call, so
    that it gets the GIL while NVRTC compiles, not while this thread still needs it (the cache
    lookup's file I/O lets the GIL go too, and a thread holding it keeps it for up to the
    switch interval). :meth:`close` waits for it."""

    def __init__(self, source: bytes, filename: bytes, options: list[bytes], meanwhile=None):
        self.api = nv = api()
        C = nv.ctypes
        handle = C.c_void_p()
        nv.check(nv.create(C.byref(handle), source, filename, 0, None, None), "nvrtcCreateProgram")
        self.prog = handle
        self._meanwhile = None
        try:
            argv = (C.c_char_p * len(options))(*options)
            if meanwhile is not None:
                self._meanwhile = beside(meanwhile)
            self.result = nv.compile(handle, len(options), argv)
            self.log = self._read(nv.log_size, nv.log, "log").decode(errors="replace")
        except BaseException:
            self.close()
            raise

    @property
    def ok(self) -> bool:
        return self.result == 0

    @property
    def result_name(self) -> str:
        return self.api.error_name(self.result)

    def _read(self, size_fn, get_fn, what: str) -> bytes:
        C = self.api.ctypes
        n = C.c_size_t()
        self.api.check(size_fn(self.prog, C.byref(n)), f"reading the {what} size")
        if not n.value:
            return b""
        buf = C.create_string_buffer(n.value)
        self.api.check(get_fn(self.prog, buf), f"reading the {what}")
        return buf.raw.rstrip(b"\0")

    def ptx(self) -> str:
        return self._read(self.api.ptx_size, self.api.ptx, "PTX").decode(errors="replace")

    def cubin(self) -> bytes:
        C, nv = self.api.ctypes, self.api
        n = C.c_size_t()
        if nv.cubin_size(self.prog, C.byref(n)) != 0 or not n.value:
            return b""
        buf = C.create_string_buffer(n.value)
        nv.check(nv.cubin(self.prog, buf), "reading the CUBIN")
        return buf.raw

    def close(self) -> None:
        if getattr(self, "prog", None) is not None:
            self.api.destroy(self.api.ctypes.byref(self.prog))
            self.prog = None
        if getattr(self, "_meanwhile", None) is not None:
            self._meanwhile.acquire()
            self._meanwhile = None


def command_line(arch: str, options: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Every option NVRTC gets to compile for ``arch``: the architecture, the defaults, ptxas'
    resource report for a real arch, then ``options``. The one place the command line is
    made: :func:`compile_cuda` runs it and the compile cache's key hashes it."""
    if not _known_arch(arch):
        raise CompileError(
            f"unknown CUDA architecture {arch!r}",
            hint="write it as NVRTC does: 'sm_80', 'sm_90', 'sm_90a' or 'compute_90'",
        )
    real = arch.startswith("sm_")
    return (f"--gpu-architecture={arch}", *DEFAULT_OPTIONS, *((_VERBOSE,) if real else ()),
            *options)  # fmt: skip


def _known_arch(arch: str) -> bool:
    """``sm_XX``/``compute_XX`` with two or three digits and an optional ``a`` or ``f`` (string
    tests: a regular expression costs the cold compile its compile)."""
    kind, sep, number = arch.partition("_")
    if number[-1:] in ("a", "f"):
        number = number[:-1]
    return (
        kind in ("sm", "compute")
        and 2 <= len(number) <= 3
        and number.isdigit()
        and number.isascii()
    )


def compile_cuda(
    source: str,
    *,
    arch: str = "sm_80",
    filename: str = "kernel.cu",
    options: tuple[str, ...] = (),
    command: tuple[str, ...] | None = None,
    meanwhile=None,
) -> NvrtcOutput:
    """Compile CUDA C++ ``source`` for ``arch`` (``sm_XX[a]`` → PTX and CUBIN, ``compute_XX`` →
    PTX only) with ``command``, a :func:`command_line` for ``arch`` (default: the one with
    ``options`` appended to :data:`DEFAULT_OPTIONS`). ``NvrtcOutput.options`` is that line.
    ``meanwhile()``, if given, runs in a thread while NVRTC compiles (it must not raise); the
    call returns after it.

    Raises :class:`CompileError` on failure: its message holds the first error and the log,
    its span the user's line when the error's file is a real file or a :mod:`linecache` entry;
    :class:`~tirx.errors.UnsupportedArchError`, before NVRTC runs, for an ``sm_XX[a]`` arch
    this NVRTC does not compile for.
    """
    opts = command_line(arch, options) if command is None else tuple(command)
    if not opts or opts[0] != f"--gpu-architecture={arch}":
        raise ValueError(f"compile_cuda: the command line {opts!r} is not one for {arch!r}")
    check_supported_arch(arch)
    real = arch.startswith("sm_")
    src, fname = source.encode(), filename.encode()
    t0 = time.perf_counter()
    prog = _Program(src, fname, [o.encode() for o in opts], meanwhile)
    try:
        if not prog.ok:
            raise _failure(prog, source, filename, arch, [o.encode() for o in opts])
        ptx, cubin = prog.ptx(), (prog.cubin() if real else b"")
    finally:
        prog.close()
    ms = (time.perf_counter() - t0) * 1e3
    stats = parse_ptxas_info(prog.log) or None  # None: ptxas -v when first asked for
    log = "\n".join(ln for ln in prog.log.splitlines() if not is_ptxas_info(ln)).strip()
    return NvrtcOutput(ptx, cubin, log, opts, ms, stats=stats if real else {}, arch=arch)


def check_supported_arch(arch: str) -> None:
    """An :class:`~tirx.errors.UnsupportedArchError` naming the archs this NVRTC compiles for
    when ``arch`` (``sm_XX``, ``sm_XXa``) is not one of them; asked of NVRTC's own list
    (:meth:`tirx.Target.unsupported`), not read from its refusal. The one check of an arch:
    every compile that reaches NVRTC passes here (a compile cache hit was checked when it was
    compiled). A virtual arch (``compute_XX``) is left to NVRTC."""
    from tirx.target import Target, TargetKind, is_arch

    if not is_arch(arch):
        return
    why = Target(TargetKind.CUDA, arch).unsupported()
    if why is not None:
        raise UnsupportedArchError(
            why, hint='name one of them, e.g. tirx.compile(kernel, "cuda -arch=sm_90")', arch=arch
        )


def _known_file(path: str) -> bool:
    return path in linecache.cache or os.path.isfile(path)


def _failure(prog: _Program, source, filename, arch, opts) -> CompileError:
    """The CompileError for a failed program: first error, trimmed log, span, hint."""
    log = prog.log.strip()
    errors = [d for d in parse_diagnostics(log) if "error" in d.severity or d.severity == "fatal"]
    head = f"NVRTC could not compile {filename} for {arch}"
    if not errors:
        return CompileError(f"{head} ({prog.result_name})\n{_trim(log)}")
    first = errors[0]
    if first.file == "<nvrtc>":
        hint = "check the NVRTC options and the arch"
        if "--gpu-architecture" in first.message:  # the arch itself: say which ones it knows
            known = ", ".join(f"sm_{n}" for n in prog.api.supported_archs() if n >= 80)
            hint = f"this NVRTC compiles for {known} (sm_90a and newer with an 'a')"
        return CompileError(f"{head}: {first.message}\n{_trim(log)}", hint=hint)
    if first.file != "<ptx>":
        span = Span(first.file, first.line) if _known_file(first.file) else None
        return CompileError(f"{head}: {first.message}\n{_trim(log)}", span=span)
    # ptxas rejected the PTX (almost always inline asm): find the source line of that PTX line.
    where = _map_ptx_error(source, filename, opts)
    span, ptx_text = None, ""
    if where is not None:
        file, line, ptx_text = where
        span = Span(file, line) if file and _known_file(file) else None
        if file and span is None:
            head += f" (at {file}:{line})"
    detail = f"\n  PTX: {ptx_text.strip()}" if ptx_text else ""
    return CompileError(
        f"{head}: ptxas: {first.message}{detail}\n{_trim(log)}",
        span=span,
        hint=f"the inline PTX at this line is not valid for {arch}: check the instruction's "
        "spelling, operands and the architecture it needs",
    )


def _map_ptx_error(source: str, filename: str, opts) -> tuple[str | None, int, str] | None:
    """Recompile with ``-lineinfo``; map ptxas' first error line through ``.loc`` to a file."""
    prog = _Program(source.encode(), filename.encode(), [*opts, b"-lineinfo"])
    try:
        ptx_lines = prog.ptx().splitlines()
    finally:
        prog.close()
    bad = [d for d in parse_diagnostics(prog.log) if d.file == "<ptx>" and "error" in d.severity]
    if not bad or not 0 < bad[0].line <= len(ptx_lines):
        return None
    n = bad[0].line
    files = {}
    for ln in ptx_lines:
        if m := _PTX_FILE.match(ln):
            files[m.group(1)] = m.group(2)
    for ln in reversed(ptx_lines[: n - 1]):
        if m := _PTX_LOC.match(ln):
            path = files.get(m.group(1))
            return _source_name(path, source, filename), int(m.group(2)), ptx_lines[n - 1]
    return None, 0, ptx_lines[n - 1]


def _source_name(path: str | None, source: str, filename: str) -> str | None:
    """NVRTC makes ``.file`` paths absolute; give back the name the source itself used."""
    if path is None:
        return None
    for name in (*_LINE_DIRECTIVE.findall(source), filename):
        if path == name or path.endswith("/" + name):
            return name
    return path


def _trim(log: str) -> str:
    lines = log.splitlines()
    if len(lines) <= _LOG_LINES:
        return log
    return "\n".join([*lines[:_LOG_LINES], f"... ({len(lines) - _LOG_LINES} more lines)"])
