"""``python -m tirx.demo``: the seed kernel end to end.

Compiles the seed guide's warp matmul for CUDA (NVRTC works without a GPU), shows the
generated CUDA and PTX, then runs it on the GPU when one is visible, else on the simulator,
and compares the result with torch.
"""

from __future__ import annotations

import argparse
import sys


def _excerpt(text: str, needles: tuple[str, ...], context: int = 0) -> str:
    lines = text.splitlines()
    keep = [i for i, ln in enumerate(lines) if any(n in ln for n in needles)]
    out = []
    for i in keep:
        out.extend(lines[max(i - context, 0) : i + context + 1])
    return "\n".join("    " + ln.strip()[:160] for ln in out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=None, help='"cuda", "sim" (default: GPU if visible)')
    ap.add_argument("--full", action="store_true", help="print the whole CUDA and PTX")
    args = ap.parse_args(argv)

    import torch

    import tirx
    from tirx.examples.warp_matmul import warp_matmul

    cuda = tirx.compile(warp_matmul, target="cuda")
    print(
        f"compiled {warp_matmul.name} for {cuda.target} "
        f"(cache {cuda.cache}; "
        + ", ".join(f"{k} {v:.1f} ms" for k, v in cuda.timings.items())
        + ")"
    )
    st = cuda.stats
    print(
        f"resources: {st.get('registers')} registers, {st['shared_bytes']} shared bytes, "
        f"{st.get('spill_stores')} spill stores"
    )
    if args.full:
        print(cuda.source)
        print(cuda.ptx)
    else:
        print("CUDA (the tile operations):")
        print(_excerpt(cuda.source, ("asm volatile",)))
        print("PTX (the matrix instructions):")
        print(_excerpt(cuda.ptx, ("ldmatrix", "mma.sync")))

    exe = tirx.compile(warp_matmul, target=args.target)
    device = "cuda" if exe.target.kind == "cuda" else "cpu"
    where = "on the GPU" if device == "cuda" else "on the CPU simulator (no GPU visible)"
    torch.manual_seed(0)
    a = torch.randn((16, 16), dtype=torch.float16, device=device)
    b = torch.randn((8, 16), dtype=torch.float16, device=device)
    out = torch.empty((16, 8), dtype=torch.float32, device=device)
    exe(a, b, out)
    ref = a.float() @ b.float().T
    err = (out - ref).abs().max().item()
    torch.testing.assert_close(out, ref, rtol=2e-4, atol=2e-4)
    print(f"ran {where}: Out = A @ B.T matches torch (max abs error {err:.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
