"""tirx's attention against torch's scaled_dot_product_attention and a Triton kernel, on a GPU.

    python benchmarks/attention_speed.py [--seqs 1024,2048,4096,8192,16384] [--dims 64,128]
                                         [--dtypes float16,bfloat16] [--modes full,causal]
                                         [--tokens 16384] [--hidden 2048] [--reps 10] [--out FILE]

For every dtype, head dim, mode (full or causal) and sequence length ``seq`` (queries and keys
alike) the script checks, then times, the forward pass of attention over ``batch x heads``
heads, ``heads = hidden / head_dim`` and ``batch = tokens / seq`` (16 heads of 128 or 32 of 64
and 16 k tokens by default: thousands of query tiles at every length, enough to fill the GPU):

* **tirx**: the mma.sync kernel of ``tirx.examples.attention_mma`` (``flash_attention``'s
  ``kernel="mma_sync"``), timed as its compiled executable called on preallocated outputs (the
  Python checks of ``flash_attention`` excluded); with ``--mma-configs`` each named
  configuration (``WwMmBN``: warps, 16-row tiles per warp, keys per tile, plus ``-ax`` for the
  approx softmax, e.g. ``4w1m64-ax``) is timed and the fastest counts, named beside it (the
  default: the kernel's default configuration);
* **tirx wgmma**: likewise the wgmma kernel of ``tirx.examples.attention_wgmma``
  (``kernel="wgmma"``, FlashAttention-3's structure; ``flash_attention``'s default there), on
  an sm_90 GPU only; with
  ``--wgmma-configs`` each named configuration (``BNxSTAGES`` plus ``-pp`` for the ping-pong,
  ``-ov`` for the overlap of the two products, ``-ax`` for the approx softmax, ``-c3`` for
  three consumer warpgroups, timed at head dim 64 only, ``-ps`` for a persistent grid, e.g.
  ``128x2-pp-ov``) is timed and
  the fastest
  counts, its name printed beside it (the default: the kernel's default configuration);
* **SDPA**: ``torch.nn.functional.scaled_dot_product_attention`` with each backend forced by
  ``torch.nn.attention.sdpa_kernel``: cuDNN, flash and efficient (a backend that refuses a
  case is left out of it);
* **Triton** (when ``triton`` imports): the FlashAttention-2 forward written below with
  ``tl.dot``, over a few block configurations; the fastest counts.

TFLOP/s counts the two matrix products, ``4 · batch · heads · seq² · head_dim`` per call, half
of it for causal attention. The ratios are against the fastest SDPA backend measured in the
same run. Every runner's output is checked against SDPA's before it is timed. Timing as in
``gemm_speed.py``: batches of back-to-back calls between CUDA events, each right after some of
the same runner's untimed calls, the runners alternating in a new order every round, the
median of ``--reps`` samples. The report (command, date, machine, versions, tables) is written
to ``benchmarks/results/attention_speed-<gpu>.md`` (``--out`` to put it elsewhere), replacing
the previous one. Without a GPU the script says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

BACKENDS = ("cudnn", "flash", "efficient")  # SDPA backends, by their sdpa_kernel names
# Triton block configurations: (BLOCK_M, BLOCK_N, warps, stages)
TRITON_CONFIGS = ((128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3))


def wgmma_configs(text: str) -> list:
    """``--wgmma-configs``: ``BNxSTAGES[-pp][-ov][-ax][-c3][-ps]`` names, comma separated, as
    configurations of ``tirx.examples.attention_wgmma`` (``-c3``: three consumer warpgroups;
    ``-ps``: a persistent grid;
    an empty text: its default per head dim)."""
    from tirx.examples.attention_wgmma import WgmmaAttentionConfig

    out = []
    for name in filter(None, (x.strip() for x in text.split(","))):
        head, *flags = name.split("-")
        m = re.fullmatch(r"(\d+)x(\d+)", head)
        if not m or set(flags) - {"pp", "ov", "ax", "c3", "ps"}:
            raise ValueError(f"wgmma config {name!r} is not BNxSTAGES[-pp][-ov][-ax][-c3][-ps]")
        cfg = WgmmaAttentionConfig(
            int(m[1]), int(m[2]), pingpong="pp" in flags, overlap="ov" in flags,
            approx="ax" in flags, consumers=3 if "c3" in flags else 2, persistent="ps" in flags,
        )  # fmt: skip
        cfg.check()
        out.append((name, cfg))
    return out


def mma_configs(text: str) -> list:
    """``--mma-configs``: ``WwMmBN[-ax]`` names, comma separated, as configurations of
    ``tirx.examples.attention_mma`` (an empty text: its default per head dim)."""
    from tirx.examples.attention_mma import AttentionConfig

    out = []
    for name in filter(None, (x.strip() for x in text.split(","))):
        head, *flags = name.split("-")
        m = re.fullmatch(r"(\d+)w(\d+)m(\d+)", head)
        if not m or set(flags) - {"ax"}:
            raise ValueError(f"mma config {name!r} is not WwMmBN[-ax]")
        cfg = AttentionConfig(int(m[1]), int(m[2]), int(m[3]), approx="ax" in flags)
        cfg.check()
        out.append((name, cfg))
    return out


def mma_config_name(cfg) -> str:
    return f"{cfg.warps}w{cfg.m_tiles}m{cfg.block_n}" + "-ax" * cfg.approx


def config_name(cfg) -> str:
    flags = "-pp" * cfg.pingpong + "-ov" * cfg.overlap + "-ax" * cfg.approx
    return (
        f"{cfg.block_n}x{cfg.stages}{flags}" + "-c3" * (cfg.consumers == 3) + "-ps" * cfg.persistent
    )


@dataclass
class Cell:
    """One case: milliseconds per call of every runner that ran."""

    dtype: str
    head_dim: int
    causal: bool
    seq: int
    batch: int
    heads: int
    ms: dict[str, float] = field(default_factory=dict)

    @property
    def flops(self) -> float:
        return attention_flops(
            self.batch, self.heads, self.seq, self.seq, self.head_dim, self.causal
        )

    def tflops(self, name: str) -> float:
        return self.flops / (self.ms[name] * 1e-3) / 1e12

    def best(self, prefix: str) -> str | None:
        names = [n for n in self.ms if n.startswith(prefix)]
        return min(names, key=self.ms.get) if names else None


def attention_flops(batch, heads, seq_q, seq_k, head_dim, causal) -> float:
    """Multiply-adds of ``Q Kᵀ`` and ``P V``, two FLOPs each: ``4 · b · h · seq_q · seq_k · d``,
    halved for causal attention (the usual count: the masked half is not work)."""
    full = 4.0 * batch * heads * seq_q * seq_k * head_dim
    return full / 2 if causal else full


def problem_size(seq: int, head_dim: int, tokens: int, hidden: int) -> tuple[int, int]:
    """``(batch, heads)``: ``hidden / head_dim`` heads, ``tokens / seq`` sequences (at least 1)."""
    if hidden % head_dim:
        raise ValueError(f"hidden {hidden} is not a multiple of head_dim {head_dim}")
    return max(1, tokens // seq), hidden // head_dim


def table(cells: list[Cell]) -> str:
    """TFLOP/s of every runner and the ratios to the fastest SDPA backend of the same case."""
    lines = [
        "| dtype | d | mode | seq | batch × heads | tirx | tirx wgmma | SDPA cuDNN | SDPA flash "
        "| SDPA efficient | Triton (config) | tirx / best SDPA | tirx wgmma / best SDPA "
        "| Triton / best SDPA |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        sdpa = c.best("sdpa ")
        tr = c.best("triton ")
        cols = [c.dtype, str(c.head_dim), "causal" if c.causal else "full", str(c.seq)]
        cols.append(f"{c.batch} × {c.heads}")
        mm, wg = c.best("tirx mma"), c.best("tirx wgmma")
        cols.append(f"{c.tflops(mm):.1f} ({mm[9:]})" if mm else _tf(c, "tirx"))
        cols.append(f"{c.tflops(wg):.1f} ({wg[11:]})" if wg else "–")
        cols += [_tf(c, f"sdpa {b}") for b in BACKENDS]
        cols.append(f"{c.tflops(tr):.1f} ({tr[7:]})" if tr else "–")
        for name in (mm or "tirx", wg):
            cols.append(f"{c.ms[sdpa] / c.ms[name]:.2f}" if sdpa and name in c.ms else "–")
        cols.append(f"{c.ms[sdpa] / c.ms[tr]:.2f}" if sdpa and tr else "–")
        lines.append("| " + " | ".join(cols) + " |")
    return "\n".join(lines)


def config_table(cells: list[Cell]) -> str:
    """TFLOP/s of each configuration timed of a kernel of which more than one was, per case:
    the A/B behind the main table's fastest."""
    names = []
    for prefix in ("tirx mma ", "tirx wgmma "):
        timed = sorted({n for c in cells for n in c.ms if n.startswith(prefix)})
        names += timed if len(timed) > 1 else []
    if not names:
        return ""
    head = "| dtype | d | mode | seq | " + " | ".join(n[5:] for n in names) + " |"
    lines = [head, "|---|---|---|---|" + "---|" * len(names)]
    for c in cells:
        cols = [c.dtype, str(c.head_dim), "causal" if c.causal else "full", str(c.seq)]
        cols += [_tf(c, n) for n in names]
        lines.append("| " + " | ".join(cols) + " |")
    return "\n".join(["TFLOP/s of each configuration:", "", *lines])


def _tf(cell: Cell, name: str) -> str:
    return f"{cell.tflops(name):.1f}" if name in cell.ms else "–"


# ----------------------------------------------------------------------------- runners


try:  # the Triton baseline, where triton is installed
    import triton
    import triton.language as tl
except ImportError:
    triton = None

if triton is not None:

    @triton.jit
    def _key_tiles(
        acc, row_max, row_sum, q, k_base, v_base, rows, dims, first, stop, seq_k, skn, qk_scale,
        BN: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
    ):  # fmt: skip
        """Key tiles ``first, first + BN, ... < stop`` into the running (acc, max, sum)."""
        for start in range(first, stop, BN):
            keys = start + tl.arange(0, BN)
            k_at = k_base + keys[None, :] * skn + dims[:, None]
            s = tl.dot(q, tl.load(k_at, mask=keys[None, :] < seq_k, other=0.0)) * qk_scale
            if MASKED:
                seen = keys[None, :] < seq_k
                if CAUSAL:
                    seen = seen & (keys[None, :] <= rows[:, None])
                s = tl.where(seen, s, float("-inf"))
            new_max = tl.maximum(row_max, tl.max(s, 1))
            alpha = tl.exp2(row_max - new_max)
            p = tl.exp2(s - new_max[:, None])
            row_sum = row_sum * alpha + tl.sum(p, 1)
            v_at = v_base + keys[:, None] * skn + dims[None, :]
            v = tl.load(v_at, mask=keys[:, None] < seq_k, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            row_max = new_max
        return acc, row_max, row_sum

    @triton.jit
    def _attention_fwd(
        Q, K, V, O, LSE, qk_scale, seq_q, seq_k,
        sqb, sqh, sqm, skb, skh, skn, sob, soh, som,
        heads: tl.constexpr, CAUSAL: tl.constexpr, D: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr,
    ):  # fmt: skip
        """FlashAttention-2's forward for one (query tile, batch·head) program: the tile's
        rows stay in registers; for each key tile the scores in float32, the running row
        maximum and sum in the exp2 domain (scale · log2 e folded into ``qk_scale``), the
        accumulator rescaled and ``P V`` added. Key tiles wholly left of the diagonal (all
        whole tiles, not causal) run unmasked; the others mask keys past ``seq_k`` and,
        causal, right of the diagonal (top-left aligned, as SDPA's is_causal)."""
        tile = tl.program_id(0)
        bh = tl.program_id(1)
        b, h = bh // heads, bh % heads
        rows = tile * BM + tl.arange(0, BM)
        dims = tl.arange(0, D)
        q_at = Q + b * sqb + h * sqh + rows[:, None] * sqm + dims[None, :]
        q = tl.load(q_at, mask=rows[:, None] < seq_q, other=0.0)
        k_base = K + b * skb + h * skh
        v_base = V + b * skb + h * skh
        row_max = tl.full([BM], float("-inf"), tl.float32)
        row_sum = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, D], tl.float32)
        if CAUSAL:
            stop = tl.minimum(seq_k, (tile + 1) * BM)
            clean = tl.minimum(tile * BM, stop) // BN * BN
        else:
            stop = seq_k
            clean = seq_k // BN * BN
        acc, row_max, row_sum = _key_tiles(
            acc, row_max, row_sum, q, k_base, v_base, rows, dims, 0, clean, seq_k, skn,
            qk_scale, BN, False, CAUSAL,
        )  # fmt: skip
        acc, row_max, row_sum = _key_tiles(
            acc, row_max, row_sum, q, k_base, v_base, rows, dims, clean, stop, seq_k, skn,
            qk_scale, BN, True, CAUSAL,
        )  # fmt: skip
        out = acc / row_sum[:, None]
        o_at = O + b * sob + h * soh + rows[:, None] * som + dims[None, :]
        tl.store(o_at, out.to(O.dtype.element_ty), mask=rows[:, None] < seq_q)
        lse = (row_max + tl.log2(row_sum)) * 0.6931471805599453
        tl.store(LSE + bh * seq_q + rows, lse, mask=rows < seq_q)


def triton_attention(q, k, v, o, lse, causal: bool, config):
    """A zero-argument runner of the Triton kernel (``config``: BM, BN, warps, stages)."""
    import math

    bm, bn, warps, stages = config
    batch, heads, seq_q, d = q.shape
    grid = ((seq_q + bm - 1) // bm, batch * heads)
    qk_scale = 1.0 / math.sqrt(d) * 1.4426950408889634

    def run():
        _attention_fwd[grid](
            q, k, v, o, lse, qk_scale, seq_q, k.shape[2],
            q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
            o.stride(0), o.stride(1), o.stride(2),
            heads=heads, CAUSAL=causal, D=d, BM=bm, BN=bn, num_warps=warps, num_stages=stages,
        )  # fmt: skip

    return run


def _sdpa(q, k, v, causal, backend):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = {
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
    }[backend]

    def run():
        with sdpa_kernel(chosen):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def _close(name: str, got, want, dtype) -> None:
    err = ((got.float() - want.float()).norm() / want.float().norm()).item()
    tol = 4e-3 if dtype == "float16" else 2e-2
    if not err <= tol:
        raise AssertionError(f"{name}: relative error {err:.2e} from SDPA (tolerance {tol:g})")


def measure(cell: Cell, reps: int, wgmma=(), mma=()) -> Cell:
    import torch
    from gemm_speed import time_runners

    import tirx
    from tirx.examples.attention import KERNELS, attention_executable
    from tirx.examples.attention_mma import default_config as mma_default
    from tirx.examples.attention_mma import make_attention as make_mma_attention
    from tirx.examples.attention_wgmma import default_config
    from tirx.examples.attention_wgmma import make_attention as make_wgmma_attention

    tdtype = getattr(torch, cell.dtype)
    shape = (cell.batch, cell.heads, cell.seq, cell.head_dim)
    gen = torch.Generator(device="cuda").manual_seed(cell.seq + cell.head_dim)
    q, k, v = (torch.randn(shape, device="cuda", generator=gen, dtype=tdtype) for _ in range(3))
    runners = {}
    want = None
    for backend in BACKENDS:
        run = _sdpa(q, k, v, cell.causal, backend)
        try:
            got = run()
        except RuntimeError as e:  # the backend does not take this case
            print(f"  sdpa {backend}: not run ({str(e).splitlines()[0][:100]})")
            continue
        if want is None:
            want = got
        _close(f"sdpa {backend}", got, want, cell.dtype)
        runners[f"sdpa {backend}"] = run
    if want is None:
        want = _math_reference(q, k, v, cell.causal)
    scale = cell.head_dim**-0.5
    major, minor = torch.cuda.get_device_capability()
    cfgs = mma or [(mma_config_name(mma_default(cell.head_dim)), None)]
    tirx_runs = [(f"tirx mma {n}", "mma_sync", cfg) for n, cfg in cfgs]
    if KERNELS["wgmma"].runs_on(10 * major + minor):
        cfgs = wgmma or [(config_name(default_config(cell.head_dim, cell.causal)), None)]
        tirx_runs += [(f"tirx wgmma {n}", "wgmma", cfg) for n, cfg in cfgs]
    for name, kernel, cfg in tirx_runs:
        if kernel == "wgmma" and cfg is not None:
            try:
                cfg.check(cell.head_dim)  # the kernel's own rule (three consumers: d 64 only)
            except ValueError:
                continue  # not a configuration of this head dim ("–" in the table)
        if cfg is None:
            exe = attention_executable(q, k, v, causal=cell.causal, kernel=kernel)
        else:
            b, h, n, d = shape
            make = make_wgmma_attention if kernel == "wgmma" else make_mma_attention
            fn = make(b, h, h, n, n, d, cell.dtype, cell.causal, cfg=cfg)
            exe = tirx.compile(fn, target="cuda")
        o, lse = torch.empty_like(q), torch.empty(shape[:3], device="cuda")
        exe(q, k, v, o, lse, scale)
        _close(name, o, want, cell.dtype)
        runners[name] = functools.partial(exe, q, k, v, o, lse, scale)
    for config in TRITON_CONFIGS if triton is not None else ():
        o_t, lse_t = torch.empty_like(q), torch.empty(shape[:3], device="cuda")
        run = triton_attention(q, k, v, o_t, lse_t, cell.causal, config)
        try:
            run()
        except Exception as e:  # noqa: BLE001 - a configuration the GPU cannot hold
            print(f"  triton {config}: not run ({type(e).__name__})")
            continue
        _close(f"triton {config}", o_t, want, cell.dtype)
        runners["triton " + "x".join(map(str, config[:2])) + f"/{config[2]}w/{config[3]}s"] = run
    cell.ms.update(time_runners(runners, reps, torch))
    return cell


def _math_reference(q, k, v, causal):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def report_body(cells: list[Cell], reps: int) -> str:
    """The result file's body (benchmarks/report.py writes the header: command, date, machine,
    versions)."""
    import torch

    return "\n".join(
        [
            "# Attention speed: tirx against SDPA's backends and Triton",
            "",
            f"cuDNN {torch.backends.cudnn.version()}",
            "",
            f"Median of {reps} samples per cell. Forward pass, `(batch, heads, seq, d)` "
            "tensors, as many keys as queries; TFLOP/s = 4·batch·heads·seq²·d / time, half "
            "that for causal. tirx: `tirx.examples.attention_mma` (mma.sync), the fastest of the "
            "configurations timed (named in parentheses: WwMmBN, -ax the approx softmax); tirx wgmma: `tirx.examples.attention_wgmma` "
            "(FlashAttention-3's structure, sm_90 only), the fastest of the configurations timed "
            "(named in parentheses: BNxSTAGES, -pp ping-pong, -ov overlap, -ax the approx softmax, -c3 three consumer warpgroups, head dim 64 only, -ps a persistent grid); each executable "
            "called directly. "
            "Ratios: the fastest SDPA backend's time / tirx's (or Triton's), above 1 is "
            "faster than SDPA.",
            "",
            table(cells),
            "",
            config_table(cells),
        ]
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--modes", default="full,causal")
    ap.add_argument("--tokens", type=int, default=16384, help="batch · seq of every case")
    ap.add_argument("--hidden", type=int, default=2048, help="heads · head_dim of every case")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument(
        "--mma-configs",
        default="",
        help="configurations of the mma.sync kernel to time, WwMmBN[-ax], comma separated "
        "(default: its default per head dim); the fastest counts",
    )
    ap.add_argument(
        "--wgmma-configs",
        default="",
        help="configurations of the wgmma kernel to time, BNxSTAGES[-pp][-ov][-ax][-c3][-ps], comma separated "
        "(default: its default per head dim); the fastest counts",
    )
    report.add_output_arguments(ap, "attention_speed")
    args = ap.parse_args(argv)
    wgmma = wgmma_configs(args.wgmma_configs)
    mma = mma_configs(args.mma_configs)
    from gemm_speed import gpu_visible

    if not gpu_visible():
        print(
            "attention_speed: no NVIDIA GPU is visible, so there is nothing to time; run it on "
            "a machine with one (the kernels compile without a GPU: see docs/attention.md)",
            file=sys.stderr,
        )
        return 2
    import torch

    cells = []
    for dtype in args.dtypes.split(","):
        for d in (int(x) for x in args.dims.split(",")):
            for mode in args.modes.split(","):
                for seq in (int(x) for x in args.seqs.split(",")):
                    batch, heads = problem_size(seq, d, args.tokens, args.hidden)
                    cell = Cell(dtype, d, mode == "causal", seq, batch, heads)
                    print(f"{dtype} d={d} {mode} seq={seq} ({batch} x {heads})", flush=True)
                    cells.append(measure(cell, args.reps, wgmma, mma))
                    torch.cuda.empty_cache()
    text = report_body(cells, args.reps)
    print(text)
    report.write_result("attention_speed", text, args, __file__, argv, gpu=report.gpu_name())
    return 0


if __name__ == "__main__":
    sys.exit(main())
