"""``T.assume_aligned(tensor, alignment_bytes)`` (tirx/families/thread_ops) and the address of a
global tensor's element as a value (``T.address_of(A[i])``): the C tells the compiler, the
simulator checks the assumption against the address its tensor has (a misaligned slice stops
the run at the line, as ``T.assume`` does), misuse is refused at the line, and the GPU (marked
``gpu``) runs the same kernels."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.helpers import caret_line, define
from tirx.errors import SimulationError, TirxError

KERNEL = """
@T.function
def kernel(A: T.Tensor((64,), "float32"), U: T.Tensor((2,), "uint64")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    {line}
    A[lane] = A[lane] * 2.0
    if lane == 0:
        U[0] = T.address_of(A[0])
        U[1] = T.address_of(A[3])
"""

SHARED = """
@T.function
def kernel(A: T.Tensor((64,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    s = T.alloc_shared((64,), "float32"{align})
    T.assume_aligned({view}, {n})
    s[lane] = A[lane]
    T.cuda.cta_sync()
    A[lane] = s[31 - lane]
"""


def _kernel(tmp_path, line: str = "T.assume_aligned(A, 16)"):
    return define(KERNEL.format(line=line), tmp_path, "kernel")


def _aligned_array(n: int, offset_elements: int = 0) -> np.ndarray:
    """A float32 array of ``n`` elements whose data starts ``offset_elements`` past a 64-byte
    boundary."""
    raw = np.zeros(n + 16 + offset_elements, np.float32)
    skip = (-raw.ctypes.data % 64) // 4 + offset_elements
    return raw[skip : skip + n]


def test_the_c_tells_the_compiler_the_address_is_aligned(tmp_path):
    exe = tirx.compile(_kernel(tmp_path), target="cuda -arch=sm_90")
    assert (
        "__builtin_assume((((unsigned long long)(reinterpret_cast<const unsigned char*>(A) + "
        "(0ull)) & 15ull) == 0ull));"
    ) in exe.source
    assert "warning" not in exe.nvrtc.log.lower()
    assert "T.assume_aligned(A, 16)" in _kernel(tmp_path).script()


def test_the_simulator_gives_a_global_element_its_address(tmp_path):
    a, u = _aligned_array(64), np.zeros(2, np.uint64)
    a[:] = np.arange(64)
    tirx.compile(_kernel(tmp_path), target="sim")(a, u)
    assert list(u) == [a.ctypes.data, a.ctypes.data + 12]
    np.testing.assert_array_equal(a[:32], 2.0 * np.arange(32))  # one warp
    np.testing.assert_array_equal(a[32:], np.arange(32, 64))


def test_an_aligned_slice_holds_and_a_misaligned_one_stops_at_the_line(tmp_path):
    exe = tirx.compile(_kernel(tmp_path), target="sim")
    exe(_aligned_array(64, 4), np.zeros(2, np.uint64))  # 16 bytes past the boundary
    a = _aligned_array(64, 1)
    with pytest.raises(SimulationError) as e:
        exe(a, np.zeros(2, np.uint64))
    msg = str(e.value)
    assert f"'A' starts at {a.ctypes.data:#x}, not a multiple of 16 bytes" in msg
    assert "though the compiler was told it is" in msg
    assert caret_line(msg) == "T.assume_aligned(A, 16)"
    assert "not a slice at an odd offset" in e.value.hint
    assert not a.any()  # stopped before the store


def test_a_view_at_an_offset_assumes_about_its_own_start(tmp_path):
    exe = tirx.compile(_kernel(tmp_path, "T.assume_aligned(A[1:], 8)"), target="sim")
    exe(_aligned_array(64, 1), np.zeros(2, np.uint64))  # A[1:] starts at the boundary
    with pytest.raises(SimulationError, match="not a multiple of 8 bytes"):
        exe(_aligned_array(64), np.zeros(2, np.uint64))


@pytest.mark.parametrize(
    ("align", "view", "n", "words"),
    [
        ("", "s", 16, None),
        (", align=128", "s", 128, None),
        (", align=1024", "s", 1024, None),
        ("", "s[4:]", 16, None),
        ("", "s[2:]", 16, "'s' starts 8 bytes into the shared memory, not a multiple of 16"),
        ("", "s", 1024, "aligned to 128 bytes, so its start is not known to be a multiple of 1024"),
    ],
)
def test_a_shared_tensor_is_as_aligned_as_its_allocation(tmp_path, align, view, n, words):
    # the shared array is aligned to its largest buffer alignment, at least 128
    # (backend/cuda/codegen.py); a buffer sits at a multiple of its own alignment in it
    k = define(SHARED.format(align=align, view=view, n=n), tmp_path, "kernel")
    a = np.arange(64, dtype=np.float32)
    src = tirx.compile(k, target="cuda -arch=sm_90").source
    assert f"& {n - 1}u) == 0u));" in src
    if words is None:
        tirx.compile(k, target="sim")(a)
        np.testing.assert_array_equal(a[:32], np.arange(32)[::-1])
        return
    with pytest.raises(SimulationError) as e:
        tirx.compile(k, target="sim")(a)
    assert words in str(e.value)
    assert f"align={n}" in e.value.hint


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("T.assume_aligned(A, 12)", "the alignment must be a power of two from 1 to 2**27"),
        ("T.assume_aligned(A, 0)", "power of two"),
        ("T.assume_aligned(A, 2**28)", "T.assume_aligned(A, 268435456): the alignment must"),
        ("T.assume_aligned(A, 16.0)", "a constant number of bytes, got float 16.0"),
        ("T.assume_aligned(A, lane)", "a constant number of bytes, got"),
        ("T.assume_aligned(A[0], 16)", "T.assume_aligned takes a tensor, got"),
        ("T.assume_aligned(A)", "takes 2 arguments (tensor, alignment_bytes), got 1"),
        ("T.assume_aligned(A, 16, 2)", "takes 2 arguments (tensor, alignment_bytes), got 3"),
        ("x = T.assume_aligned(A, 16)", "T.assume_aligned(...) has no value to assign"),
        (
            'r = T.alloc_local((4,), "float32")\n    T.assume_aligned(r, 16)',
            "'r' is a local (register) array: it has no address to be aligned",
        ),
    ],
)
def test_misuse_is_refused_at_the_line(tmp_path, line, words):
    with pytest.raises(TirxError) as e:
        _kernel(tmp_path, line)
    assert words in str(e.value)
    assert caret_line(str(e.value)) == line.splitlines()[-1].strip()


def test_the_real_names_as_keywords(tmp_path):
    k = _kernel(tmp_path, "T.assume_aligned(tensor=A, alignment_bytes=8)")
    assert "& 7ull) == 0ull));" in tirx.compile(k, target="cuda -arch=sm_90").source


@pytest.mark.gpu
def test_gpu_addresses_and_an_aligned_tensor(tmp_path):
    import torch

    a = torch.arange(64, dtype=torch.float32, device="cuda")
    u = torch.zeros(2, dtype=torch.uint64, device="cuda")
    tirx.compile(_kernel(tmp_path), target="cuda")(a, u)
    torch.cuda.synchronize()
    assert [int(x) for x in u.cpu()] == [a.data_ptr(), a.data_ptr() + 12]
    assert a.cpu().tolist() == [2.0 * i for i in range(32)] + list(range(32, 64))
    for align, view, n in [("", "s[4:]", 16), (", align=1024", "s", 1024)]:
        k = define(SHARED.format(align=align, view=view, n=n), tmp_path, "kernel")
        x = torch.arange(64, dtype=torch.float32, device="cuda")
        tirx.compile(k, target="cuda")(x)
        torch.cuda.synchronize()
        assert x[:32].tolist() == list(range(32))[::-1]
