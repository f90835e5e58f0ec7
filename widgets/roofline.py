"""The roofline of an Nsight Compute profile: where the kernel sits between the GPU's memory
bandwidth and its arithmetic peaks.

A kernel that does ``F`` floating-point operations and moves ``B`` bytes of DRAM traffic in
``t`` seconds sits at arithmetic intensity ``I = F / B`` and rate ``F / t``. The memory roof
is ``I * bandwidth``, each compute roof a horizontal line at its peak; the kernel cannot rise
above the lower of the two at its intensity. Left of the ridge (``peak / bandwidth``) it is
bound by memory, right of it by arithmetic.

:data:`H200` holds NVIDIA's datasheet figures for the H200 SXM, the defaults: 4.8 TB/s of
HBM3e, dense tensor-core peaks (the datasheet's headline figures assume 2:4 sparsity, twice
these) and the CUDA cores' FP32. Pass ``peaks=`` (a :class:`Peaks`, or
``dataclasses.replace(H200, ...)``) for another GPU or for measured ceilings; the simulator
cannot supply any of this, so the roofline needs a profile from ``exe.profile`` on a GPU.

``roofline_figure`` draws (matplotlib, pure: tests call it on Agg), ``roofline_text`` says the
same in words, ``roofline_html`` embeds the figure as a PNG with the text beside it.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass

__all__ = ["Peaks", "H200", "roofline_figure", "roofline_text", "roofline_html", "place"]


@dataclass(frozen=True)
class Peaks:
    """A GPU's ceilings: DRAM bandwidth (bytes/s) and compute peaks (label, FLOP/s)."""

    name: str
    bandwidth: float
    compute: tuple[tuple[str, float], ...]


#: NVIDIA H200 SXM, from its datasheet (dense: the sparse figures halved).
H200 = Peaks(
    "H200 SXM, datasheet",
    4.8e12,
    (
        ("FP16/BF16 tensor", 989.5e12),
        ("TF32 tensor", 494.7e12),
        ("FP32", 67e12),
    ),
)


@dataclass(frozen=True)
class Place:
    """Where a profile sits: intensity (FLOP/B), rate (FLOP/s), the roof above it, the
    fraction of that roof reached, and what binds it ("memory" or the compute peak's label)."""

    intensity: float
    rate: float
    roof: float
    fraction: float
    bound: str
    ridge: float


def place(profile, peaks: Peaks = H200) -> Place | None:
    """The roofline place of ``profile`` (an ``exe.profile`` result on a GPU), measured
    against the first (highest) compute peak of ``peaks``; None without FLOPs or DRAM
    bytes."""
    intensity, rate = profile.intensity, profile.flop_rate
    if intensity is None or rate is None:
        return None
    label, top = peaks.compute[0]
    ridge = top / peaks.bandwidth
    memory_roof = intensity * peaks.bandwidth
    roof, bound = (memory_roof, "memory") if memory_roof < top else (top, label)
    return Place(intensity, rate, roof, rate / roof, bound, ridge)


def roofline_text(profile, peaks: Peaks = H200) -> str:
    """The roofline in words."""
    p = place(profile, peaks)
    if p is None:
        return (f"roofline: '{profile.kernel}' has no FLOP count or no DRAM bytes "
                "(pass flops= to exe.profile)")  # fmt: skip
    side = "memory-bound" if p.bound == "memory" else f"compute-bound ({p.bound})"
    return (
        f"roofline ({peaks.name}): '{profile.kernel}' at {p.intensity:.3g} FLOP/B, "
        f"{p.rate / 1e12:.3g} TFLOP/s = {100 * p.fraction:.1f} % of the roof above it; "
        f"{side}, the ridge at {p.ridge:.3g} FLOP/B"
    )


def roofline_figure(profiles, peaks: Peaks = H200, ax=None):
    """A log-log roofline with the kernel(s) of ``profiles`` (one profile or a list) as
    points; returns the matplotlib Figure (Agg canvas, no pyplot state)."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    profiles = profiles if isinstance(profiles, (list, tuple)) else [profiles]
    places = [(pr, place(pr, peaks)) for pr in profiles]
    if ax is None:
        fig = Figure(figsize=(6.4, 4.2), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    top = peaks.compute[0][1]
    xs = [pl.intensity for _, pl in places if pl is not None]
    lo = min([0.1, *xs]) / 2
    hi = max([10 * top / peaks.bandwidth, *xs]) * 2
    x = np.geomspace(lo, hi, 200)
    ax.loglog(x, np.minimum(x * peaks.bandwidth, top), color="#1f4e79", lw=2,
              label=f"DRAM {peaks.bandwidth / 1e12:.3g} TB/s")  # fmt: skip
    for label, peak in peaks.compute:
        ax.loglog(x, np.minimum(x * peaks.bandwidth, peak), color="#7f7f7f", lw=1, ls="--")
        ax.text(hi, peak, f" {label} {peak / 1e12:.4g} TFLOP/s", va="center", fontsize=8)
    for pr, pl in places:
        if pl is not None:
            ax.loglog([pl.intensity], [pl.rate], "o", ms=8, color="#d84315",
                      label=f"{pr.kernel}: {pl.rate / 1e12:.3g} TFLOP/s")  # fmt: skip
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(f"roofline ({peaks.name})", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def roofline_html(profile, peaks: Peaks = H200) -> str:
    """The figure as an embedded PNG, with :func:`roofline_text` under it."""
    text = html.escape(roofline_text(profile, peaks))
    if place(profile, peaks) is None:
        return f'<div class="tirx-roofline">{text}</div>'
    buf = io.BytesIO()
    roofline_figure(profile, peaks).savefig(buf, format="png", dpi=100)
    data = base64.b64encode(buf.getvalue()).decode()
    return (f'<div class="tirx-roofline"><img alt="roofline" src="data:image/png;base64,{data}">'
            f"<div>{text}</div></div>")  # fmt: skip
