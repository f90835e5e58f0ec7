"""setmaxnreg: a warpgroup gives registers back to its CTA's pool, or takes more from it (PTX ISA
9.7.21.5 "Miscellaneous Instructions: setmaxnreg"; PTX 8.0, sm_90a).

``setmaxnreg.{inc,dec}.sync.aligned.u32 imm-reg-count;`` sets the maximum number of registers
per thread that the executing warp owns to ``imm-reg-count``, an integer constant that the ISA
bounds to 24 .. 256 in steps of 8. ``.dec`` releases the registers above the count to a pool
kept per CTA; ``.inc`` takes registers from that pool, waiting until there are enough. The same
instruction must be executed by all warps of a warpgroup (``.aligned``), and the warps must
synchronize explicitly before the warpgroup executes another one. This is how a
warp-specialized kernel gives its producer warpgroup few registers and its consumer
warpgroups many::

    wg = T.cuda.warpgroup_id()
    if wg == 0:
        T.ptx["setmaxnreg.dec.sync.aligned.u32"](40)    # the producer
        ...
    else:
        T.ptx["setmaxnreg.inc.sync.aligned.u32"](232)   # the consumers
        ...

Raw calls only (the real TIRx's ``T.ptx.setmaxnreg.inc.sync.aligned.u32(232)`` is the same
instruction). The kernel-wide rules (which warpgroups execute which call, the register
arithmetic of the block, the count the launch reserves) are :mod:`.lower`'s.
"""

from __future__ import annotations

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from ...isa.raw_forms import no_tile_form

__all__ = ["SPEC", "SPECS", "MIN_ARCH", "FEWEST", "MOST", "STEP", "valid_count", "NOTES"]

MIN_ARCH = 90  # sm_90a: the arch-specific feature set of sm_90 (compiled for sm_90a)
FEWEST, MOST, STEP = 24, 256, 8  # imm-reg-count: "in the range 24 to 256 ... a multiple of 8"

SLOTS = (
    ModifierSlot("action", ("inc", "dec")),
    ModifierSlot("sync", ("sync",)),
    ModifierSlot("aligned", ("aligned",)),
    ModifierSlot("type", ("u32",)),
)


def valid_count(n: int) -> bool:
    return FEWEST <= n <= MOST and n % STEP == 0


def reject(mods: dict) -> str | None:
    return None  # the ISA has both actions of the one syntax line


def build(text: str, mods: dict) -> Contract:
    count = OperandSpec(
        "imm-reg-count", Role.IMMEDIATE, "uint32", (), 0,
        about=f"the warp's new maximum of registers per thread: {FEWEST} .. {MOST}, a multiple "
        f"of {STEP}",
    )  # fmt: skip
    return Contract(
        text, Family.SETMAXNREG, (count,), MIN_ARCH, tuple(mods.items()), arch_specific=True
    )


def lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    """``T.ptx["setmaxnreg.inc.sync.aligned.u32"](n)``: ``n`` a compile-time int, 24 .. 256, a
    multiple of 8 (the ISA's domain; ptxas refuses any other)."""
    text = contract.text
    example = f'T.ptx["{text}"]({232 if contract.modifier("action") == "inc" else 40})'
    if len(op.operands) != 1:
        raise ContractError(
            f'T.ptx["{text}"](n) takes one operand, the new number of registers per thread, '
            f"got {len(op.operands)}",
            hint=f"e.g. {example}",
        ).with_span(op.span)
    value = op.operands[0]
    span = op.operand_spans[0] if op.operand_spans else op.span
    n = static_value(value)
    if n is None or (isinstance(value, ir.Expr) and value.dtype.kind == "float"):
        raise ContractError(
            f"{text}: the register count must be a compile-time int",
            hint=f"the count is an immediate of the instruction, e.g. {example}",
        ).with_span(span)
    if not valid_count(n):
        clamp = min(max(n, FEWEST), MOST)
        near = sorted({clamp // STEP * STEP, -(-clamp // STEP) * STEP})
        raise ContractError(
            f"{text}: the register count {n} is not a multiple of {STEP} in {FEWEST} .. {MOST}",
            hint="the PTX ISA allows 24, 32, ..., 256 registers per thread; the nearest: "
            + " or ".join(map(str, near)),
        ).with_span(span)
    return ir.PtxCall(text, (ir.Immediate(n),), op.span)


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    raise no_tile_form(contract, "n")


NOTES = """
`T.ptx["setmaxnreg.dec.sync.aligned.u32"](40)` / `T.ptx["setmaxnreg.inc.sync.aligned.u32"](232)`:
the warp's new maximum of registers per thread, a compile-time int, 24 .. 256, a multiple of 8
(`ContractError` at the operand otherwise). sm_90a: a kernel that uses it is compiled for
`sm_90a` (an sm_80 target refuses it). Executed by whole warpgroups, so the block is a multiple
of 128 threads (`MachineLimitError`). The kernel is given `__launch_bounds__(threads, 1)`: ptxas
then reserves a known count per thread at launch (`Function.launch_registers`, `exe.stats`
shows it), the pool the warpgroups trade in. Checked at compile time over the branches the
compiler can evaluate from thread indices (`wg = T.cuda.warpgroup_id()`; `if wg == 0:`): every
warp of a warpgroup executes the same calls; a `.dec` count is at most, an `.inc` count at
least, what the warpgroup holds; a `T.cuda.cta_sync()` separates two calls of one warpgroup;
and the counts the warpgroups hold add up to no more than the launch reserves (else an `.inc`
would wait forever): a `ContractError` that shows the arithmetic. The simulator keeps each
warp's count and the CTA's pool, blocks an `.inc` until the pool has its registers, and faults
a warpgroup whose warps disagree (docs/simulator.md).
"""

_NO_PICTURE = "it moves registers between warps; it has no operands but its count"
SPEC = FamilySpec(
    Family.SETMAXNREG, "setmaxnreg", SLOTS, reject, build, lower_tile,
    "PTX ISA 9.7.21.5 (setmaxnreg)",
    exec_scope=ir.ExecScope.WARPGROUP, lower_raw=lower_raw, notes=NOTES, no_picture=_NO_PICTURE,
)  # fmt: skip

SPECS = (SPEC,)
