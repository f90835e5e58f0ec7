"""The cluster forms in the simulator, written from the PTX ISA ("barrier.cluster", "mapa", "ld",
"st", "Distributed Shared Memory"); the cluster itself -- its blocks run together, its barrier's
counts, the shared::cluster window, the order of accesses across blocks -- is
:mod:`tirx.sim.cluster`'s and :mod:`tirx.sim.distributed`'s.

* ``barrier.cluster.arrive{.release,.relaxed}{.aligned}``: the thread arrives at the current
  phase of the cluster barrier (a second arrive before its wait is a fault); ``.relaxed``
  releases none of its earlier accesses to the other blocks, but the ``mbarrier.init``
  operations a ``fence.mbarrier_init.release.cluster`` of the thread released.
* ``barrier.cluster.wait{.acquire}{.aligned}``: the thread waits until every non-exited thread
  of the cluster has arrived at the phase it arrived at (other blocks run meanwhile: the wait is
  a blocking statement); a wait without an arrive is a fault. ``.aligned``: every thread of
  the warp executes the same instruction, so a warp that reaches it in part is a fault.
* ``mapa.shared::cluster.u32 d, a, b``: ``d`` is the shared::cluster address of the byte at
  ``a``'s offset in the shared memory of the block of rank ``b`` (a rank outside the cluster is
  a fault).
* ``ld/st.shared::cluster.<type> d, [a]`` / ``[a], b``: a load or store of the type's width at
  the shared::cluster address ``a``: the executing block's own shared memory (with its own
  checks) or a peer's (:meth:`tirx.sim.distributed.Distributed.load` / ``store``).
"""

from __future__ import annotations

import re

import numpy as np

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.cluster import cluster_address, cluster_of
from ...sim.faults import Fault, check_aligned
from ...sim.memory import as_index, first
from ...sim.numeric import encode, storage_type
from ...sim.shared import line_of

__all__ = ["compile_call", "FORMS", "BLOCKING"]

FORMS = (
    "barrier.cluster.{arrive[.release|.relaxed],wait[.acquire]}[.aligned], "
    "mapa.shared::cluster.u32, {ld,st}.shared::cluster.{b16,u16,s16,b32,u32,s32,f32,b64,u64,"
    "s64,f64}"
)
#: the statements that may wait for other threads (tirx.sim.strands runs others meanwhile)
BLOCKING = ("barrier.cluster.wait",)

_BARRIER = re.compile(
    r"barrier\.cluster\.(arrive|wait)(?:\.(release|relaxed|acquire))?(\.aligned)?"
)
_ACCESS = re.compile(r"(ld|st)\.shared::cluster\.([bsuf])(16|32|64)")


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one cluster statement for a set of threads."""
    barrier = _BARRIER.fullmatch(text)
    if barrier is not None:
        relaxed = barrier.group(2) == "relaxed"
        return _barrier(m, stmt, barrier.group(1), barrier.group(3) is not None, relaxed)
    if text == "mapa.shared::cluster.u32":
        return _mapa(m, compiler, stmt)
    access = _ACCESS.fullmatch(text)
    if access is None:
        raise unknown_instruction(stmt, text, FORMS)
    return _access(m, compiler, stmt, access.group(1) == "ld", int(access.group(3)) // 8)


# ------------------------------------------------------------------- barrier.cluster


def _barrier(m, stmt: ir.PtxCall, action: str, aligned: bool, relaxed: bool):
    if stmt.operands:
        raise m.compiler.error(f"{stmt.instruction} takes no operands")
    text, span = stmt.instruction, stmt.span
    cluster = cluster_of(m)
    if action == "arrive":

        def arrive(idx):
            m.span = span
            if aligned:
                check_aligned(m, idx, text, "move it out of divergent code, or drop .aligned")
            cluster.arrive(m, idx, relaxed)

        return arrive

    m.use_strands()  # a wait: the other warps (and blocks) run meanwhile

    def wait(idx):
        m.span = span
        if aligned:
            check_aligned(m, idx, text, "move it out of divergent code, or drop .aligned")
        phase = cluster.phase_of(m, idx)
        if not cluster.complete(phase):
            tid = int(idx[0])

            def describe():
                return tid, (
                    f"barrier.cluster.wait at {line_of(span)}: thread {tid} (warp {tid // 32}, "
                    f"lane {tid % 32}) waits for phase {phase}; {cluster.missing(phase)}"
                )

            m.strands.wait_until(lambda: cluster.complete(phase), describe)
            m.span = span
        cluster.waited_for(m, idx)

    return wait


# ------------------------------------------------------------------------------- mapa


def _address_f(compiler, op):
    value = op.address if isinstance(op, ir.AddressOperand) else op.value
    return compiler.compile(value)


def _u32(f, idx) -> np.ndarray:
    return np.broadcast_to(as_index(f(idx), idx.size), (idx.size,)).astype(np.uint32)


def _mapa(m, compiler, stmt: ir.PtxCall):
    d, a, b = stmt.operands
    (reg,) = d.regs
    region = m.region(reg.buffer, compiler)
    a_f, b_f = _address_f(compiler, a), compiler.compile(b.value)
    storage, span, text = storage_type(reg.dtype), stmt.span, stmt.instruction
    cluster = cluster_of(m)

    def run(idx):
        m.span = span
        ranks, offsets = cluster.locate(m, _u32(a_f, idx), idx, text)
        target = _u32(b_f, idx).astype(np.int64)
        for r in np.unique(target).tolist():
            cluster.peer(m, r, int(idx[first(target == r)]), text)
        size = m.shared.data.size
        bad = offsets >= size
        if bad.any():
            k = first(bad)
            raise Fault(
                f"{text}: {int(offsets[k]):#x} is no address of the block's shared memory "
                f"({size} bytes)",
                int(idx[k]),
                "map the address of an element of a shared tensor",
            )
        out = cluster_address(target, offsets).astype(np.uint32).view(storage)
        region.store(np.full(idx.size, reg.slot), out, reg.dtype, idx, idx)

    return run


# -------------------------------------------------------------- ld / st shared::cluster


def _check_own(m, offsets, size: int, tids, text: str) -> None:
    bad = (offsets % size != 0) | (offsets + size > m.shared.data.size)
    if bad.any():
        k = first(bad)
        raise Fault(
            f"{text}: shared offset {int(offsets[k])} of the block is not a {size}-byte aligned "
            f"place inside its {m.shared.data.size} bytes of shared memory",
            int(tids[k]),
            "address an element of a shared tensor (mapa keeps the offset)",
        )


def _access(m, compiler, stmt: ir.PtxCall, load: bool, size: int):
    ops, span, text = stmt.operands, stmt.span, stmt.instruction
    cluster = cluster_of(m)
    if load:
        (reg,) = ops[0].regs
        region, dtype = m.region(reg.buffer, compiler), reg.dtype
        addr_f = _address_f(compiler, ops[1])
    else:
        addr_f = _address_f(compiler, ops[0])
        dtype = ops[1].value.dtype
        value_f = compiler.compile(ops[1].value)
    if dtype.bytes != size:
        raise compiler.error(f"{text}: a {dtype} operand is not {8 * size} bits")

    def run(idx):
        m.span = span
        ranks, offsets = cluster.locate(m, _u32(addr_f, idx), idx, text)
        bits = None if load else np.broadcast_to(encode(value_f(idx), dtype), (idx.size,))
        out = np.zeros(idx.size, dtype=storage_type(dtype)) if load else None
        for r in np.unique(ranks).tolist():
            at = ranks == r
            tids, offs = idx[at], offsets[at]
            if r == m.rank:
                _check_own(m, offs, size, tids, text)
                if load:
                    out[at] = m.shared.read(offs, dtype, tids)
                else:
                    m.shared.write(offs, bits[at], dtype, tids)
            elif load:
                out[at] = cluster.shared.load(m, r, offs, dtype, tids)
            else:
                cluster.shared.store(m, r, offs, bits[at], dtype, tids)
        if load:
            region.store(np.full(idx.size, reg.slot), out, dtype, idx, idx)

    return run
