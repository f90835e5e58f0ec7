"""The simulator's time budget: runaway work stops in seconds, long runs report progress."""

from __future__ import annotations

import numpy as np

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

    for raw, value in (("", None), ("12.5", 12.5), ("0", 0.0), ("off", 0.0), ("soon", None)):
        monkeypatch.setenv("TIRX_SIM_BUDGET", raw)
        assert config.sim_budget() == value, raw
