"""``T.shared_scalar``: a one-element shared tensor that a name stands for (and
``T.alloc_scalar(dtype, scope)``, shared or local), and
``T.address_of(t[i])`` accepted wherever an instruction takes the shared element ``t[i]``
(docs/semantics.md, "Language forms of TIRx"), as the real TIRx's kernels write an mbarrier:
``bar = T.shared_scalar("uint64")`` ... ``T.cuda.mbarrier_wait(T.address_of(bar), 0)``."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx.errors import SimulationError, TirxError

from .helpers import caret_line, define

CELLS = """
@T.function
def k(O: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    bar = T.shared_scalar("uint64")
    count = T.shared_scalar("int32")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](T.address_of(bar), 64)
        count = 7
        count += 3
    T.cuda.cta_sync()
    T.ptx["mbarrier.arrive.shared::cta.b64"]({arrive})
    T.cuda.mbarrier_wait({wait}, 0)
    O[tid] = count * 100 + T.int32(tid)
"""


def _cells(tmp_path, arrive="T.address_of(bar)", wait="T.address_of(bar)"):
    return define(CELLS.format(arrive=arrive, wait=wait), tmp_path, "k")


def test_a_shared_scalar_is_an_mbarrier_and_a_cell(tmp_path):
    out = np.zeros(64, np.int32)
    tirx.compile(_cells(tmp_path), target="sim")(out)
    np.testing.assert_array_equal(out, 1000 + np.arange(64))
    source = tirx.compile(_cells(tmp_path), target="cuda -arch=sm_90").source
    assert "count[0] = 7;" in source  # x = v stores into the cell
    assert "mbarrier.init.shared::cta.b64 [%0], %1;" in source


def test_the_address_and_the_element_are_one_operand(tmp_path):
    """``bar``, ``T.address_of(bar)``: the same barrier, the same CUDA."""
    spelled = tirx.compile(_cells(tmp_path), target="cuda -arch=sm_90").source
    bare = tirx.compile(_cells(tmp_path, "bar", "bar"), target="cuda -arch=sm_90").source

    def body(source):  # without the #line directives, which name each kernel's own file
        return [x for x in source.split("extern")[1].splitlines() if not x.startswith("#line")]

    assert body(spelled) == body(bare)


def test_address_of_a_shared_element_in_a_raw_call(tmp_path):
    k = define(
        """
        @T.function
        def k(O: T.Tensor((32,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            bars = T.alloc_shared((2,), "uint64")
            tid = T.cuda.thread_idx("x")
            if tid == 0:
                T.ptx["mbarrier.init.shared::cta.b64"](T.address_of(bars[1]), 32)
            T.cuda.cta_sync()
            T.ptx["mbarrier.arrive.shared::cta.b64"](T.address_of(bars[1]))
            T.cuda.mbarrier_wait(bars[1], 0)
            O[tid] = T.int32(tid)
        """,
        tmp_path,
        "k",
    )
    out = np.zeros(32, np.int32)
    tirx.compile(k, target="sim")(out)
    np.testing.assert_array_equal(out, np.arange(32))
    assert "(unsigned int)(8)" in tirx.compile(k, target="cuda -arch=sm_90").source  # bars[1]


def test_a_cell_is_shared_memory_with_its_races(tmp_path):
    k = define(
        """
        @T.function
        def k(O: T.Tensor((64,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            flag = T.shared_scalar("int32")
            tid = T.cuda.thread_idx("x")
            if tid == 0:
                flag = 5
            O[tid] = flag
        """,
        tmp_path,
        "k",
    )
    with pytest.raises(SimulationError, match="race|nothing wrote|never wrote"):
        tirx.compile(k, target="sim")(np.zeros(64, np.int32))


def test_alloc_scalar_is_a_shared_cell_or_a_local_variable(tmp_path):
    """``T.alloc_scalar(dtype, scope)``: "shared" is the shared cell (the same kernel as with
    T.shared_scalar), "local" a variable of each thread that starts at zero."""
    text = CELLS.format(arrive="T.address_of(bar)", wait="T.address_of(bar)")
    text = text.replace('T.shared_scalar("uint64")', 'T.alloc_scalar("uint64", "shared")')
    text = text.replace('T.shared_scalar("int32")', 'T.alloc_scalar("int32", scope="shared")')
    text = text.replace("    O[tid] = count", "    mine = T.alloc_scalar(\"int32\", \"local\")\n"
                        "    mine += tid\n    O[tid] = mine - T.int32(tid) + count")  # fmt: skip
    out = np.zeros(64, np.int32)
    exe = tirx.compile(define(text, tmp_path, "k"), target="sim")
    exe(out)
    np.testing.assert_array_equal(out, np.full(64, 1000) + np.arange(64))
    assert exe.lowered.shared_bytes == tirx.compile(_cells(tmp_path), "sim").lowered.shared_bytes
    src = tirx.compile(define(text, tmp_path, "k"), target="cuda -arch=sm_90").source
    assert "int mine;" in src and "mine = 0;" in src


@pytest.mark.parametrize(
    "line, message",
    [
        ('x = T.shared_scalar("bool")', "a bool shared scalar is not supported"),
        ('x = T.shared_scalar("int32") + 1', "assign it to a name of its own"),
        (
            'x = T.shared_scalar("int32", 3)',
            "T.shared_scalar takes 0 to 1 arguments \\(dtype\\), got 2",
        ),
        ('x = T.alloc_scalar("int32")', 'scope must be "shared" or "local", got \'global\' \\(the'),
        ('x = T.alloc_scalar("int32", "global")', "global memory comes in as a tensor"),
        ('x = T.alloc_scalar("bool", "shared")', "a bool shared scalar is not supported"),
        ('x = T.alloc_scalar("float16", "local")', "float16 local scalar is not supported"),
        ('x = T.alloc_scalar("int32", "local") * 2', "assign it to a name of its own"),
        ('x = T.alloc_scalar("float33", "shared")', "unknown dtype 'float33'; known dtypes: bool"),
        ("x = T.local_scalar(3)", "expected a dtype, got"),
    ],
)
def test_shared_scalar_misuse_at_the_users_line(tmp_path, line, message):
    k = f"""
@T.function
def k(O: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    {line}
    O[0] = 1
"""
    with pytest.raises(TirxError, match=message) as e:
        tirx.compile(define(k, tmp_path, "k"), target="sim")
    assert caret_line(str(e.value)) == line


@pytest.mark.gpu
def test_gpu_a_shared_scalar_is_an_mbarrier_and_a_cell(tmp_path):
    import torch

    out = torch.zeros(64, dtype=torch.int32, device="cuda")
    tirx.compile(_cells(tmp_path), target="cuda")(out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), 1000 + np.arange(64))
