"""The script side of the single-thread operations: ``T.cuda.nano_sleep(time)``,
``T.cuda.clock64()``, ``T.cuda.trap_when_assert_failed(cond)``, the compiler hints
``T.assume(cond)``, ``T.assume_always(predicate)`` and
``T.assume_aligned(tensor, alignment_bytes)``, and the register fence
``T.cuda.wgmma.noop_barrier(reg)`` (also spelled ``T.cuda.wgmma_noop_barrier``), with the real
TIRx's spelling (its parameter names are accepted as keywords).

Each call emits a statement (nodes.py beside this); ``clock64`` writes its value into
a fresh uint64 variable and returns that variable. A sleep, a clock read and an assert all act
when they run (two clock reads differ), so each must be a statement of its own or the whole
right side of an assignment, the rule of :mod:`tirx.script.effects`.

``nano_sleep`` takes an integer count of nanoseconds. The real TIRx declares it uint64, but
CUDA's ``__nanosleep`` takes ``unsigned`` (32 bits), to which C converts the value; tirx makes
that conversion in the IR (a run-time value wraps modulo 2**32, as C does) and refuses a
constant outside uint32, which C would wrap silently. A float is refused rather than
truncated.

``assume_always`` promises its predicate for the rest of its scope, across later writes to
what it reads; tirx emits it as ``T.assume`` where it is written (``__builtin_assume``, which
the rest of the scope may rely on) and the simulator checks it there, as it checks
``T.assume``: a later write that breaks the promise is the author's, unchecked (the real TIRx
emits nothing for it and checks nothing).

``assume_aligned`` is ``T.assume`` of "the address of the tensor's first element is a multiple
of ``alignment_bytes``" (a power of two from 1 to 2**27, a constant), for a global or shared
tensor, whole or a view: the C is ``__builtin_assume`` of that, the simulator checks it where
it runs (the real TIRx checks nothing). A local array has no address to assume about.

``noop_barrier``'s register is a 32-bit value that lives in a register: an element of a local
tensor (``acc[i]``) or a scalar variable, of dtype float32, uint32 or int32 (the real TIRx takes
float32 and uint32). A shared or global element, a wider or narrower type, or an expression
(no register to pin) is refused at its line.
"""

from __future__ import annotations

import ast

from ...errors import TirxSyntaxError
from ...ir import nodes as ir
from ...ir.printer import print_expr
from ...script.effects import statement_position
from .nodes import AssertTrap, Assume, Clock, NanoSleep, RegisterFence

__all__ = ["T_NAMES", "CUDA_NAMES", "KEYS", "parse_call",
    "visit_NanoSleep", "visit_Clock", "visit_AssertTrap", "visit_Assume", "visit_RegisterFence",
]  # fmt: skip

T_NAMES = ("assume", "assume_always", "assume_aligned")
CUDA_NAMES = (
    *("nano_sleep", "clock64", "trap_when_assert_failed"),
    *("wgmma.noop_barrier", "wgmma_noop_barrier"),
)
KEYS = frozenset(T_NAMES) | frozenset(f"cuda.{n}" for n in CUDA_NAMES)

# each call's parameters, as the real TIRx names them
_PARAMS = {
    "nano_sleep": ("time",),
    "clock64": (),
    "trap_when_assert_failed": ("cond",),
    "assume": ("cond",),
    "assume_always": ("predicate",),
    "assume_aligned": ("tensor", "alignment_bytes"),
    "wgmma.noop_barrier": ("reg",),
    "wgmma_noop_barrier": ("reg",),
}
_FENCED = ("float32", "uint32", "int32")
_UINT32_MAX = 2**32 - 1


def parse_call(ev, key: str, node: ast.Call, name_hint=None):
    """The value of the call ``node`` of intrinsic ``key`` (one of :data:`KEYS`): the clock's
    result variable (None when its value is dropped), else None."""
    name = key.removeprefix("cuda.")
    dropped = statement_position(ev, key, node)
    args = _arguments(ev, node, name)
    span = ev.p.span(node)
    label = f"T.{key}"
    if name != "clock64" and not dropped:
        raise TirxSyntaxError(
            f"{label}(...) has no value to assign",
            span,
            hint=f"write it as a statement of its own: {label}(...)",
        )
    if name == "nano_sleep":
        ev.b.emit(NanoSleep(_duration(ev, args[0]), span))
        return None
    if name == "assume_aligned":
        ev.b.emit(_aligned(ev, args, span))
        return None
    if name in ("trap_when_assert_failed", "assume", "assume_always"):
        cond = ev.to_bool(ir.as_expr(ev.scalar(args[0])))
        if name.startswith("trap"):
            ev.b.emit(AssertTrap(cond, span))
        else:
            ev.b.emit(Assume(cond, span, always=name == "assume_always"))
        return None
    if name != "clock64":  # the register fence
        ev.b.emit(RegisterFence(_register(ev, name, args[0]), span))
        return None
    result = None if dropped else ev.b.new_var("clock", "uint64")
    ev.b.emit(Clock(result, span))
    return result


def _arguments(ev, node: ast.Call, name: str) -> list:
    """The call's arguments as AST nodes, one per parameter (positional, or by the real
    TIRx's parameter name)."""
    params = _PARAMS[name]
    label = f"T.{name}" if name in T_NAMES else f"T.cuda.{name}"
    args = list(node.args)
    for k in node.keywords:
        if k.arg not in params or params.index(k.arg) < len(node.args):
            raise TirxSyntaxError(
                f"{label} got an unexpected keyword argument {k.arg!r}", ev.p.span(k)
            )
        args.append(k.value)
    if len(args) != len(params):
        n = len(params)
        takes = (
            f"{n} argument{'s' if n != 1 else ''} ({', '.join(params)})" if n else "no arguments"
        )
        raise TirxSyntaxError(
            f"{label} takes {takes}, got {len(args)}",
            ev.p.span(node),
            hint=f"write {label}({', '.join(params)})",
        )
    return args


_MOST_ALIGNED = 2**27  # the real TIRx's bound


def _aligned(ev, args, span) -> Assume:
    """``T.assume_aligned(tensor, alignment_bytes)``: an :class:`.nodes.Assume` that the
    address of the tensor's first element is a multiple of ``alignment_bytes``."""
    from ...script.storage import address_of
    from ...script.values import kind_of

    view = ev.value(args[0])
    if not isinstance(view, ir.View):
        raise TirxSyntaxError(
            f"T.assume_aligned takes a tensor, got {kind_of(view)}",
            ev.p.span(args[0]),
            hint="name the tensor itself: T.assume_aligned(A, 16)",
        )
    name = view.name or view.buffer.name
    if view.buffer.scope is ir.Scope.LOCAL:
        raise TirxSyntaxError(
            f"{name!r} is a local (register) array: it has no address to be aligned",
            ev.p.span(args[0]),
            hint="T.assume_aligned is about a global or shared tensor's address",
        )
    n = ev.value(args[1])
    if isinstance(n, ir.Const) and n.dtype.kind == "int":
        n = int(n.value)
    if isinstance(n, bool) or not isinstance(n, int):
        raise TirxSyntaxError(
            f"T.assume_aligned's alignment must be a constant number of bytes, got {kind_of(n)}",
            ev.p.span(args[1]),
            hint="write the alignment as an integer constant, e.g. T.assume_aligned(A, 16)",
        )
    if not (1 <= n <= _MOST_ALIGNED and n & (n - 1) == 0):
        raise TirxSyntaxError(
            f"T.assume_aligned({name}, {n}): the alignment must be a power of two from 1 to "
            f"2**27 bytes",
            ev.p.span(args[1]),
            hint="16 for a 16-byte vector access, 128 or 1024 for swizzled shared tiles",
        )
    zeros = tuple(0 for _ in view.shape)
    address = address_of(ir.ElemLoad(view, zeros, view.dtype), span)
    low = ir.BinOp(ir.Op.BITAND, address, ir.const(n - 1, address.dtype), address.dtype)
    cond = ir.Cmp(ir.CmpOp.EQ, low, ir.const(0, address.dtype))
    return Assume(cond, span, aligned=n)


def _duration(ev, arg) -> ir.Expr:
    """``nano_sleep``'s argument as the uint32 that ``__nanosleep`` takes."""
    v = ev.scalar(arg)
    e = ir.as_expr(v)
    if isinstance(v, (bool, float)) or e.dtype.kind in ("float", "bool"):
        raise TirxSyntaxError(
            f"T.cuda.nano_sleep takes an integer count of nanoseconds, got {e.dtype}",
            ev.p.span(arg),
            hint="convert it explicitly, e.g. T.uint32(x), or write the count as an integer "
            "(T.cuda.nano_sleep(1000) sleeps about a microsecond)",
        )
    if isinstance(e, ir.Const) and not 0 <= int(e.value) <= _UINT32_MAX:
        raise TirxSyntaxError(
            f"T.cuda.nano_sleep({int(e.value)}): __nanosleep takes an unsigned 32-bit count "
            f"(0 to {_UINT32_MAX})",
            ev.p.span(arg),
            hint="the GPU sleeps at most about a millisecond per call anyway; sleep in a loop "
            "for longer",
        )
    return ir.cast(e, ir.U32)


def _register(ev, name: str, arg) -> ir.Expr:
    """The register ``noop_barrier`` pins: a local tensor's element or a scalar variable, of a
    32-bit type."""
    v = ev.value(arg)
    if isinstance(v, ir.ElemLoad):
        scope = v.view.buffer.scope
        if scope is not ir.Scope.LOCAL:
            raise TirxSyntaxError(
                f"T.cuda.{name} pins a register, but {v.view.buffer.name!r} is a "
                f"{scope.value} tensor: its elements live in memory",
                ev.p.span(arg),
                hint="pass an element of a local tensor (T.alloc_local), such as an "
                "accumulator register acc[i]",
            )
    elif not isinstance(v, ir.Var):
        raise TirxSyntaxError(
            f"T.cuda.{name} takes one register: an element of a local tensor or a scalar "
            "variable, not an expression",
            ev.p.span(arg),
            hint=f"pass the register itself: T.cuda.{name}(acc[i])",
        )
    if v.dtype.name not in _FENCED:
        raise TirxSyntaxError(
            f"T.cuda.{name} takes a 32-bit register (float32, uint32 or int32), not a "
            f"{v.dtype} one",
            ev.p.span(arg),
            hint="fence the 32-bit words: a 64-bit value is two registers, and 16-bit values "
            "travel in pairs (a uint32 view of the tensor)",
        )
    return v


# ------------------------------------------------------------------ the printer's rules
# (exe.script(), tirx/ir/printer.py): the calls as written


def visit_NanoSleep(printer, s: NanoSleep):
    printer.line(f"T.cuda.nano_sleep({print_expr(s.duration)})")


def visit_Clock(printer, s: Clock):
    printer.result(s, "T.cuda.clock64()")


def visit_AssertTrap(printer, s: AssertTrap):
    printer.line(f"T.cuda.trap_when_assert_failed({print_expr(s.cond)})")


def visit_Assume(printer, s: Assume):
    address = s.cond.a.a if s.aligned else None  # (address & (n - 1)) == 0
    whole = isinstance(address, ir.AddressOf) and address.view.elem_offset == 0
    if whole:  # as written (a view at an offset, or lowered: the condition)
        printer.line(f"T.assume_aligned({address.view.name or address.view.buffer.name}, "
                     f"{s.aligned})")  # fmt: skip
    else:
        printer.line(f"T.assume{'_always' if s.always else ''}({print_expr(s.cond)})")


def visit_RegisterFence(printer, s: RegisterFence):
    printer.line(f"T.cuda.wgmma.noop_barrier({print_expr(s.target)})")
