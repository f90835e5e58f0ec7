"""What any install of tirx offers, editable or from a wheel: every subpackage imports, the
``tvm_tirx`` alias is tirx's own, the C launcher's source is shipped with the package. .ci/run
runs this file (with test_cli.py and test_demo.py) against a wheel installed into a fresh venv,
from a folder outside the checkout."""

from __future__ import annotations

import importlib
import importlib.resources
import pkgutil

import tirx


def test_every_subpackage_of_tirx_imports():
    found = [m.name for m in pkgutil.walk_packages(tirx.__path__, "tirx.") if m.ispkg]
    for name in ("tirx.isa", "tirx.sim", "tirx.backend.cuda", "tirx.examples"):
        assert name in found
    for name in found:
        importlib.import_module(name)


def test_the_tvm_tirx_alias_is_tirx():
    import tvm_tirx
    from tvm_tirx.script import tirx as T

    assert T is tirx.T
    assert tvm_tirx.compile is tirx.compile


def test_the_widgets_package_is_shipped():
    import widgets

    assert callable(widgets.show_layout)
    grid = importlib.resources.files("widgets") / "cellgrid.js"  # the grid's front end
    assert grid.is_file() and "export default" in grid.read_text()


def test_the_launcher_source_is_shipped_with_the_package():
    source = importlib.resources.files("tirx.backend.cuda") / "_launch.c"
    assert source.is_file() and "PyInit__launch" in source.read_text()
