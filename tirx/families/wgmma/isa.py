"""wgmma: Hopper's warpgroup matrix multiply-accumulate (PTX ISA, "Asynchronous Warpgroup Level
Matrix Multiply-Accumulate Instructions"; sm_90a, the arch-specific feature set of sm_90).

The forms tirx has, as the ISA spells them::

    wgmma.fence.sync.aligned
    wgmma.commit_group.sync.aligned
    wgmma.wait_group.sync.aligned                          N            (0 <= N <= 7)
    wgmma.mma_async.sync.aligned.m64nNkK{.satfinite}.D.A.B d, a-desc, b-desc, scale-d, imms
    wgmma.mma_async.sync.aligned.m64nNkK{.satfinite}.D.A.B d, a, b-desc, scale-d, imms

with the type lines, N and immediates of :mod:`tirx.families.wgmma.isa_forms` (f16, bf16,
tf32, fp8 and integer inputs). In the first (*ss*) form A and B are read from shared memory
through 64-bit matrix descriptors (:mod:`tirx.families.wgmma.isa_descriptor`); in the second
(*rs*) A is four 32-bit registers per thread (:mod:`tirx.families.wgmma.isa_fragments`). ``d``
is read and written in place: N/2 32-bit registers (.f32, .s32) or N/4 f16x2 words (.f16).

Lowered (PTX order): mma_async is ``(RegVector(d, out), ScalarOperand(u64 a_desc) or
RegVector(a, in: four U32 slots), ScalarOperand(u64 b_desc), ScalarOperand(i32 scale_d),
Immediate...)`` with the line's immediates (scale-a, scale-b: 1 or -1; trans-a, trans-b: 0
or 1; the rs form has no trans-a); wait_group ``(Immediate(n),)``; the others ``()``.
"""

from __future__ import annotations

from ...errors import ContractError, TirxSyntaxError
from ...frozen import frozen
from ...ir import nodes as ir
from ...isa.core import Contract, Family, FamilySpec, OperandSpec, Role
from ...isa.operands import check_held_elements
from ...isa.raw_forms import no_tile_form
from .isa_descriptor import derive, encode
from .isa_docs import doc_rows
from .isa_forms import (
    ELEMENT,
    ELEMENT_BITS,
    SHAPE,
    SLOTS,
    candidates,
    line_of,
    reject,
    shape_problem,
)
from .isa_fragments import (
    D32_LAYOUT,
    FORMULA_D32,
    FORMULA_WORDS,
    WORDS_LAYOUT,
    a_words,
    accumulator_owner,
    accumulator_words,
    warpgroup_registers,
)
from .isa_notes import NOTES
from .isa_raw import MAX_WAIT, immediate, line, lower_raw, scale_d_operand

__all__ = ["SPEC", "SPECS", "MIN_ARCH", "accumulator_owner"]

MIN_ARCH = 90
_ACC = {  # .dtype -> (register dtype, PTX register type, elements per register)
    "f32": ("float32", "f32", 1),
    "s32": ("int32", "s32", 1),
    "f16": ("uint32", "f16x2", 2),
}


def _accumulator(n: int, acc: str) -> OperandSpec:
    dtype, ptx, per = _ACC[acc]
    if per == 1:
        return OperandSpec(
            "D", Role.ACCUM_INOUT, dtype, (64, n), n // 2, accumulator_owner,
            about=f"the 64x{n} .{acc} accumulator, {n // 2} registers per thread of the warpgroup",
            formula=FORMULA_D32, ptx_type=ptx, owner_separable=True,
        )  # fmt: skip
    return OperandSpec(
        "D", Role.ACCUM_INOUT, dtype, (64, n // 2), n // 4, accumulator_words,
        about=f"the 64x{n} .f16 accumulator as 64x{n // 2} u32 words of two halves, {n // 4} "
        "registers per thread", formula=FORMULA_WORDS, ptx_type=ptx, elements_per_word=2,
        owner_separable=True,
    )  # fmt: skip


def build(text: str, mods: dict) -> Contract:
    act = mods["action"]
    if act != "mma_async":
        ops = ()
        if act == "wait_group":
            about = f"how many of the thread's newest wgmma groups may stay pending, 0..{MAX_WAIT}"
            ops = (OperandSpec("n", Role.IMMEDIATE, "uint32", (), 0, about=about),)
        return Contract(text, Family.WGMMA, ops, MIN_ARCH, tuple(mods.items()), arch_specific=True)
    form = line_of(mods["atype"])
    n = int(mods["shape"].split("n")[1].split("k")[0])
    a, b, acc = mods["atype"], mods["btype"], mods["dtype"]
    k = form.k
    imm_about = {
        "scale_a": "1, or -1 to negate A", "scale_b": "1, or -1 to negate B",
        "trans_a": "0: A K-major, 1: M-major", "trans_b": "0: B K-major, 1: N-major",
    }  # fmt: skip
    ops = (
        _accumulator(n, acc),
        OperandSpec("A", Role.DESCRIPTOR, "uint64", (64, k), 0,
                    about=f"a_desc: a (64, {k}) {ELEMENT[a]} shared tile"),
        OperandSpec("B", Role.DESCRIPTOR, "uint64", (n, k), 0,
                    about=f"b_desc: an ({n}, {k}) {ELEMENT[b]} shared tile (B given N-major)"),
        OperandSpec("scale_d", Role.SCALAR_IN, "int32", (), 0, about="0: D = A·B, else A·B + D"),
        *(OperandSpec(x, Role.IMMEDIATE, "int32", (), 0, about=imm_about[x])
          for x in form.immediates(False)),
    )  # fmt: skip
    registers = OperandSpec(
        "A", Role.REG_IN, "uint32", (64, 8), 4, a_words, ("M", "K"),
        about=f"the 64x{k} {a} tile as 64x8 u32 words, 4 registers per thread",
        formula=FORMULA_WORDS, elements_per_word=32 // ELEMENT_BITS[a], owner_separable=True,
    )  # fmt: skip
    params = (
        ("n", n), ("k", k), ("line", form.name), ("a_type", a), ("b_type", b),
        ("acc_type", acc), ("satfinite", bool(mods["satfinite"])), ("a_registers", registers),
    )  # fmt: skip
    return Contract(
        text, Family.WGMMA, ops, MIN_ARCH, tuple(mods.items()), params, arch_specific=True
    )


@frozen
class _Spec(FamilySpec):
    """The family's spec: its parse names what is wrong with an m64nNkK shape, and its forms
    are enumerated line by line (the slots allow half a million combinations)."""

    def parse(self, text: str):
        mods, why = FamilySpec.parse(self, text)
        if mods is None:
            for token in text.split("."):
                got = SHAPE.match(token)
                if got and token not in self.slots[4].choices:
                    return None, shape_problem(*map(int, got.groups()))
        return mods, why

    def combinations(self):
        return candidates()


# ----------------------------------------------------------------------------- tile form


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    """``T.cuda.tile.apply(T.ptx[mma_async], D, A, B, scope="warpgroup", scale_d=1)``: D a
    local register view checked against the accumulator fragment; A a shared view (ss) or a
    local view of 32-bit words checked against A's register fragment (rs); B a shared view.
    Each shared view's descriptor, and its K- or MN-major immediate, is derived here (scope,
    arch and operand count were checked by :mod:`tirx.transform.tile_ops`)."""
    text = contract.text
    if contract.modifier("action") != "mma_async":
        raise no_tile_form(contract, "n" if contract.operands else "")
    form = line(contract)
    params = dict(op.params)
    allowed = {"scale_d", *(("scale_a", "scale_b") if form.scale_ab else ())}
    unknown = sorted(set(params) - allowed)
    if unknown:
        why = "" if form.scale_ab else " (the integer wgmma has no imm-scale-a/imm-scale-b)"
        raise TirxSyntaxError(
            f"{text}: unexpected parameters {unknown}{why}",
            hint="the tile form takes scale_d= (default 1)"
            + (", scale_a= and scale_b= (1 or -1)" if form.scale_ab else ""),
        )
    d_spec, a_spec, b_spec = contract.operands[:3]
    dv, av, bv = op.operands
    hint = D32_LAYOUT if d_spec.elements_per_word == 1 else WORDS_LAYOUT.replace("W", "N // 2")
    d_slots = warpgroup_registers(contract, d_spec, dv, f"acc.view(64, N, layout={hint})")
    registers_a = isinstance(av, ir.View) and av.buffer.scope is ir.Scope.LOCAL
    trans = {}
    if registers_a:
        r_spec = contract.param("a_registers")
        check_held_elements(f"{text}: operand A", ELEMENT[contract.param("a_type")], av)
        words = "p.view(64, 16, layout=...).view('uint32') with layout "
        a_slots = warpgroup_registers(contract, r_spec, av, words + WORDS_LAYOUT.replace("W", "8"))
        a_op = ir.RegVector(tuple(ir.LocalReg(av.buffer, s, ir.U32) for s in a_slots), False)
    else:
        a_op, trans["trans_a"] = _descriptor(contract, a_spec, av, contract.param("a_type"))
    b_op, trans["trans_b"] = _descriptor(contract, b_spec, bv, contract.param("b_type"))
    scale_d = scale_d_operand(text, params.get("scale_d", 1), None)
    imms = [
        ir.Immediate(trans[name])
        if name in trans
        else immediate(text, name, params.get(name, 1), None, (1, -1))
        for name in form.immediates(registers_a)
    ]
    d = ir.RegVector(tuple(ir.LocalReg(dv.buffer, s, dv.dtype) for s in d_slots), True)
    return [ir.PtxCall(text, (d, a_op, b_op, scale_d, *imms), op.span)]


def _descriptor(contract: Contract, spec: OperandSpec, v, ptx_type: str):
    """The descriptor operand of a shared view and its trans immediate (1: MN-major)."""
    where = f"{contract.text}: operand {spec.name}"
    element = ELEMENT[ptx_type]
    if not isinstance(v, ir.View):
        raise ContractError(f"{where} must be a shared tensor view, got a scalar value")
    if v.buffer.scope is ir.Scope.GLOBAL:
        regs = " (or, for A, a register view)" if spec.name == "A" else ""
        raise ContractError(
            f"{where} must be in shared memory{regs}, got global tensor {v.buffer.name!r}",
            hint="wgmma reads its shared operands through descriptors: copy the tile into a "
            "T.alloc_shared buffer first",
        )
    if v.dtype.name != element:
        raise ContractError(
            f"{where} must be a {element} view (the instruction's .{ptx_type}), got {v.dtype}",
            hint="name the instruction of the tile's type, or view the tile with that dtype",
        )
    if tuple(v.shape) != spec.atom:
        rows, k = spec.atom
        fix = []
        if len(v.shape) == 2 and v.shape[0] != rows:  # M (A) or N (B) rows of the line
            mn = "M" if spec.name == "A" else "N"
            fix.append(f"take {rows} rows (the line's {mn}): tile[{rows} * i : {rows} * i + "
                       f"{rows}, ...]" + (f", or name the line whose N is {v.shape[0]} "
                       f"(m64n{v.shape[0]})" if mn == "N" else ""))  # fmt: skip
        if len(v.shape) != 2 or v.shape[-1] != k:
            fix.append(f"slice the tile {k} columns at a time: tile[:, {k} * k : {k} * k + {k}]")
        raise ContractError(
            f"{where} must have shape {spec.atom} ({k} K elements, 32 bytes, per row), got "
            f"{tuple(v.shape)}",
            hint="; ".join(fix),
        )
    desc = derive(v, where, trans_ok=contract.param("k") == 16)
    return ir.ScalarOperand(encode(desc)), int(desc.mn_major)


SPEC = _Spec(
    Family.WGMMA, "wgmma", SLOTS, reject, build, lower_tile,
    "PTX ISA, Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions",
    exec_scope=ir.ExecScope.WARPGROUP, lower_raw=lower_raw, notes=NOTES,
    doc_rows=doc_rows,
)  # fmt: skip

SPECS = (SPEC,)
