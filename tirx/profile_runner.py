"""The process Nsight Compute profiles for ``exe.profile`` (tirx/backend/cuda/ncu.py).

    python -m tirx.profile_runner FOLDER

``FOLDER`` holds ``kernel.tirx`` (the lowered kernel, :mod:`tirx.ir.serial`), ``kernel.cu``
(its CUDA source: the build is a compile-cache lookup when the parent compiled it),
``kernel.json`` (name and arch) and ``args.pt`` (the arguments, ``torch.save``). The runner
builds the executable, puts the tensors on the GPU and launches the kernel once, which is the
launch ncu profiles.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tirx.profile_runner FOLDER", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    import torch

    from .backend.cuda.build import build
    from .ir import serial
    from .target import Target, TargetKind

    meta = json.loads((folder / "kernel.json").read_text())
    lowered = serial.loads((folder / "kernel.tirx").read_bytes())
    source = (folder / "kernel.cu").read_text()
    target = Target(TargetKind.CUDA, meta["arch"])
    exe = build(None, lowered, target, {}, source=source)
    args = torch.load(folder / "args.pt", map_location="cuda:0", weights_only=True)
    exe(*args)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
