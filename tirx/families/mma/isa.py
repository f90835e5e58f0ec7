"""mma.sync: the warp-wide matrix multiply-accumulate ``D = A·B + C`` (PTX ISA 9.7.16.5,
"Matrix multiply-accumulate operation using mma instruction").

The forms tirx supports are the m16n8 lines below, each spelled by the ISA's syntax line
``mma.sync.aligned.shape.row.col{.satfinite}.dtype.atype.btype.ctype`` and restricted by its
"Specific shapes have type restrictions" block (``.dtype`` equals ``.ctype`` on m16n8k8,
m16n8k16 and m16n8k32; ``.atype`` equals ``.btype`` on m16n8k8). Operands are 32-bit words:
A and B as ``uint32`` words packing their elements, C and D as the accumulator's register
type (``float32``, ``int32``, or ``uint32`` words of two halves for ``.f16``). An operand whose
words pack several elements may be given as a view of those elements instead (``float16`` for
``.f16``, ``bfloat16``, ``int8``, ``uint8``), which is checked element by element: so the seed's
f32-style D layout over ``float16`` registers is an ``.f16`` accumulator as it stands.
"""

from __future__ import annotations

import collections
import itertools
import struct

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...isa import fragments
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from ...isa.operands import check_register_operand, operand_view, registers

__all__ = ["SPEC", "LINES", "MmaLine"]


# A plain namedtuple: a dataclass costs about 0.5 ms to create, and typing.NamedTuple about as
# much at a process's first use (it compiles each postponed annotation); this module loads when
# a kernel first uses mma, inside the cold compile.
MmaLine = collections.namedtuple(
    "MmaLine", "shapes ab_types accumulators min_arch satfinite", defaults=(False,)
)
MmaLine.__doc__ = """One syntax line of the ISA's mma section, as far as tirx supports it.

``shapes`` (tuple of str); ``ab_types``: .atype and .btype each from this set; ``accumulators``:
the allowed (.dtype, .ctype) pairs; ``min_arch``: (shape, sm number) pairs (the ISA's "Target
ISA notes"); ``satfinite`` (bool, default False)."""


LINES = (
    MmaLine(("m16n8k8", "m16n8k16"), ("f16",), (("f32", "f32"), ("f16", "f16")),
            (("m16n8k8", 75), ("m16n8k16", 80))),
    MmaLine(("m16n8k8", "m16n8k16"), ("bf16",), (("f32", "f32"),),
            (("m16n8k8", 80), ("m16n8k16", 80))),
    MmaLine(("m16n8k4", "m16n8k8"), ("tf32",), (("f32", "f32"),),
            (("m16n8k4", 80), ("m16n8k8", 80))),
    MmaLine(("m16n8k16", "m16n8k32"), ("s8", "u8"), (("s32", "s32"),),
            (("m16n8k16", 80), ("m16n8k32", 80)), satfinite=True),
)  # fmt: skip

ELEMENT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "s8": 8, "u8": 8, "f32": 32, "s32": 32}
REGISTER_DTYPE = {"f32": "float32", "s32": "int32", "f16": "uint32"}  # accumulator registers
REGISTER_PTX = {"f32": "f32", "s32": "s32", "f16": "f16x2"}
# the element dtype of an operand whose 32-bit words pack several elements: a view of these
# elements is accepted in place of the words (tf32, f32 and s32 fill a word each)
PACKED_ELEMENT = {"f16": "float16", "bf16": "bfloat16", "s8": "int8", "u8": "uint8"}

SLOTS = (
    ModifierSlot("sync", ("sync",)),
    ModifierSlot("aligned", ("aligned",)),
    ModifierSlot("shape", ("m16n8k4", "m16n8k8", "m16n8k16", "m16n8k32")),
    ModifierSlot("alayout", ("row",)),
    ModifierSlot("blayout", ("col",)),
    ModifierSlot("satfinite", ("satfinite",), optional=True),
    ModifierSlot("dtype", ("f32", "f16", "s32")),
    ModifierSlot("atype", ("f16", "bf16", "tf32", "s8", "u8")),
    ModifierSlot("btype", ("f16", "bf16", "tf32", "s8", "u8")),
    ModifierSlot("ctype", ("f32", "f16", "s32")),
)


def _line(mods: dict) -> MmaLine | None:
    return next((ln for ln in LINES if mods["atype"] in ln.ab_types), None)


def reject(mods: dict) -> str | None:
    """Why these modifiers are not an mma form tirx supports (None: they are one)."""
    line = _line(mods)
    a, b, d, c, shape = mods["atype"], mods["btype"], mods["dtype"], mods["ctype"], mods["shape"]
    if line is None or b not in line.ab_types:
        if {a, b} <= {"f16", "bf16", "tf32"}:
            return f"A and B must have the same type ({a} vs {b})"
        return f"no mma line multiplies .{a} by .{b}"
    if shape not in line.shapes:
        return f"the .{a} lines are {' / '.join(line.shapes)}, not {shape}"
    if d != c:
        return f"{shape} requires .dtype == .ctype (PTX ISA: shape type restrictions), got .{d} and .{c}"
    if (d, c) not in line.accumulators:
        accs = " or ".join(f".{x}" for x, _ in line.accumulators)
        return f"the .{a} lines accumulate in {accs}, not .{d}"
    if mods["satfinite"] and not line.satfinite:
        return ".satfinite belongs to the integer lines"
    return None


def build(text: str, mods: dict) -> Contract:
    line = _line(mods)
    shape, ab, acc = mods["shape"], mods["atype"], mods["dtype"]
    k = int(shape.split("k")[1])
    a_tile = fragments.mma_tile("A", k, ELEMENT_BITS[ab])
    b_tile = fragments.mma_tile("B", k, ELEMENT_BITS[ab])
    acc_bits = ELEMENT_BITS[acc]
    c_tile = fragments.mma_tile("D", k, acc_bits)
    per = a_tile.elements_per_word
    unit = {2: "two halves", 4: f"four {ab} bytes", 1: f"one {ab} each"}[per]
    items = {2: "halves", 4: f"{ab} elements", 1: f"{ab} elements"}[per]
    acc_formula = fragments.FORMULA_ACC32 if acc_bits == 32 else fragments.FORMULA_ACC16
    acc_words = "" if acc_bits == 32 else " as u32 words of two halves"
    accum = dict(
        dtype=REGISTER_DTYPE[acc],
        atom=c_tile.atom,
        registers=c_tile.registers,
        owner=fragments.accumulator_words(acc_bits),
        formula=acc_formula,
        ptx_type=REGISTER_PTX[acc],
        elements_per_word=c_tile.elements_per_word,
        element_dtype=PACKED_ELEMENT.get(acc, ""),
        repeat_axes=("M", "N"),
    )
    ops = (
        OperandSpec("D", Role.REG_OUT, about=f"the 16x8 {acc} result tile{acc_words}", **accum),
        OperandSpec(
            "A", Role.REG_IN, "uint32", a_tile.atom, a_tile.registers, fragments.a_words,
            ("M", "K"), about=f"the 16x{k} {ab} tile as u32 words of {unit}",
            formula=fragments.FORMULA_A, elements_per_word=per,
            element_dtype=PACKED_ELEMENT.get(ab, ""),
        ),
        OperandSpec(
            "B", Role.REG_IN, "uint32", b_tile.atom, b_tile.registers, fragments.b_words,
            ("N", "K"), about=f"the {k}x8 tile given N-major as 8 rows of {k} {items} in u32 words",
            formula=fragments.FORMULA_B, elements_per_word=per,
            element_dtype=PACKED_ELEMENT.get(mods["btype"], ""),
        ),
        OperandSpec(
            "C", Role.ACCUM_IN, about=f"the {acc} addend: a scalar or a tile shaped like D",
            **accum,
        ),
    )  # fmt: skip
    params = (
        ("k", k),
        ("ab_type", ab),
        ("a_type", ab),
        ("b_type", mods["btype"]),
        ("acc_type", acc),
        ("satfinite", bool(mods["satfinite"])),
    )
    arch = dict(line.min_arch)[shape]
    return Contract(text, Family.MMA, ops, arch, tuple(mods.items()), params)


def scalar_addend(contract: Contract, c: ir.Expr) -> ir.ValueReg:
    """A scalar C as the value of one accumulator register (its PTX type's C equivalent)."""
    acc = contract.param("acc_type")
    if acc == "f32":
        return ir.ValueReg(ir.cast(c, ir.F32))
    if acc == "s32":
        return ir.ValueReg(ir.cast(c, ir.I32))
    value = _static_number(c)
    if value is None:
        raise ContractError(
            f"{contract.text}: operand C as a scalar must be a compile-time number for an .f16 "
            "accumulator (its registers hold two halves)",
            hint="pass a constant such as T.float16(0), or a uint32 view of f16x2 registers",
        )
    (half,) = struct.unpack("<H", struct.pack("<e", value))  # round to nearest even
    return ir.ValueReg(ir.Const(half * 0x10001, ir.U32))


def _static_number(e) -> float | None:
    if isinstance(e, ir.Const):
        return float(e.value)
    if isinstance(e, ir.Cast) and isinstance(e.value, ir.Const):
        return float(e.value.value)
    value = static_value(e)
    return None if value is None else float(value)


def lower(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    """Repeats run m, then n, then k innermost; the first k issue reads C, later ones D."""
    sd, sa, sb, sc = contract.operands
    d = operand_view(contract, sd, op.operands[0], 2)
    a = operand_view(contract, sa, op.operands[1], 2)
    b = operand_view(contract, sb, op.operands[2], 2)
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
        operand_view(contract, sc, c, 2)
        if c.shape[:2] != d.shape[:2]:
            raise ContractError(
                f"{contract.text}: operand C must have D's repeats (M={mr}, N={nr}), got "
                f"{c.shape[:2]}"
            )
        cmap = check_register_operand(contract, sc, c)
    elif isinstance(c, ir.Expr):
        cmap = None
        cval = scalar_addend(contract, c)
    else:
        raise ContractError(f"{contract.text}: operand C must be a scalar or a {sc.dtype} view")
    nd = sd.registers
    out = []
    for mi, ni in itertools.product(range(mr), range(nr)):
        dregs = registers(d, dmap, (mi, ni), nd, True)
        for ki in range(kr):
            if ki > 0:
                cregs = registers(d, dmap, (mi, ni), nd, False)
            elif cmap is not None:
                cregs = registers(c, cmap, (mi, ni), nd, False)
            else:
                cregs = ir.RegVector((cval,) * nd, False)
            a_regs = registers(a, amap, (mi, ki), sa.registers, False)
            b_regs = registers(b, bmap, (ni, ki), sb.registers, False)
            out.append(ir.PtxCall(contract.text, (dregs, a_regs, b_regs, cregs), op.span))
    return out


SPEC = FamilySpec(
    Family.MMA, "mma", SLOTS, reject, build, lower, "PTX ISA 9.7.16.5 (mma)",
    exec_scope=ir.ExecScope.WARP,
)  # fmt: skip

SPECS = (SPEC,)
