"""Compile one planted kernel (tests/planted.py) for cuda and launch it once.

``python -m tests.sanitizer_runner NAME`` — run under ``compute-sanitizer`` by
tests/test_sanitizer_parity.py. The kernel's CUDA C is tirx's code generator's, compiled by
tirx's NVRTC path with the backend's options plus line info (so reports name the kernel's
lines); cupy loads the cubin and launches it with the planted inputs. A kernel the table gives
as a ``@T.function`` (``Planted.kernel``: one with TMA tensor maps, hidden parameters the
launcher encodes) goes through ``tirx.compile(..., "cuda")`` with torch tensors instead. Exit
status 0 when the launch and the synchronization succeed, 3 when CUDA reports an error (the
sanitizer's own report is what the test reads).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np


def main(name: str) -> int:
    import cupy as cp

    from tests.async_kernels import BY_NAME as ASYNC
    from tests.bulk_kernels import BY_NAME as BULK
    from tests.named_barrier_planted import BY_NAME as NAMED
    from tests.planted import BY_NAME
    from tests.text_planted import BY_NAME as TEXT
    from tests.wgmma_planted import BY_NAME as WGMMA
    from tirx.backend.cuda.build import NVRTC_OPTIONS
    from tirx.backend.cuda.codegen import generate
    from tirx.backend.cuda.nvrtc import compile_cuda

    case = {**BY_NAME, **BULK, **ASYNC, **WGMMA, **NAMED, **TEXT}[name]
    if case.kernel is not None:
        return _through_tirx(case)
    fn = case.build()
    out = compile_cuda(
        generate(fn),
        arch="sm_90a" if fn.arch_specific else "sm_90",  # wgmma: the arch-specific set
        filename=f"{fn.name}.cu",
        options=(*NVRTC_OPTIONS, "--generate-line-info"),
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(out.cubin)
        kernel = cp.RawModule(path=str(path)).get_function(fn.name)
    args, keep = [], []
    for i, host in enumerate(case.inputs()):
        host = np.ascontiguousarray(host)
        if i == case.misaligned_arg:  # the same bytes, 2 past an aligned allocation
            raw = cp.zeros(host.nbytes + 16, dtype=cp.uint8)
            raw[2 : 2 + host.nbytes] = cp.asarray(host.view(np.uint8).ravel())
            keep.append(raw)
            args.append(cp.ndarray(host.shape, host.dtype, memptr=raw.data + 2))
        else:
            args.append(cp.asarray(host))
    try:
        kernel(tuple(fn.launch.grid), tuple(fn.launch.block), tuple(args))
        cp.cuda.runtime.deviceSynchronize()
    except Exception as e:  # the sanitizer reports the fault; say what CUDA said too
        print(f"CUDA error: {e}", file=sys.stderr)
        return 3
    return 0


def _through_tirx(case) -> int:
    import torch

    import tirx

    exe = tirx.compile(case.kernel(), target="cuda")
    args = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in case.inputs()]
    try:
        exe(*args)
        torch.cuda.synchronize()
    except Exception as e:  # the sanitizer reports the fault; say what CUDA said too
        print(f"CUDA error: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
