"""Thread-block clusters before the simulator: ``cluster=`` of ``T.cuda.LaunchConfig`` and its
checks, the cluster registers (``T.cuda.cluster_cta_id`` ... ``T.cuda.mov_sreg``), the cluster
family's forms (barrier.cluster, mapa, ld/st.shared::cluster) and the multicast tensor load --
their lowering checks at the user's line, golden CUDA, NVRTC's SASS for sm_90a (UCGABAR,
UTMALDG.MULTICAST) -- and the launch through ``cuLaunchKernelEx`` with the cluster attribute
(recorded without a GPU; run on one in the GPU tests)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tirx
from tirx.errors import CompileError, ContractError, TirxError, TirxSyntaxError

from .cluster_kernels import (
    MC,
    exchange_expected,
    exchange_kernel,
    multicast_expected,
    multicast_kernel,
    push_expected,
    push_kernel,
    registers_expected,
    registers_kernel,
    remote_arrive_kernel,
)
from .helpers import caret_line, define

SM90 = "cuda -arch=sm_90"

LAUNCH = """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid={grid}, block=32, cluster={cluster}))
    Out[T.cuda.thread_idx("x")] = {value}
"""


def _launch(tmp_path, grid="4", cluster="2", value="1"):
    return define(LAUNCH.format(grid=grid, cluster=cluster, value=value), tmp_path, "kernel")


# ------------------------------------------------------------------------------ launch


@pytest.mark.parametrize(
    "grid, cluster, message, hint",
    [
        ("16", "16", "a cluster of 16 blocks (16, 1, 1): the portable limit is 8", "at most 8"),
        ("(4, 4)", "(4, 4)", "a cluster of 16 blocks (4, 4, 1)", "cluster=(2, 1, 1)"),
        ("6", "4", "grid x is 6, not a multiple of the cluster's x (4)", "multiple of 4"),
        ("(4, 3)", "(2, 2)", "grid y is 3, not a multiple of the cluster's y (2)", "whole number"),
        ("4", "0", "cluster entries must be positive ints", None),
        ("4", '"2"', "cluster must be an int or a tuple of 1 to 3 ints", None),
    ],
)
def test_cluster_shapes_are_checked_at_the_users_line(tmp_path, grid, cluster, message, hint):
    with pytest.raises(TirxSyntaxError) as e:
        _launch(tmp_path, grid, cluster)
    msg = str(e.value)
    assert message in msg
    assert "T.device_entry(launch=T.cuda.LaunchConfig(" in caret_line(msg)
    if hint:
        assert hint in msg


def test_a_cluster_needs_sm_90(tmp_path):
    k = _launch(tmp_path)
    with pytest.raises(CompileError) as e:
        tirx.compile(k, target="cuda -arch=sm_80")
    assert "launched in clusters of (2, 1, 1) blocks, which need sm_90" in str(e.value)
    exe = tirx.compile(k, target=SM90)
    assert exe.lowered.launch.cluster == (2, 1, 1)
    assert "cluster=(2, 1, 1)" in exe.script()


def test_the_source_says_how_the_kernel_is_launched(tmp_path):
    src = tirx.compile(_launch(tmp_path, "(4, 2)", "(2, 2)"), target=SM90).source
    assert (
        "// launched in clusters of 2x2x1 blocks: cuLaunchKernelEx with "
        "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION"
    ) in src
    assert "__cluster_dims__" not in src  # the shape travels with the launch
    plain = tirx.compile(_launch(tmp_path, cluster="None"), target=SM90).source
    assert "launched in clusters" not in plain


# --------------------------------------------------------------------------- registers


def test_the_registers_read_the_special_registers_and_fold_the_shapes(tmp_path):
    src = tirx.compile(registers_kernel(tmp_path), target=SM90).source
    assert 'asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));' in src
    for reg in ("cluster_ctaid_x", "cluster_ctaid_y", "clusterid_x", "clusterid_z"):
        assert f"tirx_{reg}()" in src
    # the shapes are the launch's: (2, 2, 1) blocks per cluster of a (4, 2, 2) grid
    assert " + 6)] = ((2 * 100) + (2 * 10) + 1);" in src  # cluster_dim x, y, z
    assert " + 8)] = 4;" in src and " + 9)] = ((2 * 100) + (1 * 10) + 2);" in src


@pytest.mark.parametrize(
    "value, message, hint",
    [
        ('T.cuda.mov_sreg(32, "smid")', "tirx does not read the special register %smid", "laneid"),
        ('T.cuda.mov_sreg(32, "warpid")', "%warpid", "T.cuda.warp_id()"),
        ('T.cuda.mov_sreg(64, "cluster_ctarank")', "a 32-bit register", "mov_sreg(32,"),
        ('T.cuda.cluster_cta_id("w")', 'dimension must be "x", "y" or "z"', None),
    ],
)
def test_register_mistakes_are_refused_at_the_users_line(tmp_path, value, message, hint):
    with pytest.raises(TirxSyntaxError) as e:
        tirx.compile(_launch(tmp_path, value=value), target=SM90)
    msg = str(e.value)
    assert message in msg and value.split("(")[0] in caret_line(msg)
    if hint:
        assert hint in msg


def test_a_cluster_register_on_sm_80_names_the_arch(tmp_path):
    k = _launch(tmp_path, cluster="None", value='T.cuda.mov_sreg(32, "cluster_ctarank")')
    with pytest.raises(CompileError) as e:
        tirx.compile(k, target="cuda -arch=sm_80")
    assert "the cluster register cluster_ctarank exists from sm_90 on" in str(e.value)
    assert "Out[" in caret_line(str(e.value))


# ------------------------------------------------------------------------- the forms

PTX = """
@T.function
def kernel(A: T.Tensor((64,), "int32"), Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64, cluster=2))
    s = T.alloc_shared((64,), "int32")
    f = T.alloc_local((2,), "float32")
    d = T.alloc_local((2,), "uint32")
    tid = T.cuda.thread_idx("x")
    s[tid] = A[tid]
    T.cuda.cluster_sync()
    {stmt}
    T.cuda.cluster_sync()
    Out[tid] = 1
"""


def _ptx(tmp_path, stmt):
    return define(PTX.format(stmt=stmt), tmp_path, "kernel")


@pytest.mark.parametrize(
    "stmt, message",
    [
        ('T.ptx["mapa.shared::cluster.u32"](d[0], s[0])', "takes 3 operands (d, a, b), got 2"),
        ('T.ptx["mapa.shared::cluster.u32"](f[0], s[0], 1)', "local uint32 or int32 tensor"),
        ('T.ptx["mapa.shared::cluster.u32"](d[0], A[0], 1)', "not an element of the global"),
        ('T.ptx["ld.shared::cluster.u32"](f[0], d[1])', "local uint32 or int32 tensor"),
        ('T.ptx["ld.shared::cluster.f32"](f[tid % 2], d[1])', "needs a compile-time index"),
        ('T.ptx["st.shared::cluster.u32"](d[1], T.float32(1.5))', "stores uint32 bits"),
        ('T.ptx["ld.shared::cluster.u32"](d[0], T.float32(2))', "must be a 32-bit"),
        ('T.ptx["barrier.cluster.arrive"](d[0])', "takes no operands, got 1"),
        ('T.ptx["mapa.u64"](d[0], s[0], 1)', "use mapa.shared::cluster.u32"),
        ('T.ptx["barrier.cluster.wait.release"]()', "takes .acquire only"),
        ('T.ptx["ld.shared::cluster.u8"](d[0], d[1])', "expected .b16"),
    ],
)
def test_each_check_fires_at_the_users_line(tmp_path, stmt, message):
    with pytest.raises(TirxError) as e:
        tirx.compile(_ptx(tmp_path, stmt), target=SM90)
    msg = str(e.value)
    assert message in msg
    assert 'T.ptx["' in caret_line(msg)


def test_the_golden_cuda_of_the_forms(tmp_path):
    stmt = (
        'T.ptx["mapa.shared::cluster.u32"](d[0], s[tid], 1)\n'
        '    T.ptx["ld.shared::cluster.f32"](f[0], d[0])\n'
        '    T.ptx["st.shared::cluster.b32"](d[0], f[0] + T.float32(1))\n'
        '    T.ptx["barrier.cluster.arrive.release.aligned"]()\n'
        '    T.ptx["barrier.cluster.wait.acquire.aligned"]()'
    )
    src = tirx.compile(_ptx(tmp_path, stmt), target=SM90).source
    assert 'asm volatile("barrier.cluster.arrive.aligned;" : : : "memory");' in src
    assert 'asm volatile("barrier.cluster.wait.aligned;" : : : "memory");' in src
    assert (
        'asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d[0]) : "r"((unsigned int)((tirx_smem_'
        'addr + 0u + (unsigned int)((((int)threadIdx.x) * 4))))), "r"(1u));'
    ) in src
    assert (
        'asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(f[0]) : "r"(d[0]) : "memory");'
        in src
    )
    assert re.search(
        r'asm volatile\("st\.shared::cluster\.b32 \[%0\], %1;" : : "r"\(d\[0\]\), '
        r'"f"\(\(f\[0\] \+ 1\.0f\)\) : "memory"\);',
        src,
    )
    assert 'asm volatile("barrier.cluster.arrive.release.aligned;" : : : "memory");' in src


def test_the_remote_arrive_and_the_cluster_wait(tmp_path):
    src = tirx.compile(remote_arrive_kernel(tmp_path), target=SM90).source
    assert re.search(
        r'"mbarrier\.arrive\.release\.cluster\.shared::cluster\.b64 _, \[%0\];" : : "r"\(peer\[1\]\)',
        src,
    )
    assert "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64" in src
    assert 'asm volatile("fence.mbarrier_init.release.cluster;"' in src


# ---------------------------------------------------------------------- multicast TMA


def test_the_multicast_load_passes_the_mask_after_the_barrier(tmp_path):
    exe = tirx.compile(multicast_kernel(tmp_path), target=SM90)
    line = next(ln for ln in exe.source.splitlines() if "multicast::cluster" in ln)
    assert f"{MC} [%0], [%1, {{%2, %3}}], [%4], %5;" in line
    assert '"h"((unsigned short)(3u)) : "memory");' in line


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(mask="0"), "cta_mask is 0x0; it names 1 to 16 blocks"),
        (dict(mask="0x10000"), "cta_mask is 0x10000"),
        (dict(mask="1.5"), "cta_mask is a 16-bit integer"),
    ],
)
def test_a_bad_mask_is_refused_at_the_tile_operation(tmp_path, change, message):
    with pytest.raises(ContractError) as e:
        tirx.compile(multicast_kernel(tmp_path, **change), target=SM90)
    assert message in str(e.value)
    assert "T.cuda.tile.apply" in caret_line(str(e.value))


def test_the_mask_goes_with_the_modifier(tmp_path):
    from .cluster_kernels import MULTICAST, SUM_TAIL, SYNC

    no_mask = MULTICAST.format(C=2, mask="3", init_sync=SYNC, tail=SUM_TAIL).replace(
        ", cta_mask=3", ""
    )
    with pytest.raises(ContractError) as e:
        tirx.compile(define(no_mask, tmp_path, "kernel", MC=MC), target=SM90)
    assert "cta_mask= goes with .multicast::cluster" in str(e.value)
    plain = MC.removesuffix(".multicast::cluster")
    stray = MULTICAST.format(C=2, mask="3", init_sync=SYNC, tail=SUM_TAIL)
    with pytest.raises(ContractError) as e:
        tirx.compile(define(stray, tmp_path, "kernel", MC=plain), target=SM90)
    assert "which the instruction does not have" in str(e.value)


# ------------------------------------------------------------------------- SASS


def test_nvrtc_builds_the_cluster_kernels_for_sm_90a_with_the_cluster_sass(tmp_path):
    exe = tirx.compile(multicast_kernel(tmp_path), target="cuda -arch=sm_90a")
    assert exe.arch == "sm_90a" and exe.cubin
    if exe.sass is None:
        pytest.skip("no disassembler installed (the sass extra)")
    sass = exe.sass
    assert "UTMALDG.2D.MULTICAST" in sass
    assert "UCGABAR_ARV" in sass and "UCGABAR_WAIT" in sass
    assert "SR_CgaCtaId" in sass  # %cluster_ctarank
    # mapa: the peer's window from SR_SWINHI and the rank; ld/st.shared::cluster: generic LD/ST
    dsmem = tirx.compile(exchange_kernel(tmp_path), target="cuda -arch=sm_90a").sass
    assert "SR_SWINHI" in dsmem and re.search(r"LD\.E R\d+, \[R\d+\]", dsmem)
    pushed = tirx.compile(push_kernel(tmp_path), target="cuda -arch=sm_90a").sass
    assert re.search(r"ST\.E \[R\d+\], R\d+", pushed)
    # the arrive on a peer's mbarrier, the acquire.cluster wait
    remote = tirx.compile(remote_arrive_kernel(tmp_path), target="cuda -arch=sm_90a").sass
    assert "SYNCS.ARRIVE.TRANS64.RED.A1T0" in remote
    assert "SYNCS.PHASECHK.TRANS64.TRYWAIT" in remote


# ------------------------------------------------------------------------- launch


class _FakeKernel:
    name, handle, max_dynamic_smem = "kernel", None, 48 * 1024


def test_the_launch_goes_through_cuLaunchKernelEx_with_the_cluster_attribute(tmp_path):
    import torch

    from tirx.backend.cuda.cluster_launch import ClusterEntry, cluster_launcher

    exe = tirx.compile(exchange_kernel(tmp_path, G=8, C=4), target=SM90)
    launcher = cluster_launcher(_FakeKernel(), exe.launch_kinds, exe.lowered.launch.cluster)
    assert isinstance(launcher.entry, ClusterEntry) and launcher.entry_address is None
    calls = []
    launcher.entry._launch = lambda config, f, params, extra: calls.append(config) or (0,)
    exe._attach(launcher, -1)
    a, out = torch.zeros((8, 64), dtype=torch.int32), torch.zeros((8, 64), dtype=torch.int32)
    exe(a, out)
    exe(a, out)  # the Python runner (no C entry address for a cluster launch)
    assert exe.fast_path == "python" and len(calls) == 2
    config = calls[0]
    assert (config.gridDimX, config.gridDimY, config.gridDimZ) == (8, 1, 1)
    assert (config.blockDimX, config.numAttrs) == (64, 1)
    (attr,) = config.attrs
    assert int(attr.id) == 4  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    dims = attr.value.clusterDim
    assert (dims.x, dims.y, dims.z) == (4, 1, 1)
    assert calls[1] is config  # one configuration per stream, built once


def test_a_saved_cluster_kernel_keeps_its_shape(tmp_path):
    from tirx.backend.cuda.stored import load

    exe = tirx.compile(exchange_kernel(tmp_path), target=SM90)
    path = exe.save(tmp_path / "k.tirx")
    loaded = load(path)
    assert loaded.lowered.launch.cluster == (2, 1, 1)
    assert loaded.manifest["launch"]["cluster"] == [2, 1, 1]


# ---------------------------------------------------------------------------- GPU


def _gpu_and_sim(kernel, *arrays):
    import torch

    sims = [a.copy() for a in arrays]
    tirx.compile(kernel, target="sim")(*sims)
    exe = tirx.compile(kernel, target="cuda")
    gpus = [torch.from_numpy(a.copy()).cuda() for a in arrays]
    exe(*gpus)
    torch.cuda.synchronize()
    return sims, [g.cpu().numpy() for g in gpus]


@pytest.mark.gpu
@pytest.mark.parametrize("grid, cluster", [((4, 2, 2), (2, 2, 1)), ((8, 1, 1), (8, 1, 1))])
def test_gpu_registers_equal_the_simulator(tmp_path, grid, cluster):
    out = np.full((grid[0] * grid[1] * grid[2], 12), -7, dtype=np.int32)
    (sim,), (gpu,) = _gpu_and_sim(registers_kernel(tmp_path, grid, cluster), out)
    assert np.array_equal(gpu, sim) and np.array_equal(sim, registers_expected(grid, cluster))


@pytest.mark.gpu
@pytest.mark.parametrize("C", [2, 4])
def test_gpu_neighbour_rows_equal_the_simulator(tmp_path, C):
    a = np.random.default_rng(1).integers(-1000, 1000, size=(8, 64)).astype(np.int32)
    (_, sim), (_, gpu) = _gpu_and_sim(exchange_kernel(tmp_path, G=8, C=C), a, np.zeros_like(a))
    assert np.array_equal(gpu, sim) and np.array_equal(sim, exchange_expected(a, C))


@pytest.mark.gpu
def test_gpu_remote_stores_and_arrives_equal_the_simulator(tmp_path):
    a = np.random.default_rng(2).integers(-1000, 1000, size=(4, 64)).astype(np.int32)
    (_, sim), (_, gpu) = _gpu_and_sim(push_kernel(tmp_path, G=4), a, np.zeros_like(a))
    assert np.array_equal(gpu, sim) and np.array_equal(sim, push_expected(a))
    b = a[:2].copy()
    (_, sim), (_, gpu) = _gpu_and_sim(remote_arrive_kernel(tmp_path), b, np.zeros(64, np.int32))
    assert np.array_equal(gpu, sim) and np.array_equal(sim, b[1])


@pytest.mark.gpu
@pytest.mark.parametrize("C, mask", [(2, "0b11"), (4, "0xF")])
def test_gpu_multicast_sums_equal_the_simulator(tmp_path, C, mask):
    a = np.random.default_rng(3).integers(-8, 8, size=(64, 64)).astype(np.float16)
    out = np.full((C, 128), np.nan, dtype=np.float32)
    (_, sim), (_, gpu) = _gpu_and_sim(multicast_kernel(tmp_path, C=C, mask=mask), a, out)
    assert np.array_equal(gpu, sim) and np.array_equal(sim, multicast_expected(a, C))
