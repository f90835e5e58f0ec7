"""The launch of a kernel whose blocks form thread-block clusters (``T.cuda.LaunchConfig(...,
cluster=(x, y, z))``): ``cuLaunchKernelEx`` with the launch attribute
``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`` (the CUDA programming guide, "Thread Block Clusters":
a cluster shape chosen at launch time), instead of ``cuLaunchKernel``.

The generated CUDA carries no ``__cluster_dims__``: the shape travels with the launch, as the
real TIRx's ``LaunchConfig.cluster`` does, so the same cubin serves any cluster shape and a
saved kernel's manifest says which one it is launched with. :class:`ClusterEntry` takes
``cuLaunchKernel``'s arguments, so the executable's runners (memo, checks, packed argument
blocks) are the same for both; only the compiled C runner, which calls ``cuLaunchKernel``
through its address, is not used for such kernels (the launcher gives it no address), and
their calls go through the Python runner.
"""

from __future__ import annotations

from ...errors import LaunchError
from .driver import Launcher, driver_api

__all__ = ["ClusterEntry", "ClusterLauncher", "cluster_launcher"]


class ClusterEntry:
    """``entry(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra) -> (CUresult,)``, as
    ``cuLaunchKernel`` is called, launching through ``cuLaunchKernelEx`` in clusters of
    ``cluster`` blocks. One launch configuration per stream, built at its first launch and
    never changed after (a launch from another thread cannot see a half-written one)."""

    __slots__ = ("cluster", "_configs", "_launch")

    def __init__(self, cluster: tuple[int, int, int]):
        self.cluster = tuple(int(x) for x in cluster)
        self._configs: dict = {}
        self._launch = driver_api().cuLaunchKernelEx

    def __call__(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        key = (int(stream), gx, gy, gz, bx, by, bz, smem)
        config = self._configs.get(key)
        if config is None:
            config = self._config(key, stream)
        return self._launch(config, f, params, extra)

    def _config(self, key, stream):
        drv = driver_api()
        _, gx, gy, gz, bx, by, bz, smem = key
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        dims = attr.value.clusterDim
        dims.x, dims.y, dims.z = self.cluster
        config = drv.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = gx, gy, gz
        config.blockDimX, config.blockDimY, config.blockDimZ = bx, by, bz
        config.sharedMemBytes = smem
        config.hStream = stream
        config.attrs = [attr]
        config.numAttrs = 1
        if len(self._configs) >= 64:  # streams come and go; keep the map small
            self._configs.clear()
        self._configs[key] = config
        return config

    def __repr__(self) -> str:
        return f"ClusterEntry(cluster={self.cluster})"


class ClusterLauncher(Launcher):
    """A :class:`~.driver.Launcher` whose entry is a :class:`ClusterEntry`; a failed launch
    says the cluster shape it asked for."""

    __slots__ = ()

    def failed(self, err, grid, block, smem, stream, params) -> None:
        try:
            super().failed(err, grid, block, smem, stream, params)
        except LaunchError as e:
            cluster = self.entry.cluster
            raise LaunchError(
                f"{e.message} (cuLaunchKernelEx in clusters of {cluster} blocks)",
                hint=e.hint
                or "a cluster's blocks must fit on one GPU processing cluster at once: use "
                "fewer blocks per cluster, or less shared memory or fewer threads per block",
            ) from None


def cluster_launcher(kernel, param_types, cluster) -> ClusterLauncher:
    """A launcher of ``kernel`` that launches in clusters of ``cluster`` blocks (no C entry
    address: the Python runner launches it)."""
    return ClusterLauncher(
        kernel, tuple(param_types), entry=ClusterEntry(cluster), entry_address=None
    )
