"""The registers of ``wgmma.mma_async`` in the simulator: the accumulator (read and written in
place) and, in the rs form, A's four .b32 registers, and the guard that watches every thread
access to them (PTX ISA 9.7.15.5.2 and 9.7.15.7.1, "wgmma.fence").

* "Accessing the accumulator register or the input register containing the fragments of
  matrix A of a wgmma.mma_async instruction without first performing a wgmma.wait_group
  instruction that waits on a wgmma-group including that wgmma.mma_async instruction is
  undefined": while an mma_async is in flight, any thread load or store of one of its
  registers is a fault. Another mma_async may read A's registers meanwhile (the tensor core
  only reads them), and may use the accumulator registers as its own accumulator when it has
  the same shape and the same registers (the ISA orders that chain); every other use by an
  mma_async of a register in flight is a fault.
* wgmma.fence orders "prior accesses to any warpgroup registers and subsequent accesses to
  the same registers by a wgmma.mma_async", the accumulator and A's registers: an access by a
  thread since its last fence to a register that a later mma_async uses is a fault.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ...sim.faults import Fault
from ...sim.memory import ONES, thread_name
from ...sim.shared import line_of
from .sim_math import pack_accumulator, unpack_accumulator

__all__ = ["RegisterGuard", "Register", "Registers", "WAIT_HINT"]

WAIT_HINT = (
    'commit it (T.ptx["wgmma.commit_group.sync.aligned"]()) and wait for its group '
    '(T.ptx["wgmma.wait_group.sync.aligned"](n), n small enough to cover it) first'
)


@dataclass(frozen=True, eq=False)
class Register:
    """One 32-bit register: a word of a guarded local array."""

    guard: RegisterGuard
    word: int  # 32-bit word of the local array
    name: str  # "acc[5]", for messages


@dataclass(frozen=True, eq=False)
class Registers:
    """The d registers (or A's registers) of one mma_async statement."""

    regs: tuple[Register, ...]
    what: str  # "accumulator" or "A"

    @functools.cached_property
    def key(self) -> tuple:
        """The registers' identity, compared to allow a chain of mma_asyncs into them."""
        return tuple((id(r.guard), r.word) for r in self.regs)

    def bits(self, tids: np.ndarray, why: str, fix: str) -> np.ndarray:
        """uint32 ``[threads, regs]``, each register written before (else a fault)."""
        out = np.empty((tids.size, len(self.regs)), dtype=np.uint32)
        for i, r in enumerate(self.regs):
            data, written = r.guard.array.views(np.dtype(np.uint32))
            ok = written[tids, r.word] == ONES[4]
            if not ok.all():
                k = int(np.flatnonzero(~ok)[0])
                label = "accumulator" if self.what == "accumulator" else "A register"
                raise Fault(
                    f"wgmma.mma_async {why} {label} {r.name}, which this thread "
                    "never wrote (a register holding garbage on the GPU)",
                    int(tids[k]),
                    fix,
                )
            out[:, i] = data[tids, r.word]
        return out

    def read(self, tids: np.ndarray, acc: str) -> np.ndarray:
        """The accumulator's element values ``[threads, N/2]``."""
        fix = "initialize the accumulator, or pass scale-d = 0 to the first mma_async"
        return unpack_accumulator(self.bits(tids, "with scale-d != 0 reads", fix), acc)

    def write(self, tids: np.ndarray, values: np.ndarray, acc: str) -> None:
        bits = pack_accumulator(values, acc)
        for i, r in enumerate(self.regs):
            data, written = r.guard.array.views(np.dtype(np.uint32))
            data[tids, r.word] = bits[:, i]
            written[tids, r.word] = ONES[4]


class RegisterGuard:
    """The wgmma state of one local array holding mma_async registers: per thread and 32-bit
    word, the mma_async in flight with it as accumulator (-1: none), how many in flight read
    it as A (and the newest of them), and the last access since the thread's last
    ``wgmma.fence`` (+site written, -site read, 0 none). :class:`tirx.sim.memory.LocalArray`
    calls :meth:`access` on every load and store once the guard is installed."""

    def __init__(self, state, array):
        self.state = state
        self.array = array
        shape = (array.data.shape[0], array.data.shape[1] // 4)
        self.busy = np.full(shape, -1, dtype=np.int32)
        self.a_count = np.zeros(shape, dtype=np.int32)
        self.a_last = np.full(shape, -1, dtype=np.int32)
        self.touched = np.zeros(shape, dtype=np.int32)
        array.guard = self

    def reset(self) -> None:
        self.busy.fill(-1)
        self.a_count.fill(0)
        self.a_last.fill(-1)
        self.touched.fill(0)

    def holder(self, rows, words) -> np.ndarray:
        """The serial of an in-flight mma_async holding each (thread, word), else -1."""
        reading = np.where(self.a_count[rows, words] > 0, self.a_last[rows, words], -1)
        return np.maximum(self.busy[rows, words], reading)

    def access(self, index: np.ndarray, size: int, tids: np.ndarray, rows, write: bool) -> None:
        """Threads ``tids`` (thread-axis index ``rows``) access elements ``index`` of
        ``size`` bytes: a fault if one is in flight, else noted for the fence check."""
        first = (index * size) >> 2
        last = (index * size + size - 1) >> 2
        held = np.maximum(self.holder(rows, first), self.holder(rows, last))
        if (held >= 0).any():
            k = int(np.flatnonzero(held >= 0)[0])
            op = self.state.live[int(held[k])]
            sh = self.state.m.shared
            verb = "writes" if write else "reads"
            as_acc = max(self.busy[rows, first][k], self.busy[rows, last][k]) >= 0
            role = "an accumulator register" if as_acc else "an A register"
            raise Fault(
                f"{thread_name(int(tids[k]))} {verb} '{self.array.name}' slot {index[k]} at "
                f"{line_of(sh.where())}, {role} of the wgmma.mma_async at {line_of(op.span)}, "
                "which is in flight (no wgmma.wait_group of this thread has covered its group "
                "yet)",
                int(tids[k]),
                f"{WAIT_HINT}, before touching its registers",
            )
        site = self.state.m.shared.site()
        mark = site if write else -site
        self.touched[rows, first] = mark
        self.touched[rows, last] = mark
