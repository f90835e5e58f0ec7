"""The dtype table: one row per scalar type tirx knows, with its C, numpy and torch names.

torch is never imported here; ``torch_name`` is the attribute name on the ``torch`` module.
16-bit floats are stored as their raw bits in generated C++ (``unsigned short``), and computed
in float32 (see docs/semantics.md). The 8-bit floats (``float8_e4m3fn``, ``float8_e5m2``, the
OCP FP8 formats) are storage types: raw bits (``unsigned char``) in memory, converted to and
from float32, never computed on.
"""

from __future__ import annotations

import enum
from dataclasses import fields

from .frozen import Frozen, frozen

__all__ = [
    "StrKind",
    "DTypeKind",
    "DType",
    "DTYPES",
    "dtype_of",
    "is_float",
    "is_int",
    "is_signed",
    "is_fp8",
    "computes_as_float32",
]


class StrKind(str, enum.Enum):
    """Base of tirx's kinds: enum members that are also their string value, so ``kind ==
    "warp"``, ``f"{kind}"`` and ``{kind!r}`` in a message read as the string does (on every
    Python version). It lives here because every layer may import dtypes."""

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class DTypeKind(StrKind):
    """What a dtype's values are."""

    INT = "int"
    UINT = "uint"
    FLOAT = "float"
    BOOL = "bool"


@frozen
class DType(Frozen):
    name: str
    bits: int
    kind: DTypeKind
    c_type: str
    numpy: str
    torch_name: str

    def __post_init__(self):
        object.__setattr__(self, "kind", DTypeKind(self.kind))

    # A dataclass's ``__eq__`` builds a tuple of the fields on each side, and dtypes are
    # compared at nearly every node the lowering builds; the table's rows are the ones met, so
    # the same object answers first. Equal fields stay equal (a dtype read back from a cache).
    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if other.__class__ is not DType:
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(DType))

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def bytes(self) -> int:
        return max(self.bits // 8, 1)

    @property
    def np(self):
        """The numpy dtype of the storage (bfloat16 is kept as its uint16 bits)."""
        import numpy as np

        return np.dtype(self.numpy)

    def __str__(self) -> str:
        return self.name


_ROWS = [
    DType("bool", 8, DTypeKind.BOOL, "bool", "bool", "bool"),
    DType("int8", 8, DTypeKind.INT, "signed char", "int8", "int8"),
    DType("int16", 16, DTypeKind.INT, "short", "int16", "int16"),
    DType("int32", 32, DTypeKind.INT, "int", "int32", "int32"),
    DType("int64", 64, DTypeKind.INT, "long long", "int64", "int64"),
    DType("uint8", 8, DTypeKind.UINT, "unsigned char", "uint8", "uint8"),
    DType("uint16", 16, DTypeKind.UINT, "unsigned short", "uint16", "uint16"),
    DType("uint32", 32, DTypeKind.UINT, "unsigned int", "uint32", "uint32"),
    DType("uint64", 64, DTypeKind.UINT, "unsigned long long", "uint64", "uint64"),
    # 16-bit floats: raw bits in C (no header needed); numpy has no bfloat16, keep its bits.
    DType("float16", 16, DTypeKind.FLOAT, "unsigned short", "float16", "float16"),
    DType("bfloat16", 16, DTypeKind.FLOAT, "unsigned short", "uint16", "bfloat16"),
    DType("float32", 32, DTypeKind.FLOAT, "float", "float32", "float32"),
    DType("float64", 64, DTypeKind.FLOAT, "double", "float64", "float64"),
    # 8-bit floats (OCP FP8): storage only, raw bits in C and in numpy (which has no fp8).
    DType("float8_e4m3fn", 8, DTypeKind.FLOAT, "unsigned char", "uint8", "float8_e4m3fn"),
    DType("float8_e5m2", 8, DTypeKind.FLOAT, "unsigned char", "uint8", "float8_e5m2"),
]

DTYPES: dict[str, DType] = {d.name: d for d in _ROWS}
_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "int": "int32"}


def dtype_of(value: str | DType) -> DType:
    """Look a dtype up by name; raises ``KeyError``-free ``ValueError`` listing the known names."""
    if isinstance(value, DType):
        return value
    if isinstance(getattr(value, "dtype", None), DType):  # T.float16 and friends
        return value.dtype
    name = _ALIASES.get(str(value), str(value))
    try:
        return DTYPES[name]
    except KeyError:
        known = ", ".join(DTYPES)
        raise ValueError(f"unknown dtype {value!r}; known dtypes: {known}") from None


def is_float(d: DType) -> bool:
    return d.kind is DTypeKind.FLOAT


def is_int(d: DType) -> bool:
    return d.kind is not DTypeKind.FLOAT


def is_signed(d: DType) -> bool:
    return d.kind in (DTypeKind.INT, DTypeKind.FLOAT)


def is_fp8(d: DType) -> bool:
    """An 8-bit float: a storage type, converted to and from float32 but not computed on."""
    return d.kind is DTypeKind.FLOAT and d.bits == 8


def computes_as_float32(d: DType) -> bool:
    """A float narrower than float32 (16- and 8-bit): its values are float32 in expressions."""
    return d.kind is DTypeKind.FLOAT and d.bits < 32
