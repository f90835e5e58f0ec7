"""The configuration of :mod:`tirx.examples.attention_wgmma`: the sizes a block takes
(``WgmmaAttentionConfig``), their checks, the figures derived from them and the default for a
head dim. Apart from the kernel so that a configuration is read and checked without it."""

from __future__ import annotations

from dataclasses import dataclass

from tirx.transform.shared_memory import optin_limit

__all__ = [
    "WgmmaAttentionConfig", "HEAD_DIMS", "DTYPES", "BLOCK_NS", "BM", "THREADS", "PRODUCER_REGISTERS",
    "CONSUMER_REGISTERS", "SHARED_LIMIT", "default_config",
]  # fmt: skip

HEAD_DIMS = (64, 128)
DTYPES = ("float16", "bfloat16")
PRODUCER_REGISTERS = 24  # what setmaxnreg.dec leaves the producer warpgroup's threads
# keys per K/V tile: wgmma's N for S = Q Kᵀ, a multiple of 16 (P V's k16 slices); 176 and 192
# hold S (88 or 96 registers) and P beside O at head dim 128 within a consumer's 240
BLOCK_NS = (64, 128, 176, 192)


@dataclass(frozen=True)
class WgmmaAttentionConfig:
    """``block_n`` keys per K/V tile, ``stages`` shared stages of each; ``pingpong``: the two
    consumer warpgroups take turns to issue ``S = Q Kᵀ``; ``overlap``: each consumer issues
    tile ``j``'s ``Q Kᵀ`` with tile ``j - 1``'s ``P V``; ``approx``: the softmax's
    instructions as FlashAttention-3 writes them, for a positive ``scale`` (module doc);
    ``consumers``: consumer warpgroups per block, 64 query rows each (3: head dim 64 only,
    without ping-pong, 160 registers per consumer thread); ``persistent``: one block per
    multiprocessor walks over the query tiles (module doc)."""

    block_n: int = 128
    stages: int = 2
    pingpong: bool = False
    overlap: bool = False
    approx: bool = False
    consumers: int = 2
    persistent: bool = False

    def check(self, head_dim: int | None = None) -> None:
        if self.block_n not in BLOCK_NS:
            raise ValueError(f"cfg.block_n must be one of {BLOCK_NS}, got {self.block_n}")
        if self.stages not in (2, 3):
            raise ValueError(f"cfg.stages must be 2 or 3, got {self.stages}")
        if self.consumers not in (2, 3):
            raise ValueError(f"cfg.consumers must be 2 or 3, got {self.consumers}")
        if self.consumers == 3 and self.pingpong:
            raise ValueError("cfg.pingpong takes two consumer warpgroups, not three")
        if self.consumers == 3 and self.block_n > 176:
            raise ValueError(
                f"three consumer warpgroups take key tiles of at most 176 keys: the scores of "
                f"{self.block_n} do not fit {self.consumer_registers} registers per thread"
            )
        if self.consumers == 3 and head_dim is not None and head_dim != 64:
            raise ValueError(
                f"three consumer warpgroups hold head dim 64 only: {self.consumer_registers} "
                f"registers per thread are too few for S, P and O at head dim {head_dim}"
            )
        if head_dim is not None and self.shared_bytes(head_dim) > SHARED_LIMIT:
            raise ValueError(
                f"Q's tile and {self.stages} stages of {self.block_n}-key K and V tiles at head "
                f"dim {head_dim} take {self.shared_bytes(head_dim)} bytes of shared memory, more "
                f"than the {SHARED_LIMIT} of an sm_90 block: use fewer stages or a smaller "
                "block_n"
            )

    @property
    def block_m(self) -> int:
        """Query rows per block: 64 per consumer warpgroup."""
        return 64 * self.consumers

    @property
    def threads(self) -> int:
        """The producer warpgroup and the consumers."""
        return 128 * (self.consumers + 1)

    @property
    def consumer_registers(self) -> int:
        """What ``setmaxnreg.inc`` gives a consumer thread: the block's 64K registers less the
        producer's :data:`PRODUCER_REGISTERS`, shared out in multiples of 8 (240 for two
        consumers, 160 for three)."""
        per = (65536 // 128 - PRODUCER_REGISTERS) // self.consumers
        return per - per % 8

    def shared_bytes(self, head_dim: int) -> int:
        """Q's tile and ``stages`` stages of K and V, 16-bit elements (the mbarriers apart)."""
        return (self.block_m + 2 * self.stages * self.block_n) * head_dim * 2


SHARED_LIMIT = optin_limit(90)  # the shared memory one sm_90 block may opt in to (the compiler's)

# the two-consumer block's figures (three consumers: cfg.block_m 192, cfg.threads 512, 160)
BM = WgmmaAttentionConfig().block_m  # query rows per block: 64 per consumer warpgroup
THREADS = WgmmaAttentionConfig().threads  # a producer warpgroup and two consumers
CONSUMER_REGISTERS = WgmmaAttentionConfig().consumer_registers  # what setmaxnreg.inc gives


def default_config(head_dim: int, causal: bool = False) -> WgmmaAttentionConfig:
    """128-key tiles, two stages, the approx softmax; at head dim 64 three consumer warpgroups
    (88 KB of shared memory; 160 KB at head dim 128 with two); a persistent grid for full
    attention, not causal (benchmarks/results/attention_speed-h100.md: as fast or faster in
    all four full cases; on causal ones slower than the plain grid, docs/attention.md). Three
    stages, ping-pong, the overlap and 176- or 192-key tiles won no more than one or two of a
    head dim's four cases in the runs before it."""
    return WgmmaAttentionConfig(
        block_n=128, stages=2, approx=True, consumers=3 if head_dim == 64 else 2,
        persistent=not causal,
    )  # fmt: skip
