"""Checks of tile-operation operands against a contract, shared by the family lowerings.

For a register operand the check enumerates every element of every repeat and compares the
lane the view's layout gives with the lane the instruction fixes. It then requires that each
native register of each repeat lands in one register slot for all lanes (a register number is
a compile-time property of the instruction) and, for results, that no two registers share a
slot. For a shared operand it derives each lane's row address from the view and checks the
rows are 4 consecutive words, 16-byte aligned where that is decidable at compile time.
"""

from __future__ import annotations

import itertools

from ..errors import ContractError
from ..ir import nodes as ir
from ..ir.simplify import static_value
from .core import Contract, OperandSpec, Role
from .shared_rows import RowCheck, check_rows

__all__ = ["operand_view", "check_register_operand", "registers", "check_shared_rows"]


def operand_view(contract: Contract, spec: OperandSpec, v, nrep: int | None) -> ir.View:
    """``v`` as a view of ``spec``'s dtype ending in its atom, with ``nrep`` repeat dims."""
    where = f"{contract.text}: operand {spec.name}"
    if not isinstance(v, ir.View):
        raise ContractError(f"{where} must be a tensor view, got a scalar value")
    if v.dtype.name != spec.dtype:
        per = f" ({spec.elements_per_word} elements per word)" if spec.elements_per_word > 1 else ""
        raise ContractError(
            f"{where} must be viewed as {spec.dtype}{per}, got {v.dtype}",
            hint=f'use .view("{spec.dtype}") on the buffer' if spec.dtype == "uint32" else None,
        )
    want = len(spec.atom)
    if len(v.shape) < want or tuple(v.shape[-want:]) != spec.atom:
        raise ContractError(
            f"{where} must have shape (*repeat, {', '.join(map(str, spec.atom))}), got {v.shape}"
        )
    if nrep is not None and len(v.shape) - want != nrep:
        axes = ", ".join(spec.repeat_axes)
        raise ContractError(
            f"{where} must have {nrep} leading repeat dims ({axes}) before the "
            f"{spec.atom} atom, got shape {v.shape}"
        )
    return v


def register_view(where: str, v: ir.View, scope: str, axes: tuple[str, ...]):
    """``(layout, first slot, slots)`` of a register view, after checking what every register
    operand needs: a local buffer, a layout over ``axes`` and ``m`` only, without replicas, and a
    compile-time first slot. ``scope`` names the operand's scope in the message."""
    if v.buffer.scope is not ir.Scope.LOCAL:
        raise ContractError(
            f"{where} must be registers (a T.alloc_local buffer), got "
            f"{v.buffer.scope.value} buffer {v.buffer.name!r}"
        )
    layout = v.layout
    extra = (set(layout.axes()) if hasattr(layout, "axes") else {"m"}) - {"m", *axes}
    if extra:
        raise ContractError(
            f"{where}: a {scope} register layout may use only {', '.join(axes)} and m, got "
            f"{sorted(extra)}"
        )
    if getattr(layout, "replica", ()):
        raise ContractError(f"{where}: a register layout cannot have replicas here")
    base = static_value(v.elem_offset)
    if base is None:
        raise ContractError(f"{where}: a register view must start at a compile-time slot")
    return layout, base, v.buffer.nbytes // v.dtype.bytes


def check_register_operand(contract: Contract, spec: OperandSpec, v: ir.View):
    """Validate a register operand; returns ``{(repeat, native_register): slot}``."""
    where = f"{contract.text}: operand {spec.name}"
    layout, base, capacity = register_view(where, v, "warp-scope", ("laneid",))
    nat = len(spec.atom)
    repeat_shape = v.shape[:-nat]
    table = spec.owner_items
    slots: dict[tuple, set] = {}
    points = iter(layout.table(("laneid", "m")))  # every element, row-major
    for rep in itertools.product(*(range(e) for e in repeat_shape)):
        here: dict[int, set] = {}  # this repeat's slots by native register
        for atom, (lane, reg) in table:
            g_lane, g_m = next(points)
            g_slot = g_m + base
            if g_lane != lane:
                slot_of = sorted(here.get(reg, {g_slot}))[0]
                raise ContractError(
                    f"{where}: element {rep + atom} belongs to lane {lane} (register {reg}) "
                    f"but the layout gives it to lane {g_lane} (slot {g_slot})",
                    hint=f"expected lane {lane}, slot {slot_of} ({spec.formula}); see the "
                    f"fragment with widgets.show_instruction({contract.text!r}, {spec.name!r})",
                )
            if not 0 <= g_slot < capacity:
                raise ContractError(
                    f"{where}: element {rep + atom} maps to slot {g_slot}, outside "
                    f"{v.buffer.name!r} ({capacity} {v.dtype} slots)"
                )
            found = here.get(reg)
            if found is None:
                here[reg] = {g_slot}
            else:
                found.add(g_slot)
        for reg, found in here.items():
            slots[(rep, reg)] = found
    mapping = {}
    for key, found in slots.items():
        if len(found) != 1:
            rep, reg = key
            raise ContractError(
                f"{where}: native register {reg} of repeat {rep} lands in different slots "
                f"{sorted(found)} on different lanes; a register slot must be the same for "
                f"every lane"
            )
        mapping[key] = found.pop()
    if spec.role is Role.REG_OUT:
        seen: dict[int, tuple] = {}
        for key, slot in sorted(mapping.items()):
            if slot in seen:
                raise ContractError(
                    f"{where}: {_reg_name(seen[slot])} and {_reg_name(key)} both write slot {slot}",
                    hint="each result register needs its own slot: check the m strides",
                )
            seen[slot] = key
    return mapping


def _reg_name(key) -> str:
    rep, reg = key
    return f"native register {reg}" + (f" of repeat {rep}" if rep else "")


def registers(v: ir.View, mapping, rep, count, is_output) -> ir.RegVector:
    """The braced register list of repeat ``rep``: native registers 0..count-1 in order."""
    return ir.RegVector(
        tuple(ir.LocalReg(v.buffer, mapping[(rep, r)], v.dtype) for r in range(count)),
        is_output,
    )


def check_shared_rows(contract: Contract, v: ir.View, name: str = "shared"):
    """A shared operand of 16-byte rows: 4 consecutive u32 words each, 16-byte aligned."""
    where = f"{contract.text}: operand {name}"
    if v.buffer.scope is not ir.Scope.SHARED:
        raise ContractError(
            f"{where} must be in shared memory (T.alloc_shared), got {v.buffer.scope.value} "
            f"buffer {v.buffer.name!r}"
        )
    if v.buffer.align < 16:
        raise ContractError(
            f"{where}: {v.buffer.name!r} must be allocated with align >= 16 (got {v.buffer.align})"
        )
    hint = "each ldmatrix/stmatrix row must be 4 consecutive u32 words (16 bytes)"
    check_rows(v, RowCheck(where, 16, 16, hint))
