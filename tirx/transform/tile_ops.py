"""Check tile-operation operands against their instruction's contract, and lower each tile
operation to per-lane PTX calls (register slots and shared addresses).

For a register operand the check enumerates every element of every repeat and compares the
lane the view's layout gives with the lane the instruction fixes. It then requires that each
native register of each repeat lands in one register slot for all lanes (a register number is
a compile-time property of the instruction) and, for results, that no two registers share a
slot. For a shared operand it derives each lane's row address from the view and checks the
rows are 4 consecutive words, 16-byte aligned where that is decidable at compile time.
"""

from __future__ import annotations

import itertools
import re

from ..errors import ContractError, TirxSyntaxError
from ..ir import nodes as ir
from ..ir.simplify import static_value
from .contracts import Contract, OperandSpec, Role, lookup
from .cp_async import is_cp_async, lower_cp_async_tile
from .shared_rows import RowCheck, check_rows, element_offset
from .simplify_index import simplify_index

__all__ = ["lower_tile_op", "check_register_operand"]


def lower_tile_op(op: ir.TileOp, arch: int) -> list[ir.Stmt]:
    if is_cp_async(op.instruction):
        return lower_cp_async_tile(op, arch)
    contract = lookup(op.instruction)
    if op.scope != "warp":
        raise TirxSyntaxError(
            f"scope={op.scope!r} is not supported for {contract.family}",
            hint='these instructions are warp-collective: use scope="warp"',
        )
    if arch < contract.min_arch:
        raise ContractError(
            f"{contract.text} needs sm_{contract.min_arch} or newer; the target is sm_{arch}",
            hint=f'compile with target="cuda -arch=sm_{contract.min_arch}" or newer',
        )
    if len(op.operands) != len(contract.operands):
        names = ", ".join(o.name for o in contract.operands)
        raise ContractError(
            f"{contract.text} takes {len(contract.operands)} operands ({names}), "
            f"got {len(op.operands)}"
        )
    lower = _lower_mma if contract.family == "mma" else _lower_ldst
    try:
        return lower(contract, op)
    except ContractError as e:
        index = _operand_index(contract, e)
        if index is not None and index < len(op.operand_spans):
            raise e.with_span(op.operand_spans[index]) from None
        raise


def _operand_index(contract: Contract, e: ContractError) -> int | None:
    """Which operand an error names (its message says "operand NAME")."""
    for i, spec in enumerate(contract.operands):
        if re.search(rf"operand {spec.name}\b", e.message):
            return i
    return None


# --------------------------------------------------------------------------- registers


def _operand_view(contract: Contract, spec: OperandSpec, v, nrep: int) -> ir.View:
    where = f"{contract.text}: operand {spec.name}"
    if not isinstance(v, ir.View):
        raise ContractError(f"{where} must be a tensor view, got a scalar value")
    if v.dtype.name != spec.dtype:
        raise ContractError(
            f"{where} must be viewed as {spec.dtype}, got {v.dtype}",
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


def check_register_operand(contract: Contract, spec: OperandSpec, v: ir.View):
    """Validate a register operand; returns ``{(repeat, native_register): slot}``."""
    where = f"{contract.text}: operand {spec.name}"
    if v.buffer.scope is not ir.Scope.LOCAL:
        raise ContractError(
            f"{where} must be registers (a T.alloc_local buffer), got "
            f"{v.buffer.scope.value} buffer {v.buffer.name!r}"
        )
    base = static_value(v.elem_offset)
    if base is None:
        raise ContractError(f"{where}: a register view must start at a compile-time slot")
    layout = v.layout
    axes = set(layout.axes()) if hasattr(layout, "axes") else {"m"}
    extra = axes - {"m", "laneid"}
    if extra:
        raise ContractError(
            f"{where}: a warp-scope register layout may use only laneid and m, got {sorted(extra)}"
        )
    if getattr(layout, "replica", ()):
        raise ContractError(f"{where}: a register layout cannot have replicas here")
    capacity = v.buffer.nbytes // v.dtype.bytes
    nat = len(spec.atom)
    repeat_shape = v.shape[:-nat]
    table = spec.owner_table()
    slots: dict[tuple, set] = {}
    points = iter(layout.table(("laneid", "m")))  # every element, row-major
    for rep in itertools.product(*(range(e) for e in repeat_shape)):
        for atom, (lane, reg) in table.items():
            g_lane, g_m = next(points)
            g_slot = g_m + base
            if g_lane != lane:
                slot_of = sorted(slots.get((rep, reg), {g_slot}))[0]
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
            slots.setdefault((rep, reg), set()).add(g_slot)
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


def _regs(v: ir.View, mapping, rep, count, is_output) -> ir.RegVector:
    return ir.RegVector(
        tuple(ir.LocalReg(v.buffer, mapping[(rep, r)], v.dtype) for r in range(count)),
        is_output,
    )


# ------------------------------------------------------------------------------- mma


def _lower_mma(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    sd, sa, sb, sc = contract.operands
    d = _operand_view(contract, sd, op.operands[0], 2)
    a = _operand_view(contract, sa, op.operands[1], 2)
    b = _operand_view(contract, sb, op.operands[2], 2)
    mr, nr = d.shape[0], d.shape[1]
    kr = a.shape[1]
    if a.shape[0] != mr or b.shape[0] != nr or b.shape[1] != kr:
        raise ContractError(
            f"{contract.text}: repeat shapes disagree: D is (M={mr}, N={nr}), "
            f"A is (M={a.shape[0]}, K={a.shape[1]}), B is (N={b.shape[0]}, K={b.shape[1]})"
        )
    dmap = check_register_operand(contract, sd, d)
    amap = check_register_operand(contract, sa, a)
    bmap = check_register_operand(contract, sb, b)
    c = op.operands[3]
    if isinstance(c, ir.View):
        _operand_view(contract, sc, c, 2)
        if c.shape != d.shape:
            raise ContractError(
                f"{contract.text}: operand C must be shaped like D {d.shape}, got {c.shape}"
            )
        cmap = check_register_operand(contract, sc, c)
    elif isinstance(c, ir.Expr):
        cmap = None
        cval = ir.ValueReg(ir.cast(c, ir.F32))
    else:
        raise ContractError(f"{contract.text}: operand C must be a scalar or an f32 view")
    out = []
    for mi, ni in itertools.product(range(mr), range(nr)):
        dregs = _regs(d, dmap, (mi, ni), 4, True)
        for ki in range(kr):
            if ki > 0:
                cregs = _regs(d, dmap, (mi, ni), 4, False)
            elif cmap is not None:
                cregs = _regs(c, cmap, (mi, ni), 4, False)
            else:
                cregs = ir.RegVector((cval,) * 4, False)
            out.append(
                ir.PtxCall(
                    contract.text,
                    (
                        dregs,
                        _regs(a, amap, (mi, ki), sa.registers, False),
                        _regs(b, bmap, (ni, ki), sb.registers, False),
                        cregs,
                    ),
                    op.span,
                )
            )
    return out


# -------------------------------------------------------------------- ldmatrix / stmatrix


def _lower_ldst(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    ld = contract.family == "ldmatrix"
    rspec, sspec = (
        (contract.operands[0], contract.operands[1])
        if ld
        else (contract.operands[1], contract.operands[0])
    )
    rv = op.operands[0] if ld else op.operands[1]
    sv = op.operands[1] if ld else op.operands[0]
    regs = _operand_view(contract, rspec, rv, None)
    shared = _operand_view(contract, sspec, sv, None)
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
    _check_shared(contract, shared)
    out = []
    for rep in itertools.product(*(range(e) for e in regs.shape[:-3])):
        words = ir.as_expr(element_offset(shared, (*rep, mat, row, 0)))
        addr = ir.AddressOperand(ir.SharedAddress(shared.buffer, simplify_index(words * 4)))
        rv_ = _regs(regs, rmap, rep, count, ld)
        operands = (rv_, addr) if ld else (addr, rv_)
        out.append(ir.PtxCall(contract.text, operands, op.span))
    return out


def _check_shared(contract: Contract, v: ir.View):
    where = f"{contract.text}: operand shared"
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
