"""The heat column: one number per line of the kernel's Python, from the simulator's profile.

``heat_column(profile, "conflicts")`` reads the metric through the profile's public surface
(``profile.metric(name)``, ``profile.METRICS``: see docs/profiling.md) and gives each line a
value, a cell and a colour. Lines that executed nothing of the metric get an empty cell; the
others a colour from pale yellow (the good end) to deep orange (the bad end: the most
replays, the most sectors, the lowest coalescing), scaled to the kernel's worst line. Text is
black on every colour (contrast 6:1 or more on the deepest), so the column reads the same
in light and dark themes. ``text()`` is the same column as plain text, and ``key_html()`` the
legend.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

__all__ = ["HeatColumn", "heat_column", "heat_color"]

COOL = (0xFF, 0xF3, 0xC4)  # a pale yellow: the good end
HOT = (0xF4, 0x51, 0x1E)  # a deep orange: the bad end (black text on it: 6:1)
WIDTH = 6  # characters of the column


def heat_color(level: float) -> str:
    """The colour of ``level`` in [0, 1] (0: the good end), as ``#rrggbb``."""
    level = min(max(level, 0.0), 1.0)
    r, g, b = (round(c + (h - c) * level) for c, h in zip(COOL, HOT))
    return f"#{r:02x}{g:02x}{b:02x}"


def _short(value: float) -> str:
    if float(value).is_integer():
        v = int(value)
        return f"{v / 1000:.0f}k" if abs(v) >= 100_000 else str(v)
    return f"{value:.1f}"


@dataclass(frozen=True)
class HeatColumn:
    """Metric ``metric`` of each line (``values``), with its title, unit and direction."""

    metric: str
    title: str
    unit: str
    meaning: str
    values: dict  # line -> value
    high_is_bad: bool = True

    def level(self, line: int) -> float | None:
        """How bad line ``line`` is, from 0 (the best of the kernel) to 1 (the worst)."""
        v = self.values.get(line)
        if v is None:
            return None
        if self.high_is_bad:
            top = max(self.values.values(), default=0)
            return v / top if top > 0 else 0.0
        low, high = min(self.values.values()), max(self.values.values())
        return (high - v) / (high - low) if high > low else 0.0

    def label(self, line: int) -> str:
        v = self.values.get(line)
        return "" if v is None or (v == 0 and self.high_is_bad) else _short(v)

    def cell(self, line: int) -> str:
        """The HTML cell of ``line`` (an empty one when it has no value)."""
        text = self.label(line)
        if not text:
            return '<span class="tirx-heat"></span>'
        color = heat_color(self.level(line) or 0.0)
        tip = html.escape(f"{self.title}: {text} {self.unit}", quote=True)
        return (f'<span class="tirx-heat" title="{tip}" style="background:{color};'
                f'color:#000">{html.escape(text)}</span>')  # fmt: skip

    @staticmethod
    def css(uid: str) -> str:
        return (
            f".{uid} .tirx-heat{{display:inline-block;width:{WIDTH}ch;text-align:right;"
            "padding-right:4px;margin-right:6px;font-variant-numeric:tabular-nums}"
        )

    def key_html(self) -> str:
        """The legend: the metric, its unit and the two ends of the scale."""
        worst = (
            max(self.values.values(), default=0)
            if self.high_is_bad
            else min(self.values.values(), default=0)
        )
        good = "0" if self.high_is_bad else "100"
        swatch = ('<span style="display:inline-block;width:4em;height:0.9em;vertical-align:'
                  f'middle;background:linear-gradient(90deg,{heat_color(0)},{heat_color(1)})">'
                  "</span>")  # fmt: skip
        return (
            f'<span class="tirx-heat-key">heat: {html.escape(self.title)} '
            f"({html.escape(self.unit)}) per line — {good} {swatch} {_short(worst)} · "
            f"{html.escape(self.meaning)}</span>"
        )

    def text(self, lines: dict[int, str]) -> str:
        """The column beside the source as text: ``lines`` maps line numbers to their code."""
        head = f"heat: {self.title} ({self.unit}) per line: {self.meaning}"
        rows = [head]
        for n in sorted(lines):
            rows.append(f"{n:>5} {self.label(n):>{WIDTH}} | {lines[n]}".rstrip())
        return "\n".join(rows)


def heat_column(profile, metric: str = "instructions") -> HeatColumn:
    """The column of ``metric`` (a name of ``profile.METRICS``) of a simulator profile."""
    metrics = profile.METRICS
    if metric not in metrics:
        raise ValueError(f"unknown heat metric {metric!r}; choose from {', '.join(metrics)}")
    m = metrics[metric]
    return HeatColumn(metric, m.title, m.unit, m.meaning, profile.metric(metric), m.high_is_bad)
