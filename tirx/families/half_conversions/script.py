"""The script side of the conversions between float32 and float16 pairs through element
addresses: ``T.cuda.float22half2(dst, src)``, ``T.cuda.half8tofloat8(src, dst)`` and
``T.cuda.float8tohalf8(src, dst)``, with the real TIRx's spelling and argument order (the
destination first for ``float22half2``, the source first for the other two, as its C
signatures have them; their parameter names, ``dst``/``src`` and ``src_addr``/``dst_addr``, are
accepted as keywords).

Each address is written as tirx writes element addresses elsewhere: ``A.ptr_to([i, j])`` or
``T.address_of(A[i, j])``. What each operand may be (docs/semantics.md, the rows of these
calls):

* **dtype.** The float32 side (``float2``: two float32 per access) is a ``float32`` tensor, the
  float16 side (``half2``) a ``float16`` tensor. An integer tensor of any width is taken as raw
  storage: its bytes are read or written as the C's ``float2``/``half2`` pointer reads them (a
  ``uint32`` fragment holding packed halves, say). Any other float type is refused: its values
  would be read as the bits of another type, which no conversion means (``bfloat16`` is not
  ``float16``; a ``float16`` tensor on the float32 side is most often the swapped order of
  ``half8tofloat8``'s arguments, which the error says). ``bool`` is refused.
* **memory.** Global and shared tensors, and local arrays (the thread's own registers: the C
  takes their address, ``&x[k]``, as the real TIRx's does), in any combination. A local array
  distributed over lanes is refused by the lowering, as for any element access.

The call acts where it runs, so it is a statement of its own (bare or in ``T.evaluate``); it
has no value. The lowering (lower.py) checks what is known at compile time (alignment, bounds,
overlap); the simulator the rest.
"""

from __future__ import annotations

import ast

from ...errors import TirxSyntaxError
from ...ir import nodes as ir
from ...ir.printer import print_expr
from ...script.addresses import ADDRESS_FORMS, element_address
from ...script.effects import statement_position
from .nodes import HalfConversion, HalfConversionKind

__all__ = ["CUDA_NAMES", "KEYS", "parse_call",
    "visit_HalfConversion",
]  # fmt: skip

K = HalfConversionKind
CUDA_NAMES = tuple(k.value for k in K)
KEYS = frozenset(f"cuda.{n}" for n in CUDA_NAMES)

# each call's parameters, as the real TIRx's C signatures name them, and which is the
# destination
_PARAMS = {
    K.FLOAT2_TO_HALF2: ("dst", "src"),
    K.HALF8_TO_FLOAT8: ("src_addr", "dst_addr"),
    K.FLOAT8_TO_HALF8: ("src_addr", "dst_addr"),
}
_FLOAT, _HALF = "float32", "float16"


def parse_call(ev, key: str, node: ast.Call, name_hint=None):
    """Emit the :class:`.nodes.HalfConversion` of the call ``node`` (``key`` one of
    :data:`KEYS`); the call has no value."""
    kind = K(key.removeprefix("cuda."))
    label = f"T.{key}"
    dropped = statement_position(ev, key, node)
    span = ev.p.span(node)
    if not dropped:
        raise TirxSyntaxError(
            f"{label}(...) writes memory and has no value to assign",
            span,
            hint=f"write it as a statement of its own: {label}({', '.join(_PARAMS[kind])})",
        )
    params = _PARAMS[kind]
    found = {}  # parameter name -> (view, indices, span)
    for name, arg in zip(params, _arguments(ev, node, label, params)):
        view, idx = element_address(ev, arg, f"{label}'s {name}", local=True)
        found[name] = (view, idx, ev.p.span(arg))
    dst_name, src_name = params if params[0] == "dst" else params[::-1]
    float_name = src_name if kind.float_source else dst_name
    for name, other in zip(params, params[::-1]):  # in the order written: a swap told at once
        want = _FLOAT if name == float_name else _HALF
        _check_dtype(label, params, name, found[name][0], want, found[other][0], found[name][2])
    (dview, didx, dspan), (sview, sidx, sspan) = found[dst_name], found[src_name]
    ev.b.emit(HalfConversion(kind, dview, tuple(didx), sview, tuple(sidx), span, (dspan, sspan)))
    return None


def _arguments(ev, node: ast.Call, label: str, params) -> list:
    """The call's two arguments as AST nodes, in ``params`` order (positional, or by name)."""
    given = dict(zip(params, node.args))
    for k in node.keywords:
        if k.arg not in params or k.arg in given:
            raise TirxSyntaxError(
                f"{label} got an unexpected keyword argument {k.arg!r}",
                ev.p.span(k),
                hint=f"its parameters are ({', '.join(params)}), in that order",
            )
        given[k.arg] = k.value
    count = len(node.args) + len(node.keywords)
    if count != len(params) or len(given) != len(params):
        raise TirxSyntaxError(
            f"{label} takes 2 arguments ({', '.join(params)}), got {count}",
            ev.p.span(node),
            hint=f"write {label}({', '.join(params)}), each the address of a tensor element: "
            f"{ADDRESS_FORMS}",
        )
    return [given[p] for p in params]


def _name(view: ir.View) -> str:
    return repr(view.name or view.buffer.name)


def _check_dtype(label, params, name: str, view: ir.View, want: str, other: ir.View, span):
    """Refuse ``view``, the tensor of parameter ``name``, when its bytes would not be ``want``
    pairs (see the module docstring); ``other`` is the other parameter's tensor."""
    d = view.dtype
    if d.name == want or d.kind in ("int", "uint"):
        return
    side = "float32 (float2)" if want == _FLOAT else "float16 (half2)"
    hint = f"pass a {want} tensor (or an integer tensor holding {want} bits)"
    if d.name in (_FLOAT, _HALF) and other.dtype.name == want:  # the two sides swapped
        hint = f"the arguments are ({', '.join(params)}), in that order: swap them"
    elif d.name == "bfloat16" and want == _HALF:
        hint = (
            "float16 and bfloat16 are different formats; for bfloat16 pairs use "
            "T.cuda.float22bfloat162_rn(x, y) (a value) and store it"
        )
    raise TirxSyntaxError(
        f"{label}'s {name} is its {side} side, but {_name(view)} is {d}: its bytes would be "
        f"{'written' if name.startswith('dst') else 'read'} as {want}",
        span,
        hint=hint,
    )


# ------------------------------------------------------------------ the printer's rule
# (exe.script(), tirx/ir/printer.py): the call as written, its arguments in the real TIRx's
# order: float22half2(dst, src), the others (src, dst)


def visit_HalfConversion(printer, s: HalfConversion):
    def address(x, at):
        if isinstance(x, ir.View):
            return f"T.address_of({print_expr(x)}[{', '.join(print_expr(i) for i in at)}])"
        return f"T.address_of({x.name}.as_uint8[{print_expr(at[0])}])"  # lowered: bytes

    dst, src = address(s.dst, s.dst_at), address(s.src, s.src_at)
    pair = (dst, src) if s.kind is HalfConversionKind.FLOAT2_TO_HALF2 else (src, dst)
    printer.line(f"T.cuda.{s.kind}({pair[0]}, {pair[1]})")
