"""cp.async.bulk.tensor: the TMA tensor copies (sm_90+; PTX ISA "Data Movement and Conversion
Instructions: cp.async.bulk.tensor" and "Tensor Copy: Tensor Map"), declared as forms and
lowered: the load from global to shared memory here, the store and the reduction
(``cp.reduce.async.bulk.tensor``) from shared to global memory in
:mod:`tirx.families.tma.isa_store`; their parameters and operands are
:mod:`tirx.families.tma.isa_params`' and :mod:`tirx.families.tma.isa_operands`'.

The load's syntax lines tirx has, as the ISA spells them (``.tile``, the default load mode,
may be written or left out)::

    cp.async.bulk.tensor.{1d..5d}.shared::cta.global{.tile}.mbarrier::complete_tx::bytes
        [dstMem], [tensorMap, {c0, ..., c(n-1)}], [mbar]
    cp.async.bulk.tensor.{1d..5d}.shared::cluster.global{.tile}.mbarrier::complete_tx::bytes
        (the same operands; the destination is the issuing CTA's own)
    cp.async.bulk.tensor.{1d..5d}.shared::cluster.global{.tile}.mbarrier::complete_tx::bytes
        .multicast::cluster      [dstMem], [tensorMap, {c..}], [mbar], ctaMask
        (the box lands at dstMem's offset in every CTA of the 16-bit ctaMask, each CTA's
        barrier at mbar's offset receiving the complete-tx; tile form: cta_mask=)

The copy engine reads a *box* of the tensor described by the tensor map, starting at the
coordinates (innermost first, as elements; a box part outside the tensor reads as zero), and
writes it to shared memory from ``dstMem`` on as a dense box image, the 16-byte units of each
1024-, 512- or 256-byte repeat permuted by the map's 128-, 64- or 32-byte swizzle. Then it
performs a complete-tx of the box's bytes on the mbarrier ``mbar``; the bytes are the waiting
threads' once that phase completes.

Tile form (the real TIRx's spelling, ``tile/patterns/tma.py``)::

    T.cuda.tile.apply(T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
                      sA[s, :, :], A[:, :], box=(128, 64), coords=(m0, k0), swizzle=3,
                      mbar=bars[s], scope="thread")

``src`` is a region of a global tensor parameter: its extents are the map's dimensions, its
start the map's origin (compile-time). ``box`` and ``coords`` are outer-to-inner like the
region's axes (the PTX operand lists them innermost first: lowering reverses them). ``swizzle``
is the map's code (0 none, 1 32B, 2 64B, 3 128B), ``l2_promotion`` its L2 code (0..3, default
0). ``dst`` is a shared view shaped like the box whose layout places the box image: for
``swizzle=3`` a ``ComposeLayout(per_element, 3, 3, ...)`` of 128-byte rows (what
``gemm_config.shared_layout(..., "swizzle")`` builds for 64 16-bit columns). With
``coord_steps=((dr, dc), ...)`` the view is ``(*repeats, *box)``, one repeat axis per step:
one copy per repeat, its coordinates ``coords + sum(i_k * step_k)`` and its image the
repeat's (each starting on a swizzle repeat).

Lowered (a ``PtxCall``, operands in this order): ``AddressOperand(SharedAddress dst)``, then
the tensor map -- ``AddressOperand(GlobalAddress(tensor, origin bytes))`` and ``Immediate``
fields (see :mod:`tirx.ir.tensor_map`) --, the coordinates as ``ScalarOperand(int32)``,
innermost first, and ``AddressOperand(SharedAddress mbar)``. The CUDA launcher encodes one
map per distinct field set and passes it as a hidden ``__grid_constant__`` parameter.
"""

from __future__ import annotations

from ...errors import ContractError, TirxSyntaxError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from ...isa.raw_forms import barrier_address, reads_memory
from ...isa.shared_rows import element_offset
from .isa_operands import LOAD
from .isa_params import MAX_BOX, geometry
from .isa_store import (
    REDUCE_SPEC,
    STORE_EXAMPLE,
    STORE_NOTES,
    build_store,
    lower_raw_store,
    lower_store,
)

__all__ = ["SPEC", "SPECS", "SLOTS", "MIN_ARCH", "NOTES", "MAX_BOX"]

MIN_ARCH = 90
EXAMPLE = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
MULTICAST_EXAMPLE = (
    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    ".multicast::cluster"
)

SLOTS = (
    ModifierSlot("dim", ("1d", "2d", "3d", "4d", "5d")),
    ModifierSlot("dst", ("shared::cta", "shared::cluster", "global")),
    ModifierSlot("src", ("global", "shared::cta")),
    ModifierSlot("load_mode", ("tile", "tile::gather4", "tile::scatter4", "im2col"), optional=True),
    ModifierSlot("completion", ("mbarrier::complete_tx::bytes", "bulk_group")),
    ModifierSlot("multicast", ("multicast::cluster",), optional=True),
    ModifierSlot("cta_group", ("cta_group::1", "cta_group::2"), optional=True),
    ModifierSlot("cache", ("L2::cache_hint",), optional=True),
)


def reject(mods: dict) -> str | None:
    store = mods["dst"] == "global"
    use = (STORE_EXAMPLE if store else EXAMPLE).replace(".2d.", f".{mods['dim']}.")
    if store != (mods["src"] == "shared::cta") or mods["src"] == mods["dst"]:
        load = EXAMPLE.replace(".2d.", f".{mods['dim']}.")
        return (
            "tirx supports the tensor load (global to shared::cta or shared::cluster) and the "
            f"tensor store (shared::cta to global): use {load} or "
            + STORE_EXAMPLE.replace(".2d.", f".{mods['dim']}.")
        )
    if mods["load_mode"] not in (None, "tile"):
        return f".{mods['load_mode']} is not supported by tirx (tile mode only): use {use}"
    if store and mods["completion"] != "bulk_group":
        return f"a tensor store completes through bulk async-groups (.bulk_group): use {use}"
    if not store and mods["completion"] != "mbarrier::complete_tx::bytes":
        return f"a tensor load completes on an mbarrier: use {use}"
    if mods["multicast"] and mods["dst"] != "shared::cluster":
        return (
            ".multicast::cluster delivers the box to several blocks' shared memory: use "
            + MULTICAST_EXAMPLE.replace(".2d.", f".{mods['dim']}.")
        )
    for slot in ("cta_group", "cache"):
        if mods[slot]:
            return f".{mods[slot]} is not supported by tirx: use {use}"
    return None


def build(text: str, mods: dict) -> Contract:
    if mods["dst"] == "global":
        return build_store(text, mods)
    rank = int(mods["dim"][0])
    operands = (
        OperandSpec(
            "dst", Role.SHARED_BOX_OUT, "uint8", (), 0,
            about="a shared view shaped like the box, laid out as its (swizzled) image; 128-byte "
            "aligned, swizzled: aligned to the swizzle's repeat",
        ),
        OperandSpec(
            "src", Role.GLOBAL_TENSOR_IN, "uint8", (), 0,
            about=f"a {rank}-d region of a global tensor parameter (its tensor map)",
        ),
        OperandSpec(
            "coords", Role.SCALAR_IN, "int32", (), 0,
            about=f"coords=: {rank} int32 box coordinates, outer to inner, in elements",
        ),
        OperandSpec(
            "mbar", Role.SCALAR_IN, "uint32", (), 0,
            about="mbar=: a uint64 element of shared memory, the mbarrier that receives the "
            "box's bytes as complete-tx",
        ),
    )  # fmt: skip
    if mods["multicast"]:
        operands += (
            OperandSpec(
                "cta_mask", Role.SCALAR_IN, "uint16", (), 0,
                about="cta_mask=: a 16-bit mask of the cluster's block ranks that receive the "
                "box (each at dst's offset, its complete-tx on its barrier at mbar's offset)",
            ),
        )  # fmt: skip
    return Contract(text, Family.CP_ASYNC_BULK_TENSOR, operands, MIN_ARCH, tuple(mods.items()))


# ----------------------------------------------------------------------------- tile form


_PARAMS = ("box", "coords", "mbar", "swizzle", "l2_promotion", "coord_steps", "cta_mask")


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    """Check a tensor-load tile operation and lower it to one PtxCall per repeat (scope, arch
    and the operand count were checked by :mod:`tirx.transform.tile_ops`); a store goes to
    :func:`tirx.families.tma.isa_store.lower_store`."""
    if contract.modifier("dst") == "global":
        return lower_store(contract, op)
    text = contract.text
    rank = int(contract.modifier("dim")[0])
    params = dict(op.params)
    unknown = sorted(set(params) - set(_PARAMS))
    if unknown:
        raise TirxSyntaxError(
            f"{text}: unexpected parameters {unknown}",
            hint="a tensor load takes box=, coords=, mbar=, swizzle=, l2_promotion=, "
            "coord_steps= and, with .multicast::cluster, cta_mask=",
        )
    multicast = contract.modifier("multicast") is not None
    if multicast != ("cta_mask" in params):
        raise ContractError(
            f"{text}: cta_mask= goes with .multicast::cluster"
            + ("" if multicast else ", which the instruction does not have"),
            hint="a multicast load names the blocks that receive the box: cta_mask=0b11 (ranks "
            "0 and 1)"
            if multicast
            else f"add .multicast::cluster: {MULTICAST_EXAMPLE}",
        )
    for need in ("box", "coords", "mbar"):
        if need not in params:
            raise ContractError(
                f"{text} needs {need}=...",
                hint=f"T.cuda.tile.apply(T.ptx[...], dst, src, box=({', '.join(['8'] * rank)}), "
                f'coords=({", ".join(["0"] * rank)}), mbar=bars[0], scope="thread")',
            )
    dst, src = op.operands
    plan = geometry(text, params, dst, src, rank, LOAD)
    mbar = _mbar(text, params["mbar"])
    mask = (_cta_mask(text, params["cta_mask"]),) if multicast else ()
    out = []
    for shared, coords in plan.copies:
        operands = (
            ir.AddressOperand(ir.SharedAddress(dst.buffer, shared)),
            ir.AddressOperand(ir.GlobalAddress(src.buffer, plan.origin)),
            *plan.fields.immediates(),
            *(ir.ScalarOperand(c) for c in reversed(coords)),
            mbar,
            *mask,
        )
        out.append(ir.PtxCall(text, operands, op.span))
    return out


def _cta_mask(text: str, value) -> ir.ScalarOperand:
    """``cta_mask=``: the ranks that receive a multicast box, 16 bits (a value or a constant in
    1 .. 0xFFFF)."""
    if isinstance(value, float) or (isinstance(value, ir.Expr) and value.dtype.kind == "float"):
        raise ContractError(
            f"{text}: cta_mask is a 16-bit integer, got {value!r}",
            hint="one bit per rank of the cluster: cta_mask=(1 << n) - 1 for all n blocks",
        )
    if reads_memory(value):
        raise ContractError(
            f"{text}: cta_mask must be computed from indices, parameters or variables, not read "
            "from a tensor",
            hint="load the value into a variable first",
        )
    v = static_value(value)
    if v is not None and not 0 < v <= 0xFFFF:
        raise ContractError(
            f"{text}: cta_mask is {v:#x}; it names 1 to 16 blocks of the cluster, one bit each",
            hint="bit r sends the box to the block of rank r: 0 < cta_mask <= 0xFFFF",
        )
    return ir.ScalarOperand(ir.cast(ir.as_expr(value), ir.U16))


def _mbar(text: str, value) -> ir.AddressOperand:
    def address(view, indices):
        return view.buffer, ir.as_expr(element_offset(view, tuple(indices)))

    try:
        return barrier_address(text, value, None, address)
    except ContractError as err:
        raise ContractError(
            f"{text}: mbar= {err.message.split(': ', 1)[-1]}",
            hint=err.hint,
        ) from None


def lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    if contract.modifier("dst") == "global":
        return lower_raw_store(contract, op, address, arch)
    raise ContractError(
        f"{contract.text} is called through its tile form (the tensor map is built from a "
        "kernel parameter)",
        hint=f'T.cuda.tile.apply(T.ptx["{contract.text}"], dst, A[:, :], box=..., coords=..., '
        'mbar=bars[s], scope="thread")',
    ).with_span(op.span)


NOTES = (
    """
The tensor load (sm_90), TIRx's tile form:
`T.cuda.tile.apply(T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
dst, A[:, :], box=(rows, cols), coords=(r, c), swizzle=3, mbar=bars[s], scope="thread")`.
`src` is a region of a global tensor *parameter* with compile-time bounds: its extents are the
tensor map's dimensions and its start the map's origin (so `coords` are relative to it, and a
box reaching past its end reads zeros). `box` and `coords` list the axes outer to inner, as
the region does; `coord_steps=((0, 64),)` makes `dst` `(*repeats, *box)` and issues one copy
per repeat, its coordinates moved by the repeat index times the step; the PTX operand takes the coordinates innermost first, and lowering reverses
them. `swizzle` is the map's code: 0 none, 1 32B, 2 64B, 3 128B; `l2_promotion` (0..3) its L2
promotion. `.tile` may be written or left out; `.shared::cluster` is the same copy to the
issuing CTA's own shared memory (no multicast). The thread that issues it usually arms the
barrier first with `mbarrier.arrive.expect_tx` of the box's bytes; each copy performs a
complete-tx of its `prod(box) * bytes` on `mbar`, and the waiting threads
(`T.cuda.mbarrier_wait(bars[s], phase)`) see the box once that phase completes. The raw
`T.ptx[...]` call is refused: the tensor map comes from the tile form's `src`.

The tensor maps: lowering records one per distinct (tensor, origin, dimensions, strides, box,
swizzle, L2 promotion); the CUDA code declares each as a hidden kernel parameter after the
user's, `const __grid_constant__ tirx_tmap tirx_tmapN` (a 64-byte aligned 128-byte struct), and
passes its address. The launcher encodes each with the driver's `cuTensorMapEncodeTiled` from
the tensor's data pointer when it checks a call (a call with the same tensors reuses the
encoded block; new tensors re-encode). The tensor's data pointer must be 16-byte aligned (a
`LaunchError` naming the parameter; the simulator checks it too).

Checked when lowering (a `ContractError` at the operand): `dst` a shared view shaped like the
box, with the tensor's element width; its allocation aligned (`align=`) to 128 bytes, or with a
swizzle to its repeat (1024 bytes for 128B), and its start a multiple of that; every element of
`dst` where the copy engine puts it -- byte `f * size` of the dense box image (`f` its
row-major index), swizzled: `bits[4:4+s] ^= bits[7:7+s]` -- so a `ComposeLayout(3, 3, 3, ...)`
tile of 128-byte f16 rows is accepted with `swizzle=3` and a plain one refused; `src` a region
of a global tensor with compile-time start, one stride per axis, the inner axis dense, the
other strides multiples of 16 bytes and the start 16-byte aligned; `box` 1..256 per axis, its
inner extent a multiple of 16 bytes and, swizzled, at most the swizzle's span (128 bytes for
128B); `coords` int32 values not read from a tensor; `mbar` a uint64 element of a shared tensor,
8-byte aligned; sm_90 or newer. `.cta_group`, `.L2::cache_hint`, the gather4, scatter4
and im2col modes are refused with the supported form. With `.multicast::cluster` (on the
`.shared::cluster` form only) the load takes `cta_mask=`, the 16-bit mask of the cluster's ranks
that receive the box (the real TIRx's parameter; a constant in 1..0xFFFF, never read from a
tensor; required with the modifier, refused without it): each receives it at `dst`'s offset and
the complete-tx on its barrier at `mbar`'s offset ([clusters.md](clusters.md)). A float coordinate (a Python float or a
float expression) is refused at the statement, never truncated: coordinates are s32 integers
(`T.int32(x)` converts one where truncation is meant).

The simulator (`tirx/families/tma/sim.py`): the copy reads the box from the global tensor at issue
(outside the tensor: zeros), performs the complete-tx on the barrier at once, and its bytes
land in shared memory, swizzled, when the barrier's phase completes; they are async-proxy
writes. Faults, naming the copy's line and the other line, block, warp and lane: an access to
the destination before a thread has waited for that phase (the issuing thread's own too), a
copy onto bytes another thread accessed since the last barrier (a stage reused too early), a
copy onto the source of a tensor store whose reads were not waited for, a box that reads
global bytes a pending store or reduction has not written yet, a misaligned data pointer.
"""
    + STORE_NOTES
)

_NO_PICTURE = (  # why the notebook layer draws no lane picture of its operands
    "the copy engine moves a whole box from global to shared memory for one thread"
)
SPEC = FamilySpec(
    Family.CP_ASYNC_BULK_TENSOR, "cp.async.bulk.tensor", SLOTS, reject, build, lower_tile,
    "PTX ISA, Data Movement and Conversion Instructions: cp.async.bulk.tensor",
    exec_scope=ir.ExecScope.THREAD, lower_raw=lower_raw, notes=NOTES, tensor_maps=True,
    no_picture=_NO_PICTURE,
)  # fmt: skip

SPECS = (SPEC, REDUCE_SPEC)
