"""The caches on disk survive what other programs and processes put there.

* an entry that is not a regular file (a named pipe, a directory) is a miss, read without
  blocking: ``tirx.compile`` never waits on it;
* processes that store variants of one kernel at the same time keep every one of them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tirx import frontend_cache as frontend
from tirx.backend.cuda import cache as cubin_cache

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")


def _returns_soon(fn, seconds=10.0):
    """``fn()``'s result, failing the test if it has not returned after ``seconds``."""
    out = []
    worker = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{fn} blocked for {seconds} s"
    return out[0]


def test_read_regular_skips_pipes_and_directories(tmp_path):
    pipe, folder, plain = tmp_path / "pipe", tmp_path / "folder", tmp_path / "plain"
    os.mkfifo(pipe)
    folder.mkdir()
    plain.write_bytes(b"data")
    assert _returns_soon(lambda: cubin_cache.read_regular(pipe)) is None
    assert cubin_cache.read_regular(folder) is None
    assert cubin_cache.read_regular(tmp_path / "missing") is None
    assert cubin_cache.read_regular(plain) == b"data"
    link = tmp_path / "link"
    link.symlink_to(plain)
    assert cubin_cache.read_regular(link) == b"data"  # a link to a regular file is fine


def test_cubin_cache_entry_that_is_a_pipe_is_a_miss(tmp_path):
    cache = cubin_cache.CompileCache(tmp_path, disk=True)
    key = "ab" * 32
    os.mkfifo(cache.path(key))
    assert _returns_soon(lambda: cache.get(key)) is None


def test_frontend_entry_that_is_a_pipe_is_a_miss(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    (tmp_path / "frontend").mkdir()
    key = "cd" * 32
    os.mkfifo(tmp_path / "frontend" / f"{key}.entry")
    assert _returns_soon(lambda: frontend._read(key)) == []


_KERNEL = """
import tirx
from tirx import T


def make(v):
    @T.function
    def fill(A: T.Tensor((32,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        A[T.cuda.lane_id()] = v

    return fill
"""


def _run(code: str, env: dict, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_compile_does_not_block_on_pipes_in_the_cache(tmp_path):
    """End to end: every entry a kernel's compile reads (front-end, CUBIN, NVRTC version memo)
    replaced by a named pipe; a fresh process compiles it all the same, and soon."""
    (tmp_path / "kernel_mod.py").write_text(_KERNEL)
    env = {**os.environ, "TIRX_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(tmp_path)}
    compile_it = (
        "import kernel_mod, tirx; tirx.compile(kernel_mod.make(3), target='cuda -arch=sm_80')"
    )
    first = _run(compile_it, env)
    assert first.returncode == 0, first.stderr
    cache = tmp_path / "cache"
    entries = [p for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert any(p.parent.name == "frontend" for p in entries)
    for p in entries:
        p.unlink()
        os.mkfifo(p)
    second = _run(compile_it, env, timeout=60)
    assert second.returncode == 0, second.stderr


def test_concurrent_frontend_writers_keep_every_variant(tmp_path, monkeypatch):
    """Several processes store variants of one kernel (one closure value each) under the same
    key at once: every variant is in the entry afterwards."""
    (tmp_path / "kernel_mod.py").write_text(_KERNEL)
    go = tmp_path / "go"
    cache = tmp_path / "cache"
    env = {**os.environ, "TIRX_CACHE_DIR": str(cache), "PYTHONPATH": str(tmp_path)}
    worker = textwrap.dedent(
        f"""
        import os, sys, time
        import kernel_mod, tirx
        kernel = kernel_mod.make(int(sys.argv[1]))  # parsed: a variant to store
        while not os.path.exists({str(go)!r}):
            time.sleep(0.001)
        tirx.compile(kernel, target="cuda -arch=sm_80")
        """
    )
    n = 8  # as many variants as an entry keeps
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", worker, str(v)], env=env, stderr=subprocess.PIPE, text=True
        )
        for v in range(n)
    ]
    try:
        time.sleep(3.0)  # let them import and parse; then all store at once
        go.write_text("")
        for p in procs:
            assert p.wait(timeout=120) == 0, p.stderr.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    entries = list((cache / "frontend").glob("*.entry"))
    assert len(entries) == 1
    monkeypatch.setenv("TIRX_CACHE_DIR", str(cache))
    variants = frontend._read(entries[0].stem)
    assert len({v.digest for v in variants}) == n, [v.digest for v in variants]
    assert all(v.payloads for v in variants)


def test_writer_lock_is_exclusive(tmp_path):
    """Two holders of the front-end writer lock never overlap (processes, through flock)."""
    pytest.importorskip("fcntl")
    log = tmp_path / "log"
    code = textwrap.dedent(
        f"""
        import os, time
        from pathlib import Path
        from tirx import frontend_cache as frontend
        for _ in range(20):
            with frontend._writer_lock(Path({str(tmp_path)!r})):
                with open({str(log)!r}, "a") as f:
                    f.write("in\\n")
                time.sleep(0.002)
                with open({str(log)!r}, "a") as f:
                    f.write("out\\n")
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(3)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    lines = log.read_text().split()
    assert len(lines) == 120
    assert all(a == "in" and b == "out" for a, b in zip(lines[::2], lines[1::2]))
