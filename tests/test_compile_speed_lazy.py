"""What a cold compile does not make until it needs it: NVRTC's diagnostic type (only a failed
compile reads diagnostics) and a kernel's single-assignment definitions (only a row check with
a run-time start reads them). Each is made at first use, once, and is the same thing later."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from tirx.ir import nodes as ir
from tirx.isa import shared_rows

from .helpers import fresh_process_json

ROOT = Path(__file__).resolve().parents[1]


def test_a_compile_that_succeeds_makes_no_diagnostic_type():
    got = fresh_process_json(
        """
        import json
        import tirx
        from tirx.backend.cuda import nvrtc
        from tirx.examples.warp_matmul import warp_matmul
        from tirx.transform.lower import lower_function
        from tirx.backend.cuda.codegen import generate

        generate(lower_function(warp_matmul.ir, arch=90))
        before = nvrtc._diagnostic_class.cache_info().currsize
        from tirx.backend.cuda.nvrtc import Diagnostic
        d = nvrtc.parse_diagnostics('k.cu(3): error: identifier "y" is undefined')[0]
        print(json.dumps({"before": before, "same": type(d) is Diagnostic is nvrtc.Diagnostic,
                          "repr": repr(d), "fields": list(Diagnostic._fields)}))
        """
    )
    assert got["before"] == 0
    assert got["same"]
    assert got["repr"] == (
        "Diagnostic(file='k.cu', line=3, severity='error', message='identifier \"y\" is undefined')"
    )
    assert got["fields"] == ["file", "line", "severity", "message"]


def test_unknown_attribute_of_nvrtc_module_is_an_attribute_error():
    from tirx.backend.cuda import nvrtc

    try:
        nvrtc.Diagnostics  # noqa: B018 - the lookup is the test
    except AttributeError as e:
        assert "Diagnostics" in str(e)
    else:
        raise AssertionError("no AttributeError")


def _function(body):
    """A stand-in for a kernel: known_definitions reads its body only."""
    return types.SimpleNamespace(body=body)


def test_definitions_are_found_at_first_use_and_per_lowering():
    i, col = ir.Var("i"), ir.Var("col")
    body = ir.Seq((ir.Assign(col, (i % 8) * 8),))
    with shared_rows.known_definitions(_function(body)):
        known = shared_rows._DEFINITIONS.get()
        assert known.found is None  # nothing asked yet
        assert shared_rows.residue(col + 16, 8) == 0  # col is a multiple of 8
        assert known.found == {col: body.stmts[0].value}
        assert shared_rows.residue(col + 3, 8) == 3
    assert shared_rows._DEFINITIONS.get() is None
    other = ir.Seq((ir.Assign(col, (i % 8) * 4),))  # another kernel: its own definitions
    with shared_rows.known_definitions(_function(other)):
        assert shared_rows.residue(col + 16, 8) is None


_LOADED_NVRTC = """
    import json, os, sys
    {before}
    import tirx
    from tirx.backend.cuda import libnvrtc
    from tirx.examples.warp_matmul import warp_matmul

    before = set(sys.modules)  # a site's .pth file may import threading at startup
    exe = tirx.compile(warp_matmul, target="cuda -arch=sm_90")
    imported = [m for m in ("cuda.pathfinder", "cuda.bindings.nvrtc", "threading")
                if m in sys.modules and m not in before]
    from cuda.pathfinder import load_nvidia_dynamic_lib

    maps = {{line.split()[-1] for line in open("/proc/self/maps") if "libnvrtc" in line}}
    print(json.dumps({{"preloaded": libnvrtc.preloaded, "cubin": len(exe.cubin),
                      "pathfinder": load_nvidia_dynamic_lib("nvrtc").abs_path,
                      "imported": imported, "maps": sorted(maps)}}))
"""


def _cold(tmp_path, before: str = "") -> dict:
    import os

    env = dict(os.environ, TIRX_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_LOADED_NVRTC.format(before=before))],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_cold_compile_loads_nvrtc_while_the_kernel_lowers(tmp_path):
    """The background load maps the very file cuda.pathfinder would choose (cuda-bindings'
    search), with the builtins beside it, and the process holds no second copy; the compile
    imports neither cuda.pathfinder nor cuda-bindings' nvrtc module (tens of milliseconds)
    nor threading."""
    import os

    got = _cold(tmp_path)
    assert got["cubin"] > 0
    assert got["imported"] == []
    library = os.path.realpath(got["pathfinder"])
    assert [os.path.realpath(f) for f in got["preloaded"]][:1] == [library]
    assert len(got["preloaded"]) == 2
    assert all(os.path.dirname(os.path.realpath(f)) == os.path.dirname(library)
               for f in got["preloaded"])  # fmt: skip
    assert {os.path.realpath(f) for f in got["maps"]} == {
        os.path.realpath(f) for f in got["preloaded"]
    }


def test_without_a_wheel_nvrtc_comes_from_pathfinders_search(tmp_path):
    """No NVRTC wheel on sys.path (a conda or system CUDA): nothing is loaded ahead, and the
    library is the one cuda.pathfinder finds."""
    hide = "import tirx.backend.cuda.libnvrtc as n\n    n._WHEEL_FILES = ('no/such/libnvrtc.so',)"
    got = _cold(tmp_path, before=hide)
    assert got["preloaded"] == []
    assert got["cubin"] > 0
    assert "cuda.pathfinder" in got["imported"]
    assert "cuda.bindings.nvrtc" not in got["imported"]
    assert any("libnvrtc.so" in f for f in got["maps"])


def test_no_nvrtc_anywhere_is_a_compile_error_with_the_fix(monkeypatch):
    import cuda.pathfinder

    from tirx.backend.cuda import libnvrtc as nvrtc
    from tirx.errors import CompileError

    def not_found(name):
        raise RuntimeError(f"no {name} library found")

    monkeypatch.setattr(nvrtc, "_WHEEL_FILES", ("no/such/libnvrtc.so",))
    monkeypatch.setattr(cuda.pathfinder, "load_nvidia_dynamic_lib", not_found)
    nvrtc.library_file.cache_clear()
    try:
        with pytest.raises(CompileError, match="NVRTC library could not be loaded") as e:
            nvrtc.library_file()
        assert "no nvrtc library found" in str(e.value)
        assert "pip install nvidia-cuda-nvrtc" in e.value.hint
    finally:
        nvrtc.library_file.cache_clear()


def test_no_thread_for_the_load_leaves_it_to_the_compile(monkeypatch):
    """A process that cannot start a thread (its limit reached) loads NVRTC when the compile
    needs it, instead of waiting for a load that never began."""
    import _thread

    from tirx.backend.cuda import libnvrtc

    def no_thread(*args):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(libnvrtc, "_loader", None)
    monkeypatch.setattr(libnvrtc, "_api_loaded", None)
    monkeypatch.setattr(_thread, "start_new_thread", no_thread)
    libnvrtc.start_loading()
    assert libnvrtc._loader is None
    assert libnvrtc.api().get_version() >= (12, 0)  # loaded here, nothing waited for


def test_work_beside_the_compile_runs_in_place_without_a_thread(monkeypatch):
    import _thread

    from tirx.backend.cuda import libnvrtc

    def no_thread(*args):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_thread, "start_new_thread", no_thread)
    ran = []
    done = libnvrtc.beside(ran.append, 7)
    assert ran == [7]
    assert done.acquire(blocking=False)  # already released: nothing to wait for
