"""A tensor load with ``.multicast::cluster``, written from the PTX ISA ("cp.async.bulk.tensor":
"The optional modifier .multicast::cluster allows copying of data from global memory to shared
memory of multiple CTAs in the cluster. Operand ctaMask specifies the destination CTAs in the
cluster such that each bit position in the 16-bit ctaMask operand corresponds to the %ctarank of
the destination CTA. The source data is multicast to the same CTA-relative offset as dstMem in
the shared memory of each destination CTA. The mbarrier signal is also multicast to the same
CTA-relative offset as mbar in the shared memory of the destination CTA.").

Each block of the mask gets what a load into its own shared memory gets (:mod:`.sim`): the box
at ``dstMem``'s offset, pending until a thread of that block waited for the phase of its
barrier at ``mbar``'s offset, which receives the complete-tx of the box's bytes. A peer's
delivery is an access across blocks (:mod:`tirx.sim.distributed`): the copy writes the peer's
bytes, so the peer's earlier accesses of them must be ordered before the issue (a stage reused
too early across blocks is a race), its complete-tx reads the peer's barrier word, which the
peer's ``mbarrier.init`` must be ordered before, and the peer must not exit before it. A mask
bit past the cluster's blocks, or an empty mask, is a fault.
"""

from __future__ import annotations

import numpy as np

from ...sim.cluster import cluster_of
from ...sim.faults import Fault
from ...sim.shared import line_of

__all__ = ["multicast"]

_WAIT = (
    "wait on the copy's mbarrier in the receiving block first: T.cuda.mbarrier_wait(bar, phase) "
    "for the phase its complete-tx finishes (each receiving block arms its own barrier with "
    "mbarrier.arrive.expect_tx of the box's bytes)"
)


def _wait_hint(shared, reader: int, copy_line: str) -> str:
    """The fix for thread ``reader`` of the receiving block touching bytes the multicast at
    ``copy_line`` has not delivered: a reader that waited already met a refill."""
    last = shared.last_wait_of(reader)
    if last is None or last.phase == 0:
        return _WAIT
    return (
        f"this thread waited at {line_of(last.span)} (phase {last.phase - 1} of mbarrier "
        f"{last.barrier}); if that phase delivered these bytes, the copy at {copy_line} is a "
        "refill issued before this block was done with them: the issuing block's producer "
        "must wait, before refilling, for this block's consumers to release the stage (their "
        "arrive on its empty barrier, mbarrier.arrive.release.cluster.shared::cluster); else "
        + _WAIT
    )


def _ranks(cluster, mask: int, tid: int, text: str) -> list[int]:
    n = cluster.size
    if not 0 < mask <= 0xFFFF or mask >> n:
        extra = f"bit {(mask >> n).bit_length() + n - 1}" if mask >> n else "no bit"
        raise Fault(
            f"{text}: ctaMask {mask:#06x} sets {extra} of a cluster of {n} block(s)",
            tid,
            f"bit r of cta_mask sends the box to the block of rank r, 0..{n - 1}: "
            f"cta_mask={(1 << n) - 1:#x} for every block",
        )
    return [r for r in range(n) if mask >> r & 1]


def multicast(m, mask, addr, byte_cols, data, bar: int, nbytes: int, tid: int, text, lander):
    """Deliver one copy's box (``data`` at the element addresses ``addr``) to every other block
    of ``mask``; whether the issuing block is in it too. ``lander(machine, bytes, data, tid,
    site)`` makes what lands the bytes when the barrier's phase completes (:mod:`.sim`)."""
    cluster = cluster_of(m)
    ranks = _ranks(cluster, mask, tid, text)
    at = (addr[:, None] + byte_cols[None, :]).ravel()
    chunks = np.unique((addr // 16) * 16)
    for r in ranks:
        if r == m.rank:
            continue
        peer = cluster.machines[r]
        sh = peer.shared
        block = f"block {cluster.coords(r)}"
        sh.check_rows(chunks, np.full(chunks.size, tid), f"tensor copy destination in {block}")
        owners = np.full(chunks.size, tid, dtype=np.int32)
        if sh.in_flight:
            sh.check_pending(chunks, 16, owners, "writes")
        d = cluster.shared
        b, p = sh.spread(chunks, 16, owners)
        d.access(r, b, m.rank, p, True, d.site(m.span), "multicasts a tensor copy into",
                 record=False)  # fmt: skip
        d.note_peer(r, m.rank, np.array([tid]), m.span, "multicasts a tensor copy into",
                    sh.describe(int(chunks[0])), lasting=False)  # fmt: skip
        # the complete-tx updates the peer's barrier: ordered after its init, as an arrive is
        word = bar + np.arange(8, dtype=np.int64)
        d.access(r, word, m.rank, np.full(8, tid), False, d.site(m.span),
                 "signals a multicast tensor copy's bytes on")  # fmt: skip
        site = sh.site(m.span)
        sh.pend_tid[b] = p
        sh.pend_site[b] = site
        sh.in_flight += b.size
        who = f"block {cluster.coords(m.rank)}"
        sh.copy_kinds[site] = (f"tensor copy {text} (multicast by {who})", _wait_hint)
        bars = peer.unit("mbarrier")
        if bars is None:
            raise Fault(
                f"{text}: the mbarrier {sh.describe(bar)} of {block} is used before "
                f"mbarrier.init at {line_of(m.span)}",
                tid,
                "every block of the mask initializes its barrier (at the same offset), then "
                "the cluster synchronizes (T.cuda.cluster_sync()) before the copy is issued",
            )
        try:
            bars.deliver(bar, site, tid, f"tensor copy {text} (multicast by {who})")
            bars.complete_tx(bar, nbytes, tid, lander(peer, at, data.astype(np.uint8).ravel(),
                                                      tid, site))  # fmt: skip
        except Fault as e:
            raise Fault(f"{block}: {e.message}", tid, e.hint) from None
    return m.rank in ranks
