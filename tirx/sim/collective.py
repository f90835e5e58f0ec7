"""``PtxCall`` execution: gather a batch of whole warps' registers and addresses, apply the
instruction (:mod:`tirx.sim.ptx`), scatter the results, and record traces.

Operand conventions (PTX order, from the lowered IR):

* ldmatrix ``(RegVector out ×num, AddressOperand)``; stmatrix ``(AddressOperand, RegVector in
  ×num)``; mma ``(D out, A in, B in, C in)`` with the register counts of
  :meth:`tirx.sim.mma.Mma.regs` (D and C: 4 for f32/s32, 2 for f16x2).
* Every register is 32 bits. A ``LocalReg`` names slot ``slot`` (in units of its dtype) of a
  local buffer; its bits are used as they are (a float32 slot used as a b32 operand passes
  its bit pattern). A ``ValueReg`` is converted like a C assignment to the operand's register
  type (:class:`RegType`): to float32 for an f32 C, to int32 for an s32 C, and for a b32
  operand (A, B, an f16x2 C) a 32-bit value passes its bits while another width is converted
  to uint32.
* ``cp.async`` instructions are executed by :mod:`tirx.sim.asynccopy`.
"""

from __future__ import annotations

import enum

import numpy as np

from ..errors import SimulationError
from ..ir import nodes as ir
from ..ir.visitor import load_attribute
from .faults import Fault
from .memory import as_index
from .mma import Element
from .numeric import convert, storage_type
from .ptx import (
    LdMatrix,
    Mma,
    ldmatrix_registers,
    mma_compute,
    parse_instruction,
    stmatrix_rows,
)
from .trace import PtxTrace, RegisterTrace, as_float

__all__ = ["compile_ptx"]

_SUPPORTED = (
    "ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16, "
    "stmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16, "
    "mma.sync.aligned.m16n8k{8,16}.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (same A and B type), "
    "mma.sync.aligned.m16n8k{8,16}.row.col.f16.f16.f16.f16, "
    "mma.sync.aligned.m16n8k{4,8}.row.col.f32.tf32.tf32.f32, "
    "mma.sync.aligned.m16n8k{16,32}.row.col[.satfinite].s32.{s8,u8}.{s8,u8}.s32, "
    "cp.async.{ca,cg}.shared.global, cp.async.commit_group, cp.async.wait_group, "
    "cp.async.wait_all, cp.async.bulk.global.shared::cta.bulk_group, "
    "cp.async.bulk.commit_group, cp.async.bulk.wait_group[.read], "
    "fence.proxy.async[.global|.shared::cta], "
    "mbarrier.{init,arrive[.expect_tx],expect_tx,test_wait.parity,try_wait.parity,inval}"
    "[.release.cta|.acquire.cta|.relaxed.cta].shared[::cta].b64, "
    "cp.async.mbarrier.arrive[.noinc].shared[::cta].b64, fence.mbarrier_init.release.cluster"
)


class RegType(enum.Enum):
    """The PTX type of a 32-bit register operand, which decides how a value converts to it."""

    F32 = "float32"
    S32 = "int32"
    B32 = "uint32"


_ACCUMULATOR = {Element.F32: RegType.F32, Element.S32: RegType.S32, Element.F16: RegType.B32}


class _Register:
    """Reads or writes one 32-bit register operand for a batch of threads."""

    def __init__(self, machine, compiler, reg, kind: RegType, is_output: bool):
        self.reg = reg
        if isinstance(reg, ir.LocalReg):
            if reg.buffer.scope is not ir.Scope.LOCAL:
                raise compiler.error(
                    f"register operand names '{reg.buffer.name}', which is not a local buffer"
                )
            if reg.dtype.bits != 32:
                raise compiler.error(
                    f"register operand {reg.buffer.name}[{reg.slot}] is {reg.dtype}; this "
                    f"instruction's registers are 32-bit"
                )
            self.array = machine.region(reg.buffer, compiler)
            self.dtype = reg.dtype
            self.storage = storage_type(reg.dtype)
            self.is_f32 = reg.dtype.name == "float32"
            self.type_name = reg.dtype.name
            self.source = f"{reg.buffer.name}[{reg.slot}]"
            return
        if is_output or not isinstance(reg, ir.ValueReg):
            raise compiler.error("an output register must be a slot of a local buffer")
        f = compiler.compile(reg.value)
        d = reg.value.dtype
        if kind is not RegType.B32:
            to = ir.dtype_of(kind.value)
            self.value = lambda idx: np.asarray(convert(f(idx), to)).view(np.uint32)
        elif d.bits == 32 and d.kind != "bool":
            self.value = lambda idx: np.asarray(f(idx)).view(np.uint32)
        else:
            u32 = ir.U32
            self.value = lambda idx: np.asarray(convert(f(idx), u32))
        self.array = None
        self.is_f32 = kind is RegType.F32
        self.type_name = kind.value  # the operand's PTX type
        self.source = "value"

    def read(self, idx: np.ndarray) -> np.ndarray:
        n = idx.size
        if self.array is None:
            return np.broadcast_to(self.value(idx), (n,)).astype(np.uint32)
        slot = as_index(self.reg.slot, n)
        return self.array.load(slot, self.dtype, idx, idx).view(np.uint32)

    def peek(self, idx: np.ndarray) -> np.ndarray:
        if self.array is None:
            return self.read(idx)
        slot = self.reg.slot
        if slot < 0 or (slot + 1) * 4 > self.array.nbytes:
            return np.zeros(idx.size, dtype=np.uint32)
        return self.array.peek(slot, self.storage, idx).view(np.uint32)

    def write(self, idx: np.ndarray, bits: np.ndarray) -> None:
        slot = as_index(self.reg.slot, idx.size)
        self.array.store(slot, bits.view(self.storage), self.dtype, idx, idx)


class _Vector:
    def __init__(self, machine, compiler, operand, role: str, n: int, output: bool, kind):
        if not isinstance(operand, ir.RegVector) or operand.is_output != output:
            kind = "output" if output else "input"
            raise compiler.error(f"operand '{role}' must be an {kind} register vector")
        if len(operand.regs) != n:
            raise compiler.error(
                f"operand '{role}' has {len(operand.regs)} registers; the instruction uses {n}"
            )
        self.role = role
        self.output = output
        self.regs = [_Register(machine, compiler, r, kind, output) for r in operand.regs]

    def read(self, idx: np.ndarray, w: int) -> np.ndarray:
        return np.stack([r.read(idx) for r in self.regs], axis=-1).reshape(w, 32, -1)

    def peek(self, idx: np.ndarray, w: int) -> np.ndarray:
        return np.stack([r.peek(idx) for r in self.regs], axis=-1).reshape(w, 32, -1)

    def write(self, idx: np.ndarray, values: np.ndarray) -> None:
        flat = values.reshape(idx.size, -1)
        for i, r in enumerate(self.regs):
            r.write(idx, np.ascontiguousarray(flat[:, i]))


def _full_warps(m, idx: np.ndarray, text: str) -> np.ndarray:
    """The warps executing (all 32 lanes each), or a fault naming a missing lane."""
    warps = idx >> 5
    if idx.size % 32 == 0 and idx.size and (warps.reshape(-1, 32) == warps[::32, None]).all():
        return warps[::32]
    counts = np.bincount(warps, minlength=m.nwarps)
    for w in np.flatnonzero(counts):
        if counts[w] == 32:
            continue
        size = min(32, m.T - 32 * w)
        if size < 32:
            raise Fault(
                f"warp-collective {text} in warp {w}, which has only {size} threads (the block "
                f"size {m.T} is not a multiple of 32)",
                32 * w,
            )
        present = set(idx[warps == w].tolist())
        missing = next(t for t in range(32 * w, 32 * w + 32) if t not in present)
        raise Fault(
            f"warp-collective {text} executed by {counts[w]} of 32 lanes of warp {w}; lane "
            f"{missing % 32} is not active (divergent control flow)",
            missing,
            "all 32 lanes must execute ldmatrix/stmatrix/mma together",
        )
    raise AssertionError("unreachable")


# instruction prefix -> "module:function" of the families the simulator executes in their own
# module (checked in this order: the first prefix that matches wins)
_FAMILIES = {
    **dict.fromkeys(
        ("mbarrier.", "cp.async.mbarrier.", "fence.mbarrier_init."), "mbarrier:compile_mbarrier"
    ),
    "cp.async.bulk.tensor.": "tma:compile_tma",
    **dict.fromkeys(("cp.async.bulk", "fence.proxy"), "bulkcalls:compile_bulk"),
    "cp.async": "asynccopy:compile_async",
    "wgmma.": "wgmma:compile_wgmma",
}


def compile_ptx(m, compiler, stmt: ir.PtxCall):
    text = stmt.instruction.strip()
    own = next((v for k, v in _FAMILIES.items() if text.startswith(k)), None)
    if own is not None:  # a family with its own module, imported at its first statement
        return load_attribute("tirx.sim." + own)(m, compiler, stmt, text, _SUPPORTED)
    ins = parse_instruction(text)
    if ins is None:
        raise SimulationError(
            f"unknown PTX instruction {text!r}", stmt.span, f"the simulator implements {_SUPPORTED}"
        )
    ops = stmt.operands
    span = stmt.span
    address = None
    if isinstance(ins, Mma):
        if len(ops) != 4:
            raise compiler.error(f"mma takes 4 operands (D, A, B, C), not {len(ops)}")
        acc = _ACCUMULATOR[ins.c]
        vectors = [
            _Vector(m, compiler, ops[0], "d", ins.regs("d"), True, acc),
            _Vector(m, compiler, ops[1], "a", ins.a_regs, False, RegType.B32),
            _Vector(m, compiler, ops[2], "b", ins.b_regs, False, RegType.B32),
            _Vector(m, compiler, ops[3], "c", ins.regs("c"), False, acc),
        ]
    else:
        load = isinstance(ins, LdMatrix)
        if len(ops) != 2:
            raise compiler.error(f"{text.split('.')[0]} takes 2 operands, not {len(ops)}")
        reg_op, addr_op = (ops[0], ops[1]) if load else (ops[1], ops[0])
        if not isinstance(addr_op, ir.AddressOperand):
            raise compiler.error("the shared-memory operand must be an address")
        address = compiler.compile(addr_op.address)
        vectors = [_Vector(m, compiler, reg_op, "r", ins.num, load, RegType.B32)]

    def run(idx):
        m.span = span
        warps = _full_warps(m, idx, text)
        w = warps.size
        before = [v.peek(idx, w) if v.output else None for v in vectors]
        addrs = None
        if isinstance(ins, Mma):
            d, a, b, c = vectors
            a_bits, b_bits, c_bits = a.read(idx, w), b.read(idx, w), c.read(idx, w)
            d.write(idx, mma_compute(ins, a_bits, b_bits, c_bits))
            inputs = {1: a_bits, 2: b_bits, 3: c_bits}
        else:
            addrs = np.broadcast_to(as_index(address(idx), idx.size), idx.size).reshape(w, 32)
            addrs = addrs.astype(np.uint32).astype(np.int64)
            used = 8 * ins.num
            row_addr = addrs[:, :used].ravel()
            row_tids = idx.reshape(w, 32)[:, :used].ravel()
            if isinstance(ins, LdMatrix):
                rows = m.shared.read_rows(row_addr, row_tids, "ldmatrix")
                regs = ldmatrix_registers(rows.reshape(w, ins.num, 8, 8), ins.trans)
                vectors[0].write(idx, regs)
                inputs = {}
            else:
                regs = vectors[0].read(idx, w)
                rows = stmatrix_rows(regs, ins.trans).reshape(-1, 8)
                m.shared.write_rows(row_addr, rows, row_tids, "stmatrix")
                inputs = {0: regs}
        if m.traces is not None:
            _record(m, stmt, vectors, before, inputs, idx, warps, addrs, ins)

    return run


def _record(m, stmt, vectors, before, inputs, idx, warps, addrs, ins) -> None:
    w = warps.size
    per_operand = []
    for i, v in enumerate(vectors):
        after = v.peek(idx, w) if v.output else inputs[i]
        prior = before[i] if v.output else after
        is_f32 = np.array([r.is_f32 for r in v.regs])
        per_operand.append((v, prior, after, is_f32))
    positions = [0, 1, 2, 3] if isinstance(ins, Mma) else [0 if isinstance(ins, LdMatrix) else 1]
    for j, warp in enumerate(warps.tolist()):
        regs = tuple(
            RegisterTrace(
                operand=pos,
                role=v.role,
                is_output=v.output,
                dtypes=tuple(r.type_name for r in v.regs),
                sources=tuple(r.source for r in v.regs),
                before=prior[j].copy(),
                after=after[j].copy(),
                before_f32=as_float(prior[j], is_f32),
                after_f32=as_float(after[j], is_f32),
            )
            for pos, (v, prior, after, is_f32) in zip(positions, per_operand)
        )
        used = None
        if addrs is not None:
            used = np.arange(32) < 8 * ins.num
        m.traces.append(
            PtxTrace(
                step=len(m.traces),
                instruction=stmt.instruction,
                span=stmt.span,
                block=tuple(int(x) for x in m.block_idx),
                warp=int(warp),
                registers=regs,
                addresses=None if addrs is None else addrs[j].astype(np.uint32),
                address_used=used,
            )
        )
