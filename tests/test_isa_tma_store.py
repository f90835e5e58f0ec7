"""The TMA tensor store and reduction as forms of the tma family (tirx/families/tma/isa_store.py):
the forms and refusals, the lowering's checks (each fires on a kernel built to break it and
stays silent on its twin), float coordinates refused for loads and stores, the CUDA text
(operands as PTX lists them, the coordinates innermost first, one tensor map shared by a load
and a store of the same box) compiled by NVRTC with UTMASTG and UTMAREDG in its SASS."""

from __future__ import annotations

import re

import pytest

import tirx
from tirx import isa
from tirx.errors import ContractError, TirxError
from tirx.isa import Family
from tirx.layout import S, TileLayout

from .helpers import define
from .tma_kernels import box_kernel as load_kernel
from .tma_store_kernels import LOAD, REDUCE, STORE, box_kernel, pipeline_kernel, tile_layout

SM90 = "cuda -arch=sm_90"


def _compile(kernel, target=SM90):
    return tirx.compile(kernel, target=target)


def test_the_forms_and_the_refusals():
    forms = set(isa.supported_forms())
    for dim in "12345":
        for mode in (".tile", ""):
            store = f"cp.async.bulk.tensor.{dim}d.global.shared::cta{mode}.bulk_group"
            assert store in forms
            assert tirx.instruction_contract(store).family is Family.CP_ASYNC_BULK_TENSOR
            for op in ("add", "min", "max", "inc", "dec", "and", "or", "xor"):
                red = f"cp.reduce.async.bulk.tensor.{dim}d.global.shared::cta.{op}{mode}.bulk_group"
                assert red in forms
                c = tirx.instruction_contract(red)
                assert c.family is Family.CP_REDUCE_ASYNC_BULK_TENSOR and c.min_arch == 90
    for bad, words in (
        (STORE.replace("bulk_group", "mbarrier::complete_tx::bytes"), "bulk async-groups"),
        (STORE + ".L2::cache_hint", STORE),
        (STORE.replace("tile", "tile::scatter4"), "tile mode only"),
        (LOAD.replace("mbarrier::complete_tx::bytes", "bulk_group"), "on an mbarrier"),
        (REDUCE.format(op="add").replace("tile", "im2col_no_offs"), "tile mode only"),
        (REDUCE.format(op="add") + ".L2::cache_hint", REDUCE.format(op="add")),
        (REDUCE.format(op="mul"), "expected .add, .min"),
    ):
        with pytest.raises(ContractError) as e:
            tirx.instruction_contract(bad)
        assert words in str(e.value), str(e.value)


def test_the_cuda_of_a_store_and_a_reduction(tmp_path):
    red = REDUCE.format(op="add")
    also = 'T.cuda.tile.apply(T.ptx[RED], C[:, :], s[:, :], box=(64, 64), coords=(tid // 128, 64), swizzle=3, scope="thread")'
    k, _ = box_kernel(tmp_path, dict(RED=red), coords=(64, 0), after_store=also)
    exe = _compile(k)
    src = exe.source
    lines = [ln.strip() for ln in src.splitlines() if "bulk.tensor" in ln]
    assert lines[0] == (
        f'asm volatile("{STORE} [%0, {{%1, %2}}], [%3];" : : "l"(&tirx_tmap0), "r"(0), "r"(64), '
        '"r"((unsigned int)((tirx_smem_addr + 0u + (unsigned int)(0)))) : "memory");'
    )
    assert lines[1].startswith(f'asm volatile("{red} [%0, {{%1, %2}}], [%3];" : : "l"(&tirx_tmap0)')
    assert '"r"(64), "r"((tid / 128))' in lines[1]  # innermost first
    assert src.count("const __grid_constant__ tirx_tmap") == 1  # one map: the fields agree
    assert exe.launch_kinds == ["ptr", "ptr", "tmap"]
    if exe.sass is not None:
        assert "UTMASTG.2D" in exe.sass and "UTMAREDG.2D.ADD" in exe.sass


def test_two_tensors_have_two_maps(tmp_path):
    k, _ = pipeline_kernel(tmp_path, 4)  # A loaded, C stored
    exe = _compile(k)
    assert exe.launch_kinds == ["ptr", "ptr", "tmap", "tmap"]


def test_a_kernel_that_loads_and_stores_one_tensor_has_one_map(tmp_path):
    k = define(
        """
        @T.function
        def kernel(C: T.Tensor((128, 64), "float16")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            s = T.alloc_shared((64, 64), "float16", layout=LAYOUT, align=1024)
            bars = T.alloc_shared((1,), "uint64")
            if T.cuda.thread_idx("x") == 0:
                T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
                T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 8192)
                T.cuda.tile.apply(T.ptx[LOAD], s[:, :], C[:, :], box=(64, 64), coords=(0, 0), swizzle=3, mbar=bars[0], scope="thread")
                T.cuda.mbarrier_wait(bars[0], 0)
                T.cuda.tile.apply(T.ptx[STORE], C[:, :], s[:, :], box=(64, 64), coords=(64, 0), swizzle=3, scope="thread")
                T.cuda.tile.apply(T.ptx[STORE], C[:, :], s[0:32, :], box=(32, 64), coords=(0, 0), swizzle=3, scope="thread")
                T.ptx["cp.async.bulk.commit_group"]()
                T.ptx["cp.async.bulk.wait_group"](0)
        """,
        tmp_path,
        "kernel",
        LOAD=LOAD,
        STORE=STORE,
        LAYOUT=tile_layout(64, 64, 3, 16),
    )
    exe = _compile(k)
    assert exe.launch_kinds == ["ptr", "tmap", "tmap"]  # (64, 64) shared; (32, 64) its own
    calls = [ln for ln in exe.source.splitlines() if "bulk.tensor" in ln]
    assert [re.search(r"&tirx_tmap(\d)", ln).group(1) for ln in calls] == ["0", "0", "1"]


# ------------------------------------------------------------------------------ the checks

STORE_CHECKS = {
    # name: (fields that break it, fields of its corrected twin, words of the error)
    "mbar= on a store": (
        dict(src="s[:, :], mbar=bars[0]"),
        {},
        "completes through bulk async-groups, not an mbarrier",
    ),
    "dst in shared memory": (dict(dst="s2[:, :]"), {}, "region of a global tensor parameter"),
    "src in global memory": (dict(src="A[:, :]"), {}, "must be a view of shared memory"),
    "plain layout with swizzle=3": (
        dict(layout=TileLayout(S[(64, 64)])),
        {},
        "where the box image has byte",
    ),
    "swizzled source aligned to 128 only": (
        dict(align=128),
        dict(align=1024),
        "a tensor store's source is aligned to",
    ),
    ".add of int16": (
        dict(text=REDUCE.format(op="add"), dtype="int16"),
        dict(text=REDUCE.format(op="add"), dtype="float16"),
        "operand dst holds int16 elements; .add reduces",
    ),
    ".inc of int32": (
        dict(text=REDUCE.format(op="inc"), dtype="int32", box=(64, 32)),
        dict(text=REDUCE.format(op="inc"), dtype="uint32", box=(64, 32)),
        "the ISA has .add, .and, .max, .min, .or, .xor",
    ),
    ".xor of int64 (an illegal instruction on the H200)": (
        dict(text=REDUCE.format(op="xor"), dtype="int64", box=(16, 16), shape=(32, 16)),
        dict(text=REDUCE.format(op="xor"), dtype="uint64", box=(16, 16), shape=(32, 16)),
        "illegal instruction for .xor into a signed 64-bit tensor map",
    ),
    "a float coordinate": (dict(coords=(64.5, 0)), dict(coords=(64, 0)), "coordinates are s32"),
    "a float coordinate expression": (
        dict(coords=("tid * 0.5", 0)),
        dict(coords=("tid // 2", 0)),
        "float32 expression; coordinates are s32 integers",
    ),
}


@pytest.mark.parametrize("name", list(STORE_CHECKS))
def test_each_store_check_fires_and_its_twin_is_silent(tmp_path, name):
    broken, twin, words = STORE_CHECKS[name]
    with pytest.raises(TirxError) as e:
        _compile(box_kernel(tmp_path, **broken)[0])
    assert words in str(e.value), str(e.value)
    assert e.value.hint or isinstance(e.value, ContractError)
    kept = {k: v for k, v in broken.items() if k in ("dtype", "text", "box", "shape")}
    _compile(box_kernel(tmp_path, **{**kept, **twin})[0])  # no error


def test_the_error_points_at_the_user_line(tmp_path):
    k, src = box_kernel(tmp_path, coords=("tid * 0.5", 0))
    with pytest.raises(ContractError) as e:
        _compile(k)
    msg = str(e.value)
    assert "coords=(tid * 0.5, 0)" in msg and "^" in msg and "T.int32(x)" in e.value.hint
    with pytest.raises(ContractError) as e:
        _compile(box_kernel(tmp_path, src="A[:, :]")[0])
    assert "A[:, :]" in str(e.value) and "^" in str(e.value)


@pytest.mark.parametrize("coords", [(64.7, 0), ("T.float32(64)", 0), (0, "tid / 2")])
def test_a_float_coordinate_of_a_load_is_refused_not_truncated(tmp_path, coords):
    with pytest.raises(ContractError, match="coordinates are s32 integers"):
        _compile(load_kernel(tmp_path, coords=coords))
    _compile(load_kernel(tmp_path, coords=(64, "T.int32(tid / 2)")))  # an explicit conversion


def test_the_raw_store_call_is_refused(tmp_path):
    k = define(
        """
        @T.function
        def kernel(C: T.Tensor((64, 64), "float16")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            s = T.alloc_shared((64, 64), "float16", align=1024)
            T.ptx[TEXT](C[0, 0], 0, 0, s[0, 0])
        """,
        tmp_path,
        "kernel",
        TEXT=STORE,
    )
    with pytest.raises(ContractError, match="tile form") as e:
        _compile(k)
    assert "C[:, :], src, box=" in e.value.hint


def test_older_targets_are_refused(tmp_path):
    with pytest.raises(ContractError, match="sm_90"):
        _compile(box_kernel(tmp_path)[0], target="cuda -arch=sm_80")


def test_the_launcher_encodes_the_stores_map(tmp_path):
    import torch

    from .test_isa_tma import _attach

    exe = _compile(box_kernel(tmp_path, shape=(128, 128), coords=(64, 0))[0])
    encodes = []
    rec = _attach(exe, encodes)
    a, c = torch.zeros((64, 64), dtype=torch.float16), torch.zeros((128, 128), dtype=torch.float16)
    for _ in range(3):
        exe(a, c)
    assert len(encodes) == 1 and len(rec.calls) == 3
    fields, address = encodes[0]
    assert address == c.data_ptr()
    assert (fields.dims, fields.strides, fields.box, fields.swizzle) == (
        (128, 128), (256,), (64, 64), 3,
    )  # fmt: skip


def test_nvrtc_for_sm_90a_makes_the_tensor_store_and_reduction(tmp_path):
    from tirx.backend.cuda.nvrtc import compile_cuda
    from tirx.backend.cuda.tools import disassemble

    k, _ = pipeline_kernel(tmp_path, 4)
    out = compile_cuda(_compile(k).source, arch="sm_90a")
    sass = disassemble(out.cubin)
    if sass is None:
        pytest.skip("no disassembler installed (the sass extra)")
    ops = [ln.split("*/")[1].strip() for ln in sass.splitlines() if "*/" in ln]
    assert any("UTMALDG.2D" in op for op in ops)  # (under a predicate: thread 0's)
    at = next(i for i, op in enumerate(ops) if "UTMASTG.2D" in op)
    assert ops[at + 1] == "UTMACMDFLUSH ;"  # commit_group
    assert "DEPBAR.LE SB0, 0x1 ;" in ops[at + 2 : at + 4]  # wait_group.read 1
    red = REDUCE.format(op="add")
    also = 'T.cuda.tile.apply(T.ptx[RED], C[:, :], s[:, :], box=(64, 64), coords=(0, 64), swizzle=3, scope="thread")'
    k, _ = box_kernel(tmp_path, dict(RED=red), coords=(64, 0), after_store=also)
    sass = disassemble(compile_cuda(_compile(k).source, arch="sm_90a").cubin)
    assert "UTMASTG.2D" in sass and "UTMAREDG.2D.ADD" in sass


@pytest.mark.parametrize("text", [STORE, REDUCE.format(op="add")])
def test_the_launcher_refuses_a_misaligned_destination(tmp_path, text):
    import torch

    from tirx.errors import LaunchError

    from .test_isa_tma import _attach

    exe = _compile(box_kernel(tmp_path, text=text)[0])
    encodes = []
    _attach(exe, encodes)
    base = torch.zeros(128 * 128 + 8, dtype=torch.float16)
    with pytest.raises(LaunchError) as e:
        exe(torch.zeros((64, 64), dtype=torch.float16), base[1 : 1 + 128 * 128].view(128, 128))
    assert "'C'" in str(e.value) and "16" in str(e.value) and not encodes
