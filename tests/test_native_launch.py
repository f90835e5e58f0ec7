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

    def __init__(self, exe, ordinal: int = -1):
        class FakeKernel:
            name, handle, max_dynamic_smem = exe.lowered.name, HANDLE, 48 * 1024

        self.python = LaunchRecorder(exe._kinds)
        launcher = driver.Launcher(
            FakeKernel(), exe._kinds, entry=self.python, entry_address=_launch.record_entry()
        )
        exe._attach(launcher, ordinal)
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


def memo_of(exe):
    return exe.__call__.miss.__globals__["memo"]


def test_good_tensors_are_checked_remembered_and_launched_from_c(exe, stub):
    a, b, out = seed_args()
    assert exe.fast_path == "c" and type(exe.__call__).__name__ == "Runner"
    for _ in range(5):
        exe(a, b, out)
    assert stub.python.calls == [] and stub.c_calls == 5
    last = stub.last
    assert last["function"] == HANDLE
    assert last["grid"] == exe._grid == (1, 1, 1) and last["block"] == exe._block == (32, 1, 1)
    assert last["smem"] == 0 and last["stream"] == 0
    assert last["values"] == (a.data_ptr(), b.data_ptr(), out.data_ptr())
    entry = memo_of(exe)[0]  # remembered in C, in the Python runner's memo
    assert entry[0]() is a and entry[3]() is b and entry[6]() is out
    assert (entry[1], entry[2]) == (a._version, a.data_ptr())
    assert last["params"] == entry[-1]  # the calls after the first launched its block
    assert exe._run((a, b, out)) is True and memo_of(exe)[0] is entry  # the Python runner hits
    assert stub.python.calls[-1][4:] == last["values"]  # ... and launches the same values


def test_python_and_c_launch_the_same_arguments(exe, stub):
    a, b, out = seed_args()
    exe(a, b, out)
    exe._build_runner(native=False)
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
    assert stub.python.calls == [] and stub.c_calls == 2


def test_new_tensors_and_new_memory_are_checked_in_c(exe, stub):
    a, b, out = seed_args()
    exe(a, b, out)
    for _ in range(3):  # a new output tensor per call, as torch code often has it
        other = torch.zeros((16, 8))
        exe(a, b, other)
        assert stub.last["values"][2] == other.data_ptr()
    keep = other.data
    other.data = torch.ones((16, 8))  # same object, version kept, new memory
    exe(a, b, other)
    assert stub.last["values"][2] == other.data_ptr() != keep.data_ptr()
    assert stub.python.calls == [] and stub.c_calls == 5


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda a, b, out: (a, b, out[:, :4]), "'Out' expects shape"),
        (lambda a, b, out: (a, b, out.t().contiguous().t()), "'Out' must be contiguous"),
        (lambda a, b, out: (a, b.float(), out), "'B' expects dtype float16"),
        (lambda a, b, out: ([1.0] * 256, b, out), "'A' expects a tensor, got list"),
        (lambda a, b, out: (a, b, out.unsqueeze(0)), "'Out' expects shape"),
    ],
    ids=["shape", "strides", "dtype", "list", "rank"],
)
def test_what_fails_a_check_in_c_gets_the_python_message(exe, stub, bad, match):
    args = seed_args()
    exe(*args)
    with pytest.raises((TypeError, ValueError), match=match):
        exe(*bad(*args))
    assert stub.python.calls == [] and stub.c_calls == 1


def test_a_tensor_on_another_device_is_not_launched(exe):
    stub = Stub(exe, ordinal=0)  # the fast path wants tensors on device 0: CPU ones fail
    exe._build_runner()
    assert exe.fast_path == "c"
    with pytest.raises(ValueError, match="'A' must be a CUDA tensor"):
        exe(*seed_args())
    assert stub.python.calls == [] and stub.c_calls == 0


def test_inference_tensors_are_checked_in_c_every_call(exe, stub):
    with torch.inference_mode():
        a, b, out = seed_args()
    before = memo_of(exe)[0]
    for _ in range(3):
        exe(a, b, out)
    assert stub.python.calls == [] and stub.c_calls == 3
    assert stub.last["values"] == (a.data_ptr(), b.data_ptr(), out.data_ptr())
    assert memo_of(exe)[0] is before  # no version counter: nothing remembered
    with pytest.raises(ValueError, match="'Out' expects shape"):
        exe(a, b, out[:8])


def test_what_c_declines_gets_the_python_messages(exe, stub):
    a, b, out = seed_args()
    exe(a, b, out)
    exe(a, b, out)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(A, B, Out\), got 2"):
        exe(a, b)
    with pytest.raises(TypeError, match="'A' expects a tensor, got NoneType"):
        exe(None, b, out)
    with pytest.raises(TypeError, match=r"by position \(A, B, Out\), got keyword argument 'Out'"):
        exe(a, b, Out=out)
    assert stub.python.calls == [] and stub.c_calls == 2


def test_a_failed_launch_raises_the_drivers_error(exe, stub):
    a, b, out = seed_args()
    exe(a, b, out)
    _launch.set_record(3, 700)  # CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(tirx.LaunchError, match=r"cuLaunchKernel\('warp_matmul'.*ILLEGAL_ADDRESS"):
        exe(a, b, out)
    _launch.set_record(3, 9999)  # a code cuda-bindings does not name
    with pytest.raises(tirx.LaunchError, match="CUresult 9999"):
        exe(a, b, torch.zeros((16, 8)))  # from the checks path too
    _launch.set_record(3, 0)
    exe(a, b, out)
    assert stub.c_calls == 4


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
    assert stub.python.calls == [] and stub.c_calls == 8000
    valid = {tuple(t.data_ptr() for t in s) for s in sets}
    assert stub.last["values"] in valid


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
                smem=0, dtypes=(torch.float32,), shapes=((16, 8),), memo=memo, stream=int,
                ordinal=0, miss=print, fail=print)  # fmt: skip
    _launch.Runner(**good)
    for bad, match in [
        ({"entry": 0}, "entry must be a function address"),
        ({"grid": (1, 1)}, "grid and block must be 3-tuples"),
        ({"block": (2**32, 1, 1)}, "block must be a 32-bit"),
        ({"dtypes": (), "shapes": ()}, "one item per parameter"),
        ({"shapes": ((16, 8), (8,))}, "one item per parameter"),
        ({"shapes": ((16, 8.0),)}, "a tuple of ints"),
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
    exe(a, b, out)  # remembered: the call below is a memo hit
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
    """Call ``exe`` once through a copy of its C runner whose Python fallback is a spy; 1 when
    the call was launched from C (the fallback not called)."""
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
        tuple(exe.checker.torch_dtypes()), tuple(p.shape for p in exe.lowered.params),
        scope["memo"], scope["stream"], 0, spy, fail,
    )  # fmt: skip
    spying(a, b, out)
    return 1 - len(called)
