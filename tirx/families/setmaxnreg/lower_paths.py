"""Which threads execute which setmaxnreg: the lowered kernel's branches followed as far as the
compiler can evaluate them.

A warp-specialized kernel chooses each warpgroup's role with ordinary code
(``wg = T.cuda.warpgroup_id()``; ``if wg == 0: ...``). Its conditions depend on the thread's
index and on constants only, so the compiler can evaluate them for every thread of the block
and tell which setmaxnreg calls (and which CTA barriers) each thread reaches, in order.

What is followed:

* an ``if`` whose condition is a function of thread indices (``T.cuda.thread_idx``,
  ``lane_id``, ``warp_id``, the block's shape, the grid's when it is fixed), constants and
  variables assigned once from such values: each thread takes its own branch;
* any other ``if`` (a loaded value, a parameter, a block index, a loop variable): both branches,
  and what they hold is *maybe* (the thread may or may not reach it);
* a ``for`` loop runs its body twice when it has two or more iterations (once with one), so
  that a call meets the one before it in the next iteration; a loop whose trip count is not a
  constant, or a ``while``, runs it twice as *maybe*;
* ``break`` and ``continue`` are not followed: what comes after them in the loop counts as
  reached.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...ir.visitor import walk

__all__ = ["Event", "events_by_thread", "is_setmaxnreg"]


def is_setmaxnreg(node) -> bool:
    return isinstance(node, ir.PtxCall) and node.instruction.startswith("setmaxnreg.")


@dataclass(frozen=True)
class Event:
    """A setmaxnreg ``call`` a thread executes, or a CTA barrier (``call`` None); ``maybe``:
    under a condition the compiler cannot evaluate (or in a loop that may not run)."""

    call: ir.PtxCall | None
    maybe: bool


def events_by_thread(fn: ir.Function) -> list[list[Event]]:
    """Per linear thread id of the block, the events it reaches in program order."""
    paths = _Paths(fn)
    everyone = list(range(paths.threads))
    paths.run(fn.body, everyone, [])
    return paths.events


class _Paths:
    def __init__(self, fn: ir.Function):
        bx, by, bz = fn.launch.block
        self.threads = bx * by * bz
        self.events: list[list[Event]] = [[] for _ in range(self.threads)]
        self.values = _Values(fn)
        self.relevant: dict[int, bool] = {}

    def holds(self, s) -> int:
        """0: ``s`` holds neither a setmaxnreg nor a CTA barrier (it is skipped); 1: barriers
        only; 2: a setmaxnreg."""
        hit = self.relevant.get(id(s))
        if hit is None:
            hit = 0
            for n in walk(s):
                if is_setmaxnreg(n):
                    hit = 2
                    break
                if _is_cta_barrier(n):
                    hit = 1
            self.relevant[id(s)] = hit
        return hit

    def note(self, call, sure: list[int], maybe: list[int]) -> None:
        for tids, flag in ((sure, False), (maybe, True)):
            event = Event(call, flag)
            for t in tids:
                mine = self.events[t]
                if call is None and mine and mine[-1] == event:
                    continue  # barriers in a row are one synchronization
                mine.append(event)

    def run(self, s, sure: list[int], maybe: list[int]) -> None:
        if not (sure or maybe) or not self.holds(s):
            return
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                self.run(x, sure, maybe)
        elif is_setmaxnreg(s):
            self.note(s, sure, maybe)
        elif _is_cta_barrier(s):
            self.note(None, sure, maybe)
        elif isinstance(s, ir.If):
            self.branch(s, sure, maybe)
        elif isinstance(s, ir.For):
            trips = _trips(s)
            if trips == 0:
                return
            if trips is None:
                sure, maybe = [], sure + maybe
            # a second pass only matters for a setmaxnreg: it meets the one of the iteration
            # before
            again = trips != 1 and self.holds(s.body) == 2
            for _ in range(2 if again else 1):
                self.run(s.body, sure, maybe)
        elif isinstance(s, ir.While):
            for _ in range(2 if self.holds(s.body) == 2 else 1):
                self.run(s.body, [], sure + maybe)

    def branch(self, s: ir.If, sure: list[int], maybe: list[int]) -> None:
        """An ``if``/``elif`` chain, link by link (a chain of thousands needs no recursion)."""
        while s is not None:
            try:
                taken = self.values.of(s.cond)
            except RecursionError:  # a condition deeper than Python evaluates: not known
                taken = None
            if taken is None:  # either way: the rest of the chain is maybe too
                sure, maybe = [], sure + maybe
                self.run(s.then_body, sure, maybe)
            else:
                self.run(s.then_body, [t for t in sure if taken[t]], [t for t in maybe if taken[t]])
                sure, maybe = [t for t in sure if not taken[t]], [t for t in maybe if not taken[t]]
            if not (sure or maybe):
                return
            if isinstance(s.else_body, ir.If):
                s = s.else_body
                continue
            if s.else_body is not None:
                self.run(s.else_body, sure, maybe)
            return


def _is_cta_barrier(node) -> bool:
    if isinstance(node, ir.Barrier):
        return node.scope is ir.BarrierScope.CTA
    return getattr(node, "syncs_cta", False)  # a family's CTA barrier: __syncthreads_and / _or


def _trips(s: ir.For) -> int | None:
    start, stop = static_value(s.start), static_value(s.stop)
    if start is None or stop is None:
        return None
    if s.step > 0:
        return max(0, -((start - stop) // s.step))
    return max(0, -((stop - start) // -s.step))


def _straight_line(body):
    """The ids of the assignments every thread executes: those of the kernel's top-level
    sequence (through nested sequences, never into a branch or a loop)."""
    todo = [body]
    while todo:
        s = todo.pop()
        if isinstance(s, ir.Seq):
            todo.extend(s.stmts)
        elif isinstance(s, ir.Assign):
            yield id(s)


class _Values:
    """Expressions evaluated for every thread of the block: a tuple of per-thread values, or
    None when the value depends on something other than thread indices and constants."""

    def __init__(self, fn: ir.Function):
        bx, by, bz = fn.launch.block
        n = bx * by * bz
        self.tid = range(n)
        self.xyz = ([t % bx for t in self.tid], [t // bx % by for t in self.tid],
                    [t // (bx * by) for t in self.tid])  # fmt: skip
        self.launch = fn.launch
        # variables assigned once, outside every branch and loop (a value assigned in a branch
        # holds for the threads that took it only): their value, for every thread
        assigned: dict = {}
        for node in walk(fn.body):
            if isinstance(node, ir.Assign):
                assigned.setdefault(node.var, []).append(node)
            elif isinstance(node, ir.For):
                assigned.setdefault(node.var, []).extend((None, None))  # never a constant
        top = set(_straight_line(fn.body))
        self.once = {
            v: nodes[0].value
            for v, nodes in assigned.items()
            if len(nodes) == 1 and id(nodes[0]) in top
        }
        self.memo: dict[int, tuple | None] = {}
        self.busy: set[int] = set()

    def of(self, e) -> tuple | None:
        key = id(e)
        if key in self.memo:
            return self.memo[key]
        if key in self.busy:  # a variable defined through itself
            return None
        self.busy.add(key)
        try:
            out = self.memo[key] = self._compute(e)
        finally:
            self.busy.discard(key)
        return out

    def _compute(self, e) -> tuple | None:
        n = len(self.tid)
        if isinstance(e, (int, bool)):
            return (int(e),) * n
        if isinstance(e, ir.Const):
            return None if e.dtype.kind == "float" else (int(e.value),) * n
        if isinstance(e, ir.Var):
            value = self.once.get(e)
            return None if value is None else self.of(value)
        if isinstance(e, ir.Special):
            return self._special(e)
        if isinstance(e, ir.Cast):
            v = self.of(e.value)
            return None if v is None or e.dtype.kind == "float" else tuple(
                _wrap(x, e.dtype) for x in v
            )  # fmt: skip
        if isinstance(e, ir.Not):
            v = self.of(e.a)
            return None if v is None else tuple(int(not x) for x in v)
        if isinstance(e, ir.Select):
            c, a, b = self.of(e.cond), self.of(e.a), self.of(e.b)
            if c is None or a is None or b is None:
                return None
            return tuple(x if k else y for k, x, y in zip(c, a, b))
        if isinstance(e, (ir.BinOp, ir.Cmp, ir.Logic)):
            if e.dtype.kind == "float":
                return None
            a, b = self.of(e.a), self.of(e.b)
            if a is None or b is None:
                return None
            try:
                out = tuple(_apply(e, x, y) for x, y in zip(a, b))
            except (ZeroDivisionError, KeyError, ValueError):  # x // 0, a float op, x << -1
                return None
            return out if not isinstance(e, ir.BinOp) else tuple(_wrap(x, e.dtype) for x in out)
        return None  # loads, addresses, calls: not known before the kernel runs

    def _special(self, e: ir.Special) -> tuple | None:
        kind, d, n = e.kind, e.dim, len(self.tid)
        if kind is ir.Builtin.THREAD_IDX:
            return tuple(self.xyz[d])
        if kind is ir.Builtin.LANE_ID:
            return tuple(t % 32 for t in self.tid)
        if kind is ir.Builtin.WARP_ID:
            return tuple(t // 32 for t in self.tid)
        if kind is ir.Builtin.BLOCK_DIM:
            return (self.launch.block[d],) * n
        if kind is ir.Builtin.GRID_DIM and not (self.launch.sms_grid and d == 0):
            return (self.launch.grid[d],) * n
        return None  # the block's index; a grid sized at launch


def _apply(e, x: int, y: int) -> int:
    op = e.op
    if isinstance(e, ir.Logic):
        return int(bool(x) and bool(y)) if op == "and" else int(bool(x) or bool(y))
    if isinstance(e, ir.Cmp):
        return int(
            {
                ir.CmpOp.EQ: x == y, ir.CmpOp.NE: x != y, ir.CmpOp.LT: x < y,
                ir.CmpOp.LE: x <= y, ir.CmpOp.GT: x > y, ir.CmpOp.GE: x >= y,
            }[op]
        )  # fmt: skip
    return {
        ir.Op.ADD: lambda: x + y, ir.Op.SUB: lambda: x - y, ir.Op.MUL: lambda: x * y,
        ir.Op.FLOORDIV: lambda: x // y, ir.Op.FLOORMOD: lambda: x % y,
        ir.Op.MIN: lambda: min(x, y), ir.Op.MAX: lambda: max(x, y),
        ir.Op.SHL: lambda: x << y, ir.Op.SHR: lambda: x >> y,
        ir.Op.BITAND: lambda: x & y, ir.Op.BITOR: lambda: x | y, ir.Op.BITXOR: lambda: x ^ y,
    }[op]()  # fmt: skip


def _wrap(x: int, dtype) -> int:
    """``x`` as a value of the integer (or bool) ``dtype``: C's conversion."""
    if dtype.kind == "bool":
        return int(bool(x))
    bits = dtype.bits
    x &= (1 << bits) - 1
    if dtype.kind == "int" and x >= 1 << (bits - 1):
        x -= 1 << bits
    return x
