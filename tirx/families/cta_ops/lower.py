"""Lowering of atomics and CTA reductions: element addresses become flat indices, and an
atomic's dtype is checked against what the target architecture has.

Which atomics exist (PTX ISA, "atom"; checked with ptxas 13.0): ``atom.add`` on ``.u32``,
``.s32``, ``.u64``, ``.f32`` and ``.f64`` on every architecture tirx targets (sm_80+), on
``.f16`` from sm_70 and on ``.bf16`` only from sm_90 ("Instruction 'atom.add.bf16.global'
requires .target sm_90 or higher"); ``atom.cas`` on 32- and 64-bit words. CUDA's atomicAdd
has no signed 64-bit form, and neither does tirx (the bits of a two's-complement sum are the
same as uint64's).
"""

from __future__ import annotations

from ...errors import TirxSyntaxError
from ...ir import nodes as ir
from .nodes import Atomic, AtomicKind, CtaReduce, ElemAtomic

__all__ = [
    "ATOMIC_DTYPES", "REBUILT", "KEPT", "enter_ElemAtomic", "enter_CtaReduce",
    "leave_ElemSharedAddress",
]  # fmt: skip

# the lowerer rebuilds a vote from its lowered predicate; a flat atomic and a fence are lowered
# as the parser made them (tirx/ir/visitor.py, Transformer)
REBUILT = frozenset({"VotingBarrier"})
KEPT = frozenset({"Atomic", "ThreadFence"})

# kind -> dtype name -> the first sm_ number that has it
ATOMIC_DTYPES = {
    AtomicKind.ADD: {
        "int32": 80,
        "uint32": 80,
        "uint64": 80,
        "float32": 80,
        "float64": 80,
        "float16": 80,
        "bfloat16": 90,
    },
    AtomicKind.CAS: {"int32": 80, "uint32": 80, "uint64": 80},
}


def enter_ElemAtomic(lowerer, s: ElemAtomic) -> Atomic:
    """``s`` as a flat :class:`.nodes.Atomic` (through the lowerer's element address
    and expression lowering)."""
    arch, address, visit = lowerer.arch, lowerer.address, lowerer.visit
    d = s.view.dtype
    table = ATOMIC_DTYPES[s.kind]
    first = table.get(d.name)
    fn = f"T.cuda.atomic_{s.kind}"
    if first is None:
        hint = f"{fn} takes {', '.join(table)}"
        if d.name == "int64":
            hint += "; view the tensor as uint64 (two's-complement sums have the same bits)"
        raise TirxSyntaxError(f"{fn} has no {d} form", s.span, hint=hint)
    if arch < first:
        raise TirxSyntaxError(
            f"{fn} on {d} needs sm_{first} or newer (PTX atom.{s.kind}.{_ptx_name(d)}); the "
            f"target is sm_{arch}",
            s.span,
            hint=f'compile for sm_{first} (target="cuda -arch=sm_{first}"), or accumulate '
            "in float32",
        )
    buf, index = address(s.view, s.indices)
    return Atomic(s.kind, buf, index, tuple(visit(v) for v in s.operands), d, s.result, s.span)


def enter_CtaReduce(lowerer, s: CtaReduce) -> CtaReduce:
    """``s`` with its scratch as (shared buffer, element index of slot 0)."""
    buf, index = lowerer.address(s.scratch, (0,))
    return CtaReduce(s.kind, lowerer.visit(s.value), s.num_warps, buf, index, s.result, s.span)


def leave_ElemSharedAddress(lowerer, e: ir.ElemSharedAddress, view, indices) -> ir.SharedAddress:
    """``T.cuda.cvta_generic_to_shared``: the shared-window address of the element."""
    return lowerer.shared_address(view, lowerer.address(view, indices, lowered=True)[1])


def _ptx_name(d) -> str:
    return {"float16": "f16", "bfloat16": "bf16"}.get(d.name, d.name)
