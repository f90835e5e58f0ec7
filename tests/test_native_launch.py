"""The compiled memo-hit launch (``tirx/backend/cuda/_launch.c``), on the CPU.

The extension's stand-in for ``cuLaunchKernel`` (``_launch.record_entry()``) records what a
launch would be given, and launches nothing, so the C path runs here as it does on the GPU:
the executable's first good call goes through the Python runner (which checks and remembers),
the next ones with the same unchanged tensors are launched from C. ``ordinal=-1`` makes the
fast path accept CPU tensors.
"""

from __future__ import annotations

import os
import shutil
import sysconfig

import pytest

import tirx
from tests.helpers import IN_PLACE_CHANGES, LaunchRecorder, run_in_threads, seed_cpu_args
from tirx.backend.cuda import driver
from tirx.examples.warp_matmul import warp_matmul

torch = pytest.importorskip("torch")

TARGET = "cuda -arch=sm_90"
HANDLE = 0x1234  # the kernel handle the stand-in should be given


def _have_compiler() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    return shutil.which(cc) is not None and os.path.exists(headers)


def test_the_extension_is_built_where_a_compiler_is():
    if not _have_compiler():
        pytest.skip("no C compiler or Python headers here: tirx launches through Python")
    from tirx.backend.cuda import _launch  # noqa: F401  (pip install builds it)


_launch = pytest.importorskip("tirx.backend.cuda._launch", reason="extension not built")


seed_args = seed_cpu_args


class Stub:
    """The executable's launches: ``python`` (a recorder, the Python runner's), and the C
    stand-in's count, last arguments and values."""

    def __init__(self, exe):
        class FakeKernel:
            name, handle, max_dynamic_smem = exe.lowered.name, HANDLE, 48 * 1024

        self.python = LaunchRecorder(exe._kinds)
        launcher = driver.Launcher(
            FakeKernel(), exe._kinds, entry=self.python, entry_address=_launch.record_entry()
        )
        exe._attach(launcher, -1)
        _launch.set_record(len(exe._kinds), 0)
        self.start = _launch.last_launch()["calls"]

    @property
    def c_calls(self) -> int:
        return _launch.last_launch()["calls"] - self.start

    @property
    def last(self) -> dict:
        return _launch.last_launch()


@pytest.fixture
def exe():
    return tirx.compile(warp_matmul, target=TARGET)


@pytest.fixture
def stub(exe):
    s = Stub(exe)
    exe._build_runner()
    yield s
    _launch.set_record(0, 0)


def test_repeated_tensors_are_launched_from_c(exe, stub):
    a, b, out = seed_args()
    assert exe.fast_path == "c" and type(exe.__call__).__name__ == "Runner"
    for _ in range(5):
        exe(a, b, out)
    assert len(stub.python.calls) == 1  # the miss: checked and remembered in Python
    assert stub.c_calls == 4
    last = stub.last
    assert last["function"] == HANDLE
    assert last["grid"] == exe._grid == (1, 1, 1) and last["block"] == exe._block == (32, 1, 1)
    assert last["smem"] == 0 and last["stream"] == 0
    assert last["values"] == (a.data_ptr(), b.data_ptr(), out.data_ptr())
    memo = exe.__call__.miss.__globals__["memo"][0]
    assert last["params"] == memo[-1]  # the block the Python runner packed


def test_python_and_c_launch_the_same_arguments(exe, stub):
    a, b, out = seed_args()
    exe(a, b, out)
    exe(a, b, out)
    grid, block, smem, stream, *values = stub.python.calls[0]
    last = stub.last
    assert (grid, block, smem, stream) == (last["grid"], last["block"], last["smem"], 0)
    assert tuple(values) == last["values"]


@pytest.mark.parametrize("change", IN_PLACE_CHANGES.values(), ids=list(IN_PLACE_CHANGES))
def test_a_tensor_changed_in_place_is_checked_again(exe, stub, change):
    a, b, out = seed_args()
    exe(a, b, out)
    exe(a, b, out)
    change(out)
    with pytest.raises((TypeError, ValueError), match="parameter 'Out'"):
        exe(a, b, out)
    assert len(stub.python.calls) == 1 and stub.c_calls == 1


def test_new_tensors_and_new_memory_go_through_python_once(exe, stub):
    a, b, out = seed_args()
    exe(a, b, out)
    exe(a, b, out)
    other = torch.zeros((16, 8))
    exe(a, b, other)  # another tensor object: the Python runner checks and remembers it
    exe(a, b, other)
    assert stub.last["values"][2] == other.data_ptr()
    other.data = torch.ones((16, 8))  # same object, version kept, new memory
    exe(a, b, other)
    exe(a, b, other)
    assert stub.last["values"][2] == other.data_ptr()
    assert len(stub.python.calls) == 3 and stub.c_calls == 3


def test_inference_tensors_never_reach_c(exe, stub):
    with torch.inference_mode():
        a, b, out = seed_args()
    for _ in range(3):
        exe(a, b, out)
    assert len(stub.python.calls) == 3 and stub.c_calls == 0


def test_what_c_declines_gets_the_python_messages(exe, stub):
    a, b, out = seed_args()
    exe(a, b, out)
    exe(a, b, out)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(A, B, Out\), got 2"):
        exe(a, b)
    with pytest.raises(TypeError, match="'A' expects a tensor, got NoneType"):
        exe(None, b, out)
    with pytest.raises(TypeError, match="'B' expects dtype float16"):
        exe(a, b.float(), out)
    with pytest.raises(TypeError, match=r"by position \(A, B, Out\), got keyword argument 'Out'"):
        exe(a, b, Out=out)
    assert len(stub.python.calls) == 1 and stub.c_calls == 1


def test_a_failed_launch_raises_the_drivers_error(exe, stub):
    a, b, out = seed_args()
    exe(a, b, out)
    _launch.set_record(3, 700)  # CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(tirx.LaunchError, match=r"cuLaunchKernel\('warp_matmul'.*ILLEGAL_ADDRESS"):
        exe(a, b, out)
    _launch.set_record(3, 9999)  # a code cuda-bindings does not name
    with pytest.raises(tirx.LaunchError, match="CUresult 9999"):
        exe(a, b, out)
    _launch.set_record(3, 0)
    exe(a, b, out)
    assert stub.c_calls == 3


def test_the_runner_keeps_nothing_alive():
    import gc
    import weakref

    exe = tirx.compile(warp_matmul, target=TARGET)
    Stub(exe)
    exe._build_runner()
    a, b, out = seed_args()
    exe(a, b, out)
    exe(a, b, out)
    gone_out, gone_exe = weakref.ref(out), weakref.ref(exe)
    del out
    assert gone_out() is None
    del exe
    gc.collect()
    assert gone_exe() is None


def test_threads_launch_from_c_without_errors(exe, stub):

    sets = [seed_args() for _ in range(4)]

    def work(i):
        for k in range(2000):
            exe(*sets[(i + k // 500) % 4])

    assert run_in_threads(work) == []
    assert len(stub.python.calls) + stub.c_calls == 8000
    assert stub.c_calls > 4000  # most calls hit a memo


def test_python_runner_on_request(exe, monkeypatch):
    Stub(exe)
    exe._build_runner(native=False)
    assert exe.fast_path == "python"
    monkeypatch.setenv("TIRX_NATIVE_LAUNCH", "0")
    exe._build_runner()
    assert exe.fast_path == "python"
    monkeypatch.setenv("TIRX_NATIVE_LAUNCH", "1")
    exe._build_runner()
    assert exe.fast_path == "c"


def test_runner_arguments_are_checked():
    memo = [(None, 0)]
    good = dict(entry=_launch.record_entry(), function=0, grid=(1, 1, 1), block=(32, 1, 1),
                smem=0, n=1, memo=memo, stream=int, ordinal=0, miss=print, fail=print)  # fmt: skip
    _launch.Runner(**good)
    for bad, match in [
        ({"entry": 0}, "entry must be a function address"),
        ({"grid": (1, 1)}, "grid and block must be 3-tuples"),
        ({"block": (2**32, 1, 1)}, "block must be a 32-bit"),
        ({"n": 0}, "n must be at least 1"),
    ]:
        with pytest.raises(ValueError, match=match):
            _launch.Runner(**{**good, **bad})


# --- on the GPU: the real cuLaunchKernel from C ---------------------------------------------


def _cuda_seed_args():
    gen = torch.Generator(device="cuda").manual_seed(2)
    a = torch.randn((16, 16), device="cuda", generator=gen).half()
    b = torch.randn((8, 16), device="cuda", generator=gen).half()
    return a, b, torch.zeros((16, 8), device="cuda")


@pytest.mark.gpu
def test_gpu_memo_hits_launch_from_c_with_the_right_result():
    exe = tirx.compile(warp_matmul, target="cuda")
    a, b, out = _cuda_seed_args()
    for _ in range(1000):
        exe(a, b, out)
    assert exe.fast_path == "c"
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a.float() @ b.float().T, rtol=2e-4, atol=2e-4)


@pytest.mark.gpu
def test_gpu_a_memo_hit_launches_on_the_current_stream():
    """Launched on the current stream, the kernel runs after the zeroing queued before it on
    that stream behind a long sleep; on any other stream it would run first and be zeroed."""
    exe = tirx.compile(warp_matmul, target="cuda")
    a, b, out = _cuda_seed_args()
    exe(a, b, out)
    exe(a, b, out)  # remembered: the calls below are memo hits
    zeros = out.data  # same memory, its own version counter: zeroing it keeps out's memo
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # ~50 ms of GPU time
        zeros.zero_()
        calls = _launch_count(exe, a, b, out)
    assert calls == 1  # launched from C
    side.synchronize()
    torch.testing.assert_close(out, a.float() @ b.float().T, rtol=2e-4, atol=2e-4)


def _launch_count(exe, a, b, out) -> int:
    """Call ``exe`` once; 1 when the call was a C memo hit (the Python runner not called)."""
    miss = exe.__call__.miss
    called = []

    def spy(*args):
        called.append(args)
        return miss(*args)

    def fail(*error):
        raise AssertionError(f"launch failed: {error}")

    scope, launcher = miss.__globals__, exe._launcher
    spying = _launch.Runner(
        launcher.entry_address, int(launcher.kernel.handle), exe._grid, exe._block, exe._smem,
        3, scope["memo"], scope["stream"], 0, spy, fail,
    )  # fmt: skip
    spying(a, b, out)
    return 1 - len(called)
