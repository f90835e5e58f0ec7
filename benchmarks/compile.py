"""How long ``tirx.compile`` takes for the seed kernel: cold, from a warm disk cache, and again.

    python benchmarks/compile.py [--runs N] [--arch sm_90] [--out FILE]

The table goes to ``benchmarks/results/compile-<machine>.md`` (``benchmarks/report.py``).

Every "fresh process" figure is the median over ``--runs`` new Python processes (those of
NVRTC alone and of the cold compile alternate, so that a shared machine's load weighs on both
alike); each one imports tirx and, on a machine with a GPU, initializes the CUDA driver before
its clock starts (cuInit and the primary context, as any program already using torch CUDA has;
where there is no GPU there is no driver to initialize, and nothing CUDA is imported). On a GPU
machine this matters: NVRTC's first compile in a process waits for the driver's initialization
when nothing did it before. Rows:

* NVRTC alone: ``compile_cuda`` (what tirx calls: NVRTC's C API through ctypes) on the seed's
  generated CUDA source with tirx's command line, first compile in the process (it loads
  libnvrtc). The goal's baseline is the faster of this and the next row.
* NVRTC through cuda-bindings: the same compile through NVIDIA's Python bindings
  (``cuda.bindings.nvrtc``), as a Python program calling NVRTC itself would: the bindings'
  import and their library search (``cuda.pathfinder``) included.
* cold: an empty ``TIRX_CACHE_DIR``; the clock runs from defining the seed kernel
  (``@T.function`` parses it) to ``tirx.compile`` returning a loaded executable (without a GPU:
  to the CUBIN). It includes what tirx loads lazily on first use (its CUDA backend modules,
  libnvrtc, loaded in a background thread while the kernel lowers). Goal: at most 1.1 x
  NVRTC alone.
* warm disk: the same in a second process with the same ``TIRX_CACHE_DIR`` (a disk hit: the
  front-end cache gives the lowered IR and the generated source without a parse, the CUBIN
  cache the binary). Goal: at most 10 ms. The "libraries preloaded" row is the same with tirx's CUDA backend
  imported and libnvrtc loaded before the clock starts: tirx's own work per kernel.
* warm disk, the call alone: the same disk hit, in a process that has initialized no CUDA
  driver (as a script compiling for a named arch, or any machine without a GPU), timed around
  the ``tirx.compile(k, "cuda -arch=sm_90")`` call itself. Goal: at most 10 ms, without
  importing the driver bindings (the module loads at the first launch).
* no CUDA driver initialized (a GPU machine only): NVRTC alone and the cold compile in
  processes that leave the driver alone before the clock, as a script or ``tirx compile`` for a
  named arch does; NVRTC's first compile then initializes the driver itself and waits for it
  (the cold compile starts that initialization beside its lowering). The parent process holds
  the GPU meanwhile, which makes the initialization shorter than where no process does.
* a second kernel in the cold process: after the cold compile, the same process defines and
  compiles a renamed copy of the seed (another file and kernel name: a miss in both caches);
  its time less its NVRTC compile call is tirx's own work per kernel once the first-use costs
  (imports, tables, the library's load) are paid. The difference from the cold run's share is
  what a fresh process pays once.
* repeat: ``tirx.compile`` of the same kernel object for the same target again in one
  process. Goal: at most 0.2 ms.
* lower: lowering alone (tile contracts checked) in a fresh process, seed and 128^3 GEMM.
* import tirx: ``import tirx`` alone in a fresh process (before every clock above; the
  construct families' modules load at first use, see docs/architecture.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date

from machine import cpu_name  # benchmarks/machine.py (scripts run from this folder)

GOAL_COLD_RATIO = 1.1
GOAL_WARM_MS = 10.0
GOAL_REPEAT_MS = 0.2


# ------------------------------------------------------------------- child processes


def _init_driver() -> int:
    """On a GPU machine (the parent says), cuInit and the primary context, outside the timed
    region; elsewhere nothing."""
    if os.environ.get("TIRX_BENCH_GPU") != "1":
        return 0
    from tirx.backend.cuda import driver

    n = driver.gpu_count()
    if n:
        driver.synchronize(0)
    return n


def child_tirx(target: str, mode: str, copy: str | None = None) -> dict:
    """``mode``: "full" (the cold or warm run), "preload" (libraries loaded before the clock),
    "nodriver" (as "full", the CUDA driver left alone before the clock). ``copy``: a file
    holding a renamed copy of the seed, compiled after the timed one in the same process (its
    figures under "second")."""
    import tirx

    if mode != "nodriver":
        _init_driver()
    if mode == "preload":
        import tirx.backend.cuda.build  # noqa: F401
        import tirx.backend.cuda.executable  # noqa: F401
        from tirx.backend.cuda.nvrtc import nvrtc_version

        nvrtc_version()
    t0 = time.perf_counter()
    from tirx.examples.warp_matmul import warp_matmul

    t1 = time.perf_counter()
    exe = tirx.compile(warp_matmul, target=target)
    result = _timed(exe, t0, t1, time.perf_counter())
    from tirx.backend.cuda import libnvrtc

    waited = getattr(libnvrtc, "load_waited_ms", None)  # (compile_ab.py runs older trees too)
    return {**result, "loaded": "load" in result["timings"],
            "preloaded": bool(libnvrtc.preloaded), "waited_ms": waited,
            "second": copy and _second_kernel(target, copy)}  # fmt: skip


def _timed(exe, t0: float, t1: float, t2: float) -> dict:
    """One define (``t0``..``t1``: importing the module that holds the kernel, its source read
    and @T.function's parse) and compile (``t1``..``t2``) of ``exe``: total ms, the cache's
    answer, NVRTC's compile call and the stage split, where "other" is what tirx.compile spent
    outside its stages (first-use imports, target, lookup) and the call's way in."""
    split = {"define": (t1 - t0) * 1e3, **exe.timings}
    staged = sum(v for k, v in exe.timings.items() if k not in ("parse", "other"))
    split["other"] = (t2 - t1) * 1e3 - staged
    return {"ms": (t2 - t0) * 1e3, "cache": exe.cache, "timings": split,
            "compile_ms": exe.nvrtc.nvrtc_ms}  # fmt: skip


def _second_kernel(target: str, copy: str) -> dict:
    """Define and compile the seed's renamed copy in ``copy`` (a cache miss: another file,
    another kernel name) in a process that has compiled the seed: tirx's work per kernel, its
    first-use costs paid."""
    import importlib.util

    import tirx

    spec = importlib.util.spec_from_file_location("tirx_bench_seed_copy", copy)
    module = importlib.util.module_from_spec(spec)
    t0 = time.perf_counter()
    spec.loader.exec_module(module)
    t1 = time.perf_counter()
    exe = tirx.compile(module.warp_matmul_copy, target=target)
    return _timed(exe, t0, t1, time.perf_counter())


def child_call(target: str) -> dict:
    """The ``tirx.compile`` call alone, in a process that has touched no CUDA driver (a script
    that compiles for a named arch; a machine without a GPU): the clock runs around the call
    only, after importing tirx and the kernel's module. Reports whether the call imported the
    driver bindings and what its stage timings add up to."""
    import tirx
    from tirx.examples.warp_matmul import warp_matmul

    c0, t0 = time.process_time(), time.perf_counter()
    exe = tirx.compile(warp_matmul, target=target)
    ms, cpu = (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3
    reported = sum(v for k, v in exe.timings.items() if k != "parse")
    return {"ms": ms, "cpu": cpu, "cache": exe.cache, "reported": reported,
            "driver": "cuda.bindings.driver" in sys.modules}  # fmt: skip


def _compile_input(source_file: str) -> tuple[str, list[str]]:
    """The seed's CUDA source and tirx's NVRTC command line for it (written by the parent)."""
    with open(source_file) as f:
        source = f.read()
    with open(source_file + ".json") as f:
        return source, json.load(f)


def child_nvrtc(source_file: str, arch: str, mode: str = "full") -> dict:
    from tirx.backend.cuda.libnvrtc import api
    from tirx.backend.cuda.nvrtc import compile_cuda

    if mode != "nodriver":
        _init_driver()
    source, command = _compile_input(source_file)
    t0 = time.perf_counter()
    api().get_version()  # load the library
    t1 = time.perf_counter()
    out = compile_cuda(source, arch=arch, filename="warp_matmul.cu", command=tuple(command))
    t2 = time.perf_counter()
    return {"ms": (t2 - t0) * 1e3, "load_ms": (t1 - t0) * 1e3, "cubin_bytes": len(out.cubin)}


def child_bindings(source_file: str) -> dict:
    """The same compile through cuda-bindings' nvrtc module (no tirx on the clock)."""
    _init_driver()
    source, command = _compile_input(source_file)
    t0 = time.perf_counter()
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()  # loads the library
    t1 = time.perf_counter()
    options = [o.encode() for o in command]
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"warp_matmul.cu", 0, [], [])
    assert int(err) == 0, err
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
    assert int(err) == 0, err
    err, n = nvrtc.nvrtcGetCUBINSize(prog)
    cubin = bytearray(n)
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    nvrtc.nvrtcDestroyProgram(prog)
    t2 = time.perf_counter()
    return {"ms": (t2 - t0) * 1e3, "load_ms": (t1 - t0) * 1e3, "cubin_bytes": len(cubin)}


def child_import() -> dict:
    t0 = time.perf_counter()
    import tirx  # noqa: F401

    return {"ms": (time.perf_counter() - t0) * 1e3}


def child_lower(arch: str) -> dict:
    import tirx  # noqa: F401
    from tirx.examples.gemm import make_gemm
    from tirx.examples.warp_matmul import warp_matmul
    from tirx.target import Target
    from tirx.transform.lower import lower_function

    sm = Target.parse(f"cuda -arch={arch}").arch_number
    t0 = time.perf_counter()
    lower_function(warp_matmul.ir, arch=sm)
    t1 = time.perf_counter()
    gemm = make_gemm(128, 128, 128)
    t2 = time.perf_counter()
    lower_function(gemm.ir, arch=sm)
    t3 = time.perf_counter()
    return {"seed": (t1 - t0) * 1e3, "gemm": (t3 - t2) * 1e3}


def _spawn(args: list[str], cache_dir: str, pycache: str) -> dict:
    # Bytecode is cached (in a private prefix) as in a normal installation, even where the
    # environment says PYTHONDONTWRITEBYTECODE; the parent warms it before measuring.
    env = dict(os.environ, TIRX_CACHE_DIR=cache_dir, PYTHONPYCACHEPREFIX=pycache)
    env["TIRX_BENCH_GPU"] = "1" if _has_gpu() else "0"
    env.pop("TIRX_CACHE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------ the parent


@functools.cache
def _has_gpu() -> bool:
    from tirx.backend.cuda import driver

    return driver.gpu_count() > 0


def _write_seed_source(arch: str, path: str) -> None:
    """The seed's generated CUDA at ``path`` and tirx's NVRTC command line beside it."""
    from tirx.backend.cuda.build import nvrtc_options
    from tirx.backend.cuda.codegen import generate
    from tirx.backend.cuda.nvrtc import command_line, nvrtc_version
    from tirx.examples.warp_matmul import warp_matmul
    from tirx.target import Target
    from tirx.transform.lower import lower_function

    sm = Target.parse(f"cuda -arch={arch}").arch_number
    with open(path, "w") as f:
        f.write(generate(lower_function(warp_matmul.ir, arch=sm)))
    with open(path + ".json", "w") as f:
        json.dump(list(command_line(arch, nvrtc_options(nvrtc_version()))), f)


def _write_seed_copy(path: str) -> None:
    """The seed's module with its kernel renamed ``warp_matmul_copy``, at ``path``."""
    from tirx.examples import warp_matmul

    with open(warp_matmul.__file__) as f:
        text = f.read()
    assert text.count("def warp_matmul(") == 1
    with open(path, "w") as f:
        f.write(text.replace("def warp_matmul(", "def warp_matmul_copy("))


def _repeat_ms(target: str, calls: int) -> float:
    import tirx
    from tirx.examples.warp_matmul import warp_matmul

    tirx.compile(warp_matmul, target=target)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        exe = tirx.compile(warp_matmul, target=target)
        times.append(time.perf_counter() - t0)
    assert exe.cache == "hit", exe.cache
    return statistics.median(times) * 1e3


def _no_driver_rows(nvrtc: list[dict], cold: list[dict], end: str) -> list[tuple]:
    """On a GPU machine, NVRTC alone and the cold compile in processes that initialized no CUDA
    driver before the clock (a script or ``tirx compile`` for a named arch, as a fresh process
    is): NVRTC's first compile then initializes the driver itself. Ratio and goal: to NVRTC
    alone there."""
    if not nvrtc:
        return []
    nv = statistics.median(r["ms"] for r in nvrtc)
    ms = statistics.median(r["ms"] for r in cold)
    return [
        ("NVRTC alone, no CUDA driver initialized before the clock", nv, "1.00", "", ""),
        (f"cold: parse -> {end}, no CUDA driver initialized before the clock", ms,
         f"{ms / nv:.2f} (to the row above)", f"<= {GOAL_COLD_RATIO} x the row above",
         "yes" if ms <= GOAL_COLD_RATIO * nv else "NO"),
    ]  # fmt: skip


def _median_split(results: list[dict]) -> dict:
    keys = results[0]["timings"].keys()
    return {k: statistics.median(r["timings"].get(k, 0.0) for r in results) for k in keys}


def _machine() -> str:
    import tirx

    parts = [
        f"tirx {tirx.__version__}",
        f"python {platform.python_version()}",
        f"{cpu_name()}, {os.cpu_count()} CPUs",
    ]
    if hasattr(os, "getloadavg"):  # a shared machine's figures are read against its load
        parts.append(f"load average {os.getloadavg()[0]:.1f} at the end")
    try:
        from importlib.metadata import version

        parts.append(f"cuda-bindings {version('cuda-bindings')}")
    except Exception:
        pass
    try:
        from tirx.backend.cuda.nvrtc import nvrtc_version

        parts.append("NVRTC {}.{}".format(*nvrtc_version()))
    except Exception as e:
        parts.append(f"NVRTC unavailable ({e})")
    from tirx.backend.cuda import driver

    if driver.gpu_count():
        from cuda.bindings import driver as drv

        _, dev = drv.cuDeviceGet(0)
        _, name = drv.cuDeviceGetName(64, dev)
        name = name.split(b"\0")[0].decode()
        parts.append(f"GPU {name} ({driver.device_arch(0)})")
    else:
        parts.append("no GPU (compile stops at the CUBIN)")
    return ", ".join(parts)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per figure")
    ap.add_argument("--repeat-calls", type=int, default=2000)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args, _ = ap.parse_known_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "tirx":
            result = child_tirx(*rest)
        elif kind == "call":
            result = child_call(rest[0])
        elif kind == "nvrtc":
            result = child_nvrtc(*rest)
        elif kind == "bindings":
            result = child_bindings(rest[0])
        elif kind == "import":
            result = child_import()
        else:
            result = child_lower(rest[0])
        print(json.dumps(result))
        return
    import report  # not in the children: what it imports would load before their clocks

    report.add_output_arguments(ap, "compile")
    args = ap.parse_args(argv)
    target = f"cuda -arch={args.arch}"
    runs = args.runs
    with tempfile.TemporaryDirectory(prefix="tirx-bench-") as tmp:
        src = os.path.join(tmp, "warp_matmul.cu")
        _write_seed_source(args.arch, src)
        copy = os.path.join(tmp, "seed_copy.py")
        _write_seed_copy(copy)
        pyc = os.path.join(tmp, "pycache")
        unused = os.path.join(tmp, "unused")
        for kind in (["nvrtc", src, args.arch], ["bindings", src],
                     ["tirx", target, "full", copy], ["lower", args.arch]):  # fmt: skip
            _spawn(kind, os.path.join(tmp, "warmup"), pyc)  # writes the bytecode
        # NVRTC alone and the cold compile take turns, so that the load of a shared machine
        # (which changes from second to second) weighs on both sides of the ratio alike
        nvrtc, bindings, cold, nvrtc_nd, cold_nd = [], [], [], [], []
        for i in range(runs):
            nvrtc.append(_spawn(["nvrtc", src, args.arch], unused, pyc))
            cold.append(_spawn(["tirx", target, "full", copy], os.path.join(tmp, f"cold{i}"), pyc))
            bindings.append(_spawn(["bindings", src], unused, pyc))
            if _has_gpu():  # without a GPU the rows above have no driver initialized already
                nvrtc_nd.append(_spawn(["nvrtc", src, args.arch, "nodriver"], unused, pyc))
                cold_nd.append(_spawn(["tirx", target, "nodriver"],
                                      os.path.join(tmp, f"cold-nd{i}"), pyc))  # fmt: skip
        warm_dir = os.path.join(tmp, "cold0")  # filled by the first cold run
        warm = [_spawn(["tirx", target, "full"], warm_dir, pyc) for _ in range(runs)]
        warm_pre = [_spawn(["tirx", target, "preload"], warm_dir, pyc) for _ in range(runs)]
        _spawn(["call", target], warm_dir, pyc)  # its bytecode
        call = [_spawn(["call", target], warm_dir, pyc) for _ in range(runs)]
        lower = [_spawn(["lower", args.arch], unused, pyc) for _ in range(runs)]
        imported = [_spawn(["import"], unused, pyc)["ms"] for _ in range(runs)]
    assert all(r["cache"] == "miss" for r in cold), [r["cache"] for r in cold]
    second = [r["second"] for r in cold]
    assert all(r["cache"] == "miss" for r in second), [r["cache"] for r in second]
    second_own = statistics.median(r["ms"] - r["compile_ms"] for r in second)
    assert all(r["cache"] == "hit" for r in warm + warm_pre + call)
    repeat = _repeat_ms(target, args.repeat_calls)

    nv_ctypes = statistics.median(r["ms"] for r in nvrtc)
    nv_bindings = statistics.median(r["ms"] for r in bindings)
    nv = min(nv_ctypes, nv_bindings)  # the goal's baseline: the faster way to NVRTC
    nv_load = statistics.median(r["load_ms"] for r in nvrtc)
    nv_bindings_load = statistics.median(r["load_ms"] for r in bindings)
    own = statistics.median(r["ms"] - r["compile_ms"] for r in cold)
    preloaded = sum(r["preloaded"] for r in cold)
    waits = [r["waited_ms"] for r in cold if r["waited_ms"] is not None and r["waited_ms"] > 0.1]
    waited = f", waiting {statistics.median(waits):.2f} ms (median of those)" if waits else ""
    cold_ms = statistics.median(r["ms"] for r in cold)
    warm_ms = statistics.median(r["ms"] for r in warm)
    warm_pre_ms = statistics.median(r["ms"] for r in warm_pre)
    call_ms = statistics.median(r["ms"] for r in call)
    call_reported = statistics.median(r["reported"] for r in call)
    call_cpu = statistics.median(r["cpu"] for r in call)
    call_driver = sum(r["driver"] for r in call)
    loaded = cold[0]["loaded"]
    end = "loaded" if loaded else "CUBIN"

    def split(results):
        return ", ".join(f"{k} {v:.2f}" for k, v in _median_split(results).items())

    rows = [
        ("NVRTC alone (compile_cuda: the C API through ctypes), fresh process", nv_ctypes,
         f"{nv_ctypes / nv:.2f}", "", ""),
        ("NVRTC alone through cuda-bindings (cuda.bindings.nvrtc), fresh process", nv_bindings,
         f"{nv_bindings / nv:.2f}", "", ""),
        (f"cold: parse -> {end}, fresh process, empty cache", cold_ms, f"{cold_ms / nv:.2f}",
         f"<= {GOAL_COLD_RATIO} x NVRTC", "yes" if cold_ms <= GOAL_COLD_RATIO * nv else "NO"),
        (f"warm disk: parse -> {end}, second process", warm_ms, f"{warm_ms / nv:.2f}",
         f"<= {GOAL_WARM_MS:g} ms", "yes" if warm_ms <= GOAL_WARM_MS else "NO"),
        ("warm disk, libraries preloaded (tirx's own work)", warm_pre_ms, f"{warm_pre_ms / nv:.2f}",
         "", ""),
        ("warm disk: the tirx.compile call alone, fresh process, no driver initialized",
         call_ms, f"{call_ms / nv:.2f}", f"<= {GOAL_WARM_MS:g} ms, driver not imported",
         "yes" if call_ms <= GOAL_WARM_MS and not call_driver else "NO"),
        ("a second kernel in the cold process (the seed renamed): tirx's own share, less its "
         "NVRTC compile call", second_own, "", "", ""),
        ("repeat tirx.compile, same process", repeat, f"{repeat / nv:.4f}",
         f"<= {GOAL_REPEAT_MS:g} ms", "yes" if repeat <= GOAL_REPEAT_MS else "NO"),
        *_no_driver_rows(nvrtc_nd, cold_nd, end),
        ("lower seed, fresh process", statistics.median(r["seed"] for r in lower), "", "", ""),
        ("lower gemm 128^3, fresh process", statistics.median(r["gemm"] for r in lower), "", "",
         ""),
        ("import tirx, fresh process", statistics.median(imported), "", "", ""),
    ]  # fmt: skip
    lines = [
        f"tirx compile benchmark, {date.today().isoformat()}: seed kernel (warp_matmul), "
        f"target {target!r}, median of {runs} fresh processes ({args.repeat_calls} calls for "
        f"the repeat)",
        _machine(),
        "",
        "| what | median ms | x the faster NVRTC alone | goal | ok |",
        "|---|---|---|---|---|",
        *(f"| {w} | {ms:.3f} | {r} | {g} | {ok} |" for w, ms, r, g, ok in rows),
        "",
        f"Split of the cold run (ms, medians): {split(cold)}",
        f"The cold run less its NVRTC compile call (median): {own:.2f} ms, tirx's own share. "
        f"NVRTC alone spent {nv_load:.2f} ms (median) loading the library before it "
        f"compiled, {nv_bindings_load:.2f} ms through cuda-bindings (their import, "
        f"cuda.pathfinder's and its search included); the cold run loads the library in a "
        f"background thread while the kernel lowers (it did in {preloaded} of {runs} "
        f"processes); the compile reached NVRTC before that load was done in {len(waits)} of "
        f"them{waited} (elsewhere tirx's own work was the longer of the two paths).",
        f"Split of the second kernel in the cold process (ms, medians; its NVRTC compile is the "
        f"process's second): {split(second)}",
        f"Split of the warm-disk run (ms, medians): {split(warm)}",
        f"Split of the preloaded warm run (ms, medians): {split(warm_pre)}",
        f"The call alone: its stage timings add up to {call_reported:.3f} ms of the "
        f"{call_ms:.3f} ms measured around it (medians), of which the process ran on a CPU "
        f"for {call_cpu:.3f} ms (the rest: waiting for one); the CUDA driver bindings were "
        f"imported in {call_driver} of {runs} processes.",
        "(define: importing the kernel's module, which reads its source and parses it, parse "
        "being @T.function's own share; nvrtc: key + cache lookup + NVRTC, which on a hit is "
        "the disk read and, in a fresh process, loading libnvrtc for its version; load: module "
        "load on the GPU; other: the rest of tirx.compile, mostly first-use imports of tirx's "
        "CUDA backend.) Python bytecode is cached, as after a normal install.",
    ]
    text = "\n".join(lines)
    print(text)
    report.write_result("compile", text, args, __file__, argv, gpu=report.gpu_name())


if __name__ == "__main__":
    main()
