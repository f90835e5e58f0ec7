"""Compatibility names so code written for TIRx (``tvm_tirx``) runs unchanged on tirx.

TIRx code imports ``tvm_tirx.script`` (``tirx as T``), ``tvm_tirx.tirx.layout``,
``tvm_tirx.tirx`` and ``tvm_tirx.backend.cuda.axis``. Those submodules are built here and
registered in :data:`sys.modules`, so the import system finds them without searching for files
(one module to load instead of seven).

Two compile entry points exist, as in the two TIRx spellings: ``tvm_tirx.compile`` (the seed
guide's) is :func:`tirx.compile` itself; ``tvm_tirx.tirx.compile`` (the released package's)
also takes its target form, a dict ``{"kind": "cuda", "arch": "sm_90"}``.
"""

import sys
import types

import tirx.layout as _layout
from tirx import compile  # noqa: A004 - the seed guide's tvm_tirx.compile is tirx.compile
from tirx.errors import TirxError as _TirxError
from tirx.script.namespace import T as _T

_TARGET_KEYS = ("kind", "arch")


def _target_of(target):
    """tirx's target for a TIRx-style one: a dict ``{"kind": "cuda", "arch": "sm_90"}`` (or
    ``{"kind": "sim"}``) becomes ``"cuda -arch=sm_90"``; anything else is passed on."""
    if not isinstance(target, dict):
        return target
    unknown = sorted(str(k) for k in target if k not in _TARGET_KEYS)
    kind = target.get("kind")
    if unknown or kind not in ("cuda", "sim"):
        what = f"unknown keys {unknown}" if unknown else f"kind {kind!r}"
        raise _TirxError(
            f"target {target!r}: {what}",
            hint='write {"kind": "cuda", "arch": "sm_90"} (arch optional), or {"kind": "sim"}',
        )
    arch = target.get("arch")
    if arch is None:
        return kind
    if kind == "sim" or not isinstance(arch, str):
        raise _TirxError(
            f"target {target!r}: arch must be a string such as 'sm_90' for kind 'cuda'",
            hint='write {"kind": "cuda", "arch": "sm_90"}',
        )
    return f"cuda -arch={arch}"


def _compile(func, target=None):
    """``tvm_tirx.tirx.compile(f, target={"kind": "cuda", "arch": "sm_90"})``: :func:`tirx.compile`
    with TIRx's dict target form accepted too."""
    return compile(func, target=_target_of(target))


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
    compile=_compile,
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
