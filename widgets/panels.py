"""Pictures made of several fragment pictures side by side (a wgmma operand's tile and the
shared memory it sits in, a TMA box over its tensor and where it lands), with the faces of
every view: text, SVG (hover; a click on an element outlines the same element in every
panel), PNG, TikZ, files, and a widget whose panels answer each other's clicks.

Panels are drawn at their natural size and wrap below each other in a narrow output; each
panel's own picture wraps into bands (:mod:`widgets.geometry`).
"""

from __future__ import annotations

import html
import io
import itertools
import re
from pathlib import Path

from tirx.errors import TirxError

from . import picture
from .fragview import FragmentView
from .linking import link

__all__ = ["Panels"]

_ids = itertools.count()


class Panels:
    """``views`` (FragmentViews) side by side under ``title``, with ``notes`` (lines of text,
    a descriptor's fields, say) under them."""

    def __init__(self, title: str, views: list[FragmentView], notes=(), *, linked=True):
        self.title = title
        self.views = list(views)
        self.notes = tuple(notes)
        self.linked = linked
        self._widget = None

    # ---------------------------------------------------------------- static faces

    def __str__(self) -> str:
        parts = [self.title, *(str(v) for v in self.views), *self.notes]
        return "\n\n".join(parts[:1] + parts[1 : 1 + len(self.views)]) + (
            "\n" + "\n".join(self.notes) if self.notes else ""
        )

    def __repr__(self) -> str:
        return str(self)

    def _notes_html(self) -> str:
        return "".join(f"<div>{html.escape(n)}</div>" for n in self.notes)

    def _repr_html_(self) -> str:
        scope = f"tirx-panels{next(_ids)}"
        coords = {e.coord for v in self.views for e in v.fragment.elements}
        link_css = picture.linked_style(scope, coords=sorted(coords)) if self.linked else ""
        sides = "".join(
            f'<div style="flex:0 0 auto;max-width:100%">{v.svg()}</div>' for v in self.views
        )
        return (
            f'<div class="tirx-panels {scope}" style="background:#fff;color:#111;padding:6px">'
            f"{link_css}<div><b>{html.escape(self.title)}</b></div>"
            '<div style="display:flex;gap:16px;align-items:flex-start;flex-wrap:wrap">'
            f"{sides}</div>{self._notes_html()}</div>"
        )

    def svg(self, path=None, *, hover: bool = True) -> str:
        """One SVG holding the panels side by side (also written to ``path``); the title
        wraps to their width."""
        parts, x, height = [], 0.0, 0.0
        sides = [v.svg(hover=hover) for v in self.views]
        width = sum(_svg_size(one)[0] for one in sides) + 16 * (len(sides) - 1)
        title = _wrapped(self.title, width / 7.3)  # 12 px monospace: about 7.2 px a character
        top = 6 + 16 * len(title)
        for one in sides:
            w, h = _svg_size(one)
            parts.append(one.replace("<svg ", f'<svg x="{x:.0f}" y="{top}" ', 1))
            x, height = x + w + 16, max(height, h)
        bold = ' font-weight="bold"'
        texts = [f'<text x="6" y="{16 * (i + 1)}" font-size="12"{bold}>{html.escape(t)}</text>'
                 for i, t in enumerate(title)]  # fmt: skip
        texts += [f'<text x="6" y="{top + height + 14 * (i + 1):.0f}" font-size="10">'
                  f"{html.escape(t)}</text>" for i, t in enumerate(self.notes)]  # fmt: skip
        total_h = top + height + 14 * len(self.notes) + 6
        text = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{x - 16:.0f}" height="{total_h:.0f}"'
            f' font-family="DejaVu Sans Mono, monospace"><rect width="100%" height="100%" '
            f'fill="#ffffff"/>{"".join(texts)}{"".join(parts)}</svg>'
        )
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def figure(self):
        """The panels side by side as one matplotlib Figure (Agg); the title wraps to their
        width."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.image import imread

        images = [imread(io.BytesIO(v.png(dpi=150)), format="png") for v in self.views]
        gap = 24
        width = sum(im.shape[1] for im in images) + gap * (len(images) - 1)
        title = _wrapped(self.title, width / 11.5)  # 9 pt monospace at 150 dpi: 11.25 px
        top = 12 + 20 * len(title)
        height = max(im.shape[0] for im in images) + top + 30 * len(self.notes) + 10
        fig = Figure(figsize=(width / 150, height / 150), dpi=150)
        FigureCanvasAgg(fig)
        fig.patch.set_facecolor("white")
        x = 0
        for im in images:
            fig.figimage(im, xo=x, yo=height - top - im.shape[0])
            x += im.shape[1] + gap
        fig.text(0.005, 1 - 6 / height, "\n".join(title), fontsize=9, family="monospace",
                 weight="bold", va="top", linespacing=1.5)  # fmt: skip
        for i, note in enumerate(self.notes):
            fig.text(0.005, (30 * (len(self.notes) - i) - 14) / height, note, fontsize=7,
                     family="monospace", color="#333")  # fmt: skip
        return fig

    def png(self, path=None, *, dpi: int = 150) -> bytes:
        """PNG bytes (each panel at 150 dpi; also written to ``path``)."""
        if dpi < 150:
            raise TirxError(f"dpi={dpi} draws cell text too small to read", hint="use dpi=150")
        buf = io.BytesIO()
        self.figure().savefig(buf, format="png", dpi=150)
        data = buf.getvalue()
        if path is not None:
            Path(path).write_bytes(data)
        return data

    def tikz(self, path=None, *, standalone: bool = False) -> str:
        """TikZ source: the panels' pictures side by side, the notes under them."""
        bodies = [v.tikz() for v in self.views]
        notes = "".join(f"\\par\\noindent\\texttt{{{_tex(n)}}}\n" for n in self.notes)
        text = "\n\\hspace{1em}\n".join(bodies) + notes
        if standalone:
            text = (
                "\\documentclass[tikz,border=4pt,varwidth=\\maxdimen]{standalone}\n"
                "\\usepackage{xcolor}\n\\begin{document}\n"
                f"\\noindent\\textbf{{{_tex(self.title)}}}\\par\n{text}\\end{{document}}\n"
            )
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def save(self, path):
        """Write the picture; the suffix (.svg, .png, .tex) picks the form."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".svg":
            self.svg(path, hover=False)
        elif suffix == ".png":
            self.png(path)
        elif suffix in (".tex", ".tikz"):
            self.tikz(path, standalone=True)
        else:
            raise TirxError(
                f"cannot tell the picture format of {str(path)!r}",
                hint="name the file .svg, .png or .tex",
            )
        return path

    # ---------------------------------------------------------------- the widget

    @property
    def widget(self):
        if self._widget is None:
            import ipywidgets as w

            if self.linked:
                link(*self.views)
            title = w.HTML(f"<b>{html.escape(self.title)}</b>")
            sides = w.HBox([v.widget for v in self.views],
                           layout=w.Layout(flex_flow="row wrap", align_items="flex-start",
                                           grid_gap="16px"))  # fmt: skip
            notes = w.HTML(self._notes_html())
            notes.add_class("tirx-notes")
            self._widget = w.VBox([title, sides, notes])
        return self._widget

    def still(self) -> str:
        """The panels as coloured text tables (what an untrusted notebook shows)."""
        return "".join(v.still() for v in self.views) + self._notes_html()

    def _repr_mimebundle_(self, include=None, exclude=None):
        from . import faces

        return faces.bundle(self, include, exclude)

    def _ipython_display_(self):
        from . import faces

        faces.show(self)


def _tex(text: str) -> str:
    from .tikz import tex

    return tex(text)


def _svg_size(svg: str) -> tuple[float, float]:
    """(width, height) of an SVG document's root element."""
    w = float(re.search(r'width="([\d.]+)"', svg).group(1))
    return w, float(re.search(r'height="([\d.]+)"', svg).group(1))


def _wrapped(text: str, per_line: float) -> list[str]:
    """``text`` in lines of at most ``per_line`` characters (at least 24), broken at spaces."""
    import textwrap

    return textwrap.wrap(text, max(int(per_line), 24)) or [""]
