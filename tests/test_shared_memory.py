"""Shared-memory limits: 48 KB of static shared memory, dynamic shared memory
(``scope="shared.dyn"``) up to the architecture's opt-in maximum, and what the CUDA backend
generates and launches for it."""

from __future__ import annotations

import re

import pytest

import tirx
from tirx.errors import CompileError, TirxSyntaxError
from tirx.transform.shared_memory import STATIC_LIMIT, optin_limit

from .helpers import attach_recorder, caret_line, define

KERNEL = """
@T.function
def kernel(Out: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32{launch}))
    lane = T.cuda.lane_id()
    small = T.alloc_shared((256,), "float32")
    big = T.alloc_shared(({n},), "float32"{scope})
    big[lane] = T.float32(lane)
    small[lane] = big[lane]
    T.cuda.cta_sync()
    Out[lane] = small[lane]
"""


def kernel(tmp_path, n, scope="", launch=""):
    return define(KERNEL.format(n=n, scope=scope, launch=launch), tmp_path, "kernel")


def test_arch_limits():
    assert STATIC_LIMIT == 49152
    assert optin_limit(80) == 163 * 1024 and optin_limit(90) == 227 * 1024
    assert optin_limit(86) == 99 * 1024 and optin_limit(89) == 99 * 1024


@pytest.mark.parametrize("target", ["cuda -arch=sm_80", "sim"])
def test_static_over_48k_is_an_error_at_the_allocation(tmp_path, target):
    over = (STATIC_LIMIT - 1024) // 4 + 1  # with `small`, one element past 48 KB
    with pytest.raises(CompileError, match="beyond the 48 KB limit of static shared memory") as e:
        tirx.compile(kernel(tmp_path, over), target)
    assert caret_line(str(e.value)).startswith("big = T.alloc_shared(")
    assert 'scope="shared.dyn"' in str(e.value)  # the hint names the fix
    exe = tirx.compile(kernel(tmp_path, over - 1), target)  # exactly 48 KB: the twin
    assert exe.lowered.shared_bytes == STATIC_LIMIT


@pytest.mark.parametrize("arch, limit", [(80, 163 * 1024), (90, 227 * 1024)])
def test_dynamic_up_to_the_optin_maximum(tmp_path, arch, limit):
    fits = (limit - 1024) // 4
    exe = tirx.compile(kernel(tmp_path, fits, ', scope="shared.dyn"'), f"cuda -arch=sm_{arch}")
    assert exe.lowered.shared_bytes == limit
    assert "extern __shared__ __align__(128) unsigned char tirx_smem[];" in exe.source
    assert exe._smem == limit  # the launch asks for the whole segment
    assert re.search(r"\.extern \.shared \.align 128 \.b8 tirx_smem\[\]", exe.ptx)
    with pytest.raises(CompileError, match=f"dynamic shared memory maximum of sm_{arch}") as e:
        tirx.compile(kernel(tmp_path, fits + 1, ', scope="shared.dyn"'), f"cuda -arch=sm_{arch}")
    assert caret_line(str(e.value)).startswith("big = T.alloc_shared(")


def test_sim_agrees_on_the_dynamic_limit(tmp_path):
    # the simulator models an sm_90 block
    fits = (227 * 1024 - 1024) // 4
    exe = tirx.compile(kernel(tmp_path, fits, ', scope="shared.dyn"'), "sim")
    assert exe.lowered.shared_bytes == 227 * 1024
    with pytest.raises(CompileError, match="dynamic shared memory maximum of sm_90"):
        tirx.compile(kernel(tmp_path, fits + 1, ', scope="shared.dyn"'), "sim")


def test_small_dynamic_kernel_runs_on_the_simulator(tmp_path):
    import numpy as np

    exe = tirx.compile(kernel(tmp_path, 64, ', scope="shared.dyn"'), "sim")
    out = np.zeros(32, np.float32)
    exe(out)
    assert np.array_equal(out, np.arange(32, dtype=np.float32))


def test_launch_dynamic_bytes_checked_against_the_maximum(tmp_path):
    ok = ", dynamic_smem_bytes=100000"
    exe = tirx.compile(kernel(tmp_path, 64, launch=ok), "cuda -arch=sm_80")
    assert exe._smem == 100000 and "extern __shared__" not in exe.source
    too_much = f", dynamic_smem_bytes={163 * 1024}"  # plus 1.25 KB static: over
    with pytest.raises(CompileError, match="beyond the maximum of sm_80"):
        tirx.compile(kernel(tmp_path, 64, launch=too_much), "cuda -arch=sm_80")


def test_smem_is_the_real_tirxs_short_spelling_of_alloc_shared(tmp_path):
    """``T.smem(shape, dtype, ...)``: the same allocation, static or dynamic, same C."""
    import numpy as np

    text = KERNEL.format(n=64, scope=', scope="shared.dyn"', launch="")
    short = define(text.replace("T.alloc_shared(", "T.smem("), tmp_path, "kernel")
    long = define(text, tmp_path, "kernel")
    for target in ("cuda -arch=sm_90", "sim"):
        a, b = tirx.compile(short, target), tirx.compile(long, target)
        assert a.lowered.shared_bytes == b.lowered.shared_bytes

    def body(k):  # the kernel's C without its #line directives (two files)
        return re.sub(r"#line .*\n", "", tirx.compile(k, "cuda -arch=sm_90").source)

    assert "extern __shared__" in body(short) and body(short) == body(long)
    out = np.zeros(32, np.float32)
    tirx.compile(short, "sim")(out)
    assert np.array_equal(out, np.arange(32, dtype=np.float32))


def test_bad_scope_is_a_syntax_error(tmp_path):
    with pytest.raises(TirxSyntaxError, match='scope must be "shared" or "shared.dyn"'):
        tirx.compile(kernel(tmp_path, 64, ', scope="global"'), "sim")
    assert tirx.compile(kernel(tmp_path, 64, ', scope="shared"'), "sim").lowered.shared_bytes


def test_launch_passes_the_dynamic_size(tmp_path):
    import torch

    exe = tirx.compile(kernel(tmp_path, 30000, ', scope="shared.dyn"'), "cuda -arch=sm_90")
    recorder = attach_recorder(exe)
    raised = []
    exe._launcher.kernel.allow_dynamic_smem = raised.append  # the attribute, opted in
    exe(torch.zeros(32))
    (call,) = recorder.calls
    assert call[2] == exe.lowered.shared_bytes == 1024 + 120000
    assert raised == [1024 + 120000]


@pytest.mark.gpu
def test_dynamic_shared_memory_beyond_48k_runs_on_the_gpu(tmp_path):
    import torch

    n = (200 * 1024) // 4
    exe = tirx.compile(kernel(tmp_path, n, ', scope="shared.dyn"'), "cuda")
    out = torch.zeros(32, device="cuda")
    exe(out)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.arange(32, dtype=torch.float32))
