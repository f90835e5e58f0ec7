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


def main(argv=None, prog: str = "python -m tirx.demo") -> int:
    """The demo; returns the exit status: 0 when the result matches torch, 1 when the run is
    impossible here (``--target cuda`` without a GPU: one line says so) or fails, 2 for a bad
    option."""
    ap = argparse.ArgumentParser(prog=prog, description="The seed kernel end to end.")
    ap.add_argument("--target", default=None, help='"cuda", "sim" (default: GPU if visible)')
    ap.add_argument("--full", action="store_true", help="print the whole CUDA and PTX")
    args = ap.parse_args(argv)

    import tirx

    try:
        target = tirx.Target.parse(args.target)
    except tirx.TirxError as e:
        ap.error(e.message)
    why = _cannot_run(target)
    if why:
        print(f"{ap.prog}: {why}", file=sys.stderr)
        return 1
    try:
        return _demo(target, args.full)
    except tirx.TirxError as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1


def _cannot_run(target) -> str | None:
    """Why the kernel cannot run on ``target`` here, in one line, or None."""
    import tirx
    from tirx.cli_load import on_gpu

    if not on_gpu(target):
        return None
    if not tirx.gpu_available():
        return ("--target cuda needs an NVIDIA GPU and none is visible; leave --target out "
                "(or use --target sim) to run on the CPU simulator")  # fmt: skip
    import torch

    if not torch.cuda.is_available():
        return (f"--target cuda needs a CUDA build of torch (this is {torch.__version__}); "
                "use --target sim to run on the CPU simulator")  # fmt: skip
    return None


def _demo(target, full: bool) -> int:
    import torch

    import tirx
    from tirx.cli_load import on_gpu
    from tirx.examples.warp_matmul import warp_matmul

    cuda = tirx.compile(warp_matmul, target="cuda")
    stages = {k: v for k, v in cuda.timings.items() if k != "parse"}
    print(
        f"compiled {warp_matmul.name} for {cuda.target} in {sum(stages.values()):.1f} ms "
        f"(cache {cuda.cache}; "
        + ", ".join(f"{k} {v:.1f}" for k, v in stages.items())
        + f"; parsed at import in {cuda.timings['parse']:.1f} ms)"
    )
    st = cuda.stats
    print(
        f"resources: {st.get('registers')} registers, {st['shared_bytes']} shared bytes, "
        f"{st.get('spill_stores')} spill stores"
    )
    if full:
        print(cuda.source)
        print(cuda.ptx)
    else:
        print("CUDA (the tile operations):")
        print(_excerpt(cuda.source, ("asm volatile",)))
        print("PTX (the matrix instructions):")
        print(_excerpt(cuda.ptx, ("ldmatrix", "mma.sync")))

    exe = tirx.compile(warp_matmul, target=target)
    device = "cuda" if on_gpu(exe.target) else "cpu"
    where = "on the GPU" if device == "cuda" else "on the CPU simulator"
    if device == "cpu" and exe.target.auto:
        where += " (no GPU visible)"
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
