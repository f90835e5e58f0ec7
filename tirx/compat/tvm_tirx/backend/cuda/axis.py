"""``tvm_tirx.backend.cuda.axis``: the thread and memory axes of tirx."""

from tirx.layout import (  # noqa: F401
    Axis,
    bx,
    by,
    bz,
    laneid,
    m,
    tid_in_wg,
    tx,
    warpid,
    wgid,
    wid_in_wg,
)
