"""Every mma form through ``T.cuda.tile.apply``: compiled for cuda (NVRTC + ptxas run here
without a GPU), the emitted asm checked; wrong layouts named by element, lane and register;
the scalar C lowered to the register's PTX type."""

from __future__ import annotations

import re

import pytest

import tirx
from tirx import isa
from tirx.ir import nodes as ir
from tirx.layout import S, TileLayout, laneid

from . import isa_kernels as K
from .helpers import define

MMA_FORMS = [t for t in isa.supported_forms() if t.startswith("mma")]


def _mma_lines(ptx: str) -> list[str]:
    return [ln.strip() for ln in ptx.splitlines() if ln.strip().startswith("mma.sync")]


@pytest.mark.parametrize("text", MMA_FORMS)
def test_each_form_compiles_for_cuda_with_its_register_groups(text):
    exe = tirx.compile(K.mma_kernel(text), target="cuda -arch=sm_90")
    (line,) = _mma_lines(exe.ptx)
    assert line.split()[0] == text
    groups = re.findall(r"\{([^}]*)\}", line)
    sizes = [len(g.split(",")) for g in groups]
    c = tirx.instruction_contract(text)
    assert sizes == [c.operand(n).registers for n in ("D", "A", "B", "C")]
    acc = c.param("acc_type")
    kind = "%f" if acc == "f32" else "%r"
    assert all(r.strip().startswith(kind) for r in groups[0].split(","))
    assert exe.cubin  # ptxas accepted the registers and types


def _lowered_calls(text, c_value):
    fn = tirx.compile(K.mma_kernel(text, c_value=c_value), target="sim").lowered

    def walk(s):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                yield from walk(x)
        elif isinstance(s, ir.For):
            yield from walk(s.body)
        elif isinstance(s, ir.PtxCall) and s.instruction.startswith("mma"):
            yield s

    return list(walk(fn.body))


@pytest.mark.parametrize(
    "text, c_value, dtype, value",
    [
        ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", 7, "int32", 7),
        ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 2, "float32", 2.0),
        ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", 1.5, "uint32", 0x3E003E00),
        ("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16", 0, "uint32", 0),
    ],
)
def test_a_scalar_c_is_a_register_of_the_accumulators_ptx_type(text, c_value, dtype, value):
    import tirx.sim  # noqa: F401  (the lowering is shared; only its output is read here)

    try:
        calls = _lowered_calls(text, c_value)
    except tirx.SimulationError:
        exe = tirx.compile(K.mma_kernel(text, c_value=c_value), target="cuda -arch=sm_90")
        calls = None
        assert _mma_lines(exe.ptx)
    if calls is None:
        pytest.skip("the simulator does not run this form yet; the cuda lowering compiled")
    (call,) = calls
    regs = call.operands[3].regs
    assert len(regs) == tirx.instruction_contract(text).operand("C").registers
    for r in regs:
        assert isinstance(r, ir.ValueReg) and r.dtype.name == dtype
        assert r.value.value == value


def test_a_run_time_scalar_c_for_f16_accumulators_is_an_error_with_a_hint():
    """An f16x2 register holds a half twice; tirx builds it from a compile-time number only."""
    text = "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16"

    @tirx.T.function
    def f16_run_time_c(C: tirx.T.Tensor((1,), "float16")):
        tirx.T.device_entry(launch=tirx.T.cuda.LaunchConfig(grid=1, block=32))
        ar = tirx.T.alloc_local((2,), "uint32")
        br = tirx.T.alloc_local((1,), "uint32")
        dr = tirx.T.alloc_local((2,), "uint32")
        tirx.T.cuda.tile.apply(
            tirx.T.ptx[text],
            dr.view(1, 1, 16, 4, layout=K.D_MMA[4]),
            ar.view(1, 1, 16, 4, layout=K.A_MMA[4]),
            br.view(1, 1, 8, 4, layout=K.B_MMA[4]),
            C[0],
            scope="warp",
        )

    with pytest.raises(tirx.ContractError, match="compile-time number") as info:
        tirx.compile(f16_run_time_c, target="cuda -arch=sm_90")
    assert "uint32 view" in info.value.hint
    assert info.value.span is not None


# The issue's example: the seed's own kernel with dtypes and the instruction swapped.
K_SOURCE = """
a_load_layout = TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])
b_load_layout = TileLayout(S[(2, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])
a_mma_layout = TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
b_mma_layout = TileLayout(S[(1, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)])
d_mma_layout = TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])


@T.function
def int8_matmul(
    A: T.Tensor((16, 32), "int8"),
    B: T.Tensor((8, 32), "int8"),
    Out: T.Tensor((16, 8), "int32"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 32), "int8", layout="default", align=16)
    b = T.alloc_shared((8, 32), "int8", layout="default", align=16)
    for q in range(16):
        index = lane + 32 * q
        a[index // 32, index % 32] = A[index // 32, index % 32]
    for q in range(8):
        index = lane + 32 * q
        b[index // 32, index % 32] = B[index // 32, index % 32]
    T.cuda.cta_sync()
    a_words = a.view("uint32").rearrange(
        "(group row) (chunk word) -> (chunk group) row word", group=2, chunk=2, word=4
    )
    b_words = b.view("uint32").rearrange("row (chunk word) -> chunk row word", chunk=2)
    ar = T.alloc_local((4,), "uint32", layout="default")
    br = T.alloc_local((2,), "uint32", layout="default")
    dr = T.alloc_local((4,), "int32", layout="default")
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        ar.view(4, 8, 4, layout=a_load_layout), a_words, scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"],
        br.view(2, 8, 4, layout=b_load_layout), b_words, scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"],
        dr.view(1, 1, 16, 8, layout=d_mma_layout),
        ar.view(1, 1, 16, 8, layout=a_mma_layout),
        br.view(1, 1, 8, 8, layout=b_mma_layout),
        T.int32(0), scope="warp",
    )
    for r in range(4):
        Out[lane // 4 + 8 * (r // 2), 2 * (lane % 4) + r % 2] = dr[r]
"""


def test_the_issue_example_compiles_for_cuda(tmp_path):
    kernel = define(K_SOURCE, tmp_path, "int8_matmul")
    exe = tirx.compile(kernel, target="cuda -arch=sm_90")
    (line,) = _mma_lines(exe.ptx)
    assert line.startswith("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r")


@pytest.mark.parametrize(
    "old, new, operand, element, lane, register",
    [
        # D's lane strides swapped: element (0, 0, 0, 2) of the s32 tile goes to the wrong lane
        ("(4, 4, 2, 4 @ laneid, 1 @ laneid, 1)", "(4, 4, 2, 1 @ laneid, 4 @ laneid, 1)", "D",
         "(0, 0, 0, 2)", 1, 0),
        # A: rows and words swapped between lanes
        ("(4, 4, 1, 4 @ laneid, 2, 1 @ laneid)", "(4, 4, 1, 1 @ laneid, 2, 4 @ laneid)", "A",
         "(0, 0, 0, 1)", 1, 0),
        # B: the word's lane bits moved
        ("(2, 2, 4 @ laneid, 1, 1 @ laneid)", "(2, 2, 1 @ laneid, 1, 4 @ laneid)", "B",
         "(0, 0, 0, 1)", 1, 0),
    ],
)  # fmt: skip
def test_a_wrong_layout_names_element_lane_and_register(
    tmp_path, old, new, operand, element, lane, register
):
    assert old in K_SOURCE
    kernel = define(K_SOURCE.replace(old, new, 1), tmp_path, "int8_matmul")
    with pytest.raises(tirx.ContractError) as info:
        tirx.compile(kernel, target="cuda -arch=sm_90")
    msg = info.value.message
    assert f"operand {operand}" in msg
    assert f"element {element} belongs to lane {lane} (register {register})" in msg
    assert "m16n8k32.row.col.s32.s8.s8.s32" in info.value.hint
    twin = define(K_SOURCE, tmp_path, "int8_matmul")  # the corrected kernel compiles
    assert _mma_lines(tirx.compile(twin, target="cuda -arch=sm_90").ptx)


@pytest.mark.parametrize(
    "text, acc_dtype, bad_dtype",
    [
        ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "int32", "float32"),
        ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "uint32", "float32"),
    ],
)
def test_d_must_be_viewed_as_the_accumulator_register_dtype(text, acc_dtype, bad_dtype):
    spec = tirx.instruction_contract(text).operand("D")
    assert spec.dtype == acc_dtype
    words = spec.atom[1]
    layout = K.D_MMA[words]

    @tirx.T.function
    def wrong_d(Out: tirx.T.Tensor((16, words), bad_dtype)):
        tirx.T.device_entry(launch=tirx.T.cuda.LaunchConfig(grid=1, block=32))
        ar = tirx.T.alloc_local((4,), "uint32")
        br = tirx.T.alloc_local((2,), "uint32")
        dr = tirx.T.alloc_local((4,), bad_dtype)
        tirx.T.cuda.tile.apply(
            tirx.T.ptx[text],
            dr.view(1, 1, 16, words, layout=layout),
            ar.view(1, 1, 16, 8, layout=K.A_MMA[8]),
            br.view(1, 1, 8, 8, layout=K.B_MMA[8]),
            0,
            scope="warp",
        )

    with pytest.raises(tirx.ContractError, match=f"operand D must be viewed as {acc_dtype}"):
        tirx.compile(wrong_d, target="cuda -arch=sm_90")


def test_layout_objects_used_here_are_the_seed_shapes():
    assert K.A_MMA[8] == TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)])


def _issue_inputs():
    import torch

    g = torch.Generator().manual_seed(4)
    a = torch.randint(-128, 128, (16, 32), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (8, 32), generator=g, dtype=torch.int8)
    return a, b, a.int() @ b.int().T


def test_the_issue_example_simulates_exactly(tmp_path):
    import torch

    kernel = define(K_SOURCE, tmp_path, "int8_matmul")
    a, b, ref = _issue_inputs()
    out = torch.zeros(16, 8, dtype=torch.int32)
    try:
        tirx.compile(kernel, target="sim")(a, b, out)
    except tirx.SimulationError as e:
        if "unknown PTX instruction" in str(e):
            pytest.skip("the simulator does not implement the s8 mma yet")
        raise
    assert torch.equal(out, ref)


@pytest.mark.gpu
def test_the_issue_example_runs_exactly_on_the_gpu(tmp_path):
    import torch

    kernel = define(K_SOURCE, tmp_path, "int8_matmul")
    a, b, ref = _issue_inputs()
    out = torch.zeros(16, 8, dtype=torch.int32, device="cuda")
    tirx.compile(kernel, target="cuda")(a.cuda(), b.cuda(), out)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), ref)


@pytest.mark.parametrize(
    "text, acc",
    [
        ("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32", "int32"),
        ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "float32"),
    ],
)
def test_a_raw_ptx_call_takes_the_forms_scalar_registers(text, acc):
    """``T.ptx[...]`` with scalar operands: counts and dtypes come from the same entry."""
    from tirx.transform.raw_ptx import operand_counts

    c = tirx.instruction_contract(text)
    assert [n for _, n in operand_counts(c)] == [4, 4, 2, 4]
    T = tirx.T

    @T.function
    def raw_form(Out: T.Tensor((32, 4), acc)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        ar = T.alloc_local((4,), "uint32")
        br = T.alloc_local((2,), "uint32")
        dr = T.alloc_local((4,), acc)
        for i in range(4):
            ar[i] = lane + i
        for i in range(2):
            br[i] = lane * 3 + i
        T.ptx[text](
            dr[0], dr[1], dr[2], dr[3], ar[0], ar[1], ar[2], ar[3], br[0], br[1], 1, 1, 1, 1
        )
        for r in range(4):
            Out[lane, r] = dr[r]

    (line,) = _mma_lines(tirx.compile(raw_form, target="cuda -arch=sm_90").ptx)
    assert line.split()[0] == text

    @T.function
    def raw_wrong(Out: T.Tensor((32, 4), "float16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        ar = T.alloc_local((4,), "uint32")
        br = T.alloc_local((2,), "uint32")
        dr = T.alloc_local((4,), "float16")
        T.ptx[text](
            dr[0], dr[1], dr[2], dr[3], ar[0], ar[1], ar[2], ar[3], br[0], br[1], 1, 1, 1, 1
        )

    with pytest.raises(tirx.ContractError, match=f"operand D must be an element of a local {acc}"):
        tirx.compile(raw_wrong, target="cuda -arch=sm_90")


def test_a_register_operand_that_passed_is_remembered_and_one_that_failed_is_not(
    tmp_path, monkeypatch
):
    """check_register_operand remembers views that passed by what it reads; a wrong layout
    raises every time."""
    from tirx.isa import operands

    monkeypatch.setattr(operands, "_PASSED", {})
    kernel = define(K_SOURCE, tmp_path, "int8_matmul")
    tirx.transform.lower.lower_function(kernel.ir, arch=90)
    remembered = len(operands._PASSED)
    assert remembered == 5  # the two ldmatrix destinations, the mma's A, B and D
    again = define(K_SOURCE, tmp_path, "int8_matmul")
    tirx.transform.lower.lower_function(again.ir, arch=90)
    assert len(operands._PASSED) == remembered  # the same views: nothing new to check
    mappings = [
        m for k, m in operands._PASSED.items() if k[0] == "slots" and "m16n8k32" in k[1].text
    ]
    assert len(mappings) == 3  # A, B and D of the mma
    assert all(m and all(isinstance(slot, int) for slot in m.values()) for m in mappings)
    bad = K_SOURCE.replace(
        "(4, 4, 2, 4 @ laneid, 1 @ laneid, 1)", "(4, 4, 2, 1 @ laneid, 4 @ laneid, 1)"
    )
    for _ in range(2):
        with pytest.raises(tirx.ContractError, match="belongs to lane"):
            tirx.transform.lower.lower_function(define(bad, tmp_path, "int8_matmul").ir, arch=90)


def test_the_operand_memo_is_bounded_and_remembers_only_what_returned(monkeypatch):
    from tirx.isa import operands

    monkeypatch.setattr(operands, "_PASSED", {})
    monkeypatch.setattr(operands, "_PASSED_MAX", 2)
    calls = []

    def check(value):
        calls.append(value)
        if value < 0:
            raise ValueError(value)
        return value * 10

    assert [operands.passed(("k", v), lambda v=v: check(v)) for v in (1, 2, 1)] == [10, 20, 10]
    assert calls == [1, 2]  # the second (k, 1) was remembered
    assert operands.passed(("k", 3), lambda: check(3)) == 30  # past the bound: started again
    assert len(operands._PASSED) <= 2
    for _ in range(2):
        with pytest.raises(ValueError):
            operands.passed(("k", -1), lambda: check(-1))
    assert calls[-2:] == [-1, -1]
