"""The values an integer expression can take, known before the kernel runs: the simulator's
signed-overflow check (:mod:`tirx.sim.expr`) is left out of an operation whose result
provably fits its type, which is most of a kernel's index arithmetic (thread and block
indices, loop variables of constant ranges, constants).

An interval ``(lo, hi)`` or None (not known: a value read from memory, a variable assigned
more than once). A variable assigned once, to an expression of constants, variables and thread
indices (:func:`tirx.ir.assignments.single_assignments`), has its value's interval. Unknown only ever keeps a check in place: a bound found here is never used to
compute a value.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DTypeKind
from ..ir import nodes as ir
from ..ir.assignments import single_assignments
from .numeric import constant

__all__ = ["Bounds"]

_DEPTH = 64  # deeper expressions are not bounded (an index is a few levels deep)
_B = ir.Builtin


class Bounds:
    """Intervals of the integer expressions of one machine's kernel; ``loops`` maps a loop
    variable to the interval of its values (set by the machine before it compiles the body)."""

    def __init__(self, machine):
        self.m = machine
        self.loops: dict[ir.Var, tuple[int, int] | None] = {}
        self._defined: dict | None = None  # single assignments, found when first asked for
        self._memo: dict[int, tuple[ir.Expr, tuple[int, int] | None]] = {}

    def fits(self, e: ir.Expr) -> bool:
        """Whether every value of ``e`` provably lies in its dtype's range."""
        found = self.of(e)
        if found is None:
            return False
        lo, hi = _range(e.dtype)
        return lo <= found[0] and found[1] <= hi

    def loop(self, var: ir.Var, start: ir.Expr, stop: ir.Expr, step: int) -> None:
        """``for var in range(start, stop, step)``: its values, where both ends are bounded
        (called outer loops first, before any body is built; a variable of several loops
        takes the hull of their ranges, and unbounded once one is)."""
        a, b = self.of(start), self.of(stop)
        self._memo.clear()  # (what was found with the variable's earlier range)
        known = self.loops.get(var, ())
        if a is None or b is None or known is None:
            self.loops[var] = None
            return
        lo, hi = (a[0], max(a[0], b[1] - 1)) if step > 0 else (min(a[1], b[0] + 1), a[1])
        if known:
            lo, hi = min(lo, known[0]), max(hi, known[1])
        self.loops[var] = lo, hi

    def of(self, e, depth: int = 0) -> tuple[int, int] | None:
        if isinstance(e, bool) or not isinstance(e, (int, ir.Expr)):
            return None
        if isinstance(e, int):
            return e, e
        hit = self._memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        found = self._of(e, depth) if depth < _DEPTH else None
        if found is not None and e.dtype.kind not in (DTypeKind.INT, DTypeKind.UINT):
            found = None
        self._memo[id(e)] = (e, found)
        return found

    def _of(self, e: ir.Expr, depth: int) -> tuple[int, int] | None:
        t = type(e)
        if t is ir.Const:
            c = constant(e.value, e.dtype)
            return (int(c), int(c)) if e.dtype.kind in (DTypeKind.INT, DTypeKind.UINT) else None
        if t is ir.Var:
            if e in self.m.param_values:
                c = self.m.param_values[e]
                return (int(c), int(c)) if isinstance(c, (int, np.integer)) else None
            if e in self.loops:
                return self.loops[e]
            if self._defined is None:
                self._defined = single_assignments(self.m.fn.body)
            value = self._defined.get(e)
            return None if value is None else self.of(value, depth + 1)
        if t is ir.Special:
            return self._special(e)
        if t is ir.Cast:
            inner = self.of(e.value, depth + 1)
            lo, hi = _range(e.dtype)
            if inner is not None and lo <= inner[0] and inner[1] <= hi:
                return inner
            return (lo, hi) if e.dtype.bits < 32 else None  # a narrow cast wraps into its type
        if t is ir.Select:
            a, b = self.of(e.a, depth + 1), self.of(e.b, depth + 1)
            return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        if t is ir.BinOp:
            return _binop(e.op, self.of(e.a, depth + 1), self.of(e.b, depth + 1))
        return None

    def _special(self, e: ir.Special) -> tuple[int, int] | None:
        launch = self.m.fn.launch
        if e.dim not in (0, 1, 2):
            return None
        block, grid = int(launch.block[e.dim]), int(launch.grid[e.dim])
        return {
            _B.THREAD_IDX: (0, block - 1), _B.BLOCK_IDX: (0, grid - 1), _B.LANE_ID: (0, 31),
            _B.WARP_ID: (0, (block - 1) // 32), _B.BLOCK_DIM: (block, block),
            _B.GRID_DIM: (grid, grid),
        }.get(e.kind)  # fmt: skip


def _binop(op: ir.Op, a, b) -> tuple[int, int] | None:
    if a is None or b is None:
        return None
    if op is ir.Op.ADD:
        return a[0] + b[0], a[1] + b[1]
    if op is ir.Op.SUB:
        return a[0] - b[1], a[1] - b[0]
    if op is ir.Op.MUL:
        products = [x * y for x in a for y in b]
        return min(products), max(products)
    if op is ir.Op.MIN:
        return min(a[0], b[0]), min(a[1], b[1])
    if op is ir.Op.MAX:
        return max(a[0], b[0]), max(a[1], b[1])
    c = b[0] if b[0] == b[1] else None  # a constant right operand
    if op is ir.Op.FLOORDIV and c is not None and c > 0:
        return a[0] // c, a[1] // c
    if op is ir.Op.FLOORMOD and c is not None and c > 0:
        return 0, c - 1
    if op is ir.Op.BITAND and (a[0] >= 0 or b[0] >= 0):
        return 0, min(x[1] for x in (a, b) if x[0] >= 0)
    if op is ir.Op.SHR and c is not None and 0 <= c < 64:
        return a[0] >> c, a[1] >> c
    return None


def _range(d) -> tuple[int, int]:
    if d.kind is DTypeKind.UINT:
        return 0, (1 << d.bits) - 1
    if d.kind is DTypeKind.BOOL:
        return 0, 1
    return -(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1
