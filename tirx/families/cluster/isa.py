"""Thread-block clusters: the cluster barrier and distributed shared memory (sm_90), declared as
forms (PTX ISA "Parallel Synchronization and Communication Instructions: barrier.cluster",
"Data Movement and Conversion Instructions: mapa, ld, st", "Distributed Shared Memory").

The forms tirx has, as the ISA spells them::

    barrier.cluster.arrive{.release|.relaxed}{.aligned}               (no operands)
    barrier.cluster.wait{.acquire}{.aligned}                          (no operands)
    mapa.shared::cluster.u32  d, a, b        d = a's offset in the shared memory of rank b
    ld.shared::cluster.{b16,u16,s16,b32,u32,s32,f32,b64,u64,s64,f64}  d, [a]
    st.shared::cluster.{...the same types}                            [a], b

Raw calls: ``T.ptx["barrier.cluster.arrive.aligned"]()``; ``T.ptx["mapa.shared::cluster.u32"](
peer[0], s[i], rank)`` writes the peer address into the local ``uint32`` element ``peer[0]``;
``T.ptx["ld.shared::cluster.u32"](v[0], peer[0])`` and ``T.ptx["st.shared::cluster.u32"](peer[0],
value)``. An address operand is an element of a shared tensor (its address in this block, as
the mbarrier operands take it) or an integer value (a ``mapa`` result). ``T.cuda.cluster_sync()``
(the real TIRx's spelling) is ``barrier.cluster.arrive.aligned`` then
``barrier.cluster.wait.aligned``.
"""

from __future__ import annotations

from ...dtypes import dtype_of
from ...errors import ContractError
from ...ir import nodes as ir
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from ...isa.raw_forms import cluster_address, local_register, no_operands, no_tile_form

__all__ = ["SPECS", "TYPES", "MIN_ARCH", "NOTES"]

MIN_ARCH = 90

# ------------------------------------------------------------------ barrier.cluster

BARRIER_SLOTS = (
    ModifierSlot("action", ("arrive", "wait")),
    ModifierSlot("sem", ("release", "relaxed", "acquire"), optional=True),
    ModifierSlot("aligned", ("aligned",), optional=True),
)


def barrier_reject(mods: dict) -> str | None:
    act, sem = mods["action"], mods["sem"]
    if act == "arrive" and sem == "acquire":
        return "barrier.cluster.arrive takes .release or .relaxed: use barrier.cluster.arrive"
    if act == "wait" and sem in ("release", "relaxed"):
        return "barrier.cluster.wait takes .acquire only: use barrier.cluster.wait"
    return None


def barrier_build(text: str, mods: dict) -> Contract:
    return Contract(text, Family.BARRIER_CLUSTER, (), MIN_ARCH, tuple(mods.items()))


def barrier_lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    return no_operands(contract.text, op)


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    raise no_tile_form(contract, "..." if contract.operands else "")


# ----------------------------------------------------------------------------- mapa

MAPA_SLOTS = (
    ModifierSlot("space", ("shared::cluster",), optional=True),
    ModifierSlot("type", ("u32", "u64")),
)


def mapa_reject(mods: dict) -> str | None:
    if mods["space"] is None or mods["type"] != "u32":
        return (
            "tirx maps 32-bit shared-window addresses (it has no generic pointers): use "
            "mapa.shared::cluster.u32"
        )
    return None


def _u32(name: str, about: str) -> OperandSpec:
    return OperandSpec(name, Role.SCALAR_IN, "uint32", (), 0, about=about)


def mapa_build(text: str, mods: dict) -> Contract:
    ops = (
        OperandSpec(
            "d",
            Role.REG_OUT,
            "uint32",
            (),
            1,
            about="a local uint32 element: the shared::cluster address in block b",
        ),  # fmt: skip
        _u32("a", "a shared address (an element of a shared tensor, or a value)"),
        _u32("b", "the rank of the target block in the cluster"),
    )
    return Contract(text, Family.MAPA, ops, MIN_ARCH, tuple(mods.items()))


# ------------------------------------------------------------------ ld / st shared::cluster

#: PTX type -> the dtypes of a register that holds it (a .bN type: any of N bits)
TYPES = {
    "b16": ("uint16", "int16", "float16", "bfloat16"),
    "u16": ("uint16", "int16"),
    "s16": ("int16", "uint16"),
    "b32": ("uint32", "int32", "float32"),
    "u32": ("uint32", "int32"),
    "s32": ("int32", "uint32"),
    "f32": ("float32",),
    "b64": ("uint64", "int64", "float64"),
    "u64": ("uint64", "int64"),
    "s64": ("int64", "uint64"),
    "f64": ("float64",),
}
ACCESS_SLOTS = (ModifierSlot("type", tuple(TYPES)),)


def access_build(family: Family):
    def build(text: str, mods: dict) -> Contract:
        dtype = TYPES[mods["type"]][0]
        addr = _u32("a", "a shared::cluster address (an element of a shared tensor, or a value)")
        if family is Family.LD_SHARED__CLUSTER:
            d = OperandSpec(
                "d", Role.REG_OUT, dtype, (), 1, about=f"a local element of {mods['type']} bits"
            )
            ops = (d, addr)
        else:
            ops = (addr, OperandSpec("b", Role.SCALAR_IN, dtype, (), 0, about="the value"))
        return Contract(text, family, ops, MIN_ARCH, tuple(mods.items()))

    return build


# --------------------------------------------------------------------------- raw calls


def _count(contract: Contract, op: ir.RawPtx, n: int, what: str) -> list:
    if len(op.operands) != n:
        raise ContractError(
            f'T.ptx["{contract.text}"] takes {n} operands ({what}), got {len(op.operands)}',
            hint="see the cluster forms in docs/instructions.md",
        ).with_span(op.span)
    return list(op.operand_spans) + [None] * n


def _register(text: str, e, span, address, dtypes: tuple[str, ...]) -> ir.RegVector:
    """The destination: an element of a local tensor of one of ``dtypes``, compile-time index."""
    ok = isinstance(e, ir.ElemLoad) and e.view.buffer.scope is ir.Scope.LOCAL
    if not ok or e.dtype.name not in dtypes:
        got = f"a {e.dtype} element" if ok else "a value"
        raise ContractError(
            f"{text}: the destination must be an element of a local {' or '.join(dtypes)} "
            f"tensor (it is written), got {got}",
            hint=f'd = T.alloc_local((1,), "{dtypes[0]}"); pass d[0]',
        ).with_span(span)
    reg = local_register(e, address)
    if reg is None:
        raise ContractError(f"{text}: the destination needs a compile-time index").with_span(span)
    return ir.RegVector((reg,), True)


def _value(text: str, e, span, dtypes: tuple[str, ...]) -> ir.ScalarOperand:
    """The stored value, in the first dtype of the type (a value of one of ``dtypes`` as is)."""
    e = ir.as_expr(e)
    if e.dtype.name in dtypes:
        return ir.ScalarOperand(e)
    target = dtype_of(dtypes[0])
    if e.dtype.kind == "float" and target.kind != "float":
        raise ContractError(
            f"{text}: the value is {e.dtype}; the instruction stores {dtypes[0]} bits",
            hint=f"convert it: T.{dtypes[0]}(...), or use the .b type of its width for its bits",
        ).with_span(span)
    return ir.ScalarOperand(ir.cast(e, target))


def mapa_lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    spans = _count(contract, op, 3, "d, a, b")
    d, a, b = op.operands
    text = contract.text
    out = _register(text, d, spans[0], address, ("uint32", "int32"))
    a = cluster_address(text, a, spans[1], address)
    rank = cluster_address(text, b, spans[2], address, "the rank b")
    if isinstance(rank, ir.AddressOperand):
        raise ContractError(f"{text}: the rank b is a number, not a shared element").with_span(
            spans[2]
        )
    return ir.PtxCall(text, (out, a, rank), op.span)


def access_lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    text, dtypes = contract.text, TYPES[contract.modifier("type")]
    if contract.family is Family.LD_SHARED__CLUSTER:
        spans = _count(contract, op, 2, "d, a")
        out = _register(text, op.operands[0], spans[0], address, dtypes)
        return ir.PtxCall(
            text, (out, cluster_address(text, op.operands[1], spans[1], address)), op.span
        )
    spans = _count(contract, op, 2, "a, b")
    a = cluster_address(text, op.operands[0], spans[0], address)
    return ir.PtxCall(text, (a, _value(text, op.operands[1], spans[1], dtypes)), op.span)


# ------------------------------------------------------------------------------ specs

NOTES = """
Thread-block clusters (sm_90): the blocks of a cluster (`T.cuda.LaunchConfig(..., cluster=(2, 1,
1))`) run at once and read and write each other's shared memory. `barrier.cluster.arrive` /
`barrier.cluster.wait` (`.release` / `.relaxed` on the arrive, `.acquire` on the wait, both the
defaults, and `.aligned` when every thread of the warp executes it) synchronize every thread of
every block of the cluster: a wait passes once every thread that has not exited has arrived;
`T.cuda.cluster_sync()` is the aligned arrive and wait. A `.relaxed` arrive orders none of the
thread's earlier accesses for the other blocks, except the `mbarrier.init` operations a
`fence.mbarrier_init.release.cluster` of the thread released (init, fence, relaxed arrive, wait). `T.ptx["mapa.shared::cluster.u32"](d[0],
s[i], rank)` writes to the local uint32 `d[0]` the address of `s[i]` in the block of `rank`
(the same allocation at the same offset), which `ld.shared::cluster` and `st.shared::cluster`
(`.b16/.u16/.s16/.b32/.u32/.s32/.f32/.b64/.u64/.s64/.f64`) read and write:
`T.ptx["ld.shared::cluster.u32"](v[0], d[0])`, `T.ptx["st.shared::cluster.u32"](d[0], value)`. A
shared element in an address operand stands for its address in this block. An mbarrier of a
peer block takes arrives as `mbarrier.arrive.release.cluster.shared::cluster.b64` (mbarrier
above); a tensor copy lands in several blocks with `.multicast::cluster` and `cta_mask=` (TMA
below). The block's place: `T.cuda.cluster_cta_id("x")`, `T.cuda.cluster_dim("x")`,
`T.cuda.cluster_id("x")`, `T.cuda.mov_sreg(32, "cluster_ctarank")` (and `"cluster_nctarank"`,
`"nclusterid.x"`).

Checked when lowering (a `ContractError` at the operand): operand counts, a destination that is a
local element of a dtype of the type's width with a compile-time index, an address that is a
shared element or an integer (never a global element or a float), sm_90. The simulator
(`tirx/families/cluster/sim.py`, `tirx/sim/cluster.py`, `distributed.py`, `cluster_run.py`) runs
a cluster's blocks together and faults: an arrive twice in one phase or a wait without an
arrive, an `.aligned` barrier that part of a warp reaches, a rank outside the cluster, a peer
byte nothing wrote, an access to a peer byte not ordered by a cluster barrier (or an mbarrier
phase) against another block's access of it, a peer access not ordered before that peer's exit,
and a deadlock across the cluster.
"""

_NO_PICTURE = "it synchronizes blocks or moves single values between their shared memories"
_SECTION = "PTX ISA, Parallel Synchronization and Communication Instructions: barrier.cluster"

SPECS = (
    FamilySpec(
        Family.BARRIER_CLUSTER, "barrier.cluster", BARRIER_SLOTS, barrier_reject,
        barrier_build, lower_tile, _SECTION, exec_scope=ir.ExecScope.THREAD,
        lower_raw=barrier_lower_raw, notes=NOTES, no_picture=_NO_PICTURE,
    ),
    FamilySpec(
        Family.MAPA, "mapa", MAPA_SLOTS, mapa_reject, mapa_build, lower_tile,
        "PTX ISA, Data Movement and Conversion Instructions: mapa",
        exec_scope=ir.ExecScope.THREAD, lower_raw=mapa_lower_raw,
        notes="The address of a shared variable in another block of the cluster: see "
        "barrier.cluster above.",
        no_picture=_NO_PICTURE,
    ),
    FamilySpec(
        Family.LD_SHARED__CLUSTER, "ld.shared::cluster", ACCESS_SLOTS, lambda mods: None,
        access_build(Family.LD_SHARED__CLUSTER), lower_tile,
        "PTX ISA, Data Movement and Conversion Instructions: ld (Distributed Shared Memory)",
        exec_scope=ir.ExecScope.THREAD, lower_raw=access_lower_raw,
        notes="A load from a block's shared memory by its shared::cluster address: see "
        "barrier.cluster above.",
        no_picture=_NO_PICTURE,
    ),
    FamilySpec(
        Family.ST_SHARED__CLUSTER, "st.shared::cluster", ACCESS_SLOTS, lambda mods: None,
        access_build(Family.ST_SHARED__CLUSTER), lower_tile,
        "PTX ISA, Data Movement and Conversion Instructions: st (Distributed Shared Memory)",
        exec_scope=ir.ExecScope.THREAD, lower_raw=access_lower_raw,
        notes="A store into a block's shared memory by its shared::cluster address: see "
        "barrier.cluster above.",
        no_picture=_NO_PICTURE,
    ),
)  # fmt: skip
