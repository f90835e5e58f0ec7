"""The TMA tensor store and tensor reduction, shared to global memory (sm_90+; PTX ISA "Data
Movement and Conversion Instructions: cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor",
"cp.async.bulk.commit_group", "cp.async.bulk.wait_group"), declared as forms and lowered.

The syntax lines tirx has, as the ISA spells them (``.tile``, the default mode, may be written
or left out)::

    cp.async.bulk.tensor.{1d..5d}.global.shared::cta{.tile}.bulk_group
        [tensorMap, {c0, ..., c(n-1)}], [srcMem]
    cp.reduce.async.bulk.tensor.{1d..5d}.global.shared::cta.redOp{.tile}.bulk_group
        [tensorMap, {c0, ..., c(n-1)}], [srcMem]
    .redOp = { .add, .min, .max, .inc, .dec, .and, .or, .xor }

The copy engine reads the box image from shared memory at ``srcMem`` (dense, innermost first,
swizzled by the map as a load writes it) and writes the box into the tensor at the
coordinates (innermost first); box elements outside the tensor are not written. The
reduction combines each element with the tensor's (``.redOp``, the element type the map's);
``REDUCE_TYPES`` is the ISA's table of the combinations. Both are bulk async operations of
the issuing thread: ``cp.async.bulk.commit_group`` and ``cp.async.bulk.wait_group[.read]``
(the cp_async_bulk family's) complete them.

Tile form (the real TIRx's spelling, ``tile/patterns/tma.py``; the global region first, as the
PTX operand lists the map first)::

    T.cuda.tile.apply(T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
                      C[:, :], sC[s, :, :], box=(64, 64), coords=(m0, n0), swizzle=3,
                      scope="thread")

``dst`` is a region of a global tensor parameter (its tensor map, as a load's ``src``), ``src``
a shared view that holds the box image (as a load's ``dst``); ``box``, ``coords``,
``coord_steps``, ``swizzle`` and ``l2_promotion`` mean what they mean for the load, and a
load and a store whose maps agree share one map.

Lowered (a ``PtxCall``, operands in PTX order): the tensor map --
``AddressOperand(GlobalAddress(tensor, origin bytes))`` and its ``Immediate`` fields
(:mod:`tirx.ir.tensor_map`) --, the coordinates as ``ScalarOperand(int32)`` innermost first,
then ``AddressOperand(SharedAddress src)``.
"""

from __future__ import annotations

from ...errors import ContractError, TirxSyntaxError
from ...ir import nodes as ir
from ...ir.tensor_map import store_start_below_zero
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from .isa_operands import STORE
from .isa_params import geometry

__all__ = [
    "STORE_EXAMPLE", "REDUCE_EXAMPLE", "REDUCE_TYPES", "REDUCE_SPEC", "build_store",
    "lower_store", "lower_raw_store", "STORE_NOTES",
]  # fmt: skip

MIN_ARCH = 90
STORE_EXAMPLE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
REDUCE_EXAMPLE = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"

# PTX ISA, cp.reduce.async.bulk.tensor: the element types (the tensor map's) of each .redOp;
# .b32/.b64 are 32- and 64-bit integer maps -- but not a signed 64-bit one: the H200 raises
# CUDA_ERROR_ILLEGAL_INSTRUCTION for .and/.or/.xor into an INT64 map while UINT64 works
# (docs/gpu-runs/tma-store.md), so tirx refuses int64 there and the message says to view the
# tensor as uint64 (the same bits)
REDUCE_TYPES = {
    "add": ("uint32", "int32", "uint64", "float32", "float16", "bfloat16"),
    "min": ("uint32", "int32", "uint64", "int64", "float16", "bfloat16"),
    "max": ("uint32", "int32", "uint64", "int64", "float16", "bfloat16"),
    "inc": ("uint32",),
    "dec": ("uint32",),
    "and": ("uint32", "int32", "uint64"),
    "or": ("uint32", "int32", "uint64"),
    "xor": ("uint32", "int32", "uint64"),
}

REDUCE_SLOTS = (
    ModifierSlot("dim", ("1d", "2d", "3d", "4d", "5d")),
    ModifierSlot("dst", ("global",)),
    ModifierSlot("src", ("shared::cta",)),
    ModifierSlot("redop", tuple(REDUCE_TYPES)),
    ModifierSlot("load_mode", ("tile", "im2col_no_offs"), optional=True),
    ModifierSlot("completion", ("bulk_group",)),
    ModifierSlot("cache", ("L2::cache_hint",), optional=True),
)


def reject_reduce(mods: dict) -> str | None:
    use = REDUCE_EXAMPLE.replace(".2d.", f".{mods['dim']}.").replace(".add.", f".{mods['redop']}.")
    if mods["load_mode"] not in (None, "tile"):
        return f".{mods['load_mode']} is not supported by tirx (tile mode only): use {use}"
    if mods["cache"]:
        return f".{mods['cache']} is not supported by tirx: use {use}"
    return None


def build_store(text: str, mods: dict) -> Contract:
    """The contract of a tensor store or reduction (``mods`` one of the ISA's combinations)."""
    rank = int(mods["dim"][0])
    redop = mods.get("redop")
    family = Family.CP_REDUCE_ASYNC_BULK_TENSOR if redop else Family.CP_ASYNC_BULK_TENSOR
    written = f"updated element by element with .{redop}" if redop else "written"
    operands = (
        OperandSpec(
            "dst", Role.GLOBAL_TENSOR_OUT, "uint8", (), 0,
            about=f"a {rank}-d region of a global tensor parameter (its tensor map), {written}",
        ),
        OperandSpec(
            "coords", Role.SCALAR_IN, "int32", (), 0,
            about=f"coords=: {rank} int32 box coordinates, outer to inner, in elements",
        ),
        OperandSpec(
            "src", Role.SHARED_BOX_IN, "uint8", (), 0,
            about="a shared view shaped like the box, laid out as its (swizzled) image; 128-byte "
            "aligned, swizzled: aligned to the swizzle's repeat",
        ),
    )  # fmt: skip
    return Contract(text, family, operands, MIN_ARCH, tuple(mods.items()))


_PARAMS = ("box", "coords", "swizzle", "l2_promotion", "coord_steps")


def lower_store(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    """Check a tensor-store (or reduction) tile operation and lower it to one PtxCall per
    repeat (scope, arch and the operand count were checked by :mod:`tirx.transform.tile_ops`)."""
    text = contract.text
    rank = int(contract.modifier("dim")[0])
    params = dict(op.params)
    if "mbar" in params:
        raise ContractError(
            f"{text} completes through bulk async-groups, not an mbarrier: drop mbar=",
            hint='commit it (T.ptx["cp.async.bulk.commit_group"]()) and wait for it '
            '(T.ptx["cp.async.bulk.wait_group.read"](0) before reusing the shared source, '
            'T.ptx["cp.async.bulk.wait_group"](0) before reading the tensor)',
        )
    unknown = sorted(set(params) - set(_PARAMS))
    if unknown:
        raise TirxSyntaxError(
            f"{text}: unexpected parameters {unknown}",
            hint="a tensor store takes box=, coords=, swizzle=, l2_promotion= and coord_steps=",
        )
    for need in ("box", "coords"):
        if need not in params:
            raise ContractError(
                f"{text} needs {need}=...",
                hint=f"T.cuda.tile.apply(T.ptx[...], C[:, :], src, box=({', '.join(['8'] * rank)}), "
                f'coords=({", ".join(["0"] * rank)}), scope="thread")',
            )
    dst, src = op.operands
    plan = geometry(text, params, src, dst, rank, STORE)
    _check_reduce_type(contract, dst.dtype)
    out = []
    for shared, coords in plan.copies:
        for axis, c in enumerate(coords):  # outer to inner, as the user wrote them
            if isinstance(c, ir.Const) and c.value < 0:
                message, hint = store_start_below_zero(text, axis, c.value)
                raise ContractError(message, hint=hint)
        operands = (
            ir.AddressOperand(ir.GlobalAddress(dst.buffer, plan.origin)),
            *plan.fields.immediates(),
            *(ir.ScalarOperand(c) for c in reversed(coords)),
            ir.AddressOperand(ir.SharedAddress(src.buffer, shared)),
        )
        out.append(ir.PtxCall(text, operands, op.span))
    return out


def _check_reduce_type(contract: Contract, dtype) -> None:
    redop = dict(contract.modifiers).get("redop")
    if redop is None or dtype.name in REDUCE_TYPES[redop]:
        return
    others = sorted(r for r, types in REDUCE_TYPES.items() if dtype.name in types)
    if dtype.name == "int64" and redop in ("and", "or", "xor"):
        raise ContractError(
            f"{contract.text}: operand dst holds int64 elements; the H200 raises an illegal "
            f"instruction for .{redop} into a signed 64-bit tensor map",
            hint='view the tensor as uint64 (the same bits): .view("uint64") on the torch '
            "tensor and a uint64 dst",
        )
    raise ContractError(
        f"{contract.text}: operand dst holds {dtype} elements; .{redop} reduces "
        f"{', '.join(REDUCE_TYPES[redop])} (the element type is the tensor map's)",
        hint=(f"for {dtype}, the ISA has ." + ", .".join(others)) if others else
        f"the ISA has no tensor reduction of {dtype}: store the tile (cp.async.bulk.tensor) "
        "and combine it some other way",
    )  # fmt: skip


def lower_raw_store(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    raise ContractError(
        f"{contract.text} is called through its tile form (the tensor map is built from a "
        "kernel parameter)",
        hint=f'T.cuda.tile.apply(T.ptx["{contract.text}"], C[:, :], src, box=..., coords=..., '
        'scope="thread")',
    ).with_span(op.span)


STORE_NOTES = """
The tensor store (sm_90), TIRx's tile form:
`T.cuda.tile.apply(T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
C[:, :], src, box=(rows, cols), coords=(r, c), swizzle=3, scope="thread")`: the global region
first (its tensor map, as a load's `src`), then the shared view that holds the box image (as
a load's `dst`, with the same checks of shape, alignment and swizzled layout); `box`,
`coords`, `coord_steps`, `swizzle` and `l2_promotion` as for the load, and a load and a store
whose fields agree share one tensor map. The copy engine writes the box's elements that lie
inside the region (the others are not written). A box may run past the region's far end but
not start before it: an H100 stops a store or reduction with a negative coordinate with an
illegal instruction (which also poisons the process's CUDA context), so a compile-time
negative coordinate is refused when the kernel is lowered and a run-time one stops the
simulator at the statement. It is a bulk async operation of the issuing
thread: `T.ptx["cp.async.bulk.commit_group"]()` closes its group,
`T.ptx["cp.async.bulk.wait_group.read"](n)` lets the thread reuse the shared source and
`T.ptx["cp.async.bulk.wait_group"](n)` makes the tensor's bytes its own (other threads: a
barrier after the wait). Threads that wrote the source with ordinary stores (or stmatrix)
must execute `fence.proxy.async.shared::cta` before the barrier that precedes the store's
issue. `mbar=` is refused (the store completes through bulk groups), and so is the raw
`T.ptx[...]` call (the tensor map comes from the tile form's `dst`).
"""

REDUCE_NOTES = """
The tensor reduction (sm_90), TIRx's tile form:
`T.cuda.tile.apply(T.ptx["cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"],
C[:, :], src, box=(rows, cols), coords=(r, c), swizzle=3, scope="thread")`, operands and
parameters as the tensor store's (`cp.async.bulk.tensor...global.shared::cta...`): the copy
engine combines each box element inside the region with the tensor's, element by element
(each an atomic update of its own, in no particular order): `.add`, `.min`, `.max`, `.inc`
(`old >= v ? 0 : old + 1`), `.dec` (`old == 0 or old > v ? v : old - 1`), `.and`, `.or`,
`.xor`. The element type is the tensor map's, the tensor's dtype; the ISA's combinations:
`.add` u32, s32, u64, f32, f16, bf16; `.min`/`.max` u32, s32, u64, s64, f16, bf16; `.inc`/`.dec`
u32; `.and`/`.or`/`.xor` 32-bit integers and uint64 (an int64 map is refused: the H200 raises an
illegal instruction for it; view the tensor as uint64, the same bits; another dtype is a `ContractError` at `dst`
naming the ones the ISA has). Groups, waits and the proxy fence as for the tensor store.
`.im2col_no_offs` and `.L2::cache_hint` are refused with the supported form.

The simulator (`tirx/families/tma/sim_store.py`, the groups `tirx/sim/bulk_groups.py`): a
store or reduction reads its shared source at issue -- bytes written in this block, published
to the async proxy by their writers' `fence.proxy.async.shared::cta` ("the copy engine may read
stale bytes" otherwise), with a barrier between the writers and the issuing thread -- and its
elements reach the tensor when a full `cp.async.bulk.wait_group` of the issuing thread covers
it, or at the end of the block, in issue order; a reduction then computes `old op v` as the
ISA says: integers wrap, `.add.f32` rounds to nearest even, `.add.f16`/`.bf16` round the exact
sum once. Faults, naming both lines, block, warp and lane: a write to the source before a
`wait_group.read` of the issuing thread covers it (by another thread: also without a barrier
after that wait); an access to the destination before a full wait covers it, or another store
onto it (two reductions may overlap); a block that ends before the reads were waited for
(a store never committed says so); a source not 128-byte aligned (swizzled: not on its repeat);
a tensor data pointer that is not a multiple of 16.
"""

_NO_PICTURE = (  # why the notebook layer draws no lane picture of its operands
    "the copy engine moves a whole box from shared to global memory for one thread"
)
REDUCE_SPEC = FamilySpec(
    Family.CP_REDUCE_ASYNC_BULK_TENSOR, "cp.reduce.async.bulk.tensor", REDUCE_SLOTS,
    reject_reduce, build_store, lower_store,
    "PTX ISA, Data Movement and Conversion Instructions: cp.reduce.async.bulk.tensor",
    exec_scope=ir.ExecScope.THREAD, lower_raw=lower_raw_store, notes=REDUCE_NOTES,
    tensor_maps=True, no_picture=_NO_PICTURE,
)  # fmt: skip
