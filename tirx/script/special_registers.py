"""``T.cuda.mov_sreg(bits, name)``: read a PTX special register by its name, as the real TIRx
spells it (``T.cuda.mov_sreg(32, "cluster_ctarank")`` is ``mov.u32 %0, %cluster_ctarank;``).

tirx reads the registers both of its targets can give the same value: the thread and block
indices and shapes, and the thread-block cluster's (PTX ISA, "Special Registers":
``%cluster_ctarank``, ``%cluster_nctarank``, ``%cluster_ctaid``, ``%cluster_nctaid``,
``%clusterid``, ``%nclusterid``). Each becomes the same :class:`~tirx.ir.nodes.Special` as its
``T.cuda`` call (``"ctaid.x"`` is ``T.cuda.block_idx("x")``). Registers whose value depends on
where and when the hardware runs the thread (``%smid``, ``%clock``, ``%globaltimer``,
``%warpid``, ...) are refused: the simulator could not give the GPU's value.
"""

from __future__ import annotations

from ..errors import TirxSyntaxError
from ..ir import nodes as ir

__all__ = ["special_register", "REGISTERS"]

_B = ir.Builtin
_DIMENSIONED = {
    "tid": _B.THREAD_IDX,
    "ntid": _B.BLOCK_DIM,
    "ctaid": _B.BLOCK_IDX,
    "nctaid": _B.GRID_DIM,
    "cluster_ctaid": _B.CLUSTER_CTA_ID,
    "cluster_nctaid": _B.CLUSTER_DIM,
    "clusterid": _B.CLUSTER_ID,
    "nclusterid": _B.CLUSTER_COUNT,
}
#: register name (without ``%``) -> (builtin, dimension)
REGISTERS = {
    "laneid": (_B.LANE_ID, 0),
    "cluster_ctarank": (_B.CLUSTER_CTA_RANK, 0),
    "cluster_nctarank": (_B.CLUSTER_SIZE, 0),
    **{f"{name}.{axis}": (kind, d) for name, kind in _DIMENSIONED.items()
       for d, axis in enumerate("xyz")},
}  # fmt: skip
_INSTEAD = {
    "warpid": "T.cuda.warp_id() (%warpid is the warp's slot on its multiprocessor, which "
    "changes as warps are scheduled, not the warp's index in the block)",
    "is_explicit_cluster": "cluster= of T.cuda.LaunchConfig, which the kernel knows",
}


def special_register(bits, name, span) -> ir.Special:
    """The value of ``mov.u<bits> %0, %<name>``; a TirxSyntaxError at ``span`` for a register
    tirx does not read."""
    if not isinstance(name, str):
        raise TirxSyntaxError(
            f"T.cuda.mov_sreg's register name must be a string constant, got {name!r}",
            span,
            hint='e.g. T.cuda.mov_sreg(32, "cluster_ctarank")',
        )
    key = name.removeprefix("%")
    found = REGISTERS.get(key)
    if found is None:
        instead = _INSTEAD.get(key)
        raise TirxSyntaxError(
            f"tirx does not read the special register %{key}",
            span,
            hint=f"use {instead}"
            if instead
            else "tirx reads the registers both the GPU and the simulator give the same value: "
            + ", ".join(sorted(REGISTERS)),
        )
    if bits != 32:
        raise TirxSyntaxError(
            f"%{key} is a 32-bit register: T.cuda.mov_sreg({bits!r}, ...) reads it as 32",
            span,
            hint=f'write T.cuda.mov_sreg(32, "{key}")',
        )
    kind, dim = found
    return ir.Special(kind, dim)
