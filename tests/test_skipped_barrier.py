"""A CTA barrier that whole warps skip and exit (tirx/sim/skipped_barriers.py): legal by the
PTX ISA (a barrier waits for the threads that have not exited) and on the H100, so the
simulator runs the kernel's one barrier outside loops that way; where the warps that skip it
might meet the others at another barrier, it still reports the barrier, with a hint that says
why."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.helpers import define

HEAD = """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    s = T.alloc_shared((64,), "int32")
    tid = T.cuda.thread_idx("x")
"""
SKIPPED = """    if tid < 32:
        s[tid] = tid * 10
        T.cuda.cta_sync()
        Out[tid] = s[31 - tid]
"""
TWO_SITES = """    if tid < 32:
        s[tid] = tid
        T.cuda.cta_sync()
        Out[tid] = s[63 - tid]
    else:
        s[tid] = tid
        T.cuda.cta_sync()
        Out[tid] = s[63 - tid]
"""
IN_A_LOOP = "    for i in range(2):\n" + "".join("    " + ln + "\n" for ln in SKIPPED.splitlines())
SECOND_BARRIER = SKIPPED + "    T.cuda.cta_sync()\n"


def _run(tmp_path, body: str) -> np.ndarray:
    out = np.zeros(64, np.int32)
    tirx.compile(define(HEAD + body, tmp_path, "kernel"), target="sim")(out)
    return out


def test_the_one_barrier_skipped_by_a_warp_that_exits_orders_the_warps_that_meet_there(tmp_path):
    out = _run(tmp_path, SKIPPED)
    assert (out[:32] == 10 * np.arange(32)[::-1]).all() and not out[32:].any()


@pytest.mark.parametrize(
    "body", [TWO_SITES, IN_A_LOOP, SECOND_BARRIER], ids=["two", "loop", "more"]
)
def test_a_barrier_the_others_might_meet_elsewhere_is_reported_with_why(tmp_path, body):
    with pytest.raises(tirx.SimulationError) as info:
        _run(tmp_path, body)
    assert "barrier (cta) reached by 32 of 64 threads; thread 32 is elsewhere" in info.value.message
    assert "a kernel's one CTA barrier outside loops only" in info.value.hint
