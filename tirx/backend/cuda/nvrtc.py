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
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import re
import sys
import time
from typing import NamedTuple

from tirx.errors import CompileError, Span

from .tools import LazyPattern, is_ptxas_info, parse_ptxas_info, ptxas_stats

__all__ = [
    "NvrtcOutput",
    "Diagnostic",  # noqa: F822 - made on first use (module __getattr__)
    "DEFAULT_OPTIONS",
    "command_line",
    "compile_cuda",
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
    millisecond (its annotations are compiled one by one)."""

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


# ------------------------------------------------------------- the library and its C API
#
# tirx calls NVRTC's C API through ctypes rather than through cuda-bindings' ``nvrtc`` module.
# That module finds the library with cuda.pathfinder, whose import (about seventy modules,
# ``subprocess``, ``platform`` and ``inspect`` among them) costs a fresh process 25-55 ms: more
# than tirx's whole share of a cold compile. The dozen calls below are NVRTC's stable C
# interface; each one lets the GIL go while NVRTC works, as cuda-bindings' do.

# Where pip's NVRTC wheels put the library, below a folder on sys.path: nvidia-cuda-nvrtc 13
# (tirx's pin), then the CUDA 12 wheel. The first such file wins, as cuda.pathfinder's first
# search step (the site-packages folders) would choose it.
_WHEEL_FILES = (
    os.path.join("nvidia", "cu13", "lib", "libnvrtc.so.13"),
    os.path.join("nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12"),
)


def _wheel_file() -> str | None:
    """The library of an NVRTC wheel on ``sys.path``, found with a few ``stat`` calls."""
    if not sys.platform.startswith("linux"):
        return None
    for relative in _WHEEL_FILES:
        for folder in sys.path:
            if folder and os.path.isfile(path := os.path.join(folder, relative)):
                return os.path.abspath(path)
    return None


@functools.cache
def library_file() -> str:
    """The NVRTC library tirx compiles with: the wheel's (a dependency of tirx) where pip put
    it, else wherever ``cuda.pathfinder`` finds one (conda, ``CUDA_HOME``, the system's loader
    path), which costs its import only where there is no wheel. Raises CompileError when there
    is none."""
    path = _wheel_file()
    if path is not None:
        return path
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        path = load_nvidia_dynamic_lib("nvrtc").abs_path
    except Exception as e:  # noqa: BLE001 - not installed, not found, or no such package
        raise _missing(e) from e
    if not path:
        raise _missing(OSError("cuda.pathfinder loaded NVRTC but names no file for it"))
    return path


class _Api:
    """NVRTC's C functions on one loaded library (ctypes; each call releases the GIL)."""

    def __init__(self, path: str):
        import ctypes as C

        lib = C.CDLL(path)
        ptr, num, size = C.c_void_p, C.c_int, C.c_size_t
        strings = C.POINTER(C.c_char_p)

        def fn(name, *argtypes, restype=C.c_int):
            f = getattr(lib, name)
            f.argtypes, f.restype = argtypes, restype
            return f

        self.path = path
        self.version = fn("nvrtcVersion", C.POINTER(num), C.POINTER(num))
        self.create = fn("nvrtcCreateProgram", C.POINTER(ptr), C.c_char_p, C.c_char_p, num,
                         strings, strings)  # fmt: skip
        self.compile = fn("nvrtcCompileProgram", ptr, num, strings)
        self.destroy = fn("nvrtcDestroyProgram", C.POINTER(ptr))
        self.log_size = fn("nvrtcGetProgramLogSize", ptr, C.POINTER(size))
        self.log = fn("nvrtcGetProgramLog", ptr, C.c_char_p)
        self.ptx_size = fn("nvrtcGetPTXSize", ptr, C.POINTER(size))
        self.ptx = fn("nvrtcGetPTX", ptr, C.c_char_p)
        self.cubin_size = fn("nvrtcGetCUBINSize", ptr, C.POINTER(size))
        self.cubin = fn("nvrtcGetCUBIN", ptr, C.c_char_p)
        self.archs_count = fn("nvrtcGetNumSupportedArchs", C.POINTER(num))
        self.archs = fn("nvrtcGetSupportedArchs", C.POINTER(num))
        self.error_string = fn("nvrtcGetErrorString", num, restype=C.c_char_p)
        self.ctypes = C
        # NVRTC opens its builtins library by name at its first compile, which the dynamic
        # loader finds only where something loaded it already (or on its search path): the
        # file of NVRTC's own version beside the library, as cuda.pathfinder loads it too
        major, minor = self.get_version()
        folder = os.path.dirname(os.path.realpath(path))
        builtins = os.path.join(folder, f"libnvrtc-builtins.so.{major}.{minor}")
        self.builtins = C.CDLL(builtins) if os.path.isfile(builtins) else None

    def error_name(self, result: int) -> str:
        """NVRTC's name of a result code, such as ``NVRTC_ERROR_COMPILATION``."""
        name = self.error_string(result)
        return name.decode(errors="replace") if name else f"NVRTC result {result}"

    def check(self, result: int, what: str) -> None:
        if result != 0:
            raise CompileError(f"NVRTC {what} failed: {self.error_name(result)}")

    def get_version(self) -> tuple[int, int]:
        C = self.ctypes
        major, minor = C.c_int(), C.c_int()
        self.check(self.version(C.byref(major), C.byref(minor)), "nvrtcVersion")
        return major.value, minor.value

    def supported_archs(self) -> list[int]:
        """The ``sm_XX`` numbers this NVRTC compiles for, ascending."""
        C = self.ctypes
        count = C.c_int()
        self.check(self.archs_count(C.byref(count)), "nvrtcGetNumSupportedArchs")
        out = (C.c_int * count.value)()
        self.check(self.archs(out), "nvrtcGetSupportedArchs")
        return list(out)


_api_loaded: _Api | None = None


def api() -> _Api:
    """NVRTC's C API, the library loaded at the first call (after the background load, if one
    runs). Raises CompileError, with the fix, when no NVRTC library can be loaded."""
    global _api_loaded
    if _api_loaded is None:
        if _loader is not None:
            with _loader:  # held until the load is done: NVRTC must not start before the
                pass  # builtins it loads are in
        path = library_file()
        try:
            _api_loaded = _Api(path)
        except (OSError, AttributeError) as e:  # not loadable, or not an NVRTC of 11.2 or later
            raise _missing(e) from e
    return _api_loaded


# ------------------------------------------------------------- loading NVRTC in the background

_loader = None  # held while the thread start_loading() started loads, if one did
preloaded: list[str] = []  # the files it loaded (read by the tests and benchmarks/compile.py)


def beside(fn, *args):
    """Run ``fn(*args)`` in a new thread; the lock returned is held until it is done.

    Not ``threading.Thread.start``: that waits until the new thread runs (a quarter of a
    millisecond the first time in a process), and the new thread then keeps the GIL (for up to
    the switch interval, 5 ms) while this one wants it back. Started bare, the thread gets the
    GIL when this one lets it go: in NVRTC's compile, for work that must not delay it. ``fn``
    must not raise (what it raises is printed and dropped)."""
    import _thread

    done = _thread.allocate_lock()
    done.acquire()

    def run():
        try:
            fn(*args)
        finally:
            done.release()

    _thread.start_new_thread(run, ())
    return done


def start_loading() -> None:
    """Begin loading the NVRTC library in a background thread, if it is not loaded yet.

    ``tirx.compile`` calls this when it is about to lower a kernel for the cuda target: the
    library (about 100 MB, most of ten milliseconds to map and relocate) then loads while tirx
    lowers the kernel, instead of after. ctypes holds the GIL while it loads a library, so the
    thread calls libc's ``dlopen`` itself (a foreign call releases the GIL), and does nothing
    else: which files to load is found here, before it starts. They are the wheel's library
    and the one builtins library beside it (which NVRTC loads at its first compile), so when
    :func:`api` loads the library next, the dynamic loader hands back the mapped one. Without a
    wheel on ``sys.path`` nothing is loaded ahead: :func:`api` finds and loads the library."""
    global _loader
    if _loader is not None or _api_loaded is not None:
        return
    try:
        files = _preload_files()
        if not files:
            return
        import ctypes  # api() needs it next

        dlopen = ctypes.CDLL(None).dlopen
        dlopen.restype, dlopen.argtypes = ctypes.c_void_p, (ctypes.c_char_p, ctypes.c_int)
    except Exception:  # noqa: BLE001 - an optimization: api() loads the library otherwise
        return
    # Unlike beside(), this waits until the new thread runs (as threading.Thread.start does,
    # without importing threading): the load begins now, not when the lowering next lets the
    # GIL go (the switch interval, 5 ms)
    import _thread

    started = _thread.allocate_lock()
    started.acquire()
    _loader = _thread.allocate_lock()
    _loader.acquire()

    def run():
        started.release()
        try:
            _load(dlopen, files)
        finally:
            _loader.release()

    _thread.start_new_thread(run, ())
    started.acquire()


def _preload_files() -> list[str]:
    """The wheel's NVRTC library and the one builtins library beside it ([] if not both)."""
    library = _wheel_file()
    if library is None:
        return []
    folder = os.path.dirname(os.path.realpath(library))
    builtins = [
        os.path.join(folder, name)
        for name in os.listdir(folder)
        if name.startswith("libnvrtc-builtins.so.") and ".alt." not in name
    ]
    if len(builtins) != 1:
        return []  # which one NVRTC wants is NVRTC's to say
    return [library, *builtins]


def _load(dlopen, files: list[str]) -> None:
    for f in files:
        if not dlopen(f.encode(), os.RTLD_NOW | os.RTLD_GLOBAL):
            return
        preloaded.append(f)


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library that compiles (part of every cache key).

    Loading NVRTC takes tens of milliseconds, which a process that only reads kernels from the
    disk cache should not pay. So the answer is remembered beside the cache, per Python
    environment, together with the library file it was read from, and trusted while that file
    is unchanged (same path, size and modification time)."""
    memo = _version_memo_path()
    known = _read_version_memo(memo) if memo is not None else None
    if known is not None:
        return known
    version = api().get_version()
    if memo is not None:  # not needed for this compile: written beside it, waited for at exit
        import atexit

        written = beside(_write_version_memo, memo, version)
        atexit.register(lambda: written.acquire())
    return version


def _version_memo_path():
    from tirx import config

    if not config.cache_enabled():
        return None
    from ...files import sha256  # not hashlib: see there

    env = sha256(f"{sys.prefix}|{sys.version}".encode()).hexdigest()[:16]
    return config.cache_dir() / f"nvrtc-version-{env}.txt"


def _read_version_memo(path) -> tuple[int, int] | None:
    from ...files import read_regular  # never blocks on a named pipe

    data = read_regular(path)
    if data is None:
        return None
    try:
        memo = ast.literal_eval(data.decode())  # a dict literal, see below
        st = os.stat(memo["library"])
        if [st.st_size, st.st_mtime_ns] != memo["stat"]:
            return None
        major, minor = memo["version"]
        return int(major), int(minor)
    except (OSError, ValueError, KeyError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _write_version_memo(path, version) -> None:
    try:
        library = api().path  # loaded: the file the version was read from
        st = os.stat(library)
        # a Python literal (not JSON): reading it back needs only ast, which tirx has loaded
        text = repr(
            {"library": library, "stat": [st.st_size, st.st_mtime_ns], "version": list(version)}
        )
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - the memo is an optimization; never fail a compile on it
        return


def _missing(e: Exception) -> CompileError:
    return CompileError(
        f"the NVRTC library could not be loaded: {e}",
        hint="install it with `pip install nvidia-cuda-nvrtc==13.0.88` (see ENV.md for the pin)",
    )


class _Program:
    """One NVRTC program: compile once, then read the log, PTX and CUBIN."""

    def __init__(self, source: bytes, filename: bytes, options: list[bytes]):
        self.api = nv = api()
        C = nv.ctypes
        handle = C.c_void_p()
        nv.check(nv.create(C.byref(handle), source, filename, 0, None, None), "nvrtcCreateProgram")
        self.prog = handle
        try:
            argv = (C.c_char_p * len(options))(*options)
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
) -> NvrtcOutput:
    """Compile CUDA C++ ``source`` for ``arch`` (``sm_XX[a]`` → PTX and CUBIN, ``compute_XX`` →
    PTX only) with ``command``, a :func:`command_line` for ``arch`` (default: the one with
    ``options`` appended to :data:`DEFAULT_OPTIONS`). ``NvrtcOutput.options`` is that line.

    Raises :class:`CompileError` on failure: its message holds the first error and the log,
    its span the user's line when the error's file is a real file or a :mod:`linecache` entry.
    """
    opts = command_line(arch, options) if command is None else tuple(command)
    if not opts or opts[0] != f"--gpu-architecture={arch}":
        raise ValueError(f"compile_cuda: the command line {opts!r} is not one for {arch!r}")
    real = arch.startswith("sm_")
    src, fname = source.encode(), filename.encode()
    t0 = time.perf_counter()
    prog = _Program(src, fname, [o.encode() for o in opts])
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
        return CompileError(
            f"{head}: {first.message}\n{_trim(log)}", hint="check the NVRTC options and the arch"
        )
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
