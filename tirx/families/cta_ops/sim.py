"""The simulator's atomics and CTA statements. Atomic read-modify-writes (``atom.add``, ``atom.cas``), written from the PTX ISA's "atom"
section, and their place in shared memory's race model.

Semantics, per thread: the old value ``d`` of the element is read, the element becomes
``d + b`` (add) or ``(d == b) ? c : d`` (cas), and the thread gets ``d``; nothing else
touches the element in between. Integer adds wrap. ``atom.add.f32`` "rounds to nearest even
and flushes subnormal inputs and results to sign-preserving zero" in global memory (the SASS of
``atomicAdd`` there is ``ATOMG.E.ADD.F32.FTZ.RN``); in shared memory sm_90 has no float add
unit, ``atomicAdd`` is a compare-and-swap loop around a plain add, which keeps subnormals
(measured on an H100: 1e-40 + 1e-40 is 2e-40 in shared memory, 0 in global; docs/gpu-runs/
sessions.md); ``.f64`` rounds to nearest
even; ``.noftz.f16`` / ``.noftz.bf16`` round to nearest even and keep subnormals (computed here
in float64 and rounded once to the 16-bit format: the exact sum of two 16-bit floats rounds
the same way through float32).

Order: the GPU orders atomics to one address in some order it chooses; the simulator picks
one, deterministically: blocks in launch order (x fastest), and within a block the threads of
one statement by linear thread id (warp by warp, lane by lane within a warp). So an integer
sum is the GPU's exactly; a float sum is the GPU's when its order does not matter (integer
values).

Races (shared memory): an atomic and a plain read or write of the same byte by another thread
race unless a barrier orders them (:mod:`tirx.sim.races`; racecheck ignores atomic-atomic
pairs). Global memory has no race tracking (racecheck does not look at global memory either):
the simulator runs blocks one after another, so it could not see most races between blocks.

An atomic on shared memory is a write of the generic proxy, as a store is: on bytes that a pending ``cp.async.bulk`` still reads (its
``.read`` wait not done) it is a fault naming both lines, and a bulk copy of bytes it updated
needs a ``fence.proxy.async.shared::cta`` in between.
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...sim.expr import converted
from ...sim.faults import Fault
from ...sim.memory import as_index
from ...sim.numeric import bf16_bits_to_f32, decode, f32_to_bf16_bits, storage_type
from .nodes import Atomic, AtomicKind
from .sim_cta import compile_cta_reduce, compile_thread_fence, compile_voting_barrier

__all__ = [
    "apply_atomic", "compile_Atomic", "compile_ThreadFence", "compile_VotingBarrier",
    "compile_CtaReduce",
]  # fmt: skip

_F32_TINY = np.float32(2.0**-126)

# the CTA statements (sim_cta.py)
compile_ThreadFence = compile_thread_fence
compile_VotingBarrier = compile_voting_barrier
compile_CtaReduce = compile_cta_reduce


def _ftz32(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < _F32_TINY, np.copysign(np.float32(0), x), x).astype(np.float32)


def _combine(kind: AtomicKind, d, old: np.ndarray, ops: list, ftz: bool) -> np.ndarray:
    """The new contents (storage bits) of elements holding ``old`` (storage bits); ``ftz``: a
    float32 add flushes subnormals (global memory's atom.add.f32)."""
    if kind is AtomicKind.CAS:
        cmp, val = (np.asarray(o).astype(old.dtype) for o in ops)
        return np.where(old == cmp, val, old)
    (v,) = ops
    if d.name == "float32":
        if not ftz:  # shared memory's compare-and-swap loop: a plain add
            return (old + np.asarray(v, dtype=np.float32)).astype(np.float32)
        return _ftz32(_ftz32(old) + _ftz32(np.asarray(v, dtype=np.float32)))
    if d.name == "float16":
        return (old.astype(np.float64) + np.asarray(v, dtype=np.float64)).astype(np.float16)
    if d.name == "bfloat16":
        total = bf16_bits_to_f32(old).astype(np.float64) + np.asarray(v, dtype=np.float64)
        return f32_to_bf16_bits(total.astype(np.float32))
    return (old + np.asarray(v).astype(old.dtype)).astype(old.dtype)  # integers wrap; f64


def apply_atomic(kind: AtomicKind, d, data: np.ndarray, slots: np.ndarray, ops: list,
                 ftz: bool = True):  # fmt: skip
    """Perform the atomics of one statement on ``data`` (storage-typed elements) at ``slots``,
    in the order given (linear thread id), and return each one's old bits. Updates of one
    slot run one after another; distinct slots at once. ``ftz``: a float32 add flushes
    subnormals (global memory; shared memory's does not)."""
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
        data[at] = _combine(kind, d, before, [np.asarray(o)[sel] for o in ops], ftz)
    return old


def compile_Atomic(machine, s: Atomic):
    """The machine's closure for one lowered :class:`.nodes.Atomic`."""
    compiler = machine.compiler
    region = machine.region(s.buffer, compiler)
    if s.buffer.scope is ir.Scope.LOCAL:
        raise compiler.error(f"an atomic on the local array '{s.buffer.name}'")
    fi = compiler.compile(s.index)
    fops = [converted(compiler.compile(v), v.dtype, s.dtype) for v in s.operands]
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
            addr = region.address(index, d, idx, "atomic update of")
            written = mem.written[addr[:, None] + np.arange(dt.itemsize)].all(axis=1)
            if not written.all():
                k = int(np.flatnonzero(~written)[0])
                raise Fault(
                    f"atomic update of shared memory that nothing wrote in this block: {d} at "
                    f"{mem.describe(int(addr[k]))}",
                    int(idx[k]),
                    "initialize the element (and synchronize) before updating it atomically",
                )
            mem.track_atomic(addr, dt.itemsize, idx)
            data, slots = mem.data.view(dt), addr // dt.itemsize
        else:
            region.check(index, d, idx, "atomic update of")
            data, slots = region.view(dt), index
        old = apply_atomic(s.kind, d, data, slots, ops, ftz=not shared)
        if out is not None:
            out[idx] = decode(old, d)
        return idx

    return run
