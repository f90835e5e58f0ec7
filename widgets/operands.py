"""Instruction operands as element pictures, labelled as the PTX ISA's figures are.

Every register operand is drawn from its contract's ownership map ``owner(coord) -> (holder,
register)``, read through tirx's public :func:`tirx.instruction_contract`. A warp's operand
is held by lanes 0..31 (``T5:a2``); a warpgroup's (wgmma's accumulator, its A in registers)
by the 128 threads of four warps (``T37:d6``, thread = 32·warp + lane), drawn with a band of
rows per warp, as the ISA draws it.

A contract may carry another form of an operand among its parameters (an ``OperandSpec`` of
the same name: wgmma's A in registers, ``a_registers``, besides the descriptor of the
shared-memory form); ``form="registers"`` draws that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tirx.errors import TirxError
from tirx.isa import Family, OperandSpec, Role

from . import args
from .fragment import (
    Fragment,
    FragmentKind,
    as_2d,
    block_labels,
    check_bits,
    compose,
    coords,
    unpack,
)  # fmt: skip
from .model import Grid, contract_grid

__all__ = [
    "OperandFacts", "operand_facts", "operand_fragment", "register_form",
    "contract_of", "WARP_ROWS",
]  # fmt: skip

WARP_ROWS = 16  # rows of a warpgroup operand that one warp holds
_PREFIX = {"D": "c", "C": "c"}  # the ISA names mma's accumulator elements c0, c1, ...
_AXES = {"A": ("row (M)", "column (K)"), "B": ("n (N)", "k (K)")}


def contract_of(instr):
    """The contract of ``instr``: PTX text, ``T.ptx[...]`` or a contract."""
    import tirx

    if hasattr(instr, "operands") and hasattr(instr, "family"):
        return instr
    return tirx.instruction_contract(getattr(instr, "text", instr))


@dataclass(frozen=True)
class OperandFacts:
    """What a picture needs from an instruction contract (read in this one place)."""

    text: str
    name: str
    atom: tuple[int, ...]  # in the contract's units (u32 words or f32 values)
    unit_bits: int
    element_bits: int
    repeat_axes: tuple[str, ...]
    axes: tuple[str, str]
    about: str
    formula: str
    grid: Grid
    prefix: str = ""
    note: str = ""  # where the map comes from, when not from the contract itself


def register_form(contract, operand: str) -> tuple[OperandSpec | None, str]:
    """``operand`` in registers when the contract describes it as something else (wgmma's A
    is a descriptor in the ss form): the form the contract carries among its parameters.
    Returns (spec, note); (None, "") when it carries none."""
    for _, value in contract.params:
        if isinstance(value, OperandSpec) and value.name == operand and value.owner is not None:
            return value, ""
    return None, ""


def operand_facts(instr, operand: str | None = None, *, form: str | None = None) -> OperandFacts:
    """Read one operand of ``instr`` (text, ``T.ptx[...]`` or a contract) through tirx's
    public contract lookup; ``form="registers"`` reads its register form (wgmma's A)."""
    contract = contract_of(instr)
    names = [op.name for op in contract.operands]
    operand = operand or names[0]
    if operand not in names:
        raise TirxError(
            f"{contract.text} has no operand {operand!r}",
            hint="its operands are " + ", ".join(names),
        )
    spec, note = contract.operand(operand), ""
    if form == "registers" and spec.owner is None:
        spec, note = register_form(contract, operand)
        if spec is None:
            raise TirxError(
                f"{contract.text}: operand {operand} has no register form to draw",
                hint="form='registers' draws wgmma's A in registers (its rs form)",
            )
    elif form not in (None, "registers", "shared"):
        raise TirxError(f"unknown form {form!r}", hint="form='registers' or form='shared'")
    unit_bits = 32
    if spec.dtype.startswith("float"):
        element_bits = unit_bits = int(spec.dtype[5:])
    else:  # a 32-bit word packs elements_per_word of the instruction's elements
        element_bits = 32 // max(spec.elements_per_word, 1)
    if contract.family in (Family.MMA, Family.WGMMA):
        axes = _AXES.get(operand, ("row (M)", "column (N)"))
    elif dict(contract.params).get("trans") and spec.owner is not None:
        # .trans: the registers hold the transposed matrix; its row c is shared column c
        axes = _TRANS_AXES
        note = note or (
            ".trans: rows and columns are those of the transposed matrix; shared element "
            "(r, c) is drawn at (c, r)"
        )
    else:
        axes = ("row", "column")
    return OperandFacts(
        contract.text, spec.name, tuple(spec.atom), unit_bits, element_bits,
        tuple(spec.repeat_axes) or (("matrix",) if len(spec.atom) == 3 else ()), axes,
        spec.about, spec.formula, contract_grid(contract, operand, spec),
        _prefix(spec), note,
    )  # fmt: skip


def operand_fragment(instr, operand: str | None = None, *, repeat=(), element_bits=None,
                     prefix=None, form=None) -> Fragment:  # fmt: skip
    """The canonical fragment of one operand of ``instr`` in elements, labelled as the PTX
    ISA figures are. ``repeat`` tiles the atom (``(2, 2)``: a 2 x 2 grid of instructions,
    each block the same fragment). ``element_bits`` overrides the element width read from the
    instruction (s8 operands: 8). ``form="registers"``: the register form of an operand the
    contract describes otherwise (wgmma's A)."""
    facts = operand_facts(instr, operand, form=form)
    bits = facts.element_bits if element_bits is None else element_bits
    if facts.unit_bits == facts.element_bits:  # whole values (f32): no other width fits
        check_bits(bits, facts.unit_bits, allowed=(facts.element_bits,))
    else:  # 32-bit words of packed elements
        check_bits(bits, facts.unit_bits)
    per = max(facts.unit_bits // bits, 1)
    repeat = args.shape(repeat, "repeat") if repeat not in ((), None) else ()
    atom_cells = len(facts.grid.cells) * per
    args.refuse_cells(atom_cells * math.prod(repeat), f"{facts.name} repeated {repeat}")
    cells = unpack(facts.grid, per)
    atom = as_2d(facts.atom)
    eatom = (*atom[:-1], atom[-1] * per)
    if repeat:
        cells = {(*r, *c): replace(e, coord=(*r, *c)) for c, e in cells.items()
                 for r in coords(repeat)}  # fmt: skip
    shape = (*repeat, *eatom)
    rows, cols, order = compose(cells, shape)
    names = block_names(facts, repeat)
    kind = FragmentKind.REGISTERS if facts.grid.kind == "registers" else FragmentKind.ADDRESSES
    about = facts.about + (f" ({facts.note})" if facts.note else "")
    frag = Fragment(
        f"{facts.text} · {facts.name}" + (" (transposed matrix)" if facts.axes == _TRANS_AXES
                                         else ""),
        rows, cols, order, kind, eatom[-2:], facts.axes,
        block_labels(shape[:-2], names), prefix or facts.prefix, bits, about, facts.formula,
        unit_bits=max(facts.unit_bits, bits),
    )  # fmt: skip
    return by_warp(frag) if not repeat else frag


def block_names(facts: OperandFacts, repeat: tuple) -> tuple[str, ...]:
    """What a picture of the operand calls its blocks: the repeat axes, then the atom's own
    leading axes (ldmatrix's matrices)."""
    return (*facts.repeat_axes[: len(repeat)], *("matrix ",) * max(len(facts.atom) - 2, 0))


# .trans: the axes of the transposed matrix the registers hold (short enough to stand beside
# the picture of one 8 x 8 matrix)
_TRANS_AXES = ("row (= shared column)", "column (= shared row)")


def _prefix(spec: OperandSpec) -> str:
    """How the ISA's figures name the elements: c0.. for mma's accumulator, d0.. for wgmma's
    (read and written in place), a0.. and b0.. for the inputs."""
    if spec.role is Role.ACCUM_INOUT:
        return "d"
    return _PREFIX.get(spec.name, spec.name[0].lower())


def by_warp(frag: Fragment) -> Fragment:
    """A warpgroup's fragment (holders beyond lane 31) with a band of rows per warp, blocks
    of 8 columns (its registers' pattern repeats every 8 columns) and T<thread> labels."""
    holders = [e.lane for e in frag.elements if e.lane is not None]
    if not holders or max(holders) < 32 or frag.rows % WARP_ROWS:
        return frag
    warps = tuple(f"warp {w}" for w in range(frag.rows // WARP_ROWS))
    block_cols = 8 if frag.cols > 8 and frag.cols % 8 == 0 else 0
    return replace(frag, block=(WARP_ROWS, block_cols), block_labels=(warps, ()),
                   holder="thread")  # fmt: skip
