"""Register-only float instructions that CUDA's math library gives only under fast math: the
``.approx`` functions of the special function unit and ``max``/``min`` with ``.ftz`` and
``.NaN`` (PTX ISA 9.7.3, "Floating Point Instructions").

The forms tirx has, as the ISA spells them::

    ex2.approx{.ftz}.f32    d, a;       d = 2^a                   9.7.3.21
    lg2.approx{.ftz}.f32    d, a;       d = log2(a)               9.7.3.20
    sin.approx{.ftz}.f32    d, a;       d = sin(a), a in radians  9.7.3.18
    cos.approx{.ftz}.f32    d, a;       d = cos(a)                9.7.3.19
    tanh.approx.f32         d, a;       d = tanh(a)  (sm_75)      9.7.3.22
    rcp.approx{.ftz}.f32    d, a;       d = 1 / a                 9.7.3.13
    rsqrt.approx{.ftz}.f32  d, a;       d = 1 / sqrt(a)           9.7.3.16
    max{.ftz}{.NaN}.f32     d, a, b;    (.NaN: sm_80)             9.7.3.12
    min{.ftz}{.NaN}.f32     d, a, b;                              9.7.3.11

Raw calls only, in either spelling: ``T.ptx["ex2.approx.ftz.f32"](s[i], x)`` or the real
TIRx's ``T.ptx.ex2.approx.ftz.f32(s[i], x)``. ``d`` is written: an element of a local
``float32`` array (a register) at a compile-time index (a constant, the variable of a
``T.unroll`` loop, or a variable its body assigns once from them); ``a`` and ``b`` are ``float32`` values (a register, a load, an expression, a
number). ``d`` may be ``a`` or ``b``
(``T.ptx["ex2.approx.ftz.f32"](s[i], s[i])``): the instruction reads its operands before it
writes.
"""

from __future__ import annotations

from ...errors import ContractError
from ...ir import nodes as ir
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from ...isa.raw_forms import local_register, no_tile_form

__all__ = ["SPECS", "NOTES", "APPROX", "MIN_ARCH"]

#: The ISA's "supported on all target architectures", from the first whose rules these are:
#: from sm_20 on, subnormal operands are kept unless ``.ftz`` is given (sm_1x always flushed).
ALL_TARGETS = 20
#: the minimum ``sm_`` of a form: tanh needs sm_75, max/min with .NaN sm_80
MIN_ARCH = {"tanh": 75, "NaN": 80}

_APPROX = ModifierSlot("approx", ("approx",))
_FTZ = ModifierSlot("ftz", ("ftz",), optional=True)
_F32 = ModifierSlot("type", ("f32",))
APPROX_SLOTS = (_APPROX, _FTZ, _F32)
# tanh.approx.f32 has no .ftz in the ISA; the slot is here to refuse it with the reason
TANH_SLOTS = APPROX_SLOTS
MINMAX_SLOTS = (_FTZ, ModifierSlot("nan", ("NaN",), optional=True), _F32)

#: mnemonic -> (what d receives, the ISA section)
APPROX = {
    "ex2": ("2^a", "9.7.3.21"),
    "lg2": ("log2(a)", "9.7.3.20"),
    "sin": ("sin(a), a in radians", "9.7.3.18"),
    "cos": ("cos(a), a in radians", "9.7.3.19"),
    "tanh": ("tanh(a)", "9.7.3.22"),
    "rcp": ("1 / a", "9.7.3.13"),
    "rsqrt": ("1 / sqrt(a)", "9.7.3.16"),
}
MINMAX = {"max": "9.7.3.12", "min": "9.7.3.11"}


def approx_reject(mods: dict) -> str | None:
    return None  # every function's one syntax line: op.approx{.ftz}.f32


def tanh_reject(mods: dict) -> str | None:
    if mods["ftz"]:
        return (
            "tanh.approx.f32 has no .ftz (PTX ISA 9.7.3.22: subnormal inputs pass through, "
            "tanh(x) being x there): write tanh.approx.f32"
        )
    return None


def minmax_reject(mods: dict) -> str | None:
    return None  # max{.ftz}{.NaN}.f32 / min{.ftz}{.NaN}.f32: every combination is a form


def _operand(name: str, role: Role, about: str) -> OperandSpec:
    return OperandSpec(name, role, "float32", (), 1, about=about, ptx_type="f32")


def build_for(family: Family):
    def build(text: str, mods: dict) -> Contract:
        mnemonic = family.value
        if mnemonic in MINMAX:
            what = "the larger" if mnemonic == "max" else "the smaller"
            ops = (
                _operand("d", Role.REG_OUT, f"a local float32 element: {what} of a and b"),
                _operand("a", Role.REG_IN, "a float32 value"),
                _operand("b", Role.REG_IN, "a float32 value"),
            )
            arch = MIN_ARCH["NaN"] if mods["nan"] else ALL_TARGETS
        else:
            ops = (
                _operand("d", Role.REG_OUT, f"a local float32 element: {APPROX[mnemonic][0]}"),
                _operand("a", Role.REG_IN, "a float32 value"),
            )
            arch = MIN_ARCH.get(mnemonic, ALL_TARGETS)
        return Contract(text, family, ops, arch, tuple(mods.items()))

    return build


# --------------------------------------------------------------------------- raw calls


def _example(contract: Contract) -> str:
    ins = ", b" if len(contract.operands) == 3 else ""
    return f'T.ptx["{contract.text}"](s[0], a{ins}), with s = T.alloc_local((1,), "float32")'


def _destination(text: str, e, span, address) -> ir.RegVector:
    """``d``: an element of a local float32 array at a compile-time index."""
    if not (isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.LOCAL):
        got = (
            f"an element of the {e.view.buffer.scope.value} tensor {e.view.buffer.name!r}"
            if isinstance(e, ir.ElemLoad)
            else "a value"
        )
        raise ContractError(
            f"{text}: d is written, so it must be an element of a local float32 array (a "
            f"register), got {got}",
            hint='s = T.alloc_local((1,), "float32"); pass s[0] as d, then use or store s[0]',
        ).with_span(span)
    name = e.view.buffer.name
    if e.dtype.name != "float32":
        raise ContractError(
            f"{text}: d is a {e.dtype} element of {name!r}; the instruction writes an .f32 "
            "register",
            hint=f'allocate {name} as float32: T.alloc_local(..., "float32")',
        ).with_span(span)
    reg = local_register(e, address)
    if reg is None:
        raise ContractError(
            f"{text}: d's index into {name!r} is not known at compile time; the instruction "
            "names its register",
            hint="index with a constant, or loop with T.unroll(n) (each copy of its body then "
            "has its own index)",
        ).with_span(span)
    return ir.RegVector((reg,), True)


def _source(text: str, name: str, e, span, address) -> ir.RegVector:
    """``a`` or ``b``: a float32 value; a local float32 element is read as its register."""
    e = ir.as_expr(e)
    if isinstance(e, ir.Const) and e.dtype.kind in ("int", "uint"):  # a number: 2 is 2.0
        return ir.RegVector((ir.ValueReg(ir.const(float(e.value), ir.F32)),), False)
    if e.dtype.name != "float32":
        raise ContractError(
            f"{text}: {name} is {e.dtype}; the instruction reads an .f32 register",
            hint=f"convert it: T.float32({name})"
            + (" (a rounding to float32)" if e.dtype.name == "float64" else ""),
        ).with_span(span)
    if isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.LOCAL:
        reg = local_register(e, address)
        if reg is not None:
            return ir.RegVector((reg,), False)
    return ir.RegVector((ir.ValueReg(e),), False)


def lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    """``T.ptx[text](d, a)`` / ``T.ptx[text](d, a, b)``: the count, d's place and dtype, the
    inputs' dtype, each a ContractError at the operand with the fix in its hint."""
    text = contract.text
    names = [o.name for o in contract.operands]
    n = len(names)
    if len(op.operands) != n:
        raise ContractError(
            f'T.ptx["{text}"] takes {n} operands ({", ".join(names)}), got {len(op.operands)}',
            hint=f"e.g. {_example(contract)}",
        ).with_span(op.span)
    spans = list(op.operand_spans) + [None] * n
    d = _destination(text, op.operands[0], spans[0], address)
    ins = tuple(_source(text, names[k], op.operands[k], spans[k], address) for k in range(1, n))
    return ir.PtxCall(text, (d, *ins), op.span)


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    raise no_tile_form(contract, "d, a" if len(contract.operands) == 2 else "d, a, b")


# ------------------------------------------------------------------------------- specs

NOTES = """
Register-only `.f32` instructions beyond what CUDA's math library gives without
`--use_fast_math` (tirx compiles without it: `T.exp2` is `exp2f`, within 2 ulp, several
instructions): the special function unit's approximations `ex2`, `lg2`, `sin`, `cos`, `tanh`,
`rcp`, `rsqrt`, and `max`/`min` with the `.ftz` and `.NaN` modifiers (plain `max.f32` is
`fmaxf`'s own instruction, here too). Raw calls, `T.ptx["ex2.approx.ftz.f32"](s[i], x)` or
the real TIRx's `T.ptx.ex2.approx.ftz.f32(s[i], x)`: `d` an element of a local float32 array
at a compile-time index (a constant, the variable of a `T.unroll` loop, or a variable its
body assigns once from them: `i = 4 * ni + e`), `a` (and `b`)
float32 values; `d` may be an input (`(s[i], s[i])`).
Checked when lowering, a `ContractError` at the operand: the operand count, a `d` that is not
a local float32 element or whose index is not known, an input of another dtype
(`T.float32(x)` converts), the arch (`tanh` sm_75, `.NaN` sm_80; the others are the ISA's "all
target architectures", sm_20 below, and tirx's targets begin at sm_80). The CUDA is one `asm`
with `"=f"`/`"f"` operands, not volatile and without a memory clobber: the result depends on
the operands alone.

`.ftz` flushes subnormal inputs and results to zero of the same sign; without it subnormals
are kept (sm_20 on). The simulator cannot be bit-exact with the hardware's approximations: it
computes each function in float64, rounds once to float32, applies `.ftz` and the ISA's table
of special values, and the ISA's maximum error is the bound the GPU tests compare within:

| function | ±0 | +inf | -inf | NaN | negative | maximum error (PTX ISA) |
|---|---|---|---|---|---|---|
| `ex2` | +1 | +inf | +0 | NaN | | 2 ulp of the correctly rounded result (9.7.3.21) |
| `lg2` | -inf | +inf | NaN | NaN | NaN | 2^-22 absolute in (0.5, 2), 2^-22 relative elsewhere (9.7.3.20) |
| `sin` | ±0 | NaN | NaN | NaN | | 2^-20.5 absolute in [-2π, 2π], 2^-14.7 in [-100π, 100π], none beyond (9.7.3.18) |
| `cos` | +1 | NaN | NaN | NaN | | as `sin` (9.7.3.19) |
| `tanh` | ±0 | +1 | -1 | NaN | | 2^-11 relative; subnormals pass through, no `.ftz` (9.7.3.22) |
| `rcp` | ±inf | +0 | -0 | NaN | | 1 ulp (9.7.3.13) |
| `rsqrt` | ±inf | +0 | NaN | NaN | NaN | 2^-22.9 relative (9.7.3.16) |

A NaN result is the canonical NaN (`0x7fffffff`) in the simulator; the GPU tests compare NaN
results as NaN.
"""

MINMAX_NOTES = """
`T.ptx["max.f32"](d, a, b)`, `T.ptx["min.NaN.f32"](d, a, b)` (`T.ptx.max.ftz.NaN.f32(...)`):
`d` and the operands as for `ex2` above. Exact, in the simulator as on the GPU (PTX ISA
9.7.3.11, 9.7.3.12):

- without `.NaN`, a NaN operand loses: the result is the other operand (`fmaxf`/`fminf`, one
  `FMNMX`); both NaN gives NaN. With `.NaN` (sm_80), any NaN operand gives the canonical NaN
  (`0x7fffffff`);
- -0 is less than +0: `max(-0, +0)` is +0 and `min(-0, +0)` is -0, in either order (the ISA:
  "If values of both inputs are 0.0, then +0.0 > -0.0");
- `.ftz` flushes subnormal operands to zero of the same sign first, so `max.ftz(1e-40, -0)`
  is +0 and `min.ftz(-1e-40, +0)` is -0; the result, an operand, is then never subnormal.

Not here: `.xorsign.abs` (sm_86), the three-operand form (sm_100), `.f64`. `T.max(a, b)` on
floats is another thing: the real TIRx's select `a if a > b or a != a else b`, NaN when either
operand is NaN (as with `.NaN`), but of two zeros the second.
"""

_NO_PICTURE = "each thread computes on its own scalar registers; there is no fragment"


def _spec(family: Family, slots, reject, section: str, notes: str) -> FamilySpec:
    return FamilySpec(
        family, family.value, slots, reject, build_for(family), lower_tile,
        f"PTX ISA {section}, Floating Point Instructions: {family.value}",
        exec_scope=ir.ExecScope.THREAD, lower_raw=lower_raw, notes=notes,
        no_picture=_NO_PICTURE,
    )  # fmt: skip


def _approx_notes(mnemonic: str) -> str:
    if mnemonic == "ex2":
        return NOTES
    if mnemonic == "tanh":
        return (
            "`d = tanh(a)` (sm_75). The ISA spells no `.ftz` for it (subnormal inputs pass "
            "through), and `tanh.approx.ftz.f32` is refused with that reason. See ex2 above for "
            "the operands, the special values and the error bound."
        )
    return (
        f"`d = {APPROX[mnemonic][0]}`: see ex2 above for the operands, the special values and "
        "the error bound."
    )


SPECS = (
    *(
        _spec(
            Family(m),
            TANH_SLOTS if m == "tanh" else APPROX_SLOTS,
            tanh_reject if m == "tanh" else approx_reject,
            section,
            _approx_notes(m),
        )
        for m, (_, section) in APPROX.items()
    ),
    _spec(Family.MAX, MINMAX_SLOTS, minmax_reject, MINMAX["max"], MINMAX_NOTES),
    _spec(
        Family.MIN, MINMAX_SLOTS, minmax_reject, MINMAX["min"],
        "The smaller of `a` and `b`, by the same rules as max above.",
    ),
)  # fmt: skip
