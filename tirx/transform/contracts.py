"""Instruction contracts as data: one entry per PTX instruction form.

An entry lists the operands in PTX order; each register operand gives its dtype, the *atom*
(the trailing view shape one instruction covers), how many native registers a lane holds, and
the fixed ownership map ``owner(atom_coord) -> (lane, native_register)`` from the PTX ISA's
fragment tables (SPEC §5). The contract checker, the lowering, the error messages and the
visualizer all read these entries; adding an instruction is adding an entry.

Notation: lane ``l``, ``g = l // 4``, ``t = l % 4``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ContractError

__all__ = ["Role", "OperandSpec", "Contract", "lookup", "FAMILIES"]


class Role(enum.Enum):
    REG_OUT = "registers written"
    REG_IN = "registers read"
    ACCUM_IN = "registers read, or a scalar"  # the C operand of an mma
    SHARED = "shared-memory rows"


@dataclass(frozen=True)
class OperandSpec:
    name: str
    role: Role
    dtype: str
    atom: tuple[int, ...]
    registers: int  # native registers per lane for one instruction
    owner: Callable[[tuple[int, ...]], tuple[int, int]] | None = None
    repeat_axes: tuple[str, ...] = ()  # names of the leading repeat dims (mma: "M", "N", "K")
    about: str = ""
    formula: str = ""  # the ownership rule in words, for error hints and pictures

    def owner_table(self) -> dict[tuple[int, ...], tuple[int, int]]:
        """Every atom coordinate with its (lane, register)."""
        import itertools

        return {c: self.owner(c) for c in itertools.product(*(range(e) for e in self.atom))}


@dataclass(frozen=True)
class Contract:
    text: str
    family: str  # "mma", "ldmatrix", "stmatrix"
    operands: tuple[OperandSpec, ...]
    min_arch: int  # e.g. 80 for sm_80
    params: tuple[tuple[str, object], ...] = ()

    def param(self, key):
        return dict(self.params)[key]

    def operand(self, name: str) -> OperandSpec:
        for op in self.operands:
            if op.name == name:
                return op
        raise KeyError(name)


# ------------------------------------------------------------------------------- mma.sync


def _mma_accum(coord):  # D and C, (row, col) of the 16x8 f32 tile
    row, col = coord
    return 4 * (row % 8) + col // 2, 2 * (row // 8) + col % 2


def _mma_a(coord):  # A, (row, word) of the 16 x k/2 tile of u32 words
    row, word = coord
    return 4 * (row % 8) + word % 4, row // 8 + 2 * (word // 4)


def _mma_b(coord):  # B, (n, word) of the 8 x k/2 tile of u32 words (B given N-major)
    n, word = coord
    return 4 * n + word % 4, word // 4


_MMA = re.compile(r"^mma\.sync\.aligned\.m16n8k(8|16)\.row\.col\.f32\.(f16|bf16)\.(f16|bf16)\.f32$")


def _mma_contract(text: str, m: re.Match) -> Contract:
    k = int(m.group(1))
    if m.group(2) != m.group(3):
        raise ContractError(
            f"{text}: A and B must have the same type ({m.group(2)} vs {m.group(3)})",
            hint="PTX mma.sync takes f16.f16 or bf16.bf16",
        )
    words = k // 2
    accum = dict(
        dtype="float32",
        atom=(16, 8),
        registers=4,
        owner=_mma_accum,
        formula="lane = 4·(row % 8) + col // 2,  register = 2·(row // 8) + col % 2",
    )
    ops = (
        OperandSpec(
            "D", Role.REG_OUT, repeat_axes=("M", "N"), about="the 16x8 f32 result tile", **accum
        ),
        OperandSpec(
            "A",
            Role.REG_IN,
            "uint32",
            (16, words),
            k // 4,
            _mma_a,
            ("M", "K"),
            about=f"the 16x{k} {m.group(2)} tile as u32 words of two halves",
            formula="lane = 4·(row % 8) + word % 4,  register = row // 8 + 2·(word // 4)",
        ),
        OperandSpec(
            "B",
            Role.REG_IN,
            "uint32",
            (8, words),
            max(k // 8, 1),
            _mma_b,
            ("N", "K"),
            about=f"the {k}x8 tile given N-major as 8 rows of {k} halves in u32 words",
            formula="lane = 4·n + word % 4,  register = word // 4",
        ),
        OperandSpec(
            "C",
            Role.ACCUM_IN,
            repeat_axes=("M", "N"),
            about="the f32 addend: a scalar or a tile shaped like D",
            **accum,
        ),
    )
    return Contract(text, "mma", ops, 80, (("k", k), ("ab_type", m.group(2))))


# -------------------------------------------------------------------- ldmatrix / stmatrix


def _matrix_words(coord):  # (matrix, row, word) of count 8x8 b16 matrices as u32 words
    i, row, word = coord
    return 4 * row + word, i


_LDST = re.compile(r"^(ldmatrix|stmatrix)\.sync\.aligned\.m8n8\.x(1|2|4)(\.trans)?\.shared\.b16$")


def _ldst_contract(text: str, m: re.Match) -> Contract:
    family, count, trans = m.group(1), int(m.group(2)), bool(m.group(3))
    regs = OperandSpec(
        "registers",
        Role.REG_OUT if family == "ldmatrix" else Role.REG_IN,
        "uint32",
        (count, 8, 4),
        count,
        _matrix_words,
        about=f"{count} 8x8 b16 matrices; word (i, row, w) lives in lane 4*row + w, register i",
        formula="lane = 4·row + word,  register = matrix",
    )
    shared = OperandSpec(
        "shared",
        Role.SHARED,
        "uint32",
        (count, 8, 4),
        0,
        about="rows of 4 consecutive u32 words, each 16-byte aligned; "
        "lane 8*i + r supplies the address of row r of matrix i",
        formula="row r of matrix i: address from lane 8·i + r",
    )
    ops = (regs, shared) if family == "ldmatrix" else (shared, regs)
    min_arch = 75 if family == "ldmatrix" else 90
    return Contract(text, family, ops, min_arch, (("count", count), ("trans", trans)))


FAMILIES = {
    "mma": (_MMA, _mma_contract),
    "ldmatrix": (_LDST, _ldst_contract),
    "stmatrix": (_LDST, _ldst_contract),
}

_CACHE: dict[str, Contract] = {}


def lookup(text: str) -> Contract:
    """The contract of an instruction text; ContractError for an unknown instruction."""
    text = " ".join(text.split())
    if text in _CACHE:
        return _CACHE[text]
    head = text.split(".", 1)[0]
    if head in FAMILIES:
        pattern, build = FAMILIES[head]
        m = pattern.match(text)
        if m:
            _CACHE[text] = contract = build(text, m)
            return contract
    raise ContractError(
        f"unknown or unsupported instruction {text!r}",
        hint="supported: mma.sync.aligned.m16n8k{8,16}.row.col.f32.{f16,bf16}.{f16,bf16}.f32, "
        "ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16, "
        "stmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16",
    )
