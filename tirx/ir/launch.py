"""The launch shape of a kernel (:class:`LaunchConfig`, ``Function.launch``): grid, block,
dynamic shared memory, the thread-block cluster and whether the grid is sized by the GPU's
multiprocessor count at launch."""

from __future__ import annotations

from ..frozen import Frozen, frozen

__all__ = ["LaunchConfig"]


@frozen
class LaunchConfig(Frozen):
    """The launch shape. ``sms_grid``: the grid's x is the device's multiprocessor count,
    known only when the kernel is launched (``T.cuda.LaunchConfig(grid="sms")``); ``grid[0]``
    is then 0 until :meth:`resolved` puts the count there (with clusters: the largest
    multiple of the cluster's x not above it)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int = 0
    cluster: tuple[int, int, int] | None = None  # a thread-block cluster's blocks (x, y, z)
    sms_grid: bool = False

    @property
    def cluster_shape(self) -> tuple[int, int, int]:  # (1, 1, 1) without clusters
        return self.cluster or (1, 1, 1)

    def resolved(self, sms: int) -> LaunchConfig:
        """The launch with the grid's x set to ``sms`` multiprocessors, rounded down to whole
        clusters (itself when its grid does not depend on them)."""
        if not self.sms_grid:
            return self
        cx = self.cluster_shape[0]
        x = max(sms - sms % cx, cx)
        return LaunchConfig((x, *self.grid[1:]), self.block, self.dynamic_smem_bytes, self.cluster)
