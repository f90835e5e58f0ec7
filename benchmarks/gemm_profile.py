"""Launch one tirx GEMM variant a few times, for a profiler (``ncu``) to look at.

ncu --clock-control none --launch-skip 2 --launch-count 1 python benchmarks/gemm_profile.py NAME [n]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from gemm_kernels import TIRX_VARIANTS, output_dtype  # noqa: E402

import tirx  # noqa: E402


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    name, n = argv[0], int(argv[1]) if len(argv) > 1 else 4096
    kernel = TIRX_VARIANTS[name](n, n, n, "float16")
    exe = tirx.compile(kernel, target="cuda")
    a = torch.randn((n, n), device="cuda").half()
    b = torch.randn((n, n), device="cuda").half()
    out = torch.empty((n, n), device="cuda", dtype=getattr(torch, output_dtype(kernel)))
    for _ in range(4):
        exe(a, b, out)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
