"""Readable text of the IR (``exe.script()``), in a Python-like syntax.

Script-level functions print views as ``name<dtype shape : layout>``; lowered functions print
flat accesses as ``buf[index]`` and instructions as ``ptx("...", operands)``.
"""

from __future__ import annotations

import functools
import math

from ..dtypes import DTypeKind
from . import nodes as ir
from .visitor import Visitor, Walker

__all__ = ["print_function", "print_expr", "flat", "call_text"]

_PREC = {
    ir.Op.BITOR: 1,
    ir.Op.BITXOR: 2,
    ir.Op.BITAND: 3,
    ir.Op.SHL: 4,
    ir.Op.SHR: 4,
    ir.Op.ADD: 5,
    ir.Op.SUB: 5,
    ir.Op.MUL: 6,
    ir.Op.DIV: 6,
    ir.Op.FLOORDIV: 6,
    ir.Op.FLOORMOD: 6,
}


_ATOM = math.inf  # the precedence of text that never needs parentheses
_CMP = 0.5  # a comparison is parenthesized inside anything that asks for a precedence


def print_expr(e, prec: int = 0) -> str:
    """The text of ``e`` (an expression, a view or a PTX operand), parenthesized when its
    outermost operator binds less tightly than ``prec``."""
    return _wrap(_Exprs().visit(e), prec)


def _wrap(result, prec) -> str:
    text, own = result
    return f"({text})" if own < prec else text


def call_text(text: str) -> tuple[str, float]:
    """The printer's result for the text of a call (``T.exp(x)``), which never needs
    parentheses: a family's expression rule (``leave_X`` in its script.py) returns one."""
    return text, _ATOM


class _Exprs(Visitor):
    """Results: ``(text, precedence of its outermost operator)``; a family's own expression
    classes are printed by its script.py's ``leave_X(printer, node, *children)``, children
    as ``(text, precedence)`` pairs, returning :func:`call_text`."""

    pass_name = "the printer"
    stage = "script"

    def leaf(self, value):
        return repr(value), _ATOM

    def enter_Const(self, e):
        if e.dtype.kind is DTypeKind.FLOAT:
            value = float(e.value)
            if math.isinf(value):  # T.float32(inf) is no Python: the T name that makes one
                text = f'T.infinity(ty="{e.dtype.name}")'
                return (f"(-{text})" if value < 0 else text), _ATOM
            return f"T.{e.dtype.name}({value!r})", _ATOM
        return repr(e.value), _ATOM

    def enter_Var(self, e):
        return e.name, _ATOM

    def enter_Special(self, e):
        if e.kind in ir.SREG_ONLY:
            dim = "" if e.kind in ir.UNDIMENSIONED else "." + "xyz"[e.dim]
            return f'T.cuda.mov_sreg(32, "{e.kind.value}{dim}")', _ATOM
        if e.kind in ir.UNDIMENSIONED:
            return f"T.cuda.{e.kind.value}()", _ATOM
        return f'T.cuda.{e.kind.value}("{"xyz"[e.dim]}")', _ATOM

    def leave_BinOp(self, e, a, b):
        if e.op in (ir.Op.MIN, ir.Op.MAX):
            return f"{e.op.value}({a[0]}, {b[0]})", _ATOM
        p = _PREC[e.op]
        return f"{_wrap(a, p)} {e.op.value} {_wrap(b, p + 1)}", p

    def leave_Cmp(self, e, a, b):
        return f"{_wrap(a, 5)} {e.op.value} {_wrap(b, 5)}", _CMP

    def leave_Logic(self, e, a, b):
        return f"({_wrap(a, 1)} {e.op} {_wrap(b, 1)})", _ATOM

    def leave_Not(self, e, a):
        return f"(not {_wrap(a, 1)})", _ATOM

    def leave_Select(self, e, cond, a, b):
        return f"({a[0]} if {cond[0]} else {b[0]})", _ATOM

    def leave_Cast(self, e, value):
        return f"T.{e.dtype.name}({value[0]})", _ATOM

    def leave_Reinterpret(self, e, value):
        return f'T.reinterpret({value[0]}, ty="{e.dtype.name}")', _ATOM

    def leave_AddressOf(self, e, view, indices):
        return f"T.address_of({view[0]}[{', '.join(i[0] for i in indices)}])", _ATOM

    def enter_Buffer(self, b):
        return b.name, _ATOM

    def leave_View(self, v, buffer, offset):
        return _view(v, offset[0]), _ATOM

    def leave_ElemLoad(self, e, view, indices):
        return f"{view[0]}[{', '.join(i[0] for i in indices)}]", _ATOM

    def leave_Load(self, e, buffer, index):
        return flat(e.buffer, index[0], e.dtype), _ATOM

    def leave_SharedAddress(self, e, buffer, offset):
        return f"smem_addr({e.buffer.name}) + {_wrap(offset, 6)}", _ATOM

    def leave_GlobalAddress(self, e, buffer, offset):
        return f"global_addr({e.buffer.name}) + {_wrap(offset, 6)}", _ATOM

    def leave_ElemSharedAddress(self, e, view, indices):
        idx = ", ".join(i[0] for i in indices)
        return f"T.cuda.cvta_generic_to_shared(T.address_of({view[0]}[{idx}]))", _ATOM

    # PTX operands (lowered level)
    def enter_LocalReg(self, r):
        return flat(r.buffer, repr(r.slot), r.dtype), _ATOM

    def leave_ValueReg(self, r, value):
        return value

    def leave_RegVector(self, op, regs):
        return ("out " if op.is_output else "") + "{" + ", ".join(r[0] for r in regs) + "}", _ATOM

    def leave_AddressOperand(self, op, address):
        return f"[{address[0]}]", _ATOM

    def enter_Immediate(self, op):
        return repr(op.value), _ATOM

    def leave_ScalarOperand(self, op, value):
        return value


def _param(v) -> str:
    """A tile operation's keyword argument as written (``box=(32, 64)``, ``mbar=bars[0]``)."""
    if isinstance(v, tuple):
        inner = ", ".join(_param(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, (ir.Expr, ir.View)):
        return print_expr(v)
    return repr(v)


def flat(buf, index: str, dtype) -> str:
    """The text of the element ``index`` of ``buf`` read as ``dtype`` (``buf[i]``,
    ``buf.as_uint32[i]``)."""
    cast = "" if dtype == buf.dtype else f".as_{dtype.name}"
    return f"{buf.name}{cast}[{index}]"


def _view(v: ir.View, offset: str) -> str:
    plain = (
        v.dtype == v.buffer.dtype
        and v.shape == v.buffer.shape
        and v.layout == v.buffer.layout
        and isinstance(v.elem_offset, int)
        and v.elem_offset == 0
    )
    if plain:
        return v.buffer.name
    off = "" if isinstance(v.elem_offset, int) and v.elem_offset == 0 else f" @ {offset}"
    return f"{v.buffer.name}<{v.dtype} {v.shape} : {v.layout!r}{off}>"


class _Printer(Walker):
    """Statements, top-down, one line each (``Walker``: no recursion, any nesting). A family's
    own statements are printed by its script.py's ``visit_X(printer, node)``, through
    :meth:`line` and :meth:`result`."""

    pass_name = "the printer"
    stage = "script"

    def __init__(self):
        self.out: list[str] = []
        self.depth = 1

    def line(self, text):
        self.out.append("    " * self.depth + text)

    def result(self, s, text):
        """A line for the call ``text``, assigned to the statement's ``result`` if it has one."""
        self.line(f"{s.result.name} = {text}" if s.result is not None else text)

    def block(self, s):
        return [self._indent, s, self._dedent]

    def _indent(self):
        self.depth += 1

    def _dedent(self):
        self.depth -= 1

    def visit_Seq(self, s):
        if not s.stmts:
            self.line("pass")
        return s.stmts

    def visit_Assign(self, s):
        self.line(f"{s.var.name} = {print_expr(s.value)}")

    def visit_ElemStore(self, s):
        idx = ", ".join(print_expr(i) for i in s.indices)
        self.line(f"{print_expr(s.view)}[{idx}] = {print_expr(s.value)}")

    def visit_Store(self, s):
        self.line(f"{flat(s.buffer, print_expr(s.index), s.dtype)} = {print_expr(s.value)}")

    def visit_For(self, s):
        kind = {ir.LoopKind.SERIAL: "range", ir.LoopKind.UNROLL: "T.unroll"}.get(s.kind)
        kind = kind or "T.vectorized"
        step = "" if s.step == 1 else f", {s.step}"
        self.line(f"for {s.var.name} in {kind}({print_expr(s.start)}, {print_expr(s.stop)}{step}):")
        return self.block(s.body)

    def visit_While(self, s):
        self.line(f"while {print_expr(s.cond)}:")
        return self.block(s.body)

    def visit_If(self, s):
        """``if`` / ``elif`` / ``else`` at one depth: an else-branch that is an ``if`` prints as
        ``elif`` (as the parser reads it), so a long chain does not indent once per link."""
        self.line(f"if {print_expr(s.cond)}:")
        work = self.block(s.then_body)
        while isinstance(s.else_body, ir.If):
            s = s.else_body
            work += [functools.partial(self.line, f"elif {print_expr(s.cond)}:")]
            work += self.block(s.then_body)
        if s.else_body is not None:
            work += [functools.partial(self.line, "else:"), *self.block(s.else_body)]
        return work

    def visit_Break(self, s):
        self.line("break")

    def visit_Continue(self, s):
        self.line("continue")

    def visit_Barrier(self, s):
        cta = s.scope is ir.BarrierScope.CTA
        self.line("T.cuda.cta_sync()" if cta else "T.cuda.warp_sync()")

    def visit_Printf(self, s):
        args = "".join(", " + print_expr(a) for a in s.args)
        self.line(f"T.cuda.printf({s.fmt!r}{args})")

    def visit_TileOp(self, s):
        ops = ", ".join(print_expr(o) for o in s.operands)
        params = "".join(f", {name}={_param(v)}" for name, v in s.params)
        self.line(f'T.cuda.tile.apply(T.ptx["{s.instruction}"], {ops}{params}, scope="{s.scope}")')

    def visit_RawPtx(self, s):
        ops = ", ".join(print_expr(o) for o in s.operands)
        self.line(f'T.ptx["{s.instruction}"]({ops})')

    def visit_PtxCall(self, s):
        parts = ", ".join(print_expr(op) for op in s.operands)
        self.line(f'ptx("{s.instruction}", {parts})')


def print_function(fn: ir.Function) -> str:
    params = []
    for p in fn.params:
        if isinstance(p, ir.Buffer):
            params.append(f'{p.name}: T.Tensor({p.shape}, "{p.dtype}")')
        else:
            params.append(f"{p.name}: T.{p.dtype}")
    pr = _Printer()
    head = "# lowered\n" if fn.lowered else ""
    lc = fn.launch
    grid = lc.grid
    if lc.sms_grid:  # grid="sms": sized at launch
        grid = '"sms"' if lc.grid[1:] == (1, 1) else f'("sms", {lc.grid[1]}, {lc.grid[2]})'
    pr.line(
        f"T.device_entry(launch=T.cuda.LaunchConfig(grid={grid}, block={lc.block}"
        + (f", dynamic_smem_bytes={lc.dynamic_smem_bytes}" if lc.dynamic_smem_bytes else "")
        + (f", cluster={lc.cluster}" if lc.cluster is not None else "")
        + "))"
    )
    for buf in fn.allocations:
        kind = "alloc_shared" if buf.scope is ir.Scope.SHARED else "alloc_local"
        where = ""
        if fn.lowered and buf in fn.shared_offsets:
            where = f"  # shared bytes [{fn.shared_offsets[buf]}, "
            where += f"{fn.shared_offsets[buf] + buf.nbytes})"
        extra = f", align={buf.align}" if buf.align != 16 else ""
        extra += ', scope="shared.dyn"' if buf.dynamic else ""
        pr.line(f'{buf.name} = T.{kind}({buf.shape}, "{buf.dtype}", layout={buf.layout!r}{extra})'
                + where)  # fmt: skip
    pr.run(fn.body)
    return head + f"@T.function\ndef {fn.name}({', '.join(params)}):\n" + "\n".join(pr.out) + "\n"
