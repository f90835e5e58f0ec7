"""The ``wgmma.mma_async`` forms the simulator runs, read from the PTX ISA (9.7.15.5.2, the
syntax lines of wgmma.mma_async, and 9.7.15.2, "Matrix Shape") independently of tirx's
contract tables.

Syntax, per input type (``d`` the accumulator; ss: ``a-desc``; rs: ``a``, four .b32 registers)::

    .f16:      m64nNk16.{f32,f16}.f16.f16    ss: scale-d, scale-a, scale-b, trans-a, trans-b
                                             rs: scale-d, scale-a, scale-b, trans-b
    .bf16:     m64nNk16.f32.bf16.bf16        as .f16
    .tf32:     m64nNk8.f32.tf32.tf32         scale-d, scale-a, scale-b
    fp8:       m64nNk32.{f32,f16}.{e4m3,e5m2}.{e4m3,e5m2}   scale-d, scale-a, scale-b
    integer:   m64nNk32{.satfinite}.s32.{s8,u8}.{s8,u8}     scale-d

N is a multiple of 8 from 8 to 256, for the integer types 8, 16, 24 or a multiple of 16 from
32 to 256.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MmaAsync", "parse_mma_async", "ELEMENT_BYTES", "WARPGROUP", "ROWS"]

WARPGROUP = 128  # threads: four consecutive warps, the first a multiple of 4
ROWS = 64  # M of every wgmma shape
ELEMENT_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}
_RE = re.compile(
    r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k(\d+)(\.satfinite)?\.(f32|f16|s32)\.(\w+)\.(\w+)"
)
# (A/B types, A == B required, K, accumulators)
_TYPES = (
    (("f16",), True, 16, ("f32", "f16")),
    (("bf16",), True, 16, ("f32",)),
    (("tf32",), True, 8, ("f32",)),
    (("e4m3", "e5m2"), False, 32, ("f32", "f16")),
    (("s8", "u8"), False, 32, ("s32",)),
)


@dataclass(frozen=True)
class MmaAsync:
    """One wgmma.mma_async form: D (64xN) = A (64xK) * B (KxN) (+ D)."""

    n: int
    k: int
    a: str  # A's element type ("f16", "e4m3", "s8", ...)
    b: str
    acc: str  # "f32", "f16" or "s32"
    satfinite: bool = False

    @property
    def element(self) -> str:
        """A's element type (kept for the single-type lines)."""
        return self.a

    @property
    def integer(self) -> bool:
        return self.acc == "s32"

    @property
    def registers(self) -> int:
        """Accumulator registers per thread: N/2 32-bit ones, or N/4 .f16x2 words."""
        return self.n // 4 if self.acc == "f16" else self.n // 2

    @property
    def transposable(self) -> bool:
        """Whether the form has imm-trans operands (16-bit types: MN-major shared operands)."""
        return self.k == 16

    def immediates(self, registers_a: bool) -> tuple[str, ...]:
        """The names of the immediate operands after scale-d, in order."""
        out = () if self.integer else ("imm-scale-a", "imm-scale-b")
        if self.transposable:
            out += ("imm-trans-b",) if registers_a else ("imm-trans-a", "imm-trans-b")
        return out


def parse_mma_async(text: str) -> MmaAsync | None:
    """The form ``text`` names, or None when it is not one the simulator implements."""
    m = _RE.fullmatch(text)
    if m is None:
        return None
    n, k = int(m.group(1)), int(m.group(2))
    sat, acc, a, b = m.group(3) is not None, m.group(4), m.group(5), m.group(6)
    for types, same, kk, accs in _TYPES:
        if a in types and b in types and k == kk and acc in accs and (a == b or not same):
            integer = acc == "s32"
            if sat and not integer:
                return None
            if integer:
                ok_n = n in (8, 16, 24) or (n % 16 == 0 and 32 <= n <= 256)
            else:
                ok_n = n % 8 == 0 and 8 <= n <= 256
            return MmaAsync(n, k, a, b, acc, sat) if ok_n else None
    return None
