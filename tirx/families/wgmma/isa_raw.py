"""The raw form of the wgmma family (tirx/isa/wgmma.py): ``T.ptx["wgmma..."](...)`` calls
lowered to the PtxCalls of docs/instructions.md, and the operand checks the tile form shares
(scale-d, the immediates)."""

from __future__ import annotations

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...isa.core import Contract
from ...isa.raw_forms import no_operands, reads_memory

__all__ = ["lower_raw", "scale_d_operand", "immediate", "MAX_WAIT"]

MAX_WAIT = 7  # wait_group's N as the real TIRx registers it (SASS clamps larger ones to 7)


def lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    """``T.ptx["wgmma..."](...)`` (the target arch was checked by the caller). mma_async's
    accumulator is N/2 elements of local float32 tensors (a whole buffer given as one operand
    stands for its elements in order), then the two descriptors, scale_d and the four
    immediates."""
    text, act = contract.text, contract.modifier("action")
    if act in ("fence", "commit_group"):
        return no_operands(text, op)
    spans = list(op.operand_spans) + [None] * (len(op.operands) + 8)
    if act == "wait_group":
        if len(op.operands) != 1:
            raise ContractError(
                f'T.ptx["{text}"](n) takes one operand, the number of wgmma groups that may '
                f"stay pending, got {len(op.operands)}"
            ).with_span(op.span)
        return ir.PtxCall(text, (_wait_count(text, op.operands[0], spans[0]),), op.span)
    nd = contract.param("n") // 2
    given = op.operands
    if len(given) != nd + 7:
        raise ContractError(
            f'T.ptx["{text}"] takes {nd} accumulator registers (or one local float32 tensor of '
            f"{nd} elements), a_desc, b_desc, scale_d, scale_a, scale_b, trans_a and trans_b: "
            f"{nd + 7} operands, got {len(given)}",
            hint=f'e.g. T.ptx["{text}"](acc, a_desc, b_desc, 1, 1, 1, 0, 0) with acc = '
            f'T.alloc_local(({nd},), "float32")',
        ).with_span(op.span)
    regs, seen = [], {}
    for i, (e, span) in enumerate(zip(given[:nd], spans)):
        reg = _accumulator_register(text, e, span, address)
        key = (reg.buffer, reg.slot)
        if key in seen:
            raise ContractError(
                f"{text}: accumulator registers d{seen[key]} and d{i} are the same element",
                hint="pass N/2 distinct elements (or one float32 tensor of N/2 elements)",
            ).with_span(span)
        seen[key] = i
        regs.append(reg)
    rest = list(zip(given[nd:], spans[nd : nd + 7]))
    a_desc, b_desc = (_descriptor(text, name, e, s) for name, (e, s) in zip("ab", rest[:2]))
    scale_d = scale_d_operand(text, *rest[2])
    imms = [
        immediate(text, name, e, s, allowed)
        for name, allowed, (e, s) in zip(
            ("scale_a", "scale_b", "trans_a", "trans_b"),
            ((1, -1), (1, -1), (0, 1), (0, 1)),
            rest[3:],
        )
    ]
    operands = (ir.RegVector(tuple(regs), True), a_desc, b_desc, scale_d, *imms)
    return ir.PtxCall(text, operands, op.span)


def _wait_count(text: str, value, span) -> ir.Immediate:
    n = static_value(value)
    if n is None or (isinstance(value, ir.Expr) and value.dtype.kind == "float"):
        raise ContractError(
            f"{text}: n must be a compile-time int",
            hint="the number of pending wgmma groups is an immediate of the instruction, "
            "e.g. 1 to keep the newest group in flight",
        ).with_span(span)
    if not 0 <= n <= MAX_WAIT:
        raise ContractError(
            f"{text}: n is {n}, outside 0..{MAX_WAIT}",
            hint="0 waits for every group of the thread; at most 7 may stay pending",
        ).with_span(span)
    return ir.Immediate(n)


def _accumulator_register(text: str, e, span, address) -> ir.LocalReg:
    ok = isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.LOCAL
    if not ok or e.dtype.name != "float32":
        got = f"an element of a {e.view.buffer.scope.value} tensor" if ok else "a value"
        if isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.LOCAL:
            got = f"a {e.dtype} element"
        raise ContractError(
            f"{text}: the accumulator must be elements of a local float32 tensor (they are "
            f"read and written), got {got}",
            hint='acc = T.alloc_local((N // 2,), "float32"); pass acc (or acc[0], acc[1], ...)',
        ).with_span(span)
    buf, index = address(e.view, e.indices)
    slot = static_value(index)
    if slot is None:
        raise ContractError(
            f"{text}: an accumulator register needs a compile-time index"
        ).with_span(span)
    return ir.LocalReg(buf, slot, e.dtype)


def _integer(text: str, name: str, e, span, fix: str):
    if not isinstance(e, (int, ir.Expr)) or (
        isinstance(e, ir.Expr) and e.dtype.kind not in ("int", "uint", "bool")
    ):
        raise ContractError(f"{text}: {name} must be an integer", hint=fix).with_span(span)
    if reads_memory(e):
        raise ContractError(
            f"{text}: {name} must be computed from indices, parameters or variables, not read "
            "from a tensor",
            hint=f"load the value into a variable first: x = t[i]; then pass x. {fix}",
        ).with_span(span)
    return ir.as_expr(e)


def _descriptor(text: str, which: str, e, span) -> ir.ScalarOperand:
    if isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.LOCAL:
        if e.dtype.name in ("uint64", "int64"):
            return ir.ScalarOperand(ir.cast(e, ir.U64))
    fix = (
        f'{which}_desc = T.alloc_local((1,), "uint64"); T.cuda.wgmma.encode_matrix_descriptor('
        f"{which}_desc[0], tile[0, 0], ldo, sdo, swizzle); pass {which}_desc[0]"
    )
    value = _integer(text, f"{which}_desc", e, span, fix)
    if value.dtype.bits != 64:
        raise ContractError(
            f"{text}: {which}_desc must be a 64-bit matrix descriptor, got {value.dtype}",
            hint=fix,
        ).with_span(span)
    return ir.ScalarOperand(ir.cast(value, ir.U64))


def scale_d_operand(text: str, e, span) -> ir.ScalarOperand:
    fix = "scale_d is 0 (D = A·B) or nonzero (D = A·B + D)"
    value = _integer(text, "scale_d", e, span, fix)
    return ir.ScalarOperand(ir.cast(value, ir.I32))


def immediate(text: str, name: str, e, span, allowed) -> ir.Immediate:
    v = static_value(e)
    if v is None or (isinstance(e, ir.Expr) and e.dtype.kind == "float") or v not in allowed:
        shown = "a run-time value" if v is None else v
        raise ContractError(
            f"{text}: {name} must be a compile-time {' or '.join(map(str, allowed))}, got {shown}",
            hint=f"{name} is an immediate of the instruction",
        ).with_span(span)
    return ir.Immediate(int(v))
