"""The simulator's float32/float16 pair conversions, written from CUDA's definitions of the
real TIRx's helpers (its ``void*`` arguments cast to ``float2*`` and ``half2*``):

* ``float22half2(dst, src)``: ``*(half2*)dst = __float22half2_rn(*(float2*)src)``: one
  ``float2`` (8 bytes: ``x`` at the lower address, then ``y``) is read, each float32 rounded to
  float16 to nearest even (CUDA Math API, "__float22half2_rn": "converts both components of
  float2 number to half precision in round-to-nearest-even mode"; PTX ``cvt.rn.f16x2.f32``),
  and one ``half2`` (4 bytes, ``x``'s half at the lower address) is written.
* ``half8tofloat8(src, dst)``: four times, pair ``i`` = 0..3 in order: the ``half2`` at
  ``src + 4 i`` is read and the ``float2`` of its two exact float32 values (``__half22float2``,
  PTX ``cvt.f32.f16``) written at ``dst + 8 i``.
* ``float8tohalf8(src, dst)``: four times: the ``float2`` at ``src + 8 i`` is read and its
  rounded ``half2`` written at ``dst + 4 i``.

The bits: a float32 beyond float16's range rounds to ±inf (65520 and above; 65504 is the
largest finite half), below its smallest subnormal half-way (2**-25) to ±0, subnormal halves are
kept (no flush; nor are subnormal float32 inputs flushed before rounding); a NaN becomes the
canonical ``0x7fff`` whatever its sign and payload, and a float16 NaN becomes float32's
canonical ``0x7fffffff`` (docs/simulator.md, "NaN bits": what ``cvt.rn.f16.f32`` and
``cvt.f32.f16`` give on the GPU; the numeric helpers of :mod:`tirx.sim.numeric`).

Memory, by C's rules for a ``float2``/``half2`` access: each access must start at a multiple of
its size (8, 4) and lie inside its buffer (a global tensor, a shared allocation or the thread's
own local array), else the thread faults, at the call's line. Shared accesses are reads and
writes like any other (initialized bytes, races, pending asynchronous copies); a global
tensor's data pointer must be a multiple of its accesses' size, checked when the statement is
built (tirx/ir/aligned_access.py, what the launcher refuses too). The eight-element forms read
and write pair by pair, so where their source and destination bytes overlap the C's result
depends on how the compiler orders the accesses: a fault. ``float22half2`` reads before it
writes: its destination may overlap its source.
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...sim.faults import Fault
from ...sim.memory import as_index, first
from ...sim.numeric import f32_to_half, half_to_f32
from ...sim.pointer_alignment import check_pointer
from .nodes import HalfConversion

__all__ = ["compile_HalfConversion"]

_LOW32 = np.uint64(0xFFFFFFFF)


def _half2_of_float2(bits: np.ndarray) -> np.ndarray:
    """``__float22half2_rn`` of float2s (uint64 bits, ``x`` the low word): half2 words
    (uint32, ``x``'s half the low half)."""
    x = (bits & _LOW32).astype(np.uint32).view(np.float32)
    y = (bits >> np.uint64(32)).astype(np.uint32).view(np.float32)
    hx = f32_to_half(x).view(np.uint16).astype(np.uint32)
    hy = f32_to_half(y).view(np.uint16).astype(np.uint32)
    return hx | (hy << np.uint32(16))


def _float2_of_half2(words: np.ndarray) -> np.ndarray:
    """``__half22float2`` of half2 words (uint32): float2s as uint64 bits."""
    lo = (words & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)
    hi = (words >> np.uint32(16)).astype(np.uint16).view(np.float16)
    x = half_to_f32(lo).astype(np.float32).view(np.uint32).astype(np.uint64)
    y = half_to_f32(hi).astype(np.float32).view(np.uint32).astype(np.uint64)
    return x | (y << np.uint64(32))


_ACCESS = {8: ("float2", ir.U64), 4: ("half2", ir.U32)}


class _Side:
    """One operand: its buffer, its region of the machine, its byte offsets' evaluator and
    the size of its accesses."""

    def __init__(self, machine, buf: ir.Buffer, at, size: int, role: str, call: str):
        self.buf, self.size, self.role, self.call = buf, size, role, call
        self.region = machine.region(buf, machine.compiler)
        self.offset = machine.compiler.compile(at[0])
        self.pair, self.dtype = _ACCESS[size]

    def where(self) -> str:
        return f"{self.buf.scope.value} '{self.buf.name}'"

    def check(self, off: np.ndarray, tids: np.ndarray, verb: str) -> None:
        """Fault on the first thread whose access at byte ``off`` is misaligned or leaves the
        buffer."""
        size, what = self.size, f"T.cuda.{self.call} {verb} a {self.pair}"
        bad = off % size != 0
        if bad.any():
            k = first(bad)
            raise Fault(
                f"misaligned {self.role}: {what} ({size} bytes) at byte {off[k]} of "
                f"{self.where()}, which is not a multiple of {size}",
                tids[k],
                f"a {self.pair} access starts at a multiple of {size} bytes: pass the address "
                f"of an element at such an offset (an even element of a "
                f"{'float32' if size == 8 else 'float16'} tensor)",
            )
        bad = (off < 0) | (off > self.buf.nbytes - size)
        if bad.any():
            k = first(bad)
            raise Fault(
                f"out-of-bounds {self.role}: {what} at bytes {off[k]}..{off[k] + size - 1} of "
                f"{self.where()}, which holds {self.buf.nbytes} bytes",
                tids[k],
                "the address must leave room for every pair the call converts",
            )

    def read(self, off: np.ndarray, tids: np.ndarray) -> np.ndarray:
        self.check(off, tids, "reads")
        index = off // self.size
        if self.buf.scope is ir.Scope.LOCAL:
            return self.region.load(index, self.dtype, tids, tids)
        return self.region.load(index, self.dtype, tids)

    def write(self, off: np.ndarray, bits: np.ndarray, tids: np.ndarray) -> None:
        self.check(off, tids, "writes")
        index = off // self.size
        if self.buf.scope is ir.Scope.LOCAL:
            self.region.store(index, bits, self.dtype, tids, tids)
        else:
            self.region.store(index, bits, self.dtype, tids)


def compile_HalfConversion(machine, s: HalfConversion):
    """The machine's closure for one lowered :class:`.nodes.HalfConversion`."""
    call = str(s.kind)
    kind = s.kind
    pairs, src_size, dst_size = kind.pairs, kind.src_bytes, kind.dst_bytes
    convert = _half2_of_float2 if kind.float_source else _float2_of_half2
    for access in s.aligned_accesses():  # a global tensor's data pointer, reached or not
        check_pointer(access, machine.regions[access.buffer].address)
    src = _Side(machine, s.src, s.src_at, src_size, "source", call)
    dst = _Side(machine, s.dst, s.dst_at, dst_size, "destination", call)
    same = s.src is s.dst and pairs > 1
    span, m = s.span, machine

    def run(idx):
        m.span = span
        n = idx.size
        so = np.broadcast_to(as_index(src.offset(idx), n), (n,))
        do = np.broadcast_to(as_index(dst.offset(idx), n), (n,))
        if same:
            _check_overlap(call, s.src, so, pairs * src_size, do, pairs * dst_size, idx)
        for i in range(pairs):
            bits = src.read(so + i * src_size, idx)
            dst.write(do + i * dst_size, convert(np.asarray(bits)), idx)
        return idx

    return run


def _check_overlap(call, buf, so, sn: int, do, dn: int, tids) -> None:
    bad = (so < do + dn) & (do < so + sn)
    if bad.any():
        k = first(bad)
        raise Fault(
            f"T.cuda.{call}'s source (bytes {so[k]}..{so[k] + sn - 1}) and destination (bytes "
            f"{do[k]}..{do[k] + dn - 1}) overlap in {buf.scope.value} '{buf.name}'",
            tids[k],
            "the C converts pair by pair through pointers the compiler takes as distinct, so "
            "the result would depend on its order: convert into other storage",
        )
