"""Expression evaluation for the parser: compile-time values in Python, run-time values as IR."""

from __future__ import annotations

import ast
import builtins
import functools
import operator

from ..dtypes import dtype_of
from ..errors import TirxError, TirxSyntaxError
from ..ir import nodes as ir
from ..ir.simplify import static_value
from . import tensor as tensor_ops
from .namespace import Intrinsic, PtxInstruction, ScalarType

__all__ = ["Evaluator"]

_PY_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.MatMult: operator.matmul,
}
IR_BINOPS = {
    ast.Add: ir.Op.ADD,
    ast.Sub: ir.Op.SUB,
    ast.Mult: ir.Op.MUL,
    ast.Div: ir.Op.DIV,
    ast.FloorDiv: ir.Op.FLOORDIV,
    ast.Mod: ir.Op.FLOORMOD,
    ast.LShift: ir.Op.SHL,
    ast.RShift: ir.Op.SHR,
    ast.BitAnd: ir.Op.BITAND,
    ast.BitOr: ir.Op.BITOR,
    ast.BitXor: ir.Op.BITXOR,
}
_PY_OP_OF = {v: _PY_BINOPS[k] for k, v in IR_BINOPS.items()}
_PY_OP_OF[ir.Op.MIN] = min
_PY_OP_OF[ir.Op.MAX] = max
_CMPS = {
    ast.Eq: (ir.CmpOp.EQ, operator.eq),
    ast.NotEq: (ir.CmpOp.NE, operator.ne),
    ast.Lt: (ir.CmpOp.LT, operator.lt),
    ast.LtE: (ir.CmpOp.LE, operator.le),
    ast.Gt: (ir.CmpOp.GT, operator.gt),
    ast.GtE: (ir.CmpOp.GE, operator.ge),
}
# The Python builtins a kernel may name (also importable from .parser, where it used to live).
BUILTINS = {
    "range": builtins.range,
    "min": builtins.min,
    "max": builtins.max,
    "len": builtins.len,
    "abs": builtins.abs,
    "True": True,
    "False": False,
    "None": None,
}
_DIMS = {"x": 0, "y": 1, "z": 2, 0: 0, 1: 1, 2: 2}
_SPECIALS = {
    "cuda.thread_idx": ir.Builtin.THREAD_IDX,
    "cuda.block_idx": ir.Builtin.BLOCK_IDX,
    "cuda.block_dim": ir.Builtin.BLOCK_DIM,
    "cuda.grid_dim": ir.Builtin.GRID_DIM,
}


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float))


def _is_static(v) -> bool:
    return not isinstance(v, (ir.Expr, ir.View))


def _compile_time_callable(f) -> bool:
    mod = getattr(f, "__module__", "") or ""
    owner = getattr(f, "__self__", None)
    if owner is not None:
        mod = type(owner).__module__ if not isinstance(owner, type) else owner.__module__
    return mod.startswith("tirx.layout") or mod.startswith("tirx.script.namespace")


class Evaluator:
    def __init__(self, parser, builder):
        self.p = parser
        self.b = builder

    # ------------------------------------------------------------------ entry points

    def value(self, node, name_hint=None):
        if isinstance(node, ast.Call):
            handler = functools.partial(self.call, name_hint=name_hint)
        else:
            handler = getattr(self, "ex_" + type(node).__name__, None)
        if handler is None:
            raise TirxSyntaxError(
                f"the expression {type(node).__name__} is not supported in a tirx kernel",
                self.p.span(node),
            )
        try:
            return handler(node)
        except TirxError as e:
            raise e.with_span(self.p.span(node)) from None
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
            raise TirxSyntaxError(str(e), self.p.span(node)) from None

    def const(self, node):
        v = self.value(node)
        if not _is_static(v):
            raise TirxSyntaxError("this must be a compile-time value", self.p.span(node))
        return v

    def condition(self, node):
        v = self.value(node)
        if isinstance(v, ir.View):
            raise TirxSyntaxError("a tensor is not a condition", self.p.span(node))
        if isinstance(v, ir.Expr):
            if isinstance(v, ir.Const):
                return bool(v.value)
            return self.to_bool(v)
        return bool(v)

    def to_bool(self, e: ir.Expr) -> ir.Expr:
        return e if e.dtype.name == "bool" else ir.cmp(ir.CmpOp.NE, e, 0)

    def indices(self, node) -> list:
        items = node.elts if isinstance(node, ast.Tuple) else [node]
        out = []
        for item in items:
            if isinstance(item, ast.Slice):
                lo = None if item.lower is None else self.scalar(item.lower)
                hi = None if item.upper is None else self.scalar(item.upper)
                st = None if item.step is None else self.const(item.step)
                out.append(slice(lo, hi, st))
            else:
                out.append(self.scalar(item))
        return out

    def scalar(self, node):
        v = self.value(node)
        if isinstance(v, ir.View) or not (_is_number(v) or isinstance(v, ir.Expr)):
            raise TirxSyntaxError(f"expected a number, got {_kind(v)}", self.p.span(node))
        return v

    def loop_range(self, node):
        if not isinstance(node, ast.Call):
            raise TirxSyntaxError(
                "loops iterate over range(...), T.serial(...) or T.unroll(...)",
                self.p.span(node),
            )
        f = self.value(node.func)
        kind = ir.LoopKind.SERIAL
        if isinstance(f, Intrinsic) and f.key in ("serial", "unroll"):
            kind = ir.LoopKind.UNROLL if f.key == "unroll" else ir.LoopKind.SERIAL
        elif f is not builtins.range:
            raise TirxSyntaxError(
                "loops iterate over range(...), T.serial(...) or T.unroll(...)",
                self.p.span(node),
            )
        if node.keywords or not 1 <= len(node.args) <= 3:
            raise TirxSyntaxError("range takes 1 to 3 positional arguments", self.p.span(node))
        args = [self.scalar(a) for a in node.args]
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args + [1])[:3]
        if static_value(step) is None or static_value(step) == 0:
            raise TirxSyntaxError(
                "the loop step must be a nonzero compile-time integer", self.p.span(node.args[-1])
            )
        if kind is ir.LoopKind.UNROLL and (
            static_value(start) is None or static_value(stop) is None
        ):
            raise TirxSyntaxError(
                "T.unroll needs compile-time loop bounds",
                self.p.span(node),
                hint="use range(...) or T.serial(...) for run-time bounds",
            )
        for v, a in zip((start, stop), node.args):
            if isinstance(v, float) or (isinstance(v, ir.Expr) and v.dtype.kind == "float"):
                raise TirxSyntaxError("loop bounds must be integers", self.p.span(a))
        return start, stop, static_value(step), kind

    # ------------------------------------------------------------------ expressions

    def ex_Constant(self, node):
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return node.value
        raise TirxSyntaxError(f"the constant {node.value!r} is not supported", self.p.span(node))

    def ex_Name(self, node):
        try:
            return self.b.lookup(node.id)
        except KeyError:
            pass
        self.p.free_names[node.id] = None  # read from outside: see Parser.free_names
        if node.id in self.p.scope:
            return self.p.scope[node.id]
        if node.id in BUILTINS:
            return BUILTINS[node.id]
        raise TirxSyntaxError(f"name {node.id!r} is not defined", self.p.span(node))

    def ex_Attribute(self, node):
        base = self.value(node.value)
        return self._getattr(base, node.attr, node)

    def _getattr(self, base, attr, node):
        if attr.startswith("_"):
            raise TirxSyntaxError(
                f"private attribute {attr!r} is not accessible", self.p.span(node)
            )
        if isinstance(base, ir.View):
            if attr == "shape":
                return base.shape
            if attr == "dtype":
                return base.dtype.name
            if attr == "layout":
                return base.layout
            raise TirxSyntaxError(f"a tensor has no attribute {attr!r}", self.p.span(node))
        if isinstance(base, ir.Expr):
            raise TirxSyntaxError(f"a kernel value has no attribute {attr!r}", self.p.span(node))
        try:
            return getattr(base, attr)
        except AttributeError:
            raise TirxSyntaxError(
                f"{_kind(base)} has no attribute {attr!r}", self.p.span(node)
            ) from None

    def ex_Tuple(self, node):
        return tuple(self.value(e) for e in node.elts)

    ex_List = ex_Tuple

    def ex_Slice(self, node):
        lo = None if node.lower is None else self.value(node.lower)
        hi = None if node.upper is None else self.value(node.upper)
        st = None if node.step is None else self.value(node.step)
        return slice(lo, hi, st)

    def ex_Subscript(self, node):
        base = self.value(node.value)
        if isinstance(base, ir.View):
            idx = self.indices(node.slice)
            sub = tensor_ops.region(base, idx)
            if sub is not None:
                return sub
            return ir.ElemLoad(base, tuple(idx), base.dtype)
        if isinstance(base, ir.Expr):
            raise TirxSyntaxError("a scalar cannot be indexed", self.p.span(node))
        key = self.value(node.slice)
        if not _is_static(key) and not isinstance(key, tuple):
            raise TirxSyntaxError("this index must be a compile-time value", self.p.span(node))
        return base[key]

    def ex_BinOp(self, node):
        a, b = self.value(node.left), self.value(node.right)
        return self.binop_ast(type(node.op), a, b, node)

    def binop_ast(self, op_type, a, b, node):
        if _is_static(a) and _is_static(b):
            return _PY_BINOPS[op_type](a, b)
        op = IR_BINOPS.get(op_type)
        if op is None:
            raise TirxSyntaxError(
                f"operator {op_type.__name__} needs compile-time operands", self.p.span(node)
            )
        return self.binop(op, a, b)

    def binop(self, op: ir.Op, a, b):
        if isinstance(a, ir.View) or isinstance(b, ir.View):
            raise TirxSyntaxError("tensors cannot be combined with operators; index an element")
        if _is_number(a) and _is_number(b):
            return _PY_OP_OF[op](a, b)
        for v in (a, b):
            if not (_is_number(v) or isinstance(v, ir.Expr)):
                raise TirxSyntaxError(f"cannot use {_kind(v)} in arithmetic")
        return ir.binop(op, a, b)

    def ex_UnaryOp(self, node):
        v = self.value(node.operand)
        if isinstance(v, ir.View):
            raise TirxSyntaxError("operators do not apply to tensors", self.p.span(node))
        if isinstance(node.op, ast.Not):
            return (not v) if _is_static(v) else ir.Not(self.to_bool(v))
        if _is_static(v):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[
                type(node.op)
            ](v)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.Invert):
            return v ^ -1
        return v

    def ex_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        result, last = None, None
        for item in node.values:
            v = self.value(item)
            if isinstance(v, ir.View):
                raise TirxSyntaxError("a tensor is not a condition", self.p.span(item))
            if _is_static(v):
                if bool(v) != is_and:  # decides the whole expression
                    return v if result is None else (not is_and)
                last = v
                continue
            e = self.to_bool(v)
            result = e if result is None else ir.Logic("and" if is_and else "or", result, e)
        return result if result is not None else last

    def ex_Compare(self, node):
        left = self.value(node.left)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.value(right_node)
            if isinstance(op, (ast.Is, ast.IsNot)):
                if isinstance(left, ir.Expr) or isinstance(right, ir.Expr):
                    raise TirxSyntaxError(
                        "'is' compares compile-time objects; use == for kernel values",
                        self.p.span(node),
                    )
                if not any(v is None or v is True or v is False for v in (left, right)):
                    self.p.compared_identity = True  # see Parser.compared_identity
                if (left is right) != isinstance(op, ast.Is):
                    return False
                left = right
                continue
            if type(op) not in _CMPS:
                raise TirxSyntaxError(
                    f"comparison {type(op).__name__} is not supported", self.p.span(node)
                )
            cop, pyop = _CMPS[type(op)]
            if _is_static(left) and _is_static(right):
                c = pyop(left, right)
                if not c:
                    return False
                c = None
            else:
                if isinstance(left, ir.View) or isinstance(right, ir.View):
                    raise TirxSyntaxError("tensors cannot be compared", self.p.span(node))
                c = ir.cmp(cop, left, right)
            if c is not None:
                result = c if result is None else ir.Logic("and", result, c)
            left = right
        return True if result is None else result

    def ex_IfExp(self, node):
        cond = self.condition(node.test)
        if isinstance(cond, bool):
            return self.value(node.body if cond else node.orelse)
        a, b = self.scalar(node.body), self.scalar(node.orelse)
        a, b = ir.as_expr(a), ir.as_expr(b)
        dtype = ir.promote(a.dtype, b.dtype)
        return ir.Select(cond, ir.cast(a, dtype), ir.cast(b, dtype), dtype)

    # ------------------------------------------------------------------ calls

    def call(self, node, name_hint=None):
        fnode = node.func
        if isinstance(fnode, ast.Attribute):
            base = self.value(fnode.value)
            if isinstance(base, ir.View):
                return self.view_method(base, fnode.attr, node)
            f = self._getattr(base, fnode.attr, fnode)
        else:
            f = self.value(fnode)
        if isinstance(f, Intrinsic):
            return self.intrinsic(f.key, node, name_hint)
        if isinstance(f, ScalarType):
            args = self._args(node, 0, 1, "value")
            return ir.cast(args[0] if args else 0, f.dtype)
        if isinstance(f, PtxInstruction):
            if node.keywords:
                raise TirxSyntaxError(
                    "raw PTX calls take positional operands only", self.p.span(node)
                )
            ops = tuple(ir.as_expr(self.scalar(a)) for a in node.args)
            spans = tuple(self.p.span(a) for a in node.args)
            self.b.emit(ir.RawPtx(f.text, ops, self.p.span(node), spans))
            return None
        if f is builtins.min or f is builtins.max:
            args = [self.scalar(a) for a in node.args]
            if len(args) < 2 or node.keywords:
                raise TirxSyntaxError(f"{f.__name__} takes two or more values", self.p.span(node))
            op = ir.Op.MIN if f is builtins.min else ir.Op.MAX
            out = args[0]
            for a in args[1:]:
                out = self.binop(op, out, a)
            return out
        if f is builtins.len or f is builtins.abs:
            args = [self.value(a) for a in node.args]
            if len(args) != 1 or node.keywords:
                raise TirxSyntaxError(f"{f.__name__} takes one argument", self.p.span(node))
            v = args[0]
            if f is builtins.len:
                return v.shape[0] if isinstance(v, ir.View) else len(v)
            if _is_static(v):
                return abs(v)
            return self.binop(ir.Op.MAX, v, -v)
        if callable(f) and _compile_time_callable(f):
            args = [self.const(a) for a in node.args]
            kwargs = {k.arg: self.const(k.value) for k in node.keywords}
            return f(*args, **kwargs)
        raise TirxSyntaxError(
            f"cannot call {getattr(f, '__name__', _kind(f))} inside a kernel",
            self.p.span(node),
            hint="kernels can call T.* intrinsics, layout constructors, min/max and tensor "
            "methods (view, rearrange)",
        )

    def _args(self, node, lo, hi, *names):
        """Positional-or-keyword arguments evaluated as values, in ``names`` order."""
        vals = [self.value(a) for a in node.args]
        for k in node.keywords:
            if k.arg not in names:
                raise TirxSyntaxError(f"unexpected keyword argument {k.arg!r}", self.p.span(k))
            i = names.index(k.arg)
            while len(vals) <= i:
                vals.append(_MISSING)
            if vals[i] is not _MISSING:
                raise TirxSyntaxError(f"argument {k.arg!r} given twice", self.p.span(k))
            vals[i] = self.value(k.value)
        if not lo <= len(vals) <= hi or any(v is _MISSING for v in vals[:lo]):
            raise TirxSyntaxError(
                f"expected {lo} to {hi} arguments ({', '.join(names)})", self.p.span(node)
            )
        return vals

    def view_method(self, view: ir.View, name: str, node):
        span = self.p.span(node)
        if name == "view":
            args = [self.const(a) for a in node.args]
            kw = {k.arg: self.const(k.value) for k in node.keywords}
            layout = kw.pop("layout", None)
            if kw:
                raise TirxSyntaxError(f"view() got unexpected arguments {sorted(kw)}", span)
            if len(args) == 1 and isinstance(args[0], str) and layout is None:
                return tensor_ops.view_dtype(view, args[0])
            if len(args) == 1 and isinstance(args[0], (tuple, list)):
                args = list(args[0])
            if not args or not all(isinstance(a, int) for a in args):
                raise TirxSyntaxError(
                    "view takes a dtype name, or a shape (ints) with an optional layout=", span
                )
            return tensor_ops.view_shape(view, tuple(args), layout)
        if name == "rearrange":
            if len(node.args) != 1:
                raise TirxSyntaxError(
                    "rearrange takes one pattern string and sizes as keywords", span
                )
            pattern = self.const(node.args[0])
            sizes = {k.arg: self.const(k.value) for k in node.keywords}
            for k, v in sizes.items():
                if not isinstance(v, int):
                    raise TirxSyntaxError(f"rearrange size {k}= must be an int, got {v!r}", span)
            return tensor_ops.rearrange(view, pattern, **sizes)
        raise TirxSyntaxError(
            f"a tensor has no method {name!r}",
            span,
            hint="tensors support view(...), rearrange(...) and indexing",
        )

    def intrinsic(self, key: str, node, name_hint=None):
        span = self.p.span(node)
        b = self.b
        if key == "cuda.lane_id":
            self._args(node, 0, 0)
            return ir.Special(ir.Builtin.LANE_ID)
        if key == "cuda.warp_id":
            self._args(node, 0, 0)
            return ir.Special(ir.Builtin.WARP_ID)
        if key in _SPECIALS:
            (dim,) = self._args(node, 0, 1, "dim") or ["x"]
            if dim not in _DIMS:
                raise TirxSyntaxError(f'dimension must be "x", "y" or "z", got {dim!r}', span)
            return ir.Special(_SPECIALS[key], _DIMS[dim])
        if key in ("cuda.cta_sync", "cuda.warp_sync"):
            self._args(node, 0, 0)
            b.emit(ir.Barrier("cta" if key == "cuda.cta_sync" else "warp", span))
            return None
        if key == "cuda.printf":
            if not node.args or node.keywords:
                raise TirxSyntaxError("T.cuda.printf(format, *values)", span)
            fmt = self.const(node.args[0])
            if not isinstance(fmt, str):
                raise TirxSyntaxError("the printf format must be a string constant", span)
            args = tuple(ir.as_expr(self.scalar(a)) for a in node.args[1:])
            b.emit(ir.Printf(fmt, args, span))
            return None
        if key == "cuda.tile.apply":
            return self._tile_apply(node, span)
        if key in ("alloc_shared", "alloc_local"):
            vals = self._args(node, 2, 5, "shape", "dtype", "layout", "align", "scope")
            shape, dtype, layout, align, where = vals + [_MISSING] * (5 - len(vals))
            layout = "default" if layout is _MISSING else layout
            align = 16 if align is _MISSING else align
            scope = ir.Scope.SHARED if key == "alloc_shared" else ir.Scope.LOCAL
            dynamic = _dynamic_scope(key, where, span)
            return b.alloc(name_hint, shape, dtype, scope, layout, align, span, dynamic)
        if key == "cast":
            value, dtype = self._args(node, 2, 2, "value", "dtype")
            if isinstance(dtype, ScalarType):
                dtype = dtype.dtype
            return ir.cast(self._number(value, span), dtype_of(dtype))
        if key in ("min", "max"):
            a, c = self._args(node, 2, 2, "a", "b")
            return self.binop(ir.Op.MIN if key == "min" else ir.Op.MAX, a, c)
        if key in ("serial", "unroll"):
            raise TirxSyntaxError(f"T.{key}(...) is only valid as a for-loop iterator", span)
        if key == "device_entry":
            raise TirxSyntaxError("T.device_entry must be the first statement of the kernel", span)
        raise TirxSyntaxError(f"T.{key} is not supported here", span)

    def _number(self, v, span):
        if isinstance(v, ir.View) or not (_is_number(v) or isinstance(v, ir.Expr)):
            raise TirxSyntaxError(f"expected a number, got {_kind(v)}", span)
        return v

    def _tile_apply(self, node, span):
        if not node.args:
            raise TirxSyntaxError("T.cuda.tile.apply(T.ptx[...], *operands, scope='warp')", span)
        instr = self.const(node.args[0])
        if not isinstance(instr, PtxInstruction):
            raise TirxSyntaxError(
                'the first argument of tile.apply must be an instruction, T.ptx["..."]',
                self.p.span(node.args[0]),
            )
        operands, spans = [], []
        for a in node.args[1:]:
            spans.append(self.p.span(a))
            v = self.value(a)
            if isinstance(v, ir.View) or isinstance(v, ir.Expr):
                operands.append(v)
            elif _is_number(v):
                operands.append(ir.as_expr(v))
            else:
                raise TirxSyntaxError(
                    f"a tile operand must be a tensor or a value, got {_kind(v)}", self.p.span(a)
                )
        scope, params = "warp", []
        for k in node.keywords:
            if k.arg == "scope":
                scope = self.const(k.value)
            elif k.arg in _TILE_PARAMS:
                params.append((k.arg, self.scalar(k.value)))
            else:
                raise TirxSyntaxError(f"unexpected keyword argument {k.arg!r}", self.p.span(k))
        self.b.emit(
            ir.TileOp(instr.text, tuple(operands), scope, span, tuple(spans), tuple(params))
        )
        return None


_MISSING = object()
# keyword parameters of tile operations besides scope (cp.async: chunk size, zero-fill size)
_TILE_PARAMS = ("chunk_bytes", "src_size", "pred")


def _dynamic_scope(key: str, where, span) -> bool:
    """``scope=`` of an allocation: "shared" (static) or "shared.dyn" (dynamic shared memory,
    which may exceed the 48 KB static limit), as the real TIRx spells them."""
    default = "shared" if key == "alloc_shared" else "local"
    if where is _MISSING or where == default:
        return False
    if key == "alloc_shared" and where == "shared.dyn":
        return True
    allowed = '"shared" or "shared.dyn"' if key == "alloc_shared" else '"local"'
    raise TirxSyntaxError(f"T.{key} scope must be {allowed}, got {where!r}", span)


def _kind(v) -> str:
    if isinstance(v, ir.View):
        return "a tensor"
    if isinstance(v, ir.Expr):
        return "a kernel value"
    return f"{type(v).__name__} {v!r}"[:80]
