"""A CTA barrier that whole warps skip (PTX ISA, "barrier" and "exit"): a barrier waits only
for the threads that have not exited, so warps that skip a ``cta_sync`` and exit without
arriving at another barrier release it, and the kernel is legal.

The lockstep machine cannot foresee where the warps that stayed away go next. It takes the
case it can decide from the kernel alone: the kernel's one CTA barrier (no other
``cta_sync``, CTA vote or reduction, or raw ``bar``/``barrier``), outside every loop, so the
warps that skip it reach no barrier before they exit. Those that arrived pass it ordered among
themselves only, as a named barrier orders the warps that meet at it; a later access of theirs
to what a warp that stayed away wrote is a race, as the memory model has it. Anything else
reached by part of the block is reported, and so is a warp split by it (``bar.sync`` is
``.aligned``).
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir
from ..ir.visitor import walk
from .faults import cta_barrier_fault, partial_warp

__all__ = ["sole_cta_barrier", "pass_among"]

_CTA_WIDE = ("VotingBarrier", "CtaReduce")  # cta_ops statements that are CTA barriers too


def _is_barrier(node) -> bool:
    if isinstance(node, ir.Barrier):
        return node.scope == "cta"
    if isinstance(node, ir.PtxCall):
        return node.instruction.startswith(("bar.", "barrier."))
    return getattr(node, "syncs_cta", False) or type(node).__name__ in _CTA_WIDE


def sole_cta_barrier(fn: ir.Function) -> bool:
    """Whether ``fn``'s body holds one CTA barrier and nothing else that waits for the CTA."""
    return sum(map(_is_barrier, walk(fn.body))) == 1


def pass_among(m, idx: np.ndarray) -> None:
    """Threads ``idx`` (whole warps; the others will exit without a barrier) pass the barrier:
    ordered after each other's accesses so far, not the other warps'."""
    if partial_warp(m, idx) is not None:
        raise cta_barrier_fault(m, idx)
    order = m.shared.order
    order.acquire(idx, order.release(idx))
