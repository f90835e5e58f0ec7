"""``T.cuda.LaunchConfig(grid="sms")``: one block per multiprocessor, the count known when the
kernel is launched. ``T.cuda.grid_dim("x")`` is that count: ``gridDim.x`` in the CUDA, the
target's ``sms`` (default 132, the H200's) on the simulator. The launcher sizes the grid from
the device (or ``sms=``), the simulator when it compiles; a mistyped grid word is refused at
the user's line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tirx
from tirx import sim
from tirx.errors import LaunchError, SimulationError, TirxError, TirxSyntaxError
from tirx.target import SIM_SMS, Target

from .helpers import attach_recorder, caret_line, define

GRID = """
@T.function
def sizes(Out: T.Tensor((4,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=32))
    bx = T.cuda.block_idx("x")
    if T.cuda.lane_id() == 0 and bx == 0:
        Out[0] = T.cuda.grid_dim("x")
        Out[1] = T.cuda.grid_dim("y")
    if T.cuda.lane_id() == 0:
        T.cuda.atomic_add(T.address_of(Out[2]), 1)
        T.cuda.atomic_add(T.address_of(Out[3]), bx)
"""


def sizes(tmp_path, grid='"sms"'):
    return define(GRID.replace("GRID", grid), tmp_path, "sizes")


def run_sim(k, **kw):
    out = np.zeros(4, np.int32)
    tirx.compile(k, "sim", **kw)(out)
    return out


def test_the_simulator_takes_132_multiprocessors_unless_told(tmp_path):
    k = sizes(tmp_path)
    assert SIM_SMS == 132
    blocks = run_sim(k)
    assert blocks.tolist() == [132, 1, 132, sum(range(132))]
    assert run_sim(k, sms=5).tolist() == [5, 1, 5, 10]
    out = np.zeros(4, np.int32)
    exe = tirx.compile(k, "sim -sms=3")
    exe(out)
    assert out.tolist() == [3, 1, 3, 3] and exe.lowered.launch.grid == (3, 1, 1)
    assert exe.launch_grid() == (3, 1, 1)  # as the cuda executable says it (persistent.md)
    assert str(exe.target) == "sim -sms=3" and Target.parse(str(exe.target)) == exe.target


def test_sms_with_more_rows(tmp_path):
    k = sizes(tmp_path, '("sms", 2)')
    assert run_sim(k, sms=4).tolist() == [4, 2, 8, 2 * sum(range(4))]


def test_the_cuda_reads_grid_dim_at_run_time(tmp_path):
    exe = tirx.compile(sizes(tmp_path, '("sms", 2)'), "cuda -arch=sm_90")
    assert "Out[0] = ((int)gridDim.x);" in exe.source
    assert "Out[1] = 2;" in exe.source  # y is fixed: a constant
    assert 'LaunchConfig(grid=("sms", 2, 1)' in exe.script()
    assert 'LaunchConfig(grid="sms", block=' in tirx.compile(sizes(tmp_path), "sim").script()


def test_the_launcher_sizes_the_grid(tmp_path):
    exe = tirx.compile(sizes(tmp_path), "cuda -arch=sm_90", sms=7)
    rec = attach_recorder(exe)
    exe(torch.zeros(4, dtype=torch.int32))
    assert rec.calls[0][:2] == ((7, 1, 1), (32, 1, 1)) and exe.launch_grid() == (7, 1, 1)
    fixed = tirx.compile(sizes(tmp_path, "(3, 2)"), "cuda -arch=sm_90")
    assert fixed.launch_grid() == (3, 2, 1)


def test_without_a_gpu_or_sms_the_launch_names_what_is_missing(tmp_path):
    from tirx.backend.cuda.driver import gpu_count

    if gpu_count():
        pytest.skip("a GPU is visible: it gives the count")
    exe = tirx.compile(sizes(tmp_path), "cuda -arch=sm_90")
    with pytest.raises(LaunchError, match="no CUDA GPU is visible to count them") as info:
        attach_recorder(exe)
    assert "sms=132" in info.value.hint


def test_a_saved_kernel_is_sized_where_it_is_loaded(tmp_path):
    import json
    import zipfile

    exe = tirx.compile(sizes(tmp_path, '("sms", 2)'), "cuda -arch=sm_90", sms=7)
    path = exe.save(tmp_path / "sizes.tirx")
    launch = json.loads(zipfile.ZipFile(path).read("manifest.json"))["launch"]
    assert launch["grid"] == [0, 2, 1] and launch["sms_grid"] is True  # not the saver's 7
    loaded = tirx.load(path)
    assert loaded.lowered.launch == exe.lowered.launch
    loaded.target = Target.parse("cuda -arch=sm_90 -sms=5")  # as a GPU with 5 would count
    assert loaded.launch_grid() == (5, 2, 1)


def test_sms_is_a_positive_int(tmp_path):
    for bad in (0, -1, 2.5, True):
        with pytest.raises(TirxError, match="sms must be a positive int"):
            tirx.compile(sizes(tmp_path), "sim", sms=bad)
    with pytest.raises(TirxError, match="bad target option '-sms=x'"):
        tirx.compile(sizes(tmp_path), "sim -sms=x")
    with pytest.raises(TirxError, match="takes no options but -sms=N"):
        tirx.compile(sizes(tmp_path), "sim -arch=sm_90")


@pytest.mark.parametrize("grid", ['"SMs"', '(2, "sms")', '("sms", "sms")', '"all"'])
def test_a_grid_word_other_than_sms_as_x_is_refused(tmp_path, grid):
    with pytest.raises(TirxSyntaxError, match="the one word a grid takes is 'sms'") as info:
        sizes(tmp_path, grid)
    assert caret_line(str(info.value)).startswith("T.device_entry(")
    assert 'grid="sms" launches one block per multiprocessor' in info.value.hint


def test_each_sms_count_is_its_own_executable(tmp_path):
    k = sizes(tmp_path)
    a, b = tirx.compile(k, "sim", sms=4), tirx.compile(k, "sim", sms=5)
    assert a.lowered.launch.grid == (4, 1, 1) and b.lowered.launch.grid == (5, 1, 1)
    assert tirx.compile(k, "sim", sms=4).cache == "hit"


def test_the_simulator_refuses_a_grid_it_was_not_given(tmp_path):
    lowered = tirx.compile(sizes(tmp_path), "cuda -arch=sm_90").lowered
    assert lowered.launch.sms_grid
    with pytest.raises(SimulationError, match='has grid="sms"'):
        sim.run(lowered, [np.zeros(4, np.int32)])
    out = np.zeros(4, np.int32)
    from dataclasses import replace

    sim.run(replace(lowered, launch=lowered.launch.resolved(2)), [out])
    assert out.tolist() == [2, 1, 2, 1]


@pytest.mark.gpu
def test_gpu_grid_is_the_multiprocessor_count(tmp_path):
    from tirx.backend.cuda.driver import multiprocessor_count

    sms = multiprocessor_count(0)
    k = sizes(tmp_path, '("sms", 2)')
    out = torch.zeros(4, dtype=torch.int32, device="cuda")
    exe = tirx.compile(k, "cuda")
    exe(out)
    torch.cuda.synchronize()
    assert out.cpu().tolist() == [sms, 2, 2 * sms, 2 * sum(range(sms))]
    assert out.cpu().tolist() == run_sim(k, sms=sms).tolist()
    small = torch.zeros(4, dtype=torch.int32, device="cuda")
    tirx.compile(k, "cuda", sms=3)(small)  # an explicit count overrides the device's
    torch.cuda.synchronize()
    assert small.cpu().tolist() == [3, 2, 6, 6]
