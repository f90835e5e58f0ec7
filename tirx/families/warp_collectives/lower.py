"""Target checks of the warp collectives (their script module builds them).

Only ``elect.sync`` needs more than the sm_80 every tirx target has: the PTX ISA introduces it
for sm_90 ("elect.sync requires sm_90 or higher"), and ptxas would reject the kernel far from
the user's line. Shuffles, votes and ``redux.sync`` (sm_80) run on every target.
"""

from __future__ import annotations

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.visitor import rebuild, walk
from .nodes import WarpCollective, WarpOp

__all__ = ["check", "ELECT_MIN_ARCH"]

ELECT_MIN_ARCH = 90


def check(body: ir.Stmt, arch: int) -> None:
    """Raise :class:`~tirx.errors.ContractError` (as for any instruction the target lacks) at
    the user's call when ``body`` (the kernel as written: only the script makes these nodes)
    uses a warp collective that the target ``sm_<arch>`` lacks."""
    if arch >= ELECT_MIN_ARCH:
        return
    for node in walk(body):
        if isinstance(node, WarpCollective) and node.op is WarpOp.ELECT:
            raise ContractError(
                f"T.cuda.elect_sync needs sm_{ELECT_MIN_ARCH} or newer (PTX elect.sync); the "
                f"target is sm_{arch}",
                node.span,
                hint='compile for sm_90 (target="cuda -arch=sm_90"), or pick the leader '
                "yourself: lane == (__ffs(mask) - 1), e.g. T.cuda.lane_id() == 0 for a full "
                "warp",
            )


def leave_WarpCollective(lowerer, e: WarpCollective, *children):
    return rebuild(e, children)
