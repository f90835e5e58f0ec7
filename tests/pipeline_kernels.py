"""A warp-specialized pipeline for the timeline tests (tests/test_widgets_pipeline.py) and the
demo notebook: warp 0's thread 0 fills a ring of two shared stages with TMA tensor copies,
each stage's ``full`` mbarrier armed with its bytes; the four consumer warps wait for a stage,
add its elements into their sums and arrive on the stage's ``empty`` barrier, which the
producer waits on before it refills the stage. ``planted`` leaves one wait out: ``"full"``
(the consumers read a stage whose copy may not have landed) or ``"empty"`` (the producer
refills a stage the consumers may still read); ``"arm"`` arms a stage's ``full`` barrier before
the ``empty`` wait (its last copy may not have landed, so the arrive may count toward the phase
that copy completes)."""

from __future__ import annotations

import numpy as np

from tirx.layout import ComposeLayout, S, TileLayout

from .helpers import define

TMA = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"

SOURCE = """
@T.function
def ring(A: T.Tensor(({K32}, 64), "float16"), Out: T.Tensor((128, 16), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=160))
    s = T.alloc_shared((2, 32, 64), "float16", layout=LAYOUT, align=1024)
    full = T.alloc_shared((2,), "uint64")
    empty = T.alloc_shared((2,), "uint64")
    acc = T.alloc_local((16,), "float32")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](full[0], 1)
        T.ptx["mbarrier.init.shared::cta.b64"](full[1], 1)
        T.ptx["mbarrier.init.shared::cta.b64"](empty[0], 128)
        T.ptx["mbarrier.init.shared::cta.b64"](empty[1], 128)
    T.cuda.cta_sync()
    if tid < 32:
        if tid == 0:
            for k in range({K}):
                st = k % 2
                if k >= 2:
                    {wait_empty}
                T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](full[st], 4096)
                T.cuda.tile.apply(T.ptx[TEXT], s[st, :, :], A[:, :], box=(32, 64), coords=(k * 32, 0), swizzle=3, mbar=full[st], scope="thread")
    else:
        c = tid - 32
        for j in range(16):
            acc[j] = T.float32(0)
        for k in range({K}):
            st = k % 2
            {wait_full}
            for j in range(16):
                acc[j] = acc[j] + T.float32(s[st, c // 4, (c % 4) * 16 + j])
            T.ptx["mbarrier.arrive.shared::cta.b64"](empty[st])
        for j in range(16):
            Out[c, j] = acc[j]
"""
WAIT_FULL = "T.cuda.mbarrier_wait(full[st], (k // 2) % 2)"
WAIT_EMPTY = "T.cuda.mbarrier_wait(empty[st], (k // 2 - 1) % 2)"


# the producer's arming of a stage, and the empty wait before it (from the second round on)
ARM = '                T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](full[st], 4096)\n'
GUARDED_WAIT = f"                if k >= 2:\n                    {WAIT_EMPTY}\n"


def ring_source(K: int = 4, planted: str | None = None) -> str:
    source = SOURCE.format(
        K=K, K32=K * 32,
        wait_full="pass" if planted == "full" else WAIT_FULL,
        wait_empty="pass" if planted == "empty" else WAIT_EMPTY,
    )  # fmt: skip
    if planted == "arm":
        assert GUARDED_WAIT + ARM in source
        source = source.replace(GUARDED_WAIT + ARM, ARM + GUARDED_WAIT)
    return source


def define_ring(tmp_path, source: str):
    """The ring kernel of ``source`` (:func:`ring_source`, edited or not)."""
    layout = ComposeLayout(3, 3, 3, TileLayout(S[(2, 32, 64)]))
    return define(source, tmp_path, "ring", LAYOUT=layout, TEXT=TMA)


def ring_kernel(tmp_path, K: int = 4, planted: str | None = None):
    return define_ring(tmp_path, ring_source(K, planted))


def ring_inputs(K: int = 4):
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (K * 32, 64)).astype(np.float16)
    out = np.zeros((128, 16), dtype=np.float32)
    tiles = a.astype(np.float32).reshape(K, 32, 64)
    want = np.stack([tiles[:, c // 4, (c % 4) * 16 : (c % 4) * 16 + 16].sum(axis=0)
                     for c in range(128)])  # fmt: skip
    return a, out, want
