"""CUDA C for the warp collectives: shuffles, votes, elect, ``redux.sync`` and the butterfly
warp reductions.

Shuffles, ballot, any, activemask and the ``__reduce_*_sync`` reductions are the CUDA
intrinsics themselves (NVRTC declares them without a header). A value whose C type has no
shuffle overload (bool, 8- and 16-bit integers) travels as ``int``/``unsigned int``; 16-bit
floats are ``float`` in expressions here, so they shuffle as the float that holds them.
``elect.sync`` and each warp reduction are small ``TIRX_DEVICE`` helpers, emitted once per
kernel when used (:func:`helper_source`).

A warp reduction is ``log2(width)`` steps of ``__shfl_xor_sync(0xffffffff, v, offset)`` with
offsets ``width/2, ..., 1`` and ``v = op(v, shuffled)``, ``v`` on the left: the order the
simulator uses, so float sums are bit-identical on both targets (each step rounds to the
value's dtype; max/min are ``tirx_max``/``tirx_min``, the meaning ``T.max`` has everywhere).
"""

from __future__ import annotations

from ...backend.cuda.codegen import ctype
from ...dtypes import DType
from .nodes import REDUCTIONS, SHUFFLES, WarpCollective, WarpOp

__all__ = ["leave_WarpCollective"]

_INTRINSIC = {  # the CUDA intrinsic of each op that is one
    WarpOp.SHFL_IDX: "__shfl_sync",
    WarpOp.SHFL_UP: "__shfl_up_sync",
    WarpOp.SHFL_DOWN: "__shfl_down_sync",
    WarpOp.SHFL_BFLY: "__shfl_xor_sync",
    WarpOp.BALLOT: "__ballot_sync",
    WarpOp.ANY: "__any_sync",
    WarpOp.REDUX_ADD: "__reduce_add_sync",
    WarpOp.REDUX_MIN: "__reduce_min_sync",
}
# C types the shuffle intrinsics are overloaded for; others travel as the type given here
_SHUFFLE_AS = {"bool": "int", "signed char": "int", "short": "int"}
_SHUFFLE_AS |= {"unsigned char": "unsigned int", "unsigned short": "unsigned int"}

_ELECT = (
    "TIRX_DEVICE unsigned int tirx_elect_sync(unsigned int mask) { unsigned int leader = 0; "
    'asm volatile("{\\n .reg .pred p;\\n elect.sync _|p, %1;\\n @p mov.u32 %0, 1;\\n}" '
    ': "+r"(leader) : "r"(mask)); return leader; }'
)


def _rounded(code: str, d: DType) -> str:
    """``code`` (a C value of ``ctype(d)``'s arithmetic) converted back to ``d``."""
    if d.name == "float16":
        return f"tirx_h2f(tirx_f2h({code}))"
    if d.name == "bfloat16":
        return f"tirx_b2f(tirx_f2b({code}))"
    return f"(({ctype(d)})({code}))"


def _reduce_helper(op: WarpOp, width: int, d: DType) -> tuple[str, str]:
    t = ctype(d)
    name = f"tirx_warp_{op.value}_{width}_{d.name}"
    via = _SHUFFLE_AS.get(t, t)
    shuffled = f"({t})__shfl_xor_sync(0xffffffffu, ({via})v, offset, {width})"
    step = {
        WarpOp.SUM: f"v = {_rounded('v + s', d)};",
        WarpOp.MAX: f"v = tirx_max<{t}>(v, s);",
        WarpOp.MIN: f"v = tirx_min<{t}>(v, s);",
    }[op]
    body = (
        f"TIRX_DEVICE {t} {name}({t} v) {{\n"
        f"#pragma unroll\n"
        f"  for (int offset = {width // 2}; offset > 0; offset >>= 1) {{\n"
        f"    {t} s = {shuffled};\n"
        f"    {step}\n"
        f"  }}\n"
        f"  return v;\n"
        f"}}"
    )
    return name, body


def leave_WarpCollective(cexprs, x: WarpCollective, mask, value, lane, width) -> str:
    """Codegen's rule for ``WarpCollective`` (``cexprs``: its expression visitor, whose ``em``
    is the emitter; the helper functions a collective calls are defined once per kernel)."""
    em = cexprs.em
    op = x.op
    if op in SHUFFLES:
        t = ctype(x.dtype)
        via = _SHUFFLE_AS.get(t, t)
        v = em.convert(value, x.value.dtype, x.dtype)
        call = (
            f"{_INTRINSIC[op]}((unsigned int)({mask}), ({via})({v}), (int)({lane}), (int)({width}))"
        )
        return call if via == t else f"(({t}){call})"
    if op in REDUCTIONS:
        name, body = _reduce_helper(op, int(x.width.value), x.dtype)
        v = em.convert(value, x.value.dtype, x.dtype)
        return f"{em.helper(name, body)}({v})"
    if op is WarpOp.ACTIVEMASK:
        return "__activemask()"
    if op is WarpOp.ELECT:
        return f"{em.helper('tirx_elect_sync', _ELECT)}((unsigned int)({mask}))"
    kind = "int" if op in (WarpOp.BALLOT, WarpOp.ANY) else "unsigned int"
    return f"{_INTRINSIC[op]}((unsigned int)({mask}), ({kind})({value}))"
