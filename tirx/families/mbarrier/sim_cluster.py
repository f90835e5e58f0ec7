"""Arrives on an mbarrier of any block of the cluster, written from the PTX ISA ("mbarrier.arrive":
``mbarrier.arrive{.expect_tx}{.release.{cta,cluster}}.shared::cluster.b64 _, [addr]{, count}``).

``addr`` is a shared::cluster address (:mod:`tirx.sim.cluster`): the executing block's own
barrier (the arrive of :mod:`.sim`) or a peer's, whose object lives in the peer's ``mbarrier``
unit. A peer's arrive reads the barrier word of the peer's shared memory, so it is an access
across blocks like any other (ordered after the peer's ``mbarrier.init`` by a cluster barrier,
and before the peer's exit). With ``.release.cluster`` it releases the arriving thread's earlier
accesses to the waiters of the phase (their block's record clears them when a waiter passes:
:meth:`tirx.sim.distributed.Distributed.acquire`); the default ``.release.cta`` orders nothing
for another block.
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...sim.cluster import cluster_of
from ...sim.memory import as_index

__all__ = ["compile_remote_arrive"]


def compile_remote_arrive(m, compiler, stmt: ir.PtxCall, op: str, releases: bool, barriers):
    """The closure of one ``mbarrier.arrive{.expect_tx}...shared::cluster.b64`` (``op``:
    ``"arrive"`` or ``"arrive.expect_tx"``; ``releases``: ``.release.cluster``; ``barriers``:
    the class of a block's mbarrier unit, :class:`.sim.Barriers`)."""
    ops = stmt.operands
    where = ops[0].address if isinstance(ops[0], ir.AddressOperand) else ops[0].value
    addr_f = compiler.compile(where)
    value_f = compiler.compile(ops[1].value) if len(ops) > 1 else None
    span, text = stmt.span, stmt.instruction
    cluster = cluster_of(m)

    def run(idx):
        m.span = span
        n = idx.size
        addr = np.broadcast_to(as_index(addr_f(idx), n), (n,)).astype(np.uint32)
        ranks, offsets = cluster.locate(m, addr, idx, text)
        vals = np.ones(n, dtype=np.int64)
        if value_f is not None:
            vals = np.broadcast_to(np.asarray(value_f(idx)), (n,)).astype(np.uint32)
        for r in np.unique(ranks).tolist():
            at = ranks == r
            tids, offs = idx[at], offsets[at].astype(np.int64)
            peer = cluster.peer(m, r, int(tids[0]), text)
            peer.shared.check_rows(offs, tids, "mbarrier", 8)
            if r == m.rank:
                m.shared.track_read(offs, 8, tids)
            else:
                d = cluster.shared
                b = (offs[:, None] + np.arange(8)).ravel()
                d.access(r, b, m.rank, np.repeat(tids, 8), False, d.site(span), "arrives on")
                d.note_peer(r, m.rank, tids, span, "arrives on", peer.shared.describe(int(offs[0])))
                if not releases:  # at CTA scope: nothing of theirs released to the peer
                    d.cta_arrive(m.rank, tids, span)
            bars = peer.unit("mbarrier", barriers)
            # the peer's barrier records and faults name this statement (an expect_tx's line
            # in a deadlock report, a use before init), not the one the peer is at
            peer_span, peer.span = peer.span, span
            try:
                for tid, a, v in zip(tids.tolist(), offs.tolist(), vals[at].tolist()):
                    if op == "arrive.expect_tx":
                        bars.expect_tx(a, v, tid)
                    if r == m.rank:
                        bars.arrive(a, 1 if op == "arrive.expect_tx" else v, tid)
                    else:
                        who = (m.rank, tid, cluster.shared.seq) if releases else ()
                        bars.arrive(a, 1 if op == "arrive.expect_tx" else v, tid, remote=who)
            finally:
                peer.span = peer_span

    return run
