"""The values of the register-only float instructions, written from the PTX ISA (9.7.3,
"Floating Point Instructions": min 9.7.3.11, max 9.7.3.12, rcp 9.7.3.13, rsqrt 9.7.3.16,
sin 9.7.3.18, cos 9.7.3.19, lg2 9.7.3.20, ex2 9.7.3.21, tanh 9.7.3.22), on float32 arrays.

**max, min: exact.** Without ``.NaN`` a NaN operand loses to the other one ("else if
(isNaN(x)) z = y"); both NaN give NaN. With ``.NaN`` any NaN operand gives "canonical NaN".
Two zeros are ordered ``-0 < +0`` ("If values of both inputs are 0.0, then +0.0 > -0.0"),
whichever operand holds which. ``.ftz`` flushes subnormal operands to zero of the same sign
first. A NaN result is the canonical NaN, ``0x7fffffff``.

**The .approx functions: within the ISA's bound.** The hardware's approximations are not
bit-exact with anything a simulator can compute, so each function is computed in float64 and
rounded once to float32 (the correctly rounded result, but for float64's own last bit), with
``.ftz`` flushing subnormal inputs and results to zero of the same sign, and the ISA's table of
special values (:data:`SPECIAL`) deciding ±0, ±inf, NaN and the negative inputs outside a
function's domain. :data:`BOUNDS` records the ISA's maximum error of each function, which the
GPU tests compare within (:func:`within_bound`). This module reads no contract of tirx.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...sim.numeric import canonical_nan, flush, min_max_choice

__all__ = [
    "flush", "approx", "minmax", "SPECIAL", "ErrorBound", "BOUNDS",
    "within_bound", "ulp_distance",
]  # fmt: skip

F32, F64, U32 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.uint32)
INF = float("inf")
NAN = float("nan")


# ----------------------------------------------------------------------------- max, min


def minmax(op: str, a: np.ndarray, b: np.ndarray, ftz: bool, nan: bool) -> np.ndarray:
    """``max``/``min{.ftz}{.NaN}.f32 d, a, b`` on float32 arrays (PTX ISA 9.7.3.11-12)."""
    a, b = np.asarray(a, dtype=F32), np.asarray(b, dtype=F32)
    a, b = np.broadcast_arrays(flush(a) if ftz else a, flush(b) if ftz else b)
    take_a, both_nan = min_max_choice(op, a, b)  # a NaN operand loses to a number
    out = np.where(take_a, a, b)
    out = np.where(np.isnan(a) | np.isnan(b) if nan else both_nan, NAN, out)
    return canonical_nan(out.astype(F32))


# ------------------------------------------------------------------- .approx functions

#: Each function's results for the inputs its ISA table lists, by the input's class:
#: "+0", "-0", "+inf", "-inf", "nan", and "negative" (finite, below zero: outside the domain
#: of lg2 and rsqrt). Other inputs are computed (:data:`_REAL`).
SPECIAL: dict[str, dict[str, float]] = {
    "ex2": {"-inf": 0.0, "-0": 1.0, "+0": 1.0, "+inf": INF, "nan": NAN},  # 9.7.3.21
    "lg2": {"-inf": NAN, "negative": NAN, "-0": -INF, "+0": -INF, "+inf": INF, "nan": NAN},
    "sin": {"-inf": NAN, "-0": -0.0, "+0": 0.0, "+inf": NAN, "nan": NAN},  # 9.7.3.18
    "cos": {"-inf": NAN, "-0": 1.0, "+0": 1.0, "+inf": NAN, "nan": NAN},  # 9.7.3.19
    "tanh": {"-inf": -1.0, "-0": -0.0, "+0": 0.0, "+inf": 1.0, "nan": NAN},  # 9.7.3.22
    "rcp": {"-inf": -0.0, "-0": -INF, "+0": INF, "+inf": 0.0, "nan": NAN},  # 9.7.3.13
    "rsqrt": {"-inf": NAN, "negative": NAN, "-0": -INF, "+0": INF, "+inf": 0.0, "nan": NAN},
}

# Each function on the other inputs (finite, nonzero, inside its domain), in float64.
_REAL: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ex2": np.exp2,
    "lg2": np.log2,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "rcp": lambda x: 1.0 / x,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
}


def _classes(x: np.ndarray) -> dict[str, np.ndarray]:
    neg = np.signbit(x)
    zero, inf = x == 0, np.isinf(x)
    return {
        "+0": zero & ~neg,
        "-0": zero & neg,
        "+inf": inf & ~neg,
        "-inf": inf & neg,
        "nan": np.isnan(x),
        "negative": neg & np.isfinite(x) & ~zero,
    }


def approx(op: str, a: np.ndarray, ftz: bool) -> np.ndarray:
    """``op.approx{.ftz}.f32 d, a`` on a float32 array: the float64 value rounded once to
    float32, the special values of :data:`SPECIAL`, ``.ftz`` on the input and the result."""
    x = np.asarray(a, dtype=F32)
    if ftz:
        x = flush(x)
    table = SPECIAL[op]
    special = np.zeros(x.shape, dtype=bool)
    out = np.empty(x.shape, dtype=F64)
    for cls, mask in _classes(x).items():
        if cls in table:
            out[mask] = table[cls]
            special |= mask
    with np.errstate(all="ignore"):
        out = np.where(special, out, _REAL[op](x.astype(F64)))
    y = out.astype(F32)  # one rounding, to nearest even
    if ftz:
        y = flush(y)
    return canonical_nan(y)


# ------------------------------------------------------------------------------ bounds


@dataclass(frozen=True)
class ErrorBound:
    """The ISA's maximum error of one ``.approx`` function, by the input ``x`` (after
    ``.ftz``): ``ulps`` float32 steps from the correctly rounded result; or, where ``x`` lies
    in one of ``absolute``'s closed ranges ``(lo, hi, error)`` (the first that holds it), that
    absolute error; else ``relative`` times the exact value; else (0 everywhere) no bound."""

    section: str
    ulps: int = 0
    relative: float = 0.0
    absolute: tuple[tuple[float, float, float], ...] = ()


_PI = float(np.pi)
#: The maximum errors of PTX ISA 9.7.3 (its notes under each function).
BOUNDS: dict[str, ErrorBound] = {
    "ex2": ErrorBound("9.7.3.21", ulps=2),  # "2 ulp from correctly rounded result"
    "lg2": ErrorBound("9.7.3.20", relative=2**-22, absolute=((0.5, 2.0, 2**-22),)),
    "sin": ErrorBound(
        "9.7.3.18", absolute=((-2 * _PI, 2 * _PI, 2**-20.5), (-100 * _PI, 100 * _PI, 2**-14.7))
    ),
    "cos": ErrorBound(
        "9.7.3.19", absolute=((-2 * _PI, 2 * _PI, 2**-20.5), (-100 * _PI, 100 * _PI, 2**-14.7))
    ),
    "tanh": ErrorBound("9.7.3.22", relative=2**-11),
    "rcp": ErrorBound("9.7.3.13", ulps=1),  # "The maximum ulp error is 1"
    "rsqrt": ErrorBound("9.7.3.16", relative=2**-22.9),
}


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 steps between ``a`` and ``b`` (±0 coincide; 0 when both are NaN, inf when one
    is)."""
    ia = np.asarray(a, dtype=F32).view(np.int32).astype(np.int64)
    ib = np.asarray(b, dtype=F32).view(np.int32).astype(np.int64)
    top = np.int64(-(2**31))
    oa, ob = np.where(ia < 0, top - ia, ia), np.where(ib < 0, top - ib, ib)
    dist = np.abs(oa - ob).astype(F64)
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    return np.where(a_nan & b_nan, 0.0, np.where(a_nan | b_nan, INF, dist))


def within_bound(op: str, a: np.ndarray, got: np.ndarray, model: np.ndarray, ftz: bool):
    """Whether each result ``got`` of ``op.approx{.ftz}.f32`` at input ``a`` is within the ISA's
    bound of ``model`` (this module's :func:`approx`: the correctly rounded value, half a step
    from exact, so one step of ``model`` is allowed on top of a relative or absolute bound).
    A NaN must meet a NaN and an infinity the same infinity; an input outside every range of
    the bound (``sin`` beyond ±100π) is not compared."""
    bound = BOUNDS[op]
    x = np.asarray(a, dtype=F32)
    x = flush(x) if ftz else x
    got, model = np.asarray(got, dtype=F32), np.asarray(model, dtype=F32)
    if bound.ulps:
        return ulp_distance(got, model) <= bound.ulps
    x64, g64, m64 = x.astype(F64), got.astype(F64), model.astype(F64)
    step = np.spacing(np.abs(model)).astype(F64)
    allowed = np.full(x.shape, bound.relative * np.abs(m64) if bound.relative else INF)
    for lo, hi, err in reversed(bound.absolute):  # the first range that holds x wins
        allowed = np.where((x64 >= lo) & (x64 <= hi), err, allowed)
    with np.errstate(invalid="ignore"):
        close = np.abs(g64 - m64) <= allowed + step
    both_nan = np.isnan(got) & np.isnan(model)
    same_inf = np.isinf(model) & (got == model)
    finite = np.isfinite(model) & np.isfinite(got)
    return both_nan | same_inf | (finite & close)
