"""Kernels of the TMA tensor-store tests (tests/test_isa_tma_store.py, test_sim_tma_store.py):
one box stored (or reduced) from a shared tile the threads fill, a grid of blocks reducing into
one tile, and a loop that loads with TMA, computes and stores with TMA through two stages.
Each is text with fields, so a test can break one piece; lines carry ``# name`` markers."""

from __future__ import annotations

import textwrap

import numpy as np

import tirx
from tirx.layout import ComposeLayout, S, TileLayout

from .helpers import PRELUDE, define
from .tma_store_model import combine_model

STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
REDUCE = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.tile.bulk_group"
LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"

# Every block fills the shared tile s (through its layout) from its slice of A, fences,
# synchronizes, and thread {issuer} stores (or reduces) the box into C at coords, commits and
# waits.
BOX = """
@T.function
def kernel(A: T.Tensor(({AR}, {bc}), "{dtype}"), C: T.Tensor(({R}, {Cc}), "{dtype}")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid={grid}, block=128))
    s = T.alloc_shared(({br}, {bc}), "{dtype}", layout=LAYOUT, align={align})
    s2 = T.alloc_shared(({br}, {bc}), "{dtype}", layout=LAYOUT, align={align})
    bars = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    bx = T.cuda.block_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
    {prologue}
    for i in range({per_thread}):
        e = tid * {per_thread} + i
        {target}[e // {bc}, e % {bc}] = A[bx * {br} + e // {bc}, e % {bc}]  # fill
    {fence}  # fence
    {sync}  # sync
    if tid == {issuer}:
        T.cuda.tile.apply(T.ptx[TEXT], {dst}, {src}, box=({br}, {bc}), coords={coords}, swizzle={swizzle}, scope="thread")  # store
        {after_store}  # after store
        {commit}  # commit
        {after_commit}  # after commit
        {wait_read}  # wait read
        {after_read}  # after read
        {wait_full}  # wait full
        {after_full}  # after full
    {tail}  # tail
"""

BOX_FIELDS = dict(
    prologue="pass",
    target="s",
    fence='T.ptx["fence.proxy.async.shared::cta"]()',
    sync="T.cuda.cta_sync()",
    issuer="0",
    dst="C[:, :]",
    src="s[:, :]",
    after_store="pass",
    commit='T.ptx["cp.async.bulk.commit_group"]()',
    after_commit="pass",
    wait_read='T.ptx["cp.async.bulk.wait_group.read"](0)',
    after_read="pass",
    wait_full='T.ptx["cp.async.bulk.wait_group"](0)',
    after_full="pass",
    tail="pass",
)


def tile_layout(rows: int, cols: int, swizzle: int, bits: int):
    """The shared tile of ``rows x cols`` elements laid out as a TMA box image under the
    swizzle code (0: the dense row-major tile)."""
    plain = TileLayout(S[(rows, cols)])
    if not swizzle:
        return plain
    per_element = (128 // bits).bit_length() - 1  # log2 of the elements in 16 bytes
    return ComposeLayout(per_element, swizzle, 3, plain)


def box_source(*, box=(64, 64), shape=(128, 128), coords=(64, 0), swizzle=3, dtype="float16",
               grid=1, layout=None, align=None, text=STORE, **changes):  # fmt: skip
    """(source, kernel namespace fields) of the BOX kernel."""
    br, bc = box
    bits = 16 if dtype.endswith("16") else (64 if dtype.endswith("64") else 32)
    fields = {**BOX_FIELDS, **changes}
    source = BOX.format(
        AR=grid * br, R=shape[0], Cc=shape[1], br=br, bc=bc, dtype=dtype, grid=grid,
        align=(128 << swizzle if swizzle else 128) if align is None else align,
        per_thread=br * bc // 128, coords=f"({coords[0]}, {coords[1]})", swizzle=swizzle,
        **fields,
    )  # fmt: skip
    scope = dict(LAYOUT=layout or tile_layout(br, bc, swizzle, bits), TEXT=text)
    return source, scope


def box_kernel(tmp_path, names=None, **kw):
    """(the BOX kernel, its source); ``names``: more names its text uses (RED, LOAD)."""
    source, scope = box_source(**kw)
    return define(source, tmp_path, "kernel", **scope, **(names or {})), source


def line(source: str, marker: str) -> int:
    """The line number (in the file define() writes) of the line carrying ``# marker``."""
    text = PRELUDE + textwrap.dedent(source)
    for i, ln in enumerate(text.splitlines(), 1):
        if ln.rstrip().endswith(f"# {marker}"):
            return i
    raise AssertionError(marker)


def expected_store(c, tile, coords, op=None, dtype=None) -> np.ndarray:
    """C after storing (``op`` None) or reducing (``op`` of ``dtype``) ``tile`` at ``coords``,
    from the PTX ISA: each box element inside the tensor is written (or combined with the
    tensor's element), the others are not. Arrays of storage values (bfloat16 as uint16)."""
    out = c.copy()
    r0, c0 = coords
    for r in range(tile.shape[0]):
        for k in range(tile.shape[1]):
            y, x = r0 + r, c0 + k
            if 0 <= y < c.shape[0] and 0 <= x < c.shape[1]:
                v = tile[r, k]
                out[y, x] = v if op is None else combine_model(op, dtype, out[y, x], v)
    return out


# A loop over K tiles of A: thread 0 loads tile k with TMA into sa, every thread computes
# 2 * x + 1 into output stage k % 2, fences and synchronizes, thread 0 stores the stage to C
# with TMA, commits and waits for the reads of all but its newest {keep} groups; a barrier
# then lets the stage be refilled two iterations later.
PIPELINE = """
@T.function
def kernel(A: T.Tensor(({K64}, 64), "float16"), C: T.Tensor(({K64}, 64), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    sa = T.alloc_shared((64, 64), "float16", layout=LAYOUT, align=1024)
    so = T.alloc_shared((2, 64, 64), "float16", layout=LAYOUT2, align=1024)
    bars = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
    T.cuda.cta_sync()
    for k in range({K}):
        st = k % 2
        if tid == 0:
            T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 8192)
            T.cuda.tile.apply(T.ptx[LOAD], sa[:, :], A[:, :], box=(64, 64), coords=(k * 64, 0), swizzle=3, mbar=bars[0], scope="thread")
        T.cuda.mbarrier_wait(bars[0], k % 2)
        for i in range(32):
            e = tid * 32 + i
            so[st, e // 64, e % 64] = sa[e // 64, e % 64] * T.float16(2) + T.float16(1)  # compute
        {fence}  # fence
        T.cuda.cta_sync()  # sync
        {late_fence}  # late fence
        if tid == 0:
            T.cuda.tile.apply(T.ptx[STORE], C[:, :], so[st, :, :], box=(64, 64), coords=(k * 64, 0), swizzle=3, scope="thread")  # store
            {commit}  # commit
            T.ptx["cp.async.bulk.wait_group.read"]({keep})  # wait read
        {reuse_sync}  # reuse sync
    if tid == 0:
        T.ptx["cp.async.bulk.wait_group"](0)  # wait full
"""

PIPELINE_FIELDS = dict(
    fence='T.ptx["fence.proxy.async.shared::cta"]()',
    late_fence="pass",
    commit='T.ptx["cp.async.bulk.commit_group"]()',
    keep="1",
    reuse_sync="T.cuda.cta_sync()",
)


def pipeline_kernel(tmp_path, K: int = 4, **changes):
    source = PIPELINE.format(K=K, K64=K * 64, **{**PIPELINE_FIELDS, **changes})
    k = define(
        source, tmp_path, "kernel", LOAD=LOAD, STORE=STORE,
        LAYOUT=ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)])),
        LAYOUT2=ComposeLayout(3, 3, 3, TileLayout(S[(2, 64, 64)])),
    )  # fmt: skip
    return k, source


def pipeline_expected(a: np.ndarray) -> np.ndarray:
    return (a.astype(np.float32) * 2 + 1).astype(np.float16)


def ints(shape, dtype, seed=0, low=-1000, high=1000):
    """Random integers of ``dtype`` in ``[low, high)``."""
    rng = np.random.default_rng(seed)
    return rng.integers(low, high, size=shape).astype(dtype)


def run_sim(kernel, *arrays):
    tirx.compile(kernel, target="sim")(*arrays)


def storage(x) -> np.ndarray:
    """numpy storage values of a numpy array or a torch bfloat16 tensor."""
    if isinstance(x, np.ndarray):
        return x
    import torch

    return x.view(torch.int16).numpy().view(np.uint16)


def bits(x: np.ndarray) -> np.ndarray:
    return x.view(f"u{x.itemsize}")


def on_gpu_and_sim(kernel, *arrays):
    """Run ``kernel`` on the simulator and on the GPU over copies of ``arrays`` (numpy arrays
    or CPU torch tensors); the arguments after both runs, as numpy storage values."""
    import torch

    def copy(x):
        return x.copy() if isinstance(x, np.ndarray) else x.clone()

    sim_args = [copy(x) for x in arrays]
    run_sim(kernel, *sim_args)
    gpu_args = [
        (torch.from_numpy(copy(x)) if isinstance(x, np.ndarray) else copy(x)).cuda() for x in arrays
    ]
    tirx.compile(kernel, target="cuda")(*gpu_args)
    torch.cuda.synchronize()
    gpu = [storage(g.cpu() if g.dtype == torch.bfloat16 else g.cpu().numpy()) for g in gpu_args]
    return [storage(x) for x in sim_args], gpu
