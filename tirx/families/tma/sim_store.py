"""The TMA tensor store and reduction (``cp.async.bulk.tensor`` and
``cp.reduce.async.bulk.tensor``, shared to global), written from the PTX ISA ("Data Movement
and Conversion Instructions: cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor",
"cp.async.bulk.commit_group", "cp.async.bulk.wait_group"; "Tensor Map": bounding box,
out-of-bounds access, swizzling modes; the memory consistency model's "Proxies").

``cp.async.bulk.tensor.Nd.global.shared::cta{.tile}.bulk_group [tensorMap, {c0, ..}],
[srcMem]``: the copy engine reads the *box image* from shared memory: the box's elements
dense in row-major order (``c0``'s axis fastest), byte ``o`` of the image at ``srcMem +
swz(o)`` with the map's swizzle (the permutation a tensor load writes, :func:`swizzled`);
it writes each element whose coordinates ``c + i`` all lie in ``0 .. dim-1`` to the tensor
(``origin + sum((c + i) * stride)``) and no other: box elements outside the tensor are not
written. A negative coordinate is a fault: the ISA's bounding-box rules read as if a box could
start before the tensor (a load's can), but an H100 stops a store that does with an illegal
instruction (docs/gpu-runs/sessions.md, 2026-12-05). ``srcMem`` is 128-byte aligned (the simulator asks a swizzled one to start on its
repeat, as tirx's lowering does).

``cp.reduce.async.bulk.tensor.Nd.global.shared::cta.redOp{.tile}.bulk_group``: the same box,
but each element of the tensor becomes ``old redOp v`` (:mod:`.sim_reduce`), the element type
the map's; the updates are atomic element by element.

Both are *bulk async operations* of the issuing thread (:mod:`tirx.sim.bulk_groups`): the
thread's next ``cp.async.bulk.commit_group`` puts them in a bulk async-group, a
``cp.async.bulk.wait_group.read`` covering it frees the source, a full ``wait_group`` (or the
end of the block) writes the tensor. The engine reads the source through the async proxy:
bytes that threads wrote through the generic proxy must have been published by those
threads' ``fence.proxy.async{.shared::cta}`` (:mod:`tirx.sim.proxy`), with a barrier between
them and the issuing thread (the race rules).

Model: the source is read at issue (a legal schedule: the engine may read any time before the
``.read`` wait) and snapshotted; faults name both lines: a source byte nothing wrote in the
block, or written by the generic proxy and not fenced by its writer; the race rules between
the writers and the issuing thread; the source or destination rules of the groups (a write to
the source before the ``.read`` wait, an access to the destination before the full wait,
another store onto a pending destination; two reductions may overlap). Reductions land in
issue order. A writer's fence must also be ordered before the issue -- a fence after the
barrier that orders the writer before the issuing thread publishes too late
(:meth:`tirx.sim.proxy.AsyncProxy.check_read`, as for the bulk copies and wgmma).

Operands (the lowered IR's, tirx/ir/tensor_map.py): the map (``AddressOperand(GlobalAddress)``
and its ``Immediate`` fields), the coordinates as ``ScalarOperand`` innermost first,
``AddressOperand(SharedAddress)`` of the source.
"""

from __future__ import annotations

import re

import numpy as np

from ...ir import nodes as ir
from ...ir.aligned_access import copy_access
from ...ir.tensor_map import fields_count, store_start_below_zero, tensor_map_of
from ...sim.bulk_groups import BulkOperation, bulk_groups, byte_runs
from ...sim.faults import Fault
from ...sim.memory import as_index
from ...sim.pointer_alignment import check_pointer
from ...sim.shared import line_of
from ...sim.trace import record_copy
from .sim_reduce import combine, storage

__all__ = ["STORE_TEXT", "STORE_FORMS", "compile_store", "swizzled"]

STORE_FORMS = (
    "cp.async.bulk.tensor.{1..5}d.global.shared::cta[.tile].bulk_group, "
    "cp.reduce.async.bulk.tensor.{1..5}d.global.shared::cta"
    ".{add,min,max,inc,dec,and,or,xor}[.tile].bulk_group"
)
STORE_TEXT = re.compile(
    r"cp\.(?:reduce\.)?async\.bulk\.tensor\.([1-5])d\.global\.shared::cta"
    r"(?:\.(add|min|max|inc|dec|and|or|xor))?(?:\.tile)?\.bulk_group"
)


def swizzled(offset: np.ndarray, s: int) -> np.ndarray:
    """The shared byte of image byte ``offset`` under the swizzle of ``16 << s`` bytes: the
    16-byte unit's bits ``[4, 4+s)`` XOR-ed with the 128-byte row's bits ``[7, 7+s)``."""
    if not s:
        return offset
    return offset ^ ((offset >> 3) & (((1 << s) - 1) << 4))


def compile_store(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one tensor store or reduction for a set of threads."""
    match = STORE_TEXT.fullmatch(text)
    reduce_ = text.startswith("cp.reduce.")
    if match is None or reduce_ != (match.group(2) is not None):
        raise compiler.error(f"{text} is not a tensor store the simulator knows ({STORE_FORMS})")
    rank, redop = int(match.group(1)), match.group(2)
    ops = stmt.operands
    nf = fields_count(rank)
    if len(ops) != 2 + nf + rank or not isinstance(ops[-1].address, ir.SharedAddress):
        raise compiler.error(f"{text}: {len(ops)} operands do not describe a {rank}-d tensor store")
    tm = tensor_map_of(stmt)
    f = tm.fields
    region = m.region(tm.buffer, compiler)
    check_pointer(copy_access(stmt), region.address)  # what the launcher refuses too
    groups = bulk_groups(m)
    groups.guard(region)  # its loads and stores now check the pending destinations
    proxy = m.shared.async_proxy()  # the engine reads the source through the async proxy
    coord_f = [compiler.compile(op.value) for op in ops[1 + nf : 1 + nf + rank]]
    src_f = compiler.compile(ops[-1].address)
    span = stmt.span
    esize = tm.buffer.dtype.bytes
    elem = storage(f.dtype)
    if elem.itemsize != esize:
        raise compiler.error(f"{text}: the map's {f.dtype} elements are not {esize} bytes")
    grids = np.indices(tuple(reversed(f.box))).reshape(rank, -1)[::-1]  # [axis (inner first), n]
    where = swizzled(np.arange(grids.shape[1], dtype=np.int64) * esize, f.swizzle)
    unit = 128 << f.swizzle if f.swizzle else 128
    strides = np.array([esize, *f.strides], dtype=np.int64)
    dims = np.array(f.dims, dtype=np.int64)
    cols = np.arange(esize)
    name = text

    def store(idx):
        m.span = span
        k = idx.size
        src = np.broadcast_to(as_index(src_f(idx), k), (k,)).astype(np.uint32).astype(np.int64)
        coords = [np.broadcast_to(as_index(c(idx), k), (k,)).astype(np.int32) for c in coord_f]
        bad = src % unit != 0
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise Fault(
                f"{text}: the shared source {src[j]} is not {unit}-byte aligned",
                idx[j],
                f"a tensor copy's shared box is 128-byte aligned, a swizzled one {unit}-byte",
            )
        for a, c in enumerate(coords):
            neg = c < 0
            if neg.any():
                j = int(np.flatnonzero(neg)[0])
                message, hint = store_start_below_zero(text, rank - 1 - a, int(c[j]))
                raise Fault(message, idx[j], hint)
        sent = np.zeros(k, dtype=np.int64)
        for j, tid in enumerate(idx.tolist()):
            g = np.stack([coords[a][j] + grids[a] for a in range(rank)]).astype(np.int64)
            inside = ((g >= 0) & (g < dims[:, None])).all(axis=0)
            offsets = tm.origin + (g[:, inside] * strides[:, None]).sum(axis=0)
            if offsets.size and int(offsets.max()) + esize > region.nbytes:
                raise Fault(f"{text}: the box writes past the end of '{region.name}'", tid)
            data = _read_source(m, proxy, tid, src[j] + where, esize, text, span)
            values = data[inside].view(elem).ravel()
            starts, ends = byte_runs(offsets, esize)
            source = (src[j] + where[:, None] + cols[None, :]).ravel()
            land = _lander(region, offsets // esize, values, redop, f.dtype)
            groups.add(
                BulkOperation(
                    tid, span, name, source, region, starts, ends, land, accumulates=bool(redop)
                )
            )
            sent[j] = values.nbytes
        if m.recorder is not None:  # a profiling run: the bytes the tensor stores move
            m.recorder.bulk_copy("shared", "global", int(sent.sum()))
        if m.traces is not None:
            record_copy(m, stmt, "copy", idx, dst=coords[-1].astype(np.int64), src=src, nbytes=sent)

    return store


def _read_source(m, proxy, tid: int, addr: np.ndarray, esize: int, text: str, span):
    """What the engine reads at issue: the box image's elements (at shared ``addr``, each
    ``esize`` bytes), as ``[n, esize]`` bytes, after the source's checks."""
    sh = m.shared
    chunks = np.unique((addr // 16) * 16)
    t = np.full(chunks.size, tid, dtype=np.intp)
    sh.check_rows(chunks, t, "tensor store source")
    b = (addr[:, None] + np.arange(esize)[None, :]).ravel()
    unwritten = sh.written[b] != 0xFF
    if unwritten.any():
        k = int(np.flatnonzero(unwritten)[0])
        raise Fault(
            f"the {text} at {line_of(span)} reads shared memory that nothing wrote in this "
            f"block: {sh.describe(int(b[k]))}",
            tid,
            "write the whole tile into shared memory before storing it",
        )
    if sh.in_flight:
        sh.check_pending(chunks, 16, t, "reads")
    # the stores must be fenced for the async proxy, each fence ordered before this issue
    proxy.check_read(
        np.unique(b), np.array([tid]), f"the {text} at {line_of(span)}", "the copy engine"
    )
    sh.track_read(b, 1, np.full(b.size, tid, dtype=np.intp))  # a barrier after the stores
    return sh.data[b].reshape(-1, esize).copy()


def _lander(region, index: np.ndarray, values: np.ndarray, redop: str | None, dtype: str):
    """What writes one store's elements (``values`` at element ``index`` of ``region`` viewed
    as the map's type) when a full wait covers it, or reduces them into the tensor."""
    elem = values.dtype

    def land():
        if index.size == 0:
            return
        view = region.view(elem)
        if redop is None:
            view[index] = values
        else:
            view[index] = combine(redop, dtype, view[index], values)

    return land
