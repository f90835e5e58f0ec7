"""Strands: the warps of a block that run while others wait on an mbarrier.

The machine (:mod:`tirx.sim.machine`) runs a block's threads in lockstep, one branch of an
``if`` after the other. That cannot run a consumer that waits on an mbarrier before the
producer in the other branch has arrived. So in a kernel with an mbarrier wait, the block
runs as *strands*: each branch of an ``if`` whose body holds a wait runs as its own strand (a
set of threads in lockstep; one per warpgroup for a branch that holds a per-warpgroup wait,
a named barrier's ``bar.sync``), and a strand that waits on an incomplete phase is suspended
while the others run — the warp scheduler's freedom on the GPU. Only one strand executes at a
time (each is a Python thread handing a baton to the block's scheduler and back), so the
machine's state needs no locking; a switch saves the strand's loop frames and span.

A strand waits with :meth:`Strands.wait_until`; when no strand can run and some are waiting
on a barrier, the block is deadlocked: the fault names every waiting barrier and its state.
The conditions of an ``if``/``elif`` chain that forks are all evaluated before its branches
run (on the GPU their order against the branches' effects is unspecified too).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import NamedTuple

import numpy as np

from .. import catalog
from ..ir import nodes as ir
from ..ir.visitor import walk
from .faults import Fault

__all__ = [
    "Strands", "Blocked", "deadlock_order", "holds_wait", "blocks", "per_warpgroup",
    "varying_vars", "varying_wait",
]  # fmt: skip


def _listed(text: str, rule: str) -> bool:
    """Whether the family of instruction ``text`` lists it (by prefix) in its simulator
    module's ``rule``."""
    row = catalog.row_of_ptx(text)
    prefixes = catalog.rule(row, "sim", rule) if row is not None else None
    return bool(prefixes) and text.startswith(prefixes)


def blocks(text: str) -> bool:
    """Whether the instruction ``text`` may wait for other warps: its family's simulator module
    lists it in ``BLOCKING`` (instruction prefixes; the mbarrier waits)."""
    return _listed(text, "BLOCKING")


def per_warpgroup(text: str) -> bool:
    """Whether the instruction ``text`` waits per warpgroup: its family's simulator module
    lists it in ``PER_WARPGROUP`` (a named barrier's ``bar.sync``, whose warpgroups may each
    wait at a barrier of their own, one's turn coming from another's later arrive). A branch
    that holds one runs one strand per warpgroup."""
    return _listed(text, "PER_WARPGROUP")


#: thread-index values that differ between the threads of a block
_PER_THREAD = (ir.Builtin.THREAD_IDX, ir.Builtin.LANE_ID, ir.Builtin.WARP_ID)


def _reads_varying(e, varying: set) -> bool:
    """Whether expression (or operand) ``e`` may differ between threads: it reads a thread
    index, a variable in ``varying``, or memory."""
    for n in walk(e):
        if isinstance(n, ir.Special) and n.kind in _PER_THREAD:
            return True
        if isinstance(n, ir.Load) or (isinstance(n, ir.Var) and n in varying):
            return True
    return False


def varying_vars(body: ir.Stmt, incoming: set | frozenset = frozenset()) -> set:
    """The variables of a kernel body whose values may differ between the threads that use
    them: assigned a value that reads a thread index, memory or another such variable;
    assigned in more than one place, one of them under a condition that differs between
    threads and does not hold all of them (the values meet where the branches do); or the
    counter of a loop whose bounds differ. A variable assigned in one place from uniform
    values is the same for every thread that ran the assignment (a loop counter with uniform
    bounds too, inside a branch or not).
    A fixpoint over the whole body: a later assignment can make an earlier use vary.

    ``incoming``: what differs on entry to ``body`` (the analysis of the whole kernel, when
    ``body`` is one branch of it); a variable ``body`` assigns is judged by its assignments
    in ``body``, the one value it has for the threads that run them."""
    sites: dict = {}  # var -> [(assigned value, the bodies around it: (id, their conditions))]
    loops: list = []  # (loop counter, its bounds)

    def collect(s, path: tuple) -> None:
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                collect(x, path)
        elif isinstance(s, ir.Assign):
            sites.setdefault(s.var, []).append((s.value, path))
        elif isinstance(s, ir.If):  # each side a body of its own
            for b in (s.then_body, s.else_body):
                if b is not None:
                    collect(b, (*path, (id(b), (s.cond,))))
        elif isinstance(s, ir.For):  # bounds that differ make the trip count differ
            bounds = tuple(x for x in (s.start, s.stop) if isinstance(x, ir.Expr))
            loops.append((s.var, bounds))
            collect(s.body, (*path, (id(s.body), bounds)))
        elif isinstance(s, ir.While):
            collect(s.body, (*path, (id(s.body), (s.cond,))))

    collect(body, ())
    apart = {v: _apart([p for _, p in a]) for v, a in sites.items() if len(a) > 1}
    mine = set(sites) | {var for var, _ in loops}
    varying: set = {v for v in incoming if v not in mine}
    changed = True
    while changed:
        changed = False
        for var, bounds in loops:
            if var not in varying and any(_reads_varying(x, varying) for x in bounds):
                varying.add(var)
                changed = True
        for var, assigned in sites.items():
            if var in varying:
                continue
            if any(_reads_varying(value, varying) for value, _ in assigned) or any(
                _reads_varying(c, varying) for c in apart.get(var, ())
            ):
                varying.add(var)
                changed = True
    return varying


def _apart(paths: list) -> list:
    """The conditions that tell the sites of one variable apart (``collect``'s paths): those
    around a site that not every site shares. A branch that holds every assignment of a
    variable makes no difference between the threads that have it, whatever its condition."""
    shared = 0
    for level in zip(*paths):
        if any(body != level[0][0] for body, _ in level):
            break
        shared += 1
    return [c for path in paths for _, conds in path[shared:] for c in conds]


def splits_by_warpgroup(m):
    """``test(body)``: whether the branch ``body`` of machine ``m``'s kernel runs one strand
    per warpgroup (when some threads skip it): it holds a named barrier's ``bar.sync``, or an
    mbarrier wait whose barrier or phase differs between the threads that run the branch
    (warpgroups that take turns through barriers of their own)."""
    whole = varying_vars(m.fn.body)
    cache = m._holds_wait

    def test(body) -> bool:
        return holds_wait(body, cache, _waits_per_warpgroup) or holds_wait(
            body, None, varying_wait(varying_vars(body, whole))
        )

    return test


def _blocking(node: ir.PtxCall) -> bool:
    return blocks(node.instruction)


def _waits_per_warpgroup(node: ir.PtxCall) -> bool:
    return per_warpgroup(node.instruction)


def varying_wait(varying: set):
    """A :func:`holds_wait` node test: a blocking wait whose operands (the barrier, the
    phase) may differ between the threads that run it, as in warpgroups that each wait on
    a barrier of their own for their turn."""

    def test(node: ir.PtxCall) -> bool:
        return blocks(node.instruction) and any(_reads_varying(op, varying) for op in node.operands)

    return test


def holds_wait(s: ir.Stmt, cache: dict | None, test=_blocking) -> bool:
    """Whether ``s`` (a statement of the lowered IR) contains a blocking wait (or, with
    ``test``, a ``PtxCall`` for which ``test(node)`` holds); ``cache`` (None: none) keeps
    the answers by statement and test."""
    key = (id(s), test)
    hit = cache.get(key) if cache is not None else None
    if hit is not None:
        return hit
    todo, found = [s], False
    while todo and not found:
        node = todo.pop()
        if isinstance(node, ir.PtxCall):
            found = test(node)
        elif isinstance(node, ir.Seq):
            todo.extend(node.stmts)
        elif isinstance(node, ir.If):
            todo.extend(x for x in (node.then_body, node.else_body) if x is not None)
        elif isinstance(node, (ir.For, ir.While)):
            todo.append(node.body)
    if cache is not None:
        cache[key] = found
    return found


_MBARRIER_HINT = (
    "each phase needs as many arrivals as its mbarrier.init count (and its tx-count back at "
    "zero) before its waiters go on: check the count, the parity waited for, and that the "
    "arriving threads reach their arrive"
)


class _Cancelled(BaseException):
    """Ends a suspended strand when its block stops with a fault."""


class _Strand:
    def __init__(self, sched: Strands, fn, idx: np.ndarray, loops: list, span):
        self.sched, self.fn, self.idx = sched, fn, idx
        self.loops, self.span = loops, span
        self.go = threading.Semaphore(0)
        self.done = False
        self.result = None
        self.error: BaseException | None = None
        self.blocked = None  # (ready(), describe() or None) while waiting
        self.spin = None  # (site, version) of the last failed test_wait
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()

    def _main(self):
        self.go.acquire()
        try:
            if self.sched.cancelled:
                raise _Cancelled
            self.result = self.fn(self.idx)
        except _Cancelled:
            pass
        except BaseException as e:  # handed to the scheduler, which re-raises it
            self.error = e
        finally:
            self.done = True
            self.sched.back.release()


class Strands:
    """The scheduler of one machine's blocks."""

    def __init__(self, machine):
        self.m = machine
        self.back = threading.Semaphore(0)
        self.cancelled = False
        self.current: _Strand | None = None
        self.strands: list[_Strand] = []
        self.ready: deque[_Strand] = deque()
        self.version = 0  # bumped by every change of a barrier's state (mbarrier.py)

    # --------------------------------------------------------------- the block loop

    def run(self, body, idx: np.ndarray):
        """Run ``body(idx)`` (a block) as its first strand, and every strand it forks."""
        self.cancelled = False
        self.strands.clear()
        self.ready.clear()
        root = self._spawn(body, idx, [])
        try:
            while True:
                s = self._pick()
                if s is None:
                    break
                self._resume(s)
        except BaseException:
            self._cancel_all()
            raise
        return root.result

    def _spawn(self, fn, idx, loops) -> _Strand:
        s = _Strand(self, fn, idx, list(loops), self.m.span)
        self.strands.append(s)
        self.ready.append(s)
        return s

    def _pick(self) -> _Strand | None:
        while True:
            if self.ready:
                return self.ready.popleft()
            live = [s for s in self.strands if not s.done]
            for s in live:
                if s.blocked is not None and s.blocked[0]():
                    return s
            if not live:
                return None
            # every strand waits: in a cluster, the other blocks run meanwhile (cluster.py)
            cluster = self.m.cluster
            if cluster is None or not cluster.stall(self.m):
                raise self._deadlock(live)

    def _resume(self, s: _Strand) -> None:
        m = self.m
        m.loops, m.span = s.loops, s.span
        self.current = s
        s.go.release()
        self.back.acquire()  # until the strand waits or ends
        s.span = m.span
        self.current = None
        if s.error is not None:
            m.span = s.span
            raise s.error

    def _cancel_all(self) -> None:
        self.cancelled = True
        for s in self.strands:
            if not s.done:
                s.go.release()
                self.back.acquire()
        self.strands.clear()
        self.ready.clear()

    # -------------------------------------------------------------- inside a strand

    def wait_until(self, ready, describe=None) -> None:
        """Suspend the current strand until ``ready()``; ``describe()`` gives
        a :class:`Blocked` (or a tuple of its first fields: ``(thread, text)``, ``(thread,
        text, hint)``) for the deadlock report (None: not waiting on a barrier; the hint, when
        None or absent, defaults to the mbarrier's)."""
        if ready():
            return
        s = self.current
        s.blocked = (ready, describe)
        s.span = self.m.span
        self.back.release()
        s.go.acquire()
        s.blocked = None
        if self.cancelled:
            raise _Cancelled

    def yield_now(self, site, describe) -> None:
        """A ``test_wait`` of the current strand failed at ``site``: let the other strands run
        first. Failing again at the same site with no barrier changed since is spinning, so
        the strand then waits for a change (and a block where nothing can change is a
        deadlock, not an endless loop)."""
        s = self.current
        if s.spin == (site, self.version):
            seen = self.version
            self.wait_until(lambda: self.version != seen, describe)
            return
        s.spin = (site, self.version)
        if not any(not t.done and t is not s for t in self.strands):
            return
        self.ready.append(s)
        s.span = self.m.span
        self.back.release()
        s.go.acquire()
        if self.cancelled:
            raise _Cancelled

    def fork(self, parts: list) -> list[np.ndarray]:
        """Run each ``(fn, idx)`` of ``parts`` as a strand; wait for all; their results."""
        m = self.m
        children = [self._spawn(fn, idx, m.loops) for fn, idx in parts]
        self.wait_until(lambda: all(c.done for c in children))
        return [c.result for c in children]

    def _deadlock(self, live) -> Fault:
        waits = [s for s in live if s.blocked is not None and s.blocked[1] is not None]
        if not waits:
            waits = live[:1]
            return Fault("the block's strands wait on each other (deadlock)", int(waits[0].idx[0]))
        lines = [s.blocked[1]() for s in waits]
        order, hint = deadlock_order(lines)
        lines, waits = [lines[i] for i in order], [waits[i] for i in order]
        tid = lines[0][0]
        self.m.span = waits[0].span
        hint = hint or _MBARRIER_HINT
        return Fault(
            "deadlock: every thread that has not finished waits, and no arrive can come: "
            + "; ".join(line[1] for line in lines),
            tid,
            hint,
        )


class Blocked(NamedTuple):
    """A blocked wait's line in a deadlock report (what ``describe()`` gives
    :meth:`Strands.wait_until`; a shorter tuple takes the defaults): the thread, the text,
    its hint (None: the report's default), ``lead`` (a rank: the waits of the highest lead the
    report) and ``ahead`` (for lead 1, the threads whose blocked wait leads in its stead)."""

    thread: int
    text: str
    hint: str | None = None
    lead: int = 0
    ahead: frozenset = frozenset()


def deadlock_order(lines, blocks=None) -> tuple[list[int], str | None]:
    """The order to list a deadlock's blocked waits in, the cause first, and the hint of the
    one that leads (None: none of its own). ``lines``: each wait's :class:`Blocked` (or a
    tuple of its first fields); ``blocks``: each one's block, for a
    cluster (a thread number names a thread of its own block only).

    Waits of a higher ``lead`` come first (a stable sort: else the strands' order). Lead 1 is
    a victim's: the threads that arrive on its barrier (``ahead``) ran rounds ahead, so the
    wait one of them is blocked on (the one they passed early, or the next one) leads, with
    lead 1 and the victim's hint; when none of them is blocked (they finished: a wait they
    lack), the victim keeps its place, and its hint is the report's if the leading wait has
    none."""
    blocks = blocks or [None] * len(lines)
    lines = [Blocked(*line) for line in lines]
    given = [line.lead for line in lines]
    hints = [line.hint for line in lines]
    lead, fallback = [g if g != 1 else 0 for g in given], None
    for i, line in enumerate(lines):
        if given[i] != 1:
            continue
        theirs = [
            j
            for j, other in enumerate(lines)
            if given[j] != 1 and blocks[j] == blocks[i] and other.thread in line.ahead
        ]
        if not theirs:
            fallback = fallback or hints[i]
            continue
        j = theirs[0]
        lead[j] = max(lead[j], 1)
        hints[j] = hints[j] or hints[i]
    order = sorted(range(len(lines)), key=lambda i: -lead[i])
    return order, hints[order[0]] if order and hints[order[0]] else fallback


def _parts(m, fn, idx, split: set) -> list:
    """``(fn, idx)``, or one part per warpgroup of ``idx`` when ``fn`` is a branch whose body
    holds a per-warpgroup wait (``split``: the ids of such branches' run functions) and some
    threads of the block take another branch (a branch every thread takes stays whole: a
    ``cta_sync`` in it must find every thread at once)."""
    if id(fn) not in split or idx.size == m.T:
        return [(fn, idx)]
    groups = idx >> 7
    return [(fn, idx[groups == g]) for g in np.unique(groups).tolist()]


def forking_if(m, s: ir.If, first):
    """The run function of the ``if``/``elif`` chain ``s`` (``first``: its link, as the
    machine's ``_If`` builds it) whose branches hold an mbarrier wait: each branch a strand,
    one per warpgroup for a branch that :func:`splits_by_warpgroup`."""
    if m._splits is None:
        m._splits = splits_by_warpgroup(m)
    split, node, link = set(), s, first  # the ids of the splitting branches' run functions
    while True:
        branches = [(node.then_body, link[1])]
        if not isinstance(node.else_body, ir.If):
            branches.append((node.else_body, link[3]))
        split.update(id(fn) for body, fn in branches if body is not None and m._splits(body))
        if not isinstance(node.else_body, ir.If):
            break
        node, link = node.else_body, link[3]

    def run(idx):
        parts, link, rest_idx = [], first, idx
        while rest_idx.size:
            cond, then, span, rest = link
            m.span = span
            c = cond(rest_idx)
            if np.ndim(c) == 0:
                c = np.full(rest_idx.size, bool(c))
            if c.any():
                parts += _parts(m, then, rest_idx[c], split)
                rest_idx = rest_idx[~c]
            if type(rest) is tuple:
                link = rest
                continue
            if rest_idx.size:
                parts += _parts(m, rest, rest_idx, split)
            break
        run_parts = [(f, i) for f, i in parts if f is not None]
        passed = [i for f, i in parts if f is None]
        if len(run_parts) <= 1:
            outs = [f(i) for f, i in run_parts]
        else:
            outs = m.strands.fork(run_parts)
        outs = [o for o in outs + passed if o is not None]
        return outs[0] if len(outs) == 1 else m._join(outs)

    return run
