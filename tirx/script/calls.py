"""The evaluator's calls: ``T.*`` intrinsics, ``T.cuda.tile.apply``, raw ``T.ptx[...]`` calls,
tensor methods (``view``, ``rearrange``, ``permute``), the builtins a kernel may call and the
compile-time callables (layout constructors).

:class:`Calls` is a part of :class:`~tirx.script.evaluator.Evaluator` (its base class): its
methods use the evaluator's ``value``/``const``/``scalar``, its parser ``p`` (spans) and its
builder ``b`` (statements a call emits).
"""

from __future__ import annotations

import ast
import builtins

from .. import catalog
from ..dtypes import dtype_of
from ..errors import TirxSyntaxError
from ..ir import nodes as ir
from ..layout import ComposeLayout, TileLayout
from ..layout.origin import mark_built
from . import checks, expansion, forms, macros
from . import tensor as tensor_ops
from .addresses import element_address
from .namespace import Intrinsic, PtxInstruction, ScalarType
from .spread import spread
from .values import VIEW_METHODS, compile_time_callable, is_number, is_static, kind_of

__all__ = ["Calls"]

_DIMS = {"x": 0, "y": 1, "z": 2, 0: 0, 1: 1, 2: 2}
_SPECIALS = {
    "cuda.thread_idx": ir.Builtin.THREAD_IDX,
    "cuda.block_idx": ir.Builtin.BLOCK_IDX,
    "cuda.block_dim": ir.Builtin.BLOCK_DIM,
    "cuda.grid_dim": ir.Builtin.GRID_DIM,
    "cuda.cluster_cta_id": ir.Builtin.CLUSTER_CTA_ID,
    "cuda.cluster_dim": ir.Builtin.CLUSTER_DIM,
    "cuda.cluster_id": ir.Builtin.CLUSTER_ID,
}


class Calls:
    """Call handling, mixed into the evaluator."""

    def call(self, node, name_hint=None):
        node = spread(self, node)  # f(*xs), f(**kw) of compile-time values, written out
        fnode = node.func
        if isinstance(fnode, ast.Attribute):
            base = self.value(fnode.value)
            if isinstance(base, ir.View):
                return self.view_method(base, fnode.attr, node)
            f = self._getattr(base, fnode.attr, fnode)
        else:
            f = self.value(fnode)
        if isinstance(f, Intrinsic):
            if f.key in forms.FORM_KEYS:
                return forms.call_form(self, f.key, node, name_hint)
            return self.intrinsic(f.key, node, name_hint)
        if isinstance(f, macros.Macro):
            return expansion.expand(self, f, node)
        if isinstance(f, ScalarType):
            args = self._args(node, 0, 1, "value")
            value = self._number(args[0], self.p.span(node)) if args else 0
            return ir.cast(checks.literal_for(value, f.dtype), f.dtype)
        if isinstance(f, PtxInstruction):
            pred = True  # TIRx's pred= on a raw call: the call under `if pred:`, the same thing
            for k in node.keywords:
                if k.arg != "pred":
                    raise TirxSyntaxError(
                        "raw PTX calls take positional operands (and pred=) only",
                        self.p.span(k),
                    )
                pred = self.condition(k.value)
            if pred is False:  # a predicate false at compile time: no instruction
                return None
            ops, spans = [], []
            for a in node.args:
                v = self.value(a)
                items = [v]
                if isinstance(v, ir.View):  # a family may take a tensor for several operands
                    expand = _raw_operands(f.text)
                    items = expand(v) if expand is not None else items
                ops += [ir.as_expr(self._as_scalar(x, a)) for x in items]
                spans += [self.p.span(a)] * len(items)
            call = ir.RawPtx(f.text, tuple(ops), self.p.span(node), tuple(spans))
            self.b.emit(call if pred is True else ir.If(pred, call, None, self.p.span(node)))
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
                if isinstance(v, ir.View):
                    return v.shape[0]
                if isinstance(v, ir.Expr):
                    raise TirxSyntaxError(
                        "len() of a kernel value: a number has no length",
                        self.p.span(node),
                        hint="len(t) of a tensor t is its first extent, t.shape[0]",
                    )
                return len(v)
            if is_static(v):
                return abs(v)
            return self.binop(ir.Op.MAX, v, -v)
        if callable(f) and compile_time_callable(f):
            args = [self.const(a) for a in node.args]
            kwargs = {k.arg: self.const(k.value) for k in node.keywords}
            made = f(*args, **kwargs)
            if isinstance(made, (TileLayout, ComposeLayout)):  # built here, in the kernel source
                mark_built(made, self.p.span(node))
            return made
        raise TirxSyntaxError(
            f"cannot call {getattr(f, '__name__', kind_of(f))} inside a kernel",
            self.p.span(node),
            hint=_intrinsic_for(f)
            or "kernels can call T.* intrinsics, layout constructors, min/max and tensor "
            "methods (view, rearrange)",
        )

    def _args(self, node, lo, hi, *names):
        """Positional-or-keyword arguments evaluated as values, in ``names`` order."""
        vals = [self.value(a) for a in node.args]
        for k in node.keywords:
            if k.arg not in names:
                raise TirxSyntaxError(
                    f"unexpected keyword argument {k.arg!r}", self.p.span(k),
                    hint=_KEYWORDS.get(k.arg),
                )  # fmt: skip
            i = names.index(k.arg)
            while len(vals) <= i:
                vals.append(_MISSING)
            if vals[i] is not _MISSING:
                raise TirxSyntaxError(f"argument {k.arg!r} given twice", self.p.span(k))
            vals[i] = self.value(k.value)
        if not lo <= len(vals) <= hi or any(v is _MISSING for v in vals[:lo]):
            count = f"{lo}" if lo == hi else f"{lo} to {hi}"
            given = len(node.args) + len(node.keywords)
            raise TirxSyntaxError(
                f"{ast.unparse(node.func)} takes {count} argument{'' if (lo, hi) == (1, 1) else 's'} "
                f"({', '.join(names)}), got {given}",
                self.p.span(node),
            )
        return vals

    def view_method(self, view: ir.View, name: str, node):
        span = self.p.span(node)
        if name == "ptr_to":  # TIRx's t.ptr_to([i, j]): the address of t[i, j], T.address_of's
            from .storage import address_of  # (loaded at first use: tests/test_lazy_imports.py)

            target, idx = element_address(self, node, "ptr_to", local=True)
            return address_of(ir.ElemLoad(target, tuple(idx), target.dtype), span)
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
        if name == "permute":
            dims = [self.const(a) for a in node.args]
            if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
                dims = list(dims[0])
            if node.keywords:
                raise TirxSyntaxError("permute takes the dimensions as positional ints", span)
            return tensor_ops.permute(view, dims)
        raise TirxSyntaxError(
            f"a tensor has no method {name!r}",
            span,
            hint=checks.did_you_mean(name, VIEW_METHODS)
            or "tensors support view(...), rearrange(...), permute(...) and indexing",
        )

    def intrinsic(self, key: str, node, name_hint=None):
        span = self.p.span(node)
        b = self.b
        row = catalog.row_of_key(key)  # a family's call (tirx/catalog.py)
        if row is not None:
            return catalog.stage(row, "script").parse_call(self, key, node, name_hint)
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
        if key == "cuda.mov_sreg":  # tirx/script/special_registers.py
            from .special_registers import special_register

            bits, name = self._args(node, 2, 2, "bits", "reg_name")
            return special_register(bits, name, span)
        if key in ("cuda.cta_sync", "cuda.warp_sync"):
            self._args(node, 0, 0)
            scope = ir.BarrierScope.CTA if key == "cuda.cta_sync" else ir.BarrierScope.WARP
            b.emit(ir.Barrier(scope, span))
            return None
        if key == "cuda.printf":
            if not node.args or node.keywords:
                raise TirxSyntaxError("T.cuda.printf(format, *values)", span)
            fmt = self.const(node.args[0])
            if not isinstance(fmt, str):
                raise TirxSyntaxError("the printf format must be a string constant", span)
            args = tuple(ir.as_expr(self.scalar(a)) for a in node.args[1:])
            checks.printf_format(fmt, args)
            b.emit(ir.Printf(fmt, args, span))
            return None
        if key == "cuda.tile.apply":
            return self._tile_apply(node, span)
        if key in ("alloc_shared", "alloc_local", "smem"):
            key = "alloc_shared" if key == "smem" else key  # the real TIRx's short spelling
            vals = self._args(node, 2, 5, "shape", "dtype", "layout", "align", "scope")
            shape, dtype, layout, align, where = vals + [_MISSING] * (5 - len(vals))
            layout = "default" if layout is _MISSING else layout
            align = 16 if align is _MISSING else align
            scope = ir.Scope.SHARED if key == "alloc_shared" else ir.Scope.LOCAL
            dynamic = _dynamic_scope(key, where, span)
            return b.alloc(name_hint, shape, dtype, scope, layout, align, span, dynamic)
        if key in ("cast", "Cast"):  # T.Cast(dtype, value): the IR class's argument order
            names = ("value", "dtype") if key == "cast" else ("dtype", "value")
            a, b = self._args(node, 2, 2, *names)
            value, dtype = (a, b) if key == "cast" else (b, a)
            if isinstance(dtype, ScalarType):
                dtype = dtype.dtype
            return ir.cast(checks.int_literal(self._number(value, span)), dtype_of(dtype))
        if key in ("serial", "unroll"):
            raise TirxSyntaxError(f"T.{key}(...) is only valid as a for-loop iterator", span)
        if key == "device_entry":
            raise TirxSyntaxError("T.device_entry must be the first statement of the kernel", span)
        raise TirxSyntaxError(f"T.{key} is not supported here", span)

    def _number(self, v, span):
        if isinstance(v, ir.View) or not (is_number(v) or isinstance(v, ir.Expr)):
            raise TirxSyntaxError(f"expected a number, got {kind_of(v)}", span)
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
            elif is_number(v):
                operands.append(ir.as_expr(checks.int_literal(v)))
            else:
                raise TirxSyntaxError(
                    f"a tile operand must be a tensor or a value, got {kind_of(v)}", self.p.span(a)
                )
        scope, params = "warp", []
        for k in node.keywords:
            if k.arg == "scope":
                scope = self.const(k.value)
                if scope not in {s.value for s in ir.ExecScope}:
                    known = ", ".join(repr(s.value) for s in ir.ExecScope)
                    raise TirxSyntaxError(
                        f"unknown scope {scope!r}", self.p.span(k.value), hint=f"use one of {known}"
                    )
            elif k.arg in catalog.tile_params():
                params.append((k.arg, self._tile_param(k.value)))
            else:
                raise TirxSyntaxError(f"unexpected keyword argument {k.arg!r}", self.p.span(k))
        self.b.emit(
            ir.TileOp(instr.text, tuple(operands), scope, span, tuple(spans), tuple(params))
        )
        return None

    def _tile_param(self, node):
        """A keyword parameter's value: a number, a tuple of them (a TMA box), or an element
        named by its address (a TMA copy's ``mbar=bars.ptr_to([s])``)."""
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "ptr_to":
            view, idx = element_address(self, node, "the barrier")
            return ir.ElemLoad(view, tuple(idx), view.dtype)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self._tile_param(e) for e in node.elts)
        v = self.value(node)
        return self._constant_param(v, node)

    def _constant_param(self, v, node):
        if isinstance(v, (tuple, list)):
            return tuple(self._constant_param(x, node) for x in v)
        return self._as_scalar(v, node)


_MISSING = object()


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


def _intrinsic_for(f) -> str | None:
    """``use T.sqrt(...)`` for ``math.sqrt``, ``numpy.exp``, ``torch.tanh`` and the like: a
    library's math function whose name ``T`` has as an intrinsic."""
    from .namespace import T

    name = getattr(f, "__name__", "")
    module = (getattr(f, "__module__", None) or type(f).__module__ or "").split(".")[0]
    if module in ("math", "cmath", "numpy", "torch", "builtins") and isinstance(
        getattr(T, name, None), Intrinsic
    ):
        return f"use the intrinsic T.{name}(...)"
    return None


def _raw_operands(text: str):
    """The family's expansion of a tensor argument of a raw ``T.ptx[text]`` call into scalar
    operands (wgmma's accumulator: one operand per register), or None."""
    row = catalog.row_of_ptx(text)
    return catalog.rule(row, "script", "raw_operands") if row is not None else None


# What tirx writes for a keyword of the real TIRx's that it does not have.
_KEYWORDS = {
    "ty_args": "tirx allocates with T.alloc_tensor(shape, dtype, scope=...) (or "
    "T.alloc_shared / T.alloc_local): not the real TIRx's ty_args=[T.Tensor(...)]",
}
