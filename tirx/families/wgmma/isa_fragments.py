"""The register fragments of ``wgmma.mma_async`` (PTX ISA 9.7.15.5.1.1, "Register Fragments":
the figures for matrix A in registers and for the accumulator D, m64nNk8/k16/k32) as lane maps
over the 128 threads of a warpgroup, and the check of a register view against one of them.

A warpgroup's thread ``t`` is warp ``w = t // 32``, lane ``l = t % 32``, with ``g = l // 4``
and ``t4 = l % 4``. Warp ``w`` holds rows ``16 w .. 16 w + 15`` of A and of D, laid out within
the warp as mma.sync's m16n8k* fragments are. In 32-bit *words* (a word of A packs two 16-bit,
four 8-bit or one 32-bit element: every line's K is 32 bytes, so A is 64 x 8 words):

* A, register ``r`` (0..3) of thread ``t``: row ``16 w + g + 8 (r % 2)``, word ``t4 + 4 (r // 2)``.
* D with 32-bit elements (.f32, .s32), register ``r`` (0 .. N/2 - 1): row
  ``16 w + g + 8 ((r // 2) % 2)``, column ``8 (r // 4) + 2 t4 + r % 2``.
* D with .f16 elements: the same element pairs packed, register ``r`` (0 .. N/4 - 1) the word
  of columns ``2 c, 2 c + 1`` (lower column in the low half), row ``16 w + g + 8 (r % 2)``,
  word ``c = 4 (r // 2) + t4``.

So the f32 accumulator's registers ``8 j .. 8 j + 7`` hold exactly the elements of the A
fragment of K columns ``16 j .. 16 j + 15`` in A's element order: an accumulator converted to
16-bit values register by register *is* the A operand of the next k16 instruction
(docs/attention.md, "The fragment identity on wgmma").
"""

from __future__ import annotations

from ...errors import ContractError
from ...ir import nodes as ir
from ...isa.core import Contract, OperandSpec
from ...isa.operands import passed, register_view
from ...layout.tile import TileLayout

__all__ = [
    "accumulator_owner", "accumulator_words", "a_words", "warpgroup_registers",
    "FORMULA_D32", "FORMULA_WORDS", "D32_LAYOUT", "WORDS_LAYOUT",
]  # fmt: skip

FORMULA_D32 = (
    "thread = 32·(row // 16) + 4·(row % 8) + (col % 8) // 2,  "
    "register = 4·(col // 8) + 2·((row % 16) // 8) + col % 2"
)
FORMULA_WORDS = (
    "thread = 32·(row // 16) + 4·(row % 8) + word % 4,  register = (row % 16) // 8 + 2·(word // 4)"
)
D32_LAYOUT = (
    "TileLayout(S[(4, 2, 8, N // 8, 4, 2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)])"
)
WORDS_LAYOUT = "TileLayout(S[(4, 2, 8, W // 4, 4) : (1 @ wid_in_wg, 1, 4 @ laneid, 2, 1 @ laneid)])"
AXES = ("tid_in_wg", "wid_in_wg", "laneid")


def accumulator_owner(coord: tuple[int, int]) -> tuple[int, int]:
    """(row, col) of the m64nN 32-bit accumulator -> (thread of the warpgroup, register)."""
    row, col = coord
    thread = 32 * (row // 16) + 4 * (row % 8) + (col % 8) // 2
    return thread, 4 * (col // 8) + 2 * ((row % 16) // 8) + col % 2


def a_words(coord: tuple[int, int]) -> tuple[int, int]:
    """(row, word) of A in registers (64 x 8 words), or of an .f16 accumulator (64 x N/2
    words) -> (thread of the warpgroup, register)."""
    row, word = coord
    thread = 32 * (row // 16) + 4 * (row % 8) + word % 4
    return thread, (row % 16) // 8 + 2 * (word // 4)


accumulator_words = a_words  # an .f16 accumulator's words follow A's pattern, N/8 words wide


def warpgroup_registers(contract: Contract, spec: OperandSpec, v, layout_hint: str) -> list[int]:
    """The register slot of each of ``spec``'s registers, checking every element of the
    register view ``v`` against the fragment (threads named by ``tid_in_wg``, or
    ``32·wid_in_wg + laneid``). ``layout_hint`` spells the canonical layout for the hint."""
    where = f"{contract.text}: operand {spec.name}"
    if not isinstance(v, ir.View):
        raise ContractError(f"{where} must be a register view, got a scalar value")
    if v.dtype.name != spec.dtype or tuple(v.shape) != spec.atom:
        words = " (32-bit words)" if spec.dtype == "uint32" else ""
        raise ContractError(
            f"{where} must be a {spec.dtype} view{words} of shape {spec.atom}, got {v.dtype} "
            f"{tuple(v.shape)}",
            hint=f"{v.buffer.name}.view({spec.atom[0]}, "
            f"{spec.atom[1]}, layout=...) of a local buffer of {spec.registers} 32-bit slots per "
            "thread" + (' (.view("uint32") first for 16- or 8-bit values)' if words else ""),
        )
    layout, base, capacity = register_view(where, v, "warpgroup", AXES)
    key = ("warpgroup", contract, spec, layout, base, capacity, v.dtype, layout_hint)
    return list(passed(key, lambda: _slots(where, spec, v, layout, base, capacity, layout_hint)))


def _slots(where, spec, v, layout, base, capacity, layout_hint) -> list[int]:
    """Each register's slot: the whole fragment compared in list passes; where anything is
    off, :func:`_slots_checked` goes element by element and reports the first."""
    if not isinstance(layout, TileLayout):  # (another kind of layout: element by element)
        return _slots_checked(where, spec, v, layout, base, capacity, layout_hint)
    tids, wids, lanes, ms = layout.columns((*AXES, "m"))
    threads, regs = spec.owner_columns
    if tuple(t + 32 * w + n for t, w, n in zip(tids, wids, lanes)) == threads and max(lanes) < 32:
        pairs = set(zip(regs, ms))  # (register, m): one per register where the slots agree
        slot_of = dict(pairs)
        out = [slot_of.get(reg) for reg in range(spec.registers)]
        if len(pairs) == spec.registers and None not in out:
            out = [m + base for m in out]
            in_range = all(0 <= slot < capacity for slot in out)
            if in_range and (spec.role.name == "REG_IN" or len(set(out)) == len(out)):
                return out
    return _slots_checked(where, spec, v, layout, base, capacity, layout_hint)


def _slots_checked(where, spec, v, layout, base, capacity, layout_hint) -> list[int]:
    slots: dict[int, set] = {}
    points = iter(layout.table((*AXES, "m")))
    for coord, (thread, reg) in spec.owner_items:
        tid, wid, lane, m = next(points)
        given, slot = tid + 32 * wid + lane, m + base
        if given != thread or lane >= 32:
            raise ContractError(
                f"{where}: element {coord} belongs to thread {thread} of the warpgroup (warp "
                f"{thread // 32}, lane {thread % 32}, register {reg}) but the layout gives it "
                f"to thread {given} (slot {slot})",
                hint=f"{spec.formula}; the canonical {spec.name} is {layout_hint}",
            )
        if not 0 <= slot < capacity:
            raise ContractError(
                f"{where}: element {coord} maps to slot {slot}, outside {v.buffer.name!r} "
                f"({capacity} {v.dtype} slots)"
            )
        slots.setdefault(reg, set()).add(slot)
    out, owner = [], {}
    for reg in range(spec.registers):
        found = slots[reg]
        if len(found) != 1:
            raise ContractError(
                f"{where}: register {reg} lands in different slots {sorted(found)} on different "
                "threads; a register slot must be the same for every thread"
            )
        (slot,) = found
        if slot in owner and spec.role.name != "REG_IN":
            raise ContractError(
                f"{where}: registers {owner[slot]} and {reg} both write slot {slot}",
                hint="each accumulator register needs its own slot: check the m strides",
            )
        owner[slot] = reg
        out.append(slot)
    return out
