"""The simulator's mbarrier model (tirx/sim/mbarrier.py, strands.py): a producer warp and a
consumer warp synchronizing through a barrier are correct and race-free in either branch
order, and the same pair without the wait is a reported race; phases flip parity over a
multi-phase loop; a spinning test_wait lets the producer run; deadlock, over-arrival, use
before init, re-init in use and tx-count overflow are faults naming the barrier, the line and
the thread; cp.async's arrive-on makes the copied bytes readable with no wait_group (and
without .noinc its arrive does not count); traces show the events. GPU tests run the same
kernels on the GPU and compare bit for bit with the simulator."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx import sim
from tirx.errors import SimulationError
from tirx.families.mbarrier.sim import BarrierEvent

from .cluster_kernels import kernel_line as line
from .helpers import caret_line, define

INIT = 'T.ptx["mbarrier.init.shared::cta.b64"]'
ARRIVE = 'T.ptx["mbarrier.arrive.shared::cta.b64"]'
WAIT = 'T.ptx["mbarrier.try_wait.parity.shared::cta.b64"]'
TEST = 'T.ptx["mbarrier.test_wait.parity.shared::cta.b64"]'

PAIR = """
@T.function
def kernel(A: T.Tensor((64,), "float32"), Out: T.Tensor((64,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.linear_thread_id()
    bars = T.alloc_shared((2,), "uint64")
    s = T.alloc_shared((64,), "float32")
    if tid == 0:
        {INIT}(bars[{bar}], {count})
    {sync}
    if tid {consumer}:
        {first}
    else:
        {second}
"""

PAIR_GOOD = dict(
    sync="T.cuda.cta_sync()",
    bar="0",
    count="32",
    consumer=">= 32",
    wait=f"{WAIT}(bars[0], 0)",
    arrive=f"{ARRIVE}(bars[0])",
)


CONSUME = """{wait}
        Out[tid % 32] = s[tid % 32]
        Out[tid % 32 + 32] = s[tid % 32 + 32]"""
PRODUCE = """s[tid % 32] = A[tid % 32] * 2.0
        s[tid % 32 + 32] = A[tid % 32 + 32] + 1.0
        {arrive}"""


def pair(tmp_path, producer_first=False, **changes):
    """The pair; ``consumer`` the condition of the consumer's threads (the producer's branch
    first when ``producer_first``, its condition then being the negation)."""
    fields = {**PAIR_GOOD, **changes, "INIT": INIT}
    consume, produce = CONSUME.format(**fields), PRODUCE.format(**fields)
    if producer_first:
        fields["consumer"] = {">= 32": "< 32", "< 32": ">= 32"}[fields["consumer"]]
        first, second = produce, consume
    else:
        first, second = consume, produce
    return define(PAIR.format(**fields, first=first, second=second), tmp_path, "kernel")


def run_pair(fn, trace=False):
    a = np.arange(64, dtype=np.float32) - 20.5
    out = np.zeros(64, dtype=np.float32)
    result = sim.run(tirx.compile(fn, "sim").lowered, [a, out], trace=trace)
    return a, out, result


def expected(a):
    return np.concatenate([a[:32] * 2.0, a[32:] + 1.0]).astype(np.float32)


@pytest.mark.parametrize("consumer", [">= 32", "< 32"])
@pytest.mark.parametrize("producer_first", [False, True])
def test_producer_consumer_is_correct_and_race_free(tmp_path, consumer, producer_first):
    """Either warp, either branch first: the consumer's wait suspends it while the producer
    runs."""
    fn = pair(tmp_path, consumer=consumer, producer_first=producer_first)
    a, out, result = run_pair(fn, trace=True)
    np.testing.assert_array_equal(out, expected(a))
    events = [t.event for t in result.barriers]
    assert events[0] is BarrierEvent.INIT and events.count(BarrierEvent.ARRIVE) == 32
    (done,) = [t for t in result.barriers if t.event is BarrierEvent.COMPLETE]
    assert done.phase == 1 and len(done.threads) == 32
    (wait,) = [t for t in result.barriers if t.event is BarrierEvent.WAIT]
    assert len(wait.threads) == 32 and events.index(BarrierEvent.WAIT) > events.index(
        BarrierEvent.COMPLETE
    )


def test_without_the_wait_the_read_is_a_race(tmp_path):
    with pytest.raises(SimulationError, match="shared-memory race") as e:
        run_pair(pair(tmp_path, wait="pass", producer_first=True))
    assert "warp 1" in str(e.value) or "warp 0" in str(e.value)


def test_a_wait_on_the_wrong_parity_is_no_synchronization(tmp_path):
    """Parity 1 names the phase before the first: it counts as completed at once (the ISA's
    rule), so the consumer reads before the producer wrote; with the producer first, the
    wait is for phase 1, which nobody completes."""
    with pytest.raises(SimulationError, match="that nothing wrote in this block") as e:
        run_pair(pair(tmp_path, wait=f"{WAIT}(bars[0], 1)"))
    # the hint names the wait that waited for nothing, and the first phase's parity
    wait = line(tmp_path, f"{WAIT}(bars[0], 1)")
    assert f"this thread's mbarrier wait at line {wait} passed at once" in e.value.hint
    assert "no phase of mbarrier 'bars'[0] (byte 0, shared address 0) had completed" in e.value.hint
    assert "the first phase's parity is 0" in e.value.hint
    with pytest.raises(SimulationError, match="deadlock.*waits for the phase of parity 1"):
        run_pair(pair(tmp_path, wait=f"{WAIT}(bars[0], 1)", producer_first=True))


def test_deadlock_is_reported_with_the_barrier_state(tmp_path):
    fn = pair(tmp_path, count="33")
    with pytest.raises(SimulationError, match="deadlock") as e:
        run_pair(fn)
    msg = str(e.value)
    assert "'bars'[0] (byte 0" in msg and "parity 0" in msg and "1 of 33 arrivals pending" in msg
    assert "thread 32 (warp 1, lane 0) waits" in msg
    assert caret_line(msg).startswith(WAIT)  # at the wait's line


def test_over_arrival_is_a_fault(tmp_path):
    """An arrive of more than the pending count; its twin (the exact count) completes."""
    arrive = f"T.cuda.warp_sync()\n        if tid == 0:\n            {ARRIVE}(bars[0], {{n}})"
    with pytest.raises(
        SimulationError, match="over-arrival on mbarrier 'bars'\\[0\\] \\(byte 0"
    ) as e:
        run_pair(pair(tmp_path, arrive=arrive.format(n=33), producer_first=True))
    assert "an arrive of 33 when phase 0 (parity 0), 32 of 32 arrivals pending" in str(e.value)
    a, out, _ = run_pair(pair(tmp_path, arrive=arrive.format(n=32), producer_first=True))
    np.testing.assert_array_equal(out, expected(a))


def test_more_arrivals_than_the_count_run_into_the_next_phase(tmp_path):
    """Count 16 and 32 arrivals complete two phases (the ISA has no error for it): the wait
    for parity 0 is then a wait for the third phase, which never completes."""
    with pytest.raises(SimulationError, match="deadlock.*phase 2 \\(parity 0\\), 16 of 16"):
        run_pair(pair(tmp_path, count="16", producer_first=True))


def test_use_before_init_is_a_fault(tmp_path):
    with pytest.raises(SimulationError, match="used before mbarrier.init"):
        run_pair(pair(tmp_path, bar="1"))


def test_init_needs_a_barrier_before_other_threads_use_it(tmp_path):
    with pytest.raises(SimulationError, match="shared-memory race.*'bars'\\[0\\] \\(byte 0"):
        run_pair(pair(tmp_path, sync="pass", producer_first=True))


def test_reinit_while_arrivals_are_pending_is_a_fault(tmp_path):
    """Count 64 and 32 arrivals: the phase is in use when thread 0 initializes it again. The
    twin (count 32: the phase completed) re-initializes it, which is no fault of the barrier;
    the consumer's wait is then unordered with that init (a race on the barrier's word)."""
    again = f"T.cuda.warp_sync()\n        if tid == 0:\n            {INIT}(bars[0], 32)"
    arrive = f"{ARRIVE}(bars[0])\n        {again}"
    with pytest.raises(
        SimulationError,
        match="mbarrier.init of 'bars'\\[0\\] .*, which is in use: phase 0 \\(parity 0\\), 32 of 64",
    ):
        run_pair(pair(tmp_path, arrive=arrive, count="64", producer_first=True))
    with pytest.raises(SimulationError, match="race: thread 32 .* reads 'bars'\\[0\\] \\(byte 0"):
        run_pair(pair(tmp_path, arrive=arrive, producer_first=True))


def test_tx_count_overflow_is_a_fault(tmp_path):
    tx = 'T.ptx["mbarrier.expect_tx.shared::cta.b64"]'
    arrive = f"{tx}(bars[0], 1048575)\n        {ARRIVE}(bars[0])"
    with pytest.raises(SimulationError, match="tx-count 1048575 \\+ 1048575 leaves"):
        run_pair(pair(tmp_path, arrive=arrive, wait="pass", producer_first=True))


def test_arrive_expect_tx_of_zero_completes_like_an_arrive(tmp_path):
    arrive = 'T.ptx["mbarrier.arrive.expect_tx.release.cta.shared::cta.b64"](bars[0], 0)'
    a, out, _ = run_pair(pair(tmp_path, arrive=arrive))
    np.testing.assert_array_equal(out, expected(a))


def test_arrive_with_a_count(tmp_path):
    """One thread arrives for the whole warp, after a warp barrier orders the warp's writes."""
    arrive = f"T.cuda.warp_sync()\n        if tid == 0:\n            {ARRIVE}(bars[0], 32)"
    a, out, _ = run_pair(pair(tmp_path, arrive=arrive))
    np.testing.assert_array_equal(out, expected(a))


def test_a_spinning_test_wait_lets_the_producer_run(tmp_path):
    wait = (
        'done = T.alloc_local((1,), "uint32")\n        done[0] = 0\n'
        f"        while done[0] == 0:\n            {TEST}(done[0], bars[0], 0)"
    )
    a, out, result = run_pair(pair(tmp_path, wait=wait), trace=True)
    np.testing.assert_array_equal(out, expected(a))
    tests = [t for t in result.barriers if t.event is BarrierEvent.TEST]
    assert tests and tests[-1].phase == 1


def test_a_spin_that_can_never_succeed_is_a_deadlock_not_a_hang(tmp_path):
    wait = (
        'done = T.alloc_local((1,), "uint32")\n        done[0] = 0\n'
        f"        while done[0] == 0:\n            {TEST}(done[0], bars[0], 0)"
    )
    with pytest.raises(SimulationError, match="deadlock.*tests \\(in a loop\\)"):
        run_pair(pair(tmp_path, wait=wait, count="40"))


PHASES = """
@T.function
def kernel(A: T.Tensor((128,), "float32"), Out: T.Tensor((128,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.linear_thread_id()
    bars = T.alloc_shared((2,), "uint64")
    s = T.alloc_shared((32,), "float32")
    if tid == 0:
        {INIT}(bars[0], 32)
        {INIT}(bars[1], 32)
    T.cuda.cta_sync()
    if tid < 32:
        for i in range(4):
            if i > 0:
                {empty_wait}
            s[tid] = A[i * 32 + tid] * 3.0
            {ARRIVE}(bars[0])
    else:
        for i in range(4):
            {WAIT}(bars[0], {full_parity})
            Out[i * 32 + tid - 32] = s[tid - 32]{extra_read}
            {ARRIVE}(bars[1])
"""


def phases(
    tmp_path, empty_wait=f"{WAIT}(bars[1], (i - 1) % 2)", full_parity="i % 2", extra_read=""
):
    src = PHASES.format(
        INIT=INIT,
        ARRIVE=ARRIVE,
        WAIT=WAIT,
        empty_wait=empty_wait,
        full_parity=full_parity,
        extra_read=extra_read,
    )
    return define(src, tmp_path, "kernel")


def run_phases(fn, trace=False):
    a = np.linspace(-3, 5, 128, dtype=np.float32)
    out = np.zeros(128, dtype=np.float32)
    result = sim.run(tirx.compile(fn, "sim").lowered, [a, out], trace=trace)
    return a, out, result


def test_parity_flips_over_several_phases(tmp_path):
    a, out, result = run_phases(phases(tmp_path), trace=True)
    np.testing.assert_array_equal(out, a * np.float32(3.0))
    full = [t.phase for t in result.barriers if t.event is BarrierEvent.COMPLETE]
    assert sorted(full) == [1, 1, 2, 2, 3, 3, 4, 4]  # four phases of each barrier


def test_bytes_every_consumer_reads_are_released_by_their_arrivals(tmp_path):
    """All 32 consumers also read s[0]: the producer's next write of it waits on the empty
    barrier, which their arrivals complete, so it is no race."""
    a, out, _ = run_phases(phases(tmp_path, extra_read=" + s[0] * 0.0"))
    np.testing.assert_array_equal(out, a * np.float32(3.0))


def test_a_producer_that_does_not_wait_for_the_empty_slot_races(tmp_path):
    """Without the wait on the empty barrier the producer runs ahead (in the simulator it
    finishes its four phases first), and the consumer's wait for parity 0 is then one for the
    fifth phase."""
    with pytest.raises(SimulationError, match="deadlock.*phase 4"):
        run_phases(phases(tmp_path, empty_wait="pass"))


def test_a_deadlock_leads_with_the_wait_that_skipped_a_phase(tmp_path):
    """The consumer waits for the wrong parity ((i + 1) % 2): the full barrier's phase 0
    completed and nobody waited for it, so the consumer waits for phase 1, whose arrivals come
    only after it consumes. The producer's empty wait (correct) comes first in thread order;
    the report leads with the consumer's, and its caret and hint are there (both are listed)."""
    fn = phases(tmp_path, full_parity="(i + 1) % 2")
    with pytest.raises(SimulationError, match="deadlock") as e:
        run_phases(fn)
    err = e.value
    first, second = err.message.split(": ", 1)[1].split("; mbarrier ")[:2]
    assert "'bars'[0] (byte 0" in first and "waits for the phase of parity 1" in first
    assert "its phase 0 (parity 0), which completed, was waited for by no thread" in first
    assert "'bars'[1] (byte 8" in second  # the producer's wait, still listed
    assert caret_line(str(err)).endswith("(bars[0], (i + 1) % 2)")
    assert "thread 32 (warp 1, lane 0)" in first and err.message.endswith("warp 1, lane 0]")
    assert "Wait for parity 0 there" in err.hint


def test_a_deadlock_after_rounds_run_ahead_says_so(tmp_path):
    """The consumer's wait for parity (i // 2) % 2 returns at once in its second round (the
    phase before it completed), so its arrivals complete two phases of the empty barrier that
    the producer never saw. The producer's wait is their victim: the report leads with the
    wait of the threads that ran ahead (the consumer's, which returned early), with the caret
    there, and still lists the producer's, naming the rounds run ahead."""
    with pytest.raises(SimulationError, match="deadlock") as e:
        run_phases(phases(tmp_path, full_parity="(i // 2) % 2"))
    err = e.value
    first, second = err.message.split(": ", 1)[1].split("; mbarrier ")[:2]
    assert "'bars'[0] (byte 0" in first and "thread 32 (warp 1, lane 0)" in first
    assert (
        "'bars'[1] (byte 8" in second and "phases 0 to 1 completed with no thread waiting" in second
    )
    assert caret_line(str(err)).endswith("(bars[0], (i // 2) % 2)")
    assert "ran rounds ahead of its waiters" in err.hint and "returned early" in err.hint


def test_a_rounds_ahead_deadlock_leads_with_the_wait_the_arrivers_passed(tmp_path):
    """The producer's empty wait names parity i % 2, one ahead: it returns at once, so the
    producer fills two phases of the full barrier that the consumer (whose wait is correct)
    never saw. The report leads with the producer's wait, the faulty one, where the producer
    is now blocked (it was the consumer's, the victim's, which the caret then pointed at)."""
    with pytest.raises(SimulationError, match="deadlock") as e:
        run_phases(phases(tmp_path, empty_wait=f"{WAIT}(bars[1], i % 2)"))
    err = e.value
    first, second = err.message.split(": ", 1)[1].split("; mbarrier ")[:2]
    assert "'bars'[1] (byte 8" in first and "thread 0 (warp 0, lane 0)" in first
    assert (
        "'bars'[0] (byte 0" in second and "phases 0 to 1 completed with no thread waiting" in second
    )
    assert caret_line(str(err)).endswith("(bars[1], i % 2)")
    assert err.message.endswith("warp 0, lane 0]")
    assert "2 phases of mbarrier 'bars'[0] (byte 0" in err.hint  # the victim's barrier's hint
    assert "is missing" in err.hint and "returned early" in err.hint


def test_a_rounds_ahead_deadlock_with_no_arriver_waiting_names_a_missing_wait(tmp_path):
    """No empty wait at all: the producer finishes, so only the consumer (the victim) waits,
    and the report can only lead with it; its hint names a missing wait first."""
    with pytest.raises(SimulationError, match="deadlock") as e:
        run_phases(phases(tmp_path, empty_wait="pass"))
    err = e.value
    assert "phases 0 to 3 completed with no thread waiting" in err.message
    assert caret_line(str(err)).endswith("(bars[0], i % 2)")
    assert "a wait of theirs that is missing" in err.hint


def test_a_race_on_a_stage_whose_writer_arrives_names_the_wait(tmp_path):
    """The consumer reads without its wait: the writer arrived on the barrier after its
    write, so the fix is a wait on that barrier (a cta_sync in one role's branch would be a
    barrier the other role never reaches)."""
    with pytest.raises(SimulationError, match="shared-memory race") as e:
        run_pair(pair(tmp_path, wait="pass", producer_first=True))
    hint = e.value.hint
    assert "arrives on mbarrier 'bars'[0] (byte 0" in hint and "after its write at line" in hint
    assert "wait for that phase (T.cuda.mbarrier_wait on that barrier with parity 0)" in hint
    assert "T.cuda.cta_sync() between" not in hint


def test_a_race_with_a_writer_that_arrives_nowhere_keeps_the_barrier_hint(tmp_path, monkeypatch):
    """No arrive after the write (the producer arrives before it): the generic hint."""
    early = f"{ARRIVE}(bars[0])\n        " + PRODUCE.replace("\n        {arrive}", "")
    monkeypatch.setitem(globals(), "PRODUCE", early)
    with pytest.raises(SimulationError, match="shared-memory race") as e:
        run_pair(pair(tmp_path, wait="pass", producer_first=True))
    assert "T.cuda.cta_sync()" in e.value.hint and "arrives on" not in e.value.hint


def test_waiting_for_a_constant_parity_deadlocks_in_the_second_phase(tmp_path):
    """Waiting for parity 0 every time: the second wait passes at once, so the consumer runs
    ahead... and its arrivals on the empty barrier overrun its phase, or a wait never ends."""
    with pytest.raises(SimulationError, match="deadlock|race|over-arrival"):
        run_phases(phases(tmp_path, full_parity="0"))


def test_a_run_time_parity_that_is_a_phase_count_is_a_fault(tmp_path):
    """The ISA's parity is 0 or 1; ``i`` (0, 1, 2, ...) passed unmasked is refused at the
    wait where it first reaches 2, as a constant 2 is at compile time."""
    with pytest.raises(SimulationError, match="parity of the phase waited for is 2") as e:
        run_phases(phases(tmp_path, full_parity="i"))
    assert "phase & 1" in e.value.hint
    assert caret_line(str(e.value)).endswith("(bars[0], i)")


COPY = """
@T.function
def kernel(A: T.Tensor((128,), "float32"), Out: T.Tensor((128,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.linear_thread_id()
    bars = T.alloc_shared((1,), "uint64")
    s = T.alloc_shared((128,), "float32")
    if tid == 0:
        {INIT}(bars[0], 32)
    T.cuda.cta_sync()
    if tid < 32:
        T.ptx["cp.async.ca.shared.global"](s[tid * 4], A[tid * 4], 16)
        T.ptx["cp.async.commit_group"]()
        T.ptx["{arrive}"](bars[0])
        {extra}
    else:
        {wait}
        for j in range(4):
            Out[(tid - 32) * 4 + j] = s[(tid - 32) * 4 + j]
"""


def copy_kernel(tmp_path, arrive="cp.async.mbarrier.arrive.noinc.shared::cta.b64", **kw):
    fields = dict(
        INIT=INIT, arrive=arrive, **{"extra": "pass", "wait": f"{WAIT}(bars[0], 0)", **kw}
    )
    return define(COPY.format(**fields), tmp_path, "kernel")


def run_copy(fn):
    a = np.arange(128, dtype=np.float32) * 0.25
    out = np.zeros(128, dtype=np.float32)
    sim.run(tirx.compile(fn, "sim").lowered, [a, out])
    return a, out


def test_cp_async_arrive_makes_the_copied_bytes_readable_without_wait_group(tmp_path):
    a, out = run_copy(copy_kernel(tmp_path))
    np.testing.assert_array_equal(out, a)


def test_cp_async_arrive_without_the_consumers_wait_is_a_race(tmp_path):
    with pytest.raises(SimulationError, match="race|not completed"):
        run_copy(copy_kernel(tmp_path, wait="pass"))


def test_cp_async_arrive_without_noinc_does_not_count(tmp_path):
    """Without .noinc the ISA increments the pending count first: the phase still needs the
    32 ordinary arrivals, so alone it deadlocks, and with them it completes."""
    plain = "cp.async.mbarrier.arrive.shared::cta.b64"
    with pytest.raises(SimulationError, match="deadlock.*32 of 32 arrivals pending"):
        run_copy(copy_kernel(tmp_path, arrive=plain))
    a, out = run_copy(copy_kernel(tmp_path, arrive=plain, extra=f"{ARRIVE}(bars[0])"))
    np.testing.assert_array_equal(out, a)


# ------------------------------------------------------------------------------ GPU


def _on_gpu(fn, a, n):
    import torch

    exe = tirx.compile(fn, "cuda")
    ga = torch.from_numpy(a).cuda()
    gout = torch.zeros(n, dtype=torch.float32, device="cuda")
    exe(ga, gout)
    torch.cuda.synchronize()
    return gout.cpu().numpy()


@pytest.mark.gpu
@pytest.mark.parametrize("consumer", [">= 32", "< 32"])
def test_gpu_producer_consumer_equals_the_simulator(tmp_path, consumer):
    fn = pair(tmp_path, consumer=consumer)
    a, out, _ = run_pair(fn)
    np.testing.assert_array_equal(_on_gpu(fn, a, 64).view(np.uint32), out.view(np.uint32))


SPIN = (
    'done = T.alloc_local((1,), "uint32")\n        done[0] = 0\n'
    f"        while done[0] == 0:\n            {TEST}(done[0], bars[0], 0)"
)
COUNTED = f"T.cuda.warp_sync()\n        if tid == 0:\n            {ARRIVE}(bars[0], 32)"


@pytest.mark.gpu
@pytest.mark.parametrize("changes", [dict(wait=SPIN), dict(arrive=COUNTED)])
def test_gpu_spinning_test_and_counted_arrive_equal_the_simulator(tmp_path, changes):
    fn = pair(tmp_path, **changes)
    a, out, _ = run_pair(fn)
    np.testing.assert_array_equal(_on_gpu(fn, a, 64).view(np.uint32), out.view(np.uint32))


@pytest.mark.gpu
def test_gpu_phases_equal_the_simulator(tmp_path):
    fn = phases(tmp_path)
    a, out, _ = run_phases(fn)
    np.testing.assert_array_equal(_on_gpu(fn, a, 128).view(np.uint32), out.view(np.uint32))


@pytest.mark.gpu
def test_gpu_cp_async_arrive_equals_the_simulator(tmp_path):
    fn = copy_kernel(tmp_path)
    a, out = run_copy(fn)
    np.testing.assert_array_equal(_on_gpu(fn, a, 128).view(np.uint32), out.view(np.uint32))
