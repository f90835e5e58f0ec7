"""Where every piece of a fragment picture goes, computed once for the SVG, the PNG and the
widget's pages alike, so a picture reads at 100 % in a notebook column.

A picture is never shrunk to fit: its cells keep their size (11 px monospace labels) and a
fragment wider than :data:`WIDTH` is cut into *bands* of whole blocks of columns stacked one
under the other, each with its own column numbers and row labels (it *wraps*). When the
bands of a fragment would stack taller than :data:`MAX_ROWS` rows, they are dealt into
*pages* instead: a picture shows one page and says which (``page=`` picks another; the
widget has a selector), the pattern of a wgmma accumulator's 256 columns, say, in pages
of 8 columns.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace

from .fragment import Fragment, FragmentKind

__all__ = [
    "WIDTH", "MAX_ROWS", "Band", "Geometry", "geometry", "legend_lines", "page_columns", "columns",
]  # fmt: skip

WIDTH = 880  # px a picture may take: a notebook 1,000 px wide less its prompts and margins
MAX_ROWS = 64  # rows of cells a page stacks before the next band goes to another page
CHAR = 6.6  # px per character of 11 px monospace
KEY_ROW = 24  # px of a colour key: a row of swatches


def page_columns(cols: int, cell: float, left: float, block: int = 0, width: float = WIDTH) -> int:
    """How many columns of ``cell`` px (after ``left`` px of labels) fit ``width``: all of
    them when they fit, else a whole number of ``block`` columns (or of 8) where possible."""
    fit = max(int((width - left) // cell), 1)
    if fit >= cols:
        return cols
    for unit in (block, 8, 4):
        if unit and fit >= unit:
            return fit // unit * unit
    return fit


def legend_lines(sentence: str, width: int) -> list[str]:
    """``sentence`` in lines of at most ``width`` characters, broken between its ``;``
    phrases where possible and never inside a word."""
    lines: list[str] = []
    for phrase in sentence.split("; "):
        if lines and len(lines[-1]) + 2 + len(phrase) <= width:
            lines[-1] += "; " + phrase
        else:
            if lines:
                lines[-1] += ";"
            lines.extend(textwrap.wrap(phrase, max(width, 20), break_long_words=False) or [""])
    return lines


@dataclass(frozen=True)
class Band:
    """Columns ``cols`` of the fragment, drawn with their first cell row at ``top``."""

    cols: range
    top: float


@dataclass(frozen=True)
class Geometry:
    cw: float
    ch: float
    left: float
    top: float
    width: float
    height: float
    title: tuple[str, ...]
    legend: tuple[str, ...]
    char: float = CHAR
    bands: tuple[Band, ...] = ()
    page: int = 0
    pages: int = 1
    head: float = 28  # px above a band's cells: its block names and column numbers
    key: float = 0  # px of the colour key under the cells (a bank view's 32 banks)

    def band_of(self, col: int) -> Band | None:
        for band in self.bands:
            if col in band.cols:
                return band
        return None

    def xy(self, index: int, cols: int) -> tuple[float, float] | None:
        """The top-left corner of cell ``index``; None when it is on another page."""
        r, c = divmod(index, cols)
        band = self.band_of(c)
        if band is None:
            return None
        return self.left + (c - band.cols.start) * self.cw, band.top + r * self.ch

    @property
    def shown(self) -> range:
        """The columns this page shows."""
        return range(self.bands[0].cols.start, self.bands[-1].cols.stop)


def split(frag: Fragment, cw: float, left: float, width: float = WIDTH) -> list[range]:
    """The fragment's columns in bands that fit ``width`` (whole blocks where possible)."""
    block = frag.block_cols if frag.block_cols < frag.cols else 0
    n = page_columns(frag.cols, cw, left + 8, block, width)
    return [range(c, min(c + n, frag.cols)) for c in range(0, frag.cols, n)]


def paginate(bands: list[range], rows: int, max_rows: int = MAX_ROWS) -> list[list[range]]:
    """Bands dealt into pages of at most ``max_rows`` rows (at least one band a page)."""
    per_page = max(max_rows // max(rows, 1), 1)
    return [bands[i : i + per_page] for i in range(0, len(bands), per_page)]


def geometry(frag: Fragment, cell_looks, note: str = "", page: int = 0,
             width: float = WIDTH, max_rows: int = MAX_ROWS) -> Geometry:  # fmt: skip
    """The picture's geometry, at most ``width`` px wide (page ``page`` of a fragment whose
    bands would stack taller than ``max_rows``)."""
    longest = max((len(s.label) + s.marked for s in cell_looks), default=3)
    cw, ch = max(28.0, CHAR * longest + 10), 20.0
    down, across = frag.block_labels
    names = max((len(d) for d in down), default=0)  # block names left of the row numbers
    left = 22 + CHAR * len(str(frag.rows - 1)) + (CHAR * names + 8 if names else 0) + 8
    pages = paginate(split(frag, cw, left, width), frag.rows, max_rows)
    page = min(max(int(page), 0), len(pages) - 1)
    shown = pages[page]
    grid_w = cw * max(len(b) for b in shown)
    # a narrow grid still leaves room for its title's longest word and legend lines of 40
    # characters (12 px bold title text is about 7.4 px a character, 10 px legend text 6)
    longest_word = max((len(w) for w in frag.title.split()), default=0)
    inner = max(left + grid_w, 7.4 * longest_word + 4, 6.0 * 40)
    per_line = max(int(inner / 6.0), 40)
    per_title = max(int((inner - 4) / 7.4), 20)
    title = tuple(textwrap.wrap(frag.title, per_title, break_long_words=False)) or ("",)
    page_note = ""
    if len(pages) > 1:
        first, last = shown[0].start, shown[-1].stop - 1
        page_note = (
            f"page {page + 1} of {len(pages)}: columns {first}–{last} of {frag.cols} "
            "(page= picks another)"
        )
    notes = "; ".join(n for n in (note, page_note) if n)
    legend = legend_lines(frag.legend() + (f"; {notes}" if notes else ""), per_line)
    head = (14 if across else 0) + 14
    top = 8 + 15 * len(title) + 16 + head
    bands, y = [], top
    for cols in shown:
        bands.append(Band(cols, y))
        y += ch * frag.rows + 12 + head
    bottom = y - 12 - head
    key = KEY_ROW if frag.kind is FragmentKind.MEMORY or frag.key else 0
    swatches = len(frag.key) or 32
    height = bottom + 10 + key + 13 * (len(legend) + 1)
    width = max(
        inner + 8, 6 + 6 * max(len(frag.key_name), 4) + 10 + 23 * swatches + 6 if key else 0
    )
    return Geometry(cw, ch, left, top, width, height, title, tuple(legend), CHAR,
                    tuple(bands), page, len(pages), head, key)  # fmt: skip


def page_count(frag: Fragment, cell_looks, width: float = WIDTH, max_rows=MAX_ROWS) -> int:
    """How many pages the picture of ``frag`` has."""
    return geometry(frag, cell_looks, width=width, max_rows=max_rows).pages


def block_edges(frag: Fragment, cols: range) -> tuple[list[int], list[int]]:
    """The rows and the columns (within ``cols``) before which a thick block border goes."""
    rows = list(range(frag.block_rows, frag.rows, frag.block_rows))
    bc = frag.block_cols
    edges = [c for c in cols if c != cols.start and c % bc == 0] if bc < frag.cols else []
    return rows, edges


def columns(frag: Fragment, cols: range) -> Fragment:
    """The fragment's columns ``cols`` only (a page of a wide picture), blocks kept."""
    order = tuple(frag.at(r, c) for r in range(frag.rows) for c in cols)
    bc = frag.block_cols
    across = frag.block_labels[1]
    if bc < frag.cols and across:
        across = tuple(across[b] for b in range(cols.start // bc, (cols.stop - 1) // bc + 1))
    block = (frag.block[0], bc if bc < frag.cols else 0)
    return replace(frag, cols=len(cols), elements=order, block=block,
                   block_labels=(frag.block_labels[0], across))  # fmt: skip
