"""What ldmatrix and stmatrix share (PTX ISA 9.7.16.6.1 "Warp-level matrix load instruction:
ldmatrix", 9.7.16.6.2 "... store instruction: stmatrix"): the ``.m8n8.b16`` syntax line, the
register fragment (word ``(i, row, w)`` of matrix ``i`` in lane ``4·row + w``, register ``i``)
and the row addresses (lane ``8·i + r`` supplies row ``r`` of matrix ``i``)."""

from __future__ import annotations

import itertools

from ..dtypes import is_fp8
from ..errors import ContractError
from ..ir import nodes as ir
from . import fragments
from .core import Contract, Family, ModifierSlot, OperandSpec, Role
from .operands import check_register_operand, check_shared_rows, operand_view, registers
from .shared_rows import element_offset

__all__ = ["SLOTS", "reject", "build", "lower"]

SLOTS = (
    ModifierSlot("sync", ("sync",)),
    ModifierSlot("aligned", ("aligned",)),
    ModifierSlot("shape", ("m8n8",)),
    ModifierSlot("num", ("x1", "x2", "x4")),
    ModifierSlot("trans", ("trans",), optional=True),
    ModifierSlot("space", ("shared",)),
    ModifierSlot("type", ("b16",)),
)


# Which way each of the two families moves the data (any other family is a KeyError here).
_LOADS = {Family.LDMATRIX: True, Family.STMATRIX: False}


def reject(mods: dict) -> str | None:
    return None  # every combination of the slots above is on the .m8n8.b16 line


def build(family: Family, text: str, mods: dict, min_arch: int) -> Contract:
    count, trans = int(mods["num"][1]), bool(mods["trans"])
    load = _LOADS[family]
    regs = OperandSpec(
        "registers",
        Role.REG_OUT if load else Role.REG_IN,
        "uint32",
        (count, 8, 4),
        count,
        fragments.matrix_words,
        about=f"{count} 8x8 b16 matrices; word (i, row, w) lives in lane 4*row + w, register i",
        formula=fragments.FORMULA_MATRIX,
        elements_per_word=2,
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
        elements_per_word=2,
    )
    ops = (regs, shared) if load else (shared, regs)
    params = (("count", count), ("trans", trans))
    return Contract(text, family, ops, min_arch, tuple(mods.items()), params)


def lower(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    load = _LOADS[contract.family]
    ri, si = (0, 1) if load else (1, 0)
    rspec, sspec = contract.operands[ri], contract.operands[si]
    regs_given = op.operands[ri]
    shared = operand_view(contract, sspec, op.operands[si], None)
    _check_register_buffer(contract, rspec, regs_given, shared.buffer.dtype, load)
    regs = operand_view(contract, rspec, regs_given, None)
    _check_trans(contract, sspec, shared, load)
    if regs.shape[:-3] != shared.shape[:-3]:
        raise ContractError(
            f"{contract.text}: the register and shared operands have different repeat shapes "
            f"{regs.shape[:-3]} vs {shared.shape[:-3]}"
        )
    rmap = check_register_operand(contract, rspec, regs)
    count = contract.param("count")
    lane = ir.Special(ir.Builtin.LANE_ID)
    mat = lane // 8 if count == 4 else (lane // 8) % count
    row = lane % 8
    check_shared_rows(contract, shared)
    out = []
    for rep in itertools.product(*(range(e) for e in regs.shape[:-3])):
        words = ir.as_expr(element_offset(shared, (*rep, mat, row, 0)))
        # simplified once, by the index pass that rewrites every address of the lowered
        # body knowing its loops' ranges (tirx/transform/inline_indices.py)
        addr = ir.AddressOperand(ir.SharedAddress(shared.buffer, words * 4))
        rv = registers(regs, rmap, rep, count, load)
        operands = (rv, addr) if load else (addr, rv)
        out.append(ir.PtxCall(contract.text, operands, op.span))
    return out


def _check_register_buffer(contract: Contract, spec: OperandSpec, v, shared_dtype, load: bool):
    """Refuse registers allocated as float32 elements (an accumulator, whatever the view's
    dtype) where the shared tile holds 16-bit elements: the instruction moves them two to a
    register, so a uint32 view of the float32 registers would move each value's bit pattern
    as a pair of 16-bit values (a wrong result, not an error). 32-bit data on both sides (tf32
    operands through ldmatrix without .trans) moves whole words and is left alone, as do int32
    registers (packed 8-bit elements, as an int8 mma's fragments, may be declared so)."""
    if not isinstance(v, ir.View) or v.buffer.scope is not ir.Scope.LOCAL:
        return  # not registers: the operand checks name that
    if v.buffer.dtype.name != "float32" or shared_dtype.bits != 16:
        return
    where = f"{contract.text}: operand {spec.name}"
    name = v.buffer.name
    op = contract.text.split(".", 1)[0]
    if load:
        fix = (
            f'load into a float16/bfloat16 buffer (h = T.alloc_local(..., "float16"), passing '
            f'h.view("uint32")), then convert it into {name} (T.cast(h[i], "float32"))'
        )
    else:
        fix = (
            f"convert {name} into a float16/bfloat16 buffer first (h = T.alloc_local(..., "
            f'"float16"); h[i] = T.cast({name}[i], "float16")), then pass h.view("uint32")'
        )
    hint = f"{op} moves 16-bit elements (.b16), two to a 32-bit register: {fix}"
    if v.dtype.name == "uint32":
        raise ContractError(
            f"{where} is a uint32 view of float32 buffer {name!r}: its words would carry "
            "float32 bit patterns as pairs of 16-bit elements",
            hint=hint,
        )
    raise ContractError(
        f"{where} must be viewed as uint32 (2 elements per word), got {v.dtype}", hint=hint
    )


def _eight_bit_numbers(dtype) -> bool:
    """int8 or an fp8 type: data of 8-bit elements (not uint8, which is also a byte pool that
    16-bit tiles are viewed out of: the allocation's dtype alone cannot tell)."""
    return dtype.name == "int8" or is_fp8(dtype)


def _check_trans(contract: Contract, spec: OperandSpec, shared: ir.View, load: bool):
    """Refuse ``.trans`` on a shared tile of 8-bit elements: it transposes 16-bit elements, so
    8-bit data would move as transposed byte pairs."""
    if not contract.param("trans") or not _eight_bit_numbers(shared.buffer.dtype):
        return
    dtype = shared.buffer.dtype.name
    how = (
        "store 8-bit B as N×K (K-major) and load it without .trans"
        if load
        else "store the 8-bit tile without .trans (transpose it before, or store it K-major)"
    )
    raise ContractError(
        f"{contract.text}: operand {spec.name}: .trans on {dtype} buffer "
        f"{shared.buffer.name!r}: .trans transposes 16-bit elements, so {dtype} data would "
        f"move as transposed byte pairs",
        hint=f".trans transposes 16-bit elements; {how}",
    )
