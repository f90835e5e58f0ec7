"""Warp collectives in the simulator: shuffles, votes, elect, ``redux.sync`` and the butterfly
warp reductions, executed per lane with their masks by the threads that evaluate them together.

Written from the CUDA programming guide ("Warp Shuffle Functions", "Warp Vote Functions",
"Warp Reduce Functions") and the PTX ISA (``shfl.sync``, ``vote.sync``, ``elect.sync``,
``redux.sync``), not from the code generator. The machine runs all threads in lockstep, so the
threads that evaluate an expression together (``idx``) are the ones that execute the
collective together; control flow that splits them (an ``if`` on the lane) gives each side its
own execution.

The rules every masked collective checks (the guide: "each calling thread must have its own
bit set in the mask and all non-exited threads named in mask must execute the same intrinsic
with the same mask, or the result is undefined"):

* the calling lane is in its mask;
* every lane of the mask that the block has executes the call, with the same mask (lanes a
  partial last warp lacks never run: they count as exited);
* a shuffle reads a lane of its mask (the guide: "threads may only read data from another
  thread which is actively participating").

A broken rule stops the run with a SimulationError naming the lane and the line. A shuffle's
source lane follows ``shfl.sync``'s definition in the PTX ISA (which is what the CUDA
intrinsics compile to: ``c = ((32 - width) << 8) | clamp``, clamp 0 for ``up`` and 31 for the
others), so an out-of-range source gives the caller's own value exactly as the hardware does.
"""

from __future__ import annotations

import numpy as np

from ...sim.faults import Fault
from ...sim.numeric import canonical_nan, compute_type, convert
from .nodes import CUDA_NAME, REDUCTIONS, REDUX, SHUFFLES, WarpCollective, WarpOp

__all__ = ["eval_WarpCollective", "shuffle_source"]

_HINT = (
    "every lane that executes a warp collective must be in its mask, and every lane of the "
    "mask must execute the same call: use 0xffffffff where the whole warp is converged, or "
    "__activemask() / a mask of the lanes that take the branch"
)
# warp_reduce / warp_sum / warp_max / warp_min take no mask: the whole warp must call them
_REDUCE_HINT = (
    "{what} has no mask: every lane of the warp must execute it: call it where the whole warp "
    "is converged (outside the branch), giving the lanes that should not contribute the "
    "neutral value ({neutral})"
)
_NEUTRAL = {
    "warp_sum": "0 for a sum",
    "warp_max": "-inf, or the type's lowest value, for a max",
    "warp_min": "+inf, or the type's highest value, for a min",
}
_LANES = np.arange(32, dtype=np.int64)


def shuffle_source(op: WarpOp, lane, b, width):
    """The lane each caller reads (PTX ISA, ``shfl.sync``): ``lane``, ``b`` (source lane,
    delta or lane mask) and ``width`` (a power of two, 1..32) are int64 arrays."""
    seg = 32 - width  # c[12:8]: the lanes above a group of ``width``
    clamp = 0 if op is WarpOp.SHFL_UP else 31  # c[4:0]
    bval = b & 31
    min_lane = lane & seg
    max_lane = min_lane | (clamp & ~seg & 31)
    if op is WarpOp.SHFL_UP:
        j = lane - bval
        ok = j >= max_lane
    elif op is WarpOp.SHFL_DOWN:
        j = lane + bval
        ok = j <= max_lane
    elif op is WarpOp.SHFL_BFLY:
        j = lane ^ bval
        ok = j <= max_lane
    else:
        j = min_lane | (bval & ~seg & 31)
        ok = j <= max_lane
    return np.where(ok, j, lane)


class _Group:
    """The lanes of one execution of a collective: the callers ``idx`` and their warps."""

    def __init__(self, m, idx: np.ndarray):
        self.m, self.idx = m, idx
        self.lane = (idx & 31).astype(np.int64)
        self.base = (idx - self.lane).astype(np.int64)
        self.tids = self.base[:, None] + _LANES[None, :]  # (callers, 32): each caller's warp
        self.exists = self.tids < m.T
        self.safe = np.minimum(self.tids, m.T - 1)
        self.active = np.zeros(m.T, dtype=bool)
        self.active[idx] = True

    def spread(self, values) -> np.ndarray:
        """``values`` (aligned with the callers) as a block-sized array."""
        v = np.broadcast_to(values, self.idx.shape)
        out = np.zeros(self.m.T, dtype=v.dtype)
        out[self.idx] = v
        return out

    def members(self, masks, what: str, hint: str = _HINT) -> np.ndarray:
        """(callers, 32): the lanes of each caller's mask that the block has, after checking
        the mask rules of the module doc (``hint`` goes with a broken rule)."""
        masks = np.broadcast_to(np.asarray(masks).astype(np.uint32), self.idx.shape)
        m64 = masks.astype(np.int64)
        own = (m64 >> self.lane) & 1
        if not own.all():
            k = int(np.flatnonzero(own == 0)[0])
            raise Fault(
                f"lane {self.lane[k]} executes {what} but is not in its mask {int(masks[k]):#010x}",
                self.idx[k],
                hint,
            )
        named = ((m64[:, None] >> _LANES[None, :]) & 1).astype(bool) & self.exists
        same = self.active[self.safe] & (self.spread(masks)[self.safe] == masks[:, None])
        bad = named & ~same
        if bad.any():
            r, j = (int(x) for x in np.argwhere(bad)[0])
            lane, mask = int(self.lane[r]), int(masks[r])
            if not self.active[self.tids[r, j]]:
                msg = (
                    f"lane {j} is in the mask {mask:#010x} of lane {lane}'s {what} but does "
                    "not execute it (divergent control flow)"
                )
            else:
                other = int(self.spread(masks)[self.tids[r, j]])
                msg = (
                    f"lanes {lane} and {j} execute {what} together with different masks "
                    f"({mask:#010x} and {other:#010x})"
                )
            raise Fault(msg, self.idx[r], hint)
        return named


def _width(widths, idx, what: str) -> np.ndarray:
    w = np.broadcast_to(np.asarray(widths).astype(np.int64), idx.shape)
    bad = (w < 1) | (w > 32) | ((w & (w - 1)) != 0)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise Fault(
            f"{what} with width {int(w[k])}: the width must be a power of two from 1 to 32",
            idx[k],
            "use 1, 2, 4, 8, 16 or 32 lanes per group",
        )
    return w


def eval_WarpCollective(compiler, e: WarpCollective):
    """The simulator's rule for a warp collective, compiled against ``compiler``'s machine."""
    return _WarpOps(compiler).compile_collective(e)


class _WarpOps:
    """The rules for each kind of collective, over the expression compiler's machine (``m``)
    and its ``compile``."""

    def __init__(self, compiler):
        self.m, self.compile, self.error = compiler.m, compiler.compile, compiler.error

    def compile_collective(self, e: WarpCollective):
        if e.op in SHUFFLES:
            return self._shuffle(e)
        if e.op in REDUCTIONS:
            return self._butterfly(e)
        if e.op in REDUX:
            return self._redux(e)
        return self._vote(e)

    def _shuffle(self, e: WarpCollective):
        m, what, op = self.m, CUDA_NAME[e.op], e.op
        f_mask, f_value = self.compile(e.mask), self.compile(e.value)
        f_lane, f_width = self.compile(e.lane), self.compile(e.width)

        def run(idx):
            g = _Group(m, idx)
            masks = f_mask(idx)
            g.members(masks, what)
            width = _width(f_width(idx), idx, what)
            b = np.broadcast_to(np.asarray(f_lane(idx)).astype(np.int64), idx.shape)
            src = shuffle_source(op, g.lane, b, width)
            m64 = np.broadcast_to(np.asarray(masks).astype(np.int64), idx.shape)
            src_tid = g.base + src
            ok = (((m64 >> src) & 1) == 1) & (src_tid < m.T)
            if not ok.all():
                k = int(np.flatnonzero(~ok)[0])
                raise Fault(
                    f"lane {g.lane[k]}'s {what} reads lane {src[k]}, which is not in its mask "
                    f"{int(m64[k]):#010x} (the value read is undefined)",
                    idx[k],
                    "add the source lane to the mask, or change the lane operand so the "
                    "source stays among the lanes that take part",
                )
            return g.spread(f_value(idx))[src_tid]

        return run

    def _vote(self, e: WarpCollective):
        m, what, op, d = self.m, CUDA_NAME[e.op], e.op, e.dtype
        f_mask = self.compile(e.mask) if e.mask is not None else None
        f_pred = self.compile(e.value) if e.value is not None else None

        def run(idx):
            g = _Group(m, idx)
            if op is WarpOp.ACTIVEMASK:
                lanes = g.active[g.safe] & g.exists
            else:
                lanes = g.members(f_mask(idx), what)
            if op is WarpOp.ELECT:
                leader = np.argmax(lanes, axis=1)  # the lowest lane of the mask
                return convert((leader == g.lane).astype(np.int64), d)
            if f_pred is not None:  # ballot, any
                pred = g.spread(np.asarray(f_pred(idx)).astype(bool))
                lanes = lanes & pred[g.safe]
            bits = (lanes.astype(np.int64) << _LANES[None, :]).sum(axis=1)
            if op is WarpOp.ANY:
                return convert((bits != 0).astype(np.int64), d)
            return convert(bits, d)

        return run

    def _redux(self, e: WarpCollective):
        m, what = self.m, CUDA_NAME[e.op]
        f_mask, f_value = self.compile(e.mask), self.compile(e.value)
        is_sum = e.op is WarpOp.REDUX_ADD

        def run(idx):
            g = _Group(m, idx)
            lanes = g.members(f_mask(idx), what)
            values = g.spread(np.asarray(f_value(idx)).astype(np.int64))[g.safe]
            if is_sum:
                total = np.where(lanes, values, 0).sum(axis=1)
                return (total & 0xFFFFFFFF).astype(np.uint32)
            return np.where(lanes, values, 0xFFFFFFFF).min(axis=1).astype(np.uint32)

        return run

    def _butterfly(self, e: WarpCollective):
        m, what, d, op = self.m, CUDA_NAME[e.op], e.dtype, e.op
        width = int(e.width.value)
        f_value = self.compile(e.value)
        ct = compute_type(d)
        hint = _REDUCE_HINT.format(what=what, neutral=_NEUTRAL[what])

        # a float32 NaN the sum makes is the GPU's canonical one
        made = canonical_nan if d.name == "float32" else (lambda x: x)

        def combine(a, b):
            if op is WarpOp.SUM:
                return made(convert(a + b, d))
            if op is WarpOp.MAX:
                return np.where(b > a, b, a)  # tirx's max(a, b), as T.max and max() mean
            return np.where(b < a, b, a)

        def run(idx):
            g = _Group(m, idx)
            g.members(np.uint32(0xFFFFFFFF), what, hint)
            val = np.array(np.broadcast_to(f_value(idx), idx.shape), dtype=ct)
            offset = width // 2
            while offset:  # the butterfly: offsets width/2, ..., 2, 1
                src = g.lane ^ offset
                src_tid = g.base + src
                if (src_tid >= m.T).any():
                    k = int(np.flatnonzero(src_tid >= m.T)[0])
                    raise Fault(
                        f"lane {g.lane[k]}'s {what} reads lane {src[k]}, which the block's "
                        "last (partial) warp does not have",
                        idx[k],
                        "launch a multiple of 32 threads per block, or reduce over a width "
                        "the lanes that exist fill",
                    )
                val = combine(val, g.spread(val)[src_tid])
                offset //= 2
            return val

        return run
