"""The front-end cache (tirx/frontend_cache.py): a kernel compiled by an earlier process is neither
parsed, lowered nor code-generated again, and never loaded stale.

Cross-process behaviour runs in fresh subprocesses sharing a temporary ``TIRX_CACHE_DIR``;
what only needs the disk (and not a new process) runs here, executing one kernel file twice.
Every compile is for sm_90 through NVRTC: no GPU needed.
"""

from __future__ import annotations

import json
import linecache
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import tirx
from tests.helpers import PRELUDE
from tirx import frontend_cache as frontend
from tirx.examples.gemm import make_gemm
from tirx.ir import serial
from tirx.ir.printer import print_function

REPO = Path(__file__).resolve().parents[1]
TARGET = "cuda -arch=sm_90"

# Everything the kernel body reads from outside comes from the names N and L.
KERNEL = """
@T.function
def k(A: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    s = T.alloc_shared((4, 8), "int32", layout=L)
    for i in range(1):
        s[lane // 8, lane % 8] = lane * N + i
    T.cuda.cta_sync()
    A[lane] = s[lane % 4, lane // 4]
"""
ROW_MAJOR = "TileLayout(S[4, 8])"
COLUMN_MAJOR = "TileLayout(S[(4, 8) : (1, 4)])"

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import tirx
namespace = {}
exec("from kern import *", namespace)
kernel = eval(sys.argv[2], namespace)
exe = tirx.compile(kernel, target=sys.argv[3])
record = kernel.frontend
print(json.dumps({
    "cache": exe.cache, "timings": exe.timings, "source": exe.source, "ptx": exe.ptx,
    "kernel_source": kernel.source,
    "found": record is not None and record.found, "cacheable": record is not None,
    "parsed": kernel._ir is not None, "pickle": "pickle" in sys.modules,
    "node_modules": sorted(m for m in sys.modules if m.startswith("tirx.families.")
                           and m.endswith(".nodes")),
}))
"""


def write_kernel(folder: Path, body: str = KERNEL, params: str = "") -> Path:
    """``folder/kern.py``: the prelude, ``params`` (the values the kernel captures), ``body``."""
    path = folder / "kern.py"
    path.write_text(PRELUDE + params + body)
    return path


def compile_in_subprocess(cache_dir: Path, folder: Path, kernel: str = "k", **env) -> dict:
    """What a new process reports compiling ``kernel`` (an expression in ``folder/kern.py``'s
    namespace) with this cache directory."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TIRX_CACHE_DIR": str(cache_dir), **env}
    # -B: the tests rewrite a module within the second and at its size, which Python's own
    # bytecode cache (keyed by mtime and size) would take for the old one
    proc = subprocess.run(
        [sys.executable, "-B", "-c", CHILD, str(folder), kernel, TARGET],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_file(path: Path, name: str = "k", **scope):
    """Execute ``path`` as an import would (``scope`` preset in its globals); its ``name``."""
    linecache.checkcache(str(path))
    namespace = {"__name__": path.stem, **scope}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102
    return namespace[name]


def entries(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "frontend").glob("*.entry"))


def layout(text: str):
    from tirx.layout import S, TileLayout  # noqa: F401 - names the spec text uses

    return eval(text)  # noqa: S307


# --- across processes -----------------------------------------------------------------------


def test_a_second_process_skips_the_front_end(cache_dir, tmp_path):
    write_kernel(tmp_path, params=f"N = 3\nL = {ROW_MAJOR}\n")
    cold = compile_in_subprocess(cache_dir, tmp_path)
    assert (cold["cache"], cold["found"], cold["parsed"]) == ("miss", False, True)
    assert len(entries(cache_dir)) == 1
    warm = compile_in_subprocess(cache_dir, tmp_path)
    assert (warm["cache"], warm["found"], warm["parsed"]) == ("hit", True, False)
    assert warm["timings"]["parse"] == warm["timings"]["lower"] == warm["timings"]["codegen"] == 0
    assert warm["timings"]["frontend"] > 0 and set(warm["timings"]) == set(cold["timings"]) | {
        "frontend"
    }
    assert not warm["pickle"]  # the IR is read back without pickle
    # exactly what a compile without any disk cache produces
    plain = compile_in_subprocess(cache_dir, tmp_path, TIRX_CACHE="0")
    assert not plain["cacheable"] and plain["parsed"]
    assert warm["source"] == cold["source"] == plain["source"]
    assert warm["ptx"] == cold["ptx"] == plain["ptx"]


FAMILY_NODES_KERNEL = """
@T.function
def k(A: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    T.cuda.atomic_add(T.address_of(A[lane]), T.float32(1.0))
    T.cuda.nano_sleep(T.uint32(N))
"""


def test_a_kernel_holding_family_nodes_is_read_back_with_their_classes(cache_dir, tmp_path):
    """The lowered IR of a kernel that holds a family's own node classes (an atomic, a sleep:
    tirx/families/*/nodes.py) is stored and read back by a process that never parsed the
    kernel: reading the entry imports the families' node modules it names."""
    write_kernel(tmp_path, FAMILY_NODES_KERNEL, "N = 20\n")
    cold = compile_in_subprocess(cache_dir, tmp_path)
    assert cold["cache"] == "miss" and cold["parsed"]
    warm = compile_in_subprocess(cache_dir, tmp_path)
    assert warm["found"] and not warm["parsed"] and warm["cache"] == "hit"
    assert warm["timings"]["lower"] == 0.0 and "frontend" in warm["timings"]
    assert warm["source"] == cold["source"] and "atomicAdd" in warm["source"]
    expected = ["tirx.families.cta_ops.nodes", "tirx.families.thread_ops.nodes"]
    assert warm["node_modules"] == expected


def test_editing_the_file_anywhere_is_a_miss(cache_dir, tmp_path):
    path = write_kernel(tmp_path, params=f"N = 3\nL = {ROW_MAJOR}\n")
    compile_in_subprocess(cache_dir, tmp_path)
    assert compile_in_subprocess(cache_dir, tmp_path)["found"]
    with open(path, "a") as f:
        f.write("# a comment, far from the kernel\n")
    edited = compile_in_subprocess(cache_dir, tmp_path)
    assert not edited["found"] and edited["parsed"]
    assert compile_in_subprocess(cache_dir, tmp_path)["found"]  # the edited file's own entry


def test_a_captured_value_changed_elsewhere_is_a_miss_and_the_new_value_is_used(
    cache_dir, tmp_path
):
    """The kernel's file stays the same; the values it imports from another file change."""
    params = tmp_path / "params.py"
    params.write_text(f"from tirx.layout import S, TileLayout\nN = 3\nL = {ROW_MAJOR}\n")
    write_kernel(tmp_path, params="from params import L, N\n")
    first = compile_in_subprocess(cache_dir, tmp_path)
    assert "(lane * 3)" in first["source"]
    assert compile_in_subprocess(cache_dir, tmp_path)["found"]

    params.write_text(f"from tirx.layout import S, TileLayout\nN = 5\nL = {ROW_MAJOR}\n")
    changed = compile_in_subprocess(cache_dir, tmp_path)
    assert not changed["found"] and changed["parsed"]
    assert "(lane * 5)" in changed["source"] and "(lane * 3)" not in changed["source"]

    params.write_text(f"from tirx.layout import S, TileLayout\nN = 5\nL = {COLUMN_MAJOR}\n")
    relaid = compile_in_subprocess(cache_dir, tmp_path)
    assert not relaid["found"] and relaid["source"] != changed["source"]
    # both variants stay known
    params.write_text(f"from tirx.layout import S, TileLayout\nN = 3\nL = {ROW_MAJOR}\n")
    again = compile_in_subprocess(cache_dir, tmp_path)
    assert again["found"] and again["source"] == first["source"]


def _flip_a_byte(path: Path, where: float) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * where)] ^= 0xFF
    path.write_bytes(bytes(data))


def _replace(path: Path, old: bytes, new: bytes) -> None:
    """Damage that still reads back: the same length, a valid string."""
    data = path.read_bytes()
    assert data.count(old) == 1
    path.write_bytes(data.replace(old, new))


# name: (damage, whether the kernel is still found: only its payload was damaged)
DAMAGE = {
    "metadata": (lambda p: _flip_a_byte(p, 0.02), False),
    "kernel source": (lambda p: _replace(p, b"lane * N + i", b"lane * N - i"), False),
    "payload": (lambda p: _flip_a_byte(p, 0.9), True),
    "generated source": (lambda p: _replace(p, b"(lane * 3)", b"(lane * 7)"), True),
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[:-100]), False),
    "foreign": (lambda p: p.write_bytes(b"\x7fELF not a tirx entry" * 50), False),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_entry_is_never_used_and_is_rewritten(cache_dir, tmp_path, damage):
    write_kernel(tmp_path, params=f"N = 3\nL = {ROW_MAJOR}\n")
    good = compile_in_subprocess(cache_dir, tmp_path)
    (entry,) = entries(cache_dir)
    spoil, found = DAMAGE[damage]
    spoil(entry)
    again = compile_in_subprocess(cache_dir, tmp_path)
    assert again["found"] == found and again["timings"]["lower"] > 0  # lowered again
    assert again["source"] == good["source"] and again["ptx"] == good["ptx"]
    assert again["kernel_source"] == good["kernel_source"]
    warm = compile_in_subprocess(cache_dir, tmp_path)  # rewritten, whole again
    assert warm["found"] and warm["timings"]["frontend"] > 0 and warm["timings"]["lower"] == 0
    assert warm["source"] == good["source"]


def test_factory_kernels_with_different_closure_values_never_share_code(cache_dir, tmp_path):
    (tmp_path / "kern.py").write_text("from tirx.examples.gemm import make_gemm\n")
    small = compile_in_subprocess(cache_dir, tmp_path, "make_gemm(64, 64, 16)")
    big = compile_in_subprocess(cache_dir, tmp_path, "make_gemm(128, 64, 32)")
    assert not small["found"] and not big["found"]  # one key, two variants
    assert len(entries(cache_dir)) == 1
    small2 = compile_in_subprocess(cache_dir, tmp_path, "make_gemm(64, 64, 16)")
    big2 = compile_in_subprocess(cache_dir, tmp_path, "make_gemm(128, 64, 32)")
    assert small2["found"] and big2["found"]
    assert small2["source"] == small["source"] and big2["source"] == big["source"]
    assert small["source"] != big["source"]


# --- in one process, through the disk -------------------------------------------------------


def test_a_found_kernel_parses_on_first_use_and_runs_on_the_simulator(cache_dir, tmp_path):
    path = write_kernel(tmp_path, params=f"N = 3\nL = {ROW_MAJOR}\n")
    cold = run_file(path)
    cold_exe = tirx.compile(cold, TARGET)
    kernel = run_file(path)
    assert kernel.frontend.found and kernel._ir is None
    assert (kernel.name, kernel.source, repr(kernel)) == (cold.name, cold.source, repr(cold))
    exe = tirx.compile(kernel, TARGET)
    assert exe.source == cold_exe.source and kernel._ir is None
    assert exe.script(lowered=True) == cold_exe.script(lowered=True)
    assert exe.script() == cold_exe.script() == kernel.script() == cold.script()
    assert kernel._ir is not None and print_function(kernel.ir) == print_function(cold.ir)
    out = np.zeros(32, np.int32)
    tirx.compile(kernel, "sim")(out)
    lane = np.arange(32)
    assert (out == 3 * (8 * (lane % 4) + lane // 4)).all()


def test_values_captured_in_lists_are_those_of_decoration(cache_dir, tmp_path):
    path = write_kernel(tmp_path, KERNEL.replace("lane * N", "lane * N[0]"))
    tirx.compile(run_file(path, N=[3], L=layout(ROW_MAJOR)), TARGET)
    sizes = [3]
    kernel = run_file(path, N=sizes, L=layout(ROW_MAJOR))
    assert kernel.frontend.found
    sizes[0] = 9  # after decoration: neither the stored code nor a later parse sees it
    assert "(lane * 3)" in tirx.compile(kernel, TARGET).source
    assert "lane * 3" in kernel.script() and "lane * 9" not in kernel.script()


def test_a_changed_value_is_a_miss_and_each_variant_is_kept(cache_dir, tmp_path):
    path = write_kernel(tmp_path)  # N and L come from the namespace the file runs in
    sources = {}
    for n, spec in [(3, ROW_MAJOR), (4, ROW_MAJOR), (3, COLUMN_MAJOR)]:
        kernel = run_file(path, N=n, L=layout(spec))
        assert kernel.frontend is not None and not kernel.frontend.found
        sources[n, spec] = tirx.compile(kernel, TARGET).source
    assert len(set(sources.values())) == 3
    for (n, spec), source in sources.items():
        kernel = run_file(path, N=n, L=layout(spec))
        assert kernel.frontend.found and tirx.compile(kernel, TARGET).source == source
    assert len(entries(cache_dir)) == 1


def test_a_builtin_shadowed_by_a_global_is_a_miss(cache_dir, tmp_path):
    path = write_kernel(tmp_path, KERNEL.replace("lane * N + i", "max(lane * N, i)"))
    scope = {"N": 3, "L": layout(ROW_MAJOR)}
    source = tirx.compile(run_file(path, **scope), TARGET).source
    assert run_file(path, **scope).frontend.found
    shadowed = run_file(path, max=tirx.T.max, **scope)  # the same meaning, another object
    assert shadowed.frontend is not None and not shadowed.frontend.found
    tirx.compile(shadowed, TARGET)
    import builtins

    same = run_file(path, range=builtins.range, **scope)  # a builtin has no fingerprint
    assert same.frontend is None and tirx.compile(same, TARGET).source == source


def test_values_without_a_fingerprint_are_never_cached(cache_dir, tmp_path):
    path = write_kernel(tmp_path, KERNEL.replace("lane * N", "lane * cfg.n"))
    user_object = types.SimpleNamespace(n=3)
    kernel = run_file(path, cfg=user_object, L=layout(ROW_MAJOR))
    assert kernel.frontend is None
    tirx.compile(kernel, TARGET)
    assert entries(cache_dir) == []
    # a user function, even one the kernel only compares with None
    path = write_kernel(tmp_path, KERNEL.replace("T.cuda.cta_sync()", "if f is not None:\n"
                                                 "        T.cuda.cta_sync()"))  # fmt: skip
    kernel = run_file(path, f=lambda: 0, N=3, L=layout(ROW_MAJOR))
    assert kernel.frontend is None
    tirx.compile(kernel, TARGET)
    assert entries(cache_dir) == []


def test_identity_comparisons_are_never_cached(cache_dir, tmp_path):
    """``X is Y`` on equal tuples depends on object identity, which fingerprints leave out."""
    path = write_kernel(tmp_path, KERNEL.replace("T.cuda.cta_sync()", "if X is Y:\n"
                                                 "        T.cuda.cta_sync()"))  # fmt: skip
    shared = (1, 2)
    kernel = run_file(path, X=shared, Y=shared, N=3, L=layout(ROW_MAJOR))
    assert kernel.frontend is None
    assert "__syncthreads" in tirx.compile(kernel, TARGET).source
    assert entries(cache_dir) == []


def test_a_tirx_code_stamp_change_is_a_miss(cache_dir, tmp_path, monkeypatch):
    path = write_kernel(tmp_path, params=f"N = 3\nL = {ROW_MAJOR}\n")
    tirx.compile(run_file(path), TARGET)
    assert run_file(path).frontend.found
    monkeypatch.setattr(frontend, "code_stamp", lambda: "tirx as edited")
    assert not run_file(path).frontend.found


def test_entries_of_other_tirx_code_are_replaced_not_merged(cache_dir, tmp_path, monkeypatch):
    path = write_kernel(tmp_path)
    tirx.compile(run_file(path, N=3, L=layout(ROW_MAJOR)), TARGET)
    monkeypatch.setattr(frontend, "code_stamp", lambda: "e" * 64)  # tirx edited since
    tirx.compile(run_file(path, N=4, L=layout(ROW_MAJOR)), TARGET)
    (entry,) = entries(cache_dir)
    code, variants = frontend.decode(entry.stem, entry.read_bytes())
    assert code == "e" * 64 and len(variants) == 1  # the old code's variant is gone
    assert run_file(path, N=4, L=layout(ROW_MAJOR)).frontend.found
    assert not run_file(path, N=3, L=layout(ROW_MAJOR)).frontend.found


def test_a_miss_computes_no_code_stamp_until_the_compile(cache_dir, tmp_path, monkeypatch):
    """The stamp (a stat of every tirx file) is read only from an entry found, or written
    after NVRTC ran: a kernel no process stored costs its decoration no stamp."""
    calls = []
    real = frontend.code_stamp
    monkeypatch.setattr(frontend, "code_stamp", lambda: calls.append(1) or real())
    kernel = run_file(write_kernel(tmp_path), N=3, L=layout(ROW_MAJOR))
    assert kernel.frontend is not None and not kernel.frontend.found and calls == []
    tirx.compile(kernel, TARGET)
    assert calls and entries(cache_dir)
    calls.clear()
    assert run_file(write_kernel(tmp_path), N=3, L=layout(ROW_MAJOR)).frontend.found
    assert calls  # a found entry is checked against this code


def test_failed_kernels_are_never_stored(cache_dir, tmp_path):
    bad_contract = KERNEL.replace(
        "T.cuda.cta_sync()",
        "r = T.alloc_local((4,), 'float32', layout='default')\n"
        "    T.cuda.tile.apply(T.ptx['mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32'],"
        " r, r, r, r, scope='warp')",
    )
    kernel = run_file(write_kernel(tmp_path, bad_contract), N=3, L=layout(ROW_MAJOR))
    assert kernel.frontend is not None
    with pytest.raises(tirx.TirxError):
        tirx.compile(kernel, TARGET)
    assert entries(cache_dir) == []


def test_the_entry_encoded_during_a_failed_nvrtc_compile_is_not_stored(
    cache_dir, tmp_path, monkeypatch
):
    """The entry is encoded while NVRTC compiles (a thread) and written only after it
    succeeded; the next compile of the kernel stores the encoding it kept."""
    from tirx.backend.cuda import build
    from tirx.errors import CompileError

    kernel = run_file(write_kernel(tmp_path), N=3, L=layout(ROW_MAJOR))
    real = build.compile_cuda

    def failing(*args, meanwhile=None, **kwargs):
        if meanwhile is not None:  # as compile_cuda runs it, beside NVRTC's compile
            meanwhile()
        raise CompileError("NVRTC compile failed (as the test asks)")

    monkeypatch.setattr(build, "compile_cuda", failing)
    with pytest.raises(CompileError, match="as the test asks"):
        tirx.compile(kernel, TARGET)
    assert entries(cache_dir) == []
    assert set(kernel.frontend.prepared) == {90}  # encoded beside the compile, kept in memory
    assert list((cache_dir / "frontend").iterdir()) == []  # its file beside the entry removed
    monkeypatch.setattr(build, "compile_cuda", real)
    tirx.compile(kernel, TARGET)
    assert kernel.frontend.prepared == {}
    assert len(entries(cache_dir)) == 1
    assert run_file(write_kernel(tmp_path), N=3, L=layout(ROW_MAJOR)).frontend.found


def test_the_entry_is_written_beside_the_compile(cache_dir, tmp_path, monkeypatch):
    """The merge and the write happen in the thread beside NVRTC; after the compile the main
    thread only renames the file into place."""
    import threading

    writers = []
    real = frontend.write_temporary

    def spy(*args):
        writers.append(threading.get_ident())
        return real(*args)

    monkeypatch.setattr(frontend, "write_temporary", spy)
    tirx.compile(run_file(write_kernel(tmp_path), N=3, L=layout(ROW_MAJOR)), TARGET)
    assert len(writers) == 1 and writers[0] != threading.get_ident()
    assert len(entries(cache_dir)) == 1
    assert run_file(write_kernel(tmp_path), N=3, L=layout(ROW_MAJOR)).frontend.found


def test_the_writing_thread_starts_after_the_cache_lookup_beside_nvrtcs_compile(
    cache_dir, tmp_path, monkeypatch
):
    """The thread starts once NVRTC's program exists, just before its compile call: started
    before the CUBIN cache's lookup, it took the GIL at the lookup's file I/O and held it for up
    to the switch interval while the main thread waited to compile."""
    from tirx.backend.cuda import cache, libnvrtc, nvrtc

    events = []
    real_get, real_beside = cache.CompileCache.get, libnvrtc.beside
    monkeypatch.setattr(cache.CompileCache, "get",
                        lambda self, key: events.append("lookup") or real_get(self, key))  # fmt: skip
    monkeypatch.setattr(nvrtc, "beside",
                        lambda fn, *a: events.append("thread") or real_beside(fn, *a))  # fmt: skip
    tirx.compile(run_file(write_kernel(tmp_path), N=3, L=layout(ROW_MAJOR)), TARGET)
    assert events == ["lookup", "thread"]
    assert len(entries(cache_dir)) == 1


def test_with_a_cached_cubin_the_entry_is_still_stored(cache_dir, tmp_path):
    """No compile to run beside: the entry is encoded and written before the call returns."""
    path = write_kernel(tmp_path)
    tirx.compile(run_file(path, N=3, L=layout(ROW_MAJOR)), TARGET)
    for entry in entries(cache_dir):
        entry.unlink()  # the front-end entry gone, the CUBIN kept
    exe = tirx.compile(run_file(path, N=3, L=layout(ROW_MAJOR)), TARGET)
    assert exe.cache == "hit"
    assert len(entries(cache_dir)) == 1
    assert run_file(path, N=3, L=layout(ROW_MAJOR)).frontend.found


def test_an_entry_replaced_during_the_compile_is_merged_again(cache_dir, tmp_path, monkeypatch):
    """Another process stores a variant between the write beside NVRTC and the rename: the
    store merges with it, and both variants are kept."""
    import time

    from tirx.backend.cuda import build

    path = write_kernel(tmp_path)
    tirx.compile(run_file(path, N=4, L=layout(ROW_MAJOR)), TARGET)
    (entry,) = entries(cache_dir)
    theirs = entry.read_bytes()
    entry.unlink()
    kernel = run_file(path, N=3, L=layout(ROW_MAJOR))
    real = build.compile_cuda

    def compile_while_another_process_stores(*args, **kwargs):
        out = real(*args, **kwargs)
        deadline = time.monotonic() + 10
        while 90 not in kernel.frontend.staged and time.monotonic() < deadline:
            time.sleep(0.001)  # the staging thread's merge, with no entry on disk yet
        assert 90 in kernel.frontend.staged
        entry.write_bytes(theirs)
        return out

    monkeypatch.setattr(build, "compile_cuda", compile_while_another_process_stores)
    tirx.compile(kernel, TARGET)
    assert len(frontend._read(entry.stem)) == 2
    assert [p.name for p in (cache_dir / "frontend").iterdir()] == [entry.name]  # no stray file
    assert run_file(path, N=3, L=layout(ROW_MAJOR)).frontend.found
    assert run_file(path, N=4, L=layout(ROW_MAJOR)).frontend.found


def test_a_replaced_contract_table_neither_reads_nor_writes(cache_dir, tmp_path, monkeypatch):
    """Tests redefine instruction contracts; IR lowered with those must not reach the disk."""
    from tirx.isa import registry

    path = write_kernel(tmp_path, params=f"N = 3\nL = {ROW_MAJOR}\n")
    tirx.compile(run_file(path), TARGET)
    found = run_file(path)
    monkeypatch.setattr(registry, "CONTRACTS", {})
    assert tirx.compile(found, TARGET).timings["lower"] > 0
    tirx.clear_cache()
    tirx.compile(run_file(path), TARGET)
    assert entries(cache_dir) == []


def test_clear_cache_removes_the_entries(cache_dir, tmp_path):
    path = write_kernel(tmp_path, params=f"N = 3\nL = {ROW_MAJOR}\n")
    tirx.compile(run_file(path), TARGET)
    found = run_file(path)
    assert found.frontend.found and len(entries(cache_dir)) == 1
    tirx.clear_cache()
    assert entries(cache_dir) == []
    assert not run_file(path).frontend.found
    # a kernel found before does not use what it read either
    assert tirx.compile(found, TARGET).timings["lower"] > 0


def test_the_switch_turns_it_off(cache_dir, tmp_path, monkeypatch):
    path = write_kernel(tmp_path, params=f"N = 3\nL = {ROW_MAJOR}\n")
    tirx.compile(run_file(path), TARGET)
    monkeypatch.setenv("TIRX_CACHE", "0")
    kernel = run_file(path)
    assert kernel.frontend is None and kernel._ir is not None
    monkeypatch.delenv("TIRX_CACHE")
    assert run_file(path).frontend.found


def test_notebook_cells(cache_dir):
    """A cell's text lives in linecache under a name of its own; the same name with other text
    is another key."""
    name = "<ipython-input-7-0123456789ab>"

    def run_cell(n: int):
        text = PRELUDE + f"N = {n}\nL = {ROW_MAJOR}\n" + KERNEL
        linecache.cache[name] = (len(text), None, text.splitlines(keepends=True), name)
        namespace = {"__name__": "__main__"}
        exec(compile(text, name, "exec"), namespace)  # noqa: S102
        return namespace["k"]

    try:
        three = tirx.compile(run_cell(3), TARGET).source
        again = run_cell(3)
        assert again.frontend.found and tirx.compile(again, TARGET).source == three
        assert "lane * 3" in again.script()
        other = run_cell(4)  # a new cell text under the same name
        assert not other.frontend.found and "(lane * 4)" in tirx.compile(other, TARGET).source
    finally:
        linecache.cache.pop(name, None)


# --- the pieces -----------------------------------------------------------------------------


def test_fingerprints_tell_values_apart():
    fp = frontend.fingerprint
    values = [0, False, 0.0, -0.0, "0", None, (0,), [0], {0: 0}, 1, True, 1.0]
    assert len({repr(fp(v)) for v in values}) == len(values)
    assert fp(layout(ROW_MAJOR)) == fp(layout(ROW_MAJOR))
    assert fp(layout(ROW_MAJOR)) != fp(layout(COLUMN_MAJOR))
    assert fp(tirx.T) != fp(tirx.T.cuda) != fp(tirx.T.cuda.lane_id)
    assert fp(tirx.T.Tensor((16, 8), "float16")) != fp(tirx.T.Tensor((16, 8), "float32"))
    assert fp(tirx.laneid) == fp(tirx.Axis.get("laneid")) != fp(tirx.warpid)
    assert fp(tirx.TileLayout) is not None and fp(tirx.layout) is not None
    kinds = [lambda: 0, print, np.int32(3), {1}, types.SimpleNamespace(), sys, object()]
    assert [fp(v) for v in kinds] == [None] * len(kinds)
    assert fp([1, [2, {"a": (object(),)}]]) is None
    cycle: list = []
    cycle.append(cycle)
    assert fp(cycle) is None


def test_ir_round_trips_without_pickle():
    from tirx.backend.cuda.codegen import generate
    from tirx.transform.lower import lower_function

    kernel = make_gemm(64, 64, 16)
    lowered = lower_function(kernel.ir, arch=90)
    back, source = serial.loads(serial.dumps((lowered, "text")))
    assert source == "text" and back is not lowered
    assert generate(back) == generate(lowered)
    assert print_function(back) == print_function(lowered)
    atoms = (-0.0, 0.0, float("inf"), 1, True, 1.0, "1", None)
    assert repr(serial.loads(serial.dumps(atoms))) == repr(atoms)
    with pytest.raises(TypeError):
        serial.dumps((lowered, types.SimpleNamespace()))
    foreign = serial.dumps(tirx.laneid).replace(b"tirx.layout.axes", b"os.path.........")
    with pytest.raises(ValueError, match="not a tirx class"):
        serial.loads(foreign)


READ_NAMING = r"""
import sys
from tirx.families.thread_ops.nodes import NanoSleep
from tirx.ir import nodes as ir, serial
data = serial.dumps(NanoSleep(ir.const(1, ir.U32)))
assert b"tirx.families.thread_ops.nodes" in data
for module in ("tirx.families.thread_ops.cuda.", "tirx.families.no_familyx.nodes"):
    name = "tirx.families.thread_ops.nodes"
    assert len(module) == len(name)
    try:
        serial.loads(data.replace(name.encode(), module.encode()))
    except ValueError as e:
        assert "not a tirx class" in str(e), e
    else:
        raise AssertionError(module)
    assert module.rstrip(".") not in sys.modules, module
print("refused")
"""


def test_reading_imports_only_the_families_node_modules():
    """A stored entry names the module of each class it holds; reading it imports a family's
    nodes.py that a catalog row has, and refuses (importing nothing) any other module path,
    another stage module of a family or a family that does not exist."""
    proc = subprocess.run(
        [sys.executable, "-c", READ_NAMING], env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "refused"
