"""CTA-wide statements: ``__threadfence``, ``__syncthreads_and`` / ``_or`` and the two-stage
CTA reduction, written from the CUDA Programming Guide ("Synchronization Functions", "Memory
Fence Functions", "Warp Shuffle Functions").

* ``thread_fence``: orders the calling thread's own memory accesses as seen by other threads.
  The simulator already performs every thread's accesses in program order and makes each
  visible at once, and a fence does not order *different* threads' accesses (only a barrier
  does), so it has no effect on results or on the race model.
* ``syncthreads_and`` / ``_or``: a barrier for the whole CTA (every thread must reach it, as
  ``cta_sync``) that also returns 1 to every thread when the predicate is nonzero in every
  (any) thread, else 0.
* ``cta_reduce``: the steps tirx's codegen emits, each executed as the GPU does it: a xor
  butterfly ``v = v op shfl_xor(v, m)`` for ``m = 16, 8, 4, 2, 1`` in every warp (so every lane
  of a warp holds the same value, combined in the same order as on the GPU: float sums are
  bit-equal), lane 0 of warp ``w`` stores it to ``scratch[w]``, a barrier, warp 0 loads
  ``scratch[lane]`` (lanes past the warp count take the identity) and reduces it the same way,
  lane 0 stores ``scratch[0]``, a barrier, and every thread loads ``scratch[0]``. The scratch
  accesses go through shared memory with its race checks, so a second reduction into the same
  scratch with no barrier between is reported like any race. max/min on floats are CUDA's
  fmaxf/fminf (a NaN loses to a number).
"""

from __future__ import annotations

import numpy as np

from ...sim.expr import converted, to_bool
from ...sim.faults import Fault
from ...sim.numeric import canonical_nan, compute_type, decode, encode
from .nodes import CtaReduce, ReduceKind, ThreadFence, VoteKind, VotingBarrier

__all__ = ["compile_thread_fence", "compile_voting_barrier", "compile_cta_reduce"]

_HINT = "every thread of the block must reach it; move it out of divergent code"


def _all_threads(m, idx, what: str) -> None:
    if idx.size != m.T:
        missing = int(np.setdiff1d(m.all, idx)[0])
        raise Fault(
            f"{what} reached by {idx.size} of {m.T} threads; thread {missing} is elsewhere "
            "(divergent control flow)",
            missing,
            _HINT,
        )


def compile_thread_fence(machine, s: ThreadFence):
    def run(idx):
        return idx

    return run


def compile_voting_barrier(machine, s: VotingBarrier):
    pred = to_bool(machine.compiler.compile(s.predicate), s.predicate.dtype)
    out = machine.variable(s.result) if s.result is not None else None
    vote = np.all if s.kind is VoteKind.AND else np.any
    span, m = s.span, machine
    what = f"syncthreads_{s.kind}"

    def run(idx):
        m.span = span
        _all_threads(m, idx, what)
        c = np.broadcast_to(pred(idx), (idx.size,))
        m.shared.barrier()
        if out is not None:
            out[idx] = np.int32(1 if vote(c) else 0)
        return idx

    return run


def _combine(kind: ReduceKind, d):
    is_float = d.kind == "float"
    if kind is ReduceKind.SUM:  # a float32 NaN made is the GPU's canonical one
        return (lambda a, b: canonical_nan(np.add(a, b))) if d.name == "float32" else np.add
    if kind is ReduceKind.MAX:
        return np.fmax if is_float else np.maximum
    return np.fmin if is_float else np.minimum


def _identity(kind: ReduceKind, ct: np.dtype):
    """What a lane of warp 0 past the warp count contributes: 0, or the most negative
    (positive) value of the type for max (min)."""
    if kind is ReduceKind.SUM:
        return ct.type(0)
    big = np.inf if ct.kind == "f" else np.iinfo(ct).max
    small = -np.inf if ct.kind == "f" else np.iinfo(ct).min
    return ct.type(small if kind is ReduceKind.MAX else big)


def butterfly(values: np.ndarray, op) -> np.ndarray:
    """``values`` ``[W, 32]`` after the xor butterfly: at each step every lane combines its
    value (left operand) with lane ``lane ^ m``'s, for ``m = 16, 8, 4, 2, 1``. The one place
    the CTA reduction's warp step is executed (to be swapped for the warp collectives' own
    warp reduction once both are in one tree)."""
    lanes = np.arange(32)
    v = values
    m = 16
    while m:
        v = op(v, v[:, lanes ^ m])
        m >>= 1
    return v


def compile_cta_reduce(machine, s: CtaReduce):
    d = s.value.dtype
    fv = converted(machine.compiler.compile(s.value), s.value.dtype, d)
    fo = machine.compiler.compile(s.offset)
    scratch = machine.region(s.scratch, machine.compiler)
    out = machine.variable(s.result) if s.result is not None else None
    op = _combine(s.kind, d)
    ident = _identity(s.kind, compute_type(d))
    nw, span, m = s.num_warps, s.span, machine
    what = f"cta_reduce ({s.kind})"

    def run(idx):
        m.span = span
        _all_threads(m, idx, what)
        base = int(np.asarray(fo(idx)).reshape(-1)[0])
        v = np.array(np.broadcast_to(fv(idx), (idx.size,)))
        warps = v.size // 32
        v = butterfly(v.reshape(warps, 32), op)
        leaders = np.arange(warps) * 32
        scratch.store(base + np.arange(warps), encode(v[:, 0], d), d, leaders)
        m.shared.barrier()
        lanes = np.arange(32)
        inside = lanes < nw
        partial = np.full(32, ident, dtype=v.dtype)
        loaded = scratch.load(base + lanes[inside], d, lanes[inside])
        partial[inside] = decode(loaded, d)
        total = butterfly(partial.reshape(1, 32), op)[0, 0]
        zero = np.zeros(1, dtype=np.intp)
        scratch.store(np.array([base]), encode(np.array([total]), d), d, zero)
        m.shared.barrier()
        result = decode(scratch.load(np.full(idx.size, base), d, idx), d)
        if out is not None:
            out[idx] = result
        return idx

    return run
