"""Warp collectives in kernel code: shuffles, votes, ``elect_sync`` and warp reductions.

The names are the real TIRx's (``T.cuda.__shfl_xor_sync``, ``T.cuda.warp_sum``,
``T.gpu_warp_shuffle_xor``, ...); each call becomes one expression node of the warp-collective
family in :mod:`tirx.ir.nodes` (a ``WarpCollective`` whose ``op`` is a ``WarpOp``).

What can be decided here is refused here, at the user's line:

* a mask that is a compile-time constant must fit 32 bits, and must not be 0 (no lane can be
  in it, yet the calling lane must be);
* a call that every thread of the block executes (at the top level of the kernel body, outside
  any ``if``/loop) with a constant mask must name every lane the block has: each of them calls
  it, and a calling lane outside its own mask is undefined (CUDA programming guide, "Warp Shuffle
  Functions": "each calling thread must have its own bit set in the mask");
* a constant ``width`` must be a power of two from 1 to 32 (``warp_reduce``: 2 to 32, as the
  real TIRx requires), the reduction op one of "sum", "max", "min";
* a warp reduction that every thread executes must not read lanes a partial last warp lacks
  (its width must divide that warp's lane count);
* ``reduce_add_sync_u32`` / ``reduce_min_sync_u32`` take 32-bit integers (``redux.sync.u32``).

Everything that depends on run-time values (which lanes execute a call under divergent control
flow, a run-time mask or lane) is checked by the simulator (:mod:`tirx.families.warp_collectives.sim`).
"""

from __future__ import annotations

from ...errors import TirxSyntaxError
from ...ir import nodes as ir
from ...ir.printer import call_text
from ...ir.simplify import static_value
from ...script.checks import int_literal
from ...script.values import is_number, kind_of
from .nodes import CUDA_NAME, REDUCTIONS, WarpCollective, WarpOp

__all__ = ["CUDA_NAMES", "T_NAMES", "KEYS", "parse_call", "leave_WarpCollective"]

#: ``T.cuda.<name>``
CUDA_NAMES = (
    "__shfl_sync",
    "__shfl_up_sync",
    "__shfl_down_sync",
    "__shfl_xor_sync",
    "__activemask",
    "ballot_sync",
    "any_sync",
    "elect_sync",
    "warp_reduce",
    "warp_sum",
    "warp_max",
    "warp_min",
    "reduce_add_sync_u32",
    "reduce_min_sync_u32",
)
#: ``T.<name>`` (the TVM spellings, with an explicit warp size)
T_NAMES = (
    "gpu_warp_shuffle",
    "gpu_warp_shuffle_up",
    "gpu_warp_shuffle_down",
    "gpu_warp_shuffle_xor",
    "gpu_warp_activemask",
)
KEYS = frozenset({f"cuda.{n}" for n in CUDA_NAMES} | set(T_NAMES))

_SHUFFLES = {
    "__shfl_sync": (WarpOp.SHFL_IDX, "src_lane"),
    "__shfl_up_sync": (WarpOp.SHFL_UP, "delta"),
    "__shfl_down_sync": (WarpOp.SHFL_DOWN, "delta"),
    "__shfl_xor_sync": (WarpOp.SHFL_BFLY, "lane_mask"),
}
_GPU_SHUFFLES = {
    "gpu_warp_shuffle": "__shfl_sync",
    "gpu_warp_shuffle_up": "__shfl_up_sync",
    "gpu_warp_shuffle_down": "__shfl_down_sync",
    "gpu_warp_shuffle_xor": "__shfl_xor_sync",
}
_REDUCE_OPS = {"sum": WarpOp.SUM, "max": WarpOp.MAX, "min": WarpOp.MIN}
FULL_MASK = 0xFFFFFFFF
WARP_SIZE = 32


def parse_call(ev, key: str, node, name_hint=None) -> ir.Expr:
    """The IR of the call ``node`` to the warp collective ``key`` (one of :data:`KEYS`);
    ``ev`` is the evaluator (its ``_args``, its parser ``p`` and builder ``b``)."""
    span = ev.p.span(node)
    name = key.removeprefix("cuda.")
    if name in _GPU_SHUFFLES:
        mask, value, lane, width, warp_size = ev._args(
            node, 5, 5, "mask", "value", "lane", "width", "warp_size"
        )
        if static_value(warp_size) != WARP_SIZE:
            raise TirxSyntaxError(
                f"T.{name}: warp_size must be {WARP_SIZE}, got {warp_size!r}",
                span,
                hint="NVIDIA GPUs have 32 lanes per warp: pass 32",
            )
        return _shuffle(ev, _GPU_SHUFFLES[name], [mask, value, lane, width], span)
    if name in _SHUFFLES:
        arg = _SHUFFLES[name][1]
        vals = ev._args(node, 3, 4, "mask", "var", arg, "width")
        return _shuffle(ev, name, vals, span)
    if name in ("__activemask", "gpu_warp_activemask"):
        ev._args(node, 0, 0)
        return _node(WarpOp.ACTIVEMASK, ir.U32, span)
    if name in ("ballot_sync", "any_sync"):
        mask, pred = ev._args(node, 2, 2, "mask", "pred")
        mask = _mask(ev, mask, name, span)
        pred = _bool(_value(pred, name, "pred"))
        if name == "ballot_sync":
            return _node(WarpOp.BALLOT, ir.U32, span, mask, pred)
        return _node(WarpOp.ANY, ir.I32, span, mask, pred)
    if name == "elect_sync":
        (mask,) = ev._args(node, 0, 1, "mask") or [FULL_MASK]
        mask = _mask(ev, mask, name, span)
        return _node(WarpOp.ELECT, ir.U32, span, mask)
    if name in ("reduce_add_sync_u32", "reduce_min_sync_u32"):
        mask, value = ev._args(node, 2, 2, "mask", "value")
        mask = _mask(ev, mask, name, span)
        value = _value(value, name, "value")
        if value.dtype.kind not in ("int", "uint", "bool") or value.dtype.bits > 32:
            raise TirxSyntaxError(
                f"T.cuda.{name} reduces 32-bit integers, not {value.dtype}",
                span,
                hint="redux.sync has .u32/.s32 forms only; for floats use T.cuda.warp_sum / "
                "warp_min, which shuffle",
            )
        op = WarpOp.REDUX_ADD if name == "reduce_add_sync_u32" else WarpOp.REDUX_MIN
        return _node(op, ir.U32, span, mask, ir.cast(value, ir.U32))
    if name == "warp_reduce":
        value, op, width = _pad(ev._args(node, 2, 3, "value", "op", "width"), 3, WARP_SIZE)
    else:
        value, width = _pad(ev._args(node, 1, 2, "value", "width"), 2, WARP_SIZE)
        op = name.removeprefix("warp_")
    return _reduce(ev, value, op, width, span)


def _node(op, dtype, span, mask=None, value=None, lane=None, width=None) -> WarpCollective:
    return WarpCollective(op, mask, value, lane, width, dtype, span)


def _pad(vals: list, n: int, default) -> list:
    return vals + [default] * (n - len(vals))


def _value(v, name: str, what: str) -> ir.Expr:
    if isinstance(v, ir.View) or not (is_number(v) or isinstance(v, ir.Expr)):
        raise TirxSyntaxError(
            f"T.cuda.{name}: {what} must be a scalar value, got {kind_of(v)}",
            hint="index a tensor to get one element, e.g. A[lane]",
        )
    return ir.as_expr(int_literal(v))


def _bool(e: ir.Expr) -> ir.Expr:
    return e if e.dtype.name == "bool" else ir.cmp(ir.CmpOp.NE, e, 0)


def _mask(ev, mask, name: str, span) -> ir.Expr:
    """The mask as a uint32 expression, with the compile-time checks of the module doc."""
    is_float = isinstance(mask, float) or (isinstance(mask, ir.Expr) and mask.dtype.kind == "float")
    if isinstance(mask, bool) or is_float:
        raise TirxSyntaxError(f"the mask of {name} must be a 32-bit integer, got {mask!r}", span)
    if isinstance(mask, ir.Const):
        mask = int(mask.value)
    if isinstance(mask, int):
        if not 0 <= mask <= FULL_MASK:
            raise TirxSyntaxError(
                f"the mask of {name} is {mask:#x}, which does not fit 32 bits",
                span,
                hint="a mask has one bit per lane: 0xffffffff names the whole warp",
            )
        _check_constant_mask(ev, mask, name, span)
        return ir.const(mask, ir.U32)
    return ir.cast(_value(mask, name, "mask"), ir.U32)


def _check_constant_mask(ev, mask: int, name: str, span) -> None:
    hint = (
        "every lane that executes the call must be in its mask: use 0xffffffff for the whole "
        "warp, or call it under a condition that only the mask's lanes take"
    )
    if mask == 0:
        raise TirxSyntaxError(f"the mask of {name} is 0: no lane can execute it", span, hint=hint)
    launch = ev.b.launch
    if launch is None or len(ev.b.bodies) != 1:
        return  # inside control flow: which lanes get here is known only at run time
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    lanes = min(threads, WARP_SIZE)  # lanes of the first (and any full) warp
    missing = [lane for lane in range(lanes) if not mask >> lane & 1]
    if missing:
        raise TirxSyntaxError(
            f"every thread executes this {name} (it is outside any if or loop), but lane "
            f"{missing[0]} is not in its mask {mask:#010x}",
            span,
            hint=hint,
        )


def _shuffle(ev, name: str, vals: list, span) -> ir.Expr:
    mask, value, lane, width = _pad(vals, 4, WARP_SIZE)
    op, arg = _SHUFFLES[name]
    mask = _mask(ev, mask, name, span)
    value = _value(value, name, "the shuffled value")
    lane = _value(lane, name, arg)
    width = _value(width, name, "width")
    for e, what in ((lane, arg), (width, "width")):
        if e.dtype.kind not in ("int", "uint"):
            raise TirxSyntaxError(f"{name}: {what} must be an integer, not {e.dtype}", span)
    if isinstance(width, ir.Const):
        _check_width(int(width.value), 1, name, span)
    lane, width = ir.cast(lane, ir.I32), ir.cast(width, ir.I32)
    return _node(op, value.dtype, span, mask, value, lane, width)


def _check_width(width: int, low: int, name: str, span) -> None:
    if not (low <= width <= WARP_SIZE and width & (width - 1) == 0):
        allowed = ", ".join(str(1 << k) for k in range(low.bit_length() - 1, 6))
        raise TirxSyntaxError(
            f"the width of {name} must be a power of two from {low} to 32, got {width}",
            span,
            hint=f"use one of {allowed}: the warp splits into groups of that many lanes",
        )


def _reduce(ev, value, op, width, span) -> ir.Expr:
    if op not in _REDUCE_OPS:
        raise TirxSyntaxError(
            f"unknown warp_reduce op {op!r}",
            span,
            hint='use "sum", "max" or "min"',
        )
    if isinstance(width, ir.Const):
        width = width.value
    if not isinstance(width, int) or isinstance(width, bool):
        raise TirxSyntaxError(
            f"the width of warp_reduce must be a compile-time int, got {kind_of(width)}", span
        )
    _check_width(width, 2, "warp_reduce", span)
    value = _value(value, "warp_reduce", "value")
    if value.dtype.kind == "bool":
        raise TirxSyntaxError(
            "warp_reduce needs a number, not a bool",
            span,
            hint="reduce T.int32(flag) instead, or vote with T.cuda.any_sync / ballot_sync",
        )
    _check_partial_warp(ev, width, span)
    return _node(_REDUCE_OPS[op], value.dtype, span, value=value, width=ir.const(width))


def _check_partial_warp(ev, width: int, span) -> None:
    """A warp reduction that every thread executes, in a block whose last warp has ``r``
    lanes: when ``width`` does not divide ``r``, the last group reads lanes that do not
    exist (undefined)."""
    launch = ev.b.launch
    if launch is None or len(ev.b.bodies) != 1:
        return
    lanes = launch.block[0] * launch.block[1] * launch.block[2] % WARP_SIZE
    if lanes and lanes % width:
        fits = 1 << ((lanes & -lanes).bit_length() - 1)
        raise TirxSyntaxError(
            f"every thread executes this warp reduction, but the block's last warp has only "
            f"{lanes} lanes: its last group of {width} reads lanes that do not exist",
            span,
            hint=f"launch a multiple of 32 threads per block, reduce over width={fits} (it "
            f"divides {lanes}), or guard the call so only whole groups execute it",
        )


# ------------------------------------------------------------------ the printer's rule
# (exe.script(), tirx/ir/printer.py): the T.cuda spelling (a warp_reduce's op is its second
# argument)


def leave_WarpCollective(printer, e: WarpCollective, mask, value, lane, width):
    if e.op in REDUCTIONS:
        return call_text(f'T.cuda.warp_reduce({value[0]}, "{e.op.value}", {width[0]})')
    args = ", ".join(x[0] for x in (mask, value, lane, width) if x[0] != "None")
    return call_text(f"T.cuda.{CUDA_NAME[e.op]}({args})")
