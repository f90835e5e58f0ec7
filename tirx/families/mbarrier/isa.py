"""mbarrier: the shared-memory barrier objects of the PTX ISA ("Parallel Synchronization and
Communication Instructions: mbarrier"), their arrive-on from ``cp.async`` ("cp.async.mbarrier.
arrive") and the init fence ("membar / fence": ``fence.mbarrier_init``), declared as forms.

An mbarrier is an opaque 8-byte object in shared memory (a ``uint64`` element of a shared
tensor, 8-byte aligned): a phase parity, a pending arrival count, the expected arrival count
and a transaction count. The forms tirx has, as the ISA spells them::

    mbarrier.init.shared{::cta}.b64                  [addr], count            (sm_80)
    mbarrier.arrive{.release.cta}.shared{::cta}.b64  _, [addr]{, count}       (sm_80; sm_90
                                                     with .release.cta; count needs sm_90)
    mbarrier.arrive.expect_tx{.release.cta}.shared{::cta}.b64  _, [addr], txCount   (sm_90)
    mbarrier.expect_tx{.relaxed.cta}.shared{::cta}.b64         [addr], txCount      (sm_90)
    mbarrier.test_wait.parity{.acquire.cta}.shared{::cta}.b64  done, [addr], parity (sm_80)
    mbarrier.try_wait.parity{.acquire.cta}.shared{::cta}.b64   done, [addr], parity (sm_90)
    mbarrier.inval.shared{::cta}.b64                 [addr]                   (sm_80)
    cp.async.mbarrier.arrive{.noinc}.shared{::cta}.b64  [addr]                (sm_80)
    fence.mbarrier_init.release.cluster                                       (sm_90)

Raw calls: ``T.ptx["mbarrier.init.shared::cta.b64"](bar[0], 32)``; arrive's state result is
always the sink ``_`` (tirx keeps no state tokens, so the waits are the ``.parity`` ones);
``T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](done[0], bar[0], phase)`` writes 1 or 0 to
a local ``uint32`` element. The same wait *without* the ``done`` operand,
``T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](bar[0], phase)``, is tirx's waiting form:
it loops until the phase with that parity has completed; ``T.cuda.mbarrier_wait(bar[0], phase)``
(the real TIRx's spelling, ``bar.ptr_to([0])`` too) is the same call.

Lowered (PTX order): ``[RegVector(done, out)]``, ``AddressOperand(SharedAddress)``, then each
count, tx count or parity as ``ScalarOperand(u32)``; the arrive's ``_`` is the codegen's.
"""

from __future__ import annotations

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from ...isa.raw_forms import (
    barrier_address,
    cluster_address,
    local_register,
    no_operands,
    no_tile_form,
    reads_memory,
)

__all__ = ["SPEC", "CP_ASYNC_SPEC", "FENCE_SPEC", "MAX_COUNT", "MAX_TX", "NOTES"]

MAX_COUNT = 2**20 - 1  # the ISA's range of an expected or arrival count: 1 .. 2^20 - 1
MAX_TX = 2**20 - 1  # and of a transaction count: 0 .. 2^20 - 1
ALIGN = 8  # bytes: an mbarrier object is 8 bytes, 8-byte aligned
_WAITS = ("test_wait", "try_wait")
_DONE_TYPES = ("uint32", "int32")

SLOTS = (
    ModifierSlot(
        "action",
        (
            *("init", "arrive", "expect_tx", "test_wait", "try_wait", "inval"),
            *("arrive_drop", "complete_tx", "pending_count"),
        ),
    ),
    ModifierSlot("expect_tx", ("expect_tx",), optional=True),
    ModifierSlot("nocomplete", ("noComplete",), optional=True),
    ModifierSlot("parity", ("parity",), optional=True),
    ModifierSlot("sem", ("release", "acquire", "relaxed"), optional=True),
    ModifierSlot("scope", ("cta", "cluster"), optional=True),
    ModifierSlot("space", ("shared", "shared::cta", "shared::cluster"), optional=True),
    ModifierSlot("type", ("b64",)),
)

# the one memory-order qualifier each action takes (the ISA: .sem and .scope come together)
_SEM = {"arrive": "release", "test_wait": "acquire", "try_wait": "acquire", "expect_tx": "relaxed"}


def _example(mods: dict) -> str:
    act = mods["action"]
    if act in _WAITS:
        return f"mbarrier.{act}.parity.shared::cta.b64"
    if act == "arrive" and mods["expect_tx"]:
        return "mbarrier.arrive.expect_tx.shared::cta.b64"
    if act in ("init", "arrive", "expect_tx", "inval"):
        return f"mbarrier.{act}.shared::cta.b64"
    return "mbarrier.arrive.shared::cta.b64"


def reject(mods: dict) -> str | None:
    act, use = mods["action"], _example(mods)
    if act in ("arrive_drop", "complete_tx", "pending_count") or mods["nocomplete"]:
        what = f"mbarrier.{act}" + (".noComplete" if mods["nocomplete"] else "")
        return f"{what} is not supported by tirx: use {use}"
    if mods["expect_tx"] and act != "arrive":
        return f".expect_tx after .{act} is not an mbarrier form: use {use}"
    if mods["parity"] and act not in _WAITS:
        return f".parity belongs to the waits: use {use}"
    if act in _WAITS and not mods["parity"]:
        return f"tirx keeps no mbarrier state tokens, so its waits are the .parity forms: use {use}"
    if (mods["sem"] is None) != (mods["scope"] is None):
        return f"the ISA requires .sem and .scope together: use {use}"
    if mods["sem"] is not None:
        want = _SEM.get(act)
        if want is None:
            return f"mbarrier.{act} takes no .sem/.scope: use {use}"
        if mods["sem"] != want:
            return f"mbarrier.{act} takes .{want}.cta or .{want}.cluster: use {use}"
    if mods["space"] == "shared::cluster" and act != "arrive":
        return (
            "a peer block's barrier (.shared::cluster) takes arrives only in tirx: use "
            "mbarrier.arrive.release.cluster.shared::cluster.b64 (or .expect_tx)"
        )
    if mods["space"] is None:
        return (
            f"an mbarrier is addressed in shared memory (.shared::cta), not generically: use {use}"
        )
    return None


def _min_arch(mods: dict) -> int:
    act = mods["action"]
    if act in ("try_wait", "expect_tx") or mods["expect_tx"] or mods["sem"] is not None:
        return 90
    if mods["space"] == "shared::cluster":
        return 90
    return 80


def _barrier_operand() -> OperandSpec:
    return OperandSpec(
        "bar", Role.MBARRIER, "uint64", (), 0,
        about="a uint64 element of a shared tensor, 8-byte aligned",
    )  # fmt: skip


def _scalar(name: str, about: str, optional: bool = False) -> OperandSpec:
    return OperandSpec(name, Role.SCALAR_IN, "uint32", (), 0, about=about, optional=optional)


def build(text: str, mods: dict) -> Contract:
    act = mods["action"]
    bar = _barrier_operand()
    if act == "init":
        ops = (bar, _scalar("count", f"expected arrivals, 1..{MAX_COUNT}"))
    elif act == "arrive" and mods["expect_tx"] or act == "expect_tx":
        ops = (bar, _scalar("tx_count", f"bytes expected, 0..{MAX_TX}"))
    elif act == "arrive":
        ops = (bar, _scalar("count", f"arrivals, 1..{MAX_COUNT} (default 1; sm_90)", True))
    elif act in _WAITS:
        done = OperandSpec(
            "done", Role.PRED_OUT, "uint32", (), 1, optional=True,
            about="a local uint32 element, set to 1 when the phase completed, else 0; left "
            "out: wait until it does",
        )  # fmt: skip
        ops = (done, bar, _scalar("parity", "the parity of the phase waited for, 0 or 1"))
    else:  # inval
        ops = (bar,)
    return Contract(text, Family.MBARRIER, ops, _min_arch(mods), tuple(mods.items()))


# ------------------------------------------------------------------------------ raw form


def _count(text: str, name: str, e, lo: int, hi: int, span) -> ir.ScalarOperand:
    """A u32 count; checked against ``lo .. hi`` when it is a compile-time constant."""
    if isinstance(e, ir.Expr) and e.dtype.kind == "float":
        raise ContractError(
            f"{text}: {name} must be an integer", hint="convert it: T.uint32(...), or pass an int"
        ).with_span(span)
    if reads_memory(e):
        raise ContractError(
            f"{text}: {name} must be computed from indices, parameters or variables, not read "
            "from a tensor",
            hint="load the value into a variable first: n = counts[i]; then pass n",
        ).with_span(span)
    v = static_value(e)
    if v is not None and not lo <= v <= hi:
        fix = {
            "count": f"an mbarrier counts {lo}..{hi} arrivals",
            "tx_count": f"a transaction count is {lo}..{hi} bytes: split the transfer",
            "parity": "the parity of a phase is 0 or 1: pass phase & 1",
        }[name]
        raise ContractError(f"{text}: {name} is {v}, outside {lo}..{hi}", hint=fix).with_span(span)
    return ir.ScalarOperand(ir.cast(e, ir.U32))


def _done_register(text: str, e, span, address) -> ir.RegVector:
    ok = isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.LOCAL
    if not ok or e.dtype.name not in _DONE_TYPES:
        raise ContractError(
            f"{text}: the result must be an element of a local uint32 tensor (it is written)",
            hint='done = T.alloc_local((1,), "uint32"); pass done[0]; or leave it out to wait '
            "until the phase completes",
        ).with_span(span)
    reg = local_register(e, address)
    if reg is None:
        raise ContractError(f"{text}: the result needs a compile-time index").with_span(span)
    return ir.RegVector((reg,), True)


def lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    """Lower ``T.ptx["mbarrier..."](...)`` (the target arch was checked by the caller)."""
    text, act = contract.text, contract.modifier("action")
    given = list(op.operands)
    spans = list(op.operand_spans) + [None] * (len(given) + 1)
    arities = {
        "init": ((2,), "the barrier and the expected count"),
        "arrive": ((2,) if contract.modifier("expect_tx") else (1, 2), "the barrier{, count}"),
        "expect_tx": ((2,), "the barrier and the tx count"),
        "test_wait": ((2, 3), "{done,} the barrier and the parity"),
        "try_wait": ((2, 3), "{done,} the barrier and the parity"),
        "inval": ((1,), "the barrier"),
    }
    counts, what = arities[act]
    if contract.modifier("expect_tx"):
        what = "the barrier and the tx count"
    if len(given) not in counts:
        n = " or ".join(map(str, counts))
        raise ContractError(
            f'T.ptx["{text}"] takes {n} operands ({what}), got {len(given)}',
            hint=f"see the {contract.family.value} forms in docs/instructions.md",
        ).with_span(op.span)
    out = []
    if act in _WAITS and len(given) == 3:
        out.append(_done_register(text, given.pop(0), spans.pop(0), address))
    if contract.modifier("space") == "shared::cluster":  # a peer's barrier: an address value
        out.append(cluster_address(text, given[0], spans[0], address, "the barrier"))
    else:
        out.append(barrier_address(text, given[0], spans[0], address))
    if act == "arrive" and len(given) == 2 and not contract.modifier("expect_tx") and arch < 90:
        raise ContractError(
            f"{text} with a count operand needs sm_90 or newer; the target is sm_{arch}",
            hint=f"arrive once per thread without a count on sm_{arch}, or compile with "
            'target="cuda -arch=sm_90"',
        ).with_span(spans[1])
    if len(given) == 2:
        name = {"init": "count", "arrive": "count", "expect_tx": "tx_count"}.get(act, "parity")
        if contract.modifier("expect_tx"):
            name = "tx_count"
        lo, hi = {"count": (1, MAX_COUNT), "tx_count": (0, MAX_TX), "parity": (0, 1)}[name]
        out.append(_count(text, name, given[1], lo, hi, spans[1]))
    return ir.PtxCall(text, tuple(out), op.span)


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    raise no_tile_form(contract, "..." if contract.operands else "")


# ------------------------------------------------------- cp.async.mbarrier.arrive, fence

CP_ASYNC_SLOTS = (
    ModifierSlot("action", ("arrive",)),
    ModifierSlot("noinc", ("noinc",), optional=True),
    ModifierSlot("space", ("shared", "shared::cta", "shared::cluster"), optional=True),
    ModifierSlot("type", ("b64",)),
)


def cp_async_reject(mods: dict) -> str | None:
    use = "cp.async.mbarrier.arrive.shared::cta.b64 (or .noinc)"
    if mods["space"] == "shared::cluster":
        return f"tirx has no cp.async arrive-on of a peer block's barrier: use {use}"
    if mods["space"] is None:
        return f"an mbarrier is addressed in shared memory (.shared::cta): use {use}"
    return None


def cp_async_build(text: str, mods: dict) -> Contract:
    return Contract(text, Family.CP_ASYNC_MBARRIER, (_barrier_operand(),), 80, tuple(mods.items()))


def cp_async_lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    if len(op.operands) != 1:
        raise ContractError(
            f'T.ptx["{contract.text}"] takes 1 operand (the barrier), got {len(op.operands)}'
        ).with_span(op.span)
    span = op.operand_spans[0] if op.operand_spans else None
    return ir.PtxCall(
        contract.text, (barrier_address(contract.text, op.operands[0], span, address),), op.span
    )


FENCE_SLOTS = (ModifierSlot("sem", ("release",)), ModifierSlot("scope", ("cluster",)))


def fence_build(text: str, mods: dict) -> Contract:
    return Contract(text, Family.FENCE_MBARRIER_INIT, (), 90, tuple(mods.items()))


def fence_lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    return no_operands(contract.text, op)


NOTES = """
An mbarrier is a `uint64` element of a shared tensor (`bars = T.alloc_shared((n,), "uint64")`,
pass `bars[i]`). `T.ptx["mbarrier.init.shared::cta.b64"](bars[0], count)` sets its expected
arrival count; `T.ptx["mbarrier.arrive.shared::cta.b64"](bars[0])` (or `(bars[0], count)`, sm_90)
arrives, the state result being the sink `_`; `mbarrier.arrive.expect_tx...(bars[0], tx)` also
adds `tx` bytes to the transaction count (sm_90), `mbarrier.expect_tx...` only adds them. A phase
completes when every expected arrival has come and the transaction count is back at zero.
`T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](done[0], bars[0], parity)` (sm_90;
`test_wait`, sm_80, does not suspend) sets the local uint32 `done[0]` to 1 when the phase of that
parity has completed; without `done` the call is tirx's waiting form, a C loop around the test
until it has; `T.cuda.mbarrier_wait(bars[0], parity)` (the real TIRx's spelling; `bars.ptr_to([0])`
too) is the same call. `.release.cta` on arrive and
`.acquire.cta` on the waits (sm_90) are spelled as the ISA does; without them the orders are the
same (release and acquire at CTA scope are the defaults). `mbarrier.inval` ends a barrier's
life; `fence.mbarrier_init.release.cluster` (sm_90) releases the thread's earlier inits at
cluster scope, so that a `.relaxed` cluster arrive after it publishes them to the other blocks
(an arrive with release semantics publishes them without it).
`T.ptx["cp.async.mbarrier.arrive.shared::cta.b64"](bars[0])` (sm_80) makes the barrier receive
an arrive once all of the thread's earlier `cp.async` have completed; the ISA increments the
pending count first, so the arrive does not count against the expected count, while `.noinc`
leaves it alone (count such arrivals in `init`).

Checked when lowering (a `ContractError` at the operand): the barrier an 8-byte element of a
shared tensor, 8-byte aligned where its offset's residue is known; a constant count in
1..2^20-1, a constant tx count in 0..2^20-1, a constant parity 0 or 1, none read from a tensor;
the result a local uint32 element with a compile-time index; the target's arch against the
form's. Generic addresses, the state-token waits, `arrive_drop`, `complete_tx`, `pending_count`
and `.noComplete` are refused with the nearest supported form.

Clusters (sm_90): `.release.cluster` / `.acquire.cluster` / `.relaxed.cluster` order the
operation at cluster scope; `T.cuda.mbarrier_wait_acquire_cluster(bars[0], parity)` is the
waiting form with `.acquire.cluster`. An arrive (or `arrive.expect_tx`) on another block's
barrier is `.shared::cluster`, its barrier operand a shared::cluster address (a `mapa` result;
a shared element is this block's own): `T.ptx["mbarrier.arrive.release.cluster.shared::cluster.
b64"](peer[0])`; only `.release.cluster` orders the arriving thread's accesses for the peer's
waiters ([clusters.md](clusters.md)). The other operations take a barrier of the executing
block only.

The simulator (`tirx/families/mbarrier/sim.py`, `sim_objects.py`, `tirx/sim/strands.py`) keeps the barrier's phase parity, pending,
expected and transaction counts per 8-byte word and blocks a waiting thread while other warps
run; faults: a barrier used before init or re-initialized with arrivals pending, an arrive past
the pending count, a transaction count outside -(2^20-1)..2^20-1, a wait that can never complete
(a deadlock, with every blocked barrier's state).
"""

_NO_PICTURE_MBARRIER = (  # why the notebook layer draws no lane picture of its operands
    "it synchronizes threads through a barrier object in shared memory"
)
SPEC = FamilySpec(
    Family.MBARRIER, "mbarrier", SLOTS, reject, build, lower_tile,
    "PTX ISA, Parallel Synchronization and Communication Instructions: mbarrier",
    exec_scope=ir.ExecScope.THREAD, lower_raw=lower_raw, notes=NOTES,
    no_picture=_NO_PICTURE_MBARRIER,
)  # fmt: skip

_NO_PICTURE_CP_ASYNC = (  # why the notebook layer draws no lane picture of its operands
    "each thread copies its own chunks between global and shared memory (or orders such copies)"
)
CP_ASYNC_SPEC = FamilySpec(
    Family.CP_ASYNC_MBARRIER, "cp.async.mbarrier", CP_ASYNC_SLOTS, cp_async_reject,
    cp_async_build, lower_tile, "PTX ISA, mbarrier: cp.async.mbarrier.arrive",
    exec_scope=ir.ExecScope.THREAD, lower_raw=cp_async_lower_raw,
    notes="The arrive-on of a thread's earlier `cp.async` copies: see mbarrier above.",
    no_picture=_NO_PICTURE_CP_ASYNC,
)  # fmt: skip

_NO_PICTURE_FENCE = (  # why the notebook layer draws no lane picture of its operands
    "each thread copies its own chunks between global and shared memory (or orders such copies)"
)
FENCE_SPEC = FamilySpec(
    Family.FENCE_MBARRIER_INIT, "fence.mbarrier_init", FENCE_SLOTS, lambda mods: None,
    fence_build, lower_tile, "PTX ISA, membar / fence: fence.mbarrier_init",
    exec_scope=ir.ExecScope.THREAD, lower_raw=fence_lower_raw,
    notes="Orders the thread's earlier `mbarrier.init` before later accesses by other CTAs "
    "(sm_90): released by the thread's next `.relaxed` cluster-barrier arrive, so a peer "
    "ordered after that barrier may arrive on the barrier or complete bytes on it; the "
    "simulator models it so within a cluster (docs/clusters.md), and reports a peer's access "
    "to a barrier whose init no fence or releasing arrive ordered before it.",
    no_picture=_NO_PICTURE_FENCE,
)  # fmt: skip

SPECS = (SPEC, CP_ASYNC_SPEC, FENCE_SPEC)
