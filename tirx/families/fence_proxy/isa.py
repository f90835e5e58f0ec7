"""fence.proxy.async: the proxy fence between the generic proxy and the async proxy (sm_90+;
PTX ISA "Parallel Synchronization and Communication Instructions: membar / fence", and the
memory consistency model's "Proxies").

Ordinary loads and stores, stmatrix and cp.async access memory through the *generic proxy*;
the bulk copies (:mod:`tirx.families.cp_async_bulk.isa`) read and write it through the *async proxy*.
Accesses of one proxy are not ordered with those of another unless a proxy fence lies between
them: a thread that stored a tile into shared memory executes ``fence.proxy.async.shared::cta``
before the tile may be handed to the copy engine (after a barrier, when another thread issues
the copy). The forms tirx has::

    fence.proxy.async                 (every state space)
    fence.proxy.async.global
    fence.proxy.async.shared::cta

Raw calls without operands: ``T.ptx["fence.proxy.async.shared::cta"]()``. The other proxy
kinds (``.alias``, ``.tensormap::generic``) and ``.shared::cluster`` are refused.
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot
from ...isa.raw_forms import no_operands, no_tile_form

__all__ = ["SPEC", "SLOTS", "MIN_ARCH", "NOTES"]

MIN_ARCH = 90

SLOTS = (
    ModifierSlot("kind", ("async", "alias", "tensormap::generic")),
    ModifierSlot("space", ("global", "shared::cta", "shared::cluster"), optional=True),
)


def reject(mods: dict) -> str | None:
    if mods["kind"] != "async":
        return (
            f"fence.proxy.{mods['kind']} is not supported by tirx: use "
            "fence.proxy.async.shared::cta (before a bulk copy reads stored shared memory)"
        )
    if mods["space"] == "shared::cluster":
        return (
            "fence.proxy.async.shared::cluster is not supported by tirx (it has no clusters): "
            "use fence.proxy.async.shared::cta"
        )
    return None


def build(text: str, mods: dict) -> Contract:
    return Contract(text, Family.FENCE_PROXY, (), MIN_ARCH, tuple(mods.items()))


def lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    """``T.ptx["fence.proxy.async..."]()``: no operands."""
    return no_operands(contract.text, op)


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    raise no_tile_form(contract)


NOTES = """
`T.ptx["fence.proxy.async.shared::cta"]()` (or `fence.proxy.async`, every state space) by a
thread orders its earlier generic-proxy accesses of shared memory (stores, stmatrix, cp.async)
before later async-proxy ones (a bulk copy that reads them, after a barrier when another
thread issues it). `fence.proxy.async.global` orders global memory only; the simulator keeps
no proxy state for global memory, so it has no effect there. Raw calls only, no operands,
sm_90 or newer; `.alias`, `.tensormap::generic` and `.shared::cluster` are refused.
"""

_NO_PICTURE = (  # why the notebook layer draws no lane picture of its operands
    "each thread copies its own chunks between global and shared memory (or orders such copies)"
)
SPEC = FamilySpec(
    Family.FENCE_PROXY, "fence.proxy", SLOTS, reject, build, lower_tile,
    "PTX ISA, Parallel Synchronization and Communication Instructions: membar / fence",
    exec_scope=ir.ExecScope.THREAD, lower_raw=lower_raw, notes=NOTES,
    no_picture=_NO_PICTURE,
)  # fmt: skip

SPECS = (SPEC,)
