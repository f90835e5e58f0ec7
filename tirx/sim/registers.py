"""Register operands of the warp-collective instructions (ldmatrix, stmatrix, mma, ...) for the
families' simulator modules: gather a batch of whole warps' registers, scatter results back,
and record traces.

* Every register is 32 bits. A ``LocalReg`` names slot ``slot`` (in units of its dtype) of a
  local buffer; its bits are used as they are (a float32 slot used as a b32 operand passes
  its bit pattern). A ``ValueReg`` is converted like a C assignment to the operand's register
  type (:class:`RegType`): to float32 for an f32 operand, to int32 for an s32 operand, and for
  a b32 operand a 32-bit value passes its bits while another width is converted to uint32.
* :func:`full_warps` refuses a warp-collective instruction that some lane of a warp does not
  execute (divergent control flow), naming the lane.
"""

from __future__ import annotations

import enum

import numpy as np

from ..ir import nodes as ir
from .faults import Fault
from .numeric import convert, storage_type
from .trace import PtxTrace, RegisterTrace, as_float, stamp

__all__ = ["RegType", "Register", "RegisterVector", "full_warps", "record_registers"]


class RegType(enum.Enum):
    """The PTX type of a 32-bit register operand, which decides how a value converts to it."""

    F32 = "float32"
    S32 = "int32"
    B32 = "uint32"


class Register:
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
        return self.array.load_slot(self.reg.slot, self.dtype, idx, idx).view(np.uint32)

    def peek(self, idx: np.ndarray) -> np.ndarray:
        if self.array is None:
            return self.read(idx)
        slot = self.reg.slot
        if slot < 0 or (slot + 1) * 4 > self.array.nbytes:
            return np.zeros(idx.size, dtype=np.uint32)
        return self.array.peek(slot, self.storage, idx).view(np.uint32)

    def write(self, idx: np.ndarray, bits: np.ndarray) -> None:
        self.array.store_slot(self.reg.slot, bits.view(self.storage), self.dtype, idx, idx)


class RegisterVector:
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
        self.regs = [Register(machine, compiler, r, kind, output) for r in operand.regs]
        # registers that are all slots of one local array, in one dtype: read and written
        # as one (LocalArray.load_slots/store_slots), else register by register
        first = self.regs[0] if self.regs else None
        self.slots = None
        if first is not None and first.array is not None:
            same = (r.array is first.array and r.dtype == first.dtype for r in self.regs)
            if all(same):
                self.slots = tuple(r.reg.slot for r in self.regs)

    def read(self, idx: np.ndarray, w: int) -> np.ndarray:
        if self.slots is not None:
            first = self.regs[0]
            bits = first.array.load_slots(self.slots, first.dtype, idx, idx)
            return bits.view(np.uint32).reshape(w, 32, -1)
        return np.stack([r.read(idx) for r in self.regs], axis=-1).reshape(w, 32, -1)

    def peek(self, idx: np.ndarray, w: int) -> np.ndarray:
        return np.stack([r.peek(idx) for r in self.regs], axis=-1).reshape(w, 32, -1)

    def write(self, idx: np.ndarray, values: np.ndarray) -> None:
        flat = values.reshape(idx.size, -1)
        if self.slots is not None:
            first = self.regs[0]
            bits = flat.view(first.storage)
            first.array.store_slots(self.slots, bits, first.dtype, idx, idx)
            return
        for i, r in enumerate(self.regs):
            r.write(idx, np.ascontiguousarray(flat[:, i]))


def full_warps(m, idx: np.ndarray, text: str) -> np.ndarray:
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


def record_registers(
    m, stmt, vectors, before, inputs, idx, warps, positions, addrs=None, used=None
):
    """One :class:`PtxTrace` per warp that executed ``stmt``: each operand's registers before and
    after (``positions``: each vector's operand index in PTX order; ``inputs``: the bits an input
    vector read, by its index in ``vectors``), and for a shared-memory operand the lanes' addresses and which
    lanes' addresses the instruction used."""
    w = warps.size
    per_operand = []
    for i, v in enumerate(vectors):
        after = v.peek(idx, w) if v.output else inputs[i]
        prior = before[i] if v.output else after
        is_f32 = np.array([r.is_f32 for r in v.regs])
        per_operand.append((v, prior, after, is_f32))
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
                seq=stamp(m),
            )
        )
