"""The TMA tensor load (``cp.async.bulk.tensor``), written from the PTX ISA ("Data Movement and
Conversion Instructions: cp.async.bulk.tensor", "Tensor Copy: Tensor Map", "Tensor Map:
bounding box, traversal, out-of-bounds access, swizzling modes"; "mbarrier: tx-count").

``cp.async.bulk.tensor.Nd.shared::{cta,cluster}.global{.tile}.mbarrier::complete_tx::bytes
[dstMem], [tensorMap, {c0, ..}], [mbar]``: the copy engine reads the *box* of the tensor map
whose first element sits at coordinates ``c`` (``c0`` innermost, signed elements); a box
element with any coordinate outside ``0 .. dim-1`` reads as zero (out-of-bounds fill
"none": zeros). It writes the box to shared memory from ``dstMem`` on as the dense image,
innermost coordinate fastest, each byte offset ``o`` of the image going to ``dstMem + o'``
with, for the map's swizzle of ``16 * 2^s`` bytes (s = 1, 2, 3 for 32B, 64B, 128B), the 16-byte
unit's bits ``[4, 4+s)`` XOR-ed with the 128-byte row's bits ``[7, 7+s)``: 128B swaps
``o[4:6] ^= o[7:9]``, 64B ``o[4:5] ^= o[7:8]``, 32B ``o[4] ^= o[7]``, a pattern that repeats
every ``128 * 2^s`` bytes (the ISA's swizzle figures; CUTLASS's ``Swizzle<s, 4, 3>``). The
destination is 128-byte aligned, and the simulator also asks a swizzled one to start on a
repeat (what tirx's lowering guarantees). Then the copy performs a complete-tx of the box's
bytes on ``mbar``.

Model: the box is read from global memory at issue and the complete-tx done at once (a legal
schedule); the bytes land in shared memory when the barrier's phase completes (maybe at once,
when the issuing thread armed it first with ``arrive.expect_tx``), written through the *async
proxy* (no ``fence.proxy.async`` is needed before the async proxy reads them) by the
barrier's own agent (:mod:`tirx.sim.order`), which the phase's completion releases
(:meth:`tirx.families.mbarrier.sim.Barriers.complete_tx`). A thread sees the bytes once it
observed that phase -- its own wait, or a barrier (or an arrive/wait chain) after a thread
that waited; any other access, the issuing thread's too, is a fault naming both lines. Before
the phase completes the destination belongs to the copy engine (an access is a fault naming
the unfinished copy). Issuing a copy onto bytes another thread accessed, unordered, is the
usual race (a stage refilled too early); a block that ends before some thread observed the
phase is a fault too (the engine may still be writing shared memory the next block gets).

A box that reads global bytes which a tensor store or bulk copy of the block has not yet
written (no full ``cp.async.bulk.wait_group`` covered it) is a fault naming both lines: it
would read the old bytes.

Operands (the lowered IR's, tirx/ir/tensor_map.py): ``AddressOperand(SharedAddress)``, the map
(``AddressOperand(GlobalAddress)`` and its ``Immediate`` fields), the coordinates as
``ScalarOperand`` innermost first, ``AddressOperand(SharedAddress)`` of the barrier. The
tensor store and reduction are :mod:`tirx.families.tma.sim_store`'s.
"""

from __future__ import annotations

import re

import numpy as np

from ...ir import nodes as ir
from ...ir.aligned_access import copy_access
from ...ir.tensor_map import fields_count, tensor_map_of
from ...sim.calls import unknown_instruction
from ...sim.faults import Fault
from ...sim.memory import as_index
from ...sim.pointer_alignment import check_pointer
from ...sim.shared import line_of
from ...sim.trace import record_copy
from .sim_multicast import multicast
from .sim_store import STORE_FORMS, STORE_TEXT, compile_store, swizzled

__all__ = ["compile_call", "swizzled", "FORMS"]

FORMS = (
    "cp.async.bulk.tensor.{1..5}d.shared::{cta,cluster}.global[.tile].mbarrier::complete_tx::bytes"
    "[.multicast::cluster], " + STORE_FORMS
)

_TEXT = re.compile(
    r"cp\.async\.bulk\.tensor\.([1-5])d\.shared::(?:cta|cluster)\.global(?:\.tile)?"
    r"\.mbarrier::complete_tx::bytes(\.multicast::cluster)?"
)
_WAIT = (
    "wait on the copy's mbarrier first: T.cuda.mbarrier_wait(bar, phase) for the phase its "
    "complete-tx finishes (armed by mbarrier.arrive.expect_tx with the box's bytes)"
)


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one tensor load (or, by :mod:`.sim_store`, one tensor store or
    reduction) for a set of threads."""
    if STORE_TEXT.fullmatch(text):
        return compile_store(m, compiler, stmt, text)
    match = _TEXT.fullmatch(text)
    if match is None:
        raise unknown_instruction(stmt, text, FORMS)
    rank = int(match.group(1))
    ops = stmt.operands
    multicasts = match.group(2) is not None  # the ctaMask operand follows the barrier
    if len(ops) != 3 + fields_count(rank) + rank + multicasts:
        raise compiler.error(f"{text}: {len(ops)} operands do not describe a {rank}-d tensor copy")
    tm = tensor_map_of(stmt)
    f = tm.fields
    region = m.region(tm.buffer, compiler)
    check_pointer(copy_access(stmt), region.address)  # what the launcher refuses too
    esize = tm.buffer.dtype.bytes
    dst_f = compiler.compile(ops[0].address)
    first = 2 + fields_count(rank)
    coord_f = [compiler.compile(op.value) for op in ops[first : first + rank]]
    bar_f = compiler.compile(ops[first + rank].address)
    mask_f = compiler.compile(ops[-1].value) if multicasts else None
    span = stmt.span
    # the box, element by element in image order (innermost fastest): its indices per axis
    grids = np.indices(tuple(reversed(f.box))).reshape(rank, -1)[::-1]  # [axis (inner first), n]
    image = np.arange(grids.shape[1], dtype=np.int64) * esize
    where = swizzled(image, f.swizzle)
    unit = 128 << f.swizzle if f.swizzle else 128
    nbytes = f.box_bytes
    strides = np.array([esize, *f.strides], dtype=np.int64)
    dims = np.array(f.dims, dtype=np.int64)
    byte_cols = np.arange(esize)

    def copy(idx):
        m.span = span
        k = idx.size
        dst = np.broadcast_to(as_index(dst_f(idx), k), (k,)).astype(np.uint32).astype(np.int64)
        bar = np.broadcast_to(as_index(bar_f(idx), k), (k,)).astype(np.uint32).astype(np.int64)
        coords = [np.broadcast_to(as_index(c(idx), k), (k,)).astype(np.int32) for c in coord_f]
        masks = None if mask_f is None else np.broadcast_to(as_index(mask_f(idx), k), (k,))
        bad = dst % unit != 0
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise Fault(
                f"{text}: the shared destination {dst[j]} is not {unit}-byte aligned",
                idx[j],
                f"a tensor copy's destination is 128-byte aligned, a swizzled one {unit}-byte",
            )
        m.shared.check_rows(bar, idx, "mbarrier", 8)
        bars = m.unit("mbarrier")  # the transaction barriers (the mbarrier family's unit)
        if bars is None:
            j = 0
            raise Fault(
                f"mbarrier {m.shared.describe(int(bar[j]))} is used before mbarrier.init at "
                f"{line_of(stmt.span)}",
                idx[j],
                'initialize it first: T.ptx["mbarrier.init.shared::cta.b64"](bar, count) by one '
                "thread, then T.cuda.cta_sync()",
            )
        for j, tid in enumerate(idx.tolist()):
            g = np.stack([coords[a][j] + grids[a] for a in range(rank)]).astype(np.int64)
            inside = ((g >= 0) & (g < dims[:, None])).all(axis=0)
            src = tm.origin + (np.where(inside, g, 0) * strides[:, None]).sum(axis=0)
            take = src[:, None] + byte_cols[None, :]
            if inside.any() and (take[inside] >= region.nbytes).any():
                raise Fault(f"{text}: the box reads past the end of '{region.name}'", tid)
            _check_unwritten(region, src[inside], esize, tid)
            data = np.where(inside[:, None], region.bytes[np.where(inside[:, None], take, 0)], 0)
            addr = dst[j] + where  # each element's first byte; elements stay whole
            if masks is not None:  # the other blocks of the mask get their copy first
                mine = multicast(m, int(masks[j]), addr, byte_cols, data, int(bar[j]), nbytes,
                                 tid, text, _lander)  # fmt: skip
                if not mine:
                    continue
            chunks = np.unique((addr // 16) * 16)
            m.shared.check_rows(chunks, np.full(chunks.size, tid), "tensor copy destination")
            owners = np.full(chunks.size, tid, dtype=np.int32)
            m.shared.start_copy(chunks, 16, owners)
            site = m.shared.site()
            m.shared.copy_kinds[site] = (f"tensor copy {text}", _WAIT)
            at = (addr[:, None] + byte_cols[None, :]).ravel()
            bars.deliver(int(bar[j]), site, tid, f"tensor copy {text}")
            bars.complete_tx(
                int(bar[j]), nbytes, tid, _lander(m, at, data.astype(np.uint8).ravel(), tid, site)
            )
        if m.recorder is not None:  # a profiling run: the bytes the tensor copies move
            m.recorder.bulk_copy("global", "shared", nbytes * k)
        if m.traces is not None:
            nb = np.full(k, nbytes, dtype=np.int64)
            record_copy(m, stmt, "copy", idx, dst=dst, src=coords[-1].astype(np.int64), nbytes=nb)

    return copy


def _check_unwritten(region, offsets: np.ndarray, esize: int, tid: int) -> None:
    """Fault when the box reads global bytes that a pending store will write (the region's
    guard, :mod:`tirx.sim.bulk_groups`): the copy would read the old bytes."""
    if region.guard is not None and offsets.size:
        tids = np.full(offsets.size, tid, dtype=np.intp)
        region.guard.check_global(region, offsets, esize, tids, "tensor load read of")


def _lander(m, at: np.ndarray, data: np.ndarray, tid: int, site: int):
    """What writes one copy's bytes, as the barrier's agent, when its phase completes."""

    def land(agent: int) -> None:
        m.shared.land_async(at, data, agent, site, tid, proxy_write=True)

    return land
