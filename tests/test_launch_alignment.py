"""The CUDA launcher's check of data-pointer alignment for ``T.vectorized`` accesses
(tirx/backend/cuda/alignment.py, tirx/ir/aligned_access.py): the requirement per parameter (the
one the simulator checks), the pure check on pointer values, every launch path on the CPU (the
checked path, the Python runner, the C runner, with recorded launches), and on the GPU a
misaligned torch view refused before it can fault (marked ``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.helpers import LaunchRecorder, attach_recorder, caret_line, define
from tirx.backend.cuda import driver
from tirx.backend.cuda.alignment import Alignment, Requirements, misalignment, pointer_alignment
from tirx.backend.cuda.runner_text import runner_source
from tirx.errors import LaunchError
from tirx.ir.aligned_access import AccessKind

torch = pytest.importorskip("torch")

TARGET = "cuda -arch=sm_90"

# X (float16) is copied as vectors of 8 halves (16 bytes) into Y; W (float32) in pairs
# (8 bytes) by a loop that is no plain copy; S only ever gives one element to every lane of
# the vector (a broadcast) and n is a scalar: neither needs an aligned pointer.
KERNEL = """
@T.function
def kernel(X: T.Tensor((64,), "float16"), Y: T.Tensor((64,), "float16"),
           W: T.Tensor((64,), "float32"), S: T.Tensor((8,), "float32"), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
    t = T.cuda.thread_idx("x")
    for v in T.vectorized(8):
        Y[t * 8 + v] = X[t * 8 + v]
    for v in T.vectorized(2):
        W[t * 8 + v] = W[t * 8 + v] * S[t] + T.float32(n)
"""

# the same copy with every parameter a tensor, so that the C runner takes it
COPY = """
@T.function
def kernel(X: T.Tensor((64,), "float16"), Y: T.Tensor((64,), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
    t = T.cuda.thread_idx("x")
    for v in T.vectorized(8):
        Y[t * 8 + v] = X[t * 8 + v]
"""


def _exe(tmp_path, source=KERNEL):
    return tirx.compile(define(source, tmp_path, "kernel"), target=TARGET)


def _shifted(n: int, dtype, by_elements: int = 1):
    """A contiguous CPU tensor of ``n`` elements that starts ``by_elements`` into a fresh one."""
    return torch.zeros(n + by_elements, dtype=dtype)[by_elements:]


def _args():
    return (
        torch.arange(64, dtype=torch.float16),
        torch.zeros(64, dtype=torch.float16),
        torch.ones(64, dtype=torch.float32),
        torch.full((8,), 2.0),
    )


# --------------------------------------------------------------------- the requirement


def test_each_parameter_needs_the_alignment_of_its_widest_vector(tmp_path):
    exe = _exe(tmp_path)
    need = Requirements.of(exe.lowered).per_param
    assert [a and (a.name, a.nbytes) for a in need] == [
        ("X", 16),
        ("Y", 16),
        ("W", 8),
        None,
        None,
    ]
    assert need[0].span.line == need[1].span.line == need[2].span.line - 2
    # a kernel without vectorized loops needs nothing of any pointer
    from tirx.examples.warp_matmul import warp_matmul

    assert Requirements.of(tirx.compile(warp_matmul, target=TARGET).lowered).masks == (0,) * 3


def test_the_simulator_checks_the_same_requirement(tmp_path):
    """Each parameter the launcher requires aligned the simulator refuses misaligned by one
    element, and a parameter without a requirement it takes anywhere."""
    k = define(KERNEL, tmp_path, "kernel")
    sim = tirx.compile(k, target="sim")
    need = Requirements.of(tirx.compile(k, target=TARGET).lowered).per_param
    for i, want in enumerate(need[:4]):
        args = [a.numpy() for a in _args()]
        args[i] = _shifted(args[i].size, torch.from_numpy(args[i]).dtype).numpy()
        assert args[i].ctypes.data % 16  # one element off an allocation (torch's: 64-aligned)
        if want is None:
            sim(*args, 3)
        else:
            with pytest.raises(tirx.SimulationError, match=f"vectors of {want.nbytes} bytes"):
                sim(*args, 3)


WIDE = """
@T.function
def kernel(X: T.Tensor((64,), "float16"), Y: T.Tensor((32,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    t = T.cuda.thread_idx("x")
    words = X.view("uint32")
    Y[t] = words[t]
"""


def test_an_element_read_wider_than_the_tensors_needs_its_width(tmp_path):
    """float16 elements read in pairs as uint32 words: X's pointer must be a multiple of 4,
    which the launcher requires (its message names the access and the line) and the
    simulator checks at the read."""
    k = define(WIDE, tmp_path, "kernel")
    need = Requirements.of(tirx.compile(k, target=TARGET).lowered).per_param
    assert [a and (a.name, a.nbytes, a.kind) for a in need] == [
        ("X", 4, AccessKind.ELEMENT),
        None,
    ]
    assert need[0].what == "read or written as uint32 (4-byte elements)"
    error = misalignment(0x1002, need[0])
    assert caret_line(str(error)) == "Y[t] = words[t]"
    assert "'X' is read or written as uint32 (4-byte elements), so its data pointer must be a " \
        "multiple of 4; 0x1002 is aligned to 2 bytes only" in str(error)  # fmt: skip
    assert misalignment(0x1004, need[0]) is None
    sim = tirx.compile(k, target="sim")
    x, y = torch.arange(64, dtype=torch.float16), torch.zeros(32, dtype=torch.int32)
    sim(x.numpy(), y.numpy().view("uint32"))
    assert y.numpy().view("uint32")[0] == x[:2].numpy().view("uint32")[0]
    with pytest.raises(tirx.SimulationError, match="misaligned read of global 'X' as uint32"):
        sim(_shifted(64, torch.float16).numpy(), y.numpy().view("uint32"))


# a region of float16 read as uint32 words from a start known at run time only
REGION_WORDS = """
@T.function
def kernel(X: T.Tensor((66,), "float16"), Y: T.Tensor((32,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    t = T.cuda.thread_idx("x")
    words = X[START : START + 64].view("uint32")
    Y[t] = words[t]
"""


def test_a_region_read_in_wider_words_starts_at_a_proven_multiple(tmp_path):
    """A run-time start that may be odd would lose its half element (the words would be read
    from the start rounded down): refused at the view, with the way to write it; a start
    written as a multiple of 2 is taken, and reads the words it names."""
    with pytest.raises(tirx.LayoutError) as err:
        define(REGION_WORDS.replace("START", "T.cuda.block_idx('x') + 1"), tmp_path, "kernel")
    assert "at element offset T.cuda.block_idx(\"x\") + 1 as uint32: the offset must be a " \
        "multiple of 2, and tirx cannot prove it is" in str(err.value)  # fmt: skip
    assert caret_line(str(err.value)).startswith("words = X[")
    assert "(2 * k)" in err.value.hint
    k = define(REGION_WORDS.replace("START", "2 * T.cuda.block_idx('x')"), tmp_path, "kernel")
    x = torch.arange(66, dtype=torch.float16)
    y = torch.zeros(32, dtype=torch.int32)
    tirx.compile(k, target="sim")(x.numpy(), y.numpy().view("uint32"))
    assert (y.numpy().view("uint32") == x[:64].numpy().view("uint32")).all()


# ---------------------------------------------------------------------- the pure check


def test_the_check_of_a_pointer_value():
    need = Alignment(
        2, "H", 16, "accessed as vectors of 16 bytes (T.vectorized)", AccessKind.VECTOR
    )
    assert misalignment(0x7F00_0000_1000, need) is None
    assert misalignment(0, need) is None
    assert misalignment(0x1002, None) is None  # no requirement: any pointer
    err = misalignment(0x7F00_0000_1002, need)
    assert isinstance(err, LaunchError) and isinstance(err, tirx.TirxError)
    msg = str(err)
    assert "parameter 'H'" in msg and "multiple of 16" in msg
    assert "0x7f0000001002 is aligned to 2 bytes only" in msg
    assert "H.clone()" in err.hint and ".contiguous()" in err.hint
    assert "aligned to 8 bytes" in str(misalignment(0x1008, need))
    copied = Alignment(0, "X", 4, "the global source of a 4-byte cp.async", AccessKind.COPY)
    err = misalignment(0x1001, copied)
    assert "parameter 'X' is the global source of a 4-byte cp.async, so" in str(err)
    assert "aligned to 1 byte only" in str(err) and "T.unroll" not in err.hint
    assert [pointer_alignment(p) for p in (1, 2, 6, 0x1000, 0x1018)] == [1, 2, 2, 0x1000, 8]
    kernel = Requirements((None, need))  # what the launch paths ask, per parameter
    assert kernel.masks == (0, 15)
    kernel.check(0, 0x1001)
    kernel.check(1, 0x1010)
    with pytest.raises(LaunchError, match="parameter 'H'"):
        kernel.check(1, 0x1004)


# ------------------------------------------------------------- the launch paths (CPU)


def test_every_python_path_refuses_a_misaligned_pointer_and_launches_its_twin(tmp_path):
    exe = _exe(tmp_path)
    recorder = attach_recorder(exe, -1)
    x, y, w, s = _args()
    bad_x = _shifted(64, torch.float16)
    # the checked path (no runner yet): the error is at the loop that needs the alignment
    with pytest.raises(LaunchError) as e:
        exe(bad_x, y, w, s, 3)
    assert "parameter 'X'" in str(e.value) and "aligned to 2 bytes only" in str(e.value)
    assert caret_line(str(e.value)) == "for v in T.vectorized(8):"
    assert recorder.calls == []
    exe(x, y, w, s, 3)  # the aligned twin launches, and builds the runner
    assert len(recorder.calls) == 1 and exe.fast_path == "python"
    # the runner declines (the checked path raises); W needs 8 bytes: 4 off is refused
    for args, name in (
        ((bad_x, y, w, s, 3), "X"),
        ((x, y, _shifted(64, torch.float32), s, 3), "W"),
    ):
        assert exe._run(args) is False
        with pytest.raises(LaunchError, match=f"parameter '{name}'"):
            exe(*args)
    assert len(recorder.calls) == 1
    # a tensor without a requirement may start anywhere; 8 bytes off is enough for W
    exe(x, y, _shifted(64, torch.float32, 2), _shifted(8, torch.float32), 3)
    assert len(recorder.calls) == 2


def test_the_runner_tests_only_the_pointers_that_need_it():
    text = runner_source((("tensor", 15), ("tensor", 0), ("tensor", 7), ("int", 0, 9)), 0)
    assert "not p0 & 15" in text and "not p2 & 7" in text
    assert "p1 &" not in text
    # a kernel without requirements (the seed's three tensors): no alignment test at all
    assert "&" not in runner_source((("tensor", 0),) * 3, 0)


_launch = None
try:
    from tirx.backend.cuda import _launch
except ImportError:  # not built: no C compiler at install
    pass


def _attach_c_stand_in(exe) -> LaunchRecorder:
    """Launch ``exe`` (CPU tensors) through the extension's recording stand-in for
    cuLaunchKernel; the returned recorder sees what the Python runner launches."""

    class FakeKernel:
        name, handle, max_dynamic_smem = exe.lowered.name, 0x1234, 48 * 1024

    python = LaunchRecorder(exe._kinds)
    launcher = driver.Launcher(
        FakeKernel(), exe._kinds, entry=python, entry_address=_launch.record_entry()
    )
    exe._attach(launcher, -1)
    return python


@pytest.mark.skipif(_launch is None, reason="the C extension was not built")
def test_the_c_runner_declines_a_misaligned_pointer(tmp_path):
    exe = _exe(tmp_path, COPY)
    python = _attach_c_stand_in(exe)
    _launch.set_record(len(exe._kinds), 0)
    try:
        exe._build_runner()
        assert exe.fast_path == "c"
        start = _launch.last_launch()["calls"]
        x, y = torch.arange(64, dtype=torch.float16), torch.zeros(64, dtype=torch.float16)
        exe(x, y)  # a miss, checked in C
        assert _launch.last_launch()["calls"] == start + 1
        assert _launch.last_launch()["values"] == (x.data_ptr(), y.data_ptr())
        for bad in (_shifted(64, torch.float16), _shifted(64, torch.float16, 4)):
            with pytest.raises(LaunchError, match="parameter 'Y'.*multiple of 16"):
                exe(x, bad)
        assert _launch.last_launch()["calls"] == start + 1 and python.calls == []
        exe(x, _shifted(64, torch.float16, 8))  # 16 bytes off: aligned
        assert _launch.last_launch()["calls"] == start + 2
    finally:
        _launch.set_record(0, 0)


@pytest.mark.skipif(_launch is None, reason="the C extension was not built")
def test_the_c_runner_checks_its_alignment_argument():
    good = dict(entry=_launch.record_entry(), function=0, grid=(1, 1, 1), block=(32, 1, 1),
                smem=0, dtypes=(torch.float32,), shapes=((16, 8),), memo=[(None, 0)],
                stream=int, ordinal=0, miss=print, fail=print)  # fmt: skip
    _launch.Runner(**good, alignment=(15,))
    with pytest.raises(ValueError, match="one item per parameter"):
        _launch.Runner(**good, alignment=(15, 0))
    with pytest.raises(ValueError, match="alignment mask must be an int"):
        _launch.Runner(**good, alignment=(-1,))


def test_an_extension_built_before_the_check_is_not_used_for_aligned_kernels(tmp_path, monkeypatch):
    """A stale build of _launch (no alignment argument) would launch misaligned pointers: a
    kernel that needs aligned pointers keeps the Python runner; one that needs none still
    gets the C runner."""
    if _launch is None:
        pytest.skip("the C extension was not built")
    from tirx.examples.warp_matmul import warp_matmul

    monkeypatch.delattr(_launch, "CHECKS_ALIGNMENT")
    aligned = _exe(tmp_path, COPY)
    free = tirx.compile(warp_matmul, target=TARGET)
    for exe, fast_path in ((aligned, "python"), (free, "c")):
        _attach_c_stand_in(exe)
        exe._build_runner()
        assert exe.fast_path == fast_path


# ---------------------------------------------------------------------------- the GPU


@pytest.mark.gpu
def test_gpu_a_misaligned_view_is_refused_and_an_aligned_one_runs(tmp_path):
    exe = tirx.compile(define(COPY, tmp_path, "kernel"), target="cuda")
    x = torch.arange(64, dtype=torch.float16, device="cuda")
    y = torch.zeros(64, dtype=torch.float16, device="cuda")
    bad = torch.empty(65, dtype=torch.float16, device="cuda")[1:]
    for _ in range(2):  # the checked path, then the fast path (C or Python) after a good call
        with pytest.raises(LaunchError, match="parameter 'Y'.*aligned to 2 bytes only") as e:
            exe(x, bad)
        assert "Y.clone()" in e.value.hint
        exe(x, y)
        torch.cuda.synchronize()  # no sticky "misaligned address": the context is fine
        assert torch.equal(y, x)
        y.zero_()
    exe(x, bad.clone())  # the hint's fix
    torch.cuda.synchronize()
    # and the simulator agrees with both verdicts
    sim = tirx.compile(define(COPY, tmp_path, "kernel"), target="sim")
    with pytest.raises(tirx.SimulationError, match="not a multiple of 16"):
        sim(np.arange(64, dtype=np.float16), np.zeros(65, np.float16)[1:])


@pytest.mark.gpu
def test_gpu_a_view_read_in_wider_words_is_refused_and_a_torch_op_copies_it():
    """The softmax reads float16 rows as uint64 words: a view one element into a buffer is
    refused by the launcher (no sticky "misaligned address"), and the torch operator, which
    copies such an input, gives torch's answer."""
    from tirx.examples import ops
    from tirx.examples.softmax import make_softmax

    exe = tirx.compile(make_softmax(8, 256, "float16"), target="cuda")
    x = torch.randn(1 + 8 * 256, dtype=torch.float16, device="cuda")[1:].view(8, 256)
    y = torch.empty(8, 256, dtype=torch.float16, device="cuda")
    with pytest.raises(LaunchError, match="parameter 'X' is read or written as uint64"):
        exe(x, y)
    exe(x.clone(), y)
    torch.cuda.synchronize()
    want = torch.softmax(x.float(), -1)
    torch.testing.assert_close(y.float(), want, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(ops.softmax(x).float(), want, atol=2e-3, rtol=2e-3)
