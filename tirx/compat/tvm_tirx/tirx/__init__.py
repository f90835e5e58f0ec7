"""``tvm_tirx.tirx``: the layout names live in ``tvm_tirx.tirx.layout``."""

from tirx.layout import ComposeLayout, Iter, R, S, TileLayout  # noqa: F401

from . import layout  # noqa: F401
