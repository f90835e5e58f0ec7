"""Expressions compiled to closures that evaluate over a set of threads at once.

A compiled expression is ``f(idx) -> values``: ``idx`` is the sorted array of the active
threads' linear ids (or the machine's ``all`` array, recognised by identity, when every
thread is active) and the result is an array aligned with ``idx`` in the expression's
compute type (see :mod:`tirx.sim.numeric`), or a 0-d array when it does not depend on the
thread. Operations that can fault (loads, integer division, shifts) only ever see the
threads that really evaluate them: ``and``/``or`` short-circuit and ``Select`` evaluates
each side on the threads that choose it, as C does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from .. import catalog
from ..dtypes import DType, DTypeKind, is_float
from ..errors import SimulationError
from ..ir import nodes as ir
from ..ir.visitor import UnknownNodeError, child_fields
from . import deep
from .bounds import Bounds
from .faults import Fault
from .memory import as_index, constant_slot
from .numeric import canonical_nan, compute_type, constant, convert, decode, storage_type

__all__ = ["ExprCompiler", "Eval", "converted", "to_bool", "first_tid"]

Eval = Callable[[np.ndarray], np.ndarray]

#: Closures nest at most this many levels (a few Python frames each); a taller node runs as a
#: step on :func:`tirx.sim.deep.drive`'s explicit stack, so depth never meets the recursion
#: limit while the shallow expressions of real kernels keep their direct closures.
MAX_CLOSURE_HEIGHT = 48


def _expr_children(e) -> tuple:
    """The expressions directly under ``e`` (each once, in field order)."""
    get = _CHILDREN.get(type(e))
    if get is None:
        get = _CHILDREN[type(e)] = _children_getter(type(e))
    return get(e)


def _children_getter(cls):
    try:
        fields = child_fields(cls)
    except UnknownNodeError:  # no IR node: _build reports it as unsupported
        fields = ()

    def get(e):
        out = []
        for name in fields:
            v = getattr(e, name)
            for k in v if type(v) is tuple else (v,):
                if isinstance(k, ir.Expr) and all(k is not x for x in out):
                    out.append(k)
        return tuple(out)

    if not fields:
        return lambda e: ()
    if fields == ("a", "b"):  # the binary nodes, most of any expression: the quick way
        return lambda e: (e.a, e.b) if e.a is not e.b else (e.a,)
    return get


_CHILDREN: dict[type, Callable] = {}


def _py_min(a, b):
    """Python's ``min(a, b)``: ``b if b < a else a`` (decides NaN and signed zeros too)."""
    return np.where(b < a, b, a)


def _py_max(a, b):
    return np.where(b > a, b, a)


_ARITH = {
    ir.Op.ADD: np.add,
    ir.Op.SUB: np.subtract,
    ir.Op.MUL: np.multiply,
    ir.Op.MIN: _py_min,
    ir.Op.MAX: _py_max,
    ir.Op.BITAND: np.bitwise_and,
    ir.Op.BITOR: np.bitwise_or,
    ir.Op.BITXOR: np.bitwise_xor,
}
_CMP = {
    ir.CmpOp.EQ: np.equal,
    ir.CmpOp.NE: np.not_equal,
    ir.CmpOp.LT: np.less,
    ir.CmpOp.LE: np.less_equal,
    ir.CmpOp.GT: np.greater,
    ir.CmpOp.GE: np.greater_equal,
}


_OVERFLOWS = {ir.Op.ADD: "+", ir.Op.SUB: "-", ir.Op.MUL: "*"}
# the float operations that compute (min and max choose an operand, its bits unchanged)
_MAKES_NAN = {*_OVERFLOWS, ir.Op.DIV, ir.Op.FLOORDIV, ir.Op.FLOORMOD}
_OVERFLOW_HINT = (
    "signed overflow is undefined in the generated CUDA: the GPU's compiler assumes it cannot "
    "happen and may fold or reorder the arithmetic around it (a + 1 > a is true there), so the "
    "GPU's result is not the wrapped one; keep the values in range, compute in int64, or use "
    "uint32/uint64 where wrapping is meant (a hash, a counter)"
)


def _checked(fa: Eval, fb: Eval, op: ir.Op, d: DType) -> Eval:
    """``a op b`` of signed ints of ``d`` (32 or 64 bits, where C does the arithmetic in the
    type itself): the result, or a Fault where it overflows. C leaves signed overflow
    undefined and the GPU's compiler uses that (it folds ``a + 1 > a`` to true), so the
    wrapped value the simulator would compute is not the GPU's."""
    uf = _ARITH[op]
    lo = -(1 << (d.bits - 1))

    def int32(idx):  # exact in int64, then narrowed: a difference is an overflow
        a, b = fa(idx), fb(idx)
        exact = uf(a, b, dtype=np.int64)
        r = exact.astype(np.int32)
        if (r != exact).any():
            overflow(a, b, r != exact, idx)
        return r

    def int64(idx):
        a, b = fa(idx), fb(idx)
        with np.errstate(over="ignore"):
            r = uf(a, b)
        if op is ir.Op.ADD:
            bad = ((a ^ r) & (b ^ r)) < 0
        elif op is ir.Op.SUB:
            bad = ((a ^ b) & (a ^ r)) < 0
        else:  # a product: exact where dividing it back gives the factor
            safe = np.where(b == 0, 1, b)
            bad = ((b != 0) & (r // safe != a)) | ((a == lo) & (b == -1)) | ((b == lo) & (a == -1))
        if bad.any():
            overflow(a, b, bad, idx)
        return r

    def overflow(a, b, bad, idx):
        k = int(np.flatnonzero(bad)[0]) if np.ndim(bad) else 0
        x, y = (int(v[k]) if np.ndim(v) else int(v) for v in (a, b))
        raise Fault(
            f"signed integer overflow: {x} {_OVERFLOWS[op]} {y} does not fit in {d}",
            first_tid(bad, idx),
            _OVERFLOW_HINT,
        )

    f = int32 if d.bits == 32 else int64
    return f


def first_tid(mask: np.ndarray, idx: np.ndarray) -> int:
    if np.ndim(mask) == 0:
        return int(idx[0])
    return int(idx[np.flatnonzero(mask)[0]])


def converted(f: Eval, src: DType, dst: DType) -> Eval:
    """``f`` followed by the C conversion ``src → dst`` (``f`` itself when none is needed)."""
    if src == dst or (compute_type(src) == compute_type(dst) and dst.bits >= 32):
        return f
    return lambda idx: convert(f(idx), dst)


def to_bool(f: Eval, src: DType) -> Eval:
    if src.kind == "bool":
        return f
    return lambda idx: np.not_equal(f(idx), 0)


def _float_floordiv(a, b):
    """Float ``//`` as the generated C computes it: ``floor(a / b)``, the quotient rounded
    first (numpy's floor_divide floors the exact quotient: 1 // 0.1f is 9 there, 10 here)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.floor(np.true_divide(a, b))


def _float_floormod(a, b):
    """Float ``%`` as the generated C computes it: ``a - floor(a / b) * b``, each operation
    rounded (no fused multiply-add: tirx compiles with --fmad=false)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return a - np.floor(np.true_divide(a, b)) * b


class ExprCompiler:
    """Compiles expressions against one machine (its thread arrays, variables and memory);
    a family's expression classes (a warp collective, a math intrinsic) are compiled by its
    own ``eval_<Class>(compiler, node)`` in ``tirx/families/<family>/sim.py``."""

    def __init__(self, machine):
        self.m = machine
        self.span = None  # the statement being compiled, for compile-time errors
        self._memo: dict[int, tuple[ir.Expr, Eval, int]] = {}  # id -> (node, eval, height)
        self.bounds = Bounds(machine)  # what integer results provably fit (no overflow check)
        self._tall: dict[int, tuple[ir.Expr, object]] = {}  # id -> (node, driver step)
        self._holes: dict[int, Eval] | None = None  # children a tall node's step supplies

    def error(self, message: str, hint: str | None = None) -> SimulationError:
        return SimulationError(message, self.span, hint)

    def compile(self, e) -> Eval:
        """The evaluator of ``e``, built bottom-up from an explicit work stack (children first,
        each node once), so no depth of expression needs Python recursion to compile."""
        if isinstance(e, (bool, int, float)):
            e = ir.const(e)
        if self._holes is not None and id(e) in self._holes:
            return self._holes[id(e)]
        hit = self._memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        memo, kids_of, todo = self._memo, {}, [e]
        while todo:
            node = todo.pop()
            hit = memo.get(id(node))
            if hit is not None and hit[0] is node:
                continue
            kids = kids_of.get(id(node))
            if kids is None:
                kids = _expr_children(node)
                pending = [k for k in kids if not self._known(k)]
                if pending:  # back to this node once they are built
                    kids_of[id(node)] = kids
                    todo.append(node)
                    todo.extend(reversed(pending))
                    continue
            self._build(node, kids)
        return memo[id(e)][1]

    def _known(self, e) -> bool:
        hit = self._memo.get(id(e))
        return hit is not None and hit[0] is e

    def _build(self, e, kids: tuple) -> None:
        """Compile ``e`` whose children are compiled: a closure over theirs while the closure
        nest stays shallow, otherwise a step of :func:`tirx.sim.deep.drive`."""
        method = getattr(self, "_" + type(e).__name__, None)
        if method is None:
            method = self._family_rule(type(e).__name__)
        if method is None:
            raise self.error(
                f"the simulator cannot execute {type(e).__name__} expressions: it runs only "
                f"the lowered IR",
                "run the function through tirx's lowering first",
            )
        height = 1
        for k in kids:
            h = self._memo[id(k)][2]
            if h >= height:
                height = h + 1
        if height <= MAX_CLOSURE_HEIGHT:
            f = method(e)
        else:
            step = deep.tall_step(self, e, method, kids)
            self._tall[id(e)] = (e, step)
            f = functools.partial(deep.drive, self, step)
        if self.m.recorder is not None:  # a profiling run counts what this node executes
            f = self.m.recorder.expression(e, f)
        self._memo[id(e)] = (e, f, height)

    def _family_rule(self, name: str):
        """A family's ``eval_<name>`` (tirx/catalog.py), bound to this compiler, or None."""
        row = catalog.row_of_node(name)
        rule = catalog.rule(row, "sim", "eval_" + name) if row is not None else None
        return functools.partial(rule, self) if rule is not None else None

    # ------------------------------------------------------------------------ leaves

    def _Const(self, e: ir.Const) -> Eval:
        c = constant(e.value, e.dtype)
        return lambda idx: c

    def _Var(self, e: ir.Var) -> Eval:
        m = self.m
        if e in m.param_values:
            c = m.param_values[e]
            return lambda idx: c
        arr = m.variable(e)
        all_ = m.all
        return lambda idx: arr if idx is all_ else arr[idx]

    def _Special(self, e: ir.Special) -> Eval:
        m = self.m
        kind, d = e.kind, e.dim
        if d not in (0, 1, 2):
            raise self.error(f"{kind.value} dimension must be 0, 1 or 2, not {d}")
        if kind in (ir.Builtin.BLOCK_DIM, ir.Builtin.GRID_DIM):
            dims = m.fn.launch.block if kind is ir.Builtin.BLOCK_DIM else m.fn.launch.grid
            c = constant(int(dims[d]), e.dtype)
            return lambda idx: c
        if kind in ir.CLUSTER_BUILTINS:  # tirx/sim/cluster.py
            from .cluster import cluster_register

            f = cluster_register(m, kind, d)
            return f if e.dtype.name == "int32" else (lambda idx: convert(f(idx), e.dtype))
        if kind is ir.Builtin.BLOCK_IDX:
            block = m.block_idx
            if e.dtype.name == "int32":
                return lambda idx: block[d]
            return lambda idx: convert(block[d], e.dtype)
        arr = {
            ir.Builtin.LANE_ID: m.lane,
            ir.Builtin.WARP_ID: m.warp,
            ir.Builtin.THREAD_IDX: m.thread_xyz[d],
        }[kind]
        arr = convert(arr, e.dtype)
        all_ = m.all
        return lambda idx: arr if idx is all_ else arr[idx]

    # -------------------------------------------------------------------- arithmetic

    def _BinOp(self, e: ir.BinOp) -> Eval:
        d = e.dtype
        fa = converted(self.compile(e.a), e.a.dtype, d)
        fb = converted(self.compile(e.b), e.b.dtype, d)
        op = e.op
        if op in _ARITH:
            uf = _ARITH[op]
            if is_float(d) and op in (ir.Op.BITAND, ir.Op.BITOR, ir.Op.BITXOR):
                raise self.error(f"bitwise {op.value} on {d} operands")
            if (op in _OVERFLOWS and d.kind is DTypeKind.INT and d.bits >= 32
                    and not self.bounds.fits(e)):  # fmt: skip
                f = _checked(fa, fb, op, d)
            else:
                f = lambda idx: uf(fa(idx), fb(idx))  # noqa: E731
        elif is_float(d):
            uf = {  # C's floor(a / b) and a - floor(a / b) * b, each operation rounded
                ir.Op.DIV: np.true_divide,
                ir.Op.FLOORDIV: _float_floordiv,
                ir.Op.FLOORMOD: _float_floormod,
            }.get(op)
            if uf is None:
                raise self.error(f"{op.value} needs integer operands, not {d}")
            f = lambda idx: uf(fa(idx), fb(idx))  # noqa: E731
        elif op in (ir.Op.SHL, ir.Op.SHR):
            f = self._shift(fa, fb, op, d)
        elif (
            op in (ir.Op.FLOORDIV, ir.Op.FLOORMOD)
            and isinstance(e.b, ir.Const)
            and constant(e.b.value, d) not in (0, -1)
        ):
            uf = np.floor_divide if op is ir.Op.FLOORDIV else np.remainder
            f = lambda idx: uf(fa(idx), fb(idx))  # noqa: E731
        else:
            f = self._int_division(fa, fb, op, d)
        if d.name == "float32" and op in _MAKES_NAN:  # a NaN made is the GPU's 0x7fffffff
            g = f
            f = lambda idx: canonical_nan(g(idx))  # noqa: E731
        if is_float(d) and d.bits == 16:
            g = f
            f = lambda idx: convert(g(idx), d)  # noqa: E731
        return f

    @staticmethod
    def _int_division(fa: Eval, fb: Eval, op: ir.Op, d: DType) -> Eval:
        least = -(1 << (d.bits - 1)) if d.kind is DTypeKind.INT and d.bits >= 32 else None

        def f(idx):
            x, y = fa(idx), fb(idx)
            zero = y == 0
            if np.any(zero):
                raise Fault(
                    f"integer division by zero ({op.value})",
                    first_tid(zero, idx),
                    "guard the divisor, or divide floats",
                )
            if least is not None:
                over = (x == least) & (y == -1)
                if np.any(over):
                    raise Fault(
                        f"signed integer overflow: {least} {op.value} -1 does not fit in {d} "
                        "(undefined in C)",
                        first_tid(over, idx),
                        _OVERFLOW_HINT,
                    )
            if op is ir.Op.FLOORDIV:
                return np.floor_divide(x, y)
            if op is ir.Op.FLOORMOD:
                return np.remainder(x, y)
            return np.floor_divide(x - np.fmod(x, y), y)  # C's truncating "/"

        return f

    @staticmethod
    def _shift(fa: Eval, fb: Eval, op: ir.Op, d: DType) -> Eval:
        uf = np.left_shift if op is ir.Op.SHL else np.right_shift
        bits = d.bits

        def f(idx):
            x, y = fa(idx), fb(idx)
            bad = (y < 0) | (y >= bits)
            if np.any(bad):
                raise Fault(
                    f"shift count out of range for {d} ({op.value} by a count outside "
                    f"0..{bits - 1}; undefined in C)",
                    first_tid(bad, idx),
                )
            return uf(x, y)

        return f

    def _Cmp(self, e: ir.Cmp) -> Eval:
        d = ir.promote(e.a.dtype, e.b.dtype)
        fa = converted(self.compile(e.a), e.a.dtype, d)
        fb = converted(self.compile(e.b), e.b.dtype, d)
        uf = _CMP[e.op]
        return lambda idx: uf(fa(idx), fb(idx))

    def _Logic(self, e: ir.Logic) -> Eval:
        if e.op not in ("and", "or"):
            raise self.error(f"unknown logical operator {e.op!r}")
        fa = to_bool(self.compile(e.a), e.a.dtype)
        fb = to_bool(self.compile(e.b), e.b.dtype)
        is_and = e.op == "and"

        def f(idx):
            a = fa(idx)
            go = a if is_and else ~a  # threads that evaluate the right operand
            if np.ndim(go) == 0:
                return fb(idx) if go else a
            if go.all():
                return np.broadcast_to(fb(idx), go.shape)
            if not go.any():
                return a
            out = a.copy()
            out[go] = fb(idx[go])
            return out

        return f

    def _Not(self, e: ir.Not) -> Eval:
        fa = to_bool(self.compile(e.a), e.a.dtype)
        return lambda idx: np.logical_not(fa(idx))

    def _Select(self, e: ir.Select) -> Eval:
        d = e.dtype
        fc = to_bool(self.compile(e.cond), e.cond.dtype)
        fa = converted(self.compile(e.a), e.a.dtype, d)
        fb = converted(self.compile(e.b), e.b.dtype, d)
        ct = compute_type(d)

        def f(idx):
            c = fc(idx)
            if np.ndim(c) == 0:
                return fa(idx) if c else fb(idx)
            if c.all():
                return fa(idx)
            if not c.any():
                return fb(idx)
            out = np.empty(c.shape, dtype=ct)
            out[c] = fa(idx[c])
            out[~c] = fb(idx[~c])
            return out

        return f

    def _Reinterpret(self, e: ir.Reinterpret) -> Eval:  # T.reinterpret
        from .reinterpret import reinterpret  # loaded by the first kernel that has one

        src, d = e.value.dtype, e.dtype
        if isinstance(e.value, ir.Load) and src.kind == "float" and src.bits in (8, 16):
            # straight from memory: the bits as stored (codegen's C does not widen them)
            bits, as_dst = self.load_bits(e.value), storage_type(d)
            return lambda idx: decode(np.asarray(bits(idx)).view(as_dst), d)
        fa = self.compile(e.value)
        return lambda idx: reinterpret(fa(idx), src, d)

    def _Cast(self, e: ir.Cast) -> Eval:
        fa = self.compile(e.value)
        src, d = e.value.dtype, e.dtype
        if src == d:
            return fa
        return lambda idx: convert(fa(idx), d)

    # ---------------------------------------------------------------------- memory

    def _Load(self, e: ir.Load) -> Eval:
        bits, d = self.load_bits(e), e.dtype
        return lambda idx: decode(bits(idx), d)

    def load_bits(self, e: ir.Load) -> Eval:
        """The memory contents ``e`` reads (``storage_type`` of its dtype), not decoded: what a
        store of the same 16- or 8-bit float type copies as they are, as the generated C does."""
        region = self.m.region(e.buffer, self)
        fi = self.compile(e.index)
        d = e.dtype
        slot = constant_slot(e.index) if e.buffer.scope is ir.Scope.LOCAL else None
        if slot is not None:  # a register named by its slot (x[3])
            return lambda idx: region.load_slot(slot, d, idx, idx)
        if e.buffer.scope is ir.Scope.LOCAL:
            return lambda idx: region.load(as_index(fi(idx), idx.size), d, idx, idx)
        return lambda idx: region.load(as_index(fi(idx), idx.size), d, idx)

    def _GlobalAddress(self, e: ir.GlobalAddress) -> Eval:
        """A global tensor's byte as an address: the simulator's tensor is the caller's array,
        so this is where that array's byte is in this process (on the GPU the device's); its
        alignment is the array's."""
        base = np.uint64(self.m.region(e.buffer, self).address)
        fo = self.compile(e.byte_offset)

        def f(idx):
            return np.asarray(fo(idx)).astype(np.uint64) + base

        return f if e.dtype == ir.U64 else converted(f, ir.U64, e.dtype)

    def _SharedAddress(self, e: ir.SharedAddress) -> Eval:
        base = self.m.shared_base(e.buffer, self)
        fo = self.compile(e.byte_offset)
        d = e.dtype
        u32 = ir.U32

        def f(idx):
            return (np.asarray(fo(idx)).astype(np.int64) + base).astype(np.uint32)

        return f if d == u32 else converted(f, u32, d)
