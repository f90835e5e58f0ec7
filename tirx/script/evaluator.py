"""Expression evaluation for the parser: compile-time values in Python, run-time values as IR.

The evaluator's entry points and its expression handlers live here; what a call does
(``T.*`` intrinsics, tile operations, tensor methods) is its base class
:class:`~tirx.script.calls.Calls`, and the tests of what kind a value is are in
:mod:`tirx.script.values`.
"""

from __future__ import annotations

import ast
import builtins
import functools
import operator

from ..errors import TirxError, TirxSyntaxError
from ..ir import nodes as ir
from ..ir.simplify import static_value
from . import checks
from . import tensor as tensor_ops
from .calls import Calls
from .chains import CHAINED, evaluate_chain
from .macros import Macro
from .namespace import Intrinsic, place_of
from .refusals import (
    constant_kind,
    operator_hint,
    operator_name,
    python_failure,
    refusal,
    undefined_name,
)
from .spread import spread
from .values import VIEW_METHODS, is_number, is_static, kind_of

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


class Evaluator(Calls):
    def __init__(self, parser, builder):
        self.p = parser
        self.b = builder

    # ------------------------------------------------------------------ entry points

    def value(self, node, name_hint=None):
        if isinstance(node, CHAINED):  # generator handlers, without recursion
            return evaluate_chain(self, node)
        if isinstance(node, ast.Call):
            handler = functools.partial(self.call, name_hint=name_hint)
        else:
            handler = getattr(self, "ex_" + type(node).__name__, None)
        if handler is None:
            raise refusal(node, self.p.span(node))
        try:
            return handler(node)
        except TirxError as e:
            raise e.with_span(self.p.span(node)) from None
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
            raise python_failure(e, self.p.span(node)) from None

    def const(self, node):
        v = self.value(node)
        if not is_static(v):
            raise TirxSyntaxError("this must be a compile-time value", self.p.span(node))
        return v

    def condition(self, node):
        return self._as_condition(self.value(node), node)

    def _as_condition(self, v, node):
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
                out.append(checks.integer_index(self.scalar(item), "an index"))
        return out

    def scalar(self, node):
        return self._as_scalar(self.value(node), node)

    def _as_scalar(self, v, node):
        if isinstance(v, ir.View) or not (is_number(v) or isinstance(v, ir.Expr)):
            raise TirxSyntaxError(f"expected a number, got {kind_of(v)}", self.p.span(node))
        return checks.int_literal(v)

    def loop_range(self, node):
        if not isinstance(node, ast.Call):
            raise TirxSyntaxError(
                "loops iterate over range(...), T.serial(...) or T.unroll(...)",
                self.p.span(node),
            )
        node = spread(self, node)
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
        for v, a in zip(args, node.args):
            try:
                checks.integer_index(v, "a loop bound")
            except TirxError as e:
                raise e.with_span(self.p.span(a)) from None
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args + [1])[:3]
        if static_value(step) is None or static_value(step) == 0:
            raise TirxSyntaxError(
                "the loop step must be a nonzero compile-time integer",
                self.p.span(node.args[-1]),
                hint=checks.STEP_HINT,
            )
        if kind is ir.LoopKind.UNROLL and (
            static_value(start) is None or static_value(stop) is None
        ):
            raise TirxSyntaxError(
                "T.unroll needs compile-time loop bounds",
                self.p.span(node),
                hint="use range(...) or T.serial(...) for run-time bounds",
            )
        return start, stop, static_value(step), kind

    # ------------------------------------------------------------------ expressions

    def ex_Constant(self, node):
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            return node.value
        raise TirxSyntaxError(
            f"{constant_kind(node.value)} is not a kernel value",
            self.p.span(node),
            hint="kernel values are numbers and booleans (strings only as printf formats)",
        )

    def ex_Spread(self, node):  # one item of f(*xs) or f(**kw): see tirx/script/spread.py
        return node.value

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
        known = [*self.b.visible_names(), *self.p.scope, *BUILTINS]
        raise undefined_name(node.id, self.p.span(node), known, self.b.ended_name(node.id))

    def ex_Attribute(self, node):
        base = self.value(node.value)
        return self._getattr(base, node.attr, node)

    def _getattr(self, base, attr, node):
        if attr.startswith("_") and not _is_cuda_intrinsic(base, attr):
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
            raise TirxSyntaxError(
                f"a tensor has no attribute {attr!r}",
                self.p.span(node),
                hint=checks.did_you_mean(attr, VIEW_METHODS),
            )
        if isinstance(base, ir.Expr):
            raise TirxSyntaxError(f"a kernel value has no attribute {attr!r}", self.p.span(node))
        if isinstance(base, Macro):  # a kernel uses a macro by calling it, and only so (the
            # front-end cache fingerprints a macro by what its expansions read)
            raise TirxSyntaxError(
                f"a macro has no attribute {attr!r} inside a kernel",
                self.p.span(node),
                hint=f"call it: {base.__name__}(...)",
            )
        try:
            return getattr(base, attr)
        except AttributeError:
            place = place_of(base)
            err = checks.unknown_attribute(base, attr, place or kind_of(base), place)
            raise err.with_span(self.p.span(node)) from None

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
        if not is_static(key) and not isinstance(key, tuple):
            raise TirxSyntaxError("this index must be a compile-time value", self.p.span(node))
        return base[key]

    def ex_BinOp(self, node):  # a generator: see chains.py
        a = yield node.left
        b = yield node.right
        return self.binop_ast(type(node.op), a, b, node)

    def binop_ast(self, op_type, a, b, node):
        if is_static(a) and is_static(b):
            return _PY_BINOPS[op_type](a, b)
        op = IR_BINOPS.get(op_type)
        if op is None:
            py_op = op_type()
            raise TirxSyntaxError(
                f"the operator `{operator_name(py_op)}` works on compile-time values only, not on "
                "kernel values",
                self.p.span(node),
                hint=operator_hint(py_op),
            )
        return self.binop(op, a, b)

    def binop(self, op: ir.Op, a, b):
        if isinstance(a, ir.View) or isinstance(b, ir.View):
            raise TirxSyntaxError("tensors cannot be combined with operators; index an element")
        if is_number(a) and is_number(b):
            return _PY_OP_OF[op](a, b)
        for v in (a, b):
            if not (is_number(v) or isinstance(v, ir.Expr)):
                raise TirxSyntaxError(f"cannot use {kind_of(v)} in arithmetic")
            checks.int_literal(v)
        checks.divisor(op, b)
        checks.shift_count(op, a, b)
        return ir.binop(op, a, b)

    def ex_UnaryOp(self, node):  # a generator: see chains.py
        v = yield node.operand
        if isinstance(v, ir.View):
            raise TirxSyntaxError("operators do not apply to tensors", self.p.span(node))
        if isinstance(node.op, ast.Not):
            return (not v) if is_static(v) else ir.Not(self.to_bool(v))
        if is_static(v):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[
                type(node.op)
            ](v)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.Invert):
            return v ^ -1
        return v

    def ex_BoolOp(self, node):
        return self.logic(isinstance(node.op, ast.And), node.values)

    def logic(self, is_and: bool, items):
        """``a and b and ...`` (or ``or``) of the expressions ``items``: compile-time operands
        fold, as Python's operators do; kernel values become one condition."""
        result, last = None, None
        for item in items:
            v = self.value(item)
            if isinstance(v, ir.View):
                raise TirxSyntaxError("a tensor is not a condition", self.p.span(item))
            if is_static(v):
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
                if _compile_time(left) and _compile_time(right):  # `in` on Python values
                    if (left in right) != isinstance(op, ast.In):
                        return False
                    left = right
                    continue
                raise TirxSyntaxError(
                    f"the operator `{operator_name(op)}` works on compile-time values only, not "
                    "on kernel values",
                    self.p.span(node),
                    hint=operator_hint(op),
                )
            cop, pyop = _CMPS[type(op)]
            if is_static(left) and is_static(right):
                c = pyop(left, right)
                if not c:
                    return False
                c = None
            else:
                if isinstance(left, ir.View) or isinstance(right, ir.View):
                    raise TirxSyntaxError("tensors cannot be compared", self.p.span(node))
                c = ir.cmp(cop, checks.int_literal(left), checks.int_literal(right))
            if c is not None:
                result = c if result is None else ir.Logic("and", result, c)
            left = right
        return True if result is None else result

    def ex_IfExp(self, node):  # a generator: see chains.py
        cond = self._as_condition((yield node.test), node.test)
        if isinstance(cond, bool):
            return (yield node.body if cond else node.orelse)
        a = self._as_scalar((yield node.body), node.body)
        b = self._as_scalar((yield node.orelse), node.orelse)
        a, b = ir.as_expr(a), ir.as_expr(b)
        dtype = ir.promote(a.dtype, b.dtype)
        return ir.Select(cond, ir.cast(a, dtype), ir.cast(b, dtype), dtype)


def _compile_time(v) -> bool:
    """A Python value holding no kernel value (in a tuple or list either)."""
    items = v if isinstance(v, (tuple, list)) else (v,)
    return all(is_static(x) for x in items)


def _is_cuda_intrinsic(base, attr: str) -> bool:
    """``T.cuda.__shfl_sync`` and the other ``T.cuda`` calls whose CUDA spelling starts with an
    underscore, which kernel code may name although other private names are refused."""
    found = getattr(base, attr, None)
    return isinstance(found, Intrinsic) and found.key == f"cuda.{attr}"
