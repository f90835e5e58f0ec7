"""Atomic read-modify-writes (``atom.add``, ``atom.cas``), written from the PTX ISA's "atom"
section, and their place in shared memory's race model.

Semantics, per thread: the old value ``d`` of the element is read, the element becomes
``d + b`` (add) or ``(d == b) ? c : d`` (cas), and the thread gets ``d``; nothing else
touches the element in between. Integer adds wrap. ``atom.add.f32`` "rounds to nearest even
and flushes subnormal inputs and results to sign-preserving zero"; ``.f64`` rounds to nearest
even; ``.noftz.f16`` / ``.noftz.bf16`` round to nearest even and keep subnormals (computed here
in float64 and rounded once to the 16-bit format: the exact sum of two 16-bit floats rounds
the same way through float32).

Order: the GPU orders atomics to one address in some order it chooses; the simulator picks
one, deterministically: blocks in launch order (x fastest), and within a block the threads of
one statement by linear thread id (warp by warp, lane by lane within a warp). So an integer
sum is the GPU's exactly; a float sum is the GPU's when its order does not matter (integer
values).

Races (shared memory; see :mod:`tirx.sim.shared`): atomics never race with each other, but an
atomic and a plain read or write of the same byte by another thread race unless a barrier
orders them (racecheck ignores atomic-atomic pairs; that it reports the atomic-plain pairs
the simulator reports is not measured yet: see docs/simulator.md). The atomics since the last
barrier are kept per byte like the readers are (:class:`AtomicAccesses`). Global memory has no
race tracking (racecheck does not look at global memory either): the simulator runs blocks one
after another, so it could not see most races between blocks anyway.

An atomic on shared memory is a write of the generic proxy, as a store is
(:mod:`tirx.sim.bulkcopy`): on bytes that a pending ``cp.async.bulk`` still reads (its
``.read`` wait not done) it is a fault naming both lines, and a bulk copy of bytes it updated
needs a ``fence.proxy.async.shared::cta`` in between.
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir
from .expr import _converted
from .faults import Fault
from .memory import accessors_per_byte, as_index, merge_accessors
from .numeric import bf16_bits_to_f32, decode, f32_to_bf16_bits, storage_type

__all__ = ["AtomicAccesses", "apply_atomic", "compile_atomic"]

_F32_TINY = np.float32(2.0**-126)


class AtomicAccesses:
    """Per shared byte: which threads updated it atomically since the last barrier -- one warp
    or several (-2), one thread of that warp at its latest epoch or several (-2), that epoch,
    the latest line. Plain accesses check against it; atomics only add to it."""

    def __init__(self, size: int):
        self.warp = np.full(size, -1, dtype=np.int32)
        self.tid = np.zeros(size, dtype=np.int32)
        self.stamp = np.zeros(size, dtype=np.int32)
        self.site = np.zeros(size, dtype=np.int32)

    def clear(self) -> None:
        self.warp.fill(-1)

    def check(self, memory, b, p, wp, e, verb: str) -> None:
        """Fault if a plain access (``verb``) of bytes ``b`` by threads ``p`` (warps ``wp`` at
        epochs ``e``) meets an atomic of another thread that no barrier orders before it."""
        xw = self.warp[b]
        bad = (xw == -2) | ((xw >= 0) & ((xw != wp) | ((self.stamp[b] == e) & (self.tid[b] != p))))
        if not bad.any():
            return
        k = int(np.flatnonzero(bad)[0])
        xt = int(self.tid[b[k]])
        if xw[k] == -2 or xt < 0:
            other, who = "threads of several warps atomically updated", -1
            if xw[k] >= 0:
                other, who = f"threads of warp {xw[k]} atomically updated", 32 * int(xw[k])
        else:
            other, who = f"thread {xt} (warp {xt // 32}, lane {xt % 32}) atomically updated", xt
        raise memory._race(b, p, k, verb, other, who, self.site[b[k]])

    def record(self, b, p, wp, e, site: int) -> None:
        bu, in_w, in_p, in_e = accessors_per_byte(b, wp, p, e)
        merge_accessors(self.warp, self.stamp, self.tid, bu, in_w, in_p, in_e)
        self.site[bu] = site


def _track_shared(memory, addr: np.ndarray, s: int, tids: np.ndarray) -> None:
    """Race checks of an atomic on ``s`` bytes at each of ``addr``: against plain writes and
    plain reads of other threads since the last barrier (never against other atomics)."""
    verb = "atomically updates"
    if memory.in_flight:
        memory.check_pending(addr, s, tids, verb)
    b, p = memory._spread(addr, s, tids)
    if memory.bulk is not None:  # a write of the generic proxy, as a store is (bulkcopy.py)
        memory.bulk.generic_write(b, p, True)
    wp, e = memory._check_writer(b, p, verb)
    rw = memory.r_warp[b]
    bad = (rw == -2) | (
        (rw >= 0) & ((rw != wp) | ((memory.r_stamp[b] == e) & (memory.r_tid[b] != p)))
    )
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        rt = int(memory.r_tid[b[k]])
        if rw[k] == -2 or rt < 0:
            other = (
                "threads of several warps read" if rw[k] == -2 else f"threads of warp {rw[k]} read"
            )
            who = -1 if rw[k] == -2 else 32 * int(rw[k])
        else:
            other, who = f"thread {rt} (warp {rt // 32}, lane {rt % 32}) read", rt
        raise memory._race(b, p, k, verb, other, who, memory.r_site[b[k]])
    memory.atomics.record(b, p, wp, e, memory.site())


def _ftz32(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < _F32_TINY, np.copysign(np.float32(0), x), x).astype(np.float32)


def _combine(kind: ir.AtomicKind, d, old: np.ndarray, ops: list) -> np.ndarray:
    """The new contents (storage bits) of elements holding ``old`` (storage bits)."""
    if kind is ir.AtomicKind.CAS:
        cmp, val = (np.asarray(o).astype(old.dtype) for o in ops)
        return np.where(old == cmp, val, old)
    (v,) = ops
    if d.name == "float32":
        return _ftz32(_ftz32(old) + _ftz32(np.asarray(v, dtype=np.float32)))
    if d.name == "float16":
        return (old.astype(np.float64) + np.asarray(v, dtype=np.float64)).astype(np.float16)
    if d.name == "bfloat16":
        total = bf16_bits_to_f32(old).astype(np.float64) + np.asarray(v, dtype=np.float64)
        return f32_to_bf16_bits(total.astype(np.float32))
    return (old + np.asarray(v).astype(old.dtype)).astype(old.dtype)  # integers wrap; f64


def apply_atomic(kind: ir.AtomicKind, d, data: np.ndarray, slots: np.ndarray, ops: list):
    """Perform the atomics of one statement on ``data`` (storage-typed elements) at ``slots``,
    in the order given (linear thread id), and return each one's old bits. Updates of one
    slot run one after another; distinct slots at once."""
    n = slots.size
    old = np.empty(n, dtype=data.dtype)
    srt = np.argsort(slots, kind="stable")
    ss = slots[srt]
    first = np.concatenate(([True], ss[1:] != ss[:-1]))
    rank = np.empty(n, dtype=np.int64)
    starts = np.flatnonzero(first)
    rank[srt] = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
    for r in range(int(rank.max()) + 1 if n else 0):
        sel = np.flatnonzero(rank == r)
        at = slots[sel]
        before = data[at]
        old[sel] = before
        data[at] = _combine(kind, d, before, [np.asarray(o)[sel] for o in ops])
    return old


def compile_atomic(machine, s: ir.Atomic):
    """The machine's closure for one lowered :class:`~tirx.ir.nodes.Atomic`."""
    compiler = machine.compiler
    region = machine.region(s.buffer, compiler)
    if s.buffer.scope is ir.Scope.LOCAL:
        raise compiler.error(f"an atomic on the local array '{s.buffer.name}'")
    fi = compiler.compile(s.index)
    fops = [_converted(compiler.compile(v), v.dtype, s.dtype) for v in s.operands]
    out = machine.variable(s.result) if s.result is not None else None
    d, span, m = s.dtype, s.span, machine
    dt = storage_type(d)
    shared = s.buffer.scope is ir.Scope.SHARED

    def run(idx):
        m.span = span
        n = idx.size
        index = as_index(fi(idx), n)
        ops = [np.broadcast_to(f(idx), (n,)) for f in fops]
        if shared:
            mem = region.memory
            addr = region._address(index, d, idx, "atomic update of")
            written = mem.written[addr[:, None] + np.arange(dt.itemsize)].all(axis=1)
            if not written.all():
                k = int(np.flatnonzero(~written)[0])
                raise Fault(
                    f"atomic update of shared memory that nothing wrote in this block: {d} at "
                    f"{mem.describe(int(addr[k]))}",
                    int(idx[k]),
                    "initialize the element (and synchronize) before updating it atomically",
                )
            _track_shared(mem, addr, dt.itemsize, idx)
            data, slots = mem.data.view(dt), addr // dt.itemsize
        else:
            region._check(index, d, idx, "atomic update of")
            data, slots = region.view(dt), index
        old = apply_atomic(s.kind, d, data, slots, ops)
        if out is not None:
            out[idx] = decode(old, d)
        return idx

    return run
