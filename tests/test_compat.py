"""The ``tvm_tirx`` alias: TIRx code runs unchanged, in both TIRx spellings of compile."""

from __future__ import annotations

import pytest

import tirx
from tests.helpers import define

KERNEL = """
from tvm_tirx.script import tirx as Tx


@Tx.function
def k(A: Tx.Tensor((4, 8), "float32"), Out: Tx.Tensor((8, 4), "float32")):
    Tx.device_entry(launch=Tx.cuda.LaunchConfig(grid=1, block=32))
    lane = Tx.cuda.lane_id()
    At = A.permute(1, 0)
    Out[lane // 4, lane % 4] = At[lane // 4, lane % 4]
"""


@pytest.fixture
def kernel(tmp_path):
    return define(KERNEL, tmp_path, "k")


def test_the_released_packages_entry_point_and_target_form(kernel):
    from tvm_tirx.tirx import compile as tirx_compile

    exe = tirx_compile(kernel, target={"kind": "cuda", "arch": "sm_90"})
    assert exe.target.kind == "cuda" and exe.target.arch == "sm_90"
    assert "__global__" in exe.source
    assert tirx_compile(kernel, target={"kind": "sim"}).target.kind == "sim"
    assert tirx_compile(kernel, target={"kind": "cuda"}).target.kind == "cuda"
    assert tirx_compile(kernel, target="sim").target.kind == "sim"  # strings pass through


def test_the_seed_guides_entry_point(kernel):
    import tvm_tirx

    assert tvm_tirx.compile is tirx.compile
    assert tvm_tirx.compile(kernel, target="cuda").target.kind == "cuda"


@pytest.mark.parametrize(
    "target, fragment",
    [
        ({"kind": "rocm"}, "kind 'rocm'"),
        ({"kind": "cuda", "arch": "sm_90", "max_threads": 1024}, "max_threads"),
        ({"kind": "cuda", "arch": 90}, "arch must be a string"),
        ({"kind": "sim", "arch": "sm_90"}, "arch must be a string"),
        ({"kind": "cuda", "arch": "sm_70"}, "sm_80 or newer"),
    ],
)
def test_bad_dict_targets_say_what_to_write(kernel, target, fragment):
    from tvm_tirx.tirx import compile as tirx_compile

    with pytest.raises(tirx.TirxError) as info:
        tirx_compile(kernel, target=target)
    assert fragment in str(info.value)


def test_permute_through_the_alias_runs_on_the_simulator(kernel):
    np = pytest.importorskip("numpy")
    from tvm_tirx.tirx import compile as tirx_compile

    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = np.zeros((8, 4), dtype=np.float32)
    tirx_compile(kernel, target={"kind": "sim"})(a, out)
    np.testing.assert_array_equal(out, a.T)
