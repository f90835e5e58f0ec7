"""What the launcher needs to know of a generated kernel without generating it: the codegen
version (part of every cache key), each parameter's argument kind, and whether the block's
shared memory is the dynamic segment. Kept apart from :mod:`.codegen` so that a compile
answered by the caches never imports the code generator."""

from __future__ import annotations

from ...errors import TirxSyntaxError
from ...ir import nodes as ir
from ...ir.aligned_access import AccessKind

__all__ = [
    "CODEGEN_VERSION", "SCALAR_DTYPES", "ACCESS_KINDS", "param_kinds", "uses_dynamic_shared",
]  # fmt: skip

CODEGEN_VERSION = "4"

_PARAM_KIND = {
    "int32": "i32",
    "uint32": "u32",
    "int64": "i64",
    "uint64": "u64",
    "float32": "f32",
    "float64": "f64",
    "bool": "i32",
    "int8": "i32",
    "int16": "i32",
    "uint8": "u32",
    "uint16": "u32",
}
SCALAR_DTYPES = frozenset(_PARAM_KIND)  # the dtypes a scalar parameter may have
ACCESS_KINDS = frozenset(k.value for k in AccessKind)  # why a pointer must be aligned


def param_kinds(fn: ir.Function) -> list[str]:
    """The launcher's argument kinds, in parameter order."""
    kinds = []
    for p in fn.params:
        if isinstance(p, ir.Buffer):
            kinds.append("ptr")
        elif p.dtype.name in _PARAM_KIND:
            kinds.append(_PARAM_KIND[p.dtype.name])
        else:
            raise TirxSyntaxError(
                f"scalar parameter {p.name!r} of type {p.dtype} is not supported",
                hint="use T.float32 or an integer type",
            )
    return kinds


def uses_dynamic_shared(fn: ir.Function) -> bool:
    """Whether the block's shared memory is the dynamic segment: any ``scope="shared.dyn"``
    allocation puts all of it there, sized at launch."""
    return any(buf.dynamic for buf in fn.shared_offsets)
