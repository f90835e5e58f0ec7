"""T.unroll loops whose tile operations pick registers by the loop variable
(tirx/transform/unroll.py): expanded before lowering, so each copy's register views start at a
compile-time slot; every other loop stays a loop."""

from __future__ import annotations

import pytest
import torch

import tirx
from tirx import T
from tirx.errors import ContractError
from tirx.ir import nodes as ir
from tirx.ir.visitor import walk
from tirx.layout import S, TileLayout, laneid

D_LAYOUT = TileLayout(S[(1, 2, 2, 8, 4, 2) : (8, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
A_LAYOUT = TileLayout(S[(1, 2, 2, 8, 2, 4) : (8, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
B_LAYOUT = TileLayout(S[(2, 2, 8, 2, 4) : (4, 2, 4 @ laneid, 1, 1 @ laneid)])
LOAD = TileLayout(S[(2, 4, 8, 4) : (4, 1, 4 @ laneid, 1 @ laneid)])
WRONG_A = TileLayout(S[(1, 2, 2, 8, 2, 4) : (8, 4, 1, 1 @ laneid, 2, 8 @ laneid)])
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
LDSM = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"


def make_sliced(unroll: bool, a_layout=A_LAYOUT):
    """``Out = A @ B.T`` for A ``(16, 32)`` and B ``(16, 32)``: fragments of both 16-wide K
    slices loaded at once, then one mma per slice in a loop over the K slices (registers
    ``4 kq ..`` of A's fragments, slot ``2 kq`` of each of B's n tiles)."""
    loop = T.unroll if unroll else T.serial

    @T.function
    def sliced(
        A: T.Tensor((16, 32), "float16"),
        B: T.Tensor((16, 32), "float16"),
        Out: T.Tensor((16, 16), "float32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        a = T.alloc_shared((16, 32), "float16")
        b = T.alloc_shared((16, 32), "float16")
        for q in range(16):
            index = lane + 32 * q
            a[index // 32, index % 32] = A[index // 32, index % 32]
            b[index // 32, index % 32] = B[index // 32, index % 32]
        T.cuda.cta_sync()
        ar = T.alloc_local((8,), "uint32")
        br = T.alloc_local((8,), "uint32")
        dr = T.alloc_local((8,), "float32")
        for i in T.unroll(8):
            dr[i] = T.float32(0)
        aw = a.view("uint32").rearrange(
            "(half row) (kq chunk w) -> kq (chunk half) row w", half=2, kq=2, chunk=2, w=4
        )
        bw = b.view("uint32").rearrange("(n row) (j w) -> n j row w", n=2, w=4)
        T.cuda.tile.apply(T.ptx[LDSM], ar.view(2, 4, 8, 4, layout=LOAD), aw)
        T.cuda.tile.apply(T.ptx[LDSM], br.view(2, 4, 8, 4, layout=LOAD), bw)
        for kq in loop(2):
            T.cuda.tile.apply(
                T.ptx[MMA],
                dr.view(1, 2, 16, 8, layout=D_LAYOUT),
                ar.view(1, 2, 16, 8, layout=a_layout)[:, kq : kq + 1, :, :],
                br.view(2, 2, 8, 8, layout=B_LAYOUT)[:, kq : kq + 1, :, :],
                dr.view(1, 2, 16, 8, layout=D_LAYOUT),
            )
        for r in range(8):
            Out[lane // 4 + 8 * (r % 4 // 2), (r // 4) * 8 + 2 * (lane % 4) + r % 2] = dr[r]

    return sliced


def _ints(*shape, seed):
    return torch.randint(-8, 8, shape, generator=torch.Generator().manual_seed(seed))


def test_register_slices_in_an_unrolled_loop_compute_the_product():
    a, b = _ints(16, 32, seed=0), _ints(16, 32, seed=1)
    out = torch.full((16, 16), float("nan"))
    exe = tirx.compile(make_sliced(unroll=True), target="sim")
    exe(a.half(), b.half(), out)
    assert torch.equal(out, (a @ b.T).float())  # integers: exact in f32
    mma = [
        n for n in walk(exe.lowered.body) if isinstance(n, ir.PtxCall) and "mma" in n.instruction
    ]
    assert len(mma) == 4  # 2 K slices x 2 n tiles, each with its own registers
    source = tirx.compile(make_sliced(unroll=True), target="cuda -arch=sm_80").source
    assert source.count("mma.sync.aligned.m16n8k16") == 4


def test_other_unrolled_loops_stay_loops():
    """The zeroing loop (``dr[i]``: no tile operation) stays a loop in the lowered IR."""
    exe = tirx.compile(make_sliced(unroll=True), target="sim")
    loops = [n for n in walk(exe.lowered.body) if isinstance(n, ir.For)]
    assert [lp.kind for lp in loops].count(ir.LoopKind.UNROLL) == 1


def test_a_run_time_loop_variable_still_cannot_pick_registers():
    with pytest.raises(ContractError, match="compile-time slot"):
        tirx.compile(make_sliced(unroll=False), target="sim")


def test_a_contract_error_in_a_copy_is_at_the_users_line():
    with pytest.raises(ContractError, match="operand A") as info:
        tirx.compile(make_sliced(unroll=True, a_layout=WRONG_A), target="sim")
    assert "ar.view(1, 2, 16, 8, layout=a_layout)[:, kq : kq + 1, :, :]" in str(info.value)
    assert info.value.span.file == __file__


def make_raw(loop):
    """Each of four registers through a raw call in a loop over them."""

    @T.function
    def raw(X: T.Tensor((4, 32), "float32"), Out: T.Tensor((4, 32), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        s = T.alloc_local((4,), "float32")
        for j in T.unroll(4):
            s[j] = X[j, lane]
        for j in loop(4):
            T.ptx["max.f32"](s[j], s[j], 0.0)
        for j in T.unroll(4):
            Out[j, lane] = s[j]

    return raw


def test_a_raw_call_that_picks_registers_is_unrolled_too():
    """``T.ptx["max.f32"](s[j], s[j], 0.0)`` names registers by ``j``: its T.unroll loop is
    expanded (four calls, one per register); the loops without a raw call stay loops."""
    x = _ints(4, 32, seed=2).float()
    out = torch.zeros(4, 32)
    exe = tirx.compile(make_raw(T.unroll), target="sim")
    exe(x, out)
    assert torch.equal(out, x.clamp(min=0))
    calls = [n for n in walk(exe.lowered.body) if isinstance(n, ir.PtxCall)]
    assert [c.operands[0].regs[0].slot for c in calls] == [0, 1, 2, 3]
    loops = [n for n in walk(exe.lowered.body) if isinstance(n, ir.For)]
    assert len(loops) == 2
    with pytest.raises(ContractError, match="not known at compile time"):
        tirx.compile(make_raw(T.serial), target="sim")


def make_indexed(twice: bool = False):
    """``s[i] = max(X[t, i], 0)`` through a raw call, ``i = 2 a + e`` assigned in the body of
    two T.unroll loops (assigned again after the call when ``twice``); ``Last`` gets ``i``
    after the loops."""

    @T.function
    def indexed(
        X: T.Tensor((32, 8), "float32"), O: T.Tensor((32, 8), "float32"),
        Last: T.Tensor((32,), "int32"),
    ):  # fmt: skip
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        t = T.cuda.thread_idx("x")
        s = T.alloc_local((8,), "float32")
        i = 0
        for a in T.unroll(4):
            for e in T.unroll(2):
                i = 2 * a + e
                s[i] = X[t, i]
                T.ptx["max.f32"](s[i], s[i], 0.0)
                O[t, i] = s[i]
                if twice:
                    i = i + 0
        Last[t] = i

    return indexed


def test_a_register_indexed_by_a_variable_assigned_from_the_loop_variables():
    """``i = 2 * a + e`` then ``s[i]``: in each copy ``i`` is a constant after its assignment,
    so the call names its register; ``i`` keeps its last value after the loops."""
    x = _ints(32, 8, seed=3).float()
    out, last = torch.zeros(32, 8), torch.zeros(32, dtype=torch.int32)
    exe = tirx.compile(make_indexed(), target="sim")
    exe(x, out, last)
    assert torch.equal(out, x.clamp(min=0))
    assert (last == 7).all()
    calls = [n for n in walk(exe.lowered.body) if isinstance(n, ir.PtxCall)]
    assert [c.operands[0].regs[0].slot for c in calls] == list(range(8))
    src = tirx.compile(make_indexed(), target="cuda -arch=sm_90").source
    assert src.count('asm("max.f32 %0, %1, %2;"') == 8


def test_a_variable_assigned_twice_in_the_body_is_not_taken_for_a_constant():
    with pytest.raises(ContractError, match="not known at compile time"):
        tirx.compile(make_indexed(twice=True), target="sim")
