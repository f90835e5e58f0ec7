"""The simulator's time budget: runaway work stops in seconds, long runs report progress."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_sim_checks import expect_fault
from tests.test_sim_kernels import TX, function, gbuf, sbuf, seq, span
from tirx.ir import nodes as ir
from tirx.sim import budget as budget_module
from tirx.sim import run

I32 = ir.I32


def _spin(grid=(1, 1, 1)):
    """``while True: s[tid] = s[tid]`` - real work per iteration, never ending."""
    s = sbuf("s", (32,), "int32")
    body = seq(
        ir.Store(s, TX, TX, I32, span(2)),
        ir.While(ir.const(True), ir.Store(s, TX, ir.Load(s, TX, I32) + 1, I32, span(4)), span(3)),
    )
    return function("spin", (), body, grid=grid, allocs=(s,))


def test_while_true_stops_at_the_budget_in_seconds(capsys):
    # the message says the budget stopped it (how soon is benchmarks/sim_speed.py's to say)
    err = expect_fault(_spin(), [], "used its budget of 0.5 s", budget=0.5)
    assert err.span in (span(3), span(4)) and "TIRX_SIM_BUDGET" in err.hint
    assert "0 of 1 blocks finished" in err.message


def test_a_huge_grid_stops_at_the_budget(monkeypatch):
    monkeypatch.setenv("TIRX_SIM_BUDGET", "0.3")
    Dst = gbuf("Dst", (1,), "int32")
    one = ir.If(ir.cmp(ir.CmpOp.EQ, TX, 0), ir.Store(Dst, 0, ir.const(1), I32, span(2)))
    fn = function("huge", (Dst,), one, grid=(1 << 40, 1, 1))
    err = expect_fault(fn, [np.zeros(1, np.int32)], "budget of 0.3 s")
    assert f"of {1 << 40} blocks finished" in err.message, err.message
    monkeypatch.setenv("TIRX_SIM_BUDGET", "0")  # no limit: a short run is unaffected
    run(function("one", (Dst,), one), [np.zeros(1, np.int32)])


def test_long_runs_report_progress(monkeypatch, capsys):
    monkeypatch.setattr(budget_module, "PROGRESS_SECONDS", 0.1)
    expect_fault(_spin(), [], "budget", budget=0.45)
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("tirx.sim:")]
    assert len(lines) >= 2, lines
    assert "'spin' running" in lines[0] and "of 0.45 s" in lines[0], lines[0]


def test_budget_setting_is_read_from_the_environment(monkeypatch):
    from tirx import config

    for raw, value in (("", None), ("12.5", 12.5), ("0", 0.0), ("off", 0.0)):
        monkeypatch.setenv("TIRX_SIM_BUDGET", raw)
        assert config.sim_budget() == value, raw
    config._warn_once.cache_clear()
    monkeypatch.setenv("TIRX_SIM_BUDGET", "soon")
    with pytest.warns(RuntimeWarning, match="keeps its default budget"):
        assert config.sim_budget() is None


def test_a_budget_that_is_not_seconds_is_refused_before_the_run():
    for bad, kind, words in (("x", TypeError, "got 'x'"), (True, TypeError, "got True"),
                             (-1, ValueError, ">= 0 (0: no limit), got -1"),
                             (float("nan"), ValueError, "got nan")):  # fmt: skip
        with pytest.raises(kind, match="budget must be a number of seconds") as e:
            run(_spin(), [], budget=bad)
        assert words in str(e.value)


def test_an_unreadable_environment_budget_warns_once(monkeypatch):
    import warnings

    from tirx import config

    config._warn_once.cache_clear()
    monkeypatch.setenv("TIRX_SIM_BUDGET", "abc")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert config.sim_budget() is None and config.sim_budget() is None
    assert len(seen) == 1
    assert "TIRX_SIM_BUDGET='abc' is not a number of seconds" in str(seen[0].message)


def test_a_compiled_kernel_takes_a_budget_per_call(tmp_path):
    import tirx
    from tests.helpers import define
    from tirx.errors import SimulationError

    k = define(
        """
@T.function
def spin(A: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.lane_id()
    while A[i] >= 0:
        A[i] = A[i] + 1 - 1
""",
        tmp_path,
        "spin",
    )
    with pytest.raises(SimulationError, match="used its budget of 0.3 s"):
        tirx.compile(k, target="sim")(np.zeros(32, np.int32), budget=0.3)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(trace="yes"), "trace must be True or False, got 'yes'"),
        (dict(profile=1), "profile must be True or False, got 1"),
        (dict(stdout=5), "stdout must be a file-like object with a write method"),
    ],
)
def test_the_other_run_options_are_checked_before_the_run(kwargs, words):
    with pytest.raises(TypeError) as e:
        run(_spin(), [], budget=0.2, **kwargs)
    assert words in str(e.value)
