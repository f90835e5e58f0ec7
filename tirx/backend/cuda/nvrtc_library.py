"""Loading the NVRTC library in the background, while the first compile's front end runs.

A process's first NVRTC compile first maps libnvrtc (tens of megabytes: 10-20 ms of
``dlopen``). Nothing about the kernel is needed for that, so ``tirx.compile`` starts it
(:func:`start_loading`) before it lowers a kernel for the cuda target, and the load overlaps
the lowering and the code generation; :func:`finish_loading` waits for it, and every use of
the library (:mod:`.nvrtc`) and the end of ``tirx.compile`` call it first, so no load is left
running behind a returned call.

Why not simply import cuda-bindings' NVRTC module on a thread: its loader (cuda.pathfinder)
opens the library with ``ctypes.CDLL``, which holds the GIL through ``dlopen``, so the thread
would stop the main one for the whole load. The thread here calls the C library's ``dlopen``
through a ctypes foreign function instead, which releases the GIL while the loader works.
When cuda-bindings later loads NVRTC it finds the library already in the process (its loader
asks the dynamic linker whether it has it before it opens a file) and uses it as it is.
(Measured with a thread loading it while the main thread sleeps 0.5 ms in a loop: through
``ctypes.CDLL`` the main thread's longest wait was the whole load, 19-21 ms; through the C
``dlopen``, 4-5 ms, the machine's scheduling.)

Only a file cuda-bindings' loader would pick itself is opened: the one it reported before,
remembered in the NVRTC version memo beside the cache (see :func:`.nvrtc.nvrtc_version`),
or else the library of the ``nvidia`` pip wheel (the first place it looks), when there is
exactly one. Anything unexpected (no such file, a failed ``dlopen``, no ``dlopen`` symbol)
leaves the library to be loaded as before, at its first use; nothing is raised here.
"""

from __future__ import annotations

import os
import sys

__all__ = ["start_loading", "finish_loading", "started", "spare_cpu"]

_STARTED: dict = {}  # "loader": the loading thread, once started (at most one per process)


def start_loading() -> None:
    """Start loading libnvrtc on a background thread (once per process). Nothing when the
    bindings have been imported already (the library is loaded or on its way), or when no CPU
    is free for the thread (:func:`spare_cpu`)."""
    if "loader" in _STARTED or "cuda.bindings.nvrtc" in sys.modules or not spare_cpu():
        return
    import threading

    loader = threading.Thread(target=_load, name="tirx-nvrtc-load", daemon=True)
    if _STARTED.setdefault("loader", loader) is loader:  # atomic: two compiles start one
        loader.start()


def started() -> bool:
    """Whether this process has started loading the library on a thread."""
    return "loader" in _STARTED


def finish_loading() -> None:
    """Wait for a load :func:`start_loading` began (at once when none is running)."""
    loader = _STARTED.get("loader")
    if loader is not None and loader.is_alive():
        loader.join()


def spare_cpu() -> bool:
    """Whether a CPU this process may run on is idle: the CPUs it may use, less the number
    of runnable threads on the machine (the one-minute load average, this process included),
    leave at least one.

    The load is pure CPU work (mapping the library and relocating it); it shortens a compile
    only when it runs beside the main thread. Where every CPU is busy, the thread takes its
    time from the main thread instead (measured on a shared two-CPU machine under load: the
    lowering's wall time grew by as much as the load took, and the compile got slower)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average (Windows): trust the count
        return cpus > 1
    return cpus - load >= 1.0


def _load() -> None:
    try:
        paths = _library_files()
        if not paths:
            return
        import ctypes

        libc = ctypes.CDLL(None)  # the process itself: dlopen is already there
        dlopen = libc.dlopen
        dlopen.restype, dlopen.argtypes = ctypes.c_void_p, (ctypes.c_char_p, ctypes.c_int)
        mode = os.RTLD_NOW | os.RTLD_GLOBAL  # as cuda.pathfinder opens it
        for path in paths:
            if not dlopen(os.fsencode(path), mode):  # the GIL is released in here
                return
    except Exception:  # noqa: BLE001 - an optimization only: the first use loads it as before
        return


def _library_files() -> list[str]:
    """The files to open, dependencies first: libnvrtc's builtins library beside it (which
    cuda.pathfinder also opens ahead of NVRTC for the 13.0 wheel), then libnvrtc."""
    library = _remembered_library() or _wheel_library()
    if library is None or not os.path.isfile(library):
        return []
    folder = os.path.dirname(os.path.realpath(library))
    builtins = [
        os.path.join(folder, name)
        for name in sorted(os.listdir(folder))
        if name.startswith("libnvrtc-builtins.so.") and ".alt." not in name
    ]
    return [*builtins[:1], library]


def _remembered_library() -> str | None:
    """The library file the version memo names (what cuda.pathfinder loaded before in this
    Python environment), when the memo is readable."""
    import ast

    from .cache import read_regular
    from .nvrtc import _version_memo_path

    path = _version_memo_path()
    data = read_regular(path) if path is not None else None
    if data is None:
        return None
    try:
        library = ast.literal_eval(data.decode())["library"]
    except (ValueError, KeyError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return library if isinstance(library, str) else None


def _wheel_library() -> str | None:
    """``.../site-packages/nvidia/<package>/lib/libnvrtc.so.<major>`` of the NVIDIA wheel, when
    exactly one is installed (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    found = []
    for root in (spec.submodule_search_locations or ()) if spec is not None else ():
        for package in sorted(os.listdir(root)):
            lib = os.path.join(root, package, "lib")
            if not os.path.isdir(lib):
                continue
            found.extend(
                os.path.join(lib, name)
                for name in os.listdir(lib)
                if name.startswith("libnvrtc.so.") and name[len("libnvrtc.so.") :].isdigit()
            )
    return found[0] if len(found) == 1 else None
