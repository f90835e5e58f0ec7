"""The dtype table: one row per scalar type tirx knows, with its C, numpy and torch names.

torch is never imported here; ``torch_name`` is the attribute name on the ``torch`` module.
16-bit floats are stored as their raw bits in generated C++ (``unsigned short``), and computed
in float32 (see docs/semantics.md).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DType", "DTYPES", "dtype_of", "is_float", "is_int", "is_signed"]


@dataclass(frozen=True)
class DType:
    name: str
    bits: int
    kind: str  # "int", "uint", "float", "bool"
    c_type: str
    numpy: str
    torch_name: str

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
    DType("bool", 8, "bool", "bool", "bool", "bool"),
    DType("int8", 8, "int", "signed char", "int8", "int8"),
    DType("int16", 16, "int", "short", "int16", "int16"),
    DType("int32", 32, "int", "int", "int32", "int32"),
    DType("int64", 64, "int", "long long", "int64", "int64"),
    DType("uint8", 8, "uint", "unsigned char", "uint8", "uint8"),
    DType("uint16", 16, "uint", "unsigned short", "uint16", "uint16"),
    DType("uint32", 32, "uint", "unsigned int", "uint32", "uint32"),
    DType("uint64", 64, "uint", "unsigned long long", "uint64", "uint64"),
    # 16-bit floats: raw bits in C (no header needed); numpy has no bfloat16, keep its bits.
    DType("float16", 16, "float", "unsigned short", "float16", "float16"),
    DType("bfloat16", 16, "float", "unsigned short", "uint16", "bfloat16"),
    DType("float32", 32, "float", "float", "float32", "float32"),
    DType("float64", 64, "float", "double", "float64", "float64"),
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
    return d.kind == "float"


def is_int(d: DType) -> bool:
    return d.kind in ("int", "uint", "bool")


def is_signed(d: DType) -> bool:
    return d.kind in ("int", "float")
