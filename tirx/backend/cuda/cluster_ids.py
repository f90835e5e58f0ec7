"""The CUDA of the thread-block cluster registers (``T.cuda.cluster_cta_id``, ``cluster_dim``,
``cluster_id``, ``T.cuda.mov_sreg(32, "cluster_ctarank")``, ...): the block's place in its
cluster and the cluster's in the grid are read from the PTX special registers
(``mov.u32 %0, %cluster_ctarank;``); the shapes are the launch's constants, as
``T.cuda.grid_dim`` is (a kernel is always launched with the cluster shape it declares,
:mod:`.cluster_launch`; without one each block is a cluster of one)."""

from __future__ import annotations

from ...ir import nodes as ir

__all__ = ["PRELUDE", "special"]

_READ = 'TIRX_DEVICE int tirx_{name}() {{ unsigned int r; asm("mov.u32 %0, %%{reg};" : "=r"(r)); return (int)r; }}\n'
_REGISTERS = {
    "cluster_ctarank": "cluster_ctarank",
    **{f"cluster_ctaid_{a}": f"cluster_ctaid.{a}" for a in "xyz"},
    **{f"clusterid_{a}": f"clusterid.{a}" for a in "xyz"},
}
PRELUDE = "".join(_READ.format(name=n, reg=r) for n, r in _REGISTERS.items())


def special(launch: ir.LaunchConfig, s: ir.Special) -> str:
    """The C of the cluster register ``s`` in a kernel launched as ``launch``."""
    axis = "xyz"[s.dim]
    cluster = launch.cluster_shape
    kind = s.kind
    if kind is ir.Builtin.CLUSTER_DIM:
        return str(cluster[s.dim])
    if kind is ir.Builtin.CLUSTER_SIZE:
        return str(cluster[0] * cluster[1] * cluster[2])
    if kind is ir.Builtin.CLUSTER_COUNT:
        if s.dim == 0 and launch.sms_grid:  # grid="sms": the grid is sized at launch
            return f"((int)gridDim.x / {cluster[0]})"
        return str(launch.grid[s.dim] // cluster[s.dim])
    if kind is ir.Builtin.CLUSTER_CTA_RANK:
        return "tirx_cluster_ctarank()"
    if kind is ir.Builtin.CLUSTER_CTA_ID:
        return f"tirx_cluster_ctaid_{axis}()"
    if kind is ir.Builtin.CLUSTER_ID:
        return f"tirx_clusterid_{axis}()"
    raise ValueError(f"{kind} is not a cluster register")
