"""The kernels tests/sync_fuzz.py edits: the pipelined examples, lowered, at sizes where every
pipeline wraps around its stages (so a missing wait or barrier meets a stage being reused),
each with its inputs (outputs pre-filled with NaN, so a missing write shows)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tirx.ir import nodes as ir

__all__ = ["Kernel", "KERNELS"]


@dataclass(frozen=True)
class Kernel:
    """A pipelined example, lowered, and its inputs (outputs pre-filled with NaN or a
    pattern, so a missing write shows)."""

    name: str
    build: Callable[[], ir.Function]
    inputs: Callable[[], list]
    #: more runs, each edit is run with each: the other side of a branch on an argument
    also: tuple[Callable[[], list], ...] = ()

    def input_sets(self) -> tuple[Callable[[], list], ...]:
        return (self.inputs, *self.also)


def _ints(shape, seed, dtype=np.float16):
    rng = np.random.default_rng(seed)
    return rng.integers(-2, 3, size=shape).astype(dtype)


def _gemm_inputs(M, N, K):
    def inputs():
        return [_ints((M, K), 1), _ints((N, K), 2), np.full((M, N), np.nan, np.float32)]

    return inputs


def _lowered(kernel, sms: int | None = None) -> ir.Function:
    """``kernel`` lowered for the simulator (a ``grid="sms"`` kernel on ``sms`` blocks)."""
    import tirx

    return tirx.compile(kernel, target="sim", sms=sms).lowered


def _gemm_pipelined():
    from tirx.examples.gemm_pipelined import GemmConfig, make_gemm_pipelined

    return _lowered(make_gemm_pipelined(128, 128, 256, "float16", GemmConfig(), sms=1))


def _gemm_pipelined_bulk():
    from tirx.examples.gemm_pipelined import GemmConfig, make_gemm_pipelined

    cfg = GemmConfig(bulk_store=True)
    return _lowered(make_gemm_pipelined(128, 128, 256, "float16", cfg, sms=1))


def _gemm_wgmma(loads: str):
    def build():
        from tirx.examples.gemm_wgmma import make_gemm_wgmma

        stages = 3 if loads == "cp.async" else 2
        return _lowered(make_gemm_wgmma(256, 128, 256, "float16", stages, loads))

    return build


def _gemm_hopper(cluster: int):
    def build():
        from tirx.examples.gemm_hopper import make_gemm_hopper

        # bn=128, two stages, four K tiles: one block (one cluster of two) walks the output
        # tiles, so the ring wraps in every tile and runs on across them, and each tile's
        # staging tile is met, written and stored again after the last tile's stores
        k = make_gemm_hopper(256, 256, 256, "float16", "float32", 2, cluster, bn=128)
        return _lowered(k, sms=cluster)

    return build


def _tma_pipeline():
    from tests.tma_kernels import pipeline_kernel

    return _lowered(pipeline_kernel(Path(tempfile.mkdtemp(prefix="sync_fuzz_")), K=4))


def _tma_inputs():
    a = (np.arange(4 * 32 * 64) % 23).reshape(4 * 32, 64).astype(np.float16)
    return [a, np.full((128, 16), np.nan, np.float32)]


def _warp_specialized():
    from tirx.examples.warp_specialized import make_warp_specialized

    # one block walking six 64 x 64 tiles through two stages: the ring wraps three times
    return _lowered(make_warp_specialized(128, 192), sms=1)


def _warp_specialized_inputs():
    rng = np.random.default_rng(7)
    a = rng.integers(-8, 9, size=(128, 192)).astype(np.float32)
    return [a, np.full((128, 192), np.nan, np.float32)]


def _attention():
    from tirx.examples.attention_mma import make_attention

    return _lowered(make_attention(1, 1, 1, 64, 192, 64, "float16", causal=False))


def _attention_inputs(seq_q: int, seq_k: int, seed: int, scale: float = 0.125):
    """Q, K, V (one head of 64), O and LSE pre-filled with NaN, and ``scale``."""

    def inputs():
        rng = np.random.default_rng(seed)
        q = rng.standard_normal((1, 1, seq_q, 64)).astype(np.float16)
        k, v = (rng.standard_normal((1, 1, seq_k, 64)).astype(np.float16) for _ in range(2))
        o = np.full((1, 1, seq_q, 64), np.nan, np.float16)
        lse = np.full((1, 1, seq_q), np.nan, np.float32)
        return [q, k, v, o, lse, scale]

    return inputs


def _attention_wgmma():
    from dataclasses import replace

    from tirx.examples.attention_wgmma import default_config, make_attention

    # the plain grid (the default for causal attention): one block, one tile
    cfg = replace(default_config(64), persistent=False)
    return _lowered(make_attention(1, 1, 1, 128, 384, 64, "float16", False, cfg))


def _wgmma_persistent(**changes):
    """The wgmma attention's default configuration at head dim 64 (with ``changes``) on the
    persistent grid, one block walking two query tiles: the ring's steps run on across the
    tiles, and the producer loads the second tile's Q once the consumers have freed the first's
    (q_free)."""

    def build():
        from dataclasses import replace

        from tirx.examples.attention_wgmma import default_config, make_attention

        cfg = replace(default_config(64), **changes)
        assert cfg.persistent
        kernel = make_attention(1, 1, 1, 2 * cfg.block_m, 384, 64, "float16", False, cfg)
        return _lowered(kernel, sms=1)

    return build


def _attention_kernel(name: str, build, seq_q: int, seq_k: int, seed: int) -> Kernel:
    """An attention kernel run at a positive and at a negative scale: the default
    configurations expand their softmax loops twice, the approx softmax's (a positive scale)
    and the exact one's (any other), and each edit meets both."""
    inputs = _attention_inputs(seq_q, seq_k, seed)
    return Kernel(name, build, inputs, (_attention_inputs(seq_q, seq_k, seed, scale=-0.125),))


_PINGPONG = _wgmma_persistent(consumers=2, pingpong=True, overlap=True)

KERNELS: dict[str, Kernel] = {
    k.name: k
    for k in (
        Kernel("gemm_pipelined", _gemm_pipelined, _gemm_inputs(128, 128, 256)),
        Kernel("gemm_pipelined.bulk", _gemm_pipelined_bulk, _gemm_inputs(128, 128, 256)),
        Kernel("gemm_wgmma.cp_async", _gemm_wgmma("cp.async"), _gemm_inputs(256, 128, 256)),
        Kernel("gemm_wgmma.tma", _gemm_wgmma("tma"), _gemm_inputs(256, 128, 256)),
        Kernel("gemm_hopper", _gemm_hopper(1), _gemm_inputs(256, 256, 256)),
        Kernel("gemm_hopper.cluster", _gemm_hopper(2), _gemm_inputs(256, 256, 256)),
        Kernel("tma_pipeline", _tma_pipeline, _tma_inputs),
        Kernel("warp_specialized", _warp_specialized, _warp_specialized_inputs),
        _attention_kernel("attention_mma", _attention, 64, 192, 3),
        _attention_kernel("attention_wgmma", _attention_wgmma, 128, 384, 4),
        # the default (three consumers), and every option of the consumers' schedule at once:
        # two warpgroups taking turns (ping-pong), each overlapping its softmax with the last
        # key tile's P V
        _attention_kernel("attention_wgmma.persistent", _wgmma_persistent(), 384, 384, 5),
        _attention_kernel("attention_wgmma.pingpong", _PINGPONG, 256, 384, 6),
    )
}
