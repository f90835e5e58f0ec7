"""tirx.autotune (tirx/tuning.py, tirx/tuning_store.py): the choice, skipped configurations,
the simulator's rule, and the winner kept on disk across processes (a stand-in timer on the
CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import tirx
import tirx.tuning
from tirx import T
from tirx.examples.softmax import make_softmax
from tirx.tuning import TuningError, TuningWarning
from tirx.tuning_store import path_of

WARPS = [{"warps": 1}, {"warps": 3}, {"warps": 2}, {"warps": 4}]  # 3 is not a power of two


def softmax_factory(X, Y, *, warps):
    return make_softmax(*X.shape, X.dtype, warps=warps)


def _args(rows=4):
    x = torch.randn(rows, 128, generator=torch.Generator().manual_seed(0)).half()
    return x, torch.empty_like(x)


def _timer(times, calls):
    """A stand-in clock: each configuration's time from ``times`` by its warps; logs calls."""

    def timer(exe, args):
        warps = exe.lowered.launch.block[0] // 32
        calls.append(warps)
        return times[warps]

    return timer


def test_the_fastest_configuration_wins_and_failures_are_skipped_with_a_note(cache_dir):
    calls = []
    tuner = tirx.autotune(softmax_factory, configs=WARPS,
                          timer=_timer({1: 3.0, 2: 1.0, 4: 2.0}, calls))  # fmt: skip
    x, y = _args()
    with pytest.warns(TuningWarning, match=r"\{'warps': 3\} skipped: does not compile: ValueError"):
        tuner(x, y)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=1e-2, atol=1e-3)
    report = tuner.report(x, y)
    assert report.method == "timer" and report.config == {"warps": 2} and report.winner == 2
    assert calls == [1, 2, 4]
    notes = {t.config["warps"]: t.note for t in report.trials}
    assert "powers of two" in notes[3] and notes[2] is None
    assert tuner.executable(x, y).lowered.launch.block[0] == 64
    tuner(x, y)  # known now: no second sweep
    assert calls == [1, 2, 4]
    tuner(*_args(rows=8))  # another key: tuned on its own
    assert calls == [1, 2, 4, 1, 2, 4]


def test_a_configuration_that_fails_in_the_compiler_is_skipped(cache_dir):
    def factory(X, *, smem):
        @T.function
        def copy(X: T.Tensor((32,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            s = T.alloc_shared((smem,), "float32")
            s[tid] = X[tid]
            T.cuda.cta_sync()
            X[tid] = s[31 - tid] + T.float32(1)

        return copy

    tuner = tirx.autotune(factory, configs=[{"smem": 100000}, {"smem": 32}],
                          timer=lambda exe, args: 1.0)  # fmt: skip
    x = torch.zeros(32)
    with pytest.warns(TuningWarning, match="does not compile: CompileError: shared buffer"):
        tuner(x)
    assert torch.equal(x, torch.ones(32)) and tuner.best_config(x) == {"smem": 32}


def test_the_simulator_takes_the_first_configuration_that_compiles(cache_dir):
    made = []

    def factory(X, Y, *, warps):
        made.append(warps)
        return softmax_factory(X, Y, warps=warps)

    tuner = tirx.autotune(factory, configs=[{"warps": 3}, {"warps": 2}, {"warps": 4}])
    x, y = _args()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuner(x, y)
    texts = [str(w.message) for w in caught if w.category is TuningWarning]
    assert any("cannot time" in t and "{'warps': 2}" in t for t in texts), texts
    assert made == [3, 2]  # the rest is never compiled
    report = tuner.report(x, y)
    assert report.method == "first-compiles" and report.config == {"warps": 2}


def test_no_configuration_compiles(cache_dir):
    tuner = tirx.autotune(softmax_factory, configs=[{"warps": 3}, {"warps": 5}],
                          timer=lambda exe, args: 1.0)  # fmt: skip
    with pytest.warns(TuningWarning), pytest.raises(TuningError, match="no configuration"):
        tuner(*_args())


def test_the_key_changes_with_the_configuration_space(cache_dir):
    calls = []
    timer = _timer({1: 3.0, 2: 1.0, 4: 2.0}, calls)
    a = tirx.autotune(softmax_factory, configs=[{"warps": 1}, {"warps": 2}], timer=timer)
    b = tirx.autotune(softmax_factory, configs=[{"warps": 1}, {"warps": 4}], timer=timer)
    c = tirx.autotune(softmax_factory, configs=[{"warps": 2}, {"warps": 1}], timer=timer)
    again = tirx.autotune(softmax_factory, configs=[{"warps": 1}, {"warps": 2}], timer=timer)
    assert len({a.space_hash, b.space_hash, c.space_hash}) == 3
    assert again.space_hash == a.space_hash
    x, y = _args()
    k = a.key(x, y)
    assert k == (((4, 128), "float16"), ((4, 128), "float16"))
    assert path_of(a, "sim", k) != path_of(b, "sim", k)
    a(x, y)
    assert path_of(a, "sim", k).is_file() and calls == [1, 2]
    again(x, y)  # same space: read from the disk
    assert calls == [1, 2] and again.report(x, y).method == "stored"
    b(x, y)  # another space: tuned anew
    assert calls == [1, 2, 1, 4] and b.best_config(x, y) == {"warps": 4}


def test_a_damaged_record_is_tuned_again(cache_dir):
    calls = []
    timer = _timer({1: 3.0, 2: 1.0}, calls)
    configs = [{"warps": 1}, {"warps": 2}]
    tirx.autotune(softmax_factory, configs=configs, timer=timer)(*_args())
    tuner = tirx.autotune(softmax_factory, configs=configs, timer=timer)
    path = path_of(tuner, "sim", tuner.key(*_args()))
    record = json.loads(path.read_text())
    record["winner"] = 7
    path.write_text(json.dumps(record))
    tuner(*_args())
    assert calls == [1, 2, 1, 2] and json.loads(path.read_text())["winner"] == 1


def test_bad_configurations_are_named():
    with pytest.raises(TypeError, match="non-empty list"):
        tirx.autotune(softmax_factory, configs={"warps": 1})
    with pytest.raises(TypeError, match=r"configs\[1\]"):
        tirx.autotune(softmax_factory, configs=[{"warps": 1}, 2])
    with pytest.raises(TypeError, match="stored as JSON"):
        tirx.autotune(softmax_factory, configs=[{"warps": object()}])
    with pytest.raises(ValueError, match="twice"):
        tirx.autotune(softmax_factory, configs=[{"warps": 1}, {"warps": 1}])


_PROCESS = textwrap.dedent(
    """
    import json, sys, torch, tirx
    from tirx.examples.softmax import make_softmax

    mode, log = sys.argv[1], sys.argv[2]

    def timer(exe, args):
        if mode == "second":
            raise AssertionError("the second process must not time anything")
        warps = exe.lowered.launch.block[0] // 32
        with open(log, "a") as f:
            f.write(f"{warps}\\n")
        return {1: 3.0, 2: 1.0, 4: 2.0}[warps]

    @tirx.autotune(configs=[{"warps": 1}, {"warps": 2}, {"warps": 4}], timer=timer)
    def softmax(X, Y, *, warps):
        if X.dtype not in {"float16", "bfloat16", "float32"}:  # a frozenset in the code's hash
            raise TypeError(X.dtype)
        return make_softmax(*X.shape, X.dtype, warps=warps)

    x = torch.randn(4, 128).half()
    y = torch.empty_like(x)
    softmax(x, y)
    assert torch.allclose(y.float(), torch.softmax(x.float(), -1), atol=1e-3)
    r = softmax.report(x, y)
    print(json.dumps({"method": r.method, "config": r.config}))
    """
)


SEEDS = {"first": "1", "second": "2"}  # these order the frozenset in _PROCESS differently


def test_the_winner_persists_across_processes(tmp_path, cache_dir):
    script, log = tmp_path / "tune.py", tmp_path / "timed.log"
    script.write_text(_PROCESS)

    def run(mode):
        # another hash seed in each process: the factory's code hash must not depend on it
        env = {**os.environ, "TIRX_CACHE_DIR": str(cache_dir), "PYTHONHASHSEED": SEEDS[mode]}
        out = subprocess.run([sys.executable, str(script), mode, str(log)], env=env,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    assert run("first") == {"method": "timer", "config": {"warps": 2}}
    assert log.read_text().split() == ["1", "2", "4"]
    assert run("second") == {"method": "stored", "config": {"warps": 2}}
    assert log.read_text().split() == ["1", "2", "4"]


@pytest.mark.gpu
def test_tuning_on_the_gpu_times_with_bench(cache_dir):
    tuner = tirx.autotune(softmax_factory, configs=[{"warps": w} for w in (1, 2, 4, 8)],
                          rep=10, progress=False)  # fmt: skip
    x = torch.randn(4096, 1024, device="cuda").half()
    y = torch.empty_like(x)
    tuner(x, y)
    report = tuner.report(x, y)
    assert report.method == "timed" and all(t.ms > 0 for t in report.trials)
    assert report.trials[report.winner].ms == min(t.ms for t in report.trials)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=1e-2, atol=1e-3)


def test_a_progress_bar_when_asked(cache_dir, capsys):
    tuner = tirx.autotune(softmax_factory, configs=[{"warps": 1}, {"warps": 2}],
                          timer=lambda exe, args: 1.0, progress=True)  # fmt: skip
    tuner(*_args())
    err = capsys.readouterr().err
    assert "tuning softmax_factory on sim" in err and "/2 " in err
    quiet = tirx.autotune(softmax_factory, configs=[{"warps": 1}, {"warps": 4}],
                          timer=lambda exe, args: 1.0)  # fmt: skip
    quiet(*_args())  # not a terminal, not a notebook: no bar
    assert "tuning" not in capsys.readouterr().err


def test_a_timer_that_gives_no_time_skips_the_configuration_and_nan_never_wins(cache_dir):
    # a NaN first would have won every comparison (nan < x is false, but best_ms started at it)
    times = {1: float("nan"), 2: 2.0, 4: 1.0}
    tuner = tirx.autotune(softmax_factory, configs=[WARPS[0], WARPS[2], WARPS[3]],
                          timer=_timer(times, []))  # fmt: skip
    x, y = _args()
    with pytest.warns(TuningWarning, match=r"\{'warps': 1\} skipped: has no time: .*nan"):
        tuner(x, y)
    assert tuner.report(x, y).config == {"warps": 4}


@pytest.mark.parametrize("answer", ["fast", None, "1.5", True])  # "1.5" and True ran as times
def test_a_timer_that_returns_no_number_is_named(cache_dir, answer):
    tuner = tirx.autotune(softmax_factory, configs=WARPS[:1], timer=lambda exe, args: answer)
    with pytest.raises(TypeError, match=rf"the timer returned {answer!r} for \{{'warps': 1\}}"):
        tuner(*_args())


def test_a_timer_may_answer_with_a_numpy_number_or_a_one_element_tensor(cache_dir):
    import numpy as np
    import torch

    for answer in (np.float32(1.5), torch.tensor(1.5)):
        tuner = tirx.autotune(softmax_factory, configs=WARPS[:2],
                              timer=lambda exe, args, a=answer: a)  # fmt: skip
        tuner(*_args())
        assert tuner.report(*_args()).config == WARPS[0]


def test_a_key_that_returns_a_list_keys_as_a_tuple_and_an_unhashable_one_is_named(cache_dir):
    tuner = tirx.autotune(softmax_factory, configs=WARPS[:1], timer=_timer({1: 1.0}, []),
                          key=lambda x, y: [x.shape[0], [1, 2]])  # fmt: skip
    x, y = _args()
    tuner(x, y)  # (was: TypeError: unhashable type: 'list', from inside the tuner)
    assert tuner.key(x, y)[-1] == (x.shape[0], (1, 2))

    def by_dict(x, y):
        return {"rows": x.shape[0]}

    tuner = tirx.autotune(
        softmax_factory, configs=WARPS[:1], timer=_timer({1: 1.0}, []), key=by_dict
    )
    with pytest.raises(TypeError, match=r"key=by_dict returned \{'rows': \d+\}, which cannot key"):
        tuner(x, y)


def test_a_call_the_factory_cannot_take_is_told_once(cache_dir):
    tuner = tirx.autotune(softmax_factory, configs=WARPS, timer=_timer({}, []))
    x, y = _args()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not one warning per configuration
        with pytest.raises(TypeError, match=r"called with 1 argument\(s\), which the factory"):
            tuner(x)
        with pytest.raises(TypeError, match="too many positional"):
            tuner(x, y, y)


def test_the_choice_is_kept_per_device(cache_dir, monkeypatch):
    # the simulator first (a CPU smoke test), then "two GPU models" in the same process: each
    # device is tuned anew, in memory and on disk, as its name goes into the record's hash
    device, calls = ["sim"], []
    times = {"sim": {1: 1.0, 2: 2.0, 4: 3.0}, "GPU A": {1: 3.0, 2: 1.0, 4: 2.0},
             "GPU B": {1: 3.0, 2: 2.0, 4: 1.0}}  # fmt: skip

    def timer(exe, args):
        calls.append(device[0])
        return times[device[0]][exe.lowered.launch.block[0] // 32]

    monkeypatch.setattr(tirx.tuning, "_device_name", lambda args: device[0])
    tuner = tirx.autotune(softmax_factory, configs=[WARPS[0], WARPS[2], WARPS[3]], timer=timer)
    x, y = _args()
    assert tuner.best_config(x, y) == {"warps": 1} and calls == ["sim"] * 3
    for sweeps, (name, warps) in enumerate([("GPU A", 2), ("GPU B", 4)], start=2):
        device[0] = name
        report = tuner.report(x, y)
        assert (report.device, report.method, report.config) == (name, "timer", {"warps": warps})
        assert calls[-3:] == [name] * 3 and len(calls) == 3 * sweeps
    device[0] = "GPU A"
    assert tuner.best_config(x, y) == {"warps": 2} and len(calls) == 9  # remembered per device
    paths = {path_of(tuner, d, tuner.key(x, y)) for d in times}
    assert len(paths) == 3 and all(p.is_file() for p in paths)


def test_a_record_nested_too_deeply_is_tuned_again(cache_dir):
    calls = []
    tuner = tirx.autotune(softmax_factory, configs=WARPS[:1], timer=_timer({1: 1.0}, calls))
    path = path_of(tuner, "sim", tuner.key(*_args()))
    path.parent.mkdir(parents=True)
    path.write_text("[" * 100000 + "]" * 100000)  # json.loads: RecursionError
    assert tuner.report(*_args()).method == "timer" and calls == [1]
    assert json.loads(path.read_text())["winner"] == 0


def test_a_stored_winner_that_no_longer_builds_is_dropped_and_tuned_again(cache_dir):
    broken = set()  # the warps the factory no longer builds (it was edited since)

    def factory(X, Y, *, warps):
        if warps in broken:
            raise ValueError(f"warps={warps} is no longer supported")
        return make_softmax(*X.shape, X.dtype, warps=warps)

    configs = [{"warps": 1}, {"warps": 2}]
    x, y = _args()
    first = tirx.autotune(factory, configs=configs, timer=_timer({1: 1.0, 2: 2.0}, []))
    assert first.best_config(x, y) == {"warps": 1}
    path = path_of(first, "sim", first.key(x, y))
    broken.add(1)
    again = tirx.autotune(factory, configs=configs, timer=_timer({1: 1.0, 2: 2.0}, []))
    with pytest.warns(TuningWarning) as caught:
        again(x, y)
    texts = [str(w.message) for w in caught]
    assert any("stored choice {'warps': 1}" in t and "no longer builds (ValueError: warps=1" in t
               and "record is dropped" in t for t in texts), texts  # fmt: skip
    assert again.report(x, y).method == "timer" and again.best_config(x, y) == {"warps": 2}
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=1e-2, atol=1e-3)
    assert json.loads(path.read_text())["winner"] == 1
    broken.add(2)  # nothing builds now: the record is gone, not left to fail every process
    last = tirx.autotune(factory, configs=configs, timer=_timer({1: 1.0, 2: 2.0}, []))
    with pytest.warns(TuningWarning), pytest.raises(TuningError, match="no configuration"):
        last(x, y)
    assert not path.exists()


def _factory_of(scale):
    def factory(X, Y, *, warps):
        return make_softmax(*X.shape, X.dtype, warps=warps * scale)

    return factory


def test_the_record_is_kept_per_factory_code(cache_dir):
    def edited(X, Y, *, warps):  # the same name and space, another body
        return make_softmax(*X.shape, X.dtype, warps=warps * 2)

    configs, calls = [{"warps": 1}, {"warps": 2}], []
    timer = _timer({1: 2.0, 2: 1.0, 4: 3.0}, calls)
    first, same, other = (tirx.autotune(f, configs=configs, timer=timer, name="softmax")
                          for f in (_factory_of(1), _factory_of(2), edited))  # fmt: skip
    assert first.code_hash == same.code_hash != other.code_hash
    assert tirx.autotune(print, configs=configs).code_hash is None  # no Python code to hash
    x, y = _args()
    assert first.best_config(x, y) == {"warps": 2} and calls == [1, 2]
    assert same.report(x, y).method == "stored"  # the same code (a closure's values aside)
    assert path_of(first, "sim", first.key(x, y)) != path_of(other, "sim", other.key(x, y))
    assert other.report(x, y).method == "timer" and other.best_config(x, y) == {"warps": 1}
    assert calls == [1, 2, 2, 4]


def test_tuple_values_reach_the_factory_as_tuples(cache_dir):
    seen = []

    def factory(X, Y, *, shape):
        seen.append(shape)
        warps_per_row, warps = shape
        return make_softmax(*X.shape, X.dtype, warps=warps, warps_per_row=warps_per_row)

    configs = [{"shape": (1, 4)}, {"shape": (1, 2)}]
    first = tirx.autotune(factory, configs=configs, timer=lambda exe, args: 1.0)
    x, y = _args()
    first(x, y)
    assert seen == [(1, 4), (1, 2)] and first.best_config(x, y) == {"shape": (1, 4)}
    record = json.loads(path_of(first, "sim", first.key(x, y)).read_text())
    assert record["config"] == {"shape": [1, 4]}  # JSON has lists only
    again = tirx.autotune(factory, configs=configs, timer=lambda exe, args: 1.0)
    again(x, y)
    assert again.report(x, y).method == "stored" and again.best_config(x, y) == {"shape": (1, 4)}
    assert seen[-1] == (1, 4) and type(seen[-1]) is tuple
