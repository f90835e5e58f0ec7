"""Machine limits checked after lowering (tirx/transform/limits.py), the same for both targets.

Each check fires on a kernel built to break it, at the user's line, and stays silent on the
corrected twin.
"""

from __future__ import annotations

import pytest

import tirx
from tests.helpers import caret_line, define
from tirx.ir.nodes import ExecScope
from tirx.isa import supported_forms
from tirx.isa.core import Family
from tirx.isa.registry import FAMILIES, SPECS
from tirx.transform.limits import (
    LOCAL_BYTES_PER_THREAD,
    MachineLimitError,
    warp_collective_opcode,
)

TARGETS = ["sim", "cuda -arch=sm_90"]

RAW_LDMATRIX = """
@T.function
def k(A: T.Tensor((16, 16), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={block}))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 16), "float16")
    r = T.alloc_local((2,), "uint32")
    if lane < 32:
        T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"](r[0], r[1], a[lane % 16, 0])
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("block", ["16", "(8, 6)", "33", "1000"])
def test_a_raw_warp_instruction_in_a_partial_warp_is_refused(tmp_path, target, block):
    k = define(RAW_LDMATRIX.format(block=block), tmp_path, "k")
    with pytest.raises(MachineLimitError) as info:
        tirx.compile(k, target=target)
    err = info.value
    assert isinstance(err, tirx.LaunchError) and isinstance(err, tirx.TirxError)
    assert caret_line(str(err)).startswith('T.ptx["ldmatrix')
    assert "ldmatrix is a warp-collective instruction" in str(err)
    assert "multiple of 32" in err.hint


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("block", ["32", "(8, 8)", "1024", "(32, 2, 2)"])
def test_whole_warps_compile(tmp_path, target, block):
    k = define(RAW_LDMATRIX.format(block=block), tmp_path, "k")
    assert tirx.compile(k, target=target) is not None


@pytest.mark.parametrize("target", TARGETS)
def test_partial_warps_without_warp_instructions_are_fine(tmp_path, target):
    k = define(
        """
        @T.function
        def k(A: T.Tensor((16,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=16))
            A[T.cuda.thread_idx("x")] = 1.0
        """,
        tmp_path,
        "k",
    )
    assert tirx.compile(k, target=target) is not None


LOCALS = """
@T.function
def k(A: T.Tensor((4,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    x = T.alloc_local(({first},), "float32")
    y = T.alloc_local(({second},), "uint8")
    x[0] = 1.0
    y[0] = 2
    A[0] = x[0] + y[0]
"""


@pytest.mark.parametrize("target", TARGETS)
def test_local_arrays_beyond_a_threads_local_memory_are_refused(tmp_path, target):
    words = LOCAL_BYTES_PER_THREAD // 4
    k = define(LOCALS.format(first=words, second=1), tmp_path, "k")  # one byte too many
    with pytest.raises(MachineLimitError) as info:
        tirx.compile(k, target=target)
    assert caret_line(str(info.value)).startswith("y = T.alloc_local")  # where it overflows
    assert "512 KiB" in str(info.value) and "T.alloc_shared" in info.value.hint


def test_local_arrays_up_to_the_limit_compile(tmp_path):
    words = LOCAL_BYTES_PER_THREAD // 4
    k = define(LOCALS.format(first=words - 1, second=4), tmp_path, "k")  # exactly 512 KiB
    assert tirx.compile(k, target="sim") is not None


def test_the_warp_collective_list_covers_the_tile_instructions():
    # the ISA data says which families are warp-collective, and the check reads it
    warp = {Family.MMA, Family.LDMATRIX, Family.STMATRIX}
    assert {f for f, s in SPECS.items() if s.exec_scope is ExecScope.WARP} >= warp
    for text in supported_forms():
        spec = next(s for s in FAMILIES if text.startswith(s.mnemonic + "."))
        expected = None if spec.exec_scope is ExecScope.THREAD else spec.mnemonic
        assert warp_collective_opcode(text) == expected, text
    assert warp_collective_opcode("add.s32") is None
    assert warp_collective_opcode("mmaa.sync") is None  # a mnemonic is a whole dotted prefix


def test_a_family_scope_decides_the_partial_warp_check(tmp_path, monkeypatch):
    # a family declared thread-scoped is not refused in a partial warp: the check has no list
    # of its own for the isa families
    from dataclasses import replace

    from tirx.transform import limits

    spec = SPECS[Family.LDMATRIX]
    thread = replace(spec, exec_scope=ExecScope.THREAD)
    monkeypatch.setattr(
        limits, "family_of_text", lambda text: thread if text.startswith("ldmatrix") else None
    )
    k = define(RAW_LDMATRIX.format(block="16"), tmp_path, "k")
    assert tirx.compile(k, target="sim") is not None


TILE_LDMATRIX = """
@T.function
def k(A: T.Tensor((16, 16), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={block}))
    a = T.alloc_shared((16, 16), "float16")
    ar = T.alloc_local((4,), "uint32")
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        ar.view(4, 8, 4, layout=TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])),
        a.view("uint32").rearrange("(g r) (c w) -> (c g) r w", g=2, c=2, w=4),
        scope={scope!r},
    )
"""


@pytest.mark.parametrize("scope", [s.value for s in ExecScope])
def test_a_tile_operation_runs_at_its_familys_scope(tmp_path, scope):
    # the scope check of T.cuda.tile.apply reads FamilySpec.exec_scope too
    k = define(TILE_LDMATRIX.format(block=32, scope=scope), tmp_path, "k")
    want = SPECS[Family.LDMATRIX].exec_scope
    if scope == want.value:
        assert tirx.compile(k, target="sim") is not None
        return
    with pytest.raises(tirx.TirxSyntaxError) as info:
        tirx.compile(k, target="sim")
    assert f"scope={scope!r} is not supported for ldmatrix" in info.value.message
    assert f'use scope="{want.value}"' in info.value.hint


def test_a_warp_tile_operation_in_a_partial_warp_is_refused(tmp_path):
    k = define(TILE_LDMATRIX.format(block=48, scope="warp"), tmp_path, "k")
    with pytest.raises(MachineLimitError) as info:
        tirx.compile(k, target="cuda -arch=sm_90")
    assert "ldmatrix is a warp-collective instruction" in str(info.value)
    assert caret_line(str(info.value)).startswith("T.cuda.tile.apply(")


@pytest.mark.parametrize("target", ["sim", "cuda -arch=sm_90"])
def test_a_global_tensor_of_2_gib_or_more_is_refused_at_its_parameter(tmp_path, target):
    # 32-bit offsets: 2**30 float16 elements (2 GiB) would wrap; one element fewer fits
    src = """
@T.function
def k(X: T.Tensor(({n},), "float16"), Y: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.lane_id()
    Y[i] = T.float32(X[{n} - 1 - i])
"""
    fits = define(src.format(n=2**30 - 1), tmp_path, "k")
    tirx.compile(fits, target=target)
    with pytest.raises(tirx.CompileError) as e:
        tirx.compile(define(src.format(n=2**30), tmp_path, "k"), target=target)
    msg = str(e.value)
    assert "tensor 'X' (1073741824,) float16 holds 2147483648 bytes (2.0 GiB)" in msg
    assert "32-bit offsets, so each must be smaller than 2 GiB" in msg
    assert caret_line(msg).startswith("def k(X: T.Tensor(")
    assert "slices" in e.value.hint
