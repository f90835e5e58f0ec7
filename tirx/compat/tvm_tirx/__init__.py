"""Compatibility names so code written for TIRx (``tvm_tirx``) runs unchanged on tirx."""

from tirx import compile  # noqa: F401

from . import backend, script, tirx  # noqa: F401
