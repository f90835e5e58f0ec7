"""The ``T`` names of the call families and the function that parses each family's calls,
known without importing the families.

``T.exp``, ``T.cuda.atomic_add`` or ``T.cuda.__shfl_sync`` are names of the ``T`` namespace
from the start, but the module that parses a call of one (``script/intrinsics.py``,
``warp_ops.py``, ``cta_ops.py``) is imported at the first such call, so a kernel that calls
none of them never loads it (nor, through it, the lowering and codegen of its nodes). The name
lists below repeat the modules' own (``intrinsics.FORMS``, ``warp_ops.KEYS``,
``cta_ops.KEYS``); tests/test_lazy_imports.py checks that they agree.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["CallFamily", "FAMILIES", "family_of", "parse_call"]


@dataclass(frozen=True)
class CallFamily:
    """One family of intrinsic calls: its ``T.<name>`` and ``T.cuda.<name>`` names and its
    parser, ``module:function`` in :mod:`tirx.script`, called as ``function(evaluator, key,
    node)`` where ``key`` is ``"<name>"`` or ``"cuda.<name>"`` (and ``name_hint``, the name
    the result is assigned to, when ``named``)."""

    parser: str
    t_names: tuple[str, ...]
    cuda_names: tuple[str, ...] = ()
    named: bool = False

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(self.t_names) | frozenset(f"cuda.{n}" for n in self.cuda_names)


_MATH = (
    *("exp", "exp2", "exp10", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid"),
    *("sin", "cos", "erf", "fabs", "floor", "ceil", "nearbyint", "trunc", "round", "pow"),
    *("fma", "abs", "max", "min", "isnan", "isinf", "isfinite", "infinity", "min_value"),
    *("max_value", "truncdiv", "truncmod", "floordiv", "floormod", "ceildiv", "bitwise_and"),
    *("bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right", "clz"),
    "popcount",
)

FAMILIES = (
    CallFamily(  # warp collectives; T.<name>: the TVM spellings, with an explicit warp size
        "warp_ops:build",
        (
            *("gpu_warp_shuffle", "gpu_warp_shuffle_up", "gpu_warp_shuffle_down"),
            *("gpu_warp_shuffle_xor", "gpu_warp_activemask"),
        ),
        (
            *("__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"),
            *("__activemask", "ballot_sync", "any_sync", "elect_sync", "warp_reduce"),
            *("warp_sum", "warp_max", "warp_min", "reduce_add_sync_u32", "reduce_min_sync_u32"),
        ),
    ),
    CallFamily(  # atomics, fences, CTA votes and reductions, the shared-window address
        "cta_ops:call",
        ("atomic_add",),
        (
            *("atomic_add", "atomic_cas", "thread_fence", "syncthreads_and", "syncthreads_or"),
            *("cta_sum", "cta_max", "cta_min", "cta_reduce", "cvta_generic_to_shared"),
        ),
        named=True,
    ),
    CallFamily(  # math and bit intrinsics (T.min and T.max among them), bit casts, ffs
        "intrinsics:build",
        _MATH,
        ("ffs_u32", "float_as_uint", "uint_as_float"),
    ),
)

_BY_KEY = {key: family for family in FAMILIES for key in family.keys}


def family_of(key: str) -> CallFamily | None:
    """The family whose call ``T.<key>`` is (``key`` as :class:`Intrinsic` spells it), or
    None for the core intrinsics."""
    return _BY_KEY.get(key)


def parse_call(family: CallFamily, evaluator, key: str, node, name_hint=None):
    """Parse the call ``node`` of ``T.<key>`` with its family's parser (imported now)."""
    module, _, function = family.parser.partition(":")
    parse = getattr(importlib.import_module(f"{__package__}.{module}"), function)
    if family.named:
        return parse(evaluator, key, node, name_hint)
    return parse(evaluator, key, node)
