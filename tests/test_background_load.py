"""The NVRTC library loads on a thread while the first cuda compile lowers the kernel
(tirx/backend/cuda/nvrtc_library.py): it is the file cuda-bindings itself loads, the thread
never outlives ``tirx.compile`` (whether the call succeeds or fails), it starts only where a
CPU is free for it, and the compile's result and timings are what they were without it. (And
a compile for a named arch leaves the launcher's code generator, runner_text.py, unloaded.)

Each check runs in a fresh interpreter: the library loads once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tirx.backend.cuda import nvrtc_library

ROOT = Path(__file__).resolve().parents[1]

# The child forces the thread on (a CPU is free) unless told otherwise, makes it slow enough to
# be still running when the front end is done (so that joining is what a test sees), and
# reports what the process looks like after the call.
CHILD = textwrap.dedent("""\
    import json, sys, threading, time
    import tirx
    mode = sys.argv[1]
    if mode != "warm":  # (a warm child imports nothing of its own)
        from tirx.backend.cuda import nvrtc_library
        nvrtc_library.spare_cpu = lambda: mode != "busy"
        load = nvrtc_library._load
        def slow_load():
            time.sleep(0.2)
            load()
        nvrtc_library._load = slow_load
    if mode == "fail":
        def boom(*args, **kw):
            raise tirx.TirxError("lowering failed", hint="a test's stand-in")
        sys.modules["tirx.compile"].lower_function = boom
    from tirx.examples.warp_matmul import warp_matmul
    t0 = time.perf_counter()
    try:
        exe = tirx.compile(warp_matmul, target="cuda -arch=sm_90")
        result = {"cache": exe.cache, "timings": exe.timings, "source": exe.source,
                  "cubin": len(exe.cubin)}
    except tirx.TirxError as e:
        result = {"error": str(e).splitlines()[0]}
    wall = (time.perf_counter() - t0) * 1e3
    module = sys.modules.get("tirx.backend.cuda.nvrtc_library")
    loader = module._STARTED.get("loader") if module is not None else None
    result.update(wall=wall, started=loader is not None,
                  alive=loader is not None and loader.is_alive(),
                  threads=threading.active_count(),
                  runner="tirx.backend.cuda.runner_text" in sys.modules,
                  module=module is not None)
    print(json.dumps(result))
""")


def run_child(mode: str, cache_dir) -> dict:
    env = dict(os.environ, TIRX_CACHE_DIR=str(cache_dir))
    env.pop("TIRX_CACHE", None)
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                         env=env, cwd=ROOT, check=True)  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])


def test_a_cold_compile_waits_for_the_load_and_gives_the_same_result(tmp_path):
    on = run_child("free", tmp_path / "on")
    off = run_child("busy", tmp_path / "off")
    assert on["started"] and not off["started"]
    assert not on["alive"] and on["threads"] == 1  # joined before tirx.compile returned
    assert on["cache"] == off["cache"] == "miss"
    assert on["source"] == off["source"] and on["cubin"] == off["cubin"] > 0
    assert not on["runner"]  # the launcher's code generator loads at the first launch
    # the wait for the (slowed) load is inside the call, and the stages still add up to it
    staged = sum(v for k, v in on["timings"].items() if k != "parse")
    assert on["wall"] >= 200 and staged <= on["wall"] < staged + 0.5, on
    warm = run_child("warm", tmp_path / "on")  # a disk hit: nothing to load, nothing imported
    assert warm["cache"] == "hit" and not warm["started"] and not warm["module"]


def test_a_failed_compile_leaves_no_load_running(tmp_path):
    got = run_child("fail", tmp_path)
    assert got["error"].startswith("lowering failed")
    assert got["started"] and not got["alive"] and got["threads"] == 1


def test_the_file_loaded_is_the_one_cuda_bindings_loads(tmp_path):
    """The library found without loading (from the version memo, or else from the wheel) is
    the file cuda.pathfinder then loads: the thread never brings in another NVRTC."""
    child = textwrap.dedent("""\
        import json, os
        from tirx.backend.cuda import nvrtc, nvrtc_library
        found = {"memo": nvrtc_library._remembered_library(),
                 "wheel": nvrtc_library._wheel_library(),
                 "files": nvrtc_library._library_files()}
        nvrtc.nvrtc_version()  # loads it the ordinary way (and writes the memo)
        from cuda.pathfinder import load_nvidia_dynamic_lib
        found["loaded"] = load_nvidia_dynamic_lib("nvrtc").abs_path
        found["memo_after"] = nvrtc_library._remembered_library()
        print(json.dumps(found))
    """)
    env = dict(os.environ, TIRX_CACHE_DIR=str(tmp_path))
    env.pop("TIRX_CACHE", None)
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         env=env, cwd=ROOT, check=True)  # fmt: skip
    got = json.loads(run.stdout.splitlines()[-1])
    real = os.path.realpath
    assert got["memo"] is None  # an empty cache directory: no memo yet
    if got["wheel"] is None:
        pytest.skip("NVRTC does not come from an nvidia pip wheel here")
    assert real(got["wheel"]) == real(got["loaded"]) == real(got["memo_after"])
    assert real(got["files"][-1]) == real(got["loaded"])
    assert all(os.path.dirname(real(f)) == os.path.dirname(real(got["loaded"]))
               for f in got["files"])  # fmt: skip


def test_the_thread_starts_only_where_a_cpu_is_free(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert nvrtc_library.spare_cpu()  # two CPUs, one runnable thread (this one)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    assert not nvrtc_library.spare_cpu()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (3.6, 3.0, 3.0))
    assert nvrtc_library.spare_cpu()


def test_starting_does_nothing_on_a_busy_machine_or_once_the_bindings_are_in(monkeypatch):
    monkeypatch.setattr(nvrtc_library, "_STARTED", {})
    monkeypatch.setattr(nvrtc_library, "spare_cpu", lambda: False)
    nvrtc_library.start_loading()
    assert not nvrtc_library.started()
    monkeypatch.setattr(nvrtc_library, "spare_cpu", lambda: True)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", object())
    nvrtc_library.start_loading()
    assert not nvrtc_library.started()
    nvrtc_library.finish_loading()  # nothing to wait for: returns at once
