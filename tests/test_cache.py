"""The compile cache (memory + disk, atomic, verified) and the settings that place it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tirx import config
from tirx.backend.cuda import cache as cache_mod
from tirx.backend.cuda.cache import CompileCache, cache_key
from tirx.backend.cuda.nvrtc import NvrtcOutput, compile_cuda

REPO = Path(__file__).resolve().parents[1]
SOURCE = 'extern "C" __global__ void k(int* x) { x[threadIdx.x] = 7; }\n'


def fake_output(tag: str = "a", cubin_len: int = 4096) -> NvrtcOutput:
    return NvrtcOutput(
        ptx=f"// ptx {tag}\n.version 9.0\n",
        cubin=bytes(range(256)) * (cubin_len // 256),
        log="",
        options=("--gpu-architecture=sm_90", "--std=c++17"),
        nvrtc_ms=12.5,
        stats={"registers": 8, "kernels": {"k": {"registers": 8}}},
    )


def key_of(tag: str) -> str:
    return cache_key(tag, ("--std=c++17",), "sm_90", (13, 0), "1")


class Counter:
    def __init__(self, out):
        self.calls, self.out = 0, out

    def __call__(self):
        self.calls += 1
        return self.out


# --- settings ---------------------------------------------------------------------------


def test_config_is_read_at_call_time(tmp_path, monkeypatch):
    monkeypatch.delenv("TIRX_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert config.cache_dir() == tmp_path / "xdg" / "tirx"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert config.cache_dir() == Path.home() / ".cache" / "tirx"
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path / "mine"))
    assert config.cache_dir() == tmp_path / "mine"

    monkeypatch.delenv("TIRX_CACHE", raising=False)
    assert config.cache_enabled()
    for off in ("0", "false", "OFF"):
        monkeypatch.setenv("TIRX_CACHE", off)
        assert not config.cache_enabled()
    monkeypatch.setenv("TIRX_CACHE", "1")
    assert config.cache_enabled()

    monkeypatch.delenv("TIRX_TARGET", raising=False)
    assert config.default_target() is None
    monkeypatch.setenv("TIRX_TARGET", "sim")
    assert config.default_target() == "sim"


# --- keys -------------------------------------------------------------------------------


def test_cache_key_is_stable_and_sensitive_to_every_input():
    base = dict(
        source="s", options=("-a",), arch="sm_80", nvrtc_version=(13, 0), codegen_version="1"
    )
    k = cache_key(**base)
    assert len(k) == 64 and k == cache_key(**base)
    variants = [
        dict(source="s "),
        dict(options=("-b",)),
        dict(options=("-a", "-b")),
        dict(arch="sm_90"),
        dict(nvrtc_version=(13, 1)),
        dict(codegen_version="2"),
    ]
    keys = {cache_key(**{**base, **v}) for v in variants}
    assert len(keys) == len(variants) and k not in keys
    # no ambiguity from joining: ("ab",) vs ("a", "b")
    assert cache_key("s", ("ab",), "sm_80", (13, 0), 1) != cache_key(
        "s", ("a", "b"), "sm_80", (13, 0), 1
    )


def test_path_rejects_what_is_not_a_key(cache_dir):
    with pytest.raises(ValueError):
        CompileCache().path("../../etc/passwd")


# --- hits and misses --------------------------------------------------------------------


def test_miss_then_hit_in_memory_and_on_disk(cache_dir):
    key, out = key_of("x"), fake_output()
    c = CompileCache()
    compile_fn = Counter(out)
    assert c.get_or_compile(key, compile_fn) == (out, "miss")
    assert c.get_or_compile(key, compile_fn) == (out, "hit")
    assert compile_fn.calls == 1
    assert c.path(key).is_file() and c.path(key).parent == cache_dir

    fresh = CompileCache()  # a new process: nothing in memory, the disk answers
    got, status = fresh.get_or_compile(key, Counter(None))
    assert status == "hit" and got == out and got.stats == out.stats
    assert fresh.get(key_of("other")) is None


def test_real_compile_round_trip(cache_dir):
    out = compile_cuda(SOURCE, arch="sm_90")
    key = cache_key(SOURCE, out.options, "sm_90", (13, 0), "test")
    CompileCache().put(key, out)
    got = CompileCache().get(key)
    assert got == out
    assert got.cubin == out.cubin and got.stats == out.stats and got.options == out.options


def test_directory_is_private(cache_dir):
    CompileCache().put(key_of("x"), fake_output())
    assert stat.S_IMODE(os.stat(cache_dir).st_mode) == 0o700


def test_disk_cache_can_be_turned_off(cache_dir, monkeypatch):
    monkeypatch.setenv("TIRX_CACHE", "0")
    c = CompileCache()
    c.put(key_of("x"), fake_output())
    assert c.get(key_of("x")) is not None  # memory still works
    assert not cache_dir.exists()
    assert CompileCache().get(key_of("x")) is None


def test_explicit_directory_wins(cache_dir, tmp_path):
    c = CompileCache(tmp_path / "elsewhere", disk=True)
    c.put(key_of("x"), fake_output())
    assert (tmp_path / "elsewhere" / (key_of("x") + ".entry")).is_file()
    assert not cache_dir.exists()


# --- damaged entries are misses, and get repaired ----------------------------------------


def _stored(cache_dir) -> tuple[str, Path, NvrtcOutput]:
    key, out = key_of("x"), fake_output()
    CompileCache().put(key, out)
    return key, CompileCache().path(key), out


def _assert_miss_then_repaired(key, path, out):
    assert CompileCache().get(key) is None
    got, status = CompileCache().get_or_compile(key, Counter(out))
    assert status == "miss" and got == out
    assert CompileCache().get(key) == out  # overwritten with a valid entry


@pytest.mark.parametrize("where", ["payload", "header_key", "header_digest", "last_byte"])
def test_flipped_byte_is_a_miss(cache_dir, where):
    key, path, out = _stored(cache_dir)
    data = bytearray(path.read_bytes())
    offset = {
        "payload": cache_mod._HEADER.size + 100,
        "header_key": 20,
        "header_digest": 8 + 4 + 64 + 3,
        "last_byte": len(data) - 1,
    }[where]
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    _assert_miss_then_repaired(key, path, out)


@pytest.mark.parametrize(
    "keep",
    [0, 10, cache_mod._HEADER.size - 1, cache_mod._HEADER.size, cache_mod._HEADER.size + 1000, -1],
)
def test_truncated_entry_is_a_miss(cache_dir, keep):
    key, path, out = _stored(cache_dir)
    data = path.read_bytes()
    path.write_bytes(data[:keep] if keep >= 0 else data[:-1])
    _assert_miss_then_repaired(key, path, out)


def test_foreign_files_are_misses(cache_dir):
    key, path, out = _stored(cache_dir)
    path.write_bytes(b"#!/bin/sh\necho this is not a tirx cache entry\n" * 10)
    _assert_miss_then_repaired(key, path, out)
    # a valid entry of another key, copied under this key's name
    other = key_of("other")
    CompileCache().put(other, fake_output("other"))
    path.write_bytes(CompileCache().path(other).read_bytes())
    _assert_miss_then_repaired(key, path, out)


def test_other_format_version_is_a_miss(cache_dir, monkeypatch):
    key, path, out = _stored(cache_dir)
    monkeypatch.setattr(cache_mod, "FORMAT_VERSION", cache_mod.FORMAT_VERSION + 1)
    assert CompileCache().get(key) is None


def test_unwritable_directory_only_warns(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TIRX_CACHE_DIR", str(blocker / "cache"))
    c = CompileCache()
    with pytest.warns(RuntimeWarning, match="compile cache not written"):
        c.put(key_of("x"), fake_output())
    assert c.get(key_of("x")) is not None


# --- clear ------------------------------------------------------------------------------


def test_clear_removes_entries_only(cache_dir):
    c = CompileCache()
    for tag in "abc":
        c.put(key_of(tag), fake_output(tag))
    (cache_dir / "notes.txt").write_text("the user's own file")
    (cache_dir / ".0123456789abcdef-x.tmp").write_bytes(b"left over by a crash")
    c.clear()
    assert len(c) == 0 and c.get(key_of("a")) is None
    assert sorted(os.listdir(cache_dir)) == ["notes.txt"]
    c.clear()  # idempotent


# --- two processes, one key -------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys, time
    from tirx.backend.cuda.cache import CompileCache
    from tirx.backend.cuda.nvrtc import NvrtcOutput
    key, start, tag = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    while time.time() < start:
        pass
    for i in range(150):
        out = NvrtcOutput(ptx=f"// {tag} {i}\\n", cubin=bytes([i % 256]) * 50_000, log="",
                          options=("--std=c++17",), nvrtc_ms=float(i), stats={"registers": i})
        got, status = CompileCache().get_or_compile(key, lambda: out)
        assert got.cubin == bytes([got.stats["registers"] % 256]) * 50_000, "torn entry"
        CompileCache().put(key, out)
    print("ok")
    """
)


def test_two_processes_writing_one_key(cache_dir):
    import time

    key = key_of("race")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TIRX_CACHE_DIR": str(cache_dir)}
    start = time.time() + 1.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, key, str(start), tag],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("p1", "p2")
    ]
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        assert stdout.strip() == "ok"
    got = CompileCache().get(key)
    assert got is not None and got.ptx.split()[1] in {"p1", "p2"}
    assert os.listdir(cache_dir) == [key + ".entry"]  # no temporary files left behind
