"""The tirx notebook layer: the ``%%tirx`` magic and fragment-layout views.

Uses only tirx's public names. Loaded by ``%load_ext tirx``. The views::

    from widgets import show_layout, show_instruction, show_pair, show_trace, check_layout

    show_layout(layout, shape=(16, 8))      # grid coloured by lane, cells "lane:slot"
    show_instruction("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "D")
    show_pair(a_load_layout, a_mma_layout, left_shape=(4, 8, 4), right_shape=(1, 1, 16, 8))
    show_trace(exe(a, b, out, trace=True))  # simulator registers over the fragment grids
    check_layout(instr, "A", layout)        # probe the machine, mark disagreements

Each returns a view: ``str(view)`` is a text table, ``view._repr_html_()`` an SVG picture,
``view.figure()`` a matplotlib Figure and ``view.widget`` the interactive ipywidgets form.
Names load lazily so ``%load_ext tirx`` stays quick.
"""

from __future__ import annotations

import importlib

__all__ = [
    "show_layout",
    "show_instruction",
    "show_pair",
    "show_trace",
    "check_layout",
    "run_instruction",
    "LayoutView",
    "InstructionView",
    "PairView",
    "TraceView",
    "CheckView",
]

_HOME = {
    "show_layout": "views",
    "show_instruction": "views",
    "LayoutView": "views",
    "InstructionView": "views",
    "show_pair": "pair",
    "PairView": "pair",
    "show_trace": "trace",
    "run_instruction": "trace",
    "TraceView": "trace",
    "check_layout": "check",
    "CheckView": "check",
}


def __getattr__(name: str):
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
