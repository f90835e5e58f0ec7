"""Readable text of the IR (``exe.script()``), in a Python-like syntax.

Script-level functions print views as ``name<dtype shape : layout>``; lowered functions print
flat accesses as ``buf[index]`` and instructions as ``ptx("...", operands)``.
"""

from __future__ import annotations

from . import nodes as ir

__all__ = ["print_function", "print_expr"]

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


def print_expr(e, prec: int = 0) -> str:
    if isinstance(e, (int, float, bool)):
        return repr(e)
    if isinstance(e, ir.Const):
        if e.dtype.kind == "float" and e.dtype.name != "float32":
            return f"T.{e.dtype.name}({e.value!r})"
        if e.dtype.kind == "float":
            return f"T.float32({e.value!r})"
        return repr(e.value)
    if isinstance(e, ir.Var):
        return e.name
    if isinstance(e, ir.Special):
        if e.kind in (ir.Builtin.LANE_ID, ir.Builtin.WARP_ID):
            return f"T.cuda.{e.kind.value}()"
        return f'T.cuda.{e.kind.value}("{"xyz"[e.dim]}")'
    if isinstance(e, ir.BinOp):
        if e.op in (ir.Op.MIN, ir.Op.MAX):
            return f"{e.op.value}({print_expr(e.a)}, {print_expr(e.b)})"
        p = _PREC[e.op]
        text = f"{print_expr(e.a, p)} {e.op.value} {print_expr(e.b, p + 1)}"
        return f"({text})" if p < prec else text
    if isinstance(e, ir.Cmp):
        text = f"{print_expr(e.a, 5)} {e.op.value} {print_expr(e.b, 5)}"
        return f"({text})" if prec > 0 else text
    if isinstance(e, ir.Logic):
        return f"({print_expr(e.a, 1)} {e.op} {print_expr(e.b, 1)})"
    if isinstance(e, ir.Not):
        return f"(not {print_expr(e.a, 1)})"
    if isinstance(e, ir.Select):
        return f"({print_expr(e.a)} if {print_expr(e.cond)} else {print_expr(e.b)})"
    if isinstance(e, ir.Cast):
        return f"T.{e.dtype.name}({print_expr(e.value)})"
    if isinstance(e, ir.ElemLoad):
        return f"{_view(e.view)}[{', '.join(print_expr(i) for i in e.indices)}]"
    if isinstance(e, ir.Load):
        return _flat(e.buffer, e.index, e.dtype)
    if isinstance(e, ir.SharedAddress):
        return f"smem_addr({e.buffer.name}) + {print_expr(e.byte_offset, 6)}"
    if isinstance(e, ir.View):
        return _view(e)
    return repr(e)


def _flat(buf, index, dtype) -> str:
    cast = "" if dtype == buf.dtype else f".as_{dtype.name}"
    return f"{buf.name}{cast}[{print_expr(index)}]"


def _view(v: ir.View) -> str:
    plain = (
        v.dtype == v.buffer.dtype
        and v.shape == v.buffer.shape
        and v.layout == v.buffer.layout
        and isinstance(v.elem_offset, int)
        and v.elem_offset == 0
    )
    if plain:
        return v.buffer.name
    off = (
        ""
        if isinstance(v.elem_offset, int) and v.elem_offset == 0
        else (f" @ {print_expr(v.elem_offset)}")
    )
    return f"{v.buffer.name}<{v.dtype} {v.shape} : {v.layout!r}{off}>"


def _reg(r) -> str:
    if isinstance(r, ir.LocalReg):
        return _flat(r.buffer, r.slot, r.dtype)
    return print_expr(r.value)


class _Printer:
    def __init__(self):
        self.out: list[str] = []
        self.depth = 1

    def line(self, text):
        self.out.append("    " * self.depth + text)

    def block(self, s):
        self.depth += 1
        self.stmt(s)
        self.depth -= 1

    def stmt(self, s):
        if isinstance(s, ir.Seq):
            if not s.stmts:
                self.line("pass")
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, ir.Assign):
            self.line(f"{s.var.name} = {print_expr(s.value)}")
        elif isinstance(s, ir.ElemStore):
            idx = ", ".join(print_expr(i) for i in s.indices)
            self.line(f"{_view(s.view)}[{idx}] = {print_expr(s.value)}")
        elif isinstance(s, ir.Store):
            self.line(f"{_flat(s.buffer, s.index, s.dtype)} = {print_expr(s.value)}")
        elif isinstance(s, ir.For):
            kind = "range" if s.kind is ir.LoopKind.SERIAL else "T.unroll"
            step = "" if s.step == 1 else f", {s.step}"
            self.line(
                f"for {s.var.name} in {kind}({print_expr(s.start)}, {print_expr(s.stop)}{step}):"
            )
            self.block(s.body)
        elif isinstance(s, ir.While):
            self.line(f"while {print_expr(s.cond)}:")
            self.block(s.body)
        elif isinstance(s, ir.If):
            self.line(f"if {print_expr(s.cond)}:")
            self.block(s.then_body)
            if s.else_body is not None:
                self.line("else:")
                self.block(s.else_body)
        elif isinstance(s, ir.Break):
            self.line("break")
        elif isinstance(s, ir.Continue):
            self.line("continue")
        elif isinstance(s, ir.Barrier):
            self.line("T.cuda.cta_sync()" if s.scope == "cta" else "T.cuda.warp_sync()")
        elif isinstance(s, ir.Printf):
            args = "".join(", " + print_expr(a) for a in s.args)
            self.line(f"T.cuda.printf({s.fmt!r}{args})")
        elif isinstance(s, ir.TileOp):
            ops = ", ".join(print_expr(o) for o in s.operands)
            self.line(f'T.cuda.tile.apply(T.ptx["{s.instruction}"], {ops}, scope="{s.scope}")')
        elif isinstance(s, ir.RawPtx):
            ops = ", ".join(print_expr(o) for o in s.operands)
            self.line(f'T.ptx["{s.instruction}"]({ops})')
        elif isinstance(s, ir.PtxCall):
            parts = []
            for op in s.operands:
                if isinstance(op, ir.AddressOperand):
                    parts.append(f"[{print_expr(op.address)}]")
                else:
                    regs = ", ".join(_reg(r) for r in op.regs)
                    parts.append(("out " if op.is_output else "") + "{" + regs + "}")
            self.line(f'ptx("{s.instruction}", {", ".join(parts)})')
        else:
            self.line(f"<{type(s).__name__}>")


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
    pr.line(
        f"T.device_entry(launch=T.cuda.LaunchConfig(grid={lc.grid}, block={lc.block}"
        + (f", dynamic_smem_bytes={lc.dynamic_smem_bytes}" if lc.dynamic_smem_bytes else "")
        + "))"
    )
    for buf in fn.allocations:
        kind = "alloc_shared" if buf.scope is ir.Scope.SHARED else "alloc_local"
        where = ""
        if fn.lowered and buf in fn.shared_offsets:
            where = f"  # shared bytes [{fn.shared_offsets[buf]}, "
            where += f"{fn.shared_offsets[buf] + buf.nbytes})"
        pr.line(f'{buf.name} = T.{kind}({buf.shape}, "{buf.dtype}", layout={buf.layout!r})' + where)
    pr.stmt(fn.body)
    return head + f"@T.function\ndef {fn.name}({', '.join(params)}):\n" + "\n".join(pr.out) + "\n"
