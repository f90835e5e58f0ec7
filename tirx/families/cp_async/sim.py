"""Asynchronous copies (``cp.async``), written from the PTX ISA's descriptions.

The ISA ("Data Movement and Conversion Instructions: cp.async", "cp.async.commit_group",
"cp.async.wait_group / cp.async.wait_all"):

* ``cp.async.{ca,cg}.shared.global [dst], [src], cp-size{, src-size}`` starts a copy of
  ``cp-size`` bytes (4, 8 or 16 for ``.ca``; 16 for ``.cg``) from global to shared memory and
  returns at once; the copy is *pending*, owned by the issuing thread. With ``src-size`` only
  that many bytes are read and the rest of the destination is filled with zeros. Both
  addresses must be aligned to ``cp-size``.
* ``cp.async.commit_group`` puts all of the thread's copies not yet in a group into a new
  group (possibly empty).
* ``cp.async.wait_group N`` waits until at most the ``N`` newest groups of the thread are
  pending: all older groups complete. ``cp.async.wait_all`` is ``commit_group`` then
  ``wait_group 0``.

Model: each pending copy remembers its bytes (read from global memory at issue) and lands in
shared memory when a wait of its thread covers it. From then on the bytes count as written by
the issuing thread at that moment, so other threads need a barrier after the wait (the race
rules of :mod:`tirx.sim.shared`). A ``cp.async.mbarrier.arrive`` lands the thread's copies
instead as writes of the mbarrier's agent, seen by the threads that observe the phase (the
issuing thread included: it too must wait on the barrier). Until it lands the destination is
the copy engine's: a read or write of it by anyone, or a copy issued onto bytes another
thread accessed since the last barrier (a pipeline stage reused without one), is a fault
naming both lines; so is a block that ends with a copy no wait covered. A copy whose
global source bytes an asynchronous store of the kernel has not yet written (the global
region's guard says so) is a fault naming both lines too: it would read the old bytes.

Lowered operands (PTX order): ``AddressOperand(SharedAddress)``, ``AddressOperand(
GlobalAddress)``, ``Immediate(cp_size)`` and optionally ``ScalarOperand(src_size)``;
``wait_group`` takes ``Immediate(n)``; ``commit_group`` and ``wait_all`` take none.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

import numpy as np

from ...ir import nodes as ir
from ...ir.aligned_access import copy_access
from ...sim.calls import unknown_instruction
from ...sim.faults import Fault
from ...sim.memory import as_index, thread_name
from ...sim.pointer_alignment import check_pointer
from ...sim.shared import line_of
from ...sim.trace import record_copy

__all__ = ["AsyncCopies", "compile_call", "CopyEvent", "FORMS"]

FORMS = "cp.async.{ca,cg}.shared{,::cta}.global, cp.async.commit_group, cp.async.wait_group, cp.async.wait_all"

_COPY_RE = re.compile(r"cp\.async\.(ca|cg)\.shared(?:::cta)?\.global(?:\.L2::(?:64|128|256)B)?")
_SIZES = {"ca": (4, 8, 16), "cg": (16,)}


class CopyEvent(enum.Enum):
    """What one asynchronous-copy statement did (for traces)."""

    COPY = "copy"
    COMMIT = "commit_group"
    WAIT = "wait_group"


@dataclass(eq=False)
class _Batch:
    """The copies one cp.async statement issued (one per thread), until they land."""

    tids: np.ndarray
    dst: np.ndarray
    data: np.ndarray  # uint8 [n, cp_size]
    site: int
    barriers: int  # the CTA barriers passed before the issue (race reports)
    group: np.ndarray = field(init=False)  # -1 until committed

    def __post_init__(self):
        self.group = np.full(self.tids.size, -1, dtype=np.int64)


class AsyncCopies:
    """The pending copies and commit groups of the block being run, per thread."""

    def __init__(self, machine):
        self.m = machine
        self.committed = np.zeros(machine.T, dtype=np.int64)  # groups committed per thread
        self.batches: list[_Batch] = []
        self.wait_n = np.full(machine.T, -1, dtype=np.int64)  # each thread's last wait_group
        self.wait_site = np.full(machine.T, -1, dtype=np.int64)
        machine.shared.never_committed = self.never_committed
        machine.shared.wait_note = self.wait_note

    def _group_at(self, tid: int, byte: int) -> int | None:
        """The group of thread ``tid``'s copy pending at shared ``byte`` (-1: not committed),
        or None where it has none."""
        for b in self.batches:
            hit = (b.tids == tid) & (b.dst <= byte) & (byte < b.dst + b.data.shape[1])
            if hit.any():
                return int(b.group[hit][0])
        return None

    def never_committed(self, tid: int, byte: int) -> bool:
        """Whether the copy of thread ``tid`` pending at shared byte ``byte`` is in no group."""
        return self._group_at(tid, byte) == -1

    def wait_note(self, tid: int, byte: int) -> str | None:
        """Why thread ``tid``'s last ``wait_group`` left its copy pending at shared ``byte``
        (committed, and newer than the groups the wait completed): the count to wait for."""
        n = int(self.wait_n[tid])
        group = self._group_at(tid, byte) if n >= 0 else None
        if group is None:
            return None
        newer = int(self.committed[tid]) - 1 - group  # groups the thread committed after it
        if group < 0 or newer >= n:
            return None
        sh = self.m.shared
        return (
            f'the T.ptx["cp.async.wait_group"]({n}) at {line_of(sh.sites[int(self.wait_site[tid])])} '
            f"leaves the {n} newest groups of {thread_name(tid)} pending, and this copy's group is "
            f"one of them ({newer} committed after it): wait_group({newer}) there covers it"
        )

    def reset(self) -> None:
        self.committed.fill(0)
        self.batches.clear()
        self.wait_n.fill(-1)
        self.wait_site.fill(-1)

    def issue(self, tids, dst, data) -> None:
        shared = self.m.shared
        shared.start_copy(dst, data.shape[1], tids)
        self.batches.append(_Batch(tids.copy(), dst, data, shared.site(), shared.races.barriers))

    def commit(self, idx: np.ndarray) -> np.ndarray:
        """Commit the uncommitted copies of threads ``idx``; returns their new group numbers."""
        mine = np.zeros(self.m.T, dtype=bool)
        mine[idx] = True
        for b in self.batches:
            sel = mine[b.tids] & (b.group < 0)
            b.group[sel] = self.committed[b.tids[sel]]
        groups = self.committed[idx].copy()
        self.committed[idx] += 1
        return groups

    def wait(self, idx: np.ndarray, n: int) -> np.ndarray:
        """Complete the groups of threads ``idx`` older than their ``n`` newest; returns how
        many copies completed per thread."""
        limit = np.full(self.m.T, -1, dtype=np.int64)
        limit[idx] = self.committed[idx] - n
        self.wait_n[idx] = n
        self.wait_site[idx] = self.m.shared.site()
        landed = np.zeros(self.m.T, dtype=np.int64)
        keep = []
        for b in self.batches:
            done = (b.group >= 0) & (b.group < limit[b.tids])
            if done.any():
                self.m.shared.land_copy(b.dst[done], b.data[done], b.tids[done], b.site, b.barriers)
                np.add.at(landed, b.tids[done], 1)
            _keep_pending(b, done, keep)
        self.batches = keep
        return landed[idx]

    def finish_block(self) -> None:
        """The block ends: a copy no wait covered may still be writing shared memory, which
        the next block on the multiprocessor may be given (docs/simulator.md)."""
        if not self.batches:
            return
        b = self.batches[0]
        sh = self.m.shared
        tid = int(b.tids[0])
        self.m.span = sh.sites[b.site]
        never = " (it was never committed to a group)" if b.group[0] < 0 else ""
        raise Fault(
            f"the block exits while the cp.async at {line_of(sh.sites[b.site])} issued by "
            f"{thread_name(tid)} may still be writing {sh.describe(int(b.dst[0]))}: no "
            f"cp.async.wait_group or wait_all of that thread covered it{never}",
            tid,
            'end with T.ptx["cp.async.wait_all"]() (or a wait_group covering every group) in '
            "each thread that copies, or do not issue copies nobody waits for",
        )

    def land_all(self, idx: np.ndarray, agent: int) -> list[tuple[int, int]]:
        """Complete every copy of threads ``idx``, committed or not (cp.async.mbarrier.arrive:
        the arrive-on waits for all the thread's prior cp.async): their bytes are written by
        the mbarrier's agent, whose phase completion releases them. Returns the copies'
        ``(site, issuing thread)``, one per statement."""
        mine = np.zeros(self.m.T, dtype=bool)
        mine[idx] = True
        keep, landed = [], []
        for b in self.batches:
            done = mine[b.tids]
            if done.any():
                size = b.data.shape[1]
                at = (b.dst[done][:, None] + np.arange(size)).ravel()
                who = np.repeat(b.tids[done], size)
                self.m.shared.land_async(at, b.data[done].ravel(), agent, b.site, who, False)
                landed.append((b.site, int(b.tids[done][0])))
            _keep_pending(b, done, keep)
        self.batches = keep
        return landed


def _keep_pending(b, done: np.ndarray, keep: list) -> None:
    """Append batch ``b`` to ``keep`` without its rows that ``done`` marks as landed (as it is
    when none did, not at all when all did)."""
    if done.all():
        return
    if done.any():
        b.tids, b.dst, b.data, b.group = b.tids[~done], b.dst[~done], b.data[~done], b.group[~done]
    keep.append(b)


def _copies(m) -> AsyncCopies:
    return m.unit("cp.async", AsyncCopies)


def _immediate(compiler, op, what: str) -> int:
    if not isinstance(op, ir.Immediate) or not isinstance(op.value, int):
        raise compiler.error(f"{what} must be an integer immediate")
    return op.value


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one ``cp.async*`` statement for a set of threads."""
    ops = stmt.operands
    span = stmt.span
    if text in ("cp.async.commit_group", "cp.async.wait_all", "cp.async.wait_group"):
        if text == "cp.async.wait_group":
            if len(ops) != 1:
                raise compiler.error("cp.async.wait_group takes one operand, N")
            n = _immediate(compiler, ops[0], "cp.async.wait_group's N")
            if n < 0:
                raise compiler.error(f"cp.async.wait_group's N must be >= 0, not {n}")
        elif ops:
            raise compiler.error(f"{text} takes no operands")

        def sync(idx):
            m.span = span
            copies = _copies(m)
            groups = None
            if text == "cp.async.commit_group":
                groups = copies.commit(idx)
                landed = None
            else:
                if text == "cp.async.wait_all":
                    copies.commit(idx)
                landed = copies.wait(idx, 0 if text == "cp.async.wait_all" else n)
            if m.traces is not None:
                event = CopyEvent.COMMIT if groups is not None else CopyEvent.WAIT
                record_copy(m, stmt, event, idx, groups=groups, landed=landed)

        return sync
    match = _COPY_RE.fullmatch(text)
    if match is None:
        raise unknown_instruction(stmt, text, FORMS)
    if len(ops) not in (3, 4):
        raise compiler.error("cp.async takes 3 or 4 operands (dst, src, cp-size[, src-size])")
    dst_op, src_op = ops[0], ops[1]
    if not (isinstance(dst_op, ir.AddressOperand) and isinstance(dst_op.address, ir.SharedAddress)):
        raise compiler.error("cp.async's destination must be a shared-memory address")
    if not (isinstance(src_op, ir.AddressOperand) and isinstance(src_op.address, ir.GlobalAddress)):
        raise compiler.error("cp.async's source must be a global-memory address")
    size = _immediate(compiler, ops[2], "cp.async's cp-size")
    allowed = _SIZES[match.group(1)]
    if size not in allowed:
        sizes = ", ".join(map(str, allowed))
        raise compiler.error(f"cp.async.{match.group(1)} copies {sizes} bytes, not {size}")
    src_size = None
    if len(ops) == 4:
        if not isinstance(ops[3], ir.ScalarOperand):
            raise compiler.error("cp.async's src-size must be a scalar operand")
        src_size = compiler.compile(ops[3].value)
    dst = compiler.compile(dst_op.address)
    src_buf = src_op.address.buffer
    region = m.region(src_buf, compiler)
    if src_buf.scope is not ir.Scope.GLOBAL:
        raise compiler.error(f"cp.async's source '{src_buf.name}' is not a global tensor")
    # the data pointer's alignment, as the launcher asks it: for every copy, reached or not
    check_pointer(copy_access(stmt), region.address)
    src_off = compiler.compile(src_op.address.byte_offset)
    cols = np.arange(size)

    def copy(idx):
        m.span = span
        k = idx.size
        d = np.broadcast_to(as_index(dst(idx), k), (k,)).astype(np.uint32).astype(np.int64)
        off = np.broadcast_to(as_index(src_off(idx), k), (k,))
        n = np.full(k, size, dtype=np.int64)
        if src_size is not None:
            n = np.broadcast_to(as_index(src_size(idx), k), (k,)).astype(np.uint32)
            n = n.astype(np.int64)
            bad = n > size
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                raise Fault(
                    f"cp.async src-size {n[j]} is larger than its cp-size {size}",
                    idx[j],
                    f"src-size is the number of bytes to read, 0..{size}; the rest is zero-filled",
                )
        m.shared.check_rows(d, idx, "cp.async destination", size)
        misaligned = (off % size != 0) | ((region.address + off) % size != 0)
        if misaligned.any():
            j = int(np.flatnonzero(misaligned)[0])
            raise Fault(
                f"cp.async source: byte {off[j]} of global '{region.name}' (address "
                f"{region.address + off[j]:#x}) is not {size}-byte aligned",
                idx[j],
                f"a {size}-byte copy's global source must be a multiple of {size} bytes",
            )
        outside = (n > 0) & ((off < 0) | (off + n > region.nbytes))
        if outside.any():
            j = int(np.flatnonzero(outside)[0])
            raise Fault(
                f"out-of-bounds cp.async source: bytes {off[j]}..{off[j] + n[j] - 1} of global "
                f"'{region.name}', which holds {region.nbytes} bytes",
                idx[j],
            )
        if region.guard is not None:  # bytes a bulk store of this kernel has not yet written
            _check_bulk_pending(region, off, n, idx)
        take = cols[None, :] < n[:, None]
        where = np.where(take, off[:, None] + cols[None, :], 0)
        data = np.where(take, region.bytes[where], 0).astype(np.uint8)
        if m.recorder is not None:  # a profiling run: the copy's global and shared sides
            m.recorder.async_copy(np.where(n > 0, off, -1), d, size, idx)
        _copies(m).issue(idx, d, data)
        if m.traces is not None:
            record_copy(m, stmt, CopyEvent.COPY, idx, dst=d, src=off, nbytes=n)

    return copy


def _check_bulk_pending(region, off, n, idx) -> None:
    """A copy's global source bytes must not be the destination of a pending asynchronous
    store (the region's guard): until a full wait covers it the bytes are not written yet, so
    the copy would read the old ones. Only the ``n`` bytes each thread reads count."""
    reads = n > 0
    for nbytes in np.unique(n[reads]).tolist():
        sel = reads & (n == nbytes)
        region.guard.check_global(region, off[sel], nbytes, idx[sel], "cp.async read of")
