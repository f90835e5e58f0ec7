"""What ``tirx.compile`` reports about its own time, and what it leaves alone: the stage timings
add up to the call's wall time, and a compile for a named arch never asks the GPU anything
(the driver's bindings are not even imported) until a launch. (On a GPU machine a cold one
starts the driver's initialization beside the lowering, as NVRTC's first compile would:
tests/test_driver_init.py.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tirx
from tirx.examples.warp_matmul import warp_matmul

ROOT = Path(__file__).resolve().parents[1]

CHILD = """\
import json, sys, time
import tirx
from tirx.examples.warp_matmul import warp_matmul
t0 = time.perf_counter()
exe = tirx.compile(warp_matmul, target=sys.argv[1])
wall = (time.perf_counter() - t0) * 1e3
tirx_driver = sys.modules.get("tirx.backend.cuda.driver")
probed = tirx_driver is not None and tirx_driver.driver_probed()
print(json.dumps({"wall": wall, "timings": exe.timings, "cache": exe.cache,
                  "driver": "cuda.bindings.driver" in sys.modules, "probed": probed}))
"""


def compile_in_a_fresh_process(target: str, cache_dir) -> dict:
    env = dict(os.environ, TIRX_CACHE_DIR=str(cache_dir))
    env.pop("TIRX_TARGET", None)
    out = subprocess.run([sys.executable, "-c", CHILD, target], capture_output=True, text=True,
                         env=env, check=True, cwd=ROOT)  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])


def call_ms(timings: dict) -> float:
    return sum(v for k, v in timings.items() if k != "parse")


@pytest.mark.parametrize("target", ["cuda -arch=sm_90", "sim"])
def test_the_stages_add_up_to_the_calls_wall_time(tmp_path, target):
    for expected in ("miss", "hit"):  # cold, then warm from the disk caches
        got = compile_in_a_fresh_process(target, tmp_path)
        timings = got["timings"]
        assert got["cache"] == expected or target == "sim"
        assert "other" in timings and timings["other"] >= 0
        # everything but parse (done at @T.function, before the call) is inside the call
        assert call_ms(timings) <= got["wall"] < call_ms(timings) + 0.5, timings


def test_a_repeat_compile_adds_up_too():
    tirx.compile(warp_matmul, target="sim")
    again = tirx.compile(warp_matmul, target="sim")
    assert again.cache == "hit" and again.timings["memo"] > 0
    assert again.timings["other"] >= 0 and again.timings["lower"] == 0
    assert call_ms(again.timings) < 5


def test_a_named_arch_leaves_the_driver_alone(tmp_path):
    cold = compile_in_a_fresh_process("cuda -arch=sm_90", tmp_path)
    warm = compile_in_a_fresh_process("cuda -arch=sm_90", tmp_path)
    assert (cold["cache"], warm["cache"]) == ("miss", "hit")
    # neither imports the driver's bindings (NVRTC is reached through its C API) nor asks the
    # driver for a device
    assert not cold["probed"] and not warm["probed"]
    assert not cold["driver"] and not warm["driver"]
    assert "load" not in warm["timings"]  # left to the first launch
    probed = compile_in_a_fresh_process("cuda", tmp_path)  # the arch from the GPU: probed
    assert probed["probed"] and probed["driver"]


def test_only_a_probed_arch_is_marked_so():
    named = tirx.Target.parse("cuda -arch=sm_90")
    assert named.arch_given and tirx.Target("cuda", "sm_90").arch_given
    probed = tirx.Target.parse("cuda")
    assert not probed.arch_given
    # the same code either way: one memo entry, one cache key
    assert tirx.Target.parse(f"cuda -arch={probed.arch}") == probed
    assert "arch_given" not in repr(named)


@pytest.mark.gpu
def test_a_named_arch_loads_at_the_first_launch_on_the_gpu(tmp_path):
    import torch

    from tirx.backend.cuda.driver import device_arch

    arch = device_arch(0)
    tirx.clear_cache()
    exe = tirx.compile(warp_matmul, target=f"cuda -arch={arch}")
    assert "load" not in exe.timings and exe._launcher is None
    a = torch.randn(16, 16, dtype=torch.float16, device="cuda")
    b = torch.randn(8, 16, dtype=torch.float16, device="cuda")
    out = torch.empty(16, 8, device="cuda")
    exe(a, b, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a.float() @ b.float().T, rtol=2e-4, atol=2e-4)
    assert exe._launcher is not None
    probed = tirx.compile(warp_matmul, target="cuda")  # probed arch: loaded at compile time
    assert probed.cache == "hit"
    cold = compile_in_a_fresh_process(f"cuda -arch={arch}", tmp_path)
    warm = compile_in_a_fresh_process(f"cuda -arch={arch}", tmp_path)
    assert not cold["probed"] and not warm["probed"] and not warm["driver"]


# ------------------------------------------------------------------------ make bench


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_bench_runs_the_cpu_benchmarks_into_the_results():
    out = subprocess.run(["make", "-n", "bench", "PY=python"], capture_output=True, text=True,
                         cwd=ROOT, check=True)  # fmt: skip
    scripts = list(dict.fromkeys(re.findall(r"python (benchmarks/\w+\.py)", out.stdout)))
    assert scripts == ["benchmarks/compile.py", "benchmarks/launch.py",
                       "benchmarks/launch_parts.py", "benchmarks/sim_speed.py"]  # fmt: skip
    for script in scripts:
        assert (ROOT / script).exists()
    # each rewrites its current file by its fixed name in benchmarks/results/, not a dated one
    assert out.stdout.count("--results-dir benchmarks/results") == 4
    assert "--out" not in out.stdout and not re.search(r"\d{4}-\d{2}-\d{2}", out.stdout)
