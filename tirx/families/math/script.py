"""The math and bit intrinsics of the ``T`` namespace: their names, arities and dtype rules.

Each ``T`` name (``T.exp``, ``T.clz``, ``T.cuda.ffs_u32``, ...) is a row of :data:`FORMS`:
how many values it takes and which builder turns them into IR. The builders check the
operands' dtypes and say what to write instead when one has no meaning for the intrinsic (an
integer for ``T.exp``, a float for ``T.clz``, an 8-bit float anywhere). Most rows build a
:class:`.nodes.MathCall`; the integer division family and the bitwise operators build
the same :class:`~tirx.ir.nodes.BinOp` as the Python operators do (their checks included).

Dtype rules, as the real TIRx has them (docs/semantics.md, "Math and bit intrinsics"):

* float functions take float values; float16 and bfloat16 compute as float32 (the result is
  float32, as for arithmetic), float64 as float64;
* ``T.max``/``T.min`` on floats give NaN when either operand is NaN; on integers they are
  ``max``/``min``;
* ``T.clz`` takes 32- or 64-bit integers and gives int32; ``T.popcount`` keeps its operand's
  dtype; ``T.infinity``/``T.min_value``/``T.max_value`` take ``ty=`` and give a constant.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ...dtypes import DType, DTypeKind, dtype_of, is_float, is_fp8
from ...errors import TirxSyntaxError
from ...ir import nodes as ir
from ...ir.printer import call_text
from ...script import checks
from ...script.values import is_number, is_static, kind_of
from .nodes import MathCall, MathOp

__all__ = ["Form", "FORMS", "MATH_NAMES", "CUDA_NAMES", "parse_call", "leave_MathCall"]

F64 = dtype_of("float64")
Op, M = ir.Op, MathOp


@dataclass(frozen=True)
class Form:
    """One intrinsic: ``arity`` positional values, built by
    ``builder(evaluator, name, op, values, spans)``."""

    arity: int
    builder: Callable
    op: MathOp | ir.Op | None = None


# ------------------------------------------------------------------------- operand checks


def _expr(v) -> ir.Expr:
    return ir.as_expr(checks.int_literal(v))


def _float(name: str, v, span) -> ir.Expr:
    """``v`` as a float value for ``T.name``: a float expression, or a Python float."""
    e = _expr(v)
    if is_fp8(e.dtype):
        raise _fp8_error(f"T.{name}", e.dtype, span)
    if not is_float(e.dtype):
        what = "an integer constant" if is_number(v) else _a(f"{e.dtype} value")
        raise TirxSyntaxError(
            f"T.{name} takes a float value, not {what}",
            span,
            hint=f"convert it first: T.{name}(T.float32(x))"
            + (f", or write the constant as a float ({float(v)!r})" if is_number(v) else ""),
        )
    return e


def _int(name: str, v, span, bits: tuple[int, ...] = ()) -> ir.Expr:
    e = _expr(v)
    if is_float(e.dtype):
        raise TirxSyntaxError(
            f"T.{name} takes an integer value, not {_a(f'{e.dtype} value')}",
            span,
            hint="reinterpret a float32's bits with T.cuda.float_as_uint(x), or convert the "
            "value with T.int32(x)",
        )
    if bits and (e.dtype.bits not in bits or e.dtype.kind is DTypeKind.BOOL):
        widths = " or ".join(f"{b}-bit" for b in bits)
        raise TirxSyntaxError(
            f"T.{name} takes a {widths} integer, not {e.dtype}",
            span,
            hint=f"widen it first: T.{name}(T.uint32(x)) (or T.int32, T.uint64, T.int64)",
        )
    return e


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _fp8_error(what: str, d: DType, span) -> TirxSyntaxError:
    return TirxSyntaxError(
        f"{what} does not compute on {d}: 8-bit floats are storage types here, as in the real TIRx",
        span,
        hint="convert the value first, T.float32(x), and convert back when you store it, "
        f"T.{d.name}(y) (a store into a {d} tensor converts by itself)",
    )


def _compute(dtypes) -> DType:
    """The float type a float intrinsic computes in: float64 if any operand is, else float32."""
    return F64 if any(d.name == "float64" for d in dtypes) else ir.F32


# ----------------------------------------------------------------------------- builders


def _float_fn(ev, name, op, args, spans):
    xs = [_float(name, a, s) for a, s in zip(args, spans)]
    d = _compute(x.dtype for x in xs)
    return MathCall(op, tuple(ir.cast(x, d) for x in xs), d)


def _ldexp(ev, name, op, args, spans):
    """``T.ldexp(x, n)``: ``x · 2**n`` for a float ``x`` and an integer ``n`` (C's ``int``:
    a wider integer is converted to int32, as C converts it)."""
    (x, n), (sx, sn) = args, spans
    e = _float(name, x, sx)
    k = _expr(n)
    if not is_float(k.dtype) and k.dtype.kind is not DTypeKind.BOOL:
        d = _compute([e.dtype])
        return MathCall(op, (ir.cast(e, d), ir.cast(k, ir.I32)), d)
    raise TirxSyntaxError(
        f"T.ldexp's exponent is an integer, not {_a(f'{k.dtype} value')}",
        sn,
        hint="convert it: T.ldexp(x, T.int32(n)); for a float power of two write x * T.exp2(y)",
    )


def _predicate(ev, name, op, args, spans):
    (v,), (span,) = args, spans
    if is_static(v):
        x = float(v)
        return {M.ISNAN: math.isnan, M.ISINF: math.isinf, M.ISFINITE: math.isfinite}[op](x)
    e = _expr(v)
    if is_fp8(e.dtype):
        raise _fp8_error(f"T.{name}", e.dtype, span)
    if not is_float(e.dtype):  # an integer is never NaN or infinite
        return ir.const(op is M.ISFINITE)
    return MathCall(op, (ir.cast(e, _compute([e.dtype])),), ir.BOOL)


def _minmax(ev, name, op, args, spans):
    a, b = args
    if is_number(a) and is_number(b):
        if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
            return math.nan
        return max(a, b) if op is M.FMAX else min(a, b)
    ea, eb = _expr(a), _expr(b)
    for e, s in zip((ea, eb), spans):
        if is_fp8(e.dtype):
            raise _fp8_error(f"T.{name}", e.dtype, s)
    d = ir.promote(ea.dtype, eb.dtype)
    if not is_float(d):
        return ev.binop(Op.MAX if op is M.FMAX else Op.MIN, a, b)
    return MathCall(op, (ir.cast(ea, d), ir.cast(eb, d)), d)


def _abs(ev, name, op, args, spans):
    (v,) = args
    if is_number(v):
        return abs(v)
    e = _expr(v)
    if is_float(e.dtype):
        return _float_fn(ev, name, M.FABS, args, spans)
    if e.dtype.kind is DTypeKind.UINT:
        return e
    return ev.binop(Op.MAX, e, ev.binop(Op.SUB, 0, e))


def _limit(ev, name, op, args, spans, ty=None):
    if ty is None:
        raise TirxSyntaxError(
            f"T.{name} needs the dtype", hint=f'name it with ty=: T.{name}(ty="float32")'
        )
    try:
        d = dtype_of(ty)
    except ValueError as err:
        raise TirxSyntaxError(str(err), hint='name a dtype, e.g. ty="float32"') from None
    if d.kind is DTypeKind.BOOL:
        raise TirxSyntaxError(f"T.{name} has no value for bool", hint="use True or False")
    if d.kind is not DTypeKind.FLOAT:
        if name == "infinity":
            raise TirxSyntaxError(
                f"{d} has no infinity",
                hint=f'use T.max_value(ty="{d}") for its largest value, or a float type',
            )
        lo = -(2 ** (d.bits - 1)) if d.kind is DTypeKind.INT else 0
        hi = 2 ** (d.bits - 1) - 1 if d.kind is DTypeKind.INT else 2**d.bits - 1
        return ir.Const(hi if name == "max_value" else lo, d)
    largest = _LARGEST[d.name]
    if name == "infinity":
        if d.name == "float8_e4m3fn":
            raise TirxSyntaxError(
                "float8_e4m3fn has no infinity (the OCP FP8 'fn' format: finite and NaN only)",
                hint='T.max_value(ty="float8_e4m3fn") is its largest value, 448',
            )
        value = math.inf
    else:
        value = largest if name == "max_value" else -largest
    # an 8-bit float is never a value in expressions: its limits are float32 constants
    return ir.Const(value, ir.F32 if is_fp8(d) else d)


_LARGEST = {
    "float16": 65504.0,
    "bfloat16": float.fromhex("0x1.fep127"),
    "float32": float.fromhex("0x1.fffffep127"),
    "float64": float.fromhex("0x1.fffffffffffffp1023"),
    "float8_e4m3fn": 448.0,
    "float8_e5m2": 57344.0,
}


def _trunc_division(ev, name, op, args, spans):
    a, b = (_int(name, v, s) for v, s in zip(args, spans))
    if isinstance(b, ir.Const) and b.value == 0:
        raise TirxSyntaxError(
            f"T.{name} by zero", spans[1], hint="divide by a nonzero value, or guard the call"
        )
    d = ir.promote(a.dtype, b.dtype)
    if isinstance(a, ir.Const) and isinstance(b, ir.Const):
        x, y = ir.cast(a, d).value, ir.cast(b, d).value
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        return ir.cast(ir.const(q if op is M.TRUNCDIV else x - q * y, "int64"), d)
    return MathCall(op, (ir.cast(a, d), ir.cast(b, d)), d)


def _floor_division(ev, name, op, args, spans):
    """The same as ``//`` and ``%``: integers, or floats (``floor(a / b)``)."""
    return ev.binop(op, *args)


def _ceildiv(ev, name, op, args, spans):
    """``floordiv(a + b - 1, b)``, the real TIRx's definition (``⌈a/b⌉`` for ``b > 0``)."""
    a, b = args
    for v, s in zip(args, spans):
        _int(name, v, s)
    if is_number(a) and is_number(b):
        if b == 0:
            raise TirxSyntaxError("T.ceildiv by zero", spans[1], hint="divide by a nonzero value")
        return (a + b - 1) // b
    return ev.binop(Op.FLOORDIV, ev.binop(Op.SUB, ev.binop(Op.ADD, a, b), 1), b)


def _bitwise(ev, name, op, args, spans):
    for v, s in zip(args, spans):
        _int(name, v, s)
    return ev.binop(op, *args)


def _bitwise_not(ev, name, op, args, spans):
    (v,), (span,) = args, spans
    _int(name, v, span)
    return ~v if is_number(v) else ev.binop(Op.BITXOR, v, -1)


def _bit_count(ev, name, op, args, spans):
    (v,), (span,) = args, spans
    e = _int(name, v, span, bits=(32, 64))
    return MathCall(op, (e,), ir.I32 if op is M.CLZ else e.dtype)


def _ffs(ev, name, op, args, spans):
    (v,), (span,) = args, spans
    e = _int(name, v, span, bits=(32,))
    return MathCall(op, (ir.cast(e, ir.U32),), ir.I32)


def _float_as_uint(ev, name, op, args, spans):
    (v,), (span,) = args, spans
    e = _float(name, v, span)
    if e.dtype.name == "float64":
        raise TirxSyntaxError(
            "T.cuda.float_as_uint takes a float32 value, not float64",
            span,
            hint="convert it first: T.cuda.float_as_uint(T.float32(x))",
        )
    return ir.Reinterpret(ir.cast(e, ir.F32), ir.U32)  # T.reinterpret's bit cast


def _uint_as_float(ev, name, op, args, spans):
    (v,), (span,) = args, spans
    e = _int(name, v, span, bits=(32,))
    return ir.Reinterpret(ir.cast(e, ir.U32), ir.F32)


def _to_float32(ev, name, op, args, spans):
    """``T.cuda.half2float(h)`` / ``T.cuda.bfloat162float(b)``: the 16-bit float's value as
    float32 (exact). The C helper's parameter is the 16-bit type, so a wider value would be
    rounded to it first; that is refused rather than done silently."""
    (v,), (span,) = args, spans
    want = "float16" if name == "cuda.half2float" else "bfloat16"
    e = _float(name, v, span)
    if e.dtype.name != want:
        what = "a Python float" if is_number(v) else _a(f"{e.dtype} value")
        raise TirxSyntaxError(
            f"T.{name} takes a {want} value, not {what}",
            span,
            hint=f"a {e.dtype} value needs no conversion; to round it through {want} first, "
            f"write T.float32(T.{want}(x))",
        )
    return ir.cast(e, ir.F32)


def _low_word(ev, name, op, args, spans):
    """``T.cuda.smem_addr_from_uint64(a)``: the low 32 bits of a 64-bit address (a shared
    window address fits them), as the C helper's ``static_cast<unsigned int>``."""
    (v,), (span,) = args, spans
    return ir.cast(_int(name, v, span), ir.U32)


_U64 = dtype_of("uint64")


def _bf16x2_minmax(ev, name, op, args, spans):
    """``T.cuda.hmax2(a, b)`` / ``hmin2``: two bfloat16 pairs, each packed in a 32-bit word
    (the first of a pair in the low half), and their elementwise max (min), packed alike."""
    a, b = (ir.cast(_int(name, v, s, bits=(32,)), ir.U32) for v, s in zip(args, spans))
    return MathCall(op, (a, b), ir.U32)


def _pack_bf16x2(ev, name, op, args, spans):
    """``T.cuda.float22bfloat162_rn(x, y)``: x and y rounded to bfloat16 (to nearest even)
    and packed in a uint32, x in the low half; ``..._from_float2(w)``: the same of the float2
    whose bits a uint64 holds (x its low word)."""
    if name.endswith("_from_float2"):
        (v,), (span,) = args, spans
        w = ir.cast(_int(name, v, span, bits=(64,)), _U64)
        words = (ir.cast(w, ir.U32), ir.cast(ir.binop(Op.SHR, w, 32), ir.U32))
        xs = tuple(ir.Reinterpret(x, ir.F32) for x in words)
    else:
        xs = tuple(ir.cast(_float(name, v, s), ir.F32) for v, s in zip(args, spans))
    return MathCall(M.PACK_BF16X2, xs, ir.U32)


def _unpack_bf16x2(ev, name, op, args, spans):
    """``T.cuda.bfloat1622float2(w)``: the two bfloat16 of a uint32 as the float2 whose bits a
    uint64 holds (the low half's value in the low word); exact, as bfloat16 to float32 is."""
    (v,), (span,) = args, spans
    w = ir.cast(_int(name, v, span, bits=(32,)), ir.U32)
    x = ir.binop(Op.SHL, ir.binop(Op.BITAND, w, ir.const(0xFFFF, ir.U32)), 16)
    y = ir.binop(Op.BITAND, w, ir.const(0xFFFF0000, ir.U32))
    return ir.binop(Op.BITOR, ir.binop(Op.SHL, ir.cast(y, _U64), 32), ir.cast(x, _U64))


def _fdividef(ev, name, op, args, spans):
    """``T.cuda.fdividef(x, y)``: CUDA's ``__fdividef``, the fast approximate float32 division
    (PTX ``div.approx.f32``); float32 operands (a wider float is rounded to float32, as the C
    helper's parameters round it)."""
    x, y = (ir.cast(_float(name, v, s), ir.F32) for v, s in zip(args, spans))
    return MathCall(M.FDIVIDEF, (x, y), ir.F32)


def _float2_word(w: ir.Expr, high: bool) -> ir.Expr:
    """The float32 whose bits are the low (or high) word of the uint64 ``w``."""
    word = ir.binop(Op.SHR, w, 32) if high else w
    return ir.Reinterpret(ir.cast(word, ir.U32), ir.F32)


def _float2_bits(x: ir.Expr, y: ir.Expr) -> ir.Expr:
    """The uint64 holding the bits of the float2 (x, y): x the low word, as in memory."""
    lo, hi = (ir.cast(ir.Reinterpret(v, ir.U32), _U64) for v in (x, y))
    return ir.binop(Op.BITOR, ir.binop(Op.SHL, hi, 32), lo)


def _make_float2(ev, name, op, args, spans):
    """``T.cuda.make_float2(x, y)``: the float2 (x, y) as the uint64 holding its bits."""
    return _float2_bits(*(ir.cast(_float(name, v, s), ir.F32) for v, s in zip(args, spans)))


def _float2_part(ev, name, op, args, spans):
    """``T.cuda.float2_x(w)`` / ``float2_y(w)``: one float32 of the float2 a uint64 holds."""
    (v,), (span,) = args, spans
    w = ir.cast(_int(name, v, span, bits=(64,)), _U64)
    return _float2_word(w, name.endswith("_y"))


def _float2_arith(ev, name, op, args, spans):
    """``T.cuda.fadd2_rn(a, b)`` / ``fmul2_rn``: two float2 (each the bits of a uint64) added
    (multiplied) lane by lane, each lane one float32 operation rounded to nearest even (never
    contracted with another: tirx compiles with ``--fmad=false``)."""
    a, b = (ir.cast(_int(name, v, s, bits=(64,)), _U64) for v, s in zip(args, spans))
    lanes = (ir.binop(op, _float2_word(a, h), _float2_word(b, h)) for h in (False, True))
    return _float2_bits(*lanes)


_E4M3, _U8 = dtype_of("float8_e4m3fn"), dtype_of("uint8")


def _fp8x4(ev, name, op, args, spans):
    """``T.cuda.fp8x4_e4m3_from_float4(x, y, z, w)``: the four values rounded to
    float8_e4m3fn as a store to such a tensor rounds them (to nearest even, saturating to
    +-448), their bytes packed in a uint32, x the lowest (CUDA's ``__nv_fp8x4_e4m3`` of a
    float4)."""
    word = None
    for k, (v, s) in enumerate(zip(args, spans)):
        byte = ir.Reinterpret(ir.cast(ir.cast(_float(name, v, s), ir.F32), _E4M3), _U8)
        lane = ir.cast(byte, ir.U32)
        lane = ir.binop(Op.SHL, lane, 8 * k) if k else lane
        word = lane if word is None else ir.binop(Op.BITOR, word, lane)
    return word


_UNARY_FLOAT = (
    M.EXP, M.EXP2, M.EXP10, M.LOG, M.LOG2, M.LOG10, M.SQRT, M.RSQRT, M.TANH, M.SIGMOID,
    M.SIN, M.COS, M.ERF, M.FABS, M.FLOOR, M.CEIL, M.NEARBYINT, M.TRUNC, M.TAN, M.ASIN,
    M.ACOS, M.ATAN, M.SINH, M.COSH, M.ASINH, M.ACOSH, M.ATANH, M.LOG1P,
)  # fmt: skip
_BINARY_FLOAT = (M.POW, M.ATAN2, M.HYPOT, M.FMOD, M.COPYSIGN, M.NEXTAFTER)

FORMS: dict[str, Form] = {
    **{op.value: Form(1, _float_fn, op) for op in _UNARY_FLOAT},
    "round": Form(1, _float_fn, M.NEARBYINT),  # half to even, as the real TIRx emits it
    **{op.value: Form(2, _float_fn, op) for op in _BINARY_FLOAT},
    "ldexp": Form(2, _ldexp, M.LDEXP),
    "fma": Form(3, _float_fn, M.FMA),
    "abs": Form(1, _abs),
    "max": Form(2, _minmax, M.FMAX),
    "min": Form(2, _minmax, M.FMIN),
    "isnan": Form(1, _predicate, M.ISNAN),
    "isinf": Form(1, _predicate, M.ISINF),
    "isfinite": Form(1, _predicate, M.ISFINITE),
    "infinity": Form(0, _limit),
    "min_value": Form(0, _limit),
    "max_value": Form(0, _limit),
    "truncdiv": Form(2, _trunc_division, M.TRUNCDIV),
    "truncmod": Form(2, _trunc_division, M.TRUNCMOD),
    "floordiv": Form(2, _floor_division, Op.FLOORDIV),
    "floormod": Form(2, _floor_division, Op.FLOORMOD),
    "ceildiv": Form(2, _ceildiv),
    "bitwise_and": Form(2, _bitwise, Op.BITAND),
    "bitwise_or": Form(2, _bitwise, Op.BITOR),
    "bitwise_xor": Form(2, _bitwise, Op.BITXOR),
    "bitwise_not": Form(1, _bitwise_not),
    "shift_left": Form(2, _bitwise, Op.SHL),
    "shift_right": Form(2, _bitwise, Op.SHR),
    "clz": Form(1, _bit_count, M.CLZ),
    "popcount": Form(1, _bit_count, M.POPCOUNT),
    "cuda.ffs_u32": Form(1, _ffs, M.FFS),
    "cuda.float_as_uint": Form(1, _float_as_uint),
    "cuda.uint_as_float": Form(1, _uint_as_float),
    "cuda.half2float": Form(1, _to_float32),
    "cuda.bfloat162float": Form(1, _to_float32),
    "cuda.smem_addr_from_uint64": Form(1, _low_word),
    "cuda.hmax2": Form(2, _bf16x2_minmax, M.HMAX2),
    "cuda.hmin2": Form(2, _bf16x2_minmax, M.HMIN2),
    "cuda.float22bfloat162_rn": Form(2, _pack_bf16x2),
    "cuda.float22bfloat162_rn_from_float2": Form(1, _pack_bf16x2),
    "cuda.bfloat1622float2": Form(1, _unpack_bf16x2),
    "cuda.fdividef": Form(2, _fdividef),
    "cuda.make_float2": Form(2, _make_float2),
    "cuda.float2_x": Form(1, _float2_part),
    "cuda.float2_y": Form(1, _float2_part),
    "cuda.fadd2_rn": Form(2, _float2_arith, Op.ADD),
    "cuda.fmul2_rn": Form(2, _float2_arith, Op.MUL),
    "cuda.fp8x4_e4m3_from_float4": Form(4, _fp8x4),
}
MATH_NAMES = tuple(k for k in FORMS if not k.startswith("cuda."))
CUDA_NAMES = tuple(k.split(".", 1)[1] for k in FORMS if k.startswith("cuda."))
_LIMITS = ("infinity", "min_value", "max_value")


def parse_call(evaluator, key: str, node, name_hint=None):
    """The value of the call ``node`` to the intrinsic ``T.<key>``."""
    form = FORMS[key]
    span = evaluator.p.span(node)
    label = "T." + key
    kwargs = {}
    for k in node.keywords:
        if k.arg is None:
            raise TirxSyntaxError(
                f"{label} takes no **keywords", evaluator.p.span(k), hint="pass the values"
            )
        if key in _LIMITS and k.arg in ("ty", "dtype"):
            kwargs["ty"] = evaluator.const(k.value)
            continue
        raise TirxSyntaxError(
            f"{label} takes no keyword argument {k.arg!r}",
            evaluator.p.span(k),
            hint=f"pass {label}'s {_arity_text(form.arity)} positionally",
        )
    if key in _LIMITS and len(node.args) == 1 and "ty" not in kwargs:
        kwargs["ty"] = evaluator.const(node.args[0])  # T.max_value("float32") reads as well
        args_nodes = []
    else:
        args_nodes = list(node.args)
    if len(args_nodes) != form.arity:
        raise TirxSyntaxError(
            f"{label} takes {_arity_text(form.arity)}, got {len(args_nodes)}",
            span,
            hint=f"write {label}({', '.join('xyzw'[i] for i in range(form.arity))})"
            if form.arity
            else f'write {label}(ty="float32")',
        )
    args, spans = [], []
    for a in args_nodes:
        v = evaluator.value(a)
        if isinstance(v, ir.View) or not (is_number(v) or isinstance(v, ir.Expr)):
            raise TirxSyntaxError(
                f"{label} takes scalar values, got {kind_of(v)}",
                evaluator.p.span(a),
                hint="index the tensor to pass one element: x[i]",
            )
        args.append(v)
        spans.append(evaluator.p.span(a))
    # builders use the evaluator's binop for the integer family: its operator checks apply
    return form.builder(evaluator, key, form.op, args, spans, **kwargs)


def _arity_text(n: int) -> str:
    words = {0: "no", 1: "one", 2: "two", 3: "three", 4: "four"}
    return f"{words.get(n, n)} value{'' if n == 1 else 's'}"


# ------------------------------------------------------------------ the printer's rule
# (exe.script(), tirx/ir/printer.py): the call as written


def leave_MathCall(printer, e: MathCall, args):
    return call_text(f"T.{e.op.script_name}({', '.join(a[0] for a in args)})")
