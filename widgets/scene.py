"""A small scene of rectangles, lines and texts in SVG pixels, drawn as SVG (with hover
titles) or as a matplotlib Figure (PNG): for pictures that are not grids of cells (a
pipeline's timeline), so that their two forms agree as the fragment pictures' do."""

from __future__ import annotations

import html
import io
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Scene", "Box", "Text", "Line"]


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float
    fill: str
    stroke: str = "none"
    width: float = 1.0
    title: str = ""
    cls: str = ""


@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    size: float = 11
    anchor: str = "start"
    color: str = "#000"
    bold: bool = False


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    color: str = "#222"
    width: float = 1.0


@dataclass
class Scene:
    width: float
    height: float
    items: list = field(default_factory=list)

    def add(self, *items) -> None:
        self.items.extend(items)

    def svg(self, path=None, *, css: str = "", cls: str = "tirx-scene") -> str:
        e = html.escape
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" width="{self.width:.0f}" '
            f'height="{self.height:.0f}" viewBox="0 0 {self.width:.0f} {self.height:.0f}" '
            'font-family="DejaVu Sans Mono, monospace" font-size="11">',
            f'<rect width="{self.width:.0f}" height="{self.height:.0f}" fill="#ffffff"/>',
        ]
        if css:
            out.append(f"<style>{css}</style>")
        for it in self.items:
            if isinstance(it, Box):
                title = f"<title>{e(it.title)}</title>" if it.title else ""
                klass = f' class="{it.cls}"' if it.cls else ""
                out.append(
                    f'<rect{klass} x="{it.x:.1f}" y="{it.y:.1f}" width="{it.w:.1f}" '
                    f'height="{it.h:.1f}" fill="{it.fill}" stroke="{it.stroke}" '
                    f'stroke-width="{it.width}">{title}</rect>'
                )
            elif isinstance(it, Text):
                weight = ' font-weight="bold"' if it.bold else ""
                out.append(
                    f'<text x="{it.x:.1f}" y="{it.y:.1f}" font-size="{it.size:g}" '
                    f'text-anchor="{it.anchor}" fill="{it.color}"{weight} '
                    f'pointer-events="none">{e(it.text)}</text>'
                )
            else:
                out.append(
                    f'<line x1="{it.x1:.1f}" y1="{it.y1:.1f}" x2="{it.x2:.1f}" y2="{it.y2:.1f}" '
                    f'stroke="{it.color}" stroke-width="{it.width}"/>'
                )
        out.append("</svg>")
        text = "".join(out)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def figure(self):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Rectangle

        fig = Figure(figsize=(self.width / 100, self.height / 100), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, self.width)
        ax.set_ylim(self.height, 0)
        ax.axis("off")
        pt = 72 / 100
        align = {"start": "left", "middle": "center", "end": "right"}
        for it in self.items:
            if isinstance(it, Box):
                ax.add_patch(Rectangle((it.x, it.y), it.w, it.h, facecolor=it.fill,
                                       edgecolor=None if it.stroke == "none" else it.stroke,
                                       linewidth=it.width * pt))  # fmt: skip
            elif isinstance(it, Text):
                ax.text(it.x, it.y, it.text, fontsize=it.size * pt, family="monospace",
                        ha=align[it.anchor], color=it.color,
                        weight="bold" if it.bold else "normal")  # fmt: skip
            else:
                ax.plot([it.x1, it.x2], [it.y1, it.y2], color=it.color, lw=it.width * pt)
        return fig

    def png(self, path=None, *, dpi: int = 150) -> bytes:
        if dpi < 150:
            from tirx.errors import TirxError

            raise TirxError(f"dpi={dpi} draws the text too small to read", hint="use dpi=150")
        buf = io.BytesIO()
        self.figure().savefig(buf, format="png", dpi=dpi)
        data = buf.getvalue()
        if path is not None:
            Path(path).write_bytes(data)
        return data
