"""C ``printf`` formatting for ``T.cuda.printf``, one line per active thread.

Supported conversions: ``d i u o x X c e E f F g G a A %`` with flags ``-+ #0``, a width and
a precision (numbers or ``*``) and the length modifiers ``hh h l ll j z t L`` (accepted;
unsigned conversions wrap a negative argument at the argument's width, 64-bit when the
modifier or the argument's dtype says so). ``%s``/``%p``/``%n`` have no meaning for
simulator values and are rejected when the kernel is prepared.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["PrintfFormat", "parse_format"]

_SPEC = re.compile(
    r"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d*))?"
    r"(?P<length>hh|h|ll|l|j|z|t|L)?(?P<conv>[diouxXcSeEfFgGaAspn%])"
)


@dataclass(frozen=True)
class _Conv:
    flags: str
    width: str | None
    prec: str | None
    wide: bool  # 64-bit length modifier
    conv: str


def _hex_float(x: float, prec: str | None, upper: bool) -> str:
    if math.isnan(x) or math.isinf(x):
        text = "nan" if math.isnan(x) else ("-inf" if x < 0 else "inf")
    elif x == 0:
        text = ("-" if math.copysign(1, x) < 0 else "") + "0x0p+0"
    else:
        h = float(x).hex()  # like -0x1.8000000000000p+1
        sign = "-" if h.startswith("-") else ""
        mant, exp = h.lstrip("-")[2:].split("p")
        head, _, frac = mant.partition(".")
        frac = (
            frac.rstrip("0") if prec is None else frac[: int(prec or 0)].ljust(int(prec or 0), "0")
        )
        text = f"{sign}0x{head}{'.' + frac if frac else ''}p{int(exp):+d}"
    return text.upper() if upper else text


class PrintfFormat:
    """A parsed format: call :meth:`render` with one tuple of Python values per line."""

    def __init__(self, pieces: list, n_args: int):
        self.pieces = pieces
        self.n_args = n_args

    def render(self, args: tuple, bits: tuple[int, ...]) -> str:
        out = []
        it = iter(zip(args, bits))
        for piece in self.pieces:
            if isinstance(piece, str):
                out.append(piece)
                continue
            width = piece.width
            if width == "*":
                width = str(int(next(it)[0]))
            prec = piece.prec
            if prec == "*":
                prec = str(int(next(it)[0]))
            value, nbits = next(it)
            out.append(self._one(piece, width, prec, value, nbits))
        return "".join(out)

    @staticmethod
    def _one(p: _Conv, width, prec, value, nbits: int) -> str:
        flags = p.flags
        if width is not None and width.startswith("-"):
            flags, width = flags + "-", width[1:]
        conv = p.conv
        v = 0
        if conv in "uoxX":
            v = int(value)
            if v < 0:
                v &= (1 << (64 if p.wide or nbits > 32 else 32)) - 1
            if conv in "xX" and v == 0:
                flags = flags.replace("#", "")  # C prints no 0x prefix for zero
            if conv == "o" and "#" in flags:
                # C's "#o" forces a leading 0 digit; Python's would print "0o".
                flags = flags.replace("#", "")
                digits = len(f"{v:o}")
                if v and int(prec or 0) <= digits:
                    prec = str(digits + 1)
        spec = "%" + flags + (width or "") + ("" if prec is None else "." + (prec or "0"))
        if conv in "di":
            return (spec + "d") % int(value)
        if conv in "uoxX":
            return (spec + ("d" if conv == "u" else conv)) % v
        if conv == "c":
            return (spec + "c") % chr(int(value) & 0xFF)
        if conv in "aA":
            text = _hex_float(float(value), prec, conv == "A")
            w = int(width or 0)
            return text.ljust(w) if "-" in flags else text.rjust(w)
        return (spec + conv) % float(value)


def parse_format(fmt: str) -> PrintfFormat:
    """Parse a C format; raises ``ValueError`` with a readable message when unsupported."""
    pieces: list = []
    pos = 0
    n_args = 0
    while True:
        i = fmt.find("%", pos)
        if i < 0:
            pieces.append(fmt[pos:])
            break
        pieces.append(fmt[pos:i])
        m = _SPEC.match(fmt, i)
        if m is None:
            raise ValueError(f"printf: cannot parse the conversion at {fmt[i : i + 6]!r}")
        pos = m.end()
        conv = m.group("conv")
        if conv == "%":
            pieces.append("%")
            continue
        if conv in "spnS":
            raise ValueError(f"printf: %{conv} is not supported by the simulator")
        c = _Conv(
            m.group("flags"),
            m.group("width"),
            m.group("prec"),
            m.group("length") in ("ll", "l", "j", "z", "t"),
            conv,
        )
        n_args += 1 + (c.width == "*") + (c.prec == "*")
        pieces.append(c)
    return PrintfFormat([p for p in pieces if p != ""], n_args)
