"""``from tvm_tirx.script import tirx as T`` gives tirx's script namespace."""

from tirx.script.namespace import T as tirx  # noqa: F401
