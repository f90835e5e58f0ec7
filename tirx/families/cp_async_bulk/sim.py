"""Executing the bulk-store statements (``cp.async.bulk*``) of the lowered IR: operand decoding and the run-time operand rules of the PTX ISA ("cp.async.bulk":
a size that is a positive multiple of 16, both addresses 16-byte aligned); the model they
drive is :mod:`tirx.families.cp_async_bulk.sim_copies`; commit and wait act on the machine's bulk
async-groups (:mod:`tirx.sim.bulk_groups`), which the tensor stores join too.

Lowered operands (PTX order): ``AddressOperand(GlobalAddress)``, ``AddressOperand(
SharedAddress)``, ``ScalarOperand(size)``; ``wait_group{.read}`` takes ``Immediate(n)``;
``commit_group`` none.
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...ir.aligned_access import copy_access
from ...sim.bulk_groups import BulkGroups, bulk_groups
from ...sim.calls import unknown_instruction
from ...sim.faults import Fault
from ...sim.memory import as_index
from ...sim.pointer_alignment import check_pointer
from ...sim.trace import record_copy
from .sim_copies import COMMIT, COPY, UNIT, WAITS, BulkEvent, issue_copy

__all__ = ["compile_call", "FORMS"]

FORMS = (
    "cp.async.bulk.global.shared::cta.bulk_group, cp.async.bulk.commit_group, "
    "cp.async.bulk.wait_group[.read]"
)


def compile_call(m, compiler, stmt: ir.PtxCall, text: str):
    """The closure executing one ``cp.async.bulk*`` statement."""
    groups = bulk_groups(m)
    if text == COMMIT or text in WAITS:
        return _group(m, compiler, stmt, text, groups)
    if text != COPY:
        raise unknown_instruction(stmt, text, FORMS)
    return _copy(m, compiler, stmt, groups)


def _group(m, compiler, stmt, text: str, bulk: BulkGroups):
    ops, span = stmt.operands, stmt.span
    if text == COMMIT:
        if ops:
            raise compiler.error(f"{text} takes no operands")
    else:
        if len(ops) != 1 or not isinstance(ops[0], ir.Immediate):
            raise compiler.error(f"{text} takes one integer immediate, N")
        n = ops[0].value
        if not isinstance(n, int) or n < 0:
            raise compiler.error(f"{text}'s N must be an int >= 0, not {n!r}")
        reads_only = WAITS[text]

    def sync(idx):
        m.span = span
        groups = landed = None
        if text == COMMIT:
            groups = bulk.commit(idx)
        else:
            landed = bulk.wait(idx, n, reads_only)
        if m.traces is not None:
            event = BulkEvent.COMMIT if groups is not None else BulkEvent.WAIT
            record_copy(m, stmt, event, idx, groups=groups, landed=landed)

    return sync


def _copy(m, compiler, stmt, groups: BulkGroups):
    ops, span = stmt.operands, stmt.span
    if len(ops) != 3:
        raise compiler.error(f"{COPY} takes 3 operands (dstMem, srcMem, size)")
    dst_op, src_op, size_op = ops
    if not (isinstance(dst_op, ir.AddressOperand) and isinstance(dst_op.address, ir.GlobalAddress)):
        raise compiler.error("cp.async.bulk's destination must be a global-memory address")
    if not (isinstance(src_op, ir.AddressOperand) and isinstance(src_op.address, ir.SharedAddress)):
        raise compiler.error("cp.async.bulk's source must be a shared-memory address")
    if not isinstance(size_op, ir.ScalarOperand):
        raise compiler.error("cp.async.bulk's size must be a scalar operand")
    buf = dst_op.address.buffer
    region = m.region(buf, compiler)
    if buf.scope is not ir.Scope.GLOBAL:
        raise compiler.error(f"cp.async.bulk's destination '{buf.name}' is not a global tensor")
    groups.guard(region)  # its loads and stores now check the pending destinations
    dst_off = compiler.compile(dst_op.address.byte_offset)
    src = compiler.compile(src_op.address)
    size_f = compiler.compile(size_op.value)
    # the data pointer's alignment, as the launcher asks it: for every copy, reached or not
    check_pointer(copy_access(stmt), region.address)

    def copy(idx):
        m.span = span
        k = idx.size
        d = np.broadcast_to(as_index(dst_off(idx), k), (k,))
        s = np.broadcast_to(as_index(src(idx), k), (k,)).astype(np.uint32).astype(np.int64)
        n = np.broadcast_to(as_index(size_f(idx), k), (k,)).astype(np.uint32).astype(np.int64)
        _check(m, region, idx, d, s, n)
        if m.recorder is not None:  # a profiling run: the bytes the copy engine moves
            m.recorder.bulk_copy("shared", "global", int(n.sum()))
        for t, dd, ss, nn in zip(idx.tolist(), d.tolist(), s.tolist(), n.tolist()):
            issue_copy(m, t, region, dd, ss, nn, span)
        if m.traces is not None:
            record_copy(m, stmt, BulkEvent.COPY, idx, dst=d, src=s, nbytes=n)

    return copy


def _check(m, region, idx, d, s, n) -> None:
    """The ISA's operand rules, per thread: sizes, alignment, bounds."""
    sh = m.shared
    bad = (n <= 0) | (n % UNIT != 0)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise Fault(
            f"cp.async.bulk size {n[j]} is not a positive multiple of {UNIT}",
            idx[j],
            f"a bulk copy moves whole {UNIT}-byte units",
        )
    bad = (s % UNIT != 0) | ((region.address + d) % UNIT != 0)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        where = (
            f"shared address {s[j]}"
            if s[j] % UNIT
            else f"byte {d[j]} of global '{region.name}' (address {region.address + d[j]:#x})"
        )
        raise Fault(
            f"cp.async.bulk: {where} is not {UNIT}-byte aligned",
            idx[j],
            f"both addresses of a bulk copy must be multiples of {UNIT}",
        )
    bad = (d < 0) | (d + n > region.nbytes)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise Fault(
            f"out-of-bounds cp.async.bulk destination: bytes {d[j]}..{d[j] + n[j] - 1} of global "
            f"'{region.name}', which holds {region.nbytes} bytes",
            idx[j],
        )
    k = np.searchsorted(sh.starts, s, side="right") - 1
    inside = (k >= 0) & (sh.ends.size > 0)
    if sh.ends.size:
        inside &= s + n <= sh.ends[np.maximum(k, 0)]
    if not inside.all():
        j = int(np.flatnonzero(~inside)[0])
        raise Fault(
            f"cp.async.bulk source [{s[j]}, {s[j] + n[j]}) of shared memory lies outside every "
            f"shared allocation",
            idx[j],
        )
