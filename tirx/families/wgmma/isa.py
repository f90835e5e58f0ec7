"""wgmma: Hopper's warpgroup matrix multiply-accumulate (PTX ISA, "Asynchronous Warpgroup Level
Matrix Multiply-Accumulate Instructions"; sm_90a, the arch-specific feature set of sm_90).

The forms tirx has, as the ISA spells them::

    wgmma.fence.sync.aligned
    wgmma.commit_group.sync.aligned
    wgmma.wait_group.sync.aligned                       N                 (0 <= N <= 7)
    wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T       d, a-desc, b-desc, scale-d,
                                                        imm-scale-a, imm-scale-b,
                                                        imm-trans-a, imm-trans-b

with N every multiple of 8 from 8 to 256 and T = f16 or bf16 (A and B of one type): the ss
form, both operands read from shared memory through 64-bit matrix descriptors
(:mod:`tirx.families.wgmma.isa_descriptor`), ``d`` N/2 float32 registers per thread, read and written in
place. The four instructions are executed by the 128 threads of an aligned warpgroup together.

Lowered (PTX order): mma_async is ``(RegVector(d, out), ScalarOperand(u64 a_desc),
ScalarOperand(u64 b_desc), ScalarOperand(i32 scale_d), Immediate(scale_a), Immediate(scale_b),
Immediate(trans_a), Immediate(trans_b))``; wait_group ``(Immediate(n),)``; the others ``()``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import ContractError, TirxSyntaxError
from ...ir import nodes as ir
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from ...isa.operands import register_view
from ...isa.raw_forms import no_tile_form
from .isa_descriptor import derive, encode
from .isa_raw import MAX_WAIT, immediate, lower_raw, scale_d_operand

__all__ = ["SPEC", "SLOTS", "MIN_ARCH", "N_VALUES", "ELEMENT", "accumulator_owner", "NOTES"]

MIN_ARCH = 90
N_VALUES = tuple(range(8, 257, 8))
ELEMENT = {"f16": "float16", "bf16": "bfloat16"}
_GROUP_OPS = ("fence", "commit_group", "wait_group")
_TYPES = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8", "b1")
_SHAPE = re.compile(r"^m(\d+)n(\d+)k(\d+)$")
FORMULA = (
    "thread = 32·(row // 16) + 4·(row % 8) + (col % 8) // 2,  "
    "register = 4·(col // 8) + 2·((row % 16) // 8) + col % 2"
)

SLOTS = (
    ModifierSlot("action", ("fence", "commit_group", "wait_group", "mma_async")),
    ModifierSlot("sp", ("sp",), optional=True),
    ModifierSlot("sync", ("sync",)),
    ModifierSlot("aligned", ("aligned",)),
    ModifierSlot("shape", tuple(f"m64n{n}k16" for n in N_VALUES), optional=True),
    ModifierSlot("dtype", ("f32", "f16", "s32"), optional=True),
    ModifierSlot("atype", _TYPES, optional=True),
    ModifierSlot("btype", _TYPES, optional=True),
)
_EXAMPLE = "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"


def reject(mods: dict) -> str | None:
    act = mods["action"]
    typed = [mods[s] for s in ("shape", "dtype", "atype", "btype") if mods[s]]
    if act in _GROUP_OPS:
        if typed or mods["sp"]:
            return f"wgmma.{act}.sync.aligned takes no other modifiers"
        return None
    if mods["sp"]:
        return f"the sparse wgmma.mma_async.sp is not supported by tirx: use {_EXAMPLE}"
    if len(typed) != 4:
        return f"wgmma.mma_async names its shape and its D, A and B types: e.g. {_EXAMPLE}"
    if mods["dtype"] != "f32":
        return f"tirx's wgmma accumulates in .f32 (not .{mods['dtype']}): use {_EXAMPLE}"
    a, b = mods["atype"], mods["btype"]
    if a not in ELEMENT or b not in ELEMENT:
        return f"tirx's wgmma multiplies .f16 or .bf16 (m64nNk16), not .{a} by .{b}"
    if a != b:
        return f"A and B must have the same type (.{a} vs .{b})"
    return None


def accumulator_owner(coord: tuple[int, int]) -> tuple[int, int]:
    """(row, col) of the m64nN f32 accumulator -> (thread of the warpgroup, register), from the
    ISA's "Register Fragments" figure for wgmma .m64nNk16 with .f32 accumulators."""
    row, col = coord
    thread = 32 * (row // 16) + 4 * (row % 8) + (col % 8) // 2
    return thread, 4 * (col // 8) + 2 * ((row % 16) // 8) + col % 2


def build(text: str, mods: dict) -> Contract:
    act = mods["action"]
    if act != "mma_async":
        ops = ()
        if act == "wait_group":
            about = f"how many of the thread's newest wgmma groups may stay pending, 0..{MAX_WAIT}"
            ops = (OperandSpec("n", Role.IMMEDIATE, "uint32", (), 0, about=about),)
        return Contract(text, Family.WGMMA, ops, MIN_ARCH, tuple(mods.items()), arch_specific=True)
    n = int(mods["shape"].split("n")[1].split("k")[0])
    ab = mods["atype"]
    ops = (
        OperandSpec(
            "D", Role.ACCUM_INOUT, "float32", (64, n), n // 2, accumulator_owner,
            about=f"the 64x{n} f32 accumulator, {n // 2} registers per thread of the warpgroup",
            formula=FORMULA, ptx_type="f32",
        ),
        OperandSpec(
            "A", Role.DESCRIPTOR, "uint64", (64, 16), 0,
            about=f"a_desc: a K-major (64, 16) {ELEMENT[ab]} shared tile",
        ),
        OperandSpec(
            "B", Role.DESCRIPTOR, "uint64", (n, 16), 0,
            about=f"b_desc: a K-major ({n}, 16) {ELEMENT[ab]} shared tile (B given N-major)",
        ),
        OperandSpec("scale_d", Role.SCALAR_IN, "int32", (), 0, about="0: D = A·B, else A·B + D"),
        *(
            OperandSpec(name, Role.IMMEDIATE, "int32", (), 0, about=about)
            for name, about in (
                ("scale_a", "1, or -1 to negate A"), ("scale_b", "1, or -1 to negate B"),
                ("trans_a", "0 (K-major)"), ("trans_b", "0 (K-major)"),
            )
        ),
    )  # fmt: skip
    params = (("n", n), ("ab_type", ab))
    return Contract(
        text, Family.WGMMA, ops, MIN_ARCH, tuple(mods.items()), params, arch_specific=True
    )


@dataclass(frozen=True)
class _Spec(FamilySpec):
    """The family's spec, whose parse names what is wrong with an m64nNk16 shape."""

    def parse(self, text: str):
        mods, why = FamilySpec.parse(self, text)
        if mods is None:
            for token in text.split("."):
                got = _SHAPE.match(token)
                if got and token not in self.slots[4].choices:
                    m, n, k = map(int, got.groups())
                    return None, _shape_problem(m, n, k)
        return mods, why


def _shape_problem(m: int, n: int, k: int) -> str:
    if m != 64:
        return f"wgmma's shapes are m64nNk16 for .f16/.bf16: M is 64, not {m}"
    if k != 16:
        return f"wgmma with .f16/.bf16 inputs has K = 16, not {k} (m64nNk16)"
    return f"N is {n}: wgmma's m64nNk16 takes N a multiple of 8 from 8 to 256"


# ----------------------------------------------------------------------------- tile form


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    """``T.cuda.tile.apply(T.ptx[mma_async], D, A, B, scope="warpgroup", scale_d=1)``: D a
    local register view checked against the accumulator fragment, A and B K-major shared views
    whose descriptors are derived here (scope, arch and operand count were checked by
    :mod:`tirx.transform.tile_ops`)."""
    text = contract.text
    if contract.modifier("action") != "mma_async":
        raise no_tile_form(contract, "n" if contract.operands else "")
    params = dict(op.params)
    unknown = sorted(set(params) - {"scale_d", "scale_a", "scale_b"})
    if unknown:
        raise TirxSyntaxError(
            f"{text}: unexpected parameters {unknown}",
            hint="the tile form takes scale_d= (default 1), scale_a= and scale_b= (1 or -1)",
        )
    d_spec, a_spec, b_spec = contract.operands[:3]
    dv, av, bv = op.operands
    regs = accumulator_slots(contract, d_spec, dv)
    element = ELEMENT[contract.param("ab_type")]
    descs = []
    for spec, v in ((a_spec, av), (b_spec, bv)):
        where = f"{text}: operand {spec.name}"
        _check_tile_view(where, spec, v, element)
        descs.append(ir.ScalarOperand(encode(derive(v, where))))
    scale_d = scale_d_operand(text, params.get("scale_d", 1), None)
    sa = immediate(text, "scale_a", params.get("scale_a", 1), None, (1, -1))
    sb = immediate(text, "scale_b", params.get("scale_b", 1), None, (1, -1))
    d = ir.RegVector(tuple(ir.LocalReg(dv.buffer, s, dv.dtype) for s in regs), True)
    operands = (d, *descs, scale_d, sa, sb, ir.Immediate(0), ir.Immediate(0))
    return [ir.PtxCall(text, operands, op.span)]


def _check_tile_view(where: str, spec: OperandSpec, v, element: str) -> None:
    if not isinstance(v, ir.View):
        raise ContractError(f"{where} must be a shared tensor view, got a scalar value")
    if v.dtype.name != element:
        raise ContractError(
            f"{where} must be a {element} view (the instruction's type), got {v.dtype}",
            hint="name the instruction of the tile's type (.f16 or .bf16)",
        )
    if tuple(v.shape) != spec.atom:
        raise ContractError(
            f"{where} must have shape {spec.atom} (K-major: 16 K elements per row), got "
            f"{tuple(v.shape)}",
            hint="slice the tile 16 columns at a time: tile[:, 16 * k : 16 * k + 16]",
        )


def accumulator_slots(contract: Contract, spec: OperandSpec, v) -> list[int]:
    """The register slot of each of D's N/2 registers, checking every element of the view
    against the ISA's accumulator fragment (thread = ``tid_in_wg``, or 32·``wid_in_wg`` +
    ``laneid``)."""
    where = f"{contract.text}: operand {spec.name}"
    if not isinstance(v, ir.View):
        raise ContractError(f"{where} must be a register view, got a scalar value")
    if v.dtype.name != "float32" or tuple(v.shape) != spec.atom:
        raise ContractError(
            f"{where} must be a float32 view of shape {spec.atom}, got {v.dtype} {tuple(v.shape)}",
            hint=f"acc.view({spec.atom[0]}, {spec.atom[1]}, layout=...) of a float32 local "
            f"buffer of {spec.registers} elements",
        )
    layout, base, capacity = register_view(
        where, v, "warpgroup", ("tid_in_wg", "wid_in_wg", "laneid")
    )
    slots: dict[int, set] = {}
    points = iter(layout.table(("tid_in_wg", "wid_in_wg", "laneid", "m")))
    for coord, (thread, reg) in spec.owner_items:
        tid, wid, lane, m = next(points)
        given, slot = tid + 32 * wid + lane, m + base
        if given != thread or lane >= 32:
            raise ContractError(
                f"{where}: element {coord} belongs to thread {thread} of the warpgroup (warp "
                f"{thread // 32}, lane {thread % 32}, register {reg}) but the layout gives it "
                f"to thread {given} (slot {slot})",
                hint=f"{FORMULA}; the canonical D is acc.view(64, N, layout=TileLayout(S[(4, 2, "
                "8, N // 8, 4, 2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)]))",
            )
        if not 0 <= slot < capacity:
            raise ContractError(
                f"{where}: element {coord} maps to slot {slot}, outside {v.buffer.name!r} "
                f"({capacity} float32 slots)"
            )
        slots.setdefault(reg, set()).add(slot)
    out, owner = [], {}
    for reg in range(spec.registers):
        found = slots[reg]
        if len(found) != 1:
            raise ContractError(
                f"{where}: register {reg} lands in different slots {sorted(found)} on different "
                "threads; a register slot must be the same for every thread"
            )
        (slot,) = found
        if slot in owner:
            raise ContractError(
                f"{where}: registers {owner[slot]} and {reg} both write slot {slot}",
                hint="each accumulator register needs its own slot: check the m strides",
            )
        owner[slot] = reg
        out.append(slot)
    return out


NOTES = """
sm_90a only (the arch-specific features of sm_90): a kernel compiled for `sm_90` that uses one
of these forms is built for `sm_90a` (`exe.arch`; the NVRTC command line and the cache key say
so), any other arch is refused at the instruction; the simulator runs them. Each is executed by
the 128 threads of an aligned warpgroup together (warps 4g .. 4g+3), so the block's thread
count must be a multiple of 128.

Raw calls, as the real TIRx spells them: `T.ptx["wgmma.fence.sync.aligned"]()`,
`T.ptx["wgmma.commit_group.sync.aligned"]()`, `T.ptx["wgmma.wait_group.sync.aligned"](n)`
(`n` a compile-time int 0..7), and
`T.ptx["wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"](d0, ..., d63, a_desc, b_desc,
scale_d, 1, 1, 0, 0)`: N/2 elements of local float32 tensors (or, in their place, one local
float32 tensor or 1-D view of exactly N/2 elements), the two uint64 descriptors, scale_d (an
integer expression: 0 means D = A·B, else D = A·B + D), scale_a and scale_b (1 or -1) and
trans_a and trans_b (0 or 1) as immediates. A descriptor is written by
`T.cuda.wgmma.encode_matrix_descriptor(desc[0], tile[r, c], ldo, sdo, swizzle)` (the real
TIRx's helper: `desc` a local uint64 element, or its address `desc.ptr_to([0])`; `tile[r, c]`
a shared element, or `tile.ptr_to([r, c])`, whose address is the start; `ldo` and `sdo` the
leading- and stride-dimension byte offsets in 16-byte units; `swizzle` 0 none, 1 32-byte, 2
64-byte, 3 128-byte in the helper's numbering, which the descriptor's bits 62-63 hold as the
ISA's 0 none, 1 128B, 2 64B, 3 32B).

The tile form is the checked one:
`T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"], D, A, B,
scope="warpgroup", scale_d=1)` with `scale_d=` an int or an expression (default 1) and
`scale_a=`/`scale_b=` optional (1 or -1, default 1). `D` is a float32 local view of shape
(64, N) whose layout (axes `tid_in_wg`, or `wid_in_wg` and `laneid`, and `m`) is checked
element by element against the ISA's accumulator fragment: element (row, col) belongs to
thread 32·(row // 16) + 4·(row % 8) + (col % 8) // 2, register 4·(col // 8) + 2·((row % 16) // 8)
+ col % 2, i.e. `acc.view(64, N, layout=TileLayout(S[(4, 2, 8, N // 8, 4, 2) : (1 @ wid_in_wg,
2, 4 @ laneid, 4, 1 @ laneid, 1)]))`. `A` is a shared view of (64, 16) elements and `B` of
(N, 16), both K-major (a row's 16 K elements are 32 bytes in two 16-byte chunks), of a plain or
swizzled (`ComposeLayout`) tile. The lowering derives each descriptor from the view: the
swizzle mode from the layout (a `ComposeLayout` whose XOR is the hardware's 128-, 64- or
32-byte swizzle on every byte of a period: `ComposeLayout(3, 3, 3, ...)`, `(3, 2, 3, ...)`,
`(3, 1, 3, ...)` for 16-bit elements; or none), the start address (the view's origin before
the swizzle, a `SharedAddress`: run-time stage and k indices are fine), LBO and SBO from the
layout's offsets, and it checks every element of the view against the ISA's canonical K-major
layouts (offset from the start `(row % 8)·W + (row // 8)·SBO + (k // 8)·L + (k % 8)·2`, W = 16
and L = LBO without swizzle, W = 32/64/128 and L = 16 with it). A 128-byte-swizzled
row-major (rows, 64) tile sliced `tile[:, 16 * k : 16 * k + 16]` gives LBO 16, SBO 1024; an
unswizzled tile must hold each 8 x 8 core matrix as 128 contiguous bytes, e.g.
`S[(8, 8, 2, 8) : (128, 8, 64, 1)]` for (64, 16).

Checked (a `ContractError` at the operand or the call, with a hint): `scope="warpgroup"`; the
block a multiple of 128 threads; the target arch (sm_90/sm_90a); D's dtype, shape and layout
(the first element on the wrong thread is named, with the expected thread, lane and register);
A/B's dtype against the instruction's, shape (64, 16) / (N, 16), shared scope, K-major (an
MN-major view says so: trans is not supported by the tile form), the swizzle, the buffer's
alignment (`align=` at least the swizzle period: 1024, 512, 256 bytes, or 16), a start on a
16-byte boundary (provably, for a run-time start) and, for a swizzle, in the first 128 bytes of
a period when that is known at compile time (the descriptors have base offset 0), LBO and SBO
within the 14-bit fields; N a multiple of 8 up to 256, A and B of one type (f16 or bf16),
accumulate in f32; wait_group's n a compile-time int 0..7; raw mma_async's operand count,
accumulator elements (local float32, compile-time slots, distinct), 64-bit descriptors, an
integer scale_d not read from a tensor, the immediates' values.

The fences are the kernel's: `wgmma.fence` before the first mma_async and after other writes
of the accumulator registers; `fence.proxy.async.shared::cta` (then a barrier) after threads
store the tiles, since wgmma reads shared memory through the async proxy; `commit_group` and
`wait_group` before the accumulators are read. Nothing is inserted.
"""

SPEC = _Spec(
    Family.WGMMA, "wgmma", SLOTS, reject, build, lower_tile,
    "PTX ISA, Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions",
    exec_scope=ir.ExecScope.WARPGROUP, lower_raw=lower_raw, notes=NOTES,
)  # fmt: skip

SPECS = (SPEC,)
