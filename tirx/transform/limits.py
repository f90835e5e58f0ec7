"""Machine limits checked on the lowered program, the same for both targets.

The simulator could run a kernel the GPU cannot (any block shape, any register array), and
NVRTC only reports some of these far from the user's line. So what the machine forbids is
refused here, after lowering and before either backend sees the program:

* **warp-collective instructions in a partial warp.** ``ldmatrix``, ``stmatrix``, ``mma``
  (and the other ``.sync.aligned`` warp instructions) need all 32 lanes of the warp to take
  part; a block whose thread count is not a multiple of 32 has a last warp with missing lanes,
  and the instruction's behaviour there is undefined (PTX ISA: "the mandatory .aligned
  qualifier indicates that all threads in the warp must execute the same instruction").
  Which instructions these are comes from the ISA data: every :mod:`tirx.isa` family whose
  ``exec_scope`` is a group of whole warps (``FamilySpec.exec_scope``), whether the call came
  from ``T.cuda.tile.apply`` or from a raw ``T.ptx[...]`` call.
* **local arrays that cannot fit.** A thread's local memory is at most 512 KiB (CUDA
  programming guide, technical specifications per compute capability: "maximum amount of local
  memory per thread", the same on sm_80 and sm_90). ``T.alloc_local`` arrays together may not
  exceed it. NVRTC and ptxas do not enforce this (measured with NVRTC 13.0 for sm_90: a kernel
  with an 800 000-byte local array compiles, reporting that stack frame), so without this
  check such a kernel would compile for both targets and fail only when the GPU launches it.

* **global tensors of 2 GiB or more.** The generated code computes a global element's
  index and a copy's byte offset in 32-bit ``int`` (docs/semantics.md: index arithmetic is
  assumed not to overflow), which is exact for every in-bounds access of a tensor smaller
  than 2**31 bytes and wraps for a larger one: reads and writes at wrong, even negative,
  offsets, with no error on the GPU. Such a tensor parameter is refused.

Grid and block shapes are checked where they are written (``T.cuda.LaunchConfig``).
"""

from __future__ import annotations

from ..errors import CompileError, LaunchError
from ..ir import nodes as ir
from ..ir.visitor import walk
from ..isa.registry import family_of_text

__all__ = [
    "check_limits",
    "MachineLimitError",
    "LOCAL_BYTES_PER_THREAD",
    "GLOBAL_TENSOR_BYTES",
    "warp_collective_opcode",
]

LOCAL_BYTES_PER_THREAD = 512 * 1024
GLOBAL_TENSOR_BYTES = 2**31  # a global tensor must be smaller: 32-bit offsets
WARP_SIZE = 32
WARPGROUP_SIZE = 128  # four consecutive warps (wgmma's warpgroup)


def warp_collective_opcode(instruction: str) -> str | None:
    """The mnemonic of ``instruction``'s family when that family's instructions are executed
    by whole warps together (``FamilySpec.exec_scope``), else None. Only :mod:`tirx.isa`
    forms reach the lowered program (a raw ``T.ptx`` call of any other text is refused when it
    is lowered), so the ISA data is the whole list."""
    spec = family_of_text(instruction)
    if spec is None or spec.exec_scope is ir.ExecScope.THREAD:
        return None
    return spec.mnemonic


class MachineLimitError(LaunchError):
    """The kernel asks for something no GPU of the target can do (found at compile time)."""


def check_limits(fn: ir.Function) -> None:
    """Raise :class:`MachineLimitError` at the user's line when ``fn`` (lowered) breaks a
    machine limit; return None otherwise."""
    _check_local_bytes(fn)
    _check_tensor_bytes(fn)
    block = fn.launch.block
    threads = block[0] * block[1] * block[2]
    if threads % WARPGROUP_SIZE:
        _check_warpgroups(fn, threads)
    if threads % WARP_SIZE:
        for call in _ptx_calls(fn.body):
            opcode = warp_collective_opcode(call.instruction)
            if opcode is not None:
                full = (threads + WARP_SIZE - 1) // WARP_SIZE * WARP_SIZE
                raise MachineLimitError(
                    f"{opcode} is a warp-collective instruction, but the block has "
                    f"{threads} threads {block}: its last warp has only "
                    f"{threads % WARP_SIZE} of 32 lanes",
                    call.span,
                    hint=f"launch a multiple of 32 threads per block (e.g. block={full}), "
                    "and guard the extra threads' work with an if instead",
                )


def _check_warpgroups(fn: ir.Function, threads: int) -> None:
    """A warpgroup-collective instruction needs whole warpgroups of 128 threads: setmaxnreg a
    block of them (the launch's register budget is per warpgroup); wgmma one at least, the
    warps past the last whole one (a producer warp after a consumer warpgroup) not taking
    part, which the simulator checks as it runs."""
    for call in _ptx_calls(fn.body):
        opcode = warp_collective_opcode(call.instruction)
        if opcode is None:
            continue
        spec = family_of_text(opcode)
        if spec.mnemonic == "wgmma" and threads >= WARPGROUP_SIZE:
            continue
        if spec.exec_scope is ir.ExecScope.WARPGROUP:
            full = (threads + WARPGROUP_SIZE - 1) // WARPGROUP_SIZE * WARPGROUP_SIZE
            raise MachineLimitError(
                f"{opcode} is executed by whole warpgroups of {WARPGROUP_SIZE} threads, but the "
                f"block has {threads} threads {fn.launch.block}",
                call.span,
                hint=f"launch a multiple of {WARPGROUP_SIZE} threads per block (e.g. block={full})",
            )


def _check_local_bytes(fn: ir.Function) -> None:
    total, first = 0, None
    for buf in fn.allocations:
        if buf.scope is ir.Scope.LOCAL:
            total += buf.nbytes
            if total > LOCAL_BYTES_PER_THREAD:
                first = buf
                break
    if first is not None:
        raise MachineLimitError(
            f"the local arrays need {total} bytes per thread (at {first.name!r}), more than "
            f"a thread's {LOCAL_BYTES_PER_THREAD // 1024} KiB of local memory",
            first.span,
            hint="keep per-thread arrays small (registers hold at most 255 32-bit values); "
            "put large tiles in shared memory (T.alloc_shared) or global tensors",
        )


def _ptx_calls(body):
    """Every PtxCall of a statement tree, in program order (the IR visitor's walk: no
    recursion, and a node class it does not know raises)."""
    return (node for node in walk(body) if isinstance(node, ir.PtxCall))


def _check_tensor_bytes(fn: ir.Function) -> None:
    """A global tensor parameter of 2 GiB or more: its offsets would wrap in 32 bits."""
    for p in fn.params:
        if isinstance(p, ir.Buffer) and p.scope is ir.Scope.GLOBAL:
            if p.nbytes >= GLOBAL_TENSOR_BYTES:
                raise CompileError(
                    f"tensor {p.name!r} {p.shape} {p.dtype} holds {p.nbytes} bytes "
                    f"({p.nbytes / 2**30:.1f} GiB): tirx addresses a global tensor with 32-bit "
                    "offsets, so each must be smaller than 2 GiB",
                    p.span or fn.span,
                    hint="launch the kernel on slices of the data (a batch, a block of rows at "
                    "a time), each tensor under 2 GiB",
                )
