"""The tirx notebook layer: the ``%%tirx`` magic and fragment-layout views.

Uses only tirx's public names. Loaded by ``%load_ext tirx``. The views::

    from widgets import show_layout, show_instruction, show_pair, show_trace, check_layout

    show_layout(layout, shape=(16, 8))      # grid coloured by lane, cells "lane:slot"
    show_instruction("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "D")
    show_pair(a_load_layout, a_mma_layout, left_shape=(4, 8, 4), right_shape=(1, 1, 16, 8))
    show_trace(exe(a, b, out, trace=True))  # simulator registers over the fragment grids
    check_layout(instr, "A", layout)        # probe the machine, mark disagreements
    show_fragment(instr, "A")               # element-level, labelled T5:a2 as the PTX ISA draws
    show_fragment(layout, shape=(2, 2, 16, 8))  # repeats tiled as blocks; view="threads"/"banks"
    link(view_a, view_b)                    # a click in one lights the same element in the other
                                            # (views one cell displays together link themselves)
    show_fragment(wgmma, "D")               # a warpgroup's accumulator, T37:d6, pages of columns
    show_fragment(wgmma, "A", swizzle="128B")   # the shared tile as core matrices, LBO/SBO
    show_tma_box((256, 128), (64, 64), (64, 0)) # a TMA box and where it lands (swizzled)
    show_pipeline(exe(..., trace=True))     # per warp: copies, arrivals, waits, stalls, faults

Each returns a view: ``str(view)`` is a text table, ``view._repr_html_()`` an SVG picture,
``view.png()`` a PNG, ``view.figure()`` a matplotlib Figure and ``view.widget`` the
interactive ipywidgets form. Displayed, a view is a static output that reads anywhere (an
untrusted notebook, GitHub, nbviewer) and its live widget after it (:mod:`widgets.faces`).
Fragment views also write files in one call: ``.svg(path)``, ``.png(path, dpi=200)``,
``.tikz(path)``, ``.save(path)``. Names load lazily so ``%load_ext tirx`` stays quick.

Imported inside IPython (and by ``%load_ext tirx``), the package registers a handler that
shows a tirx error with tirx's own frames left out and draws a ``ContractError``'s expected
fragment beside the offending layout under the error (:mod:`widgets.errorview`).
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
    "show_fragment",
    "FragmentView",
    "link",
    "contract_picture",
    "show_pipeline",
    "PipelineView",
    "show_tma_box",
    "mismatch",
]

_HOME = {
    "show_layout": "views",
    "show_instruction": "show",
    "LayoutView": "views",
    "InstructionView": "show",
    "show_pair": "pair",
    "PairView": "pair",
    "show_trace": "trace",
    "run_instruction": "trace",
    "TraceView": "trace",
    "check_layout": "check",
    "CheckView": "check",
    "show_fragment": "show",
    "FragmentView": "fragview",
    "link": "linking",
    "contract_picture": "errorview",
    "show_pipeline": "pipeline_draw",
    "PipelineView": "pipeline_draw",
    "show_tma_box": "tma",
    "mismatch": "mismatch_map",  # not "mismatch": the submodule would shadow the function
}


def __getattr__(name: str):
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)


def _install_error_pictures() -> None:
    """Inside IPython: show tirx errors from the user's side, ContractErrors with their
    picture (:mod:`widgets.errorview`, loaded when one happens)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return
    from tirx.errors import TirxError

    from .cellerror import CellError

    def handler(shell, etype, value, tb, tb_offset=None):
        return importlib.import_module(f"{__name__}.errorview")._handler(
            shell, etype, value, tb, tb_offset
        )

    shell.set_custom_exc((TirxError, CellError), handler)


_install_error_pictures()
