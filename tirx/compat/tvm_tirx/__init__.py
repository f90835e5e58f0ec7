"""Compatibility names so code written for TIRx (``tvm_tirx``) runs unchanged on tirx.

TIRx code imports ``tvm_tirx.script`` (``tirx as T``), ``tvm_tirx.tirx.layout``,
``tvm_tirx.tirx`` and ``tvm_tirx.backend.cuda.axis``. Those submodules are built here and
registered in :data:`sys.modules`, so the import system finds them without searching for files
(one module to load instead of seven).
"""

import sys
import types

import tirx.layout as _layout
from tirx import compile  # noqa: F401
from tirx.script.namespace import T as _T


def _submodule(name: str, doc: str, package: bool = False, **names):
    module = types.ModuleType(f"{__name__}.{name}", doc)
    module.__dict__.update(names)
    if package:
        module.__path__ = []  # a package (with nothing on disk to search)
    sys.modules[module.__name__] = module
    return module


script = _submodule("script", "``from tvm_tirx.script import tirx as T``: tirx's T.", tirx=_T)
_layout_names = {name: getattr(_layout, name) for name in _layout.__all__}
tirx = _submodule(
    "tirx",
    "``tvm_tirx.tirx``: the layout names; ``tvm_tirx.tirx.layout`` is ``tirx.layout``.",
    package=True,
    **{k: _layout_names[k] for k in ("ComposeLayout", "Iter", "R", "S", "TileLayout")},
    layout=_submodule(
        "tirx.layout", "``tvm_tirx.tirx.layout`` is ``tirx.layout``.", **_layout_names,
        __all__=list(_layout.__all__),
    ),
)  # fmt: skip
backend = _submodule(
    "backend",
    "``tvm_tirx.backend``: only the CUDA axes are provided.",
    package=True,
    cuda=_submodule(
        "backend.cuda",
        "``tvm_tirx.backend.cuda``: see ``axis``.",
        package=True,
        axis=_submodule(
            "backend.cuda.axis",
            "``tvm_tirx.backend.cuda.axis``: the thread and memory axes of tirx.",
            Axis=_layout.Axis,
            **{k: v for k, v in _layout_names.items() if isinstance(v, _layout.Axis)},
        ),
    ),
)
