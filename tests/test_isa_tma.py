"""cp.async.bulk.tensor (the TMA tensor load) as a tirx/isa family: its forms and refusals, the
lowering's checks (each fires on a kernel built to break it and stays silent on its twin), the
CUDA text (tensor maps as hidden __grid_constant__ parameters, the coordinates innermost
first) compiled by NVRTC for sm_90 with UTMALDG in its SASS, and the launcher's tensor maps
(encoded for new tensors, not for repeated ones; a misaligned pointer refused)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tirx
from tirx import isa
from tirx.errors import ContractError, LaunchError, TirxError
from tirx.isa import Family, registry
from tirx.layout import S, TileLayout

from .helpers import LaunchRecorder
from .tma_kernels import TMA, box_kernel, pipeline_kernel

SM90 = "cuda -arch=sm_90"


def test_the_forms_and_the_refusals():
    forms = isa.supported_forms()
    for dim in "12345":
        for dst in ("shared::cta", "shared::cluster"):
            for mode in (".tile", ""):
                text = (
                    f"cp.async.bulk.tensor.{dim}d.{dst}.global{mode}.mbarrier::complete_tx::bytes"
                )
                assert text in forms
                contract = tirx.instruction_contract(text)
                assert contract.family is Family.CP_ASYNC_BULK_TENSOR and contract.min_arch == 90
    assert registry.family_of_text(TMA).family is Family.CP_ASYNC_BULK_TENSOR
    multicast = TMA.replace("shared::cta", "shared::cluster") + ".multicast::cluster"
    assert multicast in forms
    assert [op.name for op in tirx.instruction_contract(multicast).operands][-1] == "cta_mask"
    with pytest.raises(ContractError) as e:  # multicast delivers to the cluster's blocks
        tirx.instruction_contract(TMA + ".multicast::cluster")
    assert "shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster" in str(
        e.value
    )
    for bad in (
        TMA.replace("tile.", "tile::gather4."),
        TMA + ".L2::cache_hint",
        TMA.replace("shared::cta.global", "shared::cluster.shared::cta"),
    ):
        with pytest.raises(ContractError) as e:
            tirx.instruction_contract(bad)
        assert "cp.async.bulk.tensor.2d.shared::cta.global.tile" in str(e.value)


def _compile(kernel, target=SM90):
    return tirx.compile(kernel, target=target)


def test_the_cuda_declares_a_hidden_map_and_orders_coordinates_innermost_first(tmp_path):
    exe = _compile(box_kernel(tmp_path, coords=(64, 0)))
    src = exe.source
    assert "const __grid_constant__ tirx_tmap tirx_tmap0)" in src
    assert "struct __align__(64) tirx_tmap { unsigned long long v[16]; };" in src
    assert "__shared__ __align__(1024) unsigned char tirx_smem" in src
    line = next(ln for ln in src.splitlines() if "cp.async.bulk.tensor" in ln)
    assert f"{TMA} [%0], [%1, {{%2, %3}}], [%4];" in line
    assert re.search(r'"l"\(&tirx_tmap0\), "r"\(0\), "r"\(64\)', line)  # {c, r}: inner first
    if exe.sass is not None:
        assert "UTMALDG.2D" in exe.sass


def test_one_map_per_distinct_tensor_box_and_swizzle(tmp_path):
    exe = _compile(pipeline_kernel(tmp_path, 4))  # two copies of one map
    assert exe.source.count("__grid_constant__") == 1
    assert exe.launch_kinds == ["ptr", "ptr", "tmap"]


def test_kernels_without_tma_declare_no_map(tmp_path):
    from .helpers import define

    k = define(
        """
        @T.function
        def kernel(A: T.Tensor((32,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            A[T.cuda.thread_idx("x")] = T.float32(1)
        """,
        tmp_path,
        "kernel",
    )
    exe = _compile(k)
    assert "tirx_tmap" not in exe.source and exe.launch_kinds == ["ptr"]


# ------------------------------------------------------------------------------ the checks

CHECKS = {
    # name: (fields that break it, fields of its corrected twin, words of the error)
    "dst in global memory": (dict(dst="Out[:, :]"), {}, "must be a view of shared memory"),
    "src in shared memory": (dict(src="s[:, :]"), {}, "region of a global tensor parameter"),
    "src starts at run time": (
        dict(src="A[tid // 128 : tid // 128 + 64, :]", shape=(128, 128)),
        dict(src="A[64:128, :]"),
        "compile-time place",
    ),
    "box extent 257": (dict(box_text="(257, 64)"), {}, "1..256"),
    "inner box not 16 bytes": (
        dict(box=(64, 4), swizzle=0),
        dict(box=(64, 8), swizzle=0),
        "not a multiple of 16",
    ),
    "inner box past the swizzle span": (
        dict(box=(32, 128), shape=(128, 128), swizzle=3),
        dict(box=(32, 128), shape=(128, 128), swizzle=0),
        "span of swizzle=3",
    ),
    "plain layout with swizzle=3": (
        dict(layout=TileLayout(S[(64, 64)]), swizzle=3),
        dict(swizzle=3),
        "where the box image has byte",
    ),
    "swizzled destination aligned to 128 only": (
        dict(align=128, swizzle=3),
        dict(align=1024, swizzle=3),
        "align=1024",
    ),
    "destination inside a swizzle repeat": (
        dict(dst="s2[4:68, :]", swizzle=3),
        dict(dst="s2[8:72, :]", swizzle=3),
        "multiple of 1024 bytes",
    ),
    "mbar a uint32 of shared memory": (
        dict(mbar="flags[0]"),
        {},
        "mbar= the barrier must be an 8-byte",
    ),
    "mbar in global memory": (dict(mbar="Out[0, 0]"), {}, "element of a shared tensor"),
}


def _checked(tmp_path, fields):
    return box_kernel(tmp_path, **fields)


@pytest.mark.parametrize("name", list(CHECKS))
def test_each_check_fires_and_its_twin_is_silent(tmp_path, name):
    broken, twin, words = CHECKS[name]
    with pytest.raises(TirxError) as e:
        _compile(_checked(tmp_path, broken))
    assert words in str(e.value), str(e.value)
    assert "hint:" in str(e.value) or isinstance(e.value, ContractError)
    fixed = {k: v for k, v in broken.items() if k in ("shape",)}
    fixed.update(twin)
    _compile(_checked(tmp_path, fixed))  # no error


def test_mbar_may_be_named_by_its_address(tmp_path):
    def copy_line(kernel):
        return next(ln for ln in _compile(kernel).source.splitlines() if "bulk.tensor" in ln)

    a = copy_line(box_kernel(tmp_path, mbar="bars.ptr_to([0])"))
    assert a == copy_line(box_kernel(tmp_path))


def test_the_error_points_at_the_operand(tmp_path):
    with pytest.raises(ContractError) as e:
        _compile(box_kernel(tmp_path, dst="Out[:, :]"))
    assert "Out[:, :]" in str(e.value) and "^" in str(e.value)


def test_older_targets_are_refused(tmp_path):
    with pytest.raises(ContractError, match="sm_90"):
        _compile(box_kernel(tmp_path), target="cuda -arch=sm_80")


def test_the_raw_call_is_refused(tmp_path):
    from .helpers import define

    k = define(
        """
        @T.function
        def kernel(A: T.Tensor((64, 64), "float16")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            s = T.alloc_shared((64, 64), "float16", align=1024)
            bars = T.alloc_shared((1,), "uint64")
            T.ptx[TEXT](s[0, 0], A[0, 0], bars[0])
        """,
        tmp_path,
        "kernel",
        TEXT=TMA,
    )
    with pytest.raises(ContractError, match="tile form"):
        _compile(k)


# ----------------------------------------------------------------------------- the launcher


def _attach(exe, encodes):
    from tirx.backend.cuda import driver

    def encode(fields, address):
        encodes.append((fields, address))
        return bytes([len(encodes) % 256]) * 128

    exe.encode_map = encode

    class FakeKernel:
        name, handle, max_dynamic_smem = exe.lowered.name, None, 48 * 1024

    recorder = LaunchRecorder(exe.launch_kinds)
    exe._attach(driver.Launcher(FakeKernel(), exe.launch_kinds, entry=recorder), -1)
    return recorder


def test_maps_are_encoded_for_new_tensors_and_not_for_repeated_ones(tmp_path):
    import torch

    exe = _compile(box_kernel(tmp_path))
    encodes = []
    rec = _attach(exe, encodes)
    a = torch.zeros((128, 128), dtype=torch.float16)
    out = torch.zeros((64, 64), dtype=torch.float16)
    for _ in range(5):
        exe(a, out)
    assert len(encodes) == 1 and len(rec.calls) == 5
    fields, address = encodes[0]
    assert address == a.data_ptr()
    assert (fields.dims, fields.strides, fields.box, fields.swizzle) == (
        (128, 128), (256,), (64, 64), 3,
    )  # fmt: skip
    assert rec.calls[-1][-1] == bytes([1]) * 128  # the map's 128 bytes reach the kernel
    b = torch.ones((128, 128), dtype=torch.float16)
    exe(b, out)
    exe(b, out)
    assert len(encodes) == 2 and encodes[1][1] == b.data_ptr()
    assert rec.calls[-1][-1] == bytes([2]) * 128


def test_a_region_origin_moves_the_maps_address(tmp_path):
    import torch

    exe = _compile(box_kernel(tmp_path, src="A[64:128, :]", coords=(0, 0)))
    encodes = []
    _attach(exe, encodes)
    a = torch.zeros((128, 128), dtype=torch.float16)
    exe(a, torch.zeros((64, 64), dtype=torch.float16))
    assert encodes[0][1] == a.data_ptr() + 64 * 128 * 2
    assert encodes[0][0].dims == (128, 64)


def test_a_misaligned_pointer_is_refused_before_encoding(tmp_path):
    import torch

    exe = _compile(box_kernel(tmp_path))
    encodes = []
    _attach(exe, encodes)
    base = torch.zeros(128 * 128 + 8, dtype=torch.float16)
    with pytest.raises(LaunchError) as e:
        exe(base[1 : 1 + 128 * 128].view(128, 128), torch.zeros((64, 64), dtype=torch.float16))
    assert "'A'" in str(e.value) and "multiple of 16" in str(e.value) and not encodes


def test_a_kernel_with_scalars_keeps_its_maps_in_the_memo(tmp_path):
    import torch

    from .helpers import define

    k = define(
        """
        @T.function
        def kernel(A: T.Tensor((64, 64), "float16"), n: T.int32):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            s = T.alloc_shared((64, 64), "float16", align=128)
            bars = T.alloc_shared((1,), "uint64")
            if T.cuda.thread_idx("x") == 0:
                T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
                T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 8192)
                T.cuda.tile.apply(T.ptx[TEXT], s[:, :], A[:, :], box=(64, 64), coords=(0, n), mbar=bars[0], scope="thread")
                T.cuda.mbarrier_wait(bars[0], 0)
        """,
        tmp_path,
        "kernel",
        TEXT=TMA,
    )
    exe = _compile(k)
    encodes = []
    rec = _attach(exe, encodes)
    a = torch.zeros((64, 64), dtype=torch.float16)
    for n in range(4):
        exe(a, n)
    assert len(encodes) == 1 and [c[-2] for c in rec.calls] == [0, 1, 2, 3]
    assert all(c[-1] == bytes([1]) * 128 for c in rec.calls)


def test_the_argument_block_lays_out_a_128_byte_map():
    from tirx.backend.cuda.driver import ArgPacker

    block, params = ArgPacker(("ptr", "i32", "tmap"))(0x1000, 7, bytes(range(128)))
    import ctypes

    pointers = (ctypes.c_uint64 * 3).from_address(params)
    assert ctypes.string_at(pointers[2], 128) == bytes(range(128))
    assert ctypes.c_int32.from_address(pointers[1]).value == 7
    assert np.frombuffer(ctypes.string_at(pointers[0], 8), dtype=np.uint64)[0] == 0x1000


def _native():
    try:
        from tirx.backend.cuda import _launch
    except ImportError:
        return None
    return _launch if getattr(_launch, "MISSES_TO_PYTHON", False) else None


@pytest.mark.skipif(_native() is None, reason="the C extension was not built")
def test_the_c_runner_launches_memo_hits_and_hands_misses_to_python(tmp_path):
    import torch

    from tirx.backend.cuda import driver

    _launch = _native()
    exe = _compile(box_kernel(tmp_path))
    encodes = []

    def encode(fields, address):
        encodes.append(address)
        return bytes([len(encodes)]) * 128

    exe.encode_map = encode

    class FakeKernel:
        name, handle, max_dynamic_smem = exe.lowered.name, 0x1234, 48 * 1024

    python = LaunchRecorder(exe.launch_kinds)
    launcher = driver.Launcher(
        FakeKernel(), exe.launch_kinds, entry=python, entry_address=_launch.record_entry()
    )
    exe._attach(launcher, -1)
    _launch.set_record(3, 0)
    try:
        exe._build_runner()
        assert exe.fast_path == "c"
        start = _launch.last_launch()["calls"]
        a = torch.zeros((128, 128), dtype=torch.float16)
        out = torch.zeros((64, 64), dtype=torch.float16)
        exe(a, out)  # a miss: the Python runner checks, encodes and remembers
        assert len(python.calls) == 1 and len(encodes) == 1
        exe(a, out)
        exe(a, out)  # memo hits, launched in C with the remembered map
        last = _launch.last_launch()
        assert last["calls"] == start + 2 and len(python.calls) == 1 and len(encodes) == 1
        assert last["values"] == (a.data_ptr(), out.data_ptr(), 0x0101010101010101)
        b = torch.zeros((128, 128), dtype=torch.float16)
        exe(b, out)  # new tensor: a miss again, a new map
        assert len(python.calls) == 2 and encodes[-1] == b.data_ptr()
    finally:
        _launch.set_record(0, 0)


def test_a_box_image_is_checked_once_and_a_wrong_one_every_time(tmp_path, monkeypatch):
    """The box image check reads only the layout and the shapes, so it runs once per distinct
    destination; a layout the copy engine would scramble is reported at every compile."""
    from tirx.isa import operands
    from tirx.transform.lower import lower_function

    monkeypatch.setattr(operands, "_PASSED", {})
    lower_function(_checked(tmp_path, dict(swizzle=3)).ir, arch=90)
    images = [k for k in operands._PASSED if k[0] == "tma image"]
    assert len(images) == 1
    lower_function(_checked(tmp_path, dict(swizzle=3)).ir, arch=90)
    assert [k for k in operands._PASSED if k[0] == "tma image"] == images
    broken, _, words = CHECKS["plain layout with swizzle=3"]
    for _ in range(2):
        with pytest.raises(TirxError, match=re.escape(words)):
            lower_function(_checked(tmp_path, broken).ir, arch=90)
