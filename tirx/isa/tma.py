"""cp.async.bulk.tensor: the TMA tensor copy from global to shared memory (sm_90+; PTX ISA
"Data Movement and Conversion Instructions: cp.async.bulk.tensor" and "Tensor Copy: Tensor
Map"), declared as forms and lowered.

The syntax lines tirx has, as the ISA spells them (``.tile``, the default load mode, may be
written or left out)::

    cp.async.bulk.tensor.{1d..5d}.shared::cta.global{.tile}.mbarrier::complete_tx::bytes
        [dstMem], [tensorMap, {c0, ..., c(n-1)}], [mbar]
    cp.async.bulk.tensor.{1d..5d}.shared::cluster.global{.tile}.mbarrier::complete_tx::bytes
        (the same operands; no multicast, the destination is the issuing CTA's own)

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

import itertools
import math

from ..errors import ContractError, TirxSyntaxError
from ..ir import nodes as ir
from ..ir.simplify import static_value
from ..ir.tensor_map import SWIZZLE_SPAN, TensorMapFields
from ..layout.swizzle import ComposeLayout
from .core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from .cp_async import _bytes, _reads_memory
from .mbarrier import barrier_address
from .shared_rows import element_offset, residue

__all__ = ["SPEC", "SLOTS", "MIN_ARCH", "NOTES", "MAX_BOX", "swizzle_byte_offset"]

MIN_ARCH = 90
MAX_BOX = 256  # elements per box dimension (PTX ISA, Tensor Map: boxDim)
ALIGN_UNSWIZZLED = 128  # bytes: the shared destination of a tensor copy
MAX_STRIDE = 1 << 40  # bytes: a global stride (cuTensorMapEncodeTiled)
EXAMPLE = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"

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
    use = EXAMPLE.replace(".2d.", f".{mods['dim']}.")
    if mods["dst"] == "global" or mods["src"] != "global":
        return f"tirx supports the tensor load (global to shared) only: use {use}"
    if mods["load_mode"] not in (None, "tile"):
        return f".{mods['load_mode']} is not supported by tirx (tile mode only): use {use}"
    if mods["completion"] != "mbarrier::complete_tx::bytes":
        return f"a tensor load completes on an mbarrier: use {use}"
    for slot in ("multicast", "cta_group", "cache"):
        if mods[slot]:
            return f".{mods[slot]} is not supported by tirx: use {use}"
    return None


def build(text: str, mods: dict) -> Contract:
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
    return Contract(text, Family.CP_ASYNC_BULK_TENSOR, operands, MIN_ARCH, tuple(mods.items()))


def swizzle_byte_offset(offset: int, swizzle: int) -> int:
    """Where the byte ``offset`` of a dense box image lands under the map's ``swizzle`` code:
    the 16-byte unit number's low ``swizzle`` bits XOR-ed with the bits of the 128-byte row
    number (``bits[4:4+s] ^= bits[7:7+s]``, PTX ISA "Tensor Map: swizzling modes")."""
    return offset ^ ((offset >> 3) & (((1 << swizzle) - 1) << 4))


# ----------------------------------------------------------------------------- tile form


_PARAMS = ("box", "coords", "mbar", "swizzle", "l2_promotion", "coord_steps")


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    """Check a tensor-load tile operation and lower it to one PtxCall per repeat (scope, arch
    and the operand count were checked by :mod:`tirx.transform.tile_ops`)."""
    text = contract.text
    rank = int(contract.modifier("dim")[0])
    params = dict(op.params)
    unknown = sorted(set(params) - set(_PARAMS))
    if unknown:
        raise TirxSyntaxError(
            f"{text}: unexpected parameters {unknown}",
            hint="a tensor load takes box=, coords=, mbar=, swizzle=, l2_promotion= and "
            "coord_steps=",
        )
    for need in ("box", "coords", "mbar"):
        if need not in params:
            raise ContractError(
                f"{text} needs {need}=...",
                hint=f"T.cuda.tile.apply(T.ptx[...], dst, src, box=({', '.join(['8'] * rank)}), "
                f'coords=({", ".join(["0"] * rank)}), mbar=bars[0], scope="thread")',
            )
    swizzle = _code(text, "swizzle", params.get("swizzle", 0))
    l2 = _code(text, "l2_promotion", params.get("l2_promotion", 0))
    dst, src = op.operands
    box = _box(text, params["box"], rank)
    src_fields = _global_region(text, src, rank)
    dtype = src.dtype
    inner = box[-1] * dtype.bytes
    if inner % 16:
        raise ContractError(
            f"{text}: the box's inner extent is {inner} bytes, not a multiple of 16",
            hint=f"make box[-1] a multiple of {16 // math.gcd(16, dtype.bytes)} {dtype} elements",
        )
    if swizzle and inner > SWIZZLE_SPAN[swizzle]:
        raise ContractError(
            f"{text}: the box's inner extent is {inner} bytes, more than the "
            f"{SWIZZLE_SPAN[swizzle]}-byte span of swizzle={swizzle}",
            hint=f"box[-1] * {dtype.bytes} bytes must be <= {SWIZZLE_SPAN[swizzle]}: split the "
            "box along its inner axis" + (", or use a wider swizzle" if swizzle < 3 else ""),
        )
    dims, strides, origin = src_fields
    fields = TensorMapFields(
        dtype.name, tuple(reversed(dims)), tuple(s * dtype.bytes for s in reversed(strides[:-1])),
        tuple(reversed(box)), swizzle, l2,
    )  # fmt: skip
    steps = _steps(text, params.get("coord_steps", ()), rank)
    starts = _check_destination(text, dst, box, dtype, swizzle, len(steps))
    coords = _coords(text, params["coords"], rank)
    mbar = _mbar(text, params["mbar"])
    out = []
    for rep, shared in starts:
        at = [c + sum(r * step[d] for r, step in zip(rep, steps)) for d, c in enumerate(coords)]
        operands = (
            ir.AddressOperand(ir.SharedAddress(dst.buffer, shared)),
            ir.AddressOperand(ir.GlobalAddress(src.buffer, origin)),
            *fields.immediates(),
            *(ir.ScalarOperand(c) for c in reversed(at)),
            mbar,
        )
        out.append(ir.PtxCall(text, operands, op.span))
    return out


def _steps(text: str, value, rank: int) -> tuple[tuple[int, ...], ...]:
    """``coord_steps``: per leading repeat axis of dst, the coordinates' increment (outer to
    inner, compile-time)."""
    items = value if isinstance(value, tuple) else (value,)
    steps = []
    for step in items:
        step = step if isinstance(step, tuple) else (step,)
        vals = tuple(static_value(x) for x in step)
        if len(vals) != rank or None in vals:
            raise ContractError(
                f"{text}: each coord_steps entry must be {rank} compile-time ints, got {step!r}",
                hint="one coordinate increment per repeat axis of dst, e.g. coord_steps=((0, 64),)",
            )
        steps.append(vals)
    return tuple(steps)


def _code(text: str, name: str, value) -> int:
    v = static_value(value)
    if v is None or not 0 <= v <= 3:
        meaning = (
            "0 none, 1 32B, 2 64B, 3 128B" if name == "swizzle" else "0 none, 1 64B, 2 128B, 3 256B"
        )
        raise ContractError(
            f"{text}: {name} must be a compile-time code 0..3 ({meaning}), got {value!r}",
            hint=f"the tensor map's {name} is fixed when it is encoded: pass an int",
        )
    return v


def _box(text: str, value, rank: int) -> tuple[int, ...]:
    items = value if isinstance(value, tuple) else (value,)
    box = tuple(static_value(x) for x in items)
    if len(box) != rank or any(b is None for b in box):
        raise ContractError(
            f"{text}: box must be {rank} compile-time extents (outer to inner), got {value!r}",
            hint=f"one extent per axis of the {rank}-d tensor map, e.g. box=({', '.join(['64'] * rank)})",
        )
    bad = [b for b in box if not 1 <= b <= MAX_BOX]
    if bad:
        raise ContractError(
            f"{text}: box extents must be 1..{MAX_BOX}, got {box}",
            hint=f"a tensor map's box is at most {MAX_BOX} elements per axis: issue several copies",
        )
    return box


def _coords(text: str, value, rank: int) -> list:
    items = value if isinstance(value, tuple) else (value,)
    if len(items) != rank:
        raise ContractError(
            f"{text}: coords must be {rank} values (outer to inner), got {len(items)}",
            hint="one coordinate per axis of the tensor map, in elements",
        )
    out = []
    for c in items:
        if isinstance(c, ir.Expr) and c.dtype.kind == "float":
            raise ContractError(f"{text}: coords must be integers, got a {c.dtype}")
        if _reads_memory(c):
            raise ContractError(
                f"{text}: coords must be computed from indices, parameters or variables, not "
                "read from a tensor",
                hint="load the value into a variable first",
            )
        out.append(ir.cast(ir.as_expr(c), ir.I32))
    return out


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


def _global_region(text: str, v, rank: int):
    """(dims, element strides, origin bytes) of the global region ``v``, outer to inner."""
    where = f"{text}: operand src"
    if not isinstance(v, ir.View) or v.buffer.scope is not ir.Scope.GLOBAL:
        got = (
            f"{v.buffer.scope.value} buffer {v.buffer.name!r}"
            if isinstance(v, ir.View)
            else "a value"
        )
        raise ContractError(
            f"{where} must be a region of a global tensor parameter, got {got}",
            hint="the tensor map describes a kernel parameter: pass A[:, :] (or a region of it "
            "with compile-time bounds); the box's place in it is coords=",
        )
    if isinstance(v.layout, ComposeLayout) or v.dtype != v.buffer.dtype:
        raise ContractError(
            f"{where} must be a plain region of {v.buffer.name!r} in its own dtype "
            f"({v.buffer.dtype})",
            hint="a tensor map reads the tensor's elements as they are stored",
        )
    if len(v.shape) != rank:
        raise ContractError(
            f"{where} has {len(v.shape)} axes; this is a {rank}-d tensor copy",
            hint=f"pass a {rank}-d region (slices keep an axis, integer indices drop it) or "
            f"use .{len(v.shape)}d",
        )
    origin = static_value(v.elem_offset)
    if origin is None:
        raise ContractError(
            f"{where}: the region must start at a compile-time place (the tensor map is "
            "encoded before the launch)",
            hint="pass the whole tensor (or fixed bounds) and move the box with coords=",
        )
    zero = [0] * rank
    base = static_value(element_offset(v, zero))
    strides = []
    for d in range(rank):
        unit = list(zero)
        if v.shape[d] > 1:
            unit[d] = 1
            strides.append(static_value(element_offset(v, unit)) - base)
        else:
            strides.append(0)
    for d in range(rank):
        corner = list(zero)
        corner[d] = v.shape[d] - 1
        if static_value(element_offset(v, corner)) - base != strides[d] * (v.shape[d] - 1):
            raise ContractError(
                f"{where}: axis {d} of the region is not evenly strided",
                hint="a tensor map needs one stride per axis: pass a rectangular region",
            )
    if strides[-1] not in (0, 1):
        raise ContractError(
            f"{where}: the inner axis must be contiguous (stride 1), got stride {strides[-1]}",
            hint="a tensor map's innermost dimension is dense",
        )
    strides[-1] = 1
    nbytes = v.dtype.bytes
    for d in range(rank - 1):
        if strides[d] == 0:  # an axis of one element: any legal stride
            strides[d] = math.prod(v.shape[d + 1 :]) * 16
        if strides[d] * nbytes % 16 or not 0 < strides[d] * nbytes < MAX_STRIDE:
            raise ContractError(
                f"{where}: axis {d} is {strides[d] * nbytes} bytes apart, not a multiple of 16",
                hint="a tensor map's strides are multiples of 16 bytes: pad the rows",
            )
    origin_bytes = base * nbytes
    if origin_bytes % 16:
        raise ContractError(
            f"{where}: the region starts {origin_bytes % 16} bytes past a multiple of 16",
            hint="a tensor map's global address is 16-byte aligned: start the region on a "
            "16-byte boundary (or pass the whole tensor and use coords=)",
        )
    return tuple(v.shape), strides, origin_bytes


def _check_destination(text: str, v, box: tuple[int, ...], dtype, swizzle: int, reps: int):
    """Per repeat (the ``reps`` leading axes of ``v``), its coordinate and the byte offset of
    its box image, after checking that each holds the box image."""
    where = f"{text}: operand dst"
    if not isinstance(v, ir.View) or v.buffer.scope is not ir.Scope.SHARED:
        got = (
            f"{v.buffer.scope.value} buffer {v.buffer.name!r}"
            if isinstance(v, ir.View)
            else "a value"
        )
        raise ContractError(
            f"{where} must be a view of shared memory (T.alloc_shared), got {got}",
            hint="a tensor load writes shared memory: dst = sA[stage, :, :]",
        )
    if v.dtype.bits != dtype.bits:
        raise ContractError(
            f"{where} has {v.dtype.bits}-bit elements, the tensor {dtype.bits}-bit ones",
            hint="view the shared tile in the tensor's element width",
        )
    if tuple(v.shape[reps:]) != box or len(v.shape) != reps + len(box):
        raise ContractError(
            f"{where} has shape {tuple(v.shape)}; the box is {box}"
            + (f" after {reps} repeat axes (coord_steps)" if reps else ""),
            hint="the destination is one box image per repeat: shape it (*repeats, *box), one "
            "repeat axis per coord_steps entry",
        )
    period = 128 << swizzle if swizzle else ALIGN_UNSWIZZLED
    kind = (
        f"the {SWIZZLE_SPAN[swizzle]}B swizzle's {period}-byte repeat" if swizzle else "128 bytes"
    )
    if v.buffer.align < period:
        raise ContractError(
            f"{where}: {v.buffer.name!r} has align={v.buffer.align}; a tensor load's "
            f"destination is aligned to {kind}",
            hint=f"allocate it with T.alloc_shared(..., align={period})",
        )
    start = _bytes(v.elem_offset, v.dtype)
    if isinstance(v.layout, ComposeLayout):  # the layout's own swizzle repeats too
        c = v.layout
        period = max(period, v.dtype.bytes << (c.per_element + c.swizzle_len + c.atom_len))
    rem = residue(start, period)
    if rem != 0:
        at = "an unknown offset" if rem is None else f"{rem} bytes past a multiple of {period}"
        raise ContractError(
            f"{where} starts at {at}; it must start at a multiple of {period} bytes ({kind})",
            hint="start the destination on a whole stage/tile of the allocation",
        )
    bases = _check_image(where, v, box, dtype.bytes, swizzle, reps)
    return [(rep, _plus(start, base)) for rep, base in bases]


def _plus(a, b: int):
    return a + b if isinstance(a, int) else ir.as_expr(a) + b


def _check_image(where: str, v, box, nbytes: int, swizzle: int, reps: int = 0):
    """Every box element must sit where the copy engine puts it: byte ``f * nbytes`` of the
    dense image (``f`` its row-major index) after its repeat's first byte, swizzled; each
    repeat starts on a swizzle repeat (128 bytes unswizzled). The view's start is one, so it
    is compared as if it started at 0. Returns per repeat its coordinate and first byte."""
    layout = v.layout
    if isinstance(layout, ComposeLayout):
        tile = layout.tile_layout
    else:
        tile = layout
    if tile.replica or set(tile.axes()) - {"m"}:
        raise ContractError(f"{where}: the layout must use only the memory axis m, got {layout!r}")
    table = tile.table()
    size = math.prod(box)
    period = 128 << swizzle if swizzle else ALIGN_UNSWIZZLED
    out = []
    for r, rep in enumerate(itertools.product(*(range(e) for e in v.shape[:reps]))):
        base = table[r * size][0] * nbytes
        if base % period:
            raise ContractError(
                f"{where}: repeat {rep} starts at byte {base}, not a multiple of {period}",
                hint="each repeat's box image must start on a whole swizzle repeat (128 bytes "
                "unswizzled): lay the repeats out one after another",
            )
        out.append((rep, base))
        _check_box(where, layout, table[r * size : (r + 1) * size], base, box, nbytes, swizzle)
    return out


def _check_box(where, layout, table, base: int, box, nbytes: int, swizzle: int) -> None:
    for f, (m,) in enumerate(table):
        got = layout.swizzle(m) if isinstance(layout, ComposeLayout) else m
        want = base + swizzle_byte_offset(f * nbytes, swizzle)
        if got * nbytes != want:
            coord = _unflatten(f, box)
            detail = f"byte {got * nbytes} of the stage, where the box image has byte {want}"
            fix = (
                f"with swizzle={swizzle} lay the tile out as ComposeLayout(per_element, {swizzle}, "
                f"3, TileLayout(S[box])) of {SWIZZLE_SPAN[swizzle]}-byte rows (per_element: 16 "
                "bytes of elements, log2)"
                if swizzle
                else "without a swizzle the tile is the dense row-major box (the default layout)"
            )
            raise ContractError(
                f"{where}: element {coord} is at {detail}"
                + (f" (swizzle={swizzle})" if swizzle else ""),
                hint=fix,
            )


def _unflatten(f: int, shape) -> tuple[int, ...]:
    out = []
    for e in reversed(shape):
        out.append(f % e)
        f //= e
    return tuple(reversed(out))


def lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    raise ContractError(
        f"{contract.text} is called through its tile form (the tensor map is built from a "
        "kernel parameter)",
        hint=f'T.cuda.tile.apply(T.ptx["{contract.text}"], dst, A[:, :], box=..., coords=..., '
        'mbar=bars[s], scope="thread")',
    ).with_span(op.span)


NOTES = """
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
8-byte aligned; sm_90 or newer. Multicast, `.cta_group`, `.L2::cache_hint`, the gather4, scatter4
and im2col modes and the shared-to-global direction are refused with the supported form.

The simulator (`tirx/sim/tma.py`): the copy reads the box from the global tensor at issue
(outside the tensor: zeros), performs the complete-tx on the barrier at once, and its bytes
land in shared memory, swizzled, when the barrier's phase completes; they are async-proxy
writes. Faults, naming the copy's line and the other line, block, warp and lane: an access to
the destination before the phase completes (`SimulationError`), a read by a thread that has
not waited on the barrier since (the shared-memory race of a write and a read with nothing
ordering them), a copy onto bytes another thread accessed since the last barrier (a stage
reused too early), a misaligned data pointer.
"""

SPEC = FamilySpec(
    Family.CP_ASYNC_BULK_TENSOR, "cp.async.bulk.tensor", SLOTS, reject, build, lower_tile,
    "PTX ISA, Data Movement and Conversion Instructions: cp.async.bulk.tensor",
    exec_scope=ir.ExecScope.THREAD, lower_raw=lower_raw, notes=NOTES,
)  # fmt: skip
