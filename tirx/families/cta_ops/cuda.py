"""CUDA C++ for atomics and CTA-wide operations (the statements this family's script module builds).

Each function takes codegen's statement emitter and one lowered statement and writes its
lines. No header is needed: ``atomicAdd``/``atomicCAS`` on 32- and 64-bit types,
``__threadfence``, ``__syncthreads_and``/``_or`` and ``__shfl_xor_sync`` are NVRTC builtins;
the 16-bit float atomics are inline PTX (``atom.add.noftz.{f16,bf16}`` on the generic address,
which reaches global and shared memory alike), since tirx carries 16-bit floats as their bits.
"""

from __future__ import annotations

from ...backend.cuda.codegen import to_bits16
from ...ir import nodes as ir
from .nodes import Atomic, AtomicKind, CtaReduce, ReduceKind, ThreadFence, VotingBarrier

__all__ = [
    "visit_Atomic",
    "visit_ThreadFence",
    "visit_VotingBarrier",
    "visit_CtaReduce",
    "identity",
]

_PTX16 = {"float16": "f16", "bfloat16": "bf16"}
_CUDA_ATOMIC = {AtomicKind.ADD: "atomicAdd", AtomicKind.CAS: "atomicCAS"}


def _emit_atomic(em, st: Atomic) -> None:
    em.mark(st.span)
    ref = em.ref(st.buffer, st.index, st.dtype)
    if st.dtype.name in _PTX16:  # st.kind is ADD: the lowering allows no 16-bit CAS
        (v,) = st.operands
        inner = v.value if isinstance(v, ir.Cast) and v.dtype == st.dtype else v
        bits = to_bits16(em.e(inner), inner.dtype, st.dtype)
        asm = f"atom.add.noftz.{_PTX16[st.dtype.name]} %0, [%1], %2;"
        em.line(
            "{ unsigned short tirx_old; "
            f'asm volatile("{asm}" : "=h"(tirx_old) : "l"(&{ref}), "h"({bits}) : "memory");'
        )
        if st.result is not None:
            back = "tirx_h2f" if st.dtype.name == "float16" else "tirx_b2f"
            em.line(f"  {st.result.name} = {back}(tirx_old);")
        em.line("}")
        return
    args = ", ".join(em.operand(v, st.dtype) for v in st.operands)
    text = f"{_CUDA_ATOMIC[st.kind]}(&{ref}, {args})"
    em.line(f"{st.result.name} = {text};" if st.result is not None else f"{text};")


def _emit_thread_fence(em, st: ThreadFence) -> None:
    em.mark(st.span)
    em.line("__threadfence();")


def _emit_voting_barrier(em, st: VotingBarrier) -> None:
    em.mark(st.span)
    text = f"__syncthreads_{st.kind}((int)({em.e(st.predicate)}))"
    em.line(f"{st.result.name} = {text};" if st.result is not None else f"(void){text};")


def _step(kind: ReduceKind, dtype, a: str, b: str) -> str:
    """C for one reduction step of ``a`` with ``b`` (CUDA's max/min on floats: fmaxf...)."""
    if kind is ReduceKind.SUM:
        return f"{a} + {b}"
    if dtype.kind == "float":
        f = ("fmax" if kind is ReduceKind.MAX else "fmin") + ("f" if dtype.bits == 32 else "")
        return f"{f}({a}, {b})"
    return f"tirx_{kind}<{dtype.c_type}>({a}, {b})"


def warp_allreduce(kind: ReduceKind, dtype, var: str) -> str:
    """C that reduces ``var`` over the 32 lanes of a full warp, the result in every lane (an
    xor butterfly, masks 16..1). Not the warp collectives' ``warp_max``/``warp_min`` helper
    (tirx/families/warp_collectives/cuda.py): a CTA reduction's float max/min is CUDA's ``fmaxf``/``fminf``,
    as the real TIRx's, where ``T.cuda.warp_max`` is ``T.max``."""
    shfl = f"__shfl_xor_sync(0xffffffffu, {var}, tirx_m)"
    step = _step(kind, dtype, var, shfl)
    return f"for (int tirx_m = 16; tirx_m > 0; tirx_m >>= 1) {var} = {step};"


def identity(kind: ReduceKind, dtype) -> int | float:
    """The value a missing partial contributes (lanes of warp 0 beyond the warp count)."""
    if kind is ReduceKind.SUM:
        return 0
    if dtype.kind == "float":
        return float("-inf") if kind is ReduceKind.MAX else float("inf")
    bits = dtype.bits
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if dtype.kind == "int" else (0, 2**bits - 1)
    return lo if kind is ReduceKind.MAX else hi


def _emit_cta_reduce(em, st: CtaReduce) -> None:
    """The two-stage reduction of docs/semantics.md ("CTA reductions"), inline: an xor
    butterfly in every warp, one partial per warp in the scratch, a barrier, warp 0 reduces
    the partials the same way, a barrier, every thread reads the total."""
    em.mark(st.span)
    d = st.value.dtype
    t = d.c_type
    off = em.e(st.offset)

    def slot(k: str) -> str:
        return em.ref_code(st.scratch, f"{off} + {k}", d)

    butterfly = warp_allreduce(st.kind, d, "tirx_v")
    ident = identity(st.kind, d)
    # the lowest int64 has no literal of its own in C (its magnitude overflows long long)
    ident = "(-9223372036854775807LL - 1)" if ident == -(2**63) else em.const(ir.Const(ident, d))
    lines = [
        "{",
        f"  {t} tirx_v = {em.operand(st.value, d)};",
        "  #pragma unroll",
        f"  {butterfly}",
        f"  if ((tirx_tid & 31) == 0) {slot('(tirx_tid >> 5)')} = tirx_v;",
        "  __syncthreads();",
        "  if ((tirx_tid >> 5) == 0) {",
        f"    tirx_v = (tirx_tid & 31) < {st.num_warps} ? {slot('(tirx_tid & 31)')} : {ident};",
        "    #pragma unroll",
        f"    {butterfly}",
        f"    if (tirx_tid == 0) {slot('0')} = tirx_v;",
        "  }",
        "  __syncthreads();",
        (f"  {st.result.name} = " if st.result is not None else "  (void)") + f"{slot('0')};",
        "}",
    ]
    for text in lines:
        em.line(text)


# the codegen emitter's rules for the statements (each writes only its ``result``, if any)
visit_Atomic = _emit_atomic
visit_ThreadFence = _emit_thread_fence
visit_VotingBarrier = _emit_voting_barrier
visit_CtaReduce = _emit_cta_reduce
