"""movmatrix (tirx/families/movmatrix/): the warp-level register transpose of an 8x8 b16 matrix.

Its form and contract, the golden CUDA of the tile and raw forms (and that ptxas takes it), the
simulator against a model written here from the PTX ISA's words, a bad layout caught at the
user's line, the notebook layer's picture, and the GPU against the simulator (marked ``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tirx
from tirx import isa
from tirx.errors import ContractError, TirxError
from tirx.isa import Family, Role

from .helpers import caret_line, define

TEXT = "movmatrix.sync.aligned.m8n8.trans.b16"

# Repeats of the (8, 4) atom: the fragment ldmatrix loads, lane 4*row + w holds word (row, w).
KERNEL = """
FRAG = TileLayout(S[(REPS, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])


@T.function
def transpose(A: T.Tensor((REPS, 8, 8), "float16"), Out: T.Tensor((REPS, 8, 8), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_local((REPS,), "uint32")
    d = T.alloc_local((REPS,), "uint32")
    av = a.view("float16")
    for i in range(REPS):
        av[2 * i] = A[i, lane // 4, 2 * (lane % 4)]
        av[2 * i + 1] = A[i, lane // 4, 2 * (lane % 4) + 1]
    T.cuda.tile.apply(
        T.ptx["{text}"], d.view(REPS, 8, 4, layout={dst}), a.view(REPS, 8, 4, layout=FRAG),
        scope="warp",
    )
    dv = d.view("float16")
    for i in range(REPS):
        Out[i, lane // 4, 2 * (lane % 4)] = dv[2 * i]
        Out[i, lane // 4, 2 * (lane % 4) + 1] = dv[2 * i + 1]
"""

RAW = """
@T.function
def raw(A: T.Tensor((32,), "uint32"), Out: T.Tensor((32,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    d = T.alloc_local((1,), "uint32")
    T.ptx["movmatrix.sync.aligned.m8n8.trans.b16"](d[0], A[lane])
    Out[lane] = d[0]
"""


def transpose_kernel(tmp_path, repeats=2, dst="FRAG"):
    source = KERNEL.format(text=TEXT, dst=dst)
    return define(source, tmp_path, "transpose", REPS=repeats)


def isa_model(words: np.ndarray) -> np.ndarray:
    """What the ISA says the warp's d registers hold: ``words[lane]`` packs elements
    ``2 (lane % 4)`` (low half) and ``+ 1`` of row ``lane // 4``; d is the same fragment of the
    transposed matrix."""
    m = np.zeros((8, 8), np.uint16)
    for lane in range(32):
        r, c = lane // 4, 2 * (lane % 4)
        m[r, c], m[r, c + 1] = int(words[lane]) & 0xFFFF, int(words[lane]) >> 16
    t = m.T
    out = np.zeros(32, np.uint32)
    for lane in range(32):
        r, c = lane // 4, 2 * (lane % 4)
        out[lane] = int(t[r, c]) | (int(t[r, c + 1]) << 16)
    return out


def test_the_form_and_its_contract():
    assert [t for t in isa.supported_forms() if t.startswith("movmatrix")] == [TEXT]
    c = tirx.instruction_contract(TEXT)
    assert c.family is Family.MOVMATRIX and c.min_arch == 75
    d, a = c.operands
    assert (d.role, a.role) == (Role.REG_OUT, Role.REG_IN)
    assert d.atom == a.atom == (8, 4)
    assert {(row, w): d.owner((row, w)) for row in range(8) for w in range(4)} == {
        (row, w): (4 * row + w, 0) for row in range(8) for w in range(4)
    }
    with pytest.raises(ContractError, match="nearest supported: movmatrix"):
        tirx.instruction_contract("movmatrix.sync.aligned.m8n8.b16")  # .trans is the form


def test_golden_cuda_of_the_tile_form(tmp_path):
    exe = tirx.compile(transpose_kernel(tmp_path), target="cuda -arch=sm_80")
    lines = [ln.strip() for ln in exe.source.splitlines() if "movmatrix" in ln]
    assert lines == [
        'asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d[0]) : "r"(a[0]));',
        'asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d[1]) : "r"(a[1]));',
    ]
    if exe.ptx is not None:  # NVRTC present: ptxas took it
        assert "movmatrix.sync.aligned.m8n8.trans.b16" in exe.ptx


def test_golden_cuda_of_the_raw_form(tmp_path):
    exe = tirx.compile(define(RAW, tmp_path, "raw"), target="cuda -arch=sm_80")
    (line,) = [ln.strip() for ln in exe.source.splitlines() if "movmatrix" in ln]
    assert line.startswith(
        'asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d[0]) : "r"('
    )


def test_the_simulator_transposes_as_the_isa_says(tmp_path):
    rng = np.random.default_rng(7)
    words = rng.integers(0, 2**32, size=32, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(32, np.uint32)
    tirx.compile(define(RAW, tmp_path, "raw"), target="sim")(words, out)
    assert np.array_equal(out, isa_model(words))


@pytest.mark.parametrize("repeats", [1, 4])
def test_the_tile_form_transposes_every_repeat(tmp_path, repeats):
    a = torch.from_numpy(
        np.random.default_rng(1).integers(-50, 50, (repeats, 8, 8)).astype(np.float16)
    )
    out = torch.zeros(repeats, 8, 8, dtype=torch.float16)
    tirx.compile(transpose_kernel(tmp_path, repeats), target="sim")(a, out)
    assert torch.equal(out, a.transpose(1, 2))


def test_a_wrong_destination_layout_is_caught_at_the_users_line(tmp_path):
    # lanes swapped within a row group: the first wrong word is named at the tile op's operand
    wrong = "TileLayout(S[(REPS, 8, 4) : (1, 1 @ laneid, 8 @ laneid)])"
    with pytest.raises(ContractError) as info:
        tirx.compile(transpose_kernel(tmp_path, 2, dst=wrong), target="sim")
    assert "operand d" in info.value.message
    assert caret_line(str(info.value)).startswith("T.ptx[")


def test_unequal_repeats_are_refused(tmp_path):
    source = KERNEL.format(text=TEXT, dst="FRAG").replace(
        "d.view(REPS, 8, 4, layout={dst})".format(dst="FRAG"), "d.view(1, 8, 4, layout=FRAG1)"
    )
    source = "FRAG1 = TileLayout(S[(1, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])\n" + source
    with pytest.raises(ContractError, match="different repeat shapes"):
        tirx.compile(define(source, tmp_path, "transpose", REPS=2), target="sim")


def test_the_notebook_layer_draws_its_fragments_and_says_the_probes_do_not_run_it():
    from widgets import show_instruction
    from widgets.families import kernel_for

    view = show_instruction(TEXT, "a")
    assert "movmatrix" in view.grid.title and len(view.grid.cells) == 64  # 8 x 8 halves
    with pytest.raises(TirxError, match="probes do not run"):
        kernel_for(tirx.instruction_contract(TEXT), {})


@pytest.mark.gpu
@pytest.mark.parametrize("repeats", [1, 4])
def test_the_gpu_equals_the_simulator(tmp_path, repeats):
    a = torch.from_numpy(
        np.random.default_rng(3).integers(-50, 50, (repeats, 8, 8)).astype(np.float16)
    )
    kernel = transpose_kernel(tmp_path, repeats)
    sim_out = torch.zeros(repeats, 8, 8, dtype=torch.float16)
    tirx.compile(kernel, target="sim")(a, sim_out)
    gpu_out = torch.zeros(repeats, 8, 8, dtype=torch.float16, device="cuda")
    tirx.compile(kernel, target="cuda")(a.cuda(), gpu_out)
    torch.cuda.synchronize()
    assert torch.equal(gpu_out.cpu(), sim_out)
    assert torch.equal(sim_out, a.transpose(1, 2))
