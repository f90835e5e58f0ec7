"""The rules of ``T.vectorized`` loops, checked on the lowered IR, and the one body shape the
CUDA backend emits as a single vector access.

A vectorized loop of ``n`` iterations (a power of two, at most 16: tirx/script/loops.py) stands
for one access of ``n`` consecutive elements. Its body may hold only assignments and element
stores (no control flow, barriers or instructions), and every load or store in it that depends
on the loop variable must address ``base + v`` with ``base`` a compile-time multiple of ``n``
and ``n`` elements at most 16 bytes: then the ``n`` elements are one naturally aligned vector,
which ``ld``/``st.v2``/``.v4`` (and a 16-byte ``uint4`` in C) require.

A body that is one copy ``dst[base + v] = src[base' + v]`` of one dtype between shared, global
or local tensors (a local array is registers, declared 16-byte aligned) is emitted as one
vector load and one vector store; any other
body that passes the checks is emitted as an unrolled loop (``#pragma unroll``) of element
accesses (tirx/backend/cuda/vector.py). The simulator runs every vectorized loop element by element: the results are the
same, and the alignment the GPU needs was proved here.
"""

from __future__ import annotations

from ..errors import TirxSyntaxError
from ..ir import nodes as ir
from ..ir.simplify import linear_form, structural_key
from ..ir.visitor import walk

__all__ = ["check_vectorized"]

_ALLOWED = (ir.Seq, ir.Assign, ir.Store)
MAX_VECTOR_BYTES = 16


def check_vectorized(body: ir.Stmt) -> None:
    """Raise a TirxSyntaxError at the loop for every vectorized loop in ``body`` (lowered)
    whose body breaks the rules above."""
    for node in walk(body):
        if isinstance(node, ir.For) and node.kind is ir.LoopKind.VECTORIZED:
            _check_loop(node)


def _check_loop(loop: ir.For) -> None:
    n = int(loop.stop.value) - int(loop.start.value)
    for node in walk(loop.body):
        if isinstance(node, ir.Stmt) and not isinstance(node, _ALLOWED):
            raise TirxSyntaxError(
                f"a vectorized loop's body holds only element loads, stores and arithmetic, "
                f"not {type(node).__name__}",
                node.span or loop.span,
                hint="use T.unroll(...) for a body with control flow or instructions",
            )
        if isinstance(node, (ir.Load, ir.Store)):
            _check_access(loop, node, n)


def _check_access(loop: ir.For, access, n: int) -> None:
    dtype = access.dtype
    form = linear_form(access.index)
    key = structural_key(loop.var)
    span = getattr(access, "span", None) or loop.span
    if form is None:
        raise TirxSyntaxError("a vectorized access needs an integer index", span)
    terms, const = form
    coef = terms.get(key, (None, 0))[1]
    uses_var = coef != 0 or any(_reads(atom, loop.var) for atom, _ in terms.values())
    if not uses_var:
        return  # the same element in every lane of the vector (a broadcast)
    if coef != 1 or any(_reads(atom, loop.var) for k, (atom, _) in terms.items() if k != key):
        raise TirxSyntaxError(
            f"a vectorized loop reads and writes consecutive elements: "
            f"{access.buffer.name!r} is indexed with stride {coef} in {loop.var.name!r}",
            span,
            hint=f"index with {loop.var.name} itself as the last index, or use T.unroll",
        )
    if n * dtype.bytes > MAX_VECTOR_BYTES:
        raise TirxSyntaxError(
            f"{n} x {dtype} is {n * dtype.bytes} bytes, more than one vector access "
            f"({MAX_VECTOR_BYTES} bytes)",
            loop.span,
            hint=f"vectorize {MAX_VECTOR_BYTES // dtype.bytes} elements at most "
            f"({MAX_VECTOR_BYTES} bytes) and loop over the rest",
        )
    base = const + int(loop.start.value)
    stride_ok = all(c % n == 0 for k, (_, c) in terms.items() if k != key)
    if not stride_ok or base % n:
        raise TirxSyntaxError(
            f"the vector of {n} elements of {access.buffer.name!r} may not start at a multiple "
            f"of {n}: the GPU's vector accesses must be aligned to their size",
            span,
            hint=f"make the offset of the first element a multiple of {n} "
            f"(e.g. index row * {n * 8} + {loop.var.name}), or use T.unroll",
        )


def _reads(e, var: ir.Var) -> bool:
    return any(x is var for x in walk(e))
