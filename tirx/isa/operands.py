"""Checks of tile-operation operands against a contract, shared by the family lowerings.

For a register operand the check enumerates every element of every repeat and compares the
lane the view's layout gives with the lane the instruction fixes. It then requires that each
native register of each repeat lands in one register slot for all lanes (a register number is
a compile-time property of the instruction) and, for results, that no two registers share a
slot. For a shared operand it derives each lane's row address from the view and checks the
rows are 4 consecutive words, 16-byte aligned where that is decidable at compile time.
"""

from __future__ import annotations

import functools
import itertools
import math

from ..errors import ContractError
from ..ir import nodes as ir
from ..ir.simplify import static_value
from .core import Contract, Family, OperandSpec, Role
from .shared_rows import RowCheck, check_rows

__all__ = [
    "operand_view",
    "element_atom",
    "check_register_operand",
    "registers",
    "check_shared_rows",
]


def operand_view(contract: Contract, spec: OperandSpec, v, nrep: int | None) -> ir.View:
    """``v`` as a view of ``spec``'s dtype ending in its atom, with ``nrep`` repeat dims; or,
    for an operand whose words pack narrower elements (``spec.element_dtype``), a view of those
    elements ending in the atom counted in elements (:func:`element_atom`)."""
    where = f"{contract.text}: operand {spec.name}"
    if not isinstance(v, ir.View):
        raise ContractError(f"{where} must be a tensor view, got a scalar value")
    elements = bool(spec.element_dtype) and v.dtype.name == spec.element_dtype
    if v.dtype.name != spec.dtype and not elements:
        raise ContractError(f"{where} must be viewed as {_viewed_as(spec)}, got {v.dtype}",
                            hint=_dtype_hint(spec, v))  # fmt: skip
    atom = element_atom(spec) if elements else spec.atom
    want = len(atom)
    if len(v.shape) < want or tuple(v.shape[-want:]) != atom:
        unit = f" ({spec.element_dtype} elements)" if elements else ""
        raise ContractError(
            f"{where} must have shape (*repeat, {', '.join(map(str, atom))}){unit}, got {v.shape}",
            hint=_merge_hint(contract, spec, atom, v.shape),
        )
    if nrep is not None and len(v.shape) - want != nrep:
        axes = ", ".join(spec.repeat_axes)
        raise ContractError(
            f"{where} must have {nrep} leading repeat dims ({axes}) before the "
            f"{atom} atom, got shape {v.shape}"
        )
    return v


def _merge_hint(contract, spec: OperandSpec, atom: tuple[int, ...], shape) -> str | None:
    """For a shape that splits the atom's first axis over several axes (``(2, 2, 8, 4)`` for
    ``(4, 8, 4)``): view those axes as one."""
    rest, shape = len(atom) - 1, tuple(shape)
    if rest < 1 or shape[len(shape) - rest :] != atom[1:]:
        return None
    lead = shape[: len(shape) - rest]
    for k in range(2, len(lead) + 1):
        if math.prod(lead[-k:]) == atom[0]:
            merged = (*lead[:-k], *atom)
            axes = f"axes {lead[-k:]} as one axis of {atom[0]}"
            if contract.family in (Family.LDMATRIX, Family.STMATRIX):
                axes = f"the {atom[0]} matrices on one axis (not {lead[-k:]})"
            if spec.role is Role.SHARED:
                return f"view the operand with {axes}: shape {merged} (e.g. with .rearrange)"
            return (
                f"view the registers with {axes}, e.g. .view({', '.join(map(str, merged))}, "
                f"layout=...), keeping the layout's iters (its shape may still split that axis)"
            )
    return None


def element_atom(spec: OperandSpec) -> tuple[int, ...]:
    """The atom of ``spec`` counted in elements: its last axis (words) times the elements one
    word packs."""
    return (*spec.atom[:-1], spec.atom[-1] * spec.elements_per_word)


def _viewed_as(spec: OperandSpec) -> str:
    per = spec.elements_per_word
    words = f"{spec.dtype} ({per} elements per word)" if per > 1 else spec.dtype
    return f"{words} or as {spec.element_dtype} elements" if spec.element_dtype else words


def _dtype_hint(spec: OperandSpec, v: ir.View) -> str | None:
    """The one change that makes the view's dtype right."""
    name = v.buffer.name
    if spec.element_dtype:
        return (
            f'allocate {name} as "{spec.element_dtype}" (T.alloc_local(..., "{spec.element_dtype}"))'
            f" and keep the view's layout: it describes elements, {spec.elements_per_word} to a "
            f"32-bit register, the first in the low bits; or view the registers as "
            f'{spec.dtype} words ({name}.view("{spec.dtype}"))'
        )
    if spec.dtype == "uint32":
        return f'use .view("{spec.dtype}") on the buffer'
    return None


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
        err = ContractError(
            f"{where}: a register view must start at a compile-time slot",
            hint="its start depends on a value known only at run time, such as the variable of "
            "a range() loop (a loop in the CUDA): unroll that loop (for k in T.unroll(n)) so "
            "that each iteration's registers are known",
        )
        err.about_layout = False  # the layout is not at fault: no "defined here" for it
        raise err
    return layout, base, v.buffer.nbytes // v.dtype.bytes


def check_register_operand(contract: Contract, spec: OperandSpec, v: ir.View):
    """Validate a register operand; returns ``{(repeat, native_register): slot}``, the slot in
    32-bit words. A view of the elements a word packs (``spec.element_dtype``) is checked
    element by element: each element must be in its lane, in the part of a word the ISA gives
    it (the element at ``col % per == j`` in part ``j``, counting from the low bits), and the
    word it lands in is the register's slot.

    A view that passed is remembered by what the check reads (the contract and operand, the
    view's layout, start, shape, dtype and buffer size): a kernel's unrolled tiles check the
    same fragments again and again (a quarter of the checks' time was repeats)."""
    where = f"{contract.text}: operand {spec.name}"
    check_held_elements(where, spec.element_dtype, v)
    layout, base, capacity = register_view(where, v, "warp-scope", ("laneid",))
    key = ("slots", contract, spec, layout, base, capacity, v.shape, v.dtype)
    return dict(
        passed(key, lambda: _check_register_slots(where, contract, spec, v, layout, base, capacity))
    )


# the dtypes of buffers that are plain 32-bit word containers: what their words hold is the
# kernel's to say (packed by hand, or a .view("uint32") of nothing narrower)
_WORD_CONTAINERS = frozenset({"uint32", "int32"})


def check_held_elements(where: str, element: str, v: ir.View) -> None:
    """A word view of a register buffer of narrower values (``p.view("uint32")`` of a
    bfloat16 array) holds those values: they must be the instruction's ``element`` type, or
    the tensor core reads their bits as another type and the product is wrong without a
    fault. Buffers of 32-bit integer words are not checked (the kernel packed them)."""
    held = v.buffer.dtype
    if not element or held.name == element or held.name in _WORD_CONTAINERS:
        return
    if held.bits == 32 and not held.name.startswith("float"):
        return
    err = ContractError(
        f"{where}: {v.buffer.name!r} holds {held} values, but the instruction multiplies "
        f"{element}: the tensor core would read their bits as {element}",
        hint=f"convert the values to {element} before packing them into words, or use the "
        f"instruction's form for {held} values",
    )
    err.about_layout = False  # the layout is not at fault: no "defined here" for it
    raise err


_PASSED: dict[tuple, object] = {}  # what the checks found for operands that passed
_PASSED_MAX = 1024


def passed(key: tuple, check):
    """``check()``, remembered under ``key`` (what the check reads of an operand) once it has
    returned: a kernel's unrolled tiles check the same operands again and again. A check that
    raises is not remembered (a bad operand is reported at every use, with its own words).
    The caller copies a result it hands on. Past ``_PASSED_MAX`` entries the memo starts
    again empty (a clear is safe against another thread's compile; dropping one entry
    while another thread adds could fail)."""
    known = _PASSED.get(key, _PASSED)
    if known is _PASSED:
        if len(_PASSED) >= _PASSED_MAX:
            _PASSED.clear()
        known = _PASSED[key] = check()
    return known


def _check_register_slots(where, contract, spec, v, layout, base, capacity) -> dict:
    per = spec.elements_per_word if v.dtype.name == spec.element_dtype else 1
    items = _element_items(spec) if per > 1 else _word_items(spec)
    nat = len(spec.atom)
    repeat_shape = v.shape[:-nat]
    slots: dict[tuple, set] = {}
    points = iter(layout.table(("laneid", "m")))  # every element, row-major
    for rep in itertools.product(*(range(e) for e in repeat_shape)):
        here: dict[int, set] = {}  # this repeat's slots by native register
        for atom, (lane, reg), part in items:
            g_lane, g_m = next(points)
            g_slot = g_m + base
            if g_lane != lane:
                slot_of = sorted(here.get(reg, {g_slot // per}))[0] * per + part
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
            if g_slot % per != part:
                raise ContractError(
                    f"{where}: element {rep + atom} is {_part_name(part, per)} of register "
                    f"{reg}'s word, but the layout puts it in slot {g_slot}, "
                    f"{_part_name(g_slot % per, per)} of a word",
                    hint=f"register r's {per} {v.dtype} elements are slots {per}·w .. "
                    f"{per}·w + {per - 1} of one word w, in column order (the first in the "
                    f"low bits): check the m stride of the innermost column axis",
                )
            here.setdefault(reg, set()).add(g_slot // per)
        for reg, found in here.items():
            slots[(rep, reg)] = found
    mapping = {}
    for key, found in slots.items():
        if len(found) != 1:
            rep, reg = key
            unit = " (words)" if per > 1 else ""
            raise ContractError(
                f"{where}: native register {reg} of repeat {rep} lands in different slots"
                f"{unit} {sorted(found)} on different lanes or elements; a register slot must "
                f"be the same for every lane"
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


def _word_items(spec: OperandSpec):
    """``(atom coordinate, (lane, register), 0)`` per word of the atom, row-major."""
    return [(c, owner, 0) for c, owner in spec.owner_items]


@functools.cache
def _element_items(spec: OperandSpec):
    """``(element coordinate, (lane, register), part)`` per element of the atom counted in
    elements, row-major: the element at column ``c`` is part ``c % per`` of word ``c // per``."""
    per = spec.elements_per_word
    table = spec.owner_table()
    return [
        (c, table[(*c[:-1], c[-1] // per)], c[-1] % per)
        for c in itertools.product(*(range(e) for e in element_atom(spec)))
    ]


def _part_name(part: int, per: int) -> str:
    if per == 2:
        return ("the low", "the high")[part] + " half"
    return f"element {part} (from the low bits)"


def _reg_name(key) -> str:
    rep, reg = key
    return f"native register {reg}" + (f" of repeat {rep}" if rep else "")


def registers(v: ir.View, mapping, rep, count, is_output) -> ir.RegVector:
    """The braced register list of repeat ``rep``: native registers 0..count-1 in order, each
    read as the view's dtype, or as a 32-bit word for a view of narrower elements (its slots
    in ``mapping`` are words)."""
    dtype = v.dtype if v.dtype.bits >= 32 else ir.U32
    return ir.RegVector(
        tuple(ir.LocalReg(v.buffer, mapping[(rep, r)], dtype) for r in range(count)),
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
