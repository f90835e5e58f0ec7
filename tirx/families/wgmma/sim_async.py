"""The asynchronous side of ``wgmma``: groups, what is in flight, and the fences, from the PTX
ISA (9.7.15.4 "Async Proxy", 9.7.15.7 "wgmma.fence", "wgmma.commit_group",
"wgmma.wait_group"; the memory consistency model's proxies).

* ``wgmma.mma_async`` is issued and returns; it is **in flight** until a ``wgmma.wait_group``
  of each issuing thread covers its group. ``commit_group`` closes the thread's uncommitted
  mma_asyncs into a new group (possibly empty); ``wait_group N`` completes every group of the
  thread except its ``N`` newest. Groups are per thread (the 128 threads of a warpgroup
  execute these statements together, so theirs stay in step).
* In flight, its accumulator registers (and, in the rs form, A's registers) belong to the
  tensor core: reading or writing one by any statement is a fault ("accessing the
  accumulator register or the input register containing the fragments of matrix A ...
  without first performing a wgmma.wait_group ... is undefined"); another mma_async may use
  them only as the accumulator of the same shape into the same registers, which the ISA
  orders by default, or as its A. The simulator computes the result at issue; no statement
  can see it early (:mod:`tirx.families.wgmma.sim_registers` keeps the registers' state).
* ``wgmma.fence`` must come before the first mma_async of a warpgroup and between any access
  of a thread to an accumulator register or one of A's registers and a later mma_async using
  it (fault otherwise, naming the access's line).
* wgmma reads shared memory through the async proxy: bytes stored by the generic proxy
  (stores, stmatrix, landed ``cp.async``: the ISA lists cp.async.bulk{.tensor} and wgmma as
  async-proxy operations, not cp.async) must be published by ``fence.proxy.async`` (or its
  ``.shared::cta`` form) in the storing thread, that fence ordered before the issue
  (:meth:`tirx.sim.proxy.AsyncProxy.check_read`), and the stores ordered before every warp
  of the issuing warpgroup (the race rules of :mod:`tirx.sim.shared`). Bytes the async proxy
  wrote (TMA) need no proxy fence.
* Until the mma_async's group is waited for, the shared bytes it reads may not be written
  (a store, stmatrix, a cp.async or TMA copy issued onto them): a fault naming both lines.
  Once every issuing thread has waited, the reads count as the warpgroup's tensor core's (an
  agent of :mod:`tirx.sim.order`), observed by each thread of the warpgroup: those threads
  may write the bytes, any other thread needs a barrier (or an mbarrier chain) after one of
  them first.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ...ir import nodes as ir
from ...sim.faults import Fault
from ...sim.memory import ONES, thread_name
from ...sim.shared import line_of
from ...sim.trace import record_copy
from .sim_forms import ROWS, MmaAsync
from .sim_layout import operand_bytes, operand_chunks
from .sim_math import accumulator_map, element_values, product, register_bytes
from .sim_registers import WAIT_HINT, Register, RegisterGuard, Registers

__all__ = ["WgmmaState", "RegisterGuard", "WgmmaEvent"]

_FENCE = 'T.ptx["wgmma.fence.sync.aligned"]()'
_WAIT_HINT = WAIT_HINT
_PAST_TILE_HINT = (
    "the descriptor's rows run past the end of the tile it starts in: check its start row "
    "(the operand's rows, 64 for A, N for B, must fit in the tile from there) and its stride "
    "byte offset (SBO, the step between 8-row groups)"
)


class WgmmaEvent(enum.Enum):
    """What one wgmma statement did (the ``event`` of its :class:`tirx.sim.trace.CopyTrace`)."""

    MMA = "mma_async"
    COMMIT = "commit_group"
    WAIT = "wait_group"
    FENCE = "fence"


@dataclass(eq=False)
class _Op:
    """One warpgroup's mma_async, from issue until every thread has waited for it."""

    serial: int
    span: object
    n: int
    acc: Registers
    a_regs: Registers | None  # A's registers (rs), else None
    tids: np.ndarray  # the 128 issuing threads
    group: np.ndarray  # per thread, -1 until committed
    done: np.ndarray  # per thread: a wait covered it
    reads: np.ndarray  # the shared bytes it reads (unique)


class WgmmaState:
    """The in-flight mma_asyncs, groups and fences of the block being run."""

    def __init__(self, machine):
        self.m = machine
        size = machine.shared.data.size
        self.committed = np.zeros(machine.T, dtype=np.int64)
        self.fenced = np.zeros(machine.T, dtype=bool)  # executed wgmma.fence in this block
        self.live: dict[int, _Op] = {}
        self.serials = 0
        self.reading = np.zeros(size, dtype=np.int32)  # in-flight mma_asyncs reading a byte
        self.reader = np.full(size, -1, dtype=np.int32)  # the newest of them
        self.guards: dict[int, RegisterGuard] = {}
        self.proxy = machine.shared.async_proxy()  # the tensor core reads through the async proxy
        machine.shared.observers.append(self)

    def reset(self) -> None:
        self.committed.fill(0)
        self.fenced.fill(False)
        self.live.clear()
        self.reading.fill(0)
        self.reader.fill(-1)
        for g in self.guards.values():
            g.reset()

    def finish_block(self) -> None:
        """mma_asyncs still in flight when the block ends are not reported (docs/simulator.md)."""

    def registers(self, compiler, op: ir.RegVector, what: str) -> Registers:
        """The 32-bit local registers of an mma_async operand (``what``: "accumulator" or
        "A"), each array watched by a :class:`RegisterGuard` from now on."""
        regs = []
        for reg in op.regs:
            if not isinstance(reg, ir.LocalReg) or reg.buffer.scope is not ir.Scope.LOCAL:
                raise compiler.error(f"wgmma.mma_async's {what} registers must be local slots")
            if reg.dtype.bits != 32:
                raise compiler.error(
                    f"{what} register {reg.buffer.name}[{reg.slot}] is {reg.dtype}; wgmma's "
                    f"{what} registers are 32-bit"
                )
            array = self.m.region(reg.buffer, compiler)
            if not 0 <= reg.slot < array.nbytes // 4:
                raise compiler.error(
                    f"{what} register {reg.buffer.name}[{reg.slot}] is outside the buffer's "
                    f"{array.nbytes // 4} 32-bit slots"
                )
            guard = self.guards.get(id(array)) or RegisterGuard(self, array)
            self.guards[id(array)] = guard
            regs.append(Register(guard, reg.slot, f"{reg.buffer.name}[{reg.slot}]"))
        return Registers(tuple(regs), what)

    # ------------------------------------------------------------------- the statements

    def fence(self, idx: np.ndarray, stmt) -> None:
        self.fenced[idx] = True
        for g in self.guards.values():
            g.touched[idx] = 0
        self._trace(stmt, WgmmaEvent.FENCE, idx)

    def commit(self, idx: np.ndarray, stmt) -> None:
        mine = np.zeros(self.m.T, dtype=bool)
        mine[idx] = True
        for op in self.live.values():
            sel = mine[op.tids] & (op.group < 0)
            op.group[sel] = self.committed[op.tids[sel]]
        groups = self.committed[idx].copy()
        self.committed[idx] += 1
        self._trace(stmt, WgmmaEvent.COMMIT, idx, groups=groups)

    def wait(self, idx: np.ndarray, n: int, stmt) -> None:
        limit = np.full(self.m.T, -1, dtype=np.int64)
        limit[idx] = self.committed[idx] - n
        completed = np.zeros(self.m.T, dtype=np.int64)
        for op in list(self.live.values()):
            now = (op.group >= 0) & (op.group < limit[op.tids]) & ~op.done
            if not now.any():
                continue
            tids = op.tids[now]
            completed[tids] += 1
            for r in op.acc.regs:
                held = r.guard.busy[tids, r.word]
                r.guard.busy[tids, r.word] = np.where(held == op.serial, -1, held)
            for r in op.a_regs.regs if op.a_regs is not None else ():
                r.guard.a_count[tids, r.word] -= 1
                idle = r.guard.a_count[tids, r.word] == 0
                r.guard.a_last[tids[idle], r.word] = -1
            op.done |= now
            if op.done.all():
                self._release(op)
        self._trace(stmt, WgmmaEvent.WAIT, idx, landed=completed[idx])

    def _release(self, op: _Op) -> None:
        """Every issuing thread waited: the reads are done, made by the warpgroup's tensor
        core (an agent of the simulator's order) and observed by each issuing thread; any
        other thread needs a barrier (or an mbarrier chain) after one of them to write."""
        del self.live[op.serial]
        self.reading[op.reads] -= 1
        m, g = self.m, int(op.tids[0]) >> 7
        agent = m.shared.agent(
            ("wgmma", g),
            f"the tensor core (warpgroup {g})",
            "a thread of the warpgroup may write the bytes once its wgmma.wait_group covered "
            "the mma_async; any other thread needs T.cuda.cta_sync() (or an mbarrier arrive "
            "by a thread of the warpgroup and its own wait) after that wait",
        )
        here, m.span = m.span, op.span
        try:
            m.shared.reads_done(op.reads, agent, m.shared.site(), op.tids)
            if m.shared.cluster is not None:  # a peer's write must come after them too
                m.shared.cluster.tensor_core_read(op.reads, int(op.tids[0]))
        finally:
            m.span = here

    def issue(self, stmt, form: MmaAsync, regs, tids, descs, trans, scale_d: bool, sa, sb):
        """One warpgroup's mma_async: threads ``tids``, ``regs`` its accumulator and A's
        registers (None: A from shared memory), ``descs`` the descriptors of A (None in the
        rs form) and B, ``trans`` whether each is MN-major."""
        acc, a_regs = regs
        self._check_fences(stmt, (acc, a_regs), tids)
        self._check_chain(form, acc, a_regs, tids)
        a_rows = operand_chunks(descs[0], ROWS, trans[0]) if a_regs is None else None
        b_rows = operand_chunks(descs[1], form.n, trans[1])
        reads = self._check_shared(stmt, tids, a_rows, b_rows)
        data = self.m.shared.data
        if a_regs is None:
            a_raw = operand_bytes(data, a_rows, trans[0])
        else:
            fix = "write A's registers (then wgmma.fence) before the mma_async"
            a_raw = register_bytes(a_regs.bits(tids, "reads", fix))
        a = element_values(a_raw, form.a)
        b = element_values(operand_bytes(data, b_rows, trans[1]), form.b)
        rows, cols = accumulator_map(form.n)
        old = None
        if scale_d:
            old = np.zeros((ROWS, form.n), dtype=np.int64 if form.integer else np.float64)
            old[rows, cols] = acc.read(tids, form.acc)
        d = product(form, a, b, sa, sb, old)
        acc.write(tids, d[rows, cols], form.acc)
        serial = self.serials
        self.serials += 1
        self.live[serial] = _Op(
            serial,
            stmt.span,
            form.n,
            acc,
            a_regs,
            tids.copy(),
            np.full(tids.size, -1, dtype=np.int64),
            np.zeros(tids.size, dtype=bool),
            reads,
        )
        for r in acc.regs:
            r.guard.busy[tids, r.word] = serial
        for r in a_regs.regs if a_regs is not None else ():
            r.guard.a_count[tids, r.word] += 1
            r.guard.a_last[tids, r.word] = serial
        self.reading[reads] += 1
        self.reader[reads] = serial
        self._trace(stmt, WgmmaEvent.MMA, tids)

    # ----------------------------------------------------------------------- checks

    def _check_fences(self, stmt, regs, tids) -> None:
        never = ~self.fenced[tids]
        if never.any():
            t = int(tids[int(np.flatnonzero(never)[0])])
            raise Fault(
                f"wgmma.mma_async at {line_of(stmt.span)} is the first of warpgroup {t >> 7} "
                f"and no wgmma.fence came before it",
                t,
                f"put {_FENCE} (executed by the whole warpgroup) before the first mma_async",
            )
        sites = self.m.shared.sites
        for group in regs:
            for r in group.regs if group is not None else ():
                mark = r.guard.touched[tids, r.word]
                if mark.any():
                    k = int(np.flatnonzero(mark)[0])
                    line = line_of(sites[abs(int(mark[k]))])
                    verb = "written" if mark[k] > 0 else "read"
                    label = "accumulator" if group.what == "accumulator" else "A register"
                    raise Fault(
                        f"{label} {r.name} of the wgmma.mma_async at "
                        f"{line_of(stmt.span)} was {verb} at {line} after this thread's last "
                        "wgmma.fence: the tensor core may see the register before that access",
                        int(tids[k]),
                        f"put {_FENCE} (executed by the whole warpgroup) between {line} and "
                        f"{line_of(stmt.span)}",
                    )

    def _check_chain(self, form, acc: Registers, a_regs, tids) -> None:
        """In-flight registers may only be the accumulator of a same-shaped mma_async into
        the same registers (the ISA orders that chain by default), or A's registers of
        another mma_async (read by both)."""
        for r in acc.regs:
            reading = r.guard.a_count[tids, r.word] > 0
            if reading.any():
                t = int(tids[int(np.flatnonzero(reading)[0])])
                op = self.live[int(r.guard.a_last[t, r.word])]
                raise Fault(
                    f"accumulator {r.name} is in flight as an A register of the "
                    f"wgmma.mma_async at {line_of(op.span)}, and this one writes it",
                    t,
                    f"{_WAIT_HINT}, or accumulate into other registers",
                )
            held = r.guard.busy[tids, r.word]
            if held.max() < 0:
                continue
            for serial in np.unique(held[held >= 0]).tolist():
                op = self.live[serial]
                if op.n != form.n or op.acc.key != acc.key:
                    t = int(tids[int(np.flatnonzero(held == serial)[0])])
                    raise Fault(
                        f"accumulator {r.name} is in flight as a register of the "
                        f"wgmma.mma_async at {line_of(op.span)}, and this one uses it with "
                        f"another shape or register list",
                        t,
                        f"{_WAIT_HINT}, or accumulate into exactly the same registers",
                    )
        for r in a_regs.regs if a_regs is not None else ():
            held = r.guard.busy[tids, r.word]
            if held.max() >= 0:
                t = int(tids[int(np.flatnonzero(held >= 0)[0])])
                op = self.live[int(held.max())]
                raise Fault(
                    f"A register {r.name} is in flight as an accumulator register of the "
                    f"wgmma.mma_async at {line_of(op.span)}, whose result it does not hold yet",
                    t,
                    f"{_WAIT_HINT}, then wgmma.fence, before reading it as A",
                )

    def _check_shared(self, stmt, tids, a_rows, b_rows) -> np.ndarray:
        """The operand rows' checks; returns the bytes they cover (unique)."""
        sh = self.m.shared
        t0 = int(tids[0])
        operands = [(w, r.ravel()) for w, r in (("A (a-desc)", a_rows), ("B (b-desc)", b_rows))
                    if r is not None]  # fmt: skip
        for what, flat in operands:
            k_alloc = sh.check_rows(flat, np.full(flat.size, t0), f"wgmma.mma_async {what}")
            sh.check_one_allocation(flat, k_alloc, t0, f"wgmma.mma_async {what}", _PAST_TILE_HINT)
        chunks = np.concatenate([flat for _, flat in operands])
        if sh.in_flight:  # a copy still on its way is the finding, not the bytes it has not
            sh.check_pending(chunks, 16, np.full(chunks.size, t0), "reads")  # written yet
        for what, flat in operands:
            ok = (sh.written64[(flat // 8)[:, None] + np.arange(2)] == ONES[8]).all(axis=1)
            if not ok.all():
                raise Fault(
                    f"wgmma.mma_async {what} reads a row of shared memory that nothing wrote "
                    f"in this block: {sh.describe(int(flat[np.flatnonzero(~ok)[0]]))}",
                    t0,
                    "write the tile into shared memory (and synchronize) before the mma_async",
                )
        reads = np.unique((chunks[:, None] + np.arange(16)).ravel())
        reps = tids[::32]  # one thread per warp: a writer must be ordered before every warp
        self.proxy.check_read(
            reads, reps, f"the wgmma.mma_async at {line_of(stmt.span)}", "the tensor core"
        )
        sh.check_read(np.tile(chunks, reps.size), 16, np.repeat(reps, chunks.size))
        return reads

    def shared_write(self, b: np.ndarray, p: np.ndarray, record: bool = True) -> None:
        """Shared bytes ``b`` are about to be written by threads ``p`` (called by
        :class:`tirx.sim.shared.SharedMemory` before its race checks)."""
        busy = self.reading[b] > 0
        if busy.any():
            k = int(np.flatnonzero(busy)[0])
            op = self._reader_of(int(b[k]))
            sh = self.m.shared
            raise Fault(
                f"{thread_name(int(p[k]))} writes {sh.describe(int(b[k]))} at {line_of(sh.where())}, "
                f"which the wgmma.mma_async at {line_of(op.span)} (warpgroup "
                f"{int(op.tids[0]) >> 7}) reads and no wgmma.wait_group has covered yet",
                int(p[k]),
                f"{_WAIT_HINT}, then T.cuda.cta_sync() if other threads write the bytes",
            )

    def _reader_of(self, byte: int) -> _Op:
        """An in-flight mma_async reading ``byte``: the newest, or (when that one's warpgroup
        has waited for it while another's is still reading) any other."""
        op = self.live.get(int(self.reader[byte]))
        if op is None:
            op = next(o for o in self.live.values() if np.isin(byte, o.reads))
        return op

    def _trace(self, stmt, event: WgmmaEvent, idx, groups=None, landed=None) -> None:
        if self.m.traces is not None:
            record_copy(self.m, stmt, event, idx, groups=groups, landed=landed)
