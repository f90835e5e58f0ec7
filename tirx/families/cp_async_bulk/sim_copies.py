"""Bulk asynchronous stores (``cp.async.bulk``, shared to global), written from the PTX ISA's
descriptions.

The ISA ("Data Movement and Conversion Instructions: cp.async.bulk", "cp.async.bulk.commit_group",
"cp.async.bulk.wait_group"; the memory consistency model's "Proxies" and "membar / fence:
fence.proxy.async"):

* ``cp.async.bulk.global.shared::cta.bulk_group [dstMem], [srcMem], size`` starts a copy of
  ``size`` bytes (a multiple of 16) from shared memory at ``srcMem`` to global memory at
  ``dstMem`` (both 16-byte aligned) and returns at once. The copy is performed by the *async
  proxy* and belongs to the issuing thread's current bulk async-group.
* ``cp.async.bulk.commit_group`` closes the thread's uncommitted bulk operations into a new
  bulk async-group (possibly empty).
* ``cp.async.bulk.wait_group N`` waits until at most the ``N`` newest bulk async-groups of the
  thread are pending: the older ones are complete, their writes visible to the thread.
  ``.read`` waits only until their reads of the source are done, so the source may be reused.
* The generic proxy (ordinary loads and stores, stmatrix, cp.async) and the async proxy are
  ordered only by a proxy fence: ``fence.proxy.async`` (all state spaces) or
  ``fence.proxy.async.shared::cta`` (shared memory) by the thread that stored, after its stores;
  another thread that issues the copy needs a barrier after that fence as usual.

The model:

* A copy snapshots its source bytes at issue (they must have been written in this block; the
  ordinary race rules of :mod:`tirx.sim.shared` apply between their writers and the issuing
  thread) and refuses source bytes written by the generic proxy that their writer's
  shared-memory proxy fence has not published, or published with a fence not ordered before
  the issue (:meth:`tirx.sim.proxy.AsyncProxy.check_read`): the copy engine may read stale
  bytes. The proxy-fence state is the simulator's (:mod:`tirx.sim.proxy`); the fences are the
  fence_proxy family's statements.
* Then it is a bulk async operation of the machine's bulk async-groups
  (:mod:`tirx.sim.bulk_groups`, shared with the tensor stores of the tma family): until a
  ``.read`` (or full) wait of the issuing thread covers it, its source bytes belong to the copy
  engine (a write to them by any thread is a fault naming both lines; after the wait other
  threads need a barrier); its destination bytes land in global memory at the full wait that
  covers it, or at the end of the block, and before that an access to them by any thread, or
  another copy onto them, is a fault naming both lines; a block that ends before a ``.read``
  or full wait covered it is a fault.

The simulator checks more than ``compute-sanitizer`` here: racecheck reports hazards between
threads' shared-memory accesses, memcheck and synccheck bad addresses and barriers, and none
documents checks of the async proxy, so the parity suite has the bulk store as a clean case.
The statements are decoded and their operands checked by :mod:`tirx.families.cp_async_bulk.sim`.
"""

from __future__ import annotations

import enum

import numpy as np

from ...sim.bulk_groups import BulkOperation, bulk_groups
from ...sim.faults import Fault
from ...sim.shared import line_of

__all__ = ["issue_copy", "BulkEvent", "COPY", "COMMIT", "WAITS", "UNIT"]

COPY = "cp.async.bulk.global.shared::cta.bulk_group"
COMMIT = "cp.async.bulk.commit_group"
WAITS = {"cp.async.bulk.wait_group": False, "cp.async.bulk.wait_group.read": True}
UNIT = 16  # bytes: the alignment of both addresses and of the size


class BulkEvent(enum.Enum):
    """What one bulk-copy statement did (for traces)."""

    COPY = "copy"
    COMMIT = "commit_group"
    WAIT = "wait_group"


def issue_copy(m, tid: int, region, dst: int, src: int, size: int, span) -> BulkOperation:
    """Thread ``tid`` issues a bulk copy of ``size`` bytes from shared address ``src`` to byte
    ``dst`` of global ``region`` (its operands checked by the caller): the source's checks at
    issue, then the copy joins the thread's bulk async-group."""
    sh = m.shared
    proxy = sh.async_proxy()  # the copies read through the async proxy
    t = np.array([tid])
    b = src + np.arange(size)
    if not (sh.written[b] == 0xFF).all():
        k = int(np.flatnonzero(sh.written[b] != 0xFF)[0])
        raise Fault(
            f"cp.async.bulk at {line_of(span)} reads shared memory that nothing wrote in "
            f"this block: {sh.describe(int(b[k]))}",
            tid,
            "write the tile into shared memory before copying it",
        )
    if sh.in_flight:
        sh.check_pending(np.array([src]), size, t, "reads")
    # the stores must be fenced for the async proxy, each fence ordered before this issue
    proxy.check_read(b, t, f"the cp.async.bulk at {line_of(span)}", "the copy engine")
    sh.track_read(np.array([src]), size, t)  # the race rules: a barrier after the stores
    data = sh.data[b].copy()  # the source as the engine reads it at issue

    def land():
        region.bytes[dst : dst + size] = data

    op = BulkOperation(
        tid, span, "cp.async.bulk", b.astype(np.int64), region,
        np.array([dst], dtype=np.int64), np.array([dst + size], dtype=np.int64), land,
    )  # fmt: skip
    bulk_groups(m).add(op)
    return op
