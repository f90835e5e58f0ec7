"""Operator chains evaluated without recursion.

Binary operators, unary operators and conditional expressions nest without parentheses
(``x + x + ... + x``, ``- - x``, ``a if c else b if d else ...``), so a kernel can nest them as
deeply as CPython compiles, about 3000 levels: far past Python's recursion limit for an
evaluator that recurses. The evaluator's handlers for them (``ex_BinOp``, ``ex_UnaryOp``,
``ex_IfExp``) are generators instead: each yields an operand node and receives its value, and
:func:`evaluate_chain` runs them from its own stack.
"""

from __future__ import annotations

import ast

from ..errors import TirxError
from .refusals import python_failure

__all__ = ["CHAINED", "evaluate_chain"]

CHAINED = (ast.BinOp, ast.UnaryOp, ast.IfExp)


def evaluate_chain(ev, root):
    """The value of ``root`` (one of :data:`CHAINED`) for evaluator ``ev``; other operand
    nodes go to ``ev.value``. An error is located at the innermost node whose step raised,
    and converted as ``Evaluator.value`` converts it."""
    stack = [(root, getattr(ev, "ex_" + type(root).__name__)(root))]
    sent = None
    while True:
        node, steps = stack[-1]
        try:
            child = steps.send(sent)
        except StopIteration as done:
            stack.pop()
            if not stack:
                return done.value
            sent = done.value
            continue
        except TirxError as e:
            raise e.with_span(ev.p.span(node)) from None
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
            raise python_failure(e, ev.p.span(node)) from None
        if isinstance(child, CHAINED):
            stack.append((child, getattr(ev, "ex_" + type(child).__name__)(child)))
            sent = None
        else:
            sent = ev.value(child)
