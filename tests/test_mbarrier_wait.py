"""``T.cuda.mbarrier_wait(barrier, phase)``, the real TIRx's spelling of a wait on an mbarrier
phase: the same program as the waiting form of ``mbarrier.try_wait.parity`` (so its checks,
CUDA and simulator model are that form's, tested in test_isa_mbarrier.py and
test_sim_mbarrier.py), with the barrier written as ``bars[i]`` or ``bars.ptr_to([i])``."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx import sim
from tirx.errors import ContractError, SimulationError, TirxSyntaxError

from .helpers import caret_line, define
from .test_sim_mbarrier import ARRIVE, WAIT, expected, pair, run_pair


@pytest.mark.parametrize("bar", ["bars[0]", "bars.ptr_to([0])"])
def test_producer_consumer_through_mbarrier_wait(tmp_path, bar):
    a, out, _ = run_pair(pair(tmp_path, wait=f"T.cuda.mbarrier_wait({bar}, 0)"))
    np.testing.assert_array_equal(out, expected(a))


def test_it_is_the_waiting_form(tmp_path):
    """The same lowered program, hence the same CUDA, as the raw waiting form."""
    named = pair(tmp_path, wait="T.cuda.mbarrier_wait(bars[0], 0)")
    raw = pair(tmp_path, wait=f"{WAIT}(bars[0], 0)")

    def cuda(fn):
        src = tirx.compile(fn, "cuda -arch=sm_90").source
        return [line for line in src.splitlines() if not line.startswith("#line")]

    assert cuda(named) == cuda(raw)
    assert any("mbarrier.try_wait.parity" in line for line in cuda(named))


def test_a_deadlock_points_at_the_wait(tmp_path):
    fn = pair(tmp_path, wait="T.cuda.mbarrier_wait(bars[0], 0)", count="33")
    with pytest.raises(SimulationError, match="deadlock") as e:
        run_pair(fn)
    assert caret_line(str(e.value)).startswith("T.cuda.mbarrier_wait(bars[0], 0)")


def test_operands_are_checked_at_the_call(tmp_path):
    with pytest.raises(TirxSyntaxError, match="two operands") as e:
        pair(tmp_path, wait="T.cuda.mbarrier_wait(bars[0])")
    assert caret_line(str(e.value)).startswith("T.cuda.mbarrier_wait(bars[0])")
    # a barrier outside shared memory: the waiting form's own check, at the barrier operand
    fn = pair(
        tmp_path,
        wait="T.cuda.mbarrier_wait(out_bar[0], 0)",
        sync='out_bar = T.alloc_local((1,), "uint64")\n    T.cuda.cta_sync()',
    )
    with pytest.raises(ContractError, match="shared"):
        tirx.compile(fn, "sim")


def test_arrive_then_wait_in_one_thread_completes(tmp_path):
    """One thread, count 1: its own arrive completes the phase its wait then sees."""
    fn = define(
        f"""
@T.function
def kernel(Out: T.Tensor((1,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    bars = T.alloc_shared((1,), "uint64")
    if T.cuda.lane_id() == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
        {ARRIVE}(bars[0])
        T.cuda.mbarrier_wait(bars[0], 0)
        Out[0] = T.float32(1)
""",
        tmp_path,
        "kernel",
    )
    out = np.zeros(1, dtype=np.float32)
    sim.run(tirx.compile(fn, "sim").lowered, [out])
    assert out[0] == 1
