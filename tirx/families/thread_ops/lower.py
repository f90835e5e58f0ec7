"""Lowering of the single-thread operations: none needs a rule of its own. A sleep, an assert, a
register fence and an assumption are rebuilt from their lowered operands; a clock read is
lowered as the parser made it (tirx/ir/visitor.py, Transformer)."""

__all__ = ["REBUILT", "KEPT"]

REBUILT = frozenset({"NanoSleep", "AssertTrap", "RegisterFence", "Assume"})
KEPT = frozenset({"Clock"})
