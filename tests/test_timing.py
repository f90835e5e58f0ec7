"""tirx.bench and its method (tirx/timing.py): on the CPU with a stand-in clock, on the GPU for
real."""

from __future__ import annotations

import re
import statistics

import pytest
import torch

import tirx
from tirx.examples.softmax import make_softmax
from tirx.timing import BenchResult, TimingError, measure


class VirtualClock:
    """A timer whose time moves only when the timed call runs (by the next of ``durations``,
    then the last one again); it logs what happens, in order."""

    flush_l2 = True

    def __init__(self, durations):
        self.now, self.durations, self.log = 0.0, list(durations), []

    def call(self):
        step = self.durations.pop(0) if len(self.durations) > 1 else self.durations[0]
        self.now += step
        self.log.append("call")

    def flush(self):
        self.log.append("flush")

    def event(self):
        self.log.append("event")
        return self.now

    def elapsed(self, start, end):
        return end - start

    def synchronize(self):
        self.log.append("sync")


def test_warmup_and_sample_counts_follow_the_estimate():
    clock = VirtualClock([1.0])  # every call takes 1 ms
    result = measure(clock.call, clock, warmup=7, rep=30)
    assert result.warmup_calls == 7
    assert len(result.samples_ms) == 30
    assert result.median_ms == 1.0 and result.min_ms == 1.0
    # one first call, five for the estimate, the warm-up, then the samples
    assert clock.log.count("call") == 1 + 5 + 7 + 30


def test_every_sample_is_flush_event_call_event_and_one_sync_reads_them():
    clock = VirtualClock([0.5])
    measure(clock.call, clock, warmup=1, rep=5)
    tail = clock.log[clock.log.index("flush") :]
    assert tail == ["flush", "event", "call", "event"] * 10 + ["sync"]  # min_samples 10


def test_the_median_is_of_the_samples_alone():
    # first call and estimate: 6 calls of 100 ms; warm-up 1 call; samples: 1..11 ms, shuffled
    samples = [5.0, 1.0, 9.0, 3.0, 11.0, 7.0, 2.0, 10.0, 4.0, 8.0, 6.0]
    clock = VirtualClock([100.0] * 7 + samples)
    result = measure(clock.call, clock, warmup=1, rep=1, min_samples=11)
    assert sorted(result.samples_ms) == sorted(samples)
    assert result.median_ms == statistics.median(samples) == 6.0
    assert result.min_ms == 1.0 and result.max_ms == 11.0
    assert result.percentile(0) == 1.0 and result.percentile(100) == 11.0
    assert result.percentile(25) == 3.5


def test_sample_count_is_capped():
    clock = VirtualClock([0.001])
    result = measure(clock.call, clock, warmup=0, rep=100, max_samples=50)
    assert len(result.samples_ms) == 50 and result.warmup_calls == 1


def test_result_text_and_summary():
    r = BenchResult("k", (0.010, 0.012, 0.011), 3, True)
    assert str(r).startswith("k: median 11.00 us (min 10.00 us")
    assert r.summary()["samples"] == 3 and r.summary()["median_ms"] == pytest.approx(0.011)
    with pytest.raises(ValueError, match="q must be"):
        r.percentile(101)


def test_bad_arguments_are_named():
    clock = VirtualClock([1.0])
    with pytest.raises(ValueError, match="warmup"):
        measure(clock.call, clock, warmup=-1)
    with pytest.raises(ValueError, match="min_samples"):
        measure(clock.call, clock, min_samples=0)
    with pytest.raises(TypeError, match="fn must be"):
        tirx.bench(42)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(warmup=float("nan")), "warmup must be a finite number of milliseconds >= 0, got nan"),
        (dict(rep=float("inf")), "rep must be a finite number"),
        (dict(rep=True), "rep must be a finite number"),
        (dict(min_samples=None), "min_samples must be an int, got None"),
        (dict(min_samples=2.5), "min_samples must be an int, got 2.5"),
        (dict(max_samples="9"), "max_samples must be an int"),
    ],
)
def test_counts_that_are_not_numbers_are_refused_before_any_call(kwargs, words):
    clock = VirtualClock([1.0])
    with pytest.raises(ValueError, match=re.escape(words)):
        measure(clock.call, clock, **kwargs)
    assert clock.log == []  # nothing ran
    with pytest.raises(ValueError, match=re.escape(words)):  # before the GPU is asked
        tirx.bench(lambda: None, **kwargs)


def test_the_simulator_cannot_time():
    exe = tirx.compile(make_softmax(4, 128), target="sim")
    x = torch.randn(4, 128).half()
    with pytest.raises(TimingError, match="simulator, which cannot time"):
        tirx.bench(exe, x, torch.empty_like(x))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_no_gpu_no_timing():
    with pytest.raises(TimingError, match="no CUDA GPU"):
        tirx.bench(lambda: None)


@pytest.mark.gpu
def test_bench_on_the_gpu():
    exe = tirx.compile(make_softmax(4096, 1024), target="cuda")
    x = torch.randn(4096, 1024, device="cuda").half()
    y = torch.empty_like(x)
    r = tirx.bench(exe, x, y, rep=20)
    assert len(r.samples_ms) >= 10 and 0 < r.min_ms <= r.median_ms <= r.max_ms
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=1e-2, atol=1e-3)
    # 8 MB in and 8 MB out: over a microsecond even at the H200's full bandwidth
    assert r.median_ms > 0.001
    unflushed = tirx.bench(exe, x, y, rep=20, flush_l2=False)
    assert not unflushed.flushed_l2 and r.flushed_l2
