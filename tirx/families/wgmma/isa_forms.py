"""The forms of ``wgmma.mma_async`` (PTX ISA 9.7.15.5.2, its syntax lines and the "Matrix
Shape" table): which shapes, accumulator and element types combine, and which immediate
operands each line has.

The ISA writes one pair of syntax lines per input type (an *ss* line, A and B read from shared
memory through descriptors, and an *rs* line, A from four 32-bit registers per thread):

======  =====================  =====  ==============  ============  =====================
line    .atype / .btype        K      .dtype          N             immediates (ss / rs)
======  =====================  =====  ==============  ============  =====================
f16     .f16 (both)            16     .f32, .f16      8 .. 256 / 8  scale-a, scale-b,
                                                                    trans-a, trans-b /
                                                                    scale-a, scale-b, trans-b
bf16    .bf16 (both)           16     .f32            8 .. 256 / 8  as f16
tf32    .tf32 (both)           8      .f32            8 .. 256 / 8  scale-a, scale-b (both)
fp8     .e4m3/.e5m2, any pair  32     .f32, .f16      8 .. 256 / 8  scale-a, scale-b (both)
int     .s8/.u8, any pair      32     .s32 (+         8, 16, 24,    none
                                      .satfinite)     32 .. 256/16
======  =====================  =====  ==============  ============  =====================

M is 64 for every line. Every line's K is 32 bytes of its element type, so one row of A or B
per instruction is two 16-byte core-matrix rows whatever the type. ptxas 13.0 (sm_90a)
accepts exactly the integer N above, 240 and 256 included (the Matrix Shape table's list;
the integer syntax line of the ISA stops its enumeration at 224), and refuses the others
("Illegal matrix shape"), a bf16 or tf32 line with an .f16 accumulator and trans immediates
on the tf32, fp8 and integer lines ("Arguments mismatch").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...isa.core import ModifierSlot

__all__ = [
    "Line", "LINES", "SLOTS", "N_ALL", "N_INT", "ELEMENT", "ELEMENT_BITS", "GROUP_OPS",
    "line_of", "reject", "shape_problem", "candidates", "EXAMPLE", "SHAPE",
]  # fmt: skip

N_ALL = tuple(range(8, 257, 8))
N_INT = (8, 16, 24, *range(32, 257, 16))
GROUP_OPS = ("fence", "commit_group", "wait_group")
TYPES = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8", "b1")
# the tensor dtype whose elements a shared operand holds, per PTX element type
ELEMENT = {
    "f16": "float16", "bf16": "bfloat16", "tf32": "float32", "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2", "s8": "int8", "u8": "uint8",
}  # fmt: skip
ELEMENT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8}
EXAMPLE = "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"
SHAPE = re.compile(r"^m(\d+)n(\d+)k(\d+)$")


@dataclass(frozen=True)
class Line:
    """One input type's pair of syntax lines."""

    name: str
    ab_types: tuple[str, ...]  # .atype and .btype each from these
    same_type: bool  # .atype == .btype
    k: int
    accumulators: tuple[str, ...]  # .dtype choices
    n_values: tuple[int, ...]
    scale_ab: bool  # imm-scale-a, imm-scale-b
    trans: bool  # imm-trans-a (ss), imm-trans-b: MN-major shared operands
    satfinite: bool = False

    def immediates(self, registers_a: bool) -> tuple[str, ...]:
        """The immediate operands after scale-d, in PTX order (ss, or rs: no trans-a)."""
        out = ("scale_a", "scale_b") if self.scale_ab else ()
        if self.trans:
            out += ("trans_b",) if registers_a else ("trans_a", "trans_b")
        return out


LINES = (
    Line("f16", ("f16",), True, 16, ("f32", "f16"), N_ALL, True, True),
    Line("bf16", ("bf16",), True, 16, ("f32",), N_ALL, True, True),
    Line("tf32", ("tf32",), True, 8, ("f32",), N_ALL, True, False),
    Line("fp8", ("e4m3", "e5m2"), False, 32, ("f32", "f16"), N_ALL, True, False),
    Line("int", ("s8", "u8"), False, 32, ("s32",), N_INT, False, False, satfinite=True),
)

SLOTS = (
    ModifierSlot("action", ("fence", "commit_group", "wait_group", "mma_async")),
    ModifierSlot("sp", ("sp",), optional=True),
    ModifierSlot("sync", ("sync",)),
    ModifierSlot("aligned", ("aligned",)),
    ModifierSlot("shape", tuple(f"m64n{n}k{k}" for k in (8, 16, 32) for n in N_ALL), optional=True),
    ModifierSlot("satfinite", ("satfinite",), optional=True),
    ModifierSlot("dtype", ("f32", "f16", "s32"), optional=True),
    ModifierSlot("atype", TYPES, optional=True),
    ModifierSlot("btype", TYPES, optional=True),
)


def line_of(atype: str | None) -> Line | None:
    return next((ln for ln in LINES if atype in ln.ab_types), None)


def _n_text(line: Line) -> str:
    if line.n_values == N_ALL:
        return "a multiple of 8 from 8 to 256"
    return "8, 16, 24 or a multiple of 16 from 32 to 256"


def reject(mods: dict) -> str | None:
    """Why these modifiers are not a wgmma form tirx has (None: they are one)."""
    act = mods["action"]
    typed = [mods[s] for s in ("shape", "satfinite", "dtype", "atype", "btype") if mods[s]]
    if act in GROUP_OPS:
        if typed or mods["sp"]:
            return f"wgmma.{act}.sync.aligned takes no other modifiers"
        return None
    if mods["sp"]:
        return f"the sparse wgmma.mma_async.sp is not supported by tirx: use {EXAMPLE}"
    if not all(mods[s] for s in ("shape", "dtype", "atype", "btype")):
        return f"wgmma.mma_async names its shape and its D, A and B types: e.g. {EXAMPLE}"
    a, b, d = mods["atype"], mods["btype"], mods["dtype"]
    line = line_of(a)
    if line is None:
        return (
            f"tirx's wgmma multiplies .f16, .bf16, .tf32, .e4m3/.e5m2 or .s8/.u8, not .{a} "
            "(the single-bit .b1 line is not supported)"
        )
    if b not in line.ab_types:
        if line.same_type and b in {ln for x in LINES if x.same_type for ln in x.ab_types}:
            return f"A and B must have the same type (.{a} vs .{b})"
        return f"no wgmma line multiplies .{a} by .{b}"
    if line.same_type and a != b:
        return f"A and B must have the same type (.{a} vs .{b})"
    n, k = (int(x) for x in SHAPE.match(mods["shape"]).groups()[1:])
    if k != line.k:
        return f"wgmma with .{a} inputs has K = {line.k} (m64nNk{line.k}), not {k}"
    if n not in line.n_values:
        return f"N is {n}: wgmma with .{a} inputs takes N {_n_text(line)}"
    if d not in line.accumulators:
        accs = " or ".join(f".{x}" for x in line.accumulators)
        return f"wgmma with .{a} inputs accumulates in {accs}, not .{d}"
    if mods["satfinite"] and not line.satfinite:
        return ".satfinite belongs to the integer (.s8/.u8) line"
    return None


def shape_problem(m: int, n: int, k: int) -> str:
    """What is wrong with an ``m{m}n{n}k{k}`` token that is not one of the slot's shapes."""
    if m != 64:
        return f"wgmma's shapes are m64nNkK: M is 64, not {m}"
    if k not in (8, 16, 32):
        return (
            f"wgmma's K is 8 (.tf32), 16 (.f16/.bf16) or 32 (.e4m3/.e5m2/.s8/.u8), not {k} "
            "(the single-bit .b1 line, K = 256, is not supported)"
        )
    return f"N is {n}: wgmma's N is a multiple of 8 from 8 to 256"


def candidates():
    """The modifier combinations worth asking ``reject`` about: the group instructions and,
    per line, every shape, accumulator and type pair (the enumeration of every slot would be
    half a million combinations, all but these refused)."""
    blank = {s.name: None for s in SLOTS}
    for act in GROUP_OPS:
        yield {**blank, "action": act, "sync": "sync", "aligned": "aligned"}
    for line in LINES:
        for n in line.n_values:
            for sat in (None, "satfinite") if line.satfinite else (None,):
                for d in line.accumulators:
                    for a in line.ab_types:
                        for b in line.ab_types:
                            yield {
                                **blank, "action": "mma_async", "sync": "sync",
                                "aligned": "aligned", "shape": f"m64n{n}k{line.k}",
                                "satfinite": sat, "dtype": d, "atype": a, "btype": b,
                            }  # fmt: skip
