"""The script side of atomics and CTA-wide operations: ``T.atomic_add``, ``T.cuda.atomic_add``,
``T.cuda.atomic_cas``, ``T.cuda.thread_fence``, ``T.cuda.syncthreads_and`` / ``_or``,
``T.cuda.cta_sum`` / ``cta_max`` / ``cta_min`` / ``cta_reduce`` and
``T.cuda.cvta_generic_to_shared``, with the real TIRx's spelling and argument order.

An element's address is written as the real TIRx writes it: ``A.ptr_to([i, j])`` or
``T.address_of(A[i, j])``; a shared scratch tensor as ``s.data`` (or ``s`` itself).

The calls that act (atomics, votes, reductions, fences) emit a statement; one that has a value
writes it into a fresh variable and returns that variable. So that the action happens exactly
once, where it is written, such a call must be the whole statement (bare, or wrapped in
``T.evaluate(...)`` as the real TIRx writes a call whose value it drops) or the whole right
side of an assignment (``old = T.cuda.atomic_add(...)``), not part of a larger expression
(which an ``a if c else b`` or ``and`` would evaluate on both sides): the rule of
:mod:`tirx.script.effects`.
"""

from __future__ import annotations

import ast

from ...errors import TirxSyntaxError
from ...ir import nodes as ir
from ...ir.printer import flat, print_expr
from ...script import checks
from ...script.addresses import element_address
from ...script.effects import statement_position
from .nodes import (
    AtomicKind,
    CtaReduce,
    ElemAtomic,
    ReduceKind,
    ThreadFence,
    VoteKind,
    VotingBarrier,
)

__all__ = ["T_NAMES", "CUDA_NAMES", "KEYS", "parse_call",
    "visit_ElemAtomic", "visit_Atomic", "visit_ThreadFence", "visit_VotingBarrier", "visit_CtaReduce",
]  # fmt: skip

T_NAMES = ("atomic_add",)
CUDA_NAMES = (
    "atomic_add",
    "atomic_cas",
    "thread_fence",
    "syncthreads_and",
    "syncthreads_or",
    "cta_sum",
    "cta_max",
    "cta_min",
    "cta_reduce",
    "cvta_generic_to_shared",
)
KEYS = frozenset(T_NAMES) | frozenset(f"cuda.{n}" for n in CUDA_NAMES)

_RESULT_NAMES = {ElemAtomic: "old", VotingBarrier: "vote", CtaReduce: "reduced"}
_REDUCE = {"cta_sum": "sum", "cta_max": "max", "cta_min": "min"}


def parse_call(ev, key: str, node: ast.Call, name_hint=None):
    """The value of the call ``node`` of intrinsic ``key`` (one of :data:`KEYS`)."""
    name = key.removeprefix("cuda.")
    if name == "cvta_generic_to_shared":
        return _cvta(ev, node)
    dropped = statement_position(ev, key, node)
    if name == "thread_fence":
        _positional(ev, node, key, 0)
        ev.b.emit(ThreadFence(ev.p.span(node)))
        return None
    if name in ("syncthreads_and", "syncthreads_or"):
        (pred,) = _positional(ev, node, key, 1)
        kind = VoteKind.AND if name == "syncthreads_and" else VoteKind.OR
        value = ev.to_bool(ir.as_expr(ev.scalar(pred)))
        return _emit(ev, node, dropped, "int32", VotingBarrier, kind, value)
    if name in ("atomic_add", "atomic_cas"):
        return _atomic(ev, key, name, node, dropped)
    return _cta_reduce(ev, key, name, node, dropped)


# ----------------------------------------------------------------------------- helpers


def _positional(ev, node, key: str, n: int, names=()):
    """Exactly ``n`` arguments (positional, or keywords from ``names``), as AST nodes."""
    args = list(node.args)
    for k in node.keywords:
        if k.arg not in names or names.index(k.arg) < len(node.args):
            raise TirxSyntaxError(f"unexpected keyword argument {k.arg!r}", ev.p.span(k))
        args.append(k.value)
    if len(args) != n:
        want = f" ({', '.join(names)})" if names else ""
        raise TirxSyntaxError(f"T.{key} takes {n} arguments{want}", ev.p.span(node))
    return args


def _emit(ev, node, dropped: bool, dtype, cls, *fields):
    """Emit the statement ``cls(*fields)``; its result variable (None when dropped)."""
    result = None if dropped else ev.b.new_var(_RESULT_NAMES[cls], dtype)
    ev.b.emit(cls(*fields, result=result, span=ev.p.span(node)))
    return result


# ----------------------------------------------------------------------------- atomics


def _atomic(ev, key, name, node, dropped):
    if name == "atomic_add":
        ptr, value = _positional(ev, node, key, 2, ("res_addr", "value"))
        operands = (value,)
    else:
        ptr, compare, value = _positional(ev, node, key, 3, ("ptr", "old_val", "new_val"))
        operands = (compare, value)
    view, idx = element_address(ev, ptr, "the first argument")
    vals = tuple(
        ir.cast(ir.as_expr(checks.int_literal(ev.scalar(a))), view.dtype) for a in operands
    )
    kind = AtomicKind.ADD if name == "atomic_add" else AtomicKind.CAS
    # the old value in the type expressions compute in (16-bit floats as float32)
    dtype = ir.F32 if view.dtype.name in ("float16", "bfloat16") else view.dtype
    return _emit(ev, node, dropped, dtype, ElemAtomic, kind, view, idx, vals)


# --------------------------------------------------------------------- CTA reductions


def _cta_reduce(ev, key, name, node, dropped):
    if name == "cta_reduce":
        value, op, nw, scratch = _positional(
            ev, node, key, 4, ("value", "op", "num_warps", "scratch")
        )
        op = ev.const(op)
        if op not in ("sum", "max", "min"):
            raise TirxSyntaxError(
                f"cta_reduce op must be 'sum', 'max' or 'min', got {op!r}", ev.p.span(node)
            )
    else:
        value, nw, scratch = _positional(ev, node, key, 3, ("value", "num_warps", "scratch"))
        op = _REDUCE[name]
    v = ir.as_expr(checks.int_literal(ev.scalar(value)))
    num_warps = ev.const(nw)
    threads = _threads(ev)
    warps = threads // 32
    if not isinstance(num_warps, int) or isinstance(num_warps, bool):
        raise TirxSyntaxError("num_warps must be a compile-time int", ev.p.span(nw))
    if threads % 32:
        rule = f"the block has {threads} threads, not a whole number of warps"
    elif num_warps != warps:
        rule = f"num_warps is {num_warps}, but the block has {threads} threads ({warps} warps)"
    elif num_warps < 1 or num_warps & (num_warps - 1):
        rule = (
            f"num_warps is {num_warps} (the block's {threads} threads), not a power of two: "
            f"the reduction needs a power-of-two number of warps"
        )
    else:
        rule = None
    if rule:
        raise TirxSyntaxError(
            f"T.{key}: {rule}",
            ev.p.span(nw),
            hint="every thread of the CTA takes part: launch a power-of-two number of whole "
            "warps (32 to 1024 threads) and pass num_warps = threads // 32",
        )
    view = _scratch(ev, scratch)
    if v.dtype.name not in _REDUCE_DTYPES:
        raise TirxSyntaxError(
            f"T.{key} reduces 32- and 64-bit values, got {v.dtype}",
            ev.p.span(value),
            hint="cast the value first, e.g. T.float32(x)",
        )
    if view.dtype != v.dtype or view.shape[0] < num_warps:
        raise TirxSyntaxError(
            f"the scratch {view.name!r} is {view.dtype} {view.shape}; the reduction needs "
            f"{num_warps} slots of {v.dtype}",
            ev.p.span(scratch),
            hint=f'allocate it as T.alloc_shared(({num_warps},), "{v.dtype}")',
        )
    kind = ReduceKind(op)
    return _emit(ev, node, dropped, v.dtype, CtaReduce, kind, v, num_warps, view)


_REDUCE_DTYPES = ("int32", "uint32", "int64", "uint64", "float32", "float64")


def _threads(ev) -> int:
    bx, by, bz = ev.b.launch.block
    return bx * by * bz


def _scratch(ev, arg) -> ir.View:
    node = arg.value if isinstance(arg, ast.Attribute) and arg.attr == "data" else arg
    view = ev.value(node)
    if not isinstance(view, ir.View) or view.buffer.scope is not ir.Scope.SHARED:
        raise TirxSyntaxError(
            "the scratch must be a shared tensor",
            ev.p.span(arg),
            hint="allocate s = T.alloc_shared((num_warps,), dtype) and pass s.data",
        )
    if len(view.shape) != 1 or view.layout != view.buffer.layout:
        raise TirxSyntaxError(
            "the scratch must be a 1-D shared tensor with the default layout",
            ev.p.span(arg),
            hint="allocate s = T.alloc_shared((num_warps,), dtype) and pass s.data",
        )
    return view


# ------------------------------------------------------------- shared-window address


def _cvta(ev, node):
    (ptr,) = _positional(ev, node, "cuda.cvta_generic_to_shared", 1, ("ptr",))
    view, idx = element_address(ev, ptr, "T.cuda.cvta_generic_to_shared's argument")
    if view.buffer.scope is not ir.Scope.SHARED:
        raise TirxSyntaxError(
            f"{view.name!r} is a global tensor: only shared memory has a shared-window address",
            ev.p.span(ptr),
            hint="pass the address of an element of a T.alloc_shared tensor",
        )
    return ir.ElemSharedAddress(view, idx)


# ------------------------------------------------------------------ the printer's rules
# (exe.script(), tirx/ir/printer.py): the calls as written


def visit_ElemAtomic(printer, s: ElemAtomic):
    idx = ", ".join(print_expr(i) for i in s.indices)
    ops = "".join(", " + print_expr(v) for v in s.operands)
    addr = f"T.address_of({print_expr(s.view)}[{idx}])"
    printer.result(s, f"T.cuda.atomic_{s.kind}({addr}{ops})")


def visit_Atomic(printer, s):
    ops = "".join(", " + print_expr(v) for v in s.operands)
    addr = flat(s.buffer, print_expr(s.index), s.dtype)
    printer.result(s, f"T.cuda.atomic_{s.kind}(T.address_of({addr}){ops})")


def visit_ThreadFence(printer, s: ThreadFence):
    printer.line("T.cuda.thread_fence()")


def visit_VotingBarrier(printer, s: VotingBarrier):
    printer.result(s, f"T.cuda.syncthreads_{s.kind}({print_expr(s.predicate)})")


def visit_CtaReduce(printer, s: CtaReduce):
    if isinstance(s.scratch, ir.View):
        scratch = f"{print_expr(s.scratch)}.data"
    else:
        scratch = f"T.address_of({flat(s.scratch, print_expr(s.offset), s.scratch.dtype)})"
    value = print_expr(s.value)
    printer.result(s, f'T.cuda.cta_reduce({value}, "{s.kind}", {s.num_warps}, {scratch})')
