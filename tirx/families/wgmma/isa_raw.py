"""The raw form of the wgmma family: ``T.ptx["wgmma..."](...)`` calls lowered to the PtxCalls
of docs/instructions.md, and the operand checks the tile form shares (scale-d, the
immediates). The checks are the same on every target: a call this lowering accepts is one
the simulator runs and the GPU assembles."""

from __future__ import annotations

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...isa.core import Contract
from ...isa.raw_forms import no_operands, reads_memory
from .isa_forms import LINES

__all__ = ["lower_raw", "scale_d_operand", "immediate", "MAX_WAIT", "IMMEDIATE_VALUES", "line"]

MAX_WAIT = 7  # wait_group's N as the real TIRx registers it (SASS clamps larger ones to 7)
IMMEDIATE_VALUES = {"scale_a": (1, -1), "scale_b": (1, -1), "trans_a": (0, 1), "trans_b": (0, 1)}
_ACC_DTYPES = {"f32": ("float32",), "s32": ("int32", "uint32"), "f16": ("uint32", "int32")}


def line(contract: Contract):
    """The syntax line (:class:`tirx.families.wgmma.isa_forms.Line`) of an mma_async form."""
    return next(ln for ln in LINES if ln.name == contract.param("line"))


def lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    """``T.ptx["wgmma..."](...)`` (the target arch was checked by the caller). mma_async's
    accumulator is its registers as elements of local 32-bit tensors (a whole tensor given as
    one operand stands for its elements in order); A is a descriptor (ss) or four 32-bit
    registers (rs), told apart by the operand count; then b-desc, scale-d and the line's
    immediates."""
    text, act = contract.text, contract.modifier("action")
    if act in ("fence", "commit_group"):
        return no_operands(text, op)
    spans = list(op.operand_spans) + [None] * (len(op.operands) + 12)
    if act == "wait_group":
        if len(op.operands) != 1:
            raise ContractError(
                f'T.ptx["{text}"](n) takes one operand, the number of wgmma groups that may '
                f"stay pending, got {len(op.operands)}"
            ).with_span(op.span)
        return ir.PtxCall(text, (_wait_count(text, op.operands[0], spans[0]),), op.span)
    form = line(contract)
    acc = contract.param("acc_type")
    nd = contract.operands[0].registers
    given = op.operands
    ss_imms, rs_imms = form.immediates(False), form.immediates(True)
    counts = {nd + 3 + len(ss_imms): False, nd + 6 + len(rs_imms): True}
    if len(given) not in counts:
        what = {"f32": "float32", "s32": "int32", "f16": "uint32 (f16x2)"}[acc]
        ss = ", ".join(("a_desc", "b_desc", "scale_d", *ss_imms))
        rs = ", ".join(("a0, a1, a2, a3", "b_desc", "scale_d", *rs_imms))
        raise ContractError(
            f'T.ptx["{text}"] takes {nd} accumulator registers (or one local {what} tensor of '
            f"{nd} elements), then {ss} ({nd + 3 + len(ss_imms)} operands), or A in four "
            f"32-bit registers: {rs} ({nd + 6 + len(rs_imms)} operands); got {len(given)}",
            hint=f'e.g. T.ptx["{text}"](acc, a_desc[0], b_desc[0], 1'
            + "".join(f", {IMMEDIATE_VALUES[n][0]}" for n in ss_imms)
            + f') with acc = T.alloc_local(({nd},), "{_ACC_DTYPES[acc][0]}")',
        ).with_span(op.span)
    registers_a = counts[len(given)]
    regs = _registers(text, "accumulator", given[:nd], spans, address, _ACC_DTYPES[acc], True)
    rest = list(zip(given[nd:], spans[nd:]))
    if registers_a:
        a = _registers(text, "A", [e for e, _ in rest[:4]], [s for _, s in rest[:4]], address,
                       ("uint32", "int32", "float32"), False)  # fmt: skip
        rest = rest[4:]
    else:
        a = _descriptor(text, "a", *rest[0])
        rest = rest[1:]
    b_desc = _descriptor(text, "b", *rest[0])
    scale_d = scale_d_operand(text, *rest[1])
    names = rs_imms if registers_a else ss_imms
    imms = [immediate(text, n, e, s, IMMEDIATE_VALUES[n]) for n, (e, s) in zip(names, rest[2:])]
    return ir.PtxCall(text, (regs, a, b_desc, scale_d, *imms), op.span)


def _registers(text, what, exprs, spans, address, dtypes, is_output) -> ir.RegVector:
    """Elements of local 32-bit tensors as distinct registers (U32 for A: its registers are
    .b32 whatever the elements they pack)."""
    regs, seen = [], {}
    prefix = "d" if is_output else "a"
    for i, (e, span) in enumerate(zip(exprs, spans)):
        ok = isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.LOCAL
        if not ok or e.dtype.name not in dtypes:
            got = "a value"
            if isinstance(e, ir.ElemLoad):
                scope = e.view.buffer.scope
                got = f"a {e.dtype} element" if ok else f"an element of a {scope.value} tensor"
            verb = "read and written" if is_output else "read"
            raise ContractError(
                f"{text}: the {what} registers must be elements of a local "
                f"{' or '.join(dtypes)} tensor (they are {verb}), got {got}",
                hint=f'{what.lower()} = T.alloc_local((n,), "{dtypes[0]}"); pass it whole, or its '
                "elements one by one",
            ).with_span(span)
        buf, index = address(e.view, e.indices)
        slot = static_value(index)
        if slot is None:
            raise ContractError(f"{text}: a {what} register needs a compile-time index").with_span(
                span
            )
        key = (buf, slot)
        if key in seen and is_output:
            raise ContractError(
                f"{text}: {what} registers {prefix}{seen[key]} and {prefix}{i} are the same "
                "element",
                hint="pass distinct elements (or one tensor of exactly that many elements)",
            ).with_span(span)
        seen[key] = i
        regs.append(ir.LocalReg(buf, slot, e.dtype if is_output else ir.U32))
    return ir.RegVector(tuple(regs), is_output)


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
