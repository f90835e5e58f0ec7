"""The configuration of :mod:`tirx.examples.gemm_pipelined`: block and warp tiles, pipeline
stages, the shared layouts of the stages, the register fragments, and the size checks; and
:func:`positive_int`, the check of an integer argument every example factory uses (a size, a
tile count, a group), so that a bad one is refused by name before any kernel is built."""

import operator
from dataclasses import dataclass

from tirx.layout import ComposeLayout, S, TileLayout, laneid

__all__ = [
    "GemmConfig", "DEFAULT", "shared_layout", "fragment_layouts", "check_sizes", "multiprocessors",
    "positive_int",
]  # fmt: skip


def positive_int(name: str, value, least: int = 1, note: str = "") -> int:
    """``value`` as a Python int, if it is an integer of at least ``least`` (1: positive).

    Any integer passes (an ``int``, a numpy integer: whatever ``operator.index`` takes) but a
    bool; ``TypeError`` for anything else (a float, a string, ``None``, a bool), ``ValueError``
    for an integer below ``least``. Both name the argument; ``note`` (say ``" (0: off)"``)
    follows the rule in the ValueError's message."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not a bool ({value!r})")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {value!r}") from None
    if number < least:
        rule = "a positive int" if least == 1 else f"an int of at least {least}"
        raise ValueError(f"{name} must be {rule}{note}, got {number}")
    return number


_INT_FIELDS = ("bm", "bn", "bk", "warps_m", "warps_n", "stages", "group_m", "persistent")


@dataclass(frozen=True)
class GemmConfig:
    """Tile shapes and pipeline of the GEMM.

    ``bm x bn``: the block tile; ``warps_m x warps_n``: the warp grid; ``bk``: the K depth of
    one stage (two 16-wide mma slices); ``stages``: shared stages (2 or more); ``smem``: the
    shared layout, ``"swizzle"``, ``"pad"`` or ``"plain"``; ``double_buffer``: load the next
    slice's fragments before the current slice's mma; ``group_m``: block rows per raster group
    (1 or more); ``persistent``: 0 launches one block per output tile; ``n > 0`` launches ``n``
    blocks per multiprocessor (as many as fit at once), each taking every grid-th tile, its
    pipeline running on from one tile into the next (no fill and drain per tile);
    ``stage_output``: the epilogue passes the tile through shared memory so that every store
    writes whole 128-byte lines (one-tile-per-block kernels only: a persistent block's stages
    are busy with the next tile's copies by then, so it stores from registers); ``bulk_store``:
    the staged tile leaves shared memory through ``cp.async.bulk`` (sm_90's bulk copy engine,
    one row per copy), so no warp waits for its stores; a persistent kernel then stages through
    a buffer of its own (its stages hold the next tile's K tiles) and its stores drain while
    the next tile's mma.sync run.
    """

    bm: int = 128
    bn: int = 128
    bk: int = 64
    warps_m: int = 2
    warps_n: int = 2
    stages: int = 3
    smem: str = "swizzle"
    double_buffer: bool = True
    group_m: int = 8
    persistent: int = 0
    stage_output: bool = True
    bulk_store: bool = False

    def __post_init__(self):
        # numpy integers become Python ints (the kernel's launch and shapes take those);
        # anything else stays as given for check() to refuse by name
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, (int, float, str)):
                try:
                    object.__setattr__(self, name, operator.index(value))
                except TypeError:
                    pass

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def wtm(self) -> int:
        return self.bm // self.warps_m

    @property
    def wtn(self) -> int:
        return self.bn // self.warps_n

    @property
    def mr(self) -> int:
        return self.wtm // 16

    @property
    def nr(self) -> int:
        return self.wtn // 8

    def stage_bytes(self, elem_bytes: int = 2) -> int:
        """Shared bytes of the A and B stages (pad rows included)."""
        row = self.bk + (8 if self.smem == "pad" else 0)
        return self.stages * (self.bm + self.bn) * row * elem_bytes

    def shared_bytes(self, elem_bytes: int = 2, out_bytes: int = 4) -> int:
        """The stages and, for a persistent bulk-store kernel, its staging buffer."""
        return self.stage_bytes(elem_bytes) + self.bulk_rows(out_bytes) * (self.bn + 8) * out_bytes

    def bulk_rows(self, out_bytes: int = 4) -> int:
        """Rows of a persistent bulk-store kernel's own staging buffer (0: none): the most
        whole warp rows, at most one per thread, that fit beside the stages in 227 KB."""
        if not (self.bulk_store and self.persistent):
            return 0
        room = 227 * 1024 - self.stage_bytes()
        fits = [
            r
            for r in range(self.wtm, self.bm + 1, self.wtm)
            if self.bm % r == 0 and r <= self.threads and r * (self.bn + 8) * out_bytes <= room
        ]
        return max(fits, default=0)

    def check(self) -> None:
        """ValueError (TypeError for a field that is not an int) unless the fields make a
        kernel: every tile size, warp count, stage count and ``group_m`` a positive int,
        ``persistent`` an int of at least 0."""
        for name in _INT_FIELDS[:-1]:
            positive_int(name, getattr(self, name))
        positive_int("persistent", self.persistent, 0, " (blocks per multiprocessor; 0: off)")
        if self.bk not in (32, 64):
            raise ValueError(f"bk must be 32 or 64 (2 or 4 16-wide mma slices), got {self.bk}")
        if self.smem not in ("swizzle", "pad", "plain"):
            raise ValueError(f"smem must be 'swizzle', 'pad' or 'plain', got {self.smem!r}")
        if self.stages < 2:
            raise ValueError("a pipeline needs at least 2 stages")
        if self.wtm % 16 or self.wtn % 16 or self.wtm * self.warps_m != self.bm:
            raise ValueError(f"warp tile {self.wtm}x{self.wtn} must be a multiple of 16x16")
        if self.wtn * self.warps_n != self.bn:
            raise ValueError(f"bn={self.bn} is not {self.warps_n} warp tiles")
        if self.bulk_store and self.persistent and not self.bulk_rows():
            raise ValueError(
                f"a persistent bulk-store kernel needs a staging buffer of at least {self.wtm} "
                f"rows beside its {self.stages} stages, and they do not fit in 227 KB: use "
                "fewer stages"
            )
        for rows in (self.bm, self.bn):
            if (rows * self.bk // 8) % self.threads:
                raise ValueError(f"a {rows}x{self.bk} tile does not split over {self.threads}")


DEFAULT = GemmConfig(bm=256, warps_m=4)  # one block of 8 warps per multiprocessor


def shared_layout(stages: int, rows: int, bk: int, smem: str):
    """The layout of ``stages`` shared ``rows x bk`` tiles of 16-bit elements.

    ``"swizzle"``: element ``m`` lives at chunk ``c ^ ((m >> 6) & 3)`` of its row pair, i.e.
    the 16-byte chunk index (``m >> 3``) has its two low bits XOR-ed with bits 3-4, so rows
    ``r .. r+7`` of one chunk column fall in 8 different 16-byte bank groups;
    ``"pad"``: each row is followed by 8 unused elements; ``"plain"``: rows back to back.
    """
    if smem == "pad":
        ld = bk + 8
        return TileLayout(S[(stages, rows, bk) : (rows * ld, ld, 1)])
    plain = TileLayout(S[(stages, rows, bk)])
    if smem == "plain":
        return plain
    return ComposeLayout(3, (bk // 8).bit_length() - 1, 3, plain)


def fragment_layouts(mr: int, nr: int):
    """Register layouts (SPEC §5's natural generalization to repeats)."""
    return (
        TileLayout(S[(mr, nr, 2, 8, 4, 2) : (4 * nr, 4, 2, 4 @ laneid, 1 @ laneid, 1)]),
        TileLayout(S[(mr, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)]),
        TileLayout(S[(nr, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)]),
        TileLayout(S[(mr, 4, 8, 4) : (4, 1, 4 @ laneid, 1 @ laneid)]),
        TileLayout(S[(nr // 2, 4, 8, 4) : (4, 1, 4 @ laneid, 1 @ laneid)]),
    )


def check_sizes(M: int, N: int, K: int, dtype: str, cfg: GemmConfig) -> tuple[int, int, int]:
    """ValueError (TypeError for an argument of the wrong type) unless ``cfg`` is a valid
    :class:`GemmConfig` whose tiles divide the positive ints M, N and K; returns them as
    Python ints (numpy integers are taken too)."""
    if not isinstance(cfg, GemmConfig):
        raise TypeError(
            f"cfg must be a GemmConfig, e.g. GemmConfig(bm=128), not {type(cfg).__name__} {cfg!r}"
        )
    M, N, K = (positive_int(name, v) for name, v in zip("MNK", (M, N, K)))
    cfg.check()
    if M % cfg.bm or N % cfg.bn or K % cfg.bk:
        raise ValueError(
            f"M, N, K must be multiples of {cfg.bm}, {cfg.bn}, {cfg.bk}; got {M}, {N}, {K}"
        )
    if K < (cfg.stages - 1) * cfg.bk:
        raise ValueError(
            f"K = {K} is fewer than the {cfg.stages - 1} K tiles of {cfg.bk} the pipeline keeps "
            f"in flight: use K >= {(cfg.stages - 1) * cfg.bk} or fewer stages"
        )
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"dtype must be float16 or bfloat16, got {dtype!r}")
    return M, N, K


def multiprocessors() -> int:
    """The visible GPU's multiprocessor count; 132 (an H100 / H200 SXM) without a GPU."""
    from tirx.backend.cuda.driver import gpu_count, multiprocessor_count

    return multiprocessor_count() if gpu_count() else 132
