"""cp.async: asynchronous copies from global to shared memory (sm_80+; PTX ISA "Data Movement
and Conversion Instructions: cp.async", "cp.async.commit_group", "cp.async.wait_group"),
declared as forms and lowered.

The syntax lines, as the ISA spells them (slots ``op``, ``state_space``, ``src_space``,
``prefetch`` below; ``.ca`` copies 4, 8 or 16 bytes, ``.cg`` 16)::

    cp.async.{ca,cg}.shared{::cta}.global{.L2::{64B,128B,256B}} [dst], [src], cp-size{, src-size}
    cp.async.commit_group
    cp.async.wait_group N
    cp.async.wait_all

Tile form (the real TIRx's spelling)::

    T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], dst, src,
                      scope="thread", chunk_bytes=16[, src_size=n])

``dst`` (shared) and ``src`` (global) are views whose last axis is exactly ``chunk_bytes`` of
storage; their leading axes are repeats, each one copy, issued in row-major order by every
active thread with its own addresses (the views' starts may depend on the thread). Each chunk
must be contiguous and ``chunk_bytes``-aligned on both sides, swizzle included. ``src_size``
(bytes, at most ``chunk_bytes``) reads only that many source bytes and fills the rest of the
chunk with zeros; ``pred`` (a condition) lets only the threads where it holds issue their
copies. The immediates of the PTX line are these keyword parameters in the tile form.

Raw forms: ``T.ptx["cp.async.commit_group"]()``, ``T.ptx["cp.async.wait_group"](n)`` (``n`` a
compile-time int: wait until at most ``n`` of this thread's groups are pending),
``T.ptx["cp.async.wait_all"]()``, and one copy with element operands,
``T.ptx["cp.async.cg.shared.global"](s[i, j], A[r, c], 16[, src_size])``.

No commit, wait or barrier is ever inserted: the kernel says where groups end and waits.
The lowered form is the one of ``IR-NODES-ASYNC``: ``PtxCall(instruction,
(AddressOperand(SharedAddress), AddressOperand(GlobalAddress), Immediate(cp_size)
[, ScalarOperand(src_size)]))``. There is no register fragment: the copies move bytes
between memories, each thread its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ContractError, TirxSyntaxError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from ...isa.raw_forms import (
    byte_offset,
    group_contract,
    no_operands,
    no_tile_form,
    reads_memory,
    repeat_offsets,
    wait_count,
)
from ...isa.shared_rows import RowCheck, check_rows, residue

__all__ = ["SPEC", "SLOTS", "CopyForm", "MIN_ARCH"]

MIN_ARCH = 80

SLOTS = (
    ModifierSlot("op", ("ca", "cg", "commit_group", "wait_group", "wait_all")),
    ModifierSlot("state_space", ("shared", "shared::cta"), optional=True),
    ModifierSlot("src_space", ("global",), optional=True),
    ModifierSlot("prefetch", ("L2::64B", "L2::128B", "L2::256B"), optional=True),
)
_GROUP_OPS = ("commit_group", "wait_group", "wait_all")
_SIZES = {"ca": (4, 8, 16), "cg": (16,)}


def reject(mods: dict) -> str | None:
    op = mods["op"]
    given = [f".{mods[s]}" for s in ("state_space", "src_space", "prefetch") if mods[s]]
    if op in _GROUP_OPS:
        return f"cp.async.{op} takes no modifiers, got {''.join(given)}" if given else None
    if not (mods["state_space"] and mods["src_space"]):
        return f"cp.async.{op} copies .shared{{::cta}}.global: both state spaces are required"
    return None


def build(text: str, mods: dict) -> Contract:
    op = mods["op"]
    if op in _GROUP_OPS:
        return group_contract(text, Family.CP_ASYNC, mods, op == "wait_group", "groups")
    sizes = _SIZES[op]
    *head, last = sizes
    chunk = f"{', '.join(map(str, head))} or {last} bytes" if head else f"{last} bytes"
    about = f"{chunk}, contiguous and aligned to the chunk size"
    operands = (
        OperandSpec("dst", Role.SHARED_CHUNK, "uint8", (), 0, about=about),
        OperandSpec("src", Role.GLOBAL_CHUNK, "uint8", (), 0, about=about),
        OperandSpec("cp_size", Role.IMMEDIATE, "uint32", (), 0, about=chunk),
        OperandSpec(
            "src_size", Role.SCALAR_IN, "uint32", (), 0, optional=True,
            about="bytes read; the rest of the chunk is zero-filled",
        ),
    )  # fmt: skip
    params = (("cache", op), ("sizes", sizes))
    return Contract(text, Family.CP_ASYNC, operands, MIN_ARCH, tuple(mods.items()), params)


@dataclass(frozen=True)
class CopyForm:
    """One copy instruction: its text and cache operator (``ca`` or ``cg``)."""

    text: str
    cache: str

    @property
    def sizes(self) -> tuple[int, ...]:
        return _SIZES[self.cache]


def _copy_form(contract: Contract) -> CopyForm:
    return CopyForm(contract.text, contract.param("cache"))


def _check_size(form: CopyForm, size, what: str) -> int:
    if not isinstance(size, int) or isinstance(size, bool):
        value = static_value(size) if isinstance(size, ir.Expr) else None
        if value is None:
            raise ContractError(f"{form.text}: {what} must be a compile-time int, got {size!r}")
        size = value
    if size not in form.sizes:
        allowed = ", ".join(map(str, form.sizes))
        hint = (
            "cp.async.cg copies 16 bytes; use cp.async.ca for 4 or 8"
            if form.cache == "cg"
            else "cp.async.ca copies 4, 8 or 16 bytes"
        )
        raise ContractError(f"{form.text}: {what} must be {allowed}, got {size}", hint=hint)
    return size


def _src_size(form: CopyForm, value, chunk: int):
    """The zero-fill operand: a u32 expression (checked against ``chunk`` when constant)."""
    if value is None:
        return None
    if isinstance(value, ir.Expr) and value.dtype.kind == "float":
        raise ContractError(f"{form.text}: src_size must be an integer number of bytes")
    if reads_memory(value):
        raise ContractError(
            f"{form.text}: src_size must be computed from thread indices, loop variables, "
            "parameters or kernel variables, not read from a tensor",
            hint="load the value into a variable first: n = sizes[i]; ... src_size=n",
        )
    v = static_value(value)
    if v is not None and not 0 <= v <= chunk:
        raise ContractError(
            f"{form.text}: src_size must be between 0 and chunk_bytes ({chunk}), got {v}",
            hint="src_size bytes are read; the rest of the chunk is filled with zeros",
        )
    return ir.ScalarOperand(ir.cast(value, ir.U32))


# ----------------------------------------------------------------------------- tile form


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    """Check a cp.async tile operation and lower it to one PtxCall per chunk (its scope, the
    target arch and the operand count were checked by :mod:`tirx.transform.tile_ops`)."""
    if contract.modifier("op") in _GROUP_OPS:
        raise no_tile_form(contract, "n" if contract.operands else "")
    form = _copy_form(contract)
    params = dict(op.params)
    unknown = sorted(set(params) - {"chunk_bytes", "src_size", "pred"})
    if unknown:
        raise TirxSyntaxError(f"{form.text}: unexpected parameters {unknown}")
    if "chunk_bytes" not in params:
        raise ContractError(
            f"{form.text} needs chunk_bytes=..., the bytes of one copy",
            hint=f"add chunk_bytes={form.sizes[-1]}",
        )
    chunk = _check_size(form, params["chunk_bytes"], "chunk_bytes")
    zero_fill = _src_size(form, params.get("src_size"), chunk)
    dst, src = op.operands
    _check_view(form, "dst", dst, ir.Scope.SHARED, chunk)
    _check_view(form, "src", src, ir.Scope.GLOBAL, chunk)
    out = []
    for d, s in repeat_offsets(form.text, dst, src, "the chunk"):
        operands = (
            ir.AddressOperand(ir.SharedAddress(dst.buffer, d)),
            ir.AddressOperand(ir.GlobalAddress(src.buffer, s)),
            ir.Immediate(chunk),
        )
        if zero_fill is not None:
            operands += (zero_fill,)
        out.append(ir.PtxCall(form.text, operands, op.span))
    pred = _predicate(form, params.get("pred"))
    if pred is not None:  # a thread whose predicate is false issues none of its copies
        return [ir.If(pred, ir.Seq(tuple(out), op.span), None, op.span)]
    return out


def _predicate(form: CopyForm, value):
    if value is None:
        return None
    if isinstance(value, bool) or isinstance(value, int):
        return ir.const(bool(value))
    if not isinstance(value, ir.Expr) or value.dtype.kind == "float":
        raise ContractError(f"{form.text}: pred must be a condition, got {value!r}")
    if reads_memory(value):
        raise ContractError(
            f"{form.text}: pred must be computed from kernel values, not read from a tensor",
            hint="load the value into a variable first",
        )
    return value if value.dtype.kind == "bool" else ir.cmp(ir.CmpOp.NE, value, 0)


def _check_view(form: CopyForm, name: str, v, scope: ir.Scope, chunk: int) -> None:
    where = f"{form.text}: operand {name}"
    kind = "shared memory (T.alloc_shared)" if scope is ir.Scope.SHARED else "a global tensor"
    if not isinstance(v, ir.View):
        raise ContractError(f"{where} must be a tensor region in {kind}, got a scalar value")
    if v.buffer.scope is not scope:
        raise ContractError(
            f"{where} must be in {kind}, got {v.buffer.scope.value} buffer {v.buffer.name!r}",
            hint="cp.async copies global memory (src) to shared memory (dst)",
        )
    if v.buffer.align < min(chunk, 16):
        raise ContractError(
            f"{where}: {v.buffer.name!r} must be allocated with align >= {chunk} "
            f"(got {v.buffer.align})"
        )
    elems = chunk // v.dtype.bytes if chunk % v.dtype.bytes == 0 else None
    check_rows(
        v,
        RowCheck(
            where,
            chunk,
            chunk,
            hint=f"the last axis of {name} must be one chunk: {elems} x {v.dtype} "
            f"({chunk} bytes), contiguous; leading axes are repeats"
            if elems
            else f"chunk_bytes={chunk} is not a whole number of {v.dtype} elements",
        ),
    )


# ------------------------------------------------------------------------------ raw form


def lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    """Lower ``T.ptx["cp.async..."](...)``: group calls, or one copy with element operands
    (the target arch was checked by :mod:`tirx.transform.raw_ptx`).

    ``address(view, indices) -> (buffer, element index)`` is the lowerer's addressing."""
    text = contract.text
    if contract.modifier("op") in _GROUP_OPS:
        return _group_call(op)
    form = _copy_form(contract)
    spans = list(op.operand_spans) + [None] * 4
    if len(op.operands) not in (3, 4):
        raise ContractError(
            f'T.ptx["{text}"] takes 3 or 4 operands (dst element, src element, cp-size'
            f"[, src-size]), got {len(op.operands)}"
        )
    ops = []
    for i, (name, scope) in enumerate((("dst", ir.Scope.SHARED), ("src", ir.Scope.GLOBAL))):
        e = op.operands[i]
        if not (isinstance(e, ir.ElemLoad) and e.view.buffer.scope is scope):
            raise ContractError(
                f"{text}: operand {name} must be an element of a {scope.value} tensor (its address)"
            ).with_span(spans[i])
        buf, index = address(e.view, e.indices)
        ops.append((buf, index, e.dtype, spans[i]))
    try:
        size = _check_size(form, op.operands[2], "cp-size")
        zero_fill = _src_size(form, op.operands[3] if len(op.operands) == 4 else None, size)
    except ContractError as err:
        raise err.with_span(spans[2]) from None
    operands = []
    for (buf, index, dtype, span), name in zip(ops, ("dst", "src")):
        nbytes = byte_offset(index, dtype)
        rem = residue(nbytes, size)
        if rem:
            raise ContractError(
                f"{text}: operand {name} starts {rem} bytes past a multiple of {size}",
                hint=f"a {size}-byte copy needs {size}-byte aligned addresses",
            ).with_span(span)
        node = ir.SharedAddress if name == "dst" else ir.GlobalAddress
        operands.append(ir.AddressOperand(node(buf, nbytes)))
    operands.append(ir.Immediate(size))
    if zero_fill is not None:
        operands.append(zero_fill)
    return ir.PtxCall(text, tuple(operands), op.span)


def _group_call(op: ir.RawPtx) -> ir.PtxCall:
    text = op.instruction
    if text != "cp.async.wait_group":
        return no_operands(text, op)
    return wait_count(text, op, "groups", "STAGES - 2")


_NO_PICTURE = (  # why the notebook layer draws no lane picture of its operands
    "each thread copies its own chunks between global and shared memory (or orders such copies)"
)
SPEC = FamilySpec(
    Family.CP_ASYNC, "cp.async", SLOTS, reject, build, lower_tile,
    "PTX ISA, Data Movement and Conversion Instructions: cp.async",
    exec_scope=ir.ExecScope.THREAD, lower_raw=lower_raw,
    no_picture=_NO_PICTURE,
)  # fmt: skip

SPECS = (SPEC,)
