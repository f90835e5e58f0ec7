"""The lockstep machine: lowered statements compiled to closures over sets of threads.

All threads of a block run together. A compiled statement is ``f(idx) -> idx'``: it executes
for the active threads ``idx`` (sorted linear thread ids) and returns the threads that carry
on with the next statement — fewer when some executed ``break`` or ``continue``. Control
flow splits the set (``If``), iterates it (``For``/``While``, each thread with its own bounds
and trip count, all iterating in lockstep) and joins it again. Blocks run one after another.

Loop semantics follow the source language (Python's ``range``): ``For`` evaluates start and
stop once on entry, and the loop variable takes the values ``start, start+step, ...`` whatever
the body assigns to it. Barriers must be reached by every thread of the block (``cta``) or of
the warp (``warp``) at the same statement; otherwise the run stops with a SimulationError.
"""

from __future__ import annotations

import sys

import numpy as np

from .. import catalog
from ..errors import SimulationError
from ..ir import nodes as ir
from .budget import Budget
from .calls import compile_ptx
from .expr import ExprCompiler, converted, to_bool
from .faults import Fault, cta_barrier_fault, warp_barrier_fault
from .memory import GlobalRegion, LocalArray, as_index, constant_slot, place, thread_xyz
from .numeric import constant, convert, encode
from .printf import parse_format
from .shared import SharedBuffer, SharedMemory
from .skipped_barriers import pass_among, sole_cta_barrier

__all__ = ["Machine", "MAX_LOOP_ITERATIONS"]

#: A loop that iterates this many times in one run is reported as (probably) infinite.
MAX_LOOP_ITERATIONS = 10_000_000

_EMPTY = np.zeros(0, dtype=np.intp)


def _inner_statements(s: ir.Stmt) -> tuple:
    """The statements directly inside ``s`` (only control flow has any in lowered IR)."""
    if type(s) is ir.Seq:
        return s.stmts
    if type(s) is ir.If:
        return (s.then_body,) if s.else_body is None else (s.then_body, s.else_body)
    if type(s) in (ir.For, ir.While):
        return (s.body,)
    return ()


class _Loop:
    __slots__ = ("broken", "continued")

    def __init__(self):
        self.broken: list[np.ndarray] = []
        self.continued: list[np.ndarray] = []


class Machine:
    """One run of one lowered function: storage, compiled body, and the block loop."""

    def __init__(
        self, fn: ir.Function, args: list, sink, trace: bool, budget=None, profile=False,
        cluster=None,
    ):  # fmt: skip
        self.fn = fn
        # the thread-block cluster this machine's block belongs to (tirx/sim/cluster.py: made
        # there for a kernel launched in clusters, else at the first cluster instruction), and
        # the block's rank in it
        self.cluster = cluster
        self.rank = 0
        self.sink = sink
        self.traces = [] if trace else None
        self.copy_traces = [] if trace else None
        # the asynchronous families' state of the block being run (pending copies, groups,
        # barrier objects), by family: made by a family's first statement (see unit)
        self.units: dict[str, object] = {}
        self.strands = None  # tirx.sim.strands.Strands, made by the first blocking wait
        self.barrier_traces = [] if trace else None
        self.trace_clock = 0  # the seq of the last trace record (tirx.sim.trace.stamp)
        self._holds_wait: dict = {}
        self._splits = None  # strands.splits_by_warpgroup of this kernel, made at first need
        gx, gy, gz = fn.launch.grid
        bx, by, bz = fn.launch.block
        self.T = T = bx * by * bz
        self.nwarps = -(-T // 32)
        tid = np.arange(T, dtype=np.intp)
        self.all = tid
        self.lane = (tid % 32).astype(np.int32)
        self.warp = (tid // 32).astype(np.int32)
        self.thread_xyz = [
            (tid % bx).astype(np.int32),
            (tid // bx % by).astype(np.int32),
            (tid // (bx * by)).astype(np.int32),
        ]
        self.block_idx = np.zeros(3, dtype=np.int32)
        self.span = fn.span
        self.loops: list[_Loop] = []
        self.iterations = 0
        self.budget = Budget(fn.name, gx * gy * gz, budget)
        self._bind(args)
        self._allocate()
        # a profiling run's recorder (tirx/sim/recorder.py): it wraps the compiled statements
        # and expressions it counts and the memories report accesses to it; None costs nothing
        self.recorder = None
        if profile:
            from .recorder import Recorder

            self.recorder = Recorder(self)
        self.compiler = ExprCompiler(self)
        self._loop_depth = 0
        self._stmts: dict[int, tuple[ir.Stmt, object]] = {}  # id -> (statement, compiled)
        self._if_links: dict[int, tuple] = {}  # id of an If -> its link of the elif chain
        self.body = self.stmt(fn.body)

    # ----------------------------------------------------------------------- storage

    def _bind(self, args: list) -> None:
        self.param_values: dict = {}
        self.regions: dict = {}
        for p, a in zip(self.fn.params, args):
            if isinstance(p, ir.Buffer):
                self.regions[p] = GlobalRegion(p.name, a)
            else:
                self.param_values[p] = constant(a, p.dtype)

    def _allocate(self) -> None:
        fn = self.fn
        allocs = []
        for buf in fn.allocations:
            if buf.scope is ir.Scope.SHARED:
                if buf not in fn.shared_offsets:
                    raise SimulationError(
                        f"shared buffer '{buf.name}' has no offset in shared_offsets", buf.span
                    )
                allocs.append((int(fn.shared_offsets[buf]), buf.nbytes, buf.name, buf))
        self.shared = SharedMemory(allocs, fn.shared_bytes, self.T)
        self.shared.where = lambda: self.span
        self.locals: list[LocalArray] = []
        for buf in fn.allocations:
            if buf.scope is ir.Scope.SHARED:
                off = int(fn.shared_offsets[buf])
                self.regions[buf] = SharedBuffer(self.shared, buf.name, off, buf.nbytes)
            elif buf.scope is ir.Scope.LOCAL:
                self.regions[buf] = arr = LocalArray(buf.name, buf.nbytes, self.T)
                self.locals.append(arr)
        self.variables: dict = {}
        for v in fn.variables:
            self.variable(v)

    def unit(self, family: str, make=None):
        """The state an asynchronous family keeps per block (its pending copies, its groups,
        its barrier objects), made by ``make(machine)`` at the family's first statement; None
        when none was made and ``make`` is None. A unit has ``reset()`` (a new block starts)
        and ``finish_block()`` (the block ends: what it left in flight). Families that work
        together reach each other's unit by its family name, through the methods its module
        documents (a tensor copy completes its transaction bytes on the mbarrier unit). A
        concept of the ISA that several families share is a unit named after the concept,
        made by the stage module that owns it (:mod:`tirx.sim.bulk_groups`)."""
        found = self.units.get(family)
        if found is None and make is not None:
            found = self.units[family] = make(self)
        return found

    def use_strands(self) -> None:
        """A statement that may wait for other warps was compiled: the block runs as strands
        (:mod:`tirx.sim.strands`), so the other warps run while one waits."""
        if self.strands is None:
            from .strands import Strands

            self.strands = Strands(self)

    def variable(self, v: ir.Var) -> np.ndarray:
        arr = self.variables.get(v)
        if arr is None:
            arr = self.variables[v] = np.zeros(self.T, dtype=convert(np.zeros(1), v.dtype).dtype)
        return arr

    def region(self, buf: ir.Buffer, compiler):
        r = self.regions.get(buf)
        if r is None:
            raise compiler.error(
                f"buffer '{buf.name}' ({buf.scope.value}) is neither a parameter nor an "
                f"allocation of '{self.fn.name}'"
            )
        return r

    def shared_base(self, buf: ir.Buffer, compiler) -> int:
        if buf.scope is not ir.Scope.SHARED or buf not in self.fn.shared_offsets:
            raise compiler.error(f"SharedAddress of '{buf.name}', which is not a shared allocation")
        return int(self.fn.shared_offsets[buf])

    # -------------------------------------------------------------------------- run

    def run(self) -> int:
        gx, gy, gz = self.fn.launch.grid
        blocks = 0
        for bz in range(gz):
            for by in range(gy):
                for bx in range(gx):
                    self.start_block((bx, by, bz))
                    try:
                        self.run_block()
                    except Fault as f:
                        raise self._error(f) from None
                    blocks += 1
                    self.budget.done = blocks
        return blocks

    def start_block(self, coords) -> None:
        """Make the machine's state that of a new block at ``coords`` (x, y, z)."""
        self.block_idx[:] = coords
        self.budget.where = tuple(coords)
        try:
            self.budget.check()
        except Fault as f:
            raise self._error(f) from None
        self.shared.reset()
        for arr in self.locals:
            arr.reset()
        for unit in self.units.values():
            unit.reset()
        for arr in self.variables.values():
            arr.fill(0)
        self.loops.clear()

    def run_block(self) -> None:
        """Run the block started by :meth:`start_block` to its end (a Fault stops it)."""
        if self.strands is not None:  # warps that wait on mbarriers
            self.strands.run(self.body, self.all)
        else:
            self.body(self.all)
        for unit in self.units.values():  # what the block leaves in flight
            unit.finish_block()

    def _error(self, f: Fault) -> SimulationError:
        block, shape, tid = tuple(int(x) for x in self.block_idx), self.fn.launch.block, f.tid
        err = SimulationError(f"{f.message} [{place(block, tid, shape)}]", self.span, f.hint)
        err.block, err.thread = block, thread_xyz(tid, shape)  # as fields too
        err.warp, err.lane = tid // 32, tid % 32
        return err

    def _norm(self, idx: np.ndarray) -> np.ndarray:
        return self.all if idx.size == self.T else idx

    def _join(self, parts: list[np.ndarray]) -> np.ndarray:
        parts = [p for p in parts if p.size]
        if not parts:
            return _EMPTY
        if len(parts) == 1:
            return parts[0]
        return self._norm(np.sort(np.concatenate(parts)))

    def _tick(self, tid: int) -> None:
        self.budget.check(tid)
        self.iterations += 1
        if self.iterations > MAX_LOOP_ITERATIONS:
            raise Fault(
                f"loops ran more than {MAX_LOOP_ITERATIONS} iterations: probably an infinite loop",
                tid,
            )

    # -------------------------------------------------------------------- statements

    def stmt(self, s: ir.Stmt):
        """The compiled ``s``, built children first from explicit work lists: a first pass
        top-down records each statement's loop depth and span, a second builds bottom-up, so
        statement nesting never needs Python recursion to compile."""
        hit = self._stmts.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        order, todo = [], [(s, self._loop_depth, self.compiler.span)]
        while todo:
            node, depth, span = todo.pop()
            span = getattr(node, "span", None) or span
            order.append((node, depth, span))
            if type(node) is ir.For:  # its variable's values, before its body is built
                self.compiler.bounds.loop(node.var, node.start, node.stop, node.step)
            inner = depth + isinstance(node, (ir.For, ir.While))
            todo.extend((k, inner, span) for k in _inner_statements(node))
        saved = self._loop_depth
        try:
            for node, depth, span in reversed(order):  # every statement after its children
                hit = self._stmts.get(id(node))
                if hit is not None and hit[0] is node:
                    continue
                self._loop_depth, self.compiler.span = depth, span
                method = getattr(self, "_" + type(node).__name__, None)
                if method is None:
                    method = self._family_rule(type(node).__name__)
                if method is None:
                    raise self.compiler.error(
                        f"the simulator cannot execute {type(node).__name__} statements: it "
                        f"runs only the lowered IR",
                        "run the function through tirx's lowering first",
                    )
                compiled = method(node)
                if self.recorder is not None:
                    compiled = self.recorder.statement(node, compiled)
                self._stmts[id(node)] = (node, compiled)
        finally:
            self._loop_depth = saved
        return self._stmts[id(s)][1]

    def _family_rule(self, name: str):
        """A family's ``compile_<name>(machine, node)`` for its statement class (the
        catalog's ``Row.nodes``: atomics, CTA reductions), bound to this machine, or None."""
        row = catalog.row_of_node(name)
        rule = catalog.rule(row, "sim", "compile_" + name) if row is not None else None
        return (lambda node: rule(self, node)) if rule is not None else None

    def _Seq(self, s: ir.Seq):
        body = [self.stmt(x) for x in s.stmts]

        def run(idx):
            for f in body:
                idx = f(idx)
                if not idx.size:
                    return idx
            return idx

        return run

    def _Assign(self, s: ir.Assign):
        if s.var in self.param_values:
            raise self.compiler.error(f"assignment to the parameter '{s.var.name}'")
        arr = self.variable(s.var)
        f = converted(self.compiler.compile(s.value), s.value.dtype, s.var.dtype)
        all_, span, m = self.all, s.span, self

        def run(idx):
            m.span = span
            v = f(idx)
            if idx is all_:
                arr[...] = v
            else:
                arr[idx] = v
            return idx

        return run

    def _Store(self, s: ir.Store):
        region = self.region(s.buffer, self.compiler)
        d, span, m, v = s.dtype, s.span, self, s.value
        if isinstance(v, ir.Load) and v.dtype == d and d.kind == "float" and d.bits < 32:
            # a 16- or 8-bit float copied into its own type: the bits as they are (a NaN's
            # payload too), as the generated C copies them
            fv, enc = self.compiler.load_bits(v), _as_they_are
        else:
            fv, enc = converted(self.compiler.compile(v), v.dtype, d), encode
        local = s.buffer.scope is ir.Scope.LOCAL
        slot = constant_slot(s.index) if local else None
        if slot is not None:  # a register named by its slot (x[3] = ...)

            def run_slot(idx):
                m.span = span
                region.store_slot(slot, enc(fv(idx), d), d, idx, idx)
                return idx

            return run_slot
        fi = self.compiler.compile(s.index)

        def run(idx):
            m.span = span
            index = as_index(fi(idx), idx.size)
            bits = enc(fv(idx), d)
            if local:
                region.store(index, bits, d, idx, idx)
            else:
                region.store(index, bits, d, idx)
            return idx

        return run

    def _If(self, s: ir.If):
        """An ``if``/``elif``/``else`` chain runs as a loop over its links (an ``elif`` is an
        ``If`` in ``else_body``): the threads that fail one condition go on to the next, so
        a chain of thousands of ``elif`` needs no recursion."""
        cond = to_bool(self.compiler.compile(s.cond), s.cond.dtype)
        then = self.stmt(s.then_body)
        other = s.else_body
        if isinstance(other, ir.If):
            rest = self._if_links[id(other)]  # compiled before s: children come first
        else:
            rest = self.stmt(other) if other is not None else None
        first = self._if_links[id(s)] = (cond, then, s.span, rest)
        m = self
        if self.strands is not None:  # an mbarrier wait inside: its branches are strands
            from .strands import forking_if, holds_wait

            if holds_wait(s, self._holds_wait):
                return forking_if(self, s, first)

        def run(idx):
            outs = []
            link = first
            while True:
                cond, then, span, rest = link
                m.span = span
                c = cond(idx)
                if np.ndim(c) == 0:
                    c = np.full(idx.size, bool(c))
                if c.all():
                    outs.append(then(idx))
                    break
                if c.any():
                    outs.append(then(idx[c]))
                    idx = idx[~c]
                if type(rest) is tuple:
                    link = rest
                    continue
                outs.append(rest(idx) if rest is not None else idx)
                break
            return outs[0] if len(outs) == 1 else m._join(outs)

        return run

    def _loop_body(self, body: ir.Stmt):
        self._loop_depth += 1
        try:
            return self.stmt(body)
        finally:
            self._loop_depth -= 1

    def _For(self, s: ir.For):
        if not isinstance(s.step, int) or s.step == 0:
            raise self.compiler.error(f"loop step must be a nonzero int, not {s.step!r}")
        if s.kind is ir.LoopKind.VECTORIZED:  # T.vectorized: data pointers aligned to vectors
            from .pointer_alignment import check_vector_alignment

            check_vector_alignment(s, self.regions)
        v = s.var
        arr = self.variable(v)
        start = converted(self.compiler.compile(s.start), s.start.dtype, v.dtype)
        stop = converted(self.compiler.compile(s.stop), s.stop.dtype, v.dtype)
        body = self._loop_body(s.body)
        step = constant(s.step, v.dtype)
        less = np.less if s.step > 0 else np.greater
        all_, span, m = self.all, s.span, self

        def run(idx):
            m.span = span
            n = idx.size
            cur = np.array(np.broadcast_to(start(idx), n), dtype=arr.dtype)
            end = np.array(np.broadcast_to(stop(idx), n), dtype=arr.dtype)
            act = idx
            frame = _Loop()
            m.loops.append(frame)
            try:
                while True:
                    keep = less(cur, end)
                    if not keep.all():
                        act, cur, end = m._norm(act[keep]), cur[keep], end[keep]
                    if not act.size:
                        break
                    m._tick(int(act[0]))
                    if act is all_:
                        arr[...] = cur
                    else:
                        arr[act] = cur
                    frame.broken.clear()
                    frame.continued.clear()
                    out = body(act)
                    if frame.broken or frame.continued:
                        out = m._join([out, *frame.continued])
                    if out.size != act.size:
                        pos = np.searchsorted(act, out)
                        act, cur, end = out, cur[pos], end[pos]
                    cur = cur + step
                    m.span = span
            finally:
                m.loops.pop()
            return idx

        return run

    def _While(self, s: ir.While):
        cond = to_bool(self.compiler.compile(s.cond), s.cond.dtype)
        body = self._loop_body(s.body)
        span, m = s.span, self

        def run(idx):
            act = idx
            frame = _Loop()
            m.loops.append(frame)
            try:
                while True:
                    m.span = span
                    c = cond(act)
                    if np.ndim(c) == 0:
                        if not c:
                            break
                    elif not c.all():
                        act = m._norm(act[c])
                    if not act.size:
                        break
                    m._tick(int(act[0]))
                    frame.broken.clear()
                    frame.continued.clear()
                    act = body(act)
                    if frame.continued:
                        act = m._join([act, *frame.continued])
                    if not act.size:
                        break
            finally:
                m.loops.pop()
            return idx

        return run

    def _jump(self, s, kind: str):
        if self._loop_depth == 0:
            raise self.compiler.error(f"'{kind}' outside a loop")
        m = self

        def run(idx):
            frame = m.loops[-1]
            (frame.broken if kind == "break" else frame.continued).append(idx)
            return _EMPTY

        return run

    def _Break(self, s: ir.Break):
        return self._jump(s, "break")

    def _Continue(self, s: ir.Continue):
        return self._jump(s, "continue")

    def _Barrier(self, s: ir.Barrier):
        if s.scope not in ("cta", "warp"):
            raise self.compiler.error(f"unknown barrier scope {s.scope!r} (cta or warp)")
        span, m, T = s.span, self, self.T

        # warps that skip the kernel's one barrier outside loops exit (skipped_barriers.py);
        # whether it is that one is asked the first time part of the block reaches it
        in_loop, skippable = bool(self._loop_depth), []

        def cta(idx):
            m.span = span
            if idx.size != T:
                if not skippable:
                    skippable.append(not in_loop and sole_cta_barrier(m.fn))
                if not skippable[0]:
                    raise cta_barrier_fault(m, idx)
                pass_among(m, idx)
                return idx
            m.shared.barrier()
            return idx

        def warp(idx):
            m.span = span
            fault = warp_barrier_fault(m, idx)
            if fault is not None:
                raise fault
            m.shared.warp_barrier(np.unique(idx >> 5))
            return idx

        return cta if s.scope == "cta" else warp

    def _Printf(self, s: ir.Printf):
        try:
            fmt = parse_format(s.fmt)
        except ValueError as e:
            raise self.compiler.error(str(e)) from None
        if fmt.n_args != len(s.args):
            raise self.compiler.error(
                f"printf format {s.fmt!r} takes {fmt.n_args} arguments, {len(s.args)} given"
            )
        args = [self.compiler.compile(a) for a in s.args]
        bits = tuple(a.dtype.bits for a in s.args)
        span, m = s.span, self

        def run(idx):
            m.span = span
            n = idx.size
            cols = [np.broadcast_to(f(idx), n).tolist() for f in args]
            lines = [fmt.render(tuple(c[i] for c in cols), bits) for i in range(n)]
            (m.sink or sys.stdout).write("".join(lines))
            return idx

        return run

    def _PtxCall(self, s: ir.PtxCall):
        f = compile_ptx(self, self.compiler, s)

        def run(idx):
            f(idx)
            return idx

        return run


def _as_they_are(bits, d):
    """A store's ``encode`` for bits copied from memory of the same type."""
    return bits
