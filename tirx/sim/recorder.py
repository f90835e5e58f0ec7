"""The recorder a profiling run gives the machine: it counts, per source line, the warp-level
instructions executed and what their memory accesses cost (:mod:`tirx.sim.access_cost`).

The machine makes one only for ``run(..., profile=True)`` (:class:`tirx.sim.machine.Machine`).
It reaches the run in three ways, and a run without it pays nothing but a ``None`` test at
each memory access and at compile time:

* the machine hands it every compiled statement and expression (:meth:`Recorder.statement`,
  :meth:`Recorder.expression`); it wraps the ones it counts in a closure that counts the warps
  executing them, and returns the others as they are;
* the memories call it on every access (``recorder`` of the global regions and the shared
  memory): element loads and stores, ldmatrix/stmatrix rows; accesses of local arrays are
  counted from their ``Load``/``Store`` nodes (an instruction's register operands, which live
  in local arrays too, are no memory instructions);
* a family whose instruction moves memory by other paths reports it: cp.async its global
  source and shared destination per thread (``machine.recorder.async_copy``), the bulk and
  tensor copies the bytes their engine moves (``machine.recorder.bulk_copy``).

Everything is attributed to the statement executing (its span; ``machine.span`` while it
runs): its source line. A
``T.vectorized`` copy (:func:`tirx.ir.vector_copy.vector_copy`), which the GPU runs as one
vector access per thread, runs element by element in the simulator; its accesses are merged
back into one access of the vector's size per thread before they are costed.
"""

from __future__ import annotations

import numpy as np

from .. import catalog
from ..dtypes import is_float
from ..ir import nodes as ir
from ..ir.vector_copy import vector_copy
from .access_cost import Cost, global_cost, shared_cost, warp_count
from .memory import GlobalRegion
from .profile import MEMORY_INSTR, Access, Instr, LineProfile, SimProfile, Space

__all__ = ["Recorder"]

_NO_SPAN = (None, 0)


class _Line:
    __slots__ = ("instructions", "memory")

    def __init__(self):
        self.instructions: dict = {}
        self.memory: dict = {}


class Recorder:
    """Counts of one profiling run, by (file, line)."""

    def __init__(self, machine):
        self.m = machine
        self.lines: dict[tuple, _Line] = {}
        self.vector: list | None = None  # accesses of the vectorized copy running, if one is
        for region in machine.regions.values():
            if isinstance(region, GlobalRegion):
                region.recorder = self
        machine.shared.recorder = self

    # ------------------------------------------------------------------ bookkeeping

    def _here(self, span=None) -> _Line:
        span = span or self.m.span
        key = (span.file, span.line) if span is not None else _NO_SPAN
        line = self.lines.get(key)
        if line is None:
            line = self.lines[key] = _Line()
        return line

    def _warps(self, idx: np.ndarray) -> int:
        return self.m.nwarps if idx is self.m.all else warp_count(idx)

    def count(self, kind, idx: np.ndarray, line: _Line | None = None) -> None:
        """Threads ``idx`` executed one instruction of class ``kind``: one per warp."""
        n = self._warps(idx)
        if n:
            counts = (line or self._here()).instructions
            counts[kind] = counts.get(kind, 0) + n

    def _add(self, space: Space, access: Access, cost: Cost, line: _Line | None = None):
        memory = (line or self._here()).memory
        key = (space, access)
        memory[key] = memory.get(key, Cost()) + cost

    # ------------------------------------------------------------------ compiled code

    def statement(self, node: ir.Stmt, f):
        """``f`` (node's compiled closure), counting what it executes if it is counted."""
        kind = None
        if type(node) is ir.Store and node.buffer.scope is ir.Scope.LOCAL:
            return self._local(node, f, Access.STORE)
        if type(node) is ir.Barrier:
            kind = Instr.BARRIER
        elif type(node) is ir.PtxCall:
            text = node.instruction.strip()
            kind = catalog.mnemonic_of(text) or text.split(".", 1)[0]
        elif type(node) is ir.Printf:
            kind = Instr.PRINTF
        elif type(node) is ir.For and node.kind is ir.LoopKind.VECTORIZED:
            return self._vector_loop(node, f) if vector_copy(node) is not None else f
        else:
            row = catalog.row_of_node(type(node).__name__)
            kind = row.folder if row is not None else None
        if kind is None:
            return f
        count, span = self.count, getattr(node, "span", None)

        def counted(idx):
            count(kind, idx, self._here(span))
            return f(idx)

        return counted

    def expression(self, e: ir.Expr, f):
        """``f`` (e's compiled evaluator), counting the warps that evaluate it if ``e`` is an
        instruction: arithmetic, comparisons, selects, conversions, a family's call. Loads are
        counted by the memories; constants, variables and addresses are no instructions."""
        cls = type(e)
        if cls is ir.Load and e.buffer.scope is ir.Scope.LOCAL:
            return self._local(e, f, Access.LOAD)
        if cls is ir.BinOp:
            kind = Instr.FLOAT if is_float(e.dtype) else Instr.INT
        elif cls is ir.Cmp:
            kind = Instr.FLOAT if is_float(ir.promote(e.a.dtype, e.b.dtype)) else Instr.INT
        elif cls in (ir.Logic, ir.Not, ir.Select):
            kind = Instr.INT
        elif cls is ir.Cast:
            kind = Instr.CONVERT if e.dtype != e.value.dtype else None
        else:
            row = catalog.row_of_node(cls.__name__)
            kind = row.folder if row is not None else None
        if kind is None:
            return f
        count = self.count

        def counted(idx):
            count(kind, idx)
            return f(idx)

        return counted

    # ------------------------------------------------------------------ memory accesses

    def global_access(self, offsets, size: int, tids, store: bool) -> None:
        """Threads ``tids`` load or store ``size`` bytes at byte ``offsets`` of a tensor."""
        self._access(Space.GLOBAL, offsets, size, tids, store)

    def shared_access(self, addresses, size: int, tids, store: bool, rows: bool = False):
        """Threads ``tids`` load or store ``size`` bytes at shared ``addresses``; ``rows``:
        the rows of an ldmatrix/stmatrix (the instruction is its family's, not an ld/st)."""
        self._access(Space.SHARED, addresses, size, tids, store, counted=not rows)

    def _local(self, node, f, access: Access):
        """``f``, a Load or Store of a local array, counting it and its bytes."""
        kind, size = MEMORY_INSTR[(Space.LOCAL, access)], node.dtype.bytes
        span = getattr(node, "span", None)

        def counted(idx):
            line = self._here(span)
            warps = self._warps(idx)
            counts = line.instructions
            counts[kind] = counts.get(kind, 0) + warps
            self._add(Space.LOCAL, access, Cost(warps, 0, 0, size * idx.size), line)
            return f(idx)

        return counted

    def async_copy(self, src_offsets, dst_addresses, size: int, tids) -> None:
        """Threads ``tids`` each copy ``size`` bytes from byte ``src_offsets`` of a global
        tensor (-1: a zero-fill reading nothing) to shared ``dst_addresses`` (cp.async; its
        instruction is counted with its family's)."""
        tids = np.asarray(tids)
        src_offsets = np.asarray(src_offsets, dtype=np.int64)
        reads = src_offsets >= 0
        line = self._here()
        read = global_cost(tids[reads], src_offsets[reads], size)
        self._add(Space.GLOBAL, Access.LOAD, read, line)
        self._add(Space.SHARED, Access.STORE, shared_cost(tids, dst_addresses, size), line)

    def bulk_copy(self, src: str, dst: str, nbytes: int) -> None:
        """The copy engine moves ``nbytes`` from space ``src`` to ``dst`` (bulk and tensor
        copies: no warp-level request, so only their bytes count)."""
        line = self._here()
        self._add(Space(src), Access.LOAD, Cost(bytes=nbytes), line)
        self._add(Space(dst), Access.STORE, Cost(bytes=nbytes), line)

    def _access(self, space, where, size, tids, store, counted=True) -> None:
        access = Access.STORE if store else Access.LOAD
        tids = np.asarray(tids)
        where = np.broadcast_to(np.asarray(where, dtype=np.int64), tids.shape)
        if self.vector is not None:  # inside a vectorized copy: merged when it ends
            self.vector.append((self._here(), space, access, tids, where.copy(), size))
            return
        self._cost(self._here(), space, access, tids, where, size, counted)

    def _cost(self, line, space, access, tids, where, size, counted=True) -> None:
        if counted:
            self.count(MEMORY_INSTR[(space, access)], tids, line)
        cost = (global_cost if space is Space.GLOBAL else shared_cost)(tids, where, size)
        self._add(space, access, cost, line)

    # ------------------------------------------------------------------ vectorized copies

    def _vector_loop(self, node: ir.For, f):
        def run(idx):
            outer, self.vector = self.vector, []
            try:
                return f(idx)
            finally:
                pending, self.vector = self.vector, outer
                self._merge(pending)

        return run

    def _merge(self, pending: list) -> None:
        """Cost the element accesses of one vectorized copy as one access per thread of the
        elements it touched (consecutive, as the lowering proved)."""
        groups: dict = {}
        for line, space, access, tids, where, size in pending:
            groups.setdefault((id(line), space, access, size), (line, []))[1].append((tids, where))
        for (_, space, access, size), (line, parts) in groups.items():
            tids = np.concatenate([t for t, _ in parts])
            where = np.concatenate([w for _, w in parts])
            order = np.lexsort((where, tids))
            tids, where = tids[order], where[order]
            starts = np.flatnonzero(np.concatenate(([True], tids[1:] != tids[:-1])))
            n = np.diff(np.append(starts, tids.size))
            nbytes = int(n[0]) * size
            if (n == n[0]).all() and (where[starts + n - 1] - where[starts] == nbytes - size).all():
                self._cost(line, space, access, tids[starts], where[starts], nbytes)
            else:  # not one vector per thread after all: the elements as they came
                for t, w in parts:
                    self._cost(line, space, access, t, w, size)

    # ------------------------------------------------------------------ result

    def result(self, blocks: int) -> SimProfile:
        fn = self.m.fn
        file = fn.span.file if fn.span is not None else None
        lines = [
            LineProfile(f, n, dict(v.instructions), dict(v.memory))
            for (f, n), v in self.lines.items()
        ]
        lines.sort(key=lambda lp: (lp.file != file, str(lp.file), lp.line))
        return SimProfile(fn.name, file, blocks, tuple(lines))
