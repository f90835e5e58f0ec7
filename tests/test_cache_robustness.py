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

import tirx
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
        from tirx.files import exclusive_lock
        for _ in range(20):
            with exclusive_lock(Path({str(tmp_path)!r}) / "frontend.lock", 60.0) as held:
                assert held
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


# ------------------------------------------------------------------ a writer stopped in the lock

_HOLD_THE_LOCK = textwrap.dedent(
    """
    import fcntl, os, signal, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"%d\\n" % os.getpid())
    print("held", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # stopped while it holds the lock, as by Ctrl-Z
    """
)


@pytest.fixture
def stopped_holder(tmp_path):
    """A process stopped while it holds ``frontend.lock`` of the cache ``tmp_path / "cache"``."""
    pytest.importorskip("fcntl")
    cache = tmp_path / "cache"
    cache.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_THE_LOCK, str(cache / "frontend.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    yield cache, holder
    holder.kill()
    holder.wait(timeout=30)


def test_a_stopped_lock_holder_never_stops_a_compile(tmp_path, stopped_holder):
    """A process stopped while it holds the front-end cache's lock: another process compiles a
    kernel nobody stored yet within the lock's wait (plus its own work), says once why it
    stores nothing, and exits; once the holder is gone, the next process stores it."""
    cache, holder = stopped_holder
    (tmp_path / "kernel_mod.py").write_text(_KERNEL)
    env = {**os.environ, "TIRX_CACHE_DIR": str(cache), "PYTHONPATH": str(tmp_path)}
    timed = textwrap.dedent(
        """
        import time, kernel_mod, tirx
        for v in (7, 8):
            start = time.perf_counter()
            tirx.compile(kernel_mod.make(v), target="cuda -arch=sm_80")
            print(f"{time.perf_counter() - start:.3f}")
        """
    )
    start = time.monotonic()
    blocked = _run(timed, env, timeout=60)
    assert blocked.returncode == 0, blocked.stderr
    assert time.monotonic() - start < 30
    # each compile waited for the lock at most LOCK_WAIT seconds, then went on
    assert all(float(s) < frontend.LOCK_WAIT + 5 for s in blocked.stdout.split())
    warning = blocked.stderr
    assert warning.count("RuntimeWarning") == 1, warning  # once per process
    assert f"held by process {holder.pid}" in warning and "frontend.lock" in warning
    assert "Resume or end that process, or delete the lock file" in warning
    assert not list((cache / "frontend").glob("*.entry"))  # nothing stored meanwhile
    assert not list((cache / "frontend").glob(".*.tmp"))  # and nothing left behind

    holder.kill()
    holder.wait(timeout=30)
    stored = _run(timed, env, timeout=60)
    assert stored.returncode == 0 and "RuntimeWarning" not in stored.stderr, stored.stderr
    assert len(list((cache / "frontend").glob("*.entry"))) == 1


def test_deleting_the_lock_file_frees_the_writers(tmp_path, stopped_holder, monkeypatch):
    """The warning's other way out: with the stopped holder's lock file deleted, this process
    takes a new one and stores."""
    cache, _ = stopped_holder
    monkeypatch.setenv("TIRX_CACHE_DIR", str(cache))
    (cache / "frontend.lock").unlink()
    kernel = _fresh_kernel(tmp_path, 11)
    tirx.compile(kernel, target="cuda -arch=sm_80")
    assert len(list((cache / "frontend").glob("*.entry"))) == 1


def _fresh_kernel(tmp_path, value: int):
    """A kernel of ``_KERNEL``'s factory, from a file of its own in ``tmp_path``."""
    from tests.helpers import define

    return define(_KERNEL, tmp_path, "make")(value)


def test_an_entry_replaced_while_merging_is_merged_again(tmp_path, monkeypatch):
    """Another writer replaces the entry after this one read it and before its rename: the
    rename does not happen over it; this writer merges with the new entry, and both variants
    are kept."""
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    from tests.helpers import define

    make = define(_KERNEL, tmp_path, "make")
    first, second = make(1), make(2)  # one key, two variants
    real = frontend.write_temporary
    calls = []

    def write_then_race(final, data):
        tmp = real(final, data)
        calls.append(final)
        if len(calls) == 1:  # the other writer's store lands between read and rename
            tirx.compile(second, target="cuda -arch=sm_80")
        return tmp

    monkeypatch.setattr(frontend, "write_temporary", write_then_race)
    tirx.compile(first, target="cuda -arch=sm_80")
    (entry,) = (tmp_path / "frontend").glob("*.entry")
    assert len(frontend._read(entry.stem)) == 2
    assert len(calls) == 3  # ours, theirs, ours again after the merge
    assert not list((tmp_path / "frontend").glob(".*.tmp"))


def test_a_temporary_file_is_private_new_and_beside_its_target(tmp_path, monkeypatch):
    """write_temporary makes its file as tempfile.mkstemp would: a fresh random name beside
    the target, created exclusively (never an existing file, nor through a link), mode 0600;
    a name already taken is passed over."""
    import stat

    from tirx import files

    final = tmp_path / "entry.bin"
    a = files.write_temporary(final, b"one")
    b = files.write_temporary(final, b"two")
    assert a != b
    for path, data in ((a, b"one"), (b, b"two")):
        assert os.path.dirname(path) == str(tmp_path)
        assert os.path.basename(path).startswith(".entry.bin-") and path.endswith(".tmp")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert open(path, "rb").read() == data
    # a name that exists (here a link to a file elsewhere) is never opened: the next is taken
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    draws = iter([bytes(6), bytes(6), b"\x01" * 6])
    os.symlink(outside, tmp_path / f".entry.bin-{bytes(6).hex()}.tmp")
    monkeypatch.setattr(files.os, "urandom", lambda n: next(draws))
    c = files.write_temporary(final, b"three")
    assert c.endswith("-" + "01" * 6 + ".tmp") and open(c, "rb").read() == b"three"
    assert outside.read_bytes() == b"keep"


def test_writing_a_cache_entry_imports_no_tempfile(tmp_path):
    code = (
        "import sys\nfrom pathlib import Path\nfrom tirx.files import write_atomic\n"
        f"write_atomic(Path({str(tmp_path / 'x')!r}), b'data')\n"
        "print(sorted({'tempfile', 'shutil', 'random'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert (tmp_path / "x").read_bytes() == b"data"
