"""Real data: the probe check (drawing vs machine) and traced register values.

Without a GPU the probe kernels run on the simulator, an independent reading of the PTX ISA; on
the GPU machine the ``gpu`` tests run the same probes on the hardware.
"""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tirx.examples.warp_matmul import (
    a_load_layout,
    a_mma_layout,
    b_load_layout,
    b_mma_layout,
    d_mma_layout,
    warp_matmul,
)
from tirx.layout import S, TileLayout, laneid
from widgets import check_layout, run_instruction, show_trace

MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
MMA_K8_BF16 = "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32"
LD = "ldmatrix.sync.aligned.m8n8.x{}{}.shared.b16"
ST = "stmatrix.sync.aligned.m8n8.x{}{}.shared.b16"


@pytest.mark.parametrize(
    "instr, operand",
    [(MMA, op) for op in "DABC"]
    + [(MMA_K8_BF16, op) for op in "AB"]
    + [(LD.format(n, t), "registers") for n in (1, 2, 4) for t in ("", ".trans")]
    + [(ST.format(n, t), "registers") for n in (1, 4) for t in ("", ".trans")],
)
def test_the_drawn_fragments_agree_with_the_machine(instr, operand):
    view = check_layout(instr, operand)
    assert view.ok, view.summary
    assert "all" in view.summary and "agree" in view.summary and view.marks == ()
    assert view.machine and len(view.machine) == len(view.grid.cells)


@pytest.mark.parametrize(
    "instr, operand, layout",
    [
        (LD.format(4, ""), "registers", a_load_layout),
        (LD.format(2, ""), "registers", b_load_layout),
        (MMA, "A", a_mma_layout),
        (MMA, "B", b_mma_layout),
        (MMA, "D", d_mma_layout),
    ],
)
def test_the_seed_layouts_agree_with_the_machine(instr, operand, layout):
    assert check_layout(instr, operand, layout).ok


def test_a_legal_slot_permutation_is_compared_in_its_own_slots():
    swapped = TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 1, 4 @ laneid, 1 @ laneid, 2)])
    view = check_layout(MMA, "D", swapped)
    assert view.ok and view.rejected == ""
    assert view.grid.cell(8, 0).slot == 1  # row 8 lives in slot 1 in this numbering


def test_a_wrong_layout_is_marked_where_the_machine_disagrees():
    wrong = TileLayout(S[(4, 8, 4) : (1, 1 @ laneid, 8 @ laneid)])  # rows and words swapped
    view = check_layout(LD.format(4, ""), "registers", wrong)
    assert not view.ok and "rejects this layout" in view.summary
    bad = {coord for coord, _, _ in view.disagreements}
    for _, row, w in bad:
        assert row + 8 * w != 4 * row + w  # exactly the elements whose lane differs
    assert len(bad) == 4 * (32 - 2)  # only (row, word) = (0, 0) and (7, 3) agree
    assert len(view.marks) == len(bad)
    text = str(view)
    assert text.count("!") == len(bad) + 1  # each mark, plus the legend line
    assert "!8:0→1:0" in text  # element (0, 0, 1): drawn lane 8, machine lane 1
    assert 'stroke="#d62728"' in view._repr_html_()


def test_check_layout_rejects_what_it_cannot_probe():
    with pytest.raises(tirx.TirxError, match="register operands"):
        check_layout(LD.format(4, ""), "shared")
    with pytest.raises(tirx.TirxError, match="one instruction's worth"):
        check_layout(MMA, "D", TileLayout(S[(2, 2, 8, 4, 2) : (8, 2, 4 @ laneid, 1 @ laneid, 1)]))


def _seed_run():
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (16, 16)).astype(np.float16)
    b = rng.integers(-3, 4, (8, 16)).astype(np.float16)
    out = np.zeros((16, 8), np.float32)
    run = tirx.compile(warp_matmul, target="sim")(a, b, out, trace=True)
    return a, b, out, run


def test_show_trace_draws_simulator_registers_over_the_fragments():
    a, b, out, run = _seed_run()
    view = show_trace(run, step=2, operand="D")
    for i, cell in enumerate(view.grid.cells):
        assert float(view.labels[i]) == out[cell.coord]
    view.select(operand="A")
    for i, cell in enumerate(view.grid.cells):
        row, word = cell.coord
        assert view.labels[i] == f"{a[row, 2 * word]:.3g}|{a[row, 2 * word + 1]:.3g}"
    view.select(step=0)
    assert view.operand == "registers" and "ldmatrix" in view.summary
    before = show_trace(run, step=2, operand="D", when="before")
    assert before.when == "before" and "after" not in before.summary
    assert "<svg" in view._repr_html_() and "step 0" in str(view)


def test_show_trace_says_its_cells_are_values_in_its_format():
    *_, run = _seed_run()
    view = show_trace(run, step=0, fmt="f16x2")
    first = str(view).splitlines()[1]
    assert first == ("cell = the value the lane's register holds (the word's two float16 "
                     "halves lo|hi, a float32 as its number); colour = lane")  # fmt: skip
    assert "lane:" not in first
    assert "operand registers (ar[0], ar[1], ar[2], ar[3]), after" in view.summary
    assert "the 32 bits in hex" in str(show_trace(run, step=0, fmt="hex"))


def test_show_trace_through_a_user_layout():
    a, _, _, run = _seed_run()
    view = show_trace(run, step=0, layout=a_load_layout, shape=(4, 8, 4))
    words = a.view(np.uint32).reshape(2, 8, 2, 4).transpose(2, 0, 1, 3).reshape(4, 8, 4)
    for i, cell in enumerate(view.grid.cells):  # matrix i = chunk*2 + group (the rearrange)
        lo, hi = np.array([words[cell.coord]], np.uint32).view(np.float16)
        assert view.labels[i] == f"{lo:.3g}|{hi:.3g}"


def test_show_trace_widget_switches_steps_and_operands():
    *_, run = _seed_run()
    view = show_trace(run, step=2, operand="D")
    assert view.widget is not None
    assert view._operand.options == ("D", "A", "B", "C")
    view.select(step=1)
    assert view._operand.value == "registers"
    assert len(view._cellgrid.cells.labels) == 64


def test_run_instruction_returns_machine_registers():
    rng = np.random.default_rng(1)
    A = rng.integers(-2, 3, (16, 16)).astype(np.float32)
    B = rng.integers(-2, 3, (8, 16)).astype(np.float32)
    C = rng.integers(-2, 3, (16, 8)).astype(np.float32)
    probe = run_instruction(MMA, A=A, B=B, C=C)
    assert probe.where == "simulator"
    view = show_trace(probe, operand="D")
    want = A @ B.T + C
    for i, cell in enumerate(view.grid.cells):
        assert float(view.labels[i]) == want[cell.coord]
    shared = np.arange(4 * 64, dtype=np.float32).reshape(4, 8, 8) % 100
    ld = show_trace(run_instruction(LD.format(4, ""), shared=shared), fmt="f16x2")
    i, row, w = ld.grid.cells[37].coord
    assert ld.labels[37] == f"{shared[i, row, 2 * w]:.3g}|{shared[i, row, 2 * w + 1]:.3g}"


def test_show_trace_explains_bad_input():
    with pytest.raises(tirx.TirxError, match="traced run"):
        show_trace(42)
    *_, run = _seed_run()
    with pytest.raises(tirx.TirxError, match="out of range"):
        show_trace(run, step=7)
    with pytest.raises(tirx.TirxError, match="no operand 'Q'"):
        show_trace(run, step=2, operand="Q")


@pytest.mark.gpu
@pytest.mark.parametrize(
    "instr, operand", [(MMA, "D"), (MMA, "A"), (LD.format(4, ""), "registers")]
)
def test_probe_on_the_gpu(instr, operand):
    view = check_layout(instr, operand)
    assert view.where.startswith("GPU") and view.ok, view.summary
