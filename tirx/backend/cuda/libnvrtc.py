"""The NVRTC library: where it is, loading it in the background (and beside it, for a named
arch, the CUDA driver's initialization its first compile would wait for), its C API, its
version.

tirx calls NVRTC's C API through ctypes rather than through cuda-bindings' ``nvrtc`` module.
That module finds the library with cuda.pathfinder, whose import (about seventy modules,
``subprocess``, ``platform`` and ``inspect`` among them) costs a fresh process 25-55 ms: more
than tirx's whole share of a cold compile. The dozen calls of :class:`_Api` are NVRTC's stable
C interface; each one lets the GIL go while NVRTC works, as cuda-bindings' do.
:mod:`tirx.backend.cuda.nvrtc` compiles with it.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import time

from tirx.errors import CompileError

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
        self.release = major, minor = self.get_version()  # (major, minor), asked once
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
    global _api_loaded, load_waited_ms
    if _api_loaded is None:
        if _loader is not None:
            t0 = time.perf_counter()
            with _loader:  # held until the load is done: NVRTC must not start before the
                pass  # builtins it loads are in
            load_waited_ms = (time.perf_counter() - t0) * 1e3
        # the background load's library, found already (library_file() would search
        # sys.path for it again)
        path = preloaded[0] if preloaded else library_file()
        try:
            _api_loaded = _Api(path)
        except (OSError, AttributeError) as e:  # not loadable, or not an NVRTC of 11.2 or later
            raise _missing(e) from e
    return _api_loaded


# ------------------------------------------------------------- loading NVRTC in the background

_loader = None  # held while the thread start_loading() started loads, if one did
preloaded: list[str] = []  # the files it loaded (read by the tests and benchmarks/compile.py)
load_waited_ms: float | None = None  # how long api() waited for that load (the benchmark's)


def beside(fn, *args):
    """Run ``fn(*args)`` in a new thread; the lock returned is held until it is done.

    Not ``threading.Thread.start``: that waits until the new thread runs (a quarter of a
    millisecond the first time in a process), and the new thread then keeps the GIL (for up to
    the switch interval, 5 ms) while this one wants it back. Started bare, the thread gets the
    GIL when this one lets it go: in NVRTC's compile, for work that must not delay it. ``fn``
    must not raise (what it raises is printed and dropped). Where no thread can start, ``fn``
    runs here."""
    done = _started(fn, *args, wait=False)
    if done is None:  # no thread to be had: the work is done here, before the compile
        import _thread

        fn(*args)
        done = _thread.allocate_lock()  # not held: nothing to wait for
    return done


def start_loading(init_driver: bool = False) -> None:
    """Begin loading the NVRTC library in a background thread, if it is not loaded yet, and
    with ``init_driver`` the CUDA driver's initialization in another (:func:`_start_driver_init`).

    ``tirx.compile`` calls this when it is about to lower a kernel for the cuda target: the
    library (about 100 MB, most of ten milliseconds to map and relocate) then loads while tirx
    lowers the kernel, instead of after. ctypes holds the GIL while it loads a library (its
    ``_ctypes.dlopen`` beside the seed's lowering slowed the lowering by half), so the
    thread calls libc's ``dlopen`` itself (a foreign call releases the GIL), and does nothing
    else: which files to load is found here, before it starts. They are the wheel's library
    and the one builtins library beside it (which NVRTC loads at its first compile), so when
    :func:`api` loads the library next, the dynamic loader hands back the mapped one. Without a
    wheel on ``sys.path`` nothing is loaded ahead: :func:`api` finds and loads the library."""
    global _loader
    if init_driver:
        _start_driver_init()
    if _loader is not None or _api_loaded is not None:
        return
    try:
        files = _preload_files()
        if not files:
            return
        dlopen = _libc().dlopen
    except Exception:  # noqa: BLE001 - an optimization: api() loads the library otherwise
        return
    _loader = _started(_load, dlopen, files)


@functools.cache
def _libc():
    """libc through ctypes, with ``dlopen`` typed, once per process (ctypes is imported here:
    the compile needs it next, for :class:`_Api`)."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc.dlopen.restype, libc.dlopen.argtypes = ctypes.c_void_p, (ctypes.c_char_p, ctypes.c_int)
    return libc


def _started(fn, *args, wait: bool = True):
    """Run ``fn(*args)`` in a new thread; the lock returned is held until ``fn`` is done (None
    where no thread can start: nothing ran). With ``wait``, return once the thread runs (as
    ``threading.Thread.start`` does, without importing threading), so that its work begins now,
    not when this thread next lets the GIL go (the switch interval, 5 ms); without, see
    :func:`beside`."""
    import _thread

    started = _thread.allocate_lock()
    started.acquire()
    done = _thread.allocate_lock()
    done.acquire()

    def run():
        started.release()
        try:
            fn(*args)
        finally:
            done.release()

    try:
        _thread.start_new_thread(run, ())
    except RuntimeError:  # no thread to be had: the caller does without
        return None
    if wait:
        started.acquire()
    return done


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


# ------------------------------------------------- the CUDA driver's initialization, beside it

_driver_init = None  # held while the thread _start_driver_init() started runs cuInit
_DRIVER_LIBRARY = b"libcuda.so.1"  # the driver's name, as every CUDA program loads it
_EXIT_WAIT_S = 30.0  # the longest an exiting process waits for that thread


def _start_driver_init() -> None:
    """Begin the CUDA driver's initialization (``cuInit``) in a background thread, once per
    process.

    On a machine with a GPU driver, NVRTC's first compile in a process initializes the driver
    itself and waits for it: about 12 ms where another process holds the GPU, about 180 ms where
    none does (NVRTC 13.0 on an H100, docs/gpu-runs/launch-and-compile.md). A compile for a
    named arch has not touched the driver when it lowers (a target without one asked the GPU
    for its arch, which initialized it), so ``tirx.compile`` starts the initialization here,
    beside the lowering, and NVRTC finds it done or under way. The process is then as NVRTC
    would leave it: the driver initialized (a child forked later cannot use CUDA, as after any
    compile). Without a driver (no ``libcuda.so.1``) the thread finds nothing and ends. A
    process that exits while the call runs waits for it (at most :data:`_EXIT_WAIT_S`): a
    library torn down while one of its threads is inside it may crash."""
    global _driver_init
    if _driver_init is not None or not sys.platform.startswith("linux"):
        return
    driver = sys.modules.get("tirx.backend.cuda.driver")
    if driver is not None and driver.driver_probed():
        return  # tirx initialized the driver already (or found none)
    try:
        import ctypes

        dlopen = _libc().dlopen
    except Exception:  # noqa: BLE001 - an optimization: NVRTC initializes the driver otherwise
        return

    def init():
        # dlopen through libc (ctypes' own loading holds the GIL); the symbol is then looked
        # up without letting the GIL go, and the call lets it go while the driver works
        handle = dlopen(_DRIVER_LIBRARY, os.RTLD_NOW)
        if not handle:
            return  # no driver here
        try:
            cu_init = ctypes.CDLL(_DRIVER_LIBRARY.decode(), handle=handle).cuInit
        except AttributeError:
            return  # not a CUDA driver
        cu_init.argtypes, cu_init.restype = (ctypes.c_uint,), ctypes.c_int
        cu_init(0)

    _driver_init = _started(init) or False  # False: no thread, and none tried again
    if _driver_init:
        import atexit

        atexit.register(_wait, _driver_init, _EXIT_WAIT_S)


def _wait(lock, seconds: float) -> None:
    if lock.acquire(True, seconds):
        lock.release()


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
    version = api().release
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
