"""Lane maps of the warp-matrix fragments, from the PTX ISA's fragment tables.

Every register here is 32 bits wide, and the contract check works on 32-bit *words*: an
operand view holds the words a lane's registers carry, whatever the element type inside.
In word units the m16n8kK fragments of 16-bit (f16/bf16), 8-bit (s8/u8) and 32-bit (tf32)
elements are one pattern (ISA "Matrix Fragments for mma.m16n8k4 / k8 / k16 / k32"): an
element's word is its column divided by the elements one word packs (``32 // bits``), and
the tables for the three widths coincide once columns are counted in words. One builder per
operand, parameterised by element bits, gives them all.

Notation: lane ``l``, group ``g = l // 4``, thread in group ``t = l % 4``. The ISA writes A's
register ``r`` at row ``g + 8·(r % 2)`` and word ``t + 4·(r // 2)``; B's at n ``g`` and word
``t + 4·r``; a 32-bit accumulator's element ``(g + 8·(r // 2), 2t + r % 2)``, and an f16
accumulator packs that element pair into one word, register ``r`` at row ``g + 8r``, word ``t``.

The owner functions are module-level names looked up when a contract is built, so a test can
replace one (tests/test_independence.py) and see the checker or the simulator object.
"""

from __future__ import annotations

import collections

__all__ = ["WordTile", "mma_tile", "a_words", "b_words", "accumulator_words", "matrix_words"]

FORMULA_A = "lane = 4·(row % 8) + word % 4,  register = row // 8 + 2·(word // 4)"
FORMULA_B = "lane = 4·n + word % 4,  register = word // 4"
FORMULA_ACC32 = "lane = 4·(row % 8) + col // 2,  register = 2·(row // 8) + col % 2"
FORMULA_ACC16 = "lane = 4·(row % 8) + word,  register = row // 8"
FORMULA_MATRIX = "lane = 4·row + word,  register = matrix"


def a_words(coord):
    """mma A: (row, word) of the 16 x words tile -> (lane, register)."""
    row, word = coord
    return 4 * (row % 8) + word % 4, row // 8 + 2 * (word // 4)


def b_words(coord):
    """mma B, given N-major: (n, word) of the 8 x words tile -> (lane, register)."""
    n, word = coord
    return 4 * n + word % 4, word // 4


def accumulator_words(bits: int):
    """mma C/D with ``bits``-wide elements (32: f32/s32, 16: f16x2 words): (row, word) of the
    16 x (8·bits/32) tile -> (lane, register). A lane owns an element pair of each row it
    touches; a pair spans ``regs_per_pair`` registers (2 for 32-bit elements, 1 for f16)."""
    regs_per_pair = 2 * bits // 32

    def owner(coord):
        row, word = coord
        pair, sub = divmod(word, regs_per_pair)
        return 4 * (row % 8) + pair, regs_per_pair * (row // 8) + sub

    return owner


def matrix_words(coord):
    """ldmatrix/stmatrix: (matrix, row, word) of 8x8 b16 matrices as u32 words."""
    i, row, word = coord
    return 4 * row + word, i


# A plain namedtuple, not a dataclass or typing.NamedTuple: see MmaLine in families/mma/isa.py.
WordTile = collections.namedtuple("WordTile", "atom registers elements_per_word")
WordTile.__doc__ = """One mma operand of one instruction, in 32-bit words: ``atom`` (rows, words),
``registers`` and ``elements_per_word``."""


def mma_tile(operand: str, k: int, bits: int) -> WordTile:
    """The word tile of mma.m16n8k``k`` operand ``A``, ``B`` or ``C``/``D`` (``bits`` is the
    element width of that operand: A/B's element type, or the accumulator's)."""
    per_word = 32 // bits
    if operand == "A":
        words = k // per_word
        return WordTile((16, words), 16 * words // 32, per_word)
    if operand == "B":
        words = k // per_word
        return WordTile((8, words), 8 * words // 32, per_word)
    words = 8 // per_word
    return WordTile((16, words), 16 * words // 32, per_word)
