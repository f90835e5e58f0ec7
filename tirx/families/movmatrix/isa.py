"""movmatrix: transpose an 8x8 matrix of b16 elements held in the registers of a warp (PTX ISA
9.7.14.5.15 "Warp-level matrix transpose instruction: movmatrix"; sm_75).

``movmatrix.sync.aligned.m8n8.trans.b16 d, a;`` reads the matrix from the warp's ``a``
registers, each lane holding the fragment ldmatrix loads (word ``(row, w)``, the row's elements
``2w`` and ``2w + 1``, in lane ``4·row + w``), and writes the transposed matrix to ``d`` in the
same fragment. Both operands are register views of 32-bit words shaped ``(*repeat, 8, 4)``; one
instruction is issued per repeat coordinate (a ``(4, 8, 4)`` view, as ldmatrix.x4 fills, is
four of them). Tile form::

    T.cuda.tile.apply(T.ptx["movmatrix.sync.aligned.m8n8.trans.b16"], dst, src, scope="warp")

Raw form: ``T.ptx["movmatrix.sync.aligned.m8n8.trans.b16"](d[i], a[j])`` with ``d`` an element
of a local ``uint32`` array and ``a`` a ``uint32`` value.
"""

from __future__ import annotations

import itertools

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.nodes import ExecScope
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from ...isa.operands import check_register_operand, operand_view, registers

__all__ = ["SPEC", "SPECS"]

MIN_ARCH = 75
SLOTS = (
    ModifierSlot("sync", ("sync",)),
    ModifierSlot("aligned", ("aligned",)),
    ModifierSlot("shape", ("m8n8",)),
    ModifierSlot("trans", ("trans",)),
    ModifierSlot("type", ("b16",)),
)
FORMULA = "lane = 4·row + word,  register = 0"


def _owner(coord):
    """(row, word) of the 8x8 b16 matrix as u32 words -> (lane, register)."""
    row, word = coord
    return 4 * row + word, 0


def reject(mods: dict) -> str | None:
    return None  # the ISA has the one line: .m8n8.trans.b16


def build(text: str, mods: dict) -> Contract:
    def operand(name: str, role: Role, what: str) -> OperandSpec:
        return OperandSpec(
            name, role, "uint32", (8, 4), 1, _owner,
            about=f"{what}; word (row, w) lives in lane 4*row + w",
            formula=FORMULA, elements_per_word=2,
        )  # fmt: skip

    ops = (
        operand("d", Role.REG_OUT, "the transposed 8x8 b16 matrix"),
        operand("a", Role.REG_IN, "the 8x8 b16 matrix"),
    )
    return Contract(text, Family.MOVMATRIX, ops, MIN_ARCH, tuple(mods.items()))


def lower(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    dspec, aspec = contract.operands
    dst = operand_view(contract, dspec, op.operands[0], None)
    src = operand_view(contract, aspec, op.operands[1], None)
    if dst.shape[:-2] != src.shape[:-2]:
        raise ContractError(
            f"{contract.text}: operands d and a have different repeat shapes "
            f"{dst.shape[:-2]} vs {src.shape[:-2]}",
            hint="one movmatrix per repeat: give both views the same leading dims",
        )
    dmap = check_register_operand(contract, dspec, dst)
    amap = check_register_operand(contract, aspec, src)
    out = []
    for rep in itertools.product(*(range(e) for e in dst.shape[:-2])):
        operands = (registers(dst, dmap, rep, 1, True), registers(src, amap, rep, 1, False))
        out.append(ir.PtxCall(contract.text, operands, op.span))
    return out


NOTES = """
The source and destination fragments are ldmatrix's (`ldmatrix.x1` fills one source; an `.x4`
view `(4, 8, 4)` is four repeats). Checked: `scope="warp"`, both operands' dtype (`uint32`),
shape `(*repeat, 8, 4)`, equal repeats, and every word's lane and register against the
fragment (the first wrong word is named). The simulator transposes the matrix the warp holds,
written from the ISA's description, not from this table.
"""

SPEC = FamilySpec(
    Family.MOVMATRIX, "movmatrix", SLOTS, reject, build, lower,
    "PTX ISA 9.7.14.5.15 (movmatrix)",
    exec_scope=ExecScope.WARP, notes=NOTES,
)  # fmt: skip

SPECS = (SPEC,)
