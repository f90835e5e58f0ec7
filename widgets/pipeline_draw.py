"""The pipeline timeline drawn (:mod:`widgets.pipeline` computes it): a row per warp and per
barrier, a column per step, each event a coloured mark with its glyph (its meaning in the key
under the picture, its detail on hover), stalls and copies in flight as bars behind the marks,
the fault the run stopped at as a red ✗. Steps go in bands of what fits :data:`WIDTH`, bands
in pages (``page=``) as the fragment pictures do, so it reads at 100 %.

:func:`show_pipeline` makes the view: ``str`` (step by step text), SVG, PNG, the Chrome /
Perfetto trace (``view.chrome_trace(path)``) and ``view.save(".svg" | ".png" | ".json")``.
"""

from __future__ import annotations

import html
import textwrap
from pathlib import Path

from tirx.errors import TirxError

from . import args
from .geometry import MAX_ROWS, WIDTH
from .pipeline import KINDS, Timeline, timeline
from .scene import Box, Line, Scene, Text

__all__ = ["PipelineView", "show_pipeline", "draw"]

STEP, ROW, LEFT = 22, 20, 92  # px of a step, of a row; px of the row names
_SPANS = ("stall", "flight")


def bands(t: Timeline, width: float = WIDTH) -> list[list[range]]:
    """The steps in bands that fit ``width``, dealt into pages of at most MAX_ROWS rows."""
    per_band = max(int((width - LEFT - 8) // STEP) // 5 * 5, 5)
    all_bands = [range(s, min(s + per_band, t.steps)) for s in range(0, max(t.steps, 1), per_band)]
    per_page = max(MAX_ROWS // max(len(t.rows), 1), 1)
    return [all_bands[i : i + per_page] for i in range(0, len(all_bands), per_page)]


def draw(t: Timeline, page: int = 0, width: float = WIDTH) -> Scene:
    """Page ``page`` of the timeline as a :class:`~widgets.scene.Scene`."""
    pages = bands(t, width)
    page = min(max(page, 0), len(pages) - 1)
    shown = pages[page]
    per_band = max(len(b) for b in shown)
    w = LEFT + per_band * STEP + 8
    width = max(w, 560)
    kinds = [k for k in KINDS if any(e.kind == k for e in t.events)]
    longest = max((len(KINDS[k][2]) for k in kinds), default=0)
    cols = 2 if width >= 2 * (30 + 5.6 * longest) else 1
    key_rows = -(-len(kinds) // cols)
    band_h = 18 + ROW * len(t.rows) + 12
    notes = ([f"fault: {t.fault}"] if t.fault else []) + (
        [f"page {page + 1} of {len(pages)}: steps {shown[0].start}-{shown[-1].stop - 1} of "
         f"{t.steps} (page= picks another)"] if len(pages) > 1 else [])  # fmt: skip
    notes = [ln for n in notes for ln in textwrap.wrap(n, int((width - 12) / 6.1))]
    h = 30 + band_h * len(shown) + 16 * key_rows + 14 * len(notes) + 12
    sc = Scene(width, h)
    sc.add(Text(6, 18, t.title, 12, bold=True))
    y = 30
    row_of = {r: i for i, r in enumerate(t.rows)}
    for band in shown:
        for s in band:
            if s % 5 == 0:
                sc.add(Text(LEFT + (s - band.start + 0.5) * STEP, y + 12, str(s), 9, "middle",
                            "#555"))  # fmt: skip
        top = y + 18
        for i, row in enumerate(t.rows):
            yy = top + i * ROW
            shade = "#f4f4f4" if i % 2 else "#ffffff"
            sc.add(Box(LEFT, yy, len(band) * STEP, ROW, shade),
                   Text(LEFT - 6, yy + 14, row, 10, "end", "#333"))  # fmt: skip
        marks: dict[tuple[str, int], list] = {}
        for e in t.events:
            end = e.end if e.end is not None else e.step + 1
            lo, hi = max(e.step, band.start), min(end, band.stop)
            if lo >= hi:
                continue
            yy = top + row_of[e.row] * ROW
            if e.kind in _SPANS:  # bars first, behind the marks
                sc.add(Box(LEFT + (lo - band.start) * STEP, yy + 5, (hi - lo) * STEP, ROW - 10,
                           KINDS[e.kind][1], title=e.detail, cls=f"tirx-ev k-{e.kind}"))  # fmt: skip
            else:
                marks.setdefault((e.row, e.step), []).append(e)
        for (row, step), here in marks.items():  # several in one step share its width
            yy, x0, w = top + row_of[row] * ROW, LEFT + (step - band.start) * STEP, STEP / len(here)
            for i, e in enumerate(here):
                glyph, color, _ = KINDS[e.kind]
                stroke = "#000" if e.kind == "fault" else "#ffffff"
                sc.add(Box(x0 + i * w + 0.5, yy + 2, w - 1, ROW - 4, color, stroke,
                           title=f"step {e.step}, {e.row}: {e.detail}", cls=f"tirx-ev k-{e.kind}"),
                       Text(x0 + (i + 0.5) * w, yy + 14, glyph, 10 if len(here) == 1 else 8,
                            "middle", _ink(color), bold=True))  # fmt: skip
        sc.add(Line(LEFT, top, LEFT + len(band) * STEP, top, "#999", 0.8))
        y += band_h
    for i, k in enumerate(kinds):  # the key
        glyph, color, meaning = KINDS[k]
        x, yy = 6 + (i % cols) * (sc.width / cols), y + 16 * (i // cols)
        sc.add(Box(x, yy, 16, 13, color), Text(x + 8, yy + 10, glyph, 9, "middle", _ink(color)),
               Text(x + 22, yy + 10, meaning, 9, color="#333"))  # fmt: skip
    y += 16 * key_rows + 10
    red = len(textwrap.wrap(f"fault: {t.fault}", int((width - 12) / 6.1))) if t.fault else 0
    for i, n in enumerate(notes):
        sc.add(Text(6, y, n, 10, color="#b71c1c" if i < red else "#333"))
        y += 14
    return sc


def _ink(color: str) -> str:
    from .model import text_color

    return text_color(color)


class PipelineView:
    """A timeline's faces: text, SVG (hover a mark for its detail), PNG, Chrome trace."""

    def __init__(self, t: Timeline, page: int = 0):
        self.timeline = t
        self.page = page

    @property
    def pages(self) -> int:
        return len(bands(self.timeline))

    def __str__(self) -> str:
        return self.timeline.text()

    def __repr__(self) -> str:
        return str(self)

    def svg(self, path=None, *, page=None) -> str:
        css = ".tirx-ev:hover{stroke:#000;stroke-width:2}"
        return draw(self.timeline, self.page if page is None else page).svg(
            path, css=css, cls="tirx-pipeline"
        )

    def figure(self, page=None):
        return draw(self.timeline, self.page if page is None else page).figure()

    def png(self, path=None, *, dpi: int = 150, page=None) -> bytes:
        return draw(self.timeline, self.page if page is None else page).png(path, dpi=dpi)

    def chrome_trace(self, path=None) -> dict:
        """The Chrome / Perfetto trace (JSON trace event format); open it in ui.perfetto.dev
        or chrome://tracing."""
        return self.timeline.chrome_trace(path)

    def save(self, path):
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".svg":
            self.svg(path)
        elif suffix == ".png":
            self.png(path)
        elif suffix == ".json":
            self.chrome_trace(path)
        else:
            raise TirxError(f"cannot tell the format of {str(path)!r}",
                            hint="name the file .svg, .png or .json (a Chrome trace)")  # fmt: skip
        return path

    def _repr_html_(self) -> str:
        return f'<div class="tirx-view tirx-pipeline-view">{self.svg()}</div>'

    def still(self) -> str:
        return (
            '<pre class="tirx-still" style="font-size:11px;white-space:pre;overflow-x:auto">'
            f"{html.escape(str(self))}</pre>"
        )

    def _repr_mimebundle_(self, include=None, exclude=None):
        from . import faces

        return faces.static_bundle(self)


def show_pipeline(run, *, block=(0, 0, 0), title=None, page: int = 0) -> PipelineView:
    """The timeline of ``block`` of a traced simulator run: ``run`` is what ``exe(...,
    trace=True)`` returned, or the SimulationError a traced run raised (its records up to
    the fault, the fault on the timeline)."""
    from tirx.errors import SimulationError

    error = None
    if isinstance(run, SimulationError):
        error, run = run, getattr(run, "run", None)
        if run is None:
            raise TirxError(
                "this error carries no trace: the run was not traced",
                hint="run the kernel with exe(..., trace=True) and pass the error it raises",
            ) from None
    if not hasattr(run, "barriers") or not hasattr(run, "copies"):
        raise TirxError(
            f"show_pipeline needs a simulator run's result, not {type(run).__name__}",
            hint="exe = tirx.compile(kernel, target='sim'); show_pipeline(exe(..., trace=True))",
        )
    block = _block(block, run, error)
    title = args.text(title, "title")
    view = PipelineView(timeline(run, block=block, title=title, error=error), page)
    args.page(page, view.pages)
    return view


def _block(block, run, error) -> tuple[int, ...]:
    """``block`` as a block index the run's trace has (a TirxError naming those it has)."""
    if not isinstance(block, (tuple, list)) or len(block) != 3:
        raise args.ArgumentTypeError(f"block must be a block index (x, y, z), got {block!r}",
                                     hint="block=(1, 0, 0) is the second block along x")  # fmt: skip
    block = tuple(args.integer(b, "block", "a block index (x, y, z) of ints") for b in block)
    seen = {tuple(r.block) for recs in (run.traces, run.copies, run.barriers) for r in recs}
    if isinstance(getattr(error, "block", None), (tuple, list)):
        seen.add(tuple(error.block))
    if seen and block not in seen:
        have = sorted(seen, key=lambda b: b[::-1])
        shown = ", ".join(map(str, have)) if len(have) <= 6 else f"{have[0]}..{have[-1]}"
        raise args.ArgumentError(
            f"block {block} recorded nothing in this run: its trace has blocks {shown}",
            hint="pick one of those blocks with block=(x, y, z)",
        )
    return block
