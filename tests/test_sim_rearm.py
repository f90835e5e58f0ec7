"""An mbarrier armed again before the copy that completes its phase has landed: the simulator
completes such a phase at the copy's issue, the GPU when the bytes land, so an arrive or
expect-tx for the next phase must be ordered after that completion (docs/simulator.md,
"mbarrier"). Each fault beside its twin."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx.errors import SimulationError

from .pipeline_kernels import (
    ARM,
    GUARDED_WAIT,
    define_ring,
    ring_inputs,
    ring_kernel,
    ring_source,
)


def test_arming_a_stage_before_its_empty_wait_is_a_fault_at_the_arrive(tmp_path):
    a, out, _ = ring_inputs()
    with pytest.raises(SimulationError) as e:
        tirx.compile(ring_kernel(tmp_path, planted="arm"), target="sim")(a, out)
    err = e.value
    msg = str(err)
    source = err.span.source_line()
    assert "mbarrier.arrive.expect_tx" in source
    assert "mbarrier 'full'[0] (byte 0" in msg and "thread 0 (warp 0, lane 0) expects bytes" in msg
    assert "for phase 1, but has not observed phase 0 complete" in msg
    assert "which the tensor copy cp.async.bulk.tensor.2d" in msg
    assert "the expect-tx would count toward phase 0" in msg
    assert "T.cuda.mbarrier_wait(bar, 0)" in msg and "empty barrier" in msg
    assert err.hint.endswith("; this thread has waited on no mbarrier before it")


def test_an_empty_wait_of_the_wrong_parity_is_named_at_the_arm(tmp_path):
    """The producer's empty wait asks parity 1 of a barrier none of whose phases completed:
    it passes at once, and the arm after it is the fault; the hint names that wait."""
    source = ring_source()
    wrong = GUARDED_WAIT.replace("(k // 2 - 1) % 2", "(k // 2) % 2")
    assert wrong != GUARDED_WAIT and GUARDED_WAIT in source
    a, out, _ = ring_inputs()
    with pytest.raises(SimulationError) as e:
        tirx.compile(define_ring(tmp_path, source.replace(GUARDED_WAIT, wrong)), "sim")(a, out)
    assert "has not observed phase 0 complete" in e.value.message
    assert "; this thread's last wait, at line " in e.value.hint
    assert "on mbarrier 'empty'[0]" in e.value.hint and "passed at once" in e.value.hint


def test_the_stage_armed_after_its_empty_wait_is_exact(tmp_path):
    a, out, want = ring_inputs()
    tirx.compile(ring_kernel(tmp_path), target="sim")(a, out)
    assert np.array_equal(out, want)


def test_the_producers_own_wait_on_the_phase_orders_the_arrive(tmp_path):
    # arming early is fine once the producer has waited for the phase itself
    own = "                if k >= 2:\n                    T.cuda.mbarrier_wait(full[st], (k // 2 - 1) % 2)\n"
    source = ring_source().replace(GUARDED_WAIT + ARM, own + ARM + GUARDED_WAIT)
    assert own + ARM in source
    kernel = define_ring(tmp_path, source)
    a, out, want = ring_inputs()
    tirx.compile(kernel, target="sim")(a, out)
    assert np.array_equal(out, want)


def test_the_fuzzers_early_arm_of_the_attention_kernel_is_reported():
    """The sync fuzzer's edit that moves the producer's expect_tx above its empty wait ran
    clean before the check existed (and was reviewed as harmless)."""
    import dataclasses

    from tirx.sim import run

    from . import sync_fuzz as sf

    kernel = sf.KERNELS["attention_wgmma"]
    fn = kernel.build()
    key = "T.ptx[EXPECT](full[st], STAGE_BYTES) #1"
    (edit,) = [e for e in sf.edits(fn) if e.kind == "up" and e.key == key]
    with pytest.raises(SimulationError, match="has not observed phase 0 complete"):
        run(dataclasses.replace(fn, body=edit.body), kernel.inputs())
