"""Index simplification: the integer algebra applied to every address the lowering builds.

Layouts applied to run-time coordinates produce sums of floor divisions and modulos such as
``(i // 16) * 16 + i % 16``; left alone, each access computes them again, and the CUDA
compiler cannot always undo them (it must keep 64-bit address arithmetic for each). The
rules, each exact for integers under the IR's floor semantics:

* sums are brought to a linear form ``sum(coef * atom) + const`` (like terms collected, the
  constant folded last, so a constant offset ends up in the address's immediate);
* ``(x // c) * (k * c) + (x % c) * k  ->  x * k`` (repeated, so nested splits collapse);
* ``(c * y + r) // c  ->  y + r // c`` and ``(c * y + r) % c  ->  r % c``; and when
  ``k * c <= r < (k + 1) * c`` is provable from value ranges, ``r // c -> k`` and
  ``r % c -> r - k * c`` (``k = 0`` the common case);
* ``(x // a) // b -> x // (a * b)`` and ``(x % a) % b -> x % b`` when ``b`` divides ``a``
  (positive constants);
* an XOR swizzle ``x ^ ((x >> a) & mask)`` (or ``x ^ ((x & mask) << a)``) reads and changes
  only the bits of ``x`` below ``K``, the power of two above ``mask << a``: with ``x = H + L``,
  ``H`` a multiple of ``K`` and ``0 <= L < K``, it is ``H + swizzle(L)``. The terms of ``x``
  whose coefficient ``K`` divides go to ``H`` (stage, warp and repeat offsets: they become
  plain additions, constants an address's immediate), a term ``c * t`` that could reach past
  ``K`` is split as ``c * q * (t // q) + c * (t % q)`` with ``q = K / gcd(c, K)``, and the
  rest -- usually thread-index bits only, the same in every iteration -- stays swizzled.

Ranges come from the thread indices (``lane_id`` in ``[0, 32)``), from ``x % c`` (always in
``[0, c)`` for ``c > 0``) and from the caller (loop variables). Only expressions whose nodes
all have one integer dtype are rewritten, so no conversion changes place; like the CUDA
compiler, the rules assume index arithmetic does not overflow. The simulator runs the same
simplified IR as the GPU, so the two never disagree.
"""

from __future__ import annotations

import math

from ..dtypes import is_float
from . import nodes as ir
from .simplify import TooDeep, structural_key
from .visitor import DESCEND, Visitor

__all__ = ["simplify_index", "value_range"]

_LINEAR = (ir.Op.ADD, ir.Op.SUB, ir.Op.MUL)


def simplify_index(e, ranges: dict | None = None, keys: dict | None = None):
    """``e`` simplified (an int stays an int). ``ranges`` maps Vars to ``(lo, hi)``, inclusive.
    ``keys``: a memo of structural keys (see :func:`~tirx.ir.simplify.structural_key`) that
    the caller keeps for several calls over trees sharing subtrees; by default one per call."""
    if isinstance(e, int) or not isinstance(e, ir.Expr):
        return e
    if is_float(e.dtype) or e.dtype.kind == "bool":
        return e
    if _taller_than(e, MAX_HEIGHT):  # left as written: the rules below recurse per level
        return e
    return _Simplifier(ranges or {}, keys).run(e)


# The simplifier's rules recurse once per level of nested ``//``, ``%``, ``*`` (sums are
# collected by a loop); an index nesting more of them than this (thousands, which CPython
# compiles) is left unsimplified instead.
MAX_HEIGHT = 200


def _taller_than(e, limit: int) -> bool:
    """Whether ``e`` nests more than ``limit`` operators other than ``+``/``-`` (sums are
    collected without recursion) or casts (explicit stack)."""
    todo = [(e, 1)]
    while todo:
        node, depth = todo.pop()
        if depth > limit:
            return True
        if isinstance(node, ir.BinOp):
            inner = depth if node.op in (ir.Op.ADD, ir.Op.SUB) else depth + 1
            todo += ((node.a, inner), (node.b, inner))
        elif isinstance(node, ir.Cast):
            todo.append((node.value, depth + 1))
    return False


def value_range(e, ranges: dict | None = None) -> tuple[int, int] | None:
    """Inclusive bounds of an integer expression, or None when unknown."""
    return _Simplifier(ranges or {}).range(e)


class _Simplifier:
    def __init__(self, ranges: dict, keys: dict | None = None):
        self.ranges = ranges
        # structural_key's memo (node id -> (node, key)): this run's, or the caller's
        self.keys: dict = {} if keys is None else keys
        self._range: _Range | None = None
        # run's results by node id (beside the node, so the id is not reused): a swizzle
        # reads its operand twice, x ^ ((x >> a) & mask), one object simplified once
        self._runs: dict[int, tuple] = {}
        self._bounds: dict[int, tuple] = {}  # range's answers by node id, as _runs

    def run(self, e):
        if not isinstance(e, ir.BinOp):  # a leaf or a cast: nothing worth remembering
            return self._run(e)
        known = self._runs.get(id(e))
        if known is not None and known[0] is e:
            return known[1]
        out = self._run(e)
        self._runs[id(e)] = (e, out)
        return out

    def _run(self, e):
        if not isinstance(e, ir.BinOp) or is_float(e.dtype):
            if isinstance(e, ir.Cast) and not is_float(e.dtype):
                return ir.cast(self.run(e.value), e.dtype)
            return e
        if e.op in _LINEAR:
            return self.rebuild(self.linear(e), e.dtype)
        a, b = self.run(e.a), self.run(e.b)
        if e.op is ir.Op.BITXOR and a.dtype == b.dtype == e.dtype:
            split = self.swizzle(a, b)
            if split is None:
                split = self.swizzle(b, a)
            if split is not None:
                return split
        c = b.value if isinstance(b, ir.Const) else None
        if c is not None and c > 0 and a.dtype == e.dtype == b.dtype:
            if e.op is ir.Op.FLOORDIV:
                return self.floordiv(a, c, e.dtype)
            if e.op is ir.Op.FLOORMOD:
                return self.floormod(a, c, e.dtype)
        return ir.binop(e.op, a, b)

    # ------------------------------------------------------------------ linear forms

    def linear(self, e) -> tuple[dict, int]:
        """``{key: (atom, coef)}, const`` over nodes of ``e``'s dtype (others are atoms)."""
        dtype = e.dtype
        terms: dict = {}
        const = 0
        stack = [(e, 1)]
        while stack:
            x, k = stack.pop()
            if isinstance(x, ir.Const):
                const += k * int(x.value)
            elif isinstance(x, ir.BinOp) and x.op in _LINEAR and x.dtype == dtype:
                if x.op is ir.Op.MUL:
                    if isinstance(x.b, ir.Const):
                        stack.append((x.a, k * int(x.b.value)))
                        continue
                    if isinstance(x.a, ir.Const):
                        stack.append((x.b, k * int(x.a.value)))
                        continue
                    self.add_atom(terms, ir.binop(ir.Op.MUL, self.run(x.a), self.run(x.b)), k)
                    continue
                stack.append((x.b, k if x.op is ir.Op.ADD else -k))
                stack.append((x.a, k))  # popped first: terms keep their source order
            elif x.dtype == dtype and isinstance(x, ir.BinOp):
                y = self.run(x)
                if isinstance(y, ir.BinOp) and y.op in _LINEAR and y.dtype == dtype:
                    stack.append((y, k))  # a division that became a sum: distribute it
                elif isinstance(y, ir.Const):
                    const += k * int(y.value)
                else:
                    self.add_atom(terms, y, k)
            else:
                self.add_atom(terms, x, k)
        return self.fold_pairs(terms), const

    def add_atom(self, terms, atom, k):
        if isinstance(atom, ir.Const):
            atom = ir.Const(atom.value, atom.dtype)
        key = structural_key(atom, self.keys)
        old = terms.get(key, (atom, 0))[1]
        if old + k:
            terms[key] = (atom, old + k)
        else:
            terms.pop(key, None)

    def fold_pairs(self, terms: dict) -> dict:
        """Collapse the pieces of a split index until nothing changes:
        ``(y % d) * k + (y // d) * (k * d) -> y * k`` and
        ``(x % c) * k + ((x // c) % d) * (k * c) -> (x % (c * d)) * k``."""
        changed = True
        while changed:
            changed = False
            for key, (atom, coef) in list(terms.items()):
                if key not in terms or not _is_div(atom, ir.Op.FLOORMOD):
                    continue
                y, d, dtype = atom.a, int(atom.b.value), atom.dtype
                # both rules below pair this term with another of coefficient coef * d: with
                # none, neither applies (and the quotient need not be built to find that out)
                if not any(c == coef * d and k != key for k, (_, c) in terms.items()):
                    continue
                div = self.floordiv(y, d, dtype)
                dkey = structural_key(div, self.keys)
                if dkey != key and dkey in terms and terms[dkey][1] == coef * d:
                    del terms[key], terms[dkey]
                    sub, const = self.linear_of_atom(y)
                    for satom, scoef in sub.values():
                        self.add_atom(terms, satom, scoef * coef)
                    if const:
                        self.add_atom(terms, ir.Const(1, dtype), const * coef)
                    changed = True
                    continue
                for okey, (other, ocoef) in list(terms.items()):
                    # other = (y // d) % e with coefficient coef * d: merge into y % (d * e)
                    if (
                        okey != key
                        and _is_div(other, ir.Op.FLOORMOD)
                        and ocoef == coef * d
                        and structural_key(other.a, self.keys) == dkey
                    ):
                        e = int(other.b.value)
                        del terms[key], terms[okey]
                        merged = ir.BinOp(ir.Op.FLOORMOD, y, ir.Const(d * e, dtype), dtype)
                        self.add_atom(terms, merged, coef)
                        changed = True
                        break
        return terms

    def linear_of_atom(self, x):
        if isinstance(x, ir.BinOp) and x.op in _LINEAR:
            return self.linear(x)
        return {structural_key(x, self.keys): (x, 1)}, 0

    def rebuild(self, form, dtype):
        terms, const = form
        # a unit-constant atom (from a folded pair) joins the constant
        for key, (atom, coef) in list(terms.items()):
            if isinstance(atom, ir.Const):
                const += coef * int(atom.value)
                del terms[key]
        out = None
        for atom, coef in sorted(terms.values(), key=lambda t: (t[1] < 0,)):
            if out is None:
                out = atom * coef if coef != 1 else atom
            elif coef > 0:
                out = out + (atom * coef if coef != 1 else atom)
            else:
                out = out - (atom * -coef if coef != -1 else atom)
        if out is None:
            return ir.Const(const, dtype) if not isinstance(const, ir.Expr) else const
        if const:
            out = out + ir.Const(const, dtype) if const > 0 else out - ir.Const(-const, dtype)
        return out if out.dtype == dtype else ir.cast(out, dtype)

    # ----------------------------------------------------------------- division

    def split(self, a, c: int):
        """``a`` as ``c * y + r``: (y form, r form) by coefficients divisible by ``c``."""
        terms, const = (
            self.linear(a)
            if isinstance(a, ir.BinOp) and a.op in _LINEAR
            else (
                {structural_key(a, self.keys): (a, 1)},
                0,
            )
        )
        y = {k: (t, coef // c) for k, (t, coef) in terms.items() if coef % c == 0}
        r = {k: (t, coef) for k, (t, coef) in terms.items() if coef % c}
        return (y, const // c), (r, const % c)

    def floordiv(self, a, c: int, dtype):
        if c == 1:
            return a
        if _is_div(a, ir.Op.FLOORDIV):  # (x // a) // c
            return self.floordiv(a.a, a.b.value * c, dtype)
        (y, yc), (r, rc) = self.split(a, c)
        rest = self.rebuild((dict(r), rc), dtype)
        k = _quotient(self.range(rest), c)
        if k is not None:  # rest // c is k for every value rest can take
            return self.rebuild((y, yc + k), dtype)
        if not y and not yc:
            return ir.BinOp(ir.Op.FLOORDIV, rest, ir.Const(c, dtype), dtype)
        quotient = ir.BinOp(ir.Op.FLOORDIV, rest, ir.Const(c, dtype), dtype)
        y = dict(y)
        self.add_atom(y, quotient, 1)
        return self.rebuild((y, yc), dtype)

    def floormod(self, a, c: int, dtype):
        if c == 1:
            return ir.Const(0, dtype)
        if _is_div(a, ir.Op.FLOORMOD) and a.b.value % c == 0:  # (x % a) % c, c | a
            return self.floormod(a.a, c, dtype)
        _, (r, rc) = self.split(a, c)
        rest = self.rebuild((dict(r), rc), dtype)
        k = _quotient(self.range(rest), c)
        if k is not None:  # rest % c is rest - k * c
            return self.rebuild((dict(r), rc - k * c), dtype)
        if isinstance(rest, ir.Const):
            return ir.Const(int(rest.value) % c, dtype)
        return ir.BinOp(ir.Op.FLOORMOD, rest, ir.Const(c, dtype), dtype)

    # ----------------------------------------------------------------- swizzles

    def swizzle(self, x, g):
        """``x ^ g`` as ``H + (L ^ g(L))`` when ``g`` is a swizzle of ``x`` (see the module
        docstring), or None when ``g`` is not one or ``x`` does not split."""
        period = _swizzle_period(x, g, self.keys)
        if period is None:
            return None
        dtype = x.dtype
        terms, const = self.linear_of_atom(x)
        high: dict = {}
        low: dict = {}
        split = False
        for atom, coef in terms.values():
            if coef % period == 0:
                self.add_atom(high, atom, coef)
                continue
            bounds = self.range(atom)
            if bounds is not None and None not in bounds and bounds[0] >= 0 and coef > 0:
                if coef * bounds[1] < period:
                    self.add_atom(low, atom, coef)
                    continue
            q = period // math.gcd(coef, period)
            self.add_atom(high, self.floordiv(atom, q, dtype), coef * q)
            self.add_atom(low, self.floormod(atom, q, dtype), coef)
            split = True
        high_const, low_const = const - const % period, const % period
        if not high and not high_const and not split:
            return None  # nothing to take out: as written
        rest = self.rebuild((low, low_const), dtype)
        if not _within(self.range(rest), period):
            return None
        swizzled = ir.binop(ir.Op.BITXOR, rest, _swizzle_of(g, rest))
        self.add_atom(high, swizzled, 1)
        return self.rebuild((high, high_const), dtype)

    # ----------------------------------------------------------------- ranges

    def range(self, e) -> tuple[int, int] | None:
        try:
            return _bounds(e, self.ranges, self._bounds, _DEPTH)
        except (TooDeep, RecursionError):  # (the latter where the caller is deep already)
            pass
        if self._range is None:
            self._range = _Range(self.ranges)  # no state but the ranges: one per run
        return self._range.visit(e)


_DEPTH = 48  # the levels _bounds recurses before the range visitor takes the expression


def _bounds(e, ranges: dict, memo: dict, depth: int):
    """:class:`_Range`'s answer for ``e`` by direct recursion (the classes it has rules for,
    matched exactly as its rules are), with the bounds of compound nodes remembered in ``memo``
    by id for the simplifier's run: the rules ask for the range of one subtree again and again.
    Raises :class:`TooDeep` past ``depth`` levels."""
    t = type(e)
    if t is ir.BinOp:
        if is_float(e.dtype):
            return None
        known = memo.get(id(e))
        if known is not None and known[0] is e:
            return known[1]
        if depth == 0:
            raise TooDeep
        ra = _bounds(e.a, ranges, memo, depth - 1)
        out = _combine(e, ra, _bounds(e.b, ranges, memo, depth - 1))
        memo[id(e)] = (e, out)
        return out
    if t is ir.Const:
        return None if is_float(e.dtype) else (int(e.value), int(e.value))
    if t is ir.Var:
        return ranges.get(e)
    if t is ir.Special:
        return _special_bounds(e)
    if isinstance(e, ir.Expr):
        return None
    return e, e  # an int, float, bool or None in a child field (the visitor's leaf)


class _Range(Visitor):
    """Inclusive bounds of an integer expression, or None when unknown (an unknown end of a
    thread index's range is None)."""

    pass_name = "the index range analysis"

    def __init__(self, ranges: dict):
        self.ranges = ranges

    def leaf(self, value):
        return value, value

    def enter_Const(self, e):
        return None if is_float(e.dtype) else (int(e.value), int(e.value))

    def enter_Special(self, e):
        return _special_bounds(e)

    def enter_Var(self, e):
        return self.ranges.get(e)

    def enter_BinOp(self, e):
        return None if is_float(e.dtype) else DESCEND

    def leave_BinOp(self, e, ra, rb):
        return _combine(e, ra, rb)

    def _unknown(self, e):
        return None

    def _default(self, cls):
        return (_Range._unknown, None) if issubclass(cls, ir.Expr) else None


def _special_bounds(e):
    if e.kind is ir.Builtin.LANE_ID:
        return 0, 31
    return (0, None) if e.kind is not ir.Builtin.WARP_ID else (0, 31)


def _combine(e, ra, rb):
    """The bounds of integer BinOp ``e`` from those of its operands (None: unknown)."""
    if e.op is ir.Op.FLOORMOD and rb is not None and rb[0] == rb[1] and rb[0] > 0:
        return ra if _within(ra, rb[0]) else (0, rb[0] - 1)
    if ra is None or rb is None or None in ra or None in rb:
        return None
    if e.op is ir.Op.ADD:
        return ra[0] + rb[0], ra[1] + rb[1]
    if e.op is ir.Op.SUB:
        return ra[0] - rb[1], ra[1] - rb[0]
    if e.op is ir.Op.MUL:
        products = [x * y for x in ra for y in rb]
        return min(products), max(products)
    if e.op is ir.Op.FLOORDIV and rb[0] == rb[1] and rb[0] > 0:
        return ra[0] // rb[0], ra[1] // rb[0]
    return None


def _swizzle_period(x, g, keys: dict | None = None) -> int | None:
    """``K`` when ``g`` is ``(x >> a) & mask`` or ``(x & mask) << a`` (constants ``a >= 0``,
    ``mask > 0``, same dtype): ``g`` reads and changes bits of ``x`` below ``K`` only."""
    if not isinstance(g, ir.BinOp) or not isinstance(g.b, ir.Const) or g.dtype != x.dtype:
        return None
    inner, c = g.a, int(g.b.value)
    if not isinstance(inner, ir.BinOp) or not isinstance(inner.b, ir.Const):
        return None
    d = int(inner.b.value)
    if g.op is ir.Op.BITAND and inner.op is ir.Op.SHR:
        shift, mask = d, c
    elif g.op is ir.Op.SHL and inner.op is ir.Op.BITAND:
        shift, mask = c, d
    else:
        return None
    if shift < 0 or mask <= 0:
        return None
    if inner.a is not x and structural_key(inner.a, keys) != structural_key(x, keys):
        return None
    return 1 << (mask << shift).bit_length()


def _swizzle_of(g, value):
    """``g`` (a swizzle of some ``x``, see :func:`_swizzle_period`) applied to ``value``."""
    inner = g.a
    return ir.binop(g.op, ir.binop(inner.op, value, inner.b), g.b)


def _quotient(bounds, c: int) -> int | None:
    """``v // c`` when it is the same for every ``v`` within bounds, else None."""
    if bounds is None or None in bounds or bounds[0] // c != bounds[1] // c:
        return None
    return bounds[0] // c


def _within(bounds, c: int) -> bool:
    """Whether bounds (inclusive, None for unknown ends) lie in ``[0, c)``."""
    return bounds is not None and None not in bounds and 0 <= bounds[0] and bounds[1] < c


def _is_div(e, op) -> bool:
    return (
        isinstance(e, ir.BinOp)
        and e.op is op
        and isinstance(e.b, ir.Const)
        and not is_float(e.dtype)
        and int(e.b.value) > 0
        and e.a.dtype == e.dtype == e.b.dtype
    )
