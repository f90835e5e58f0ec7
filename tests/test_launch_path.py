"""The CUDA executable's per-call path, on the CPU: arguments are checked before anything is
launched (errors name the parameter), and the fast path hands the launcher the right values.

Without a GPU the driver cannot launch, so these tests give the executable a real
:class:`driver.Launcher` whose ``entry`` (``cuLaunchKernel``) is a recorder that decodes the
argument block it is handed (``attach_recorder``; ordinal -1 makes the fast path accept CPU
tensors where it would want tensors on device 0).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import tirx
from tests.helpers import (
    IN_PLACE_CHANGES,
    attach_recorder,
    define,
    run_in_threads,
    seed_cpu_args,
)
from tirx.backend.cuda import driver
from tirx.backend.cuda.executable import make_runner
from tirx.examples.warp_matmul import warp_matmul

torch = pytest.importorskip("torch")

TARGET = "cuda -arch=sm_90"
NO_GPU = pytest.mark.skipif(driver.gpu_count() > 0, reason="checks the no-GPU behaviour")


seed_args = seed_cpu_args


@pytest.fixture
def exe():
    return tirx.compile(warp_matmul, target=TARGET)


@pytest.fixture
def stub(exe):
    """``exe`` launching through a recorder, its fast path built and taking CPU tensors."""
    recorder = attach_recorder(exe, -1)
    exe._build_runner()
    return recorder


@pytest.fixture
def scalar_kernel(tmp_path):
    return define(
        """
@T.function
def scalars(n: T.int32, x: T.float32, k: T.uint8):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(2, 3), block=64))
    T.cuda.printf("%d %f %d\\n", n, x, k)
""",
        tmp_path,
        "scalars",
    )


# --- checks come first and name the parameter ----------------------------------------------


@NO_GPU
def test_bad_arguments_are_named_before_any_launch(exe):
    a, b, out = seed_args()
    with pytest.raises(TypeError, match=r"warp_matmul\(\) takes 3 arguments \(A, B, Out\), got 2"):
        exe(a, b)
    # parameters are checked in order; without a GPU, A fails at the device check at the latest
    with pytest.raises(TypeError, match="parameter 'A' expects dtype float16, got torch.float32"):
        exe(a.float(), b, out)
    with pytest.raises(ValueError, match=r"parameter 'A' expects shape \(16, 16\), got \(8, 16\)"):
        exe(a[:8], b, out)
    with pytest.raises(TypeError, match="parameter 'A' expects a tensor, got list"):
        exe([1, 2], b, out)
    with pytest.raises(TypeError, match="'A': the cuda target takes torch CUDA tensors"):
        exe(np.zeros((16, 16), np.float16), b, out)
    # well-formed CPU tensors: the device check, still before the (impossible) launch
    with pytest.raises(ValueError, match="parameter 'A' must be a CUDA tensor for this target"):
        exe(a, b, out)


@NO_GPU
def test_good_arguments_reach_the_launch_which_says_there_is_no_gpu(scalar_kernel):
    exe = tirx.compile(scalar_kernel, target=TARGET)
    with pytest.raises(ValueError, match="parameter 'n': 4294967296 does not fit in int32"):
        exe(2**32, 1.0, 3)
    with pytest.raises(TypeError, match="parameter 'x' expects a number"):
        exe(1, "1.0", 3)
    with pytest.raises(tirx.LaunchError, match="no CUDA GPU is visible"):
        exe(1, 1.0, 3)


def test_a_failed_check_launches_nothing(exe, stub):
    a, b, out = seed_args()
    with pytest.raises(TypeError, match="'A' expects dtype"):
        exe(a.float(), b, out)
    with pytest.raises(ValueError, match="'A' expects shape"):
        exe(a[:8], b, out)
    with pytest.raises(TypeError, match="'A' expects a tensor"):
        exe(None, b, out)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        exe(a, b, out, out)
    assert stub.calls == []


def test_a_tensor_on_another_device_is_named():
    class FakeDevice:
        type, index = "cuda", 1

        def __str__(self):
            return "cuda:1"

    class FakeCudaTensor:  # what the checker reads of a torch tensor on cuda:1
        __module__ = "torch.fake"
        dtype, shape, device = torch.float16, (16, 16), FakeDevice()

        def is_contiguous(self):
            return True

    exe = tirx.compile(warp_matmul, target=TARGET)
    with pytest.raises(ValueError, match="'A' must be on cuda:0, where the kernel is loaded, "
                                         "got device cuda:1"):  # fmt: skip
        exe.checker.tensor(0, exe.lowered.params[0], FakeCudaTensor())


# --- what the launcher receives ------------------------------------------------------------


def test_fast_path_passes_grid_block_stream_and_pointers(exe, stub):
    a, b, out = seed_args()
    for _ in range(3):
        exe(a, b, out)
    want = (exe._grid, exe._block, exe._smem, 0, a.data_ptr(), b.data_ptr(), out.data_ptr())
    assert stub.calls == [want] * 3
    assert exe._grid == (1, 1, 1) and exe._block == (32, 1, 1)


def test_fast_path_declines_what_it_does_not_know(exe):
    a, b, out = seed_args()
    stub = attach_recorder(exe, 0)  # the fast path wants tensors on cuda:0
    run = exe._build_runner()
    assert run((a, b)) is False  # count
    assert run((a, b.float(), out)) is False  # dtype
    assert run((a, b, out[:8])) is False  # shape
    assert run((a.t().contiguous().t(), b, out)) is False  # not contiguous
    assert run((a.numpy(), b, out)) is False  # not a torch tensor
    assert run(([1], b, out)) is False
    assert run((a, b, out)) is False  # CPU tensors, where the kernel wants device 0
    assert stub.calls == []


def test_first_call_checks_then_builds_the_fast_path(scalar_kernel):
    exe = tirx.compile(scalar_kernel, target=TARGET)
    stub = attach_recorder(exe, 0)
    exe(7, 2.5, 255)  # checked path: launches and builds the runner
    exe(8, 3.5, 0)  # runner
    exe(9, 2, 1)  # an int for the float parameter: the runner declines, the checked path converts
    assert [c[4:] for c in stub.calls] == [(7, 2.5, 255), (8, 3.5, 0), (9, 2.0, 1)]
    assert type(stub.calls[2][5]) is float
    assert stub.calls[0][:4] == ((2, 3, 1), (64, 1, 1), 0, 0)
    with pytest.raises(ValueError, match="'k': 256 does not fit in uint8"):
        exe(1, 1.0, 256)
    with pytest.raises(TypeError, match="'n' expects int32, got bool"):
        exe(True, 1.0, 1)
    assert len(stub.calls) == 3


def test_a_hit_shares_the_code_and_keeps_its_own_launch_state(exe, stub):
    twin = tirx.compile(warp_matmul, target=TARGET)
    assert twin.cache == "hit" and twin.cubin is exe.cubin
    a, b, out = seed_args()
    exe(a, b, out)
    assert len(stub.calls) == 1
    with pytest.raises(ValueError, match="'A' must be a CUDA tensor"):
        twin(a, b, out)  # no stub attached to the twin: the real checks apply
    assert len(stub.calls) == 1


def test_runner_without_parameters():
    from tests.helpers import LaunchRecorder

    class FakeKernel:
        name, handle, max_dynamic_smem = "none", None, 48 * 1024

    rec = LaunchRecorder(())
    launcher = driver.Launcher(FakeKernel(), (), entry=rec)
    run = make_runner((), (), launcher, (2, 1, 1), (64, 1, 1), 0, lambda ordinal: 5, 0)
    assert run(()) is True and rec.calls == [((2, 1, 1), (64, 1, 1), 0, 5)]
    assert run((1,)) is False and len(rec.calls) == 1


def test_runner_text_for_scalars():
    from tirx.backend.cuda.runner_text import runner_source

    text = runner_source((("int", -(2**31), 2**31 - 1), ("float", 2.0**128), ("bool",)), 0)
    assert "type(a0) is int and -2147483648 <= a0 <= 2147483647" in text
    # a float that would round to an infinity takes the checked path (which refuses it)
    assert "type(a1) is float and (abs(a1) < 3.402823669209385e+38 or a1 - a1 != 0)" in text
    assert "and type(a2) is bool" in text
    assert "keep, params = pack(a0, a1, a2)" in text
    assert "memo" not in text  # no tensors: nothing to remember
    text = runner_source((("float", float("inf")),), 0)  # float64: no overflow to check
    assert "type(a0) is float" in text and "abs(" not in text


def test_a_float_scalar_that_overflows_its_dtype_is_refused_on_every_call(scalar_kernel):
    exe = tirx.compile(scalar_kernel, target=TARGET)
    stub = attach_recorder(exe, 0)
    exe(7, 2.5, 255)  # checked path: builds the runner
    for x in (1e39, -3.5e38, 2.0**128 * (1 - 2.0**-25)):  # round to +-inf in float32
        with pytest.raises(ValueError, match=re.escape(f"parameter 'x': {x:g} overflows float32")):
            exe(7, x, 1)
    exe(7, 3.4028235e38, 1)  # rounds to float32's largest finite value
    exe(7, float("inf"), 1)  # an infinity asked for
    assert [c[5] for c in stub.calls] == [2.5, float(np.float32(3.4028235e38)), float("inf")]


# --- the memo: checked tensors are remembered, never trusted after a change ----------------


def test_repeated_tensors_launch_the_remembered_block(exe, stub):
    a, b, out = seed_args()
    for _ in range(3):
        exe(a, b, out)
    memo = exe._run.__globals__["memo"][0]
    assert memo[0]() is a and memo[3]() is b and memo[6]() is out
    block = memo[-2]
    exe(a, b, out)
    assert exe._run.__globals__["memo"][0][-2] is block  # nothing repacked
    assert len(stub.calls) == 4 and len(set(stub.calls)) == 1


def test_the_memo_keeps_no_tensor_alive(exe, stub):
    import gc
    import weakref

    a, b, out = seed_args()
    exe(a, b, out)
    gone = weakref.ref(out)
    del out
    gc.collect()
    assert gone() is None
    with pytest.raises(ValueError, match="'Out' expects shape"):
        exe(a, b, torch.zeros((8, 16)))  # a new tensor is checked, whatever its id


@pytest.mark.parametrize("change", IN_PLACE_CHANGES.values(), ids=list(IN_PLACE_CHANGES))
def test_a_tensor_changed_in_place_is_checked_again(exe, stub, change):
    a, b, out = seed_args()
    exe(a, b, out)
    exe(a, b, out)
    change(out)
    with pytest.raises((TypeError, ValueError), match="parameter 'Out'"):
        exe(a, b, out)
    assert len(stub.calls) == 2


def test_new_memory_is_launched_with_its_own_pointer(exe, stub):
    a, b, out = seed_args()
    exe(a, b, out)
    keep = [out.data]  # the replaced memory stays allocated: the allocator cannot reuse it
    out.set_(torch.zeros((16, 8)))  # same shape and dtype, other memory: the checks pass again
    exe(a, b, out)
    keep.append(out.data)
    out.data = torch.ones((16, 8))  # .data= keeps the version counter; the pointer tells
    exe(a, b, out)
    pointers = [c[-1] for c in stub.calls]
    assert len(set(pointers)) == 3 and pointers[-1] == out.data_ptr()


def test_inference_tensors_are_checked_every_call(exe, stub):
    with torch.inference_mode():
        a, b, out = seed_args()
    for _ in range(2):
        exe(a, b, out)
    assert exe._run.__globals__["memo"][0][0]() is None  # nothing remembered
    with pytest.raises(ValueError, match="'Out' expects shape"):
        exe(a, b, out[:8])
    assert len(stub.calls) == 2 and stub.calls[0][-1] == out.data_ptr()


def test_threads_never_mix_their_arguments(exe, stub):

    sets = [seed_args() for _ in range(4)]
    valid = {tuple(t.data_ptr() for t in s) for s in sets}

    def work(i):
        for k in range(500):
            exe(*sets[(i + k) % 2 + 2 * (i % 2)])

    assert run_in_threads(work) == []
    assert len(stub.calls) == 2000
    assert {c[4:] for c in stub.calls} <= valid


# --- on the GPU: the memo with real CUDA tensors and torch streams -------------------------


def _cuda_seed_args():
    gen = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn((16, 16), device="cuda", generator=gen).half()
    b = torch.randn((8, 16), device="cuda", generator=gen).half()
    return a, b, torch.zeros((16, 8), device="cuda")


def _want(a, b):
    return a.float() @ b.float().T


@pytest.mark.gpu
def test_gpu_repeated_and_changed_tensors_compute_the_right_result():
    exe = tirx.compile(warp_matmul, target="cuda")
    a, b, out = _cuda_seed_args()
    for _ in range(3):  # the first call builds the runner, the next ones hit the memo
        out.zero_()
        exe(a, b, out)
        torch.testing.assert_close(out, _want(a, b), rtol=2e-4, atol=2e-4)
    a.mul_(2)  # same tensor, new contents (and version): checked again, launched again
    exe(a, b, out)
    other = torch.zeros_like(out)  # a new output tensor
    exe(a, b, other)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, _want(a, b), rtol=2e-4, atol=2e-4)
    torch.testing.assert_close(other, out)
    out.t_()
    with pytest.raises(ValueError, match="'Out' expects shape"):
        exe(a, b, out)


@pytest.mark.gpu
def test_gpu_launches_on_the_current_torch_stream():
    from tirx.backend.cuda import driver

    exe = tirx.compile(warp_matmul, target="cuda")
    a, b, out = _cuda_seed_args()
    exe(a, b, out)
    exe._build_runner(native=False)  # the Python runner (the C one: test_native_launch.py)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out2 = torch.zeros_like(out)
        exe(a, b, out2)
    assert side.cuda_stream in driver.STREAMS
    side.synchronize()
    torch.testing.assert_close(out2, _want(a, b), rtol=2e-4, atol=2e-4)


@pytest.mark.gpu
def test_gpu_inference_tensors():
    exe = tirx.compile(warp_matmul, target="cuda")
    with torch.inference_mode():
        a, b, out = _cuda_seed_args()
        exe(a, b, out)
        exe(a, b, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, _want(a, b), rtol=2e-4, atol=2e-4)


def test_calls_go_to_the_runner_and_twins_build_their_own():
    import weakref

    exe = tirx.compile(warp_matmul, target=TARGET)
    stub = attach_recorder(exe, -1)
    a, b, out = seed_args()
    assert exe._run is not None and "_call" not in vars(exe)  # the checked path first
    exe(a, b, out)
    assert vars(exe)["_call"].__name__ == "call"  # then the runner, called directly
    exe(a, b, out)
    twin = exe.twin(None, "hit", {})
    assert "_call" not in vars(twin)
    assert len(stub.calls) == 2
    # the runner holds no reference to its executable: dropping it frees it at once
    gone = weakref.ref(exe)
    del exe, twin
    assert gone() is None


def test_signature_names_the_kernel_parameters(exe):
    import inspect

    assert str(inspect.signature(exe)) == "(A, B, Out, /)"


def test_keyword_arguments_are_refused_by_name_on_every_path(exe):
    a, b, out = seed_args()
    want = (
        r"warp_matmul\(\) takes its arguments by position \(A, B, Out\), "
        r"got keyword arguments 'A', 'Out'"
    )
    with pytest.raises(TypeError, match=want):
        exe(b, A=a, Out=out)  # before any runner
    stub = attach_recorder(exe, -1)
    exe(a, b, out)  # builds the runner (the Python one: the recorder has no C address)
    with pytest.raises(TypeError, match=want):
        exe(b, A=a, Out=out)
    assert len(stub.calls) == 1  # (the C runner's refusal: tests/test_native_launch.py)
    sim = tirx.compile(warp_matmul, target="sim")
    with pytest.raises(TypeError, match=want):
        sim(b, A=a, Out=out)


def test_arguments_that_are_fine_for_what_the_kernel_does_are_taken(tmp_path):
    # a read-only array the kernel only reads, a torch.Tensor subclass, numpy scalars: taken;
    # a read-only array the kernel writes: refused with the fix
    k = define(
        """
@T.function
def axpy(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32"), a: T.float32,
         n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.lane_id()
    if i < n:
        Y[i] = a * X[i] + Y[i]
""",
        tmp_path,
        "axpy",
    )
    exe = tirx.compile(k, target="sim")
    x = np.arange(32, dtype=np.float32)
    x.flags.writeable = False
    y = np.ones(32, np.float32)
    exe(x, y, np.float32(2.0), np.int64(16))
    np.testing.assert_array_equal(y, np.where(np.arange(32) < 16, 2 * np.arange(32) + 1, 1))

    class Sub(torch.Tensor):
        pass

    ys = torch.zeros(32).as_subclass(Sub)
    exe(torch.ones(32).as_subclass(Sub), ys, 1.0, 32)
    assert ys.tolist() == [1.0] * 32
    frozen = np.ones(32, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"'Y' is a read-only array, and the kernel writes it"):
        exe(x, frozen, 1.0, 32)
    with pytest.raises(TypeError, match=r"'n' expects an int \(int32\), got ndarray"):
        exe(x, y, 1.0, np.array(4))


def test_a_bool_parameter_given_a_float_is_told_it_expects_a_bool(tmp_path):
    k = define(
        """
        @T.function
        def k(Y: T.Tensor((32,), "int32"), on: T.bool):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            if on:
                Y[T.cuda.lane_id()] = 1
        """,
        tmp_path,
        "k",
    )
    exe = tirx.compile(k, target="sim")
    with pytest.raises(TypeError, match=r"'on' expects a bool, got float"):  # was "an int (bool)"
        exe(np.zeros(32, np.int32), 1.5)
    y = np.zeros(32, np.int32)
    exe(y, True)
    assert (y == 1).all()
