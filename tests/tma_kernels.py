"""Kernels of the TMA tensor-load tests (tests/test_isa_tma.py, tests/test_sim_tma.py): one
box load into shared memory, read back through the tile's own layout or as raw storage, and a
two-stage producer/consumer loop. Each is text with fields, so a test can break one piece."""

from __future__ import annotations

import numpy as np

from tirx.layout import ComposeLayout, S, TileLayout

from .helpers import define

TMA = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"

# One 2-d box of A (rows x cols f16 from coords) into s, all 128 threads wait, then each copies
# elements of s (through ``read``: the tile itself or its raw storage) to Out.
BOX = """
@T.function
def kernel(A: T.Tensor(({R}, {C}), "{dtype}"), Out: T.Tensor(({br}, {bc}), "{dtype}")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    s = T.alloc_shared(({br}, {bc}), "{dtype}", layout=LAYOUT, align={align})
    bars = T.alloc_shared((1,), "{bar_type}")
    s2 = T.alloc_shared((128, {bc}), "{dtype}", layout=LAYOUT2, align={align})
    flags = T.alloc_shared((2,), "uint32")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], {nbytes})
        T.cuda.tile.apply(T.ptx[TEXT], {dst}, {src}, box={box_text}, coords=({r0}, {c0}), swizzle={swizzle}, mbar={mbar}, scope="thread")
    {wait}
    raw = {read}
    for i in range({per_thread}):
        e = tid * {per_thread} + i
        Out[e // {bc}, e % {bc}] = raw[e // {bc}, e % {bc}]
"""

WAIT = "T.cuda.mbarrier_wait(bars[0], 0)"


def swizzled_layout(rows: int, cols: int, swizzle: int, bits: int = 16):
    """The shared tile of ``rows x cols`` elements laid out as a TMA box image under the
    swizzle code (0: the dense row-major tile)."""
    plain = TileLayout(S[(rows, cols)])
    if not swizzle:
        return plain
    per_element = (128 // bits).bit_length() - 1  # log2 of the elements in 16 bytes
    return ComposeLayout(per_element, swizzle, 3, plain)


def box_kernel(tmp_path, *, shape=(128, 128), box=(64, 64), coords=(64, 0), swizzle=3,
               layout=None, align=None, dst="s[:, :]", src="A[:, :]", wait=WAIT, raw=False,
               dtype="float16", bar_type="uint64", text=TMA, nbytes=None,
               box_text=None, mbar="bars[0]"):  # fmt: skip
    """The BOX kernel with its fields; ``raw``: Out receives s's storage in address order."""
    br, bc = box
    layout = swizzled_layout(br, bc, swizzle) if layout is None else layout
    align = (128 << swizzle if swizzle else 128) if align is None else align
    read = f"s.view({br}, {bc}, layout=TileLayout(S[({br}, {bc})]))" if raw else "s"
    esize = 2 if dtype.endswith("16") else 4
    source = BOX.format(
        R=shape[0], C=shape[1], br=br, bc=bc, dtype=dtype, align=align, bar_type=bar_type,
        nbytes=nbytes if nbytes is not None else br * bc * esize, dst=dst, src=src,
        r0=coords[0], c0=coords[1], swizzle=swizzle, wait=wait, read=read,
        per_thread=br * bc // 128, box_text=box_text or f"({br}, {bc})", mbar=mbar,
    )  # fmt: skip
    tall = swizzled_layout(128, bc, swizzle)
    return define(source, tmp_path, "kernel", LAYOUT=layout, LAYOUT2=tall, TEXT=text)


def expected_raw(a: np.ndarray, coords, box, swizzle: int) -> np.ndarray:
    """The bytes a box load leaves in shared memory, from the PTX ISA's description: the box
    (zeros outside the tensor), dense, each 16-byte unit number XOR-ed with the 128-byte row
    number's low ``swizzle`` bits."""
    br, bc = box
    r0, c0 = coords
    tile = np.zeros(box, dtype=a.dtype)
    for r in range(br):
        for c in range(bc):
            if 0 <= r0 + r < a.shape[0] and 0 <= c0 + c < a.shape[1]:
                tile[r, c] = a[r0 + r, c0 + c]
    image = tile.reshape(-1).view(np.uint8)
    out = np.zeros_like(image)
    for o in range(image.size):
        unit, row = (o >> 4) & 7, (o >> 7) & 7
        mask = (1 << swizzle) - 1
        out[(o & ~0x70) | (((unit ^ row) & mask | unit & ~mask) << 4)] = image[o]
    return out.view(a.dtype).reshape(box)


# Two stages: thread 0 arms the barrier of stage k % 2 and loads tile k of A (a (K*32, 64) f16
# column of 32x64 tiles); every thread waits for it, adds its elements into its own sums, and
# the block synchronizes before the stage is refilled.
PIPELINE = """
@T.function
def kernel(A: T.Tensor(({K32}, 64), "float16"), Out: T.Tensor((128, 16), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    s = T.alloc_shared((2, 32, 64), "float16", layout=LAYOUT, align=1024)
    bars = T.alloc_shared((2,), "uint64")
    acc = T.alloc_local((16,), "float32")
    tid = T.cuda.thread_idx("x")
    for j in range(16):
        acc[j] = T.float32(0)
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)
        T.ptx["mbarrier.init.shared::cta.b64"](bars[1], 1)
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 4096)
        T.cuda.tile.apply(T.ptx[TEXT], s[0, :, :], A[:, :], box=(32, 64), coords=(0, 0), swizzle=3, mbar=bars[0], scope="thread")
    for k in range({K}):
        st = k % 2
        if tid == 0 and k + 1 < {K}:
            T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[1 - st], 4096)
            T.cuda.tile.apply(T.ptx[TEXT], s[1 - st, :, :], A[:, :], box=(32, 64), coords=((k + 1) * 32, 0), swizzle=3, mbar=bars[1 - st], scope="thread")
        T.cuda.mbarrier_wait(bars[st], (k // 2) % 2)
        for j in range(16):
            acc[j] = acc[j] + T.float32(s[st, tid // 4, (tid % 4) * 16 + j])
        {sync}
    for j in range(16):
        Out[tid, j] = acc[j]
"""


def pipeline_kernel(tmp_path, K: int = 6, sync: str = "T.cuda.cta_sync()"):
    layout = ComposeLayout(3, 3, 3, TileLayout(S[(2, 32, 64)]))
    source = PIPELINE.format(K=K, K32=K * 32, sync=sync)
    return define(source, tmp_path, "kernel", LAYOUT=layout, TEXT=TMA)


def pipeline_expected(a: np.ndarray, K: int) -> np.ndarray:
    tiles = a.astype(np.float32).reshape(K, 32, 64)
    out = np.zeros((128, 16), dtype=np.float32)
    for t in range(128):
        out[t] = tiles[:, t // 4, (t % 4) * 16 : (t % 4) * 16 + 16].sum(axis=0)
    return out
