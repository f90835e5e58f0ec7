"""Shared-memory banks of a tile, and the bank conflicts of an ldmatrix over it.

Shared memory has 32 banks of 4 bytes: byte address ``a`` is in bank ``(a // 4) % 32``. An
``ldmatrix`` reads each 8x8 matrix of 16-bit values as 8 rows of 16 bytes, one row address per
lane; the 32 words of one matrix come in one pass (a *wavefront*) when no two distinct words
share a bank, and in ``n`` passes when some bank holds ``n`` of them. A row-major tile whose
rows are 128 bytes apart puts all 8 rows of a matrix in the same 4 banks (8 passes); the
128-byte swizzle ``ComposeLayout(3, 3, 3, ...)`` spreads them over all 32 (1 pass).

Pure functions over public tirx layouts (``apply(*coord, shape=...)["m"]``, an element
offset); :func:`draw_banks` returns a matplotlib Figure.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

__all__ = ["BANKS", "element_banks", "LdmatrixBanks", "ldmatrix_banks", "draw_banks", "summary"]

BANKS = 32
ROW_BYTES = 16  # one ldmatrix row


def _shape(layout, shape):
    if shape is not None:
        return tuple(shape)
    inner = getattr(layout, "tile_layout", layout)
    return tuple(it.extent for it in inner.shard)


def element_banks(layout, shape=None, dtype_bytes: int = 2) -> dict[tuple, int]:
    """``{coord: bank}`` of each element's first byte for a memory layout over ``shape``."""
    shape = _shape(layout, shape)
    return {
        c: (layout.apply(*c, shape=shape)["m"] * dtype_bytes // 4) % BANKS
        for c in itertools.product(*(range(e) for e in shape))
    }


@dataclass(frozen=True)
class LdmatrixBanks:
    """An ldmatrix over every 8x8 block of a 2-D tile of 16-bit elements: ``passes`` maps each
    block's top-left coordinate to its wavefronts (1 is conflict-free)."""

    passes: dict

    @property
    def matrices(self) -> int:
        return len(self.passes)

    @property
    def wavefronts(self) -> int:
        return sum(self.passes.values())

    @property
    def worst(self) -> int:
        return max(self.passes.values(), default=1)

    def __str__(self) -> str:
        return (
            f"ldmatrix over {self.matrices} 8x8 matrices: {self.wavefronts} wavefronts "
            f"(ideal {self.matrices}), worst {self.worst}-way bank conflict"
        )


def ldmatrix_banks(layout, shape=None, dtype_bytes: int = 2) -> LdmatrixBanks:
    """The wavefronts of ldmatrix reading each 8-row, 16-byte-wide block of a 2-D tile."""
    shape = _shape(layout, shape)
    if len(shape) != 2:
        raise ValueError(f"ldmatrix banks need a 2-D tile, got shape {shape}")
    rows, cols = shape
    per_row = ROW_BYTES // dtype_bytes
    passes = {}
    for r0, c0 in itertools.product(range(0, rows - 7, 8), range(0, cols - per_row + 1, per_row)):
        words: dict[int, set] = {}
        for r, c in itertools.product(range(r0, r0 + 8), range(c0, c0 + per_row)):
            word = layout.apply(r, c, shape=shape)["m"] * dtype_bytes // 4
            words.setdefault(word % BANKS, set()).add(word)
        passes[(r0, c0)] = max(len(w) for w in words.values())
    return LdmatrixBanks(passes)


def summary(layout, shape=None, dtype_bytes: int = 2) -> str:
    """One line for a 2-byte memory tile (empty when ldmatrix cannot read it)."""
    shape = _shape(layout, shape)
    if dtype_bytes != 2 or len(shape) != 2 or shape[0] < 8 or shape[1] * 2 < ROW_BYTES:
        return ""
    return str(ldmatrix_banks(layout, shape, dtype_bytes))


def draw_banks(layout, shape=None, dtype_bytes: int = 2, *, title: str | None = None):
    """A Figure: each element coloured and labelled by its bank, each 8x8 ldmatrix block
    outlined and marked with its wavefronts."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    shape = _shape(layout, shape)
    banks = element_banks(layout, shape, dtype_bytes)
    rows, cols = shape if len(shape) == 2 else (1, len(banks))
    fig = Figure(figsize=(max(4.0, cols * 0.32), max(2.0, rows * 0.32 + 0.8)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    cmap = _palette()
    for coord, bank in banks.items():
        r, c = coord if len(coord) == 2 else (0, coord[0])
        ax.add_patch(Rectangle((c, r), 1, 1, facecolor=cmap[bank % len(cmap)], edgecolor="white"))
        ax.text(c + 0.5, r + 0.5, str(bank), ha="center", va="center", fontsize=6)
    heading = title or repr(layout)
    if len(shape) == 2 and dtype_bytes == 2 and rows >= 8:
        result = ldmatrix_banks(layout, shape, dtype_bytes)
        per_row = ROW_BYTES // dtype_bytes
        for (r0, c0), n in result.passes.items():
            ax.add_patch(
                Rectangle((c0, r0), per_row, 8, fill=False, edgecolor="black", linewidth=1.2)
            )
            if n > 1:
                ax.text(c0 + 0.2, r0 + 0.9, f"{n}x", fontsize=7, color="#b00020", weight="bold")
        heading += "\n" + str(result)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(heading, fontsize=8)
    return fig


def _palette() -> list[str]:
    """32 distinguishable colours, one per bank (8 hues x 4 lightnesses)."""
    hues = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"]
    out = []
    for shade in (1.0, 0.8, 0.6, 0.45):
        for h in hues:
            rgb = [int(h[i : i + 2], 16) for i in (1, 3, 5)]
            mixed = [int(255 - (255 - v) * shade) for v in rgb]
            out.append("#" + "".join(f"{v:02x}" for v in mixed))
    return out
