"""Lower a script-level function to the level the backends consume.

* element accesses through views become flat ``Load``/``Store`` (index in the access dtype);
* tile operations are checked against their contracts and become per-lane ``PtxCall``s;
* shared buffers get byte offsets in the block's shared memory.

Errors raised while lowering a statement are located at that statement's line.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import TirxError, TirxSyntaxError
from ..ir import nodes as ir
from ..ir.simplify import static_value
from .inline_indices import inline_indices
from .raw_ptx import lower_raw_ptx
from .shared_memory import check_shared_limits
from .shared_rows import element_offset, known_definitions
from .tile_ops import lower_tile_op

__all__ = ["lower_function"]


def lower_function(fn: ir.Function, arch: int = 80) -> ir.Function:
    if fn.lowered:
        return fn
    lowerer = _Lowerer(arch)
    with known_definitions(fn):
        body = inline_indices(fn, lowerer.stmt(fn.body))
    offsets, total = _plan_shared(fn)
    check_shared_limits(fn, offsets, total, arch)
    return replace(fn, body=body, lowered=True, shared_offsets=offsets, shared_bytes=total)


def _plan_shared(fn: ir.Function):
    offsets, cursor = {}, 0
    for buf in fn.allocations:
        if buf.scope is ir.Scope.SHARED:
            align = max(buf.align, 16)
            cursor = (cursor + align - 1) // align * align
            offsets[buf] = cursor
            cursor += buf.nbytes
    return offsets, cursor


class _Lowerer:
    def __init__(self, arch: int):
        self.arch = arch

    # ------------------------------------------------------------------ statements

    def stmt(self, s):
        try:
            return self._stmt(s)
        except TirxError as e:
            raise e.with_span(getattr(s, "span", None)) from None

    def _stmt(self, s):
        if isinstance(s, ir.Seq):
            return ir.Seq(tuple(self.stmt(x) for x in s.stmts), s.span)
        if isinstance(s, ir.Assign):
            return ir.Assign(s.var, self.expr(s.value), s.span)
        if isinstance(s, ir.ElemStore):
            buf, index = self.address(s.view, s.indices)
            value = ir.cast(self.expr(s.value), s.view.dtype)
            return ir.Store(buf, index, value, s.view.dtype, s.span)
        if isinstance(s, ir.For):
            return ir.For(
                s.var,
                self.expr(s.start),
                self.expr(s.stop),
                s.step,
                self.stmt(s.body),
                s.kind,
                s.span,
            )
        if isinstance(s, ir.While):
            return ir.While(self.expr(s.cond), self.stmt(s.body), s.span)
        if isinstance(s, ir.If):
            orelse = None if s.else_body is None else self.stmt(s.else_body)
            return ir.If(self.expr(s.cond), self.stmt(s.then_body), orelse, s.span)
        if isinstance(s, ir.Printf):
            return ir.Printf(s.fmt, tuple(self.expr(a) for a in s.args), s.span)
        if isinstance(s, ir.TileOp):
            calls = lower_tile_op(s, self.arch)
            return ir.Seq(tuple(calls), s.span)
        if isinstance(s, ir.RawPtx):
            call = lower_raw_ptx(s, self.arch, self.address)
            return ir.PtxCall(
                call.instruction, tuple(self._lower_operand(o) for o in call.operands), call.span
            )
        if isinstance(s, (ir.Break, ir.Continue, ir.Barrier, ir.Store, ir.PtxCall)):
            return s
        raise TypeError(f"cannot lower {type(s).__name__}")

    def _lower_operand(self, op):
        if not isinstance(op, ir.RegVector):
            return op
        regs = tuple(
            ir.ValueReg(self.expr(r.value)) if isinstance(r, ir.ValueReg) else r for r in op.regs
        )
        return ir.RegVector(regs, op.is_output)

    # ----------------------------------------------------------------- expressions

    def expr(self, e):
        if isinstance(e, (int, float, bool)):
            return ir.as_expr(e)
        if isinstance(e, ir.ElemLoad):
            buf, index = self.address(e.view, e.indices)
            return ir.Load(buf, index, e.view.dtype)
        if isinstance(e, ir.BinOp):
            return ir.binop(e.op, self.expr(e.a), self.expr(e.b))
        if isinstance(e, ir.Cmp):
            return ir.cmp(e.op, self.expr(e.a), self.expr(e.b))
        if isinstance(e, ir.Logic):
            return ir.Logic(e.op, self.expr(e.a), self.expr(e.b))
        if isinstance(e, ir.Not):
            return ir.Not(self.expr(e.a))
        if isinstance(e, ir.Select):
            return ir.Select(self.expr(e.cond), self.expr(e.a), self.expr(e.b), e.dtype)
        if isinstance(e, ir.Cast):
            return ir.cast(self.expr(e.value), e.dtype)
        return e  # Const, Var, Special, Load, SharedAddress

    def address(self, view: ir.View, indices):
        """(buffer, element index in view.dtype) of ``view[indices]``."""
        layout = view.layout
        thread_axes = {a for a in _axes(layout) if a != "m"}
        if thread_axes:
            raise TirxSyntaxError(
                f"{view.name or view.buffer.name!r} is distributed over lanes "
                f"({', '.join(sorted(thread_axes))}); a thread can only index its own storage",
                hint="index the register array itself, e.g. dr[r]",
            )
        for d, (i, extent) in enumerate(zip(indices, view.shape)):
            v = static_value(i)
            if v is not None and not 0 <= v < extent:
                raise TirxSyntaxError(
                    f"index {v} is out of range for dimension {d} of extent {extent} "
                    f"of {view.name or view.buffer.name!r}"
                )
        coords = tuple(self.expr(i) for i in indices)
        return view.buffer, ir.as_expr(element_offset(view, coords))


def _axes(layout):
    inner = getattr(layout, "tile_layout", layout)
    return inner.axes()
