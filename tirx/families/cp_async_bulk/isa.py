"""cp.async.bulk: asynchronous bulk copies from shared to global memory (sm_90+; PTX ISA "Data
Movement and Conversion Instructions: cp.async.bulk", "cp.async.bulk.commit_group",
"cp.async.bulk.wait_group"), declared as forms and lowered.

The syntax lines tirx has, as the ISA spells them::

    cp.async.bulk.global.shared::cta.bulk_group [dstMem], [srcMem], size
    cp.async.bulk.commit_group
    cp.async.bulk.wait_group N
    cp.async.bulk.wait_group.read N

The copy hands ``size`` bytes of shared memory (contiguous, from ``srcMem``) to the copy
engine, which writes them to global memory from ``dstMem`` on; the issuing thread goes on at
once. Both addresses are 16-byte aligned and ``size`` is a multiple of 16. The copy belongs to
the thread's current bulk group, which ``commit_group`` closes; ``wait_group N`` waits until at
most the ``N`` newest bulk groups of the thread are pending, ``wait_group.read N`` only until
their reads of the source are done (the shared bytes may be overwritten; the global bytes may
not have landed yet). Stores of the generic proxy (ordinary stores, stmatrix, cp.async) are
seen by the copy engine (the async proxy) only after a ``fence.proxy.async`` (see
:mod:`tirx.families.fence_proxy.isa`) by the storing threads, then a barrier.

Raw form: ``T.ptx["cp.async.bulk.global.shared::cta.bulk_group"](Out[r, c], s[i, j], nbytes)``
with the global destination element, the shared source element (their addresses) and the byte
count (a compile-time int or a u32 expression). Tile form::

    T.cuda.tile.apply(T.ptx["cp.async.bulk.global.shared::cta.bulk_group"], dst, src,
                      scope="thread")

``dst`` (global) and ``src`` (shared) views of equal bytes; the last axis of each is one copy,
contiguous in storage (swizzle included), and the leading axes are repeats, one copy each,
issued in row-major order by every active thread.

Other spellings of the ISA's lines (``.L2::cache_hint``, ``.cp_mask``, a ``shared::cluster``
destination, the global-to-shared direction) are refused with the nearest supported form.

Lowered (PTX order): ``AddressOperand(GlobalAddress)``, ``AddressOperand(SharedAddress)``,
``ScalarOperand(size as u32)``; ``wait_group{.read}`` takes ``Immediate(n)``.
"""

from __future__ import annotations

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

__all__ = ["SPEC", "SLOTS", "MIN_ARCH", "COPY", "ALIGN", "NOTES"]

MIN_ARCH = 90
ALIGN = 16  # bytes: both addresses and the size (PTX ISA, cp.async.bulk)
COPY = "cp.async.bulk.global.shared::cta.bulk_group"

SLOTS = (
    ModifierSlot("head", ("global", "shared::cluster", "commit_group", "wait_group")),
    ModifierSlot("src", ("shared::cta", "global"), optional=True),
    ModifierSlot("completion", ("bulk_group", "mbarrier::complete_tx::bytes"), optional=True),
    ModifierSlot("cache", ("L2::cache_hint",), optional=True),
    ModifierSlot("cp_mask", ("cp_mask",), optional=True),
    ModifierSlot("read", ("read",), optional=True),
)
_GROUP_OPS = ("commit_group", "wait_group")
_EXTRAS = ("src", "completion", "cache", "cp_mask", "read")


def reject(mods: dict) -> str | None:
    head = mods["head"]
    given = "".join(f".{mods[s]}" for s in _EXTRAS if mods[s] and s != "read")
    if head in _GROUP_OPS:
        if given:
            return f"cp.async.bulk.{head} takes no modifiers, got {given}"
        if mods["read"] and head != "wait_group":
            return "only cp.async.bulk.wait_group has a .read form"
        return None
    if mods["read"]:
        return ".read belongs to cp.async.bulk.wait_group"
    if head == "shared::cluster" or mods["src"] == "global":
        return (
            "tirx supports only the shared-to-global bulk copy (the store); bulk copies into "
            f"shared memory are not supported: use {COPY}"
        )
    if mods["src"] != "shared::cta":
        return f"the bulk store copies .global.shared::cta: use {COPY}"
    if mods["completion"] != "bulk_group":
        return f"a bulk store completes through a bulk group (.bulk_group): use {COPY}"
    if mods["cache"] or mods["cp_mask"]:
        extra = ".L2::cache_hint" if mods["cache"] else ".cp_mask"
        return f"{extra} is not supported by tirx: use {COPY}"
    return None


def build(text: str, mods: dict) -> Contract:
    head = mods["head"]
    if head in _GROUP_OPS:
        waits = head == "wait_group"
        return group_contract(text, Family.CP_ASYNC_BULK, mods, waits, "bulk groups", MIN_ARCH)
    block = f"contiguous, {ALIGN}-byte aligned"
    operands = (
        OperandSpec("dst", Role.GLOBAL_BLOCK_OUT, "uint8", (), 0, about=block),
        OperandSpec("src", Role.SHARED_BLOCK_IN, "uint8", (), 0, about=block),
        OperandSpec(
            "size", Role.SCALAR_IN, "uint32", (), 0,
            about=f"bytes copied, a positive multiple of {ALIGN}",
        ),
    )  # fmt: skip
    return Contract(text, Family.CP_ASYNC_BULK, operands, MIN_ARCH, tuple(mods.items()))


def _check_static_size(text: str, size: int, what: str = "size") -> None:
    if size <= 0 or size % ALIGN:
        raise ContractError(
            f"{text}: {what} must be a positive multiple of {ALIGN} bytes, got {size}",
            hint=f"a bulk copy moves whole {ALIGN}-byte units: pad the row to a multiple of "
            f"{ALIGN} bytes",
        )
    if size >= 2**32:
        raise ContractError(f"{text}: {what} must fit in 32 bits, got {size}")


def _size_operand(text: str, value):
    """The byte count: a u32 expression, checked when it is a compile-time constant."""
    if isinstance(value, ir.Expr) and value.dtype.kind == "float":
        raise ContractError(
            f"{text}: size must be an integer number of bytes",
            hint="convert it: T.uint32(...), or pass an int",
        )
    if reads_memory(value):
        raise ContractError(
            f"{text}: size must be computed from thread indices, loop variables, parameters "
            "or kernel variables, not read from a tensor",
            hint="load the value into a variable first: n = sizes[i]; then pass n",
        )
    v = static_value(value)
    if v is not None:
        _check_static_size(text, v)
    return ir.ScalarOperand(ir.cast(value, ir.U32)), v


def _check_end(text: str, name: str, buf: ir.Buffer, start, size: int | None, span) -> None:
    """A statically known copy must lie inside its buffer."""
    s = static_value(start)
    if size is None or s is None:
        return
    if s < 0 or s + size > buf.nbytes:
        raise ContractError(
            f"{text}: operand {name} covers bytes {s}..{s + size - 1} of {buf.name!r}, which "
            f"holds {buf.nbytes} bytes",
            hint="the copy must lie inside its tensor: shorten it or start it earlier",
        ).with_span(span)


def _check_buffer_align(text: str, name: str, buf: ir.Buffer, span) -> None:
    if buf.align < ALIGN:
        raise ContractError(
            f"{text}: operand {name}: {buf.name!r} must be allocated with align >= {ALIGN} "
            f"(got {buf.align})"
        ).with_span(span)


# ------------------------------------------------------------------------------ raw form


def lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    """Lower ``T.ptx["cp.async.bulk..."](...)``: group calls, or one copy with element operands
    (the target arch was checked by :mod:`tirx.transform.raw_ptx`).

    ``address(view, indices) -> (buffer, element index)`` is the lowerer's addressing."""
    text = contract.text
    if contract.modifier("head") in _GROUP_OPS:
        return _group_call(contract, op)
    if len(op.operands) != 3:
        raise ContractError(
            f'T.ptx["{text}"] takes 3 operands (dst element of a global tensor, src element '
            f"of a shared tensor, size in bytes), got {len(op.operands)}"
        )
    spans = list(op.operand_spans) + [None] * 3
    try:
        size_op, size = _size_operand(text, op.operands[2])
    except ContractError as err:
        raise err.with_span(spans[2]) from None
    operands = []
    for i, (name, scope) in enumerate((("dst", ir.Scope.GLOBAL), ("src", ir.Scope.SHARED))):
        e, span = op.operands[i], spans[i]
        kind = "global tensor" if scope is ir.Scope.GLOBAL else "shared tensor (T.alloc_shared)"
        if not (isinstance(e, ir.ElemLoad) and e.view.buffer.scope is scope):
            got = f"{e.view.buffer.scope.value} tensor" if isinstance(e, ir.ElemLoad) else "value"
            raise ContractError(
                f"{text}: operand {name} must be an element of a {kind} (its address), got a {got}",
                hint="the bulk store copies shared memory (src, second) to global memory "
                "(dst, first): T.ptx[...](Out[r, c], s[i, j], nbytes)",
            ).with_span(span)
        buf, index = address(e.view, e.indices)
        _check_buffer_align(text, name, buf, span)
        nbytes = byte_offset(index, e.dtype)
        rem = residue(nbytes, ALIGN)
        if rem:
            raise ContractError(
                f"{text}: operand {name} starts {rem} bytes past a multiple of {ALIGN}",
                hint=f"both addresses of a bulk copy must be {ALIGN}-byte aligned",
            ).with_span(span)
        _check_end(text, name, buf, nbytes, size, span)
        node = ir.GlobalAddress if scope is ir.Scope.GLOBAL else ir.SharedAddress
        operands.append(ir.AddressOperand(node(buf, nbytes)))
    return ir.PtxCall(text, (*operands, size_op), op.span)


def _group_call(contract: Contract, op: ir.RawPtx) -> ir.PtxCall:
    if contract.modifier("head") == "commit_group":
        return no_operands(contract.text, op)
    return wait_count(contract.text, op, "bulk groups", "0")


# ----------------------------------------------------------------------------- tile form


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    """Check a bulk-store tile operation and lower it to one PtxCall per copy (its scope, the
    target arch and the operand count were checked by :mod:`tirx.transform.tile_ops`)."""
    text = contract.text
    if contract.modifier("head") in _GROUP_OPS:
        raise no_tile_form(contract, "n" if contract.operands else "")
    if op.params:
        raise TirxSyntaxError(
            f"{text}: unexpected parameters {sorted(dict(op.params))}",
            hint="the copy's size is the bytes of the views' last axis",
        )
    dst, src = op.operands
    _check_view(text, "dst", dst, ir.Scope.GLOBAL)
    _check_view(text, "src", src, ir.Scope.SHARED)
    chunk = dst.shape[-1] * dst.dtype.bytes
    if src.shape[-1] * src.dtype.bytes != chunk:
        raise ContractError(
            f"{text}: operand src's last axis holds {src.shape[-1] * src.dtype.bytes} bytes, "
            f"dst's {chunk}",
            hint="each copy moves the bytes of one row of both views: make the rows equal",
        )
    _check_static_size(text, chunk, "the bytes of the last axis")
    for name, v in (("dst", dst), ("src", src)):
        check_rows(
            v,
            RowCheck(
                f"{text}: operand {name}",
                chunk,
                ALIGN,
                hint=f"the last axis of {name} must be one copy: {chunk} contiguous bytes "
                f"starting at a multiple of {ALIGN}; leading axes are repeats",
            ),
        )
    out = []
    for d, s in repeat_offsets(text, dst, src, "the last"):
        operands = (
            ir.AddressOperand(ir.GlobalAddress(dst.buffer, d)),
            ir.AddressOperand(ir.SharedAddress(src.buffer, s)),
            ir.ScalarOperand(ir.cast(ir.const(chunk), ir.U32)),
        )
        out.append(ir.PtxCall(text, operands, op.span))
    return out


def _check_view(text: str, name: str, v, scope: ir.Scope) -> None:
    where = f"{text}: operand {name}"
    kind = "shared memory (T.alloc_shared)" if scope is ir.Scope.SHARED else "a global tensor"
    if not isinstance(v, ir.View):
        raise ContractError(f"{where} must be a tensor region in {kind}, got a scalar value")
    if v.buffer.scope is not scope:
        raise ContractError(
            f"{where} must be in {kind}, got {v.buffer.scope.value} buffer {v.buffer.name!r}",
            hint="the bulk store copies shared memory (src) to global memory (dst)",
        )
    if v.buffer.align < ALIGN:
        raise ContractError(
            f"{where}: {v.buffer.name!r} must be allocated with align >= {ALIGN} "
            f"(got {v.buffer.align})"
        )


NOTES = """
The bulk store (sm_90): `T.ptx["cp.async.bulk.global.shared::cta.bulk_group"](Out[r, c],
s[i, j], nbytes)` hands `nbytes` of shared memory from `s[i, j]` on to the copy engine, which
writes them to global memory from `Out[r, c]` on; the thread goes on at once. The tile form
`T.cuda.tile.apply(T.ptx["cp.async.bulk.global.shared::cta.bulk_group"], dst, src,
scope="thread")` takes a global `dst` and a shared `src` view: the last axis of each is one
copy, the leading axes are repeats (one copy each). Groups: `T.ptx["cp.async.bulk.commit_group"]()`
closes the thread's current bulk group; `T.ptx["cp.async.bulk.wait_group"](n)` waits until at
most `n` of the thread's newest bulk groups are pending (their global bytes written),
`T.ptx["cp.async.bulk.wait_group.read"](n)` only until their reads of shared memory are done
(the source may be reused). Stored shared memory is seen by the copy engine only after
`fence.proxy.async.shared::cta` by the storing threads, then a barrier when another thread
issues the copy. Nothing is inserted: the kernel fences, commits and waits.

Checked when lowering (a `ContractError` at the operand): `dst` an element (or view) of a global
tensor and `src` of a shared one; both 16-byte aligned where the offset's residue is known
(swizzle included in the tile form, whose rows must be contiguous in storage: a row through a
`ComposeLayout` must stay inside one swizzle unit); the size a positive multiple of 16 when it
is a compile-time int (a run-time u32 expression is allowed), not read from a tensor, and the
copy inside its tensors when that is known; the waits' `n` a compile-time int >= 0; sm_90 or
newer. `.L2::cache_hint`, `.cp_mask`, the copies into shared memory (`.shared::cluster`
destinations) and the mbarrier completion are refused with the supported form as the hint.

The simulator (`tirx/families/cp_async_bulk/sim.py`, `sim_copies.py`): a copy reads its source at issue and its bytes land in
global memory at the full wait that covers it, or at the end of the block. Faults, each naming
the lines involved and the block, warp and lane: a size or address the ISA refuses at run
time, a copy outside its tensor or shared allocation; source bytes stored through the generic
proxy (stores, stmatrix, landed cp.async) since their writer's last `fence.proxy.async` ("the
copy engine may read stale bytes"); the usual shared-memory race between the storing threads
and the issuing thread (a barrier after the fence); a write to the source before a `.read` or
full wait of the issuing thread covers the copy (and, by another thread, without a barrier
after that wait); an access to the destination before a full
wait covers it, or a second copy onto it; a block that ends while a copy's reads were never
waited for. `compute-sanitizer` documents none of the async-proxy checks; the parity suite has
the bulk store as a clean case.
"""

_NO_PICTURE = (  # why the notebook layer draws no lane picture of its operands
    "each thread copies its own chunks between global and shared memory (or orders such copies)"
)
SPEC = FamilySpec(
    Family.CP_ASYNC_BULK, "cp.async.bulk", SLOTS, reject, build, lower_tile,
    "PTX ISA, Data Movement and Conversion Instructions: cp.async.bulk",
    exec_scope=ir.ExecScope.THREAD, lower_raw=lower_raw, notes=NOTES,
    no_picture=_NO_PICTURE,
)  # fmt: skip

SPECS = (SPEC,)
