"""The cyclic garbage collector is off while tirx parses, lowers and generates a kernel
(tirx/collector.py) and as it was before once the call returns, whatever happens in it; and
a cold CUDA compile imports the executable's module while NVRTC compiles, not before."""

from __future__ import annotations

import gc
import sys

import pytest

import tirx
from tirx import T, collector
from tirx.errors import TirxError
from tirx.transform import lower

from .helpers import fresh_process_json

_COMPILE = sys.modules["tirx.compile"]  # the module (``tirx.compile`` is the function)


def _kernel():
    @T.function
    def doubled(X: T.Tensor((32,), "int32"), Out: T.Tensor((32,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        i = T.cuda.thread_idx("x")
        Out[i] = X[i] * 2

    return doubled


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_turns_the_collector_off_and_back_on(collector_on):
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():  # nested: the inner one leaves it to the outer
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_paused_leaves_a_collector_that_was_off_off(collector_on):
    gc.disable()
    with collector.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_paused_turns_it_back_on_when_the_block_raises(collector_on):
    with pytest.raises(ValueError), collector.paused():
        raise ValueError("inside")
    assert gc.isenabled()


def test_the_parse_and_the_lowering_run_with_the_collector_off(collector_on, monkeypatch):
    seen = []
    real = lower.lower_function

    def spying(func, **kw):
        seen.append(("lower", gc.isenabled()))
        return real(func, **kw)

    monkeypatch.setattr(_COMPILE, "lower_function", spying)
    real_parse = tirx.script.statements.Parser.parse

    def parse(self, fdef):
        seen.append(("parse", gc.isenabled()))
        return real_parse(self, fdef)

    monkeypatch.setattr(tirx.script.statements.Parser, "parse", parse)
    kernel = _kernel()
    tirx.compile(kernel, target="sim")
    assert seen == [("parse", False), ("lower", False)]
    assert gc.isenabled()


def test_a_failed_compile_turns_the_collector_back_on(collector_on, monkeypatch):
    def failing(func, **kw):
        assert not gc.isenabled()
        raise TirxError("lowering failed")

    monkeypatch.setattr(_COMPILE, "lower_function", failing)
    with pytest.raises(TirxError, match="lowering failed"):
        tirx.compile(_kernel(), target="sim")
    assert gc.isenabled()


def test_a_failed_parse_turns_the_collector_back_on(collector_on):
    with pytest.raises(TirxError):

        @T.function
        def bad(X: T.Tensor((32,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            X[0] = undefined_name  # noqa: F821

    assert gc.isenabled()


_IMPORTED_WHERE = """
import json, os, sys, tempfile, threading
os.environ["TIRX_CACHE_DIR"] = tempfile.mkdtemp()
import tirx
from tirx.backend.cuda import nvrtc

where = {}

class Spy:  # records which thread imports the executable's module, finds nothing itself
    def find_spec(self, name, path=None, target=None):
        if name == "tirx.backend.cuda.executable":
            where["thread"] = threading.get_ident()
            where["compiling"] = compiling[0]
        return None

compiling = [False]
real = nvrtc._Program.__init__
def init(self, *args):
    compiling[0] = True
    try:
        real(self, *args)
    finally:
        compiling[0] = False
nvrtc._Program.__init__ = init
sys.meta_path.insert(0, Spy())
from tirx.examples.warp_matmul import warp_matmul
exe = tirx.compile(warp_matmul, target="cuda -arch=sm_90")
print(json.dumps({"main": where.get("thread") == threading.main_thread().ident,
                  "compiling": where.get("compiling"), "cache": exe.cache,
                  "type": type(exe).__name__}))
"""


def test_a_cold_compile_imports_the_executable_while_nvrtc_compiles():
    got = fresh_process_json(_IMPORTED_WHERE)
    assert got == {"main": False, "compiling": True, "cache": "miss", "type": "CudaExecutable"}


def test_a_simulator_run_compiles_and_executes_with_the_collector_off(collector_on, monkeypatch):
    """``tirx.sim.run`` (every call of a ``target="sim"`` executable) holds the collector off
    while it builds the machine and runs it, and turns it back on after, a fault included."""
    import numpy as np

    from tirx.errors import SimulationError
    from tirx.sim import machine

    seen = []
    real_init, real_run = machine.Machine.__init__, machine.Machine.run

    def init(self, *a, **kw):
        seen.append(("compile", gc.isenabled()))
        real_init(self, *a, **kw)

    def run(self):
        seen.append(("run", gc.isenabled()))
        return real_run(self)

    monkeypatch.setattr(machine.Machine, "__init__", init)
    monkeypatch.setattr(machine.Machine, "run", run)
    exe = tirx.compile(_kernel(), target="sim")
    out = np.zeros(32, np.int32)
    exe(np.arange(32, dtype=np.int32), out)
    assert (out == 2 * np.arange(32)).all()
    assert seen == [("compile", False), ("run", False)] and gc.isenabled()

    @T.function
    def past_the_end(X: T.Tensor((32,), "int32"), Out: T.Tensor((32,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        i = T.cuda.thread_idx("x")
        Out[i] = X[i + 1]

    with pytest.raises(SimulationError, match="out-of-bounds"):
        tirx.compile(past_the_end, target="sim")(np.zeros(32, np.int32), out)
    assert gc.isenabled()
