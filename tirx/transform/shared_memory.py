"""Shared-memory limits per architecture, checked when the block's shared memory is planned.

A kernel's static shared memory (``__shared__`` arrays) may be at most 48 KB on every
architecture; more needs the dynamic segment (``extern __shared__``), sized at launch, with the
kernel's ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` raised up to the architecture's
opt-in maximum (CUDA Programming Guide, "Technical Specifications per Compute Capability").
tirx puts a block's shared memory in the dynamic segment when any allocation asks for it
(``T.alloc_shared(..., scope="shared.dyn")``, the real TIRx's spelling); the CUDA executable
raises the attribute when it loads the module. Both targets lower through here, so the CUDA
backend and the simulator refuse the same kernels.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir

__all__ = ["STATIC_LIMIT", "optin_limit", "check_shared_limits"]

STATIC_LIMIT = 48 * 1024

# Maximum shared memory per block with the opt-in attribute, bytes, by compute capability.
_OPTIN_KB = {70: 96, 72: 96, 75: 64, 80: 163, 86: 99, 87: 163, 89: 99, 90: 227, 100: 227, 120: 99}


def optin_limit(arch: int) -> int:
    """The most shared memory one block may use on ``sm_<arch>`` (bytes), opted in."""
    known = [a for a in _OPTIN_KB if a <= arch]
    return _OPTIN_KB[max(known)] * 1024 if known else STATIC_LIMIT


def _kb(n: int) -> str:
    return f"{n} bytes ({n / 1024:.1f} KB)"


def check_shared_limits(fn: ir.Function, offsets: dict, total: int, arch: int) -> None:
    """Raise :class:`CompileError` at the allocation that first crosses the limit: 48 KB for
    static shared memory, the opt-in maximum of ``sm_<arch>`` for the dynamic segment (which
    also holds the launch's ``dynamic_smem_bytes``)."""
    dynamic = any(buf.dynamic for buf in offsets)
    extra = fn.launch.dynamic_smem_bytes
    limit = optin_limit(arch)
    if dynamic:
        cap, what = limit, f"the dynamic shared memory maximum of sm_{arch}"
        hint = f"sm_{arch} allows at most {_kb(limit)} per block; use fewer or smaller stages"
    else:
        cap, what = STATIC_LIMIT, "the 48 KB limit of static shared memory"
        hint = (
            'allocate the large buffers with T.alloc_shared(..., scope="shared.dyn"): dynamic '
            f"shared memory may use up to {_kb(limit)} on sm_{arch}"
        )
    for buf, start in sorted(offsets.items(), key=lambda item: item[1]):
        end = start + buf.nbytes
        if end > cap:
            raise CompileError(
                f"shared buffer {buf.name!r} ends at byte {end} of the block's shared memory, "
                f"beyond {what} ({_kb(cap)}); the kernel needs {_kb(total)}",
                span=buf.span,
                hint=hint,
            )
    launch_bytes = max(total, extra) if dynamic else extra
    if launch_bytes and (total if not dynamic else 0) + launch_bytes > limit:
        raise CompileError(
            f"the launch asks for {_kb(launch_bytes)} of dynamic shared memory"
            + (f" on top of {_kb(total)} static" if not dynamic and total else "")
            + f", beyond the maximum of sm_{arch} ({_kb(limit)})",
            span=fn.span,
            hint="lower dynamic_smem_bytes in T.cuda.LaunchConfig",
        )
