"""Write the CUDA source the current tree generates for GEMM variants, for an A/B of builds.

    python benchmarks/gemm_sources.py --out DIR/LABEL [--variants tirx,NAME,...]
                                      [--sizes 4096,8192] [--dtypes float16,bfloat16] [--jobs N]

Each file is ``DIR/LABEL/<variant>-<dtype>-<n>.cu``. ``gemm_speed.py --sources DIR`` then times
every such file beside the current build's kernels in one run: run this script with another
checkout of tirx on ``PYTHONPATH`` (an earlier commit, say) to compare the code two compilers
make of the same kernel on the same GPU, in the same process and thermal state. Needs no GPU.
With ``--jobs N`` the kernels compile in N processes: run with the benchmark's variants before
it, this fills tirx's compile cache in a fraction of the time the benchmark would take.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_kernels import TIRX_VARIANTS  # noqa: E402


def source_name(variant: str, dtype: str, n: int) -> str:
    return f"{variant}-{dtype}-{n}.cu"


def write_source(out: str, variant: str, dtype: str, n: int) -> str:
    import tirx

    kernel = TIRX_VARIANTS[variant](n, n, n, dtype)
    exe = tirx.compile(kernel, target="cuda -arch=sm_90")
    (Path(out) / source_name(variant, dtype, n)).write_text(exe.source)
    return f"{Path(out).name}: {variant} {dtype} {n}: {exe.stats.get('registers')} registers"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the folder to write (its name is the label)")
    ap.add_argument("--variants", default="tirx", help="comma list of variant names")
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--jobs", type=int, default=1, help="compile in this many processes")
    args = ap.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    work = [
        (args.out, variant, dtype, n)
        for variant in (v.strip() for v in args.variants.split(",") if v.strip())
        for dtype in (d.strip() for d in args.dtypes.split(",") if d.strip())
        for n in (int(s) for s in args.sizes.split(",") if s.strip())
    ]
    if args.jobs <= 1:
        for item in work:
            print(write_source(*item))
        return 0
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(args.jobs) as pool:
        for line in pool.map(write_source, *zip(*work)):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
