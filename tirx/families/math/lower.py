"""Lowering of the math intrinsics: a call is rebuilt from its lowered operands (tirx/ir/visitor.py,
Transformer); the parser checked its dtypes."""

__all__ = ["REBUILT"]

REBUILT = frozenset({"MathCall"})
