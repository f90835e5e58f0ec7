"""setmaxnreg in the simulator, written from the PTX ISA ("setmaxnreg"):

* "setmaxnreg provides a hint to the system to update the maximum number of per-thread
  registers owned by the executing warp": each warp has a count, which starts at what the
  kernel's launch reserves (``Function.launch_registers``, owned 8 at a time: 255 is 256);
* "A pool of available registers is maintained per-CTA": ``.dec`` releases
  ``(count - N) x 32`` registers of the warp to the block's pool, which starts empty; ``.inc``
  takes ``(N - count) x 32`` from it, and "blocks the execution until enough registers are
  available": the warps wait (as :mod:`tirx.sim.strands` lets a warp wait) while the others run,
  and a block in which nothing can release them any more is a deadlock, reported with the pool
  and every warpgroup's count;
* "When qualifier .dec is specified, the maximum number of per-thread registers owned by the
  warp prior to the execution of setmaxnreg instruction should be greater than or equal to the
  imm-reg-count", and for ``.inc`` less than or equal: a fault otherwise;
* "The same setmaxnreg instruction must be executed by all warps in a warpgroup ... If a
  setmaxnreg instruction is not executed by all warps in the warpgroup, then the behavior is
  undefined": a warpgroup whose warps execute it in part is *pending* until its other warps
  execute the same statement; a fault when one of them executes another setmaxnreg (another
  line, or another count), naming both, or when the block ends first, naming the warps that
  never did. ``.sync``: all 32 lanes of each executing warp (a fault naming a missing lane).

Not modelled: the registers themselves (the simulator keeps values in local arrays, whatever
the count: it cannot tell how many registers ptxas gives the code, so a warp whose code needs
more than its count is not a fault here; ptxas spills it, ``exe.stats`` shows the spills), and
the synchronization the ISA asks for between two setmaxnreg of one warpgroup (the compiler
checks it where it can follow the kernel's branches).
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...sim.calls import unknown_instruction
from ...sim.faults import Fault
from ...sim.registers import full_warps
from ...sim.shared import line_of

__all__ = ["compile_call", "FORMS", "BLOCKING", "RegisterPool"]

FORMS = (
    "setmaxnreg.inc.sync.aligned.u32 N and setmaxnreg.dec.sync.aligned.u32 N (N = 24, 32, ..., 256)"
)
#: the statements that may wait for other warps (tirx.sim.strands runs those meanwhile)
BLOCKING = ("setmaxnreg.inc",)
_TEXTS = ("setmaxnreg.inc.sync.aligned.u32", "setmaxnreg.dec.sync.aligned.u32")
WARP, WARPS_PER_GROUP = 32, 4


def _owned(r: int) -> int:
    return -(-r // 8) * 8


class RegisterPool:
    """One block's register bookkeeping: each warp's count (registers per thread), the pool,
    and the warpgroups whose warps executed a setmaxnreg in part."""

    def __init__(self, m):
        self.m = m
        self.start = _owned(m.fn.launch_registers)
        self.count = np.full(m.nwarps, self.start, dtype=np.int64)
        self.pool = 0
        self.pending: dict[int, tuple[ir.PtxCall, set[int]]] = {}

    def reset(self) -> None:
        self.count.fill(self.start)
        self.pool = 0
        self.pending.clear()

    def finish_block(self) -> None:
        for g, (stmt, done) in sorted(self.pending.items()):
            missing = sorted(set(range(4 * g, 4 * g + 4)) - done)
            self.m.span = stmt.span
            raise Fault(
                f"warp{_s(missing)} {_list(missing)} of warpgroup {g} never execute "
                f"{_name(stmt)}, which warp{_s(done)} {_list(sorted(done))} of the warpgroup "
                "executed: the same setmaxnreg is executed by all 4 warps of a warpgroup",
                WARP * missing[0],
                _ALIGN_HINT,
            )

    def agree(self, stmt: ir.PtxCall, warps: np.ndarray) -> None:
        """The warpgroups of ``warps`` execute ``stmt``: whole, or completing what their other
        warps executed; a fault when a warp executes another setmaxnreg than they did."""
        for g in np.unique(warps // WARPS_PER_GROUP).tolist():
            here = set(warps[warps // WARPS_PER_GROUP == g].tolist())
            if 4 * g + 3 >= self.m.nwarps:
                raise Fault(
                    f"setmaxnreg in warpgroup {g}, which has only {self.m.nwarps - 4 * g} warps "
                    f"(the block of {self.m.T} threads is not a multiple of 128)",
                    WARP * min(here),
                    "a warpgroup is 4 whole warps: make the block a multiple of 128 threads",
                )
            seen = self.pending.get(g)
            if seen is None:
                if len(here) < WARPS_PER_GROUP:
                    self.pending[g] = (stmt, here)
                continue
            other, done = seen
            w = min(here)
            if other is not stmt or here & done:
                again = other is stmt
                raise Fault(
                    f"warp {w} executes {_name(stmt)}{' again' if again else ''}, but warp"
                    f"{_s(done)} {_list(sorted(done))} of its warpgroup {g} executed "
                    f"{_name(other)} and warp{_s(_rest(g, done))} {_list(_rest(g, done))} "
                    "did not yet: the same setmaxnreg is executed by all 4 warps of a warpgroup",
                    WARP * w,
                    _ALIGN_HINT,
                )
            done |= here
            if len(done) == WARPS_PER_GROUP:
                del self.pending[g]

    def describe(self) -> str:
        groups = [
            f"{int(self.count[4 * g])}" if len(set(self.count[4 * g : 4 * g + 4].tolist())) == 1
            else "/".join(str(int(c)) for c in self.count[4 * g : 4 * g + 4])
            for g in range(self.m.nwarps // WARPS_PER_GROUP)
        ]  # fmt: skip
        return (
            f"the pool holds {self.pool} registers; the warpgroups hold {', '.join(groups)} per "
            f"thread of the {self.start} x {self.m.T} = {self.start * self.m.T} the launch reserved"
        )


def _name(stmt: ir.PtxCall) -> str:
    return f"{stmt.instruction} {int(stmt.operands[0].value)} at {line_of(stmt.span)}"


def _s(items) -> str:
    return "s" if len(items) > 1 else ""


def _list(items) -> str:
    return ", ".join(map(str, items))


def _rest(g: int, done: set[int]) -> list[int]:
    return sorted(set(range(4 * g, 4 * g + 4)) - done)


_ALIGN_HINT = (
    "branch on the warpgroup (wg = T.cuda.warpgroup_id(); if wg == 0: ...) so that its 4 warps "
    "execute the same setmaxnreg"
)


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one setmaxnreg for a set of threads."""
    if text not in _TEXTS:
        raise unknown_instruction(stmt, text, FORMS)
    ops = stmt.operands
    if len(ops) != 1 or not isinstance(ops[0], ir.Immediate):
        raise compiler.error(f"{text} takes one immediate operand, the register count")
    n = int(ops[0].value)
    if not (24 <= n <= 256 and n % 8 == 0):
        raise compiler.error(f"{text}: the register count {n} is not a multiple of 8 in 24..256")
    if m.fn.launch_registers is None:
        raise compiler.error(f"{text} in a kernel whose launch reserves no known register count")
    inc = text.startswith("setmaxnreg.inc")
    if inc:  # an .inc may wait: the other warps must run meanwhile
        m.use_strands()
    span = stmt.span

    def run(idx):
        m.span = span
        warps = full_warps(m, idx, text)
        pool = m.unit("setmaxnreg", RegisterPool)
        pool.agree(stmt, warps)
        have = pool.count[warps]
        wrong = have > n if inc else have < n
        if wrong.any():
            w = int(warps[np.flatnonzero(wrong)[0]])
            raise Fault(
                f"warp {w} holds {int(pool.count[w])} registers per thread, and {_name(stmt)} "
                f"would {'lower' if inc else 'raise'} it to {n}: .{'inc' if inc else 'dec'} "
                f"needs a count {'at least' if inc else 'at most'} what the warp holds",
                WARP * w,
                f"use setmaxnreg.{'dec' if inc else 'inc'} to go that way",
            )
        change = int((n - have).sum()) * WARP
        if inc and change > pool.pool:

            def ready():
                return pool.pool >= change

            def describe():
                return int(idx[0]), (
                    f"{_name(stmt)}: warp{_s(warps)} {_list(warps.tolist())} wait for {change} "
                    f"registers ({n} per thread); {pool.describe()}"
                )

            m.strands.wait_until(ready, describe)
            m.span = span
        pool.pool -= change
        pool.count[warps] = n

    return run
