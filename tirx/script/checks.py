"""Checks the parser applies to values on their way into the IR.

Each check raises a :class:`~tirx.errors.TirxSyntaxError` (the evaluator locates it at the
expression) with a hint that names the fix. They exist so that what one target would reject
late, or silently change, is refused once, at the user's line, for both targets:

* integer literals that fit no 64-bit type (C has no wider integer: they would wrap);
* floats where an integer is needed (shapes, indices, loop bounds: they would truncate);
* ``printf`` formats and argument counts (the simulator and the GPU's printf must agree).
"""

from __future__ import annotations

import re

from ..dtypes import DType
from ..errors import TirxSyntaxError, did_you_mean
from ..ir import nodes as ir

__all__ = [
    "int_literal",
    "literal_for",
    "divisor",
    "shift_count",
    "integer_index",
    "printf_format",
    "unknown_attribute",
]

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


def int_literal(v):
    """``v`` unchanged; a Python int entering kernel code as it is must fit int64, the type a
    wide literal gets (C has no wider integer, so anything beyond would wrap)."""
    if isinstance(v, int) and not isinstance(v, bool) and not INT64_MIN <= v <= INT64_MAX:
        if 0 <= v <= UINT64_MAX:
            hint = f"a bare integer is int64 in kernel code: write T.uint64({_short(v)}) for "
            hint += "an unsigned 64-bit value"
        else:
            hint = "kernel integers are at most 64 bits wide: reduce the constant, or compute "
            hint += "it modulo 2**64 yourself if wrapping is what you want"
        raise TirxSyntaxError(
            f"the integer {_short(v)} does not fit int64"
            + ("" if 0 <= v <= UINT64_MAX else " or any other 64-bit type"),
            hint=hint,
        )
    return v


def literal_for(v, dtype: DType):
    """``v`` unchanged; a literal given to ``T.<dtype>(...)`` must be representable in it."""
    if isinstance(v, int) and not isinstance(v, bool) and dtype.kind in ("int", "uint"):
        lo, hi = (
            (0, 2**dtype.bits - 1)
            if dtype.kind == "uint"
            else (-(2 ** (dtype.bits - 1)), 2 ** (dtype.bits - 1) - 1)
        )
        if not lo <= v <= hi:
            wider = "uint64" if 0 <= v <= UINT64_MAX else "int64"
            raise TirxSyntaxError(
                f"T.{dtype.name}({_short(v)}): the value is outside {dtype.name} [{lo}, {hi}]",
                hint=f"write a value in range, use a wider type such as T.{wider}, or "
                f"T.cast(x, {dtype.name!r}) to wrap a run-time value as C does",
            )
        return v
    return int_literal(v)


def divisor(op: ir.Op, b) -> None:
    """An integer ``//`` or ``%`` by a divisor known to be 0 is refused: the GPU's result is
    undefined (the simulator would stop at run time)."""
    if op in (ir.Op.FLOORDIV, ir.Op.FLOORMOD):
        value = b.value if isinstance(b, ir.Const) else b
        if type(value) in (int, bool) and value == 0:
            raise TirxSyntaxError(
                f"integer {'//' if op is ir.Op.FLOORDIV else '%'} by zero",
                hint="divide by a nonzero value, or guard the division with an if",
            )


def shift_count(op: ir.Op, a, b) -> None:
    """A shift of a kernel value by a count known to be outside ``0 .. width - 1`` is refused:
    C leaves it undefined (the simulator would stop at run time)."""
    if op in (ir.Op.SHL, ir.Op.SHR) and isinstance(a, ir.Expr):
        count = b.value if isinstance(b, ir.Const) else b
        if type(count) is int:
            width = ir.promote(a.dtype, ir.as_expr(count).dtype).bits
            if not 0 <= count < width:
                raise TirxSyntaxError(
                    f"shift count {count} is outside 0..{width - 1} for a {width}-bit value",
                    hint=f"shift by 0 to {width - 1}, or widen the value first, e.g. "
                    "T.int64(x) << 40",
                )


def integer_index(v, what: str):
    """``v`` unchanged when it is an integer (Python or kernel value); floats are refused."""
    if isinstance(v, float) or (isinstance(v, ir.Expr) and v.dtype.kind == "float"):
        raise TirxSyntaxError(
            f"{what} must be an integer, got a float"
            + (f" ({v!r})" if isinstance(v, float) else f" ({v.dtype})"),
            hint="convert it explicitly, e.g. T.int32(x) (truncates toward zero) or int(...) "
            "for a compile-time value",
        )
    return int_literal(v)


def _short(v: int) -> str:
    text = str(v)
    return text if len(text) <= 24 else f"{text[:10]}...({len(text)} digits)"


# printf: C's conversion grammar, restricted to what both targets can print.
_CONVERSION = re.compile(
    r"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d*))?"
    r"(?P<length>hh|h|ll|l|j|z|t|L)?(?P<conv>.?)"
)
_INT_CONVS, _FLOAT_CONVS = "diouxXc", "eEfFgGaA"


def printf_format(fmt: str, args: tuple) -> None:
    """Check a ``T.cuda.printf`` format against its arguments (count and kind of each).

    Kernel values have no strings or pointers, so ``%s``, ``%p`` and ``%n`` are refused; every
    conversion (and each ``*`` width or precision) takes one argument; integer conversions take
    integer values and floating conversions float values (C's printf reads the bits as the
    conversion says, so a mismatch prints garbage on the GPU)."""
    wanted: list[tuple[str, str]] = []  # (conversion text, "int" | "float")
    pos = 0
    while True:
        i = fmt.find("%", pos)
        if i < 0:
            break
        m = _CONVERSION.match(fmt, i)
        pos = m.end()
        conv, text = m.group("conv"), m.group(0)
        if conv == "%" and text == "%%":
            continue
        if conv in ("s", "p", "n", "S", "C"):
            raise TirxSyntaxError(
                f"printf: {text!r} prints a string or pointer; kernel values are numbers",
                hint="put fixed text in the format itself; print numbers with %d, %u, %x or %f",
            )
        if not conv or conv not in _INT_CONVS + _FLOAT_CONVS:
            raise TirxSyntaxError(
                f"printf: {text!r} is not a conversion tirx can print",
                hint="use one of %d %i %u %o %x %X %c %e %f %g %a (write %% for a percent sign)",
            )
        for part in (m.group("width"), m.group("prec")):
            if part == "*":
                wanted.append((text, "int"))
        wanted.append((text, "int" if conv in _INT_CONVS else "float"))
    if len(args) != len(wanted):
        raise TirxSyntaxError(
            f"printf: the format {fmt!r} takes {len(wanted)} value"
            f"{'' if len(wanted) == 1 else 's'}, got {len(args)}",
            hint="give one value per conversion (and per * width or precision), in order",
        )
    for n, ((text, kind), a) in enumerate(zip(wanted, args), 1):
        got = "float" if a.dtype.kind == "float" else "int"
        if got != kind:
            fix = "%f or %g" if got == "float" else "%d, %u or %x"
            cast = "T.int32(x)" if kind == "int" else "T.float32(x)"
            raise TirxSyntaxError(
                f"printf: {text!r} (value {n}) prints {'an integer' if kind == 'int' else 'a float'}"
                f", got a {a.dtype} value",
                hint=f"use {fix} for it, or convert it with {cast}",
            )


def unknown_attribute(base, attr: str, what: str, place: str | None = None) -> TirxSyntaxError:
    """The error for ``base.attr`` that does not exist, naming the closest public names
    (spelt ``place.name`` when the base has a place, such as ``T.cuda``)."""
    names = [n for n in dir(base) if not n.startswith("_")]
    names += [n for n in dir(base) if n.startswith("__") and not n.endswith("__")]  # __shfl_sync
    hint = did_you_mean(attr, names, f"{place}." if place else "")
    return TirxSyntaxError(f"{what} has no attribute {attr!r}", hint=hint)


# A loop's step is a compile-time constant; a persistent kernel's stride over tiles (the grid's
# size, known at launch) is written as a count of the block's tiles instead.
STEP_HINT = (
    "for a stride known only at run time, loop over a count and compute the index: "
    "for i in range(T.ceildiv(stop - start, step)): t = start + i * step (as docs/persistent.md "
    "walks a block's tiles)"
)
