"""A cold compile for a named arch starts the CUDA driver's initialization beside the lowering
(NVRTC's first compile would wait for it): in a thread, once per process, never on a warm hit
or for the simulator, and an exiting process waits for it.

Without a GPU these run against a stand-in ``libcuda.so.1`` (built here with the C compiler,
found through ``LD_LIBRARY_PATH``) whose ``cuInit`` logs its calls and takes as long as it is
told; the premise itself (NVRTC's compile initializes the driver) is checked on the GPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tirx.backend.cuda import libnvrtc

ROOT = Path(__file__).resolve().parents[1]

_STAND_IN = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
/* As the driver: one initialization per process; a call made while it runs waits for it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized = 0;
static void note(const char *what) {
  const char *log = getenv("STAND_IN_LOG");
  FILE *f = log ? fopen(log, "a") : NULL;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  if (f) {
    fprintf(f, "%s %ld %.6f\n", what, (long)syscall(SYS_gettid), t.tv_sec + 1e-9 * t.tv_nsec);
    fclose(f);
  }
}
int cuInit(unsigned int flags) {
  const char *ms = getenv("STAND_IN_INIT_MS");
  note(flags ? "call-with-flags" : "call");
  pthread_mutex_lock(&lock);
  if (!initialized) {
    if (ms) usleep(1000 * atoi(ms));
    initialized = 1;
    note("initialized");
  }
  pthread_mutex_unlock(&lock);
  return 100; /* CUDA_ERROR_NO_DEVICE */
}
"""


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory) -> Path:
    """A folder holding the stand-in libcuda.so.1."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in driver library")
    folder = tmp_path_factory.mktemp("driver")
    (folder / "stand_in.c").write_text(_STAND_IN)
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(folder / "libcuda.so.1"), str(folder / "stand_in.c"),
         "-lpthread"],
        check=True,
    )  # fmt: skip
    return folder


_COMPILE = """
    import json, sys, threading, time
    import tirx
    from tirx.backend.cuda import libnvrtc
    from tirx.errors import TirxError

    if sys.argv[1] == "seed":
        from tirx.examples.warp_matmul import warp_matmul as kernel
    else:  # a kernel whose lowering fails for sm_80 (an sm_90 fence): NVRTC never runs
        from tirx.examples.gemm_wgmma import make_gemm_wgmma
        kernel = make_gemm_wgmma(256, 128, 256)
    t0 = time.monotonic()
    try:
        exe = tirx.compile(kernel, target=sys.argv[2])
        cache = exe.cache
    except TirxError as e:
        cache = type(e).__name__
    print(json.dumps({"t0": t0, "end": time.monotonic(), "cache": cache,
                      "main": threading.get_native_id(), "started": bool(libnvrtc._driver_init)}))
"""


def _run(stand_in, tmp_path, kernel, target, init_ms=0):
    """A fresh process compiling ``kernel`` for ``target`` with the stand-in driver: its report,
    the stand-in's log as (what, thread, time) and the process's wall time in s."""
    log = tmp_path / "cuinit.log"
    log.unlink(missing_ok=True)
    env = dict(
        os.environ,
        TIRX_CACHE_DIR=str(tmp_path / "cache"),
        LD_LIBRARY_PATH=os.pathsep.join([str(stand_in), os.environ.get("LD_LIBRARY_PATH", "")]),
        STAND_IN_LOG=str(log),
        STAND_IN_INIT_MS=str(init_ms),
    )
    env.pop("TIRX_CACHE", None)
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_COMPILE), kernel, target],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    wall = time.monotonic() - t0
    lines = log.read_text().split("\n") if log.exists() else []
    notes = [(w, int(tid), float(t)) for w, tid, t in (x.split() for x in lines if x)]
    return json.loads(out.stdout.strip().splitlines()[-1]), notes, wall


def test_a_cold_compile_for_a_named_arch_initializes_the_driver_beside_it(stand_in, tmp_path):
    """cuInit is called first from a thread of tirx's, during the compile and before NVRTC's
    own call (from the compiling thread) finds the initialization under way: the driver is
    initialized once."""
    got, notes, _ = _run(stand_in, tmp_path, "seed", "cuda -arch=sm_90", init_ms=200)
    assert got["cache"] == "miss" and got["started"]
    calls = [(tid, t) for what, tid, t in notes if what == "call"]
    assert [what for what, _, _ in notes].count("initialized") == 1
    assert len(calls) == 2, notes  # tirx's, then NVRTC's first compile's
    (ours, t_ours), (nvrtcs, t_nvrtc) = calls
    assert ours != got["main"] and nvrtcs == got["main"]
    assert got["t0"] < t_ours < t_nvrtc < got["end"]


def test_a_warm_hit_and_the_simulator_leave_the_driver_alone(stand_in, tmp_path):
    _run(stand_in, tmp_path, "seed", "cuda -arch=sm_90")  # fills the cache
    got, notes, _ = _run(stand_in, tmp_path, "seed", "cuda -arch=sm_90")
    assert got["cache"] == "hit" and not got["started"]
    assert notes == []
    got, notes, _ = _run(stand_in, tmp_path, "seed", "sim")
    assert not got["started"] and notes == []


def test_a_process_exits_only_after_the_initialization(stand_in, tmp_path):
    """A compile whose lowering fails never reaches NVRTC; the process, ending at once, waits
    for the initialization its compile started (a library torn down under a thread running
    in it may crash)."""
    got, notes, wall = _run(stand_in, tmp_path, "wgmma", "cuda -arch=sm_80", init_ms=1500)
    assert got["cache"] == "ContractError" and got["started"]
    assert [what for what, _, _ in notes] == ["call", "initialized"]
    assert notes[-1][2] > got["end"]  # initialized after the compile gave up...
    assert wall >= 1.5  # ...and the process waited for it


@pytest.fixture
def fresh_state(monkeypatch):
    """libnvrtc as in a process that started no initialization and never probed the driver."""
    from tirx.backend.cuda import driver

    monkeypatch.setattr(libnvrtc, "_driver_init", None)
    monkeypatch.setattr(driver, "driver_probed", lambda: False)
    return libnvrtc


def test_without_a_driver_library_the_thread_finds_none_and_ends(fresh_state, monkeypatch):
    monkeypatch.setattr(fresh_state, "_DRIVER_LIBRARY", b"libtirx-no-such-driver.so.1")
    fresh_state._start_driver_init()
    lock = fresh_state._driver_init
    assert lock
    assert lock.acquire(timeout=10)  # the thread ended
    lock.release()


def test_a_driver_tirx_probed_already_is_not_initialized_again(fresh_state, monkeypatch):
    from tirx.backend.cuda import driver

    monkeypatch.setattr(driver, "driver_probed", lambda: True)
    fresh_state._start_driver_init()
    assert fresh_state._driver_init is None


def test_no_thread_for_it_leaves_the_initialization_to_nvrtc(fresh_state, monkeypatch):
    """A process that cannot start a thread does without: NVRTC initializes the driver as it
    would have, and no thread is tried again."""
    import _thread

    def no_thread(*args):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_thread, "start_new_thread", no_thread)
    fresh_state._start_driver_init()
    assert fresh_state._driver_init is False
    fresh_state._start_driver_init()  # once per process: not tried again
    assert fresh_state._driver_init is False


_PREMISE = """
    import ctypes, json, sys, time
    from tirx.backend.cuda.nvrtc import compile_cuda

    compile_cuda(sys.argv[1], arch=sys.argv[2])
    mapped = any("libcuda.so" in line for line in open("/proc/self/maps"))
    t0 = time.perf_counter()
    rc = ctypes.CDLL("libcuda.so.1").cuInit(0)
    print(json.dumps({"mapped": mapped, "rc": rc, "cuinit_ms": (time.perf_counter() - t0) * 1e3}))
"""


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "sm_100a"])
def test_nvrtcs_first_compile_initializes_the_driver(arch):
    """The premise: in a process that touched no CUDA driver, NVRTC's compile (any arch)
    initializes it, so starting that earlier changes nothing but when."""
    from tirx.backend.cuda import driver

    if driver.gpu_count() == 0:
        pytest.skip("needs an NVIDIA GPU")
    source = 'extern "C" __global__ void k(int* p) { p[threadIdx.x] = 1; }'
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_PREMISE), source, arch],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["mapped"] and got["rc"] == 0
    assert got["cuinit_ms"] < 5, got  # done already: NVRTC initialized it


_COLD_RUN = """
    import json
    import torch
    import tirx
    from tirx.backend.cuda import libnvrtc
    from tirx.examples.warp_matmul import warp_matmul

    exe = tirx.compile(warp_matmul, target="cuda -arch=sm_90")
    started = bool(libnvrtc._driver_init)
    A = torch.randn(16, 16, dtype=torch.float16, device="cuda")
    B = torch.randn(8, 16, dtype=torch.float16, device="cuda")
    Out = torch.empty(16, 8, dtype=torch.float32, device="cuda")
    exe(A, B, Out)
    err = (Out - (A.float() @ B.float().T)).abs().max().item()
    print(json.dumps({"started": started, "err": err}))
"""


@pytest.mark.gpu
def test_a_cold_compile_with_the_driver_initialized_beside_it_runs(tmp_path):
    from tirx.backend.cuda import driver

    if driver.gpu_count() == 0 or driver.device_arch(0) != "sm_90":
        pytest.skip("needs an sm_90 GPU")
    env = dict(os.environ, TIRX_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TIRX_CACHE", None)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_COLD_RUN)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["started"] and got["err"] < 1e-2
