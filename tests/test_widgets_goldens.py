"""Text-table goldens of the seed's five layouts, each checked against the PTX ISA.

The tables are what ``widgets.draw.text_table`` prints (cell = ``lane:slot``). Every golden is
also parsed back here and compared, cell by cell, with the lane/register formulas of the PTX
ISA's fragment tables (written out below, independently of tirx), so a golden cannot drift
from the hardware's definition unnoticed.
"""

from __future__ import annotations

import math

import pytest

from tirx.examples.warp_matmul import (
    a_load_layout,
    a_mma_layout,
    b_load_layout,
    b_mma_layout,
    d_mma_layout,
)
from widgets.draw import text_table
from widgets.model import layout_grid

A_LOAD = """\
TileLayout(S[(4, 8, 4):(1, 4 @ laneid, 1 @ laneid)])
cell = lane:slot; colour = lane
        0    1    2    3
 0,0  0:0  1:0  2:0  3:0
 0,1  4:0  5:0  6:0  7:0
 0,2  8:0  9:0 10:0 11:0
 0,3 12:0 13:0 14:0 15:0
 0,4 16:0 17:0 18:0 19:0
 0,5 20:0 21:0 22:0 23:0
 0,6 24:0 25:0 26:0 27:0
 0,7 28:0 29:0 30:0 31:0
    --------------------
 1,0  0:1  1:1  2:1  3:1
 1,1  4:1  5:1  6:1  7:1
 1,2  8:1  9:1 10:1 11:1
 1,3 12:1 13:1 14:1 15:1
 1,4 16:1 17:1 18:1 19:1
 1,5 20:1 21:1 22:1 23:1
 1,6 24:1 25:1 26:1 27:1
 1,7 28:1 29:1 30:1 31:1
    --------------------
 2,0  0:2  1:2  2:2  3:2
 2,1  4:2  5:2  6:2  7:2
 2,2  8:2  9:2 10:2 11:2
 2,3 12:2 13:2 14:2 15:2
 2,4 16:2 17:2 18:2 19:2
 2,5 20:2 21:2 22:2 23:2
 2,6 24:2 25:2 26:2 27:2
 2,7 28:2 29:2 30:2 31:2
    --------------------
 3,0  0:3  1:3  2:3  3:3
 3,1  4:3  5:3  6:3  7:3
 3,2  8:3  9:3 10:3 11:3
 3,3 12:3 13:3 14:3 15:3
 3,4 16:3 17:3 18:3 19:3
 3,5 20:3 21:3 22:3 23:3
 3,6 24:3 25:3 26:3 27:3
 3,7 28:3 29:3 30:3 31:3
"""

B_LOAD = """\
TileLayout(S[(2, 8, 4):(1, 4 @ laneid, 1 @ laneid)])
cell = lane:slot; colour = lane
        0    1    2    3
 0,0  0:0  1:0  2:0  3:0
 0,1  4:0  5:0  6:0  7:0
 0,2  8:0  9:0 10:0 11:0
 0,3 12:0 13:0 14:0 15:0
 0,4 16:0 17:0 18:0 19:0
 0,5 20:0 21:0 22:0 23:0
 0,6 24:0 25:0 26:0 27:0
 0,7 28:0 29:0 30:0 31:0
    --------------------
 1,0  0:1  1:1  2:1  3:1
 1,1  4:1  5:1  6:1  7:1
 1,2  8:1  9:1 10:1 11:1
 1,3 12:1 13:1 14:1 15:1
 1,4 16:1 17:1 18:1 19:1
 1,5 20:1 21:1 22:1 23:1
 1,6 24:1 25:1 26:1 27:1
 1,7 28:1 29:1 30:1 31:1
"""

A_MMA = """\
TileLayout(S[(1, 1, 2, 8, 2, 4):(4, 4, 1, 4 @ laneid, 2, 1 @ laneid)])
cell = lane:slot; colour = lane
       0    1    2    3    4    5    6    7
  0  0:0  1:0  2:0  3:0  0:2  1:2  2:2  3:2
  1  4:0  5:0  6:0  7:0  4:2  5:2  6:2  7:2
  2  8:0  9:0 10:0 11:0  8:2  9:2 10:2 11:2
  3 12:0 13:0 14:0 15:0 12:2 13:2 14:2 15:2
  4 16:0 17:0 18:0 19:0 16:2 17:2 18:2 19:2
  5 20:0 21:0 22:0 23:0 20:2 21:2 22:2 23:2
  6 24:0 25:0 26:0 27:0 24:2 25:2 26:2 27:2
  7 28:0 29:0 30:0 31:0 28:2 29:2 30:2 31:2
  8  0:1  1:1  2:1  3:1  0:3  1:3  2:3  3:3
  9  4:1  5:1  6:1  7:1  4:3  5:3  6:3  7:3
 10  8:1  9:1 10:1 11:1  8:3  9:3 10:3 11:3
 11 12:1 13:1 14:1 15:1 12:3 13:3 14:3 15:3
 12 16:1 17:1 18:1 19:1 16:3 17:3 18:3 19:3
 13 20:1 21:1 22:1 23:1 20:3 21:3 22:3 23:3
 14 24:1 25:1 26:1 27:1 24:3 25:3 26:3 27:3
 15 28:1 29:1 30:1 31:1 28:3 29:3 30:3 31:3
"""

B_MMA = """\
TileLayout(S[(1, 1, 8, 2, 4):(2, 2, 4 @ laneid, 1, 1 @ laneid)])
cell = lane:slot; colour = lane
      0    1    2    3    4    5    6    7
 0  0:0  1:0  2:0  3:0  0:1  1:1  2:1  3:1
 1  4:0  5:0  6:0  7:0  4:1  5:1  6:1  7:1
 2  8:0  9:0 10:0 11:0  8:1  9:1 10:1 11:1
 3 12:0 13:0 14:0 15:0 12:1 13:1 14:1 15:1
 4 16:0 17:0 18:0 19:0 16:1 17:1 18:1 19:1
 5 20:0 21:0 22:0 23:0 20:1 21:1 22:1 23:1
 6 24:0 25:0 26:0 27:0 24:1 25:1 26:1 27:1
 7 28:0 29:0 30:0 31:0 28:1 29:1 30:1 31:1
"""

D_MMA = """\
TileLayout(S[(1, 1, 2, 8, 4, 2):(4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
cell = lane:slot; colour = lane
       0    1    2    3    4    5    6    7
  0  0:0  0:1  1:0  1:1  2:0  2:1  3:0  3:1
  1  4:0  4:1  5:0  5:1  6:0  6:1  7:0  7:1
  2  8:0  8:1  9:0  9:1 10:0 10:1 11:0 11:1
  3 12:0 12:1 13:0 13:1 14:0 14:1 15:0 15:1
  4 16:0 16:1 17:0 17:1 18:0 18:1 19:0 19:1
  5 20:0 20:1 21:0 21:1 22:0 22:1 23:0 23:1
  6 24:0 24:1 25:0 25:1 26:0 26:1 27:0 27:1
  7 28:0 28:1 29:0 29:1 30:0 30:1 31:0 31:1
  8  0:2  0:3  1:2  1:3  2:2  2:3  3:2  3:3
  9  4:2  4:3  5:2  5:3  6:2  6:3  7:2  7:3
 10  8:2  8:3  9:2  9:3 10:2 10:3 11:2 11:3
 11 12:2 12:3 13:2 13:3 14:2 14:3 15:2 15:3
 12 16:2 16:3 17:2 17:3 18:2 18:3 19:2 19:3
 13 20:2 20:3 21:2 21:3 22:2 22:3 23:2 23:3
 14 24:2 24:3 25:2 25:3 26:2 26:3 27:2 27:3
 15 28:2 28:3 29:2 29:3 30:2 30:3 31:2 31:3
"""


# PTX ISA fragment formulas (lane l owns the element in its register r).
def ldmatrix_owner(i, row, word):
    """ldmatrix/stmatrix: word (i, row, w) of matrix i lives in lane 4*row + w, register i."""
    return 4 * row + word, i


def mma_a_owner(row, word):
    """mma.m16n8k16 A as u32 words: lane 4*(row % 8) + word % 4, reg row // 8 + 2*(word // 4)."""
    return 4 * (row % 8) + word % 4, row // 8 + 2 * (word // 4)


def mma_b_owner(n, word):
    """mma.m16n8k16 B (N-major) as u32 words: lane 4*n + word % 4, register word // 4."""
    return 4 * n + word % 4, word // 4


def mma_d_owner(row, col):
    """mma C/D f32: lane 4*(row % 8) + col // 2, register 2*(row // 8) + col % 2."""
    return 4 * (row % 8) + col // 2, 2 * (row // 8) + col % 2


CASES = {
    "a_load": (a_load_layout, (4, 8, 4), A_LOAD, ldmatrix_owner),
    "b_load": (b_load_layout, (2, 8, 4), B_LOAD, ldmatrix_owner),
    "a_mma": (a_mma_layout, (1, 1, 16, 8), A_MMA, mma_a_owner),
    "b_mma": (b_mma_layout, (1, 1, 8, 8), B_MMA, mma_b_owner),
    "d_mma": (d_mma_layout, (1, 1, 16, 8), D_MMA, mma_d_owner),
}


def parse_table(text: str) -> dict:
    """{(row label ints..., column): (lane, slot)} from a golden table."""
    lines = text.splitlines()[3:]  # title, legend, column header
    cells = {}
    for line in lines:
        if set(line.strip()) == {"-"}:
            continue
        label, *entries = line.split()
        head = tuple(int(x) for x in label.split(","))
        for col, entry in enumerate(entries):
            lane, slot = entry.split(":")
            cells[head + (col,)] = (int(lane), int(slot))
    return cells


@pytest.mark.parametrize("name", sorted(CASES))
def test_text_table_matches_golden(name):
    layout, shape, golden, _ = CASES[name]
    assert text_table(layout_grid(layout, shape)) + "\n" == golden


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_agrees_with_the_ptx_fragment_table(name):
    _, shape, golden, owner = CASES[name]
    cells = parse_table(golden)
    assert len(cells) == math.prod(shape)
    for coord, got in cells.items():
        assert got == owner(*coord), f"{name} {coord}: table {got}, ISA {owner(*coord)}"
    # every (lane, register) pair of the fragment appears exactly once
    assert len(set(cells.values())) == len(cells)
    assert {lane for lane, _ in cells.values()} == set(range(32))


def test_golden_tables_mark_the_selected_lane():
    table = text_table(layout_grid(d_mma_layout, (1, 1, 16, 8)), lane=5)
    marked = [tok for tok in table.split() if tok.startswith("[")]
    assert marked == ["[5:0]", "[5:1]", "[5:2]", "[5:3]"]
