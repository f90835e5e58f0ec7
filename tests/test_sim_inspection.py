"""A simulator executable shows the CUDA, PTX and SASS of the program it runs (the README's
``exe.source`` / ``.ptx`` / ``.sass`` on a machine without a GPU): built with NVRTC for the
simulator's arch the first time one is read, never by ``tirx.compile`` itself."""

from __future__ import annotations

import tirx
from tirx import T
from tirx.backend.cuda import build as cuda_build


@T.function
def doubled(X: T.Tensor((32,), "int32"), Out: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.thread_idx("x")
    Out[i] = X[i] * 2


def test_the_code_is_built_on_first_read_only(cache_dir, monkeypatch):
    builds = []
    real_build = cuda_build.build

    def counting_build(*args, **kw):
        builds.append(args[2])  # the target
        return real_build(*args, **kw)

    monkeypatch.setattr(cuda_build, "build", counting_build)
    exe = tirx.compile(doubled, target="sim")
    assert builds == [] and "nvrtc" not in exe.timings and "codegen" not in exe.timings
    source = exe.source
    assert [str(t) for t in builds] == ["cuda -arch=sm_90"]  # the arch the simulator models
    assert 'extern "C" __global__' in source and "doubled" in source
    assert ".target sm_90" in exe.ptx
    exe.sass  # noqa: B018 - reading it builds nothing more
    assert len(builds) == 1


def test_the_code_is_the_cuda_targets(cache_dir):
    sim = tirx.compile(doubled, target="sim")
    cuda = tirx.compile(doubled, target="cuda -arch=sm_90")
    assert sim.source == cuda.source and sim.ptx == cuda.ptx
    assert sim.sass == cuda.sass  # None where no disassembler is installed
    assert sim.cuda_build().lowered is sim.lowered  # one lowering, shared


def test_the_simulator_still_runs_it(cache_dir):
    import torch

    exe = tirx.compile(doubled, target="sim")
    x = torch.arange(32, dtype=torch.int32)
    out = torch.empty(32, dtype=torch.int32)
    assert exe.source  # the build for the code does not disturb the run
    exe(x, out)
    assert torch.equal(out, x * 2)
