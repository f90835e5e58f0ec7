"""The simulator on kernels lowered by tirx's own pipeline (``tirx.compile(..., target="sim")``).

The lowering and the simulator read the PTX ISA independently; these kernels exercise the
seed guide, M/N/K repeats with bf16, ``ldmatrix.trans`` and ``stmatrix`` through both.
"""

from __future__ import annotations

import io
import re

import pytest
import torch

import tirx
from tirx import T
from tirx.layout import S, TileLayout, laneid

d_layout = TileLayout(S[(1, 2, 2, 8, 4, 2) : (8, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
a_layout = TileLayout(S[(1, 2, 2, 8, 2, 4) : (8, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
b_layout = TileLayout(S[(2, 2, 8, 2, 4) : (4, 2, 4 @ laneid, 1, 1 @ laneid)])
load_rep = TileLayout(S[(2, 4, 8, 4) : (4, 1, 4 @ laneid, 1 @ laneid)])
load4 = TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])


@T.function
def mm(
    A: T.Tensor((16, 32), "bfloat16"),
    B: T.Tensor((16, 32), "bfloat16"),
    Out: T.Tensor((16, 16), "float32"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 32), "bfloat16")
    b = T.alloc_shared((16, 32), "bfloat16")
    for q in range(16):
        index = lane + 32 * q
        a[index // 32, index % 32] = A[index // 32, index % 32]
        b[index // 32, index % 32] = B[index // 32, index % 32]
    T.cuda.cta_sync()
    ar = T.alloc_local((8,), "uint32")
    br = T.alloc_local((8,), "uint32")
    dr = T.alloc_local((8,), "float32")
    aw = a.view("uint32").rearrange(
        "(group row) (kc chunk word) -> kc (chunk group) row word", group=2, kc=2, chunk=2, word=4
    )
    bw = b.view("uint32").rearrange("(n row) (j word) -> n j row word", n=2, word=4)
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        ar.view(2, 4, 8, 4, layout=load_rep),
        aw,
        scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        br.view(2, 4, 8, 4, layout=load_rep),
        bw,
        scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"],
        dr.view(1, 2, 16, 8, layout=d_layout),
        ar.view(1, 2, 16, 8, layout=a_layout),
        br.view(2, 2, 8, 8, layout=b_layout),
        T.float32(0),
        scope="warp",
    )
    for r in range(8):
        Out[lane // 4 + 8 * (r % 4 // 2), (r // 4) * 8 + 2 * (lane % 4) + r % 2] = dr[r]


@T.function
def mm_t(
    A: T.Tensor((16, 32), "float16"),
    BT: T.Tensor((32, 16), "float16"),
    Out: T.Tensor((16, 16), "float32"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 32), "float16")
    b = T.alloc_shared((32, 16), "float16")
    for q in range(16):
        index = lane + 32 * q
        a[index // 32, index % 32] = A[index // 32, index % 32]
        b[index // 16, index % 16] = BT[index // 16, index % 16]
    T.cuda.cta_sync()
    ar = T.alloc_local((8,), "uint32")
    br = T.alloc_local((8,), "uint32")
    dr = T.alloc_local((8,), "float32")
    aw = a.view("uint32").rearrange(
        "(group row) (kc chunk word) -> kc (chunk group) row word", group=2, kc=2, chunk=2, word=4
    )
    bw = b.view("uint32").rearrange("(j row) (n word) -> n j row word", j=4, word=4)
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        ar.view(2, 4, 8, 4, layout=load_rep),
        aw,
        scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"],
        br.view(2, 4, 8, 4, layout=load_rep),
        bw,
        scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"],
        dr.view(1, 2, 16, 8, layout=d_layout),
        ar.view(1, 2, 16, 8, layout=a_layout),
        br.view(2, 2, 8, 8, layout=b_layout),
        T.float32(0),
        scope="warp",
    )
    for r in range(8):
        Out[lane // 4 + 8 * (r % 4 // 2), (r // 4) * 8 + 2 * (lane % 4) + r % 2] = dr[r]


@T.function
def roundtrip(A: T.Tensor((16, 16), "float16"), Out: T.Tensor((16, 16), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 16), "float16")
    c = T.alloc_shared((16, 16), "float16")
    for q in range(8):
        index = lane + 32 * q
        a[index // 16, index % 16] = A[index // 16, index % 16]
    T.cuda.cta_sync()
    ar = T.alloc_local((4,), "uint32")
    aw = a.view("uint32").rearrange(
        "(group row) (chunk word) -> (chunk group) row word", group=2, chunk=2, word=4
    )
    cw = c.view("uint32").rearrange(
        "(group row) (chunk word) -> (group chunk) row word", group=2, chunk=2, word=4
    )
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"],
        ar.view(4, 8, 4, layout=load4),
        aw,
        scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["stmatrix.sync.aligned.m8n8.x4.shared.b16"],
        cw,
        ar.view(4, 8, 4, layout=load4),
        scope="warp",
    )
    T.cuda.cta_sync()
    for q in range(8):
        index = lane + 32 * q
        Out[index // 16, index % 16] = c[index // 16, index % 16]


def _ints(*shape, seed=0):
    return torch.randint(-50, 50, shape, generator=torch.Generator().manual_seed(seed))


def test_seed_guide_through_the_pipeline():
    from tirx.examples.warp_matmul import warp_matmul

    exe = tirx.compile(warp_matmul, target="sim")
    a, b = _ints(16, 16).half(), _ints(8, 16, seed=1).half()
    out = torch.zeros(16, 8)
    exe(a, b, out)
    assert torch.equal(out, a.float() @ b.float().T)
    result = exe(a, b, out, trace=True, stdout=io.StringIO())
    assert [t.instruction.split(".")[0] for t in result.traces] == ["ldmatrix", "ldmatrix", "mma"]


def test_repeats_in_bf16():
    a, b = _ints(16, 32), _ints(16, 32, seed=1)
    out = torch.zeros(16, 16)
    tirx.compile(mm, target="sim")(a.bfloat16(), b.bfloat16(), out)
    assert torch.equal(out, (a @ b.T).float())


def test_ldmatrix_trans_feeds_a_k_major_b():
    a, b = _ints(16, 32), _ints(16, 32, seed=1)
    out = torch.zeros(16, 16)
    tirx.compile(mm_t, target="sim")(a.half(), b.T.contiguous().half(), out)
    assert torch.equal(out, (a @ b.T).float())


def test_ldmatrix_trans_then_stmatrix_transposes():
    a = torch.randn(16, 16, generator=torch.Generator().manual_seed(2)).half()
    out = torch.zeros(16, 16).half()
    tirx.compile(roundtrip, target="sim")(a, out)
    assert torch.equal(out, a.T)


def _seed_variant(tmp_path, replacement):
    """The seed guide's kernel (tirx.examples.warp_matmul) with its cta_sync() line replaced."""
    import importlib.util
    import inspect

    from tirx.examples import warp_matmul as seed

    source = inspect.getsource(seed)
    assert source.count("    T.cuda.cta_sync()\n") == 1
    name = f"seed_variant_{len(list(tmp_path.iterdir()))}"
    path = tmp_path / f"{name}.py"
    path.write_text(source.replace("    T.cuda.cta_sync()\n", replacement))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.warp_matmul, source.splitlines().index("    T.cuda.cta_sync()") + 1


def test_the_seed_without_its_barrier_is_a_race_naming_both_lanes_lines_and_the_fix(tmp_path):
    kernel, barrier_line = _seed_variant(tmp_path, "    pass\n")
    a = torch.randint(-4, 5, (16, 16)).half()
    b = torch.randint(-4, 5, (8, 16)).half()
    with pytest.raises(tirx.SimulationError, match="shared-memory race") as info:
        tirx.compile(kernel, target="sim")(a, b, torch.zeros(16, 8))
    err = info.value
    assert "(warp 0, lane 0) reads" in err.message and "(warp 0, lane 1) wrote" in err.message
    lines = [int(x) for x in re.findall(r"line (\d+)", err.message)]
    assert len(lines) == 2 and lines[1] < barrier_line < lines[0], (lines, barrier_line)
    assert err.span.line == lines[0]
    assert err.hint == (
        f"put T.cuda.cta_sync() (or T.cuda.warp_sync() within one warp) between line "
        f"{lines[1]} and line {lines[0]}"
    )
    for fix in ("    T.cuda.cta_sync()\n", "    T.cuda.warp_sync()\n"):
        kernel, _ = _seed_variant(tmp_path, fix)
        out = torch.zeros(16, 8)
        tirx.compile(kernel, target="sim")(a, b, out)
        assert torch.equal(out, a.float() @ b.float().T)
