"""What one kernel launch costs from Python: tirx's executable against the alternatives.

    python benchmarks/launch.py [--launches 20000] [--reps 15] [--out FILE]

On a GPU machine, each launcher issues ``--launches`` launches of a one-warp kernel in a tight
loop, then synchronizes once; the time per launch is the batch's wall time divided by the
count. Every launcher runs one warm-up batch, then ``--reps`` batches, round-robin across
launchers (so drift affects them alike); the table gives the median (and the best) per launch
and the ratio to raw ``cuLaunchKernel``. Launchers:

* tirx: ``exe(a, b, out)``, the seed kernel (warp_matmul, 16x16 @ 16x8) compiled by
  ``tirx.compile``, with every argument checked (dtype, shape, device, contiguity) on each call
  (by the memo: the same tensors, unchanged since their checks); its fast path is the C
  extension's (``exe.fast_path == "c"``) where it was built at install, as the table says;
* raw cuLaunchKernel: the same cubin loaded with cuda.bindings, arguments packed once (the
  floor for a launch from Python);
* CuPy RawKernel: the same generated CUDA source compiled by CuPy, called with CuPy views of
  the same tensors (CuPy packs its arguments on each call);
* Triton: a trivial ``@triton.jit`` kernel with one program that loads a float32, adds 1 and
  stores it back (``add_one[(1,)](x)``), i.e. Triton's launch path with its JIT dispatch;
* torch: ``x.add_(1)`` on a one-element CUDA tensor (torch's dispatcher and its own launch).

Diagnostic rows split tirx's cost: the executable with its Python runner (what a call costs
without the C extension), its driver.Launcher called with ready values (no checks; the launch
the checked path uses, which packs a new argument block per call), and the executable's fast
path (checks and memo), C and Python, with the launch replaced by a no-op. A launcher whose
package is missing is skipped, with a note in the table. Goal: tirx <= 1.25 x raw, and below Triton and torch.

Without a GPU the script measures what it can, the Python cost of one call with the launch
replaced by a no-op and CPU tensors standing in for CUDA ones (see ``--help``).

The table goes to ``benchmarks/results/launch-<machine>.md``, the stand-in's to
``launch-<machine>-stub.md`` (``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import platform
import statistics
import time
from datetime import date

import report  # benchmarks/report.py (scripts run from this folder)
from machine import cpu_name  # benchmarks/machine.py

GOAL_RATIO = 1.25


class _NoKernel:
    """Enough of a driver.Kernel for a Launcher that launches nothing."""

    name, handle, max_dynamic_smem = "warp_matmul", None, 48 * 1024


def _stub_launcher(kinds, kernel=None):
    """A driver.Launcher whose entry (cuLaunchKernel) launches nothing and answers success."""
    from tirx.backend.cuda import driver

    ok = (driver.OK(),)

    def entry(*args):
        return ok

    return driver.Launcher(kernel or _NoKernel(), kinds, entry=entry)


# --------------------------------------------------------------------------- launchers


def _seed():
    import torch

    import tirx
    from tirx.examples.warp_matmul import warp_matmul

    exe = tirx.compile(warp_matmul, target="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((16, 16), device="cuda", generator=gen).half()
    b = torch.randn((8, 16), device="cuda", generator=gen).half()
    out = torch.zeros((16, 8), device="cuda")
    exe(a, b, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a.float() @ b.float().T, rtol=2e-4, atol=2e-4)
    return exe, a, b, out


def tirx_launcher(exe, a, b, out):
    return _calls(exe, a, b, out)


def tirx_launcher_only(exe, a, b, out):
    import torch

    launcher, grid, block, smem = exe._launcher, exe._grid, exe._block, exe._smem
    pa, pb, po = a.data_ptr(), b.data_ptr(), out.data_ptr()
    stream = int(torch.cuda.current_stream().cuda_stream)

    def batch(n):
        for _ in range(n):
            launcher(grid, block, smem, stream, pa, pb, po)

    return batch


def _twin(exe, launcher, ordinal, native):
    """The seed executable again (same code, its own call state) launching through
    ``launcher``, its fast path built: compiled (``native=None``) or Python (False)."""
    import tirx
    from tirx.examples.warp_matmul import warp_matmul

    twin = tirx.compile(warp_matmul, target=exe.target)
    twin._attach(launcher, ordinal)
    twin._build_runner(native=native)  # what the first good call builds
    want = "python" if native is False else "c"
    if twin.fast_path != want:
        raise RuntimeError(f"no {want} fast path here (the C extension is not built)")
    return twin


def _calls(f, a, b, out):
    def batch(n):
        for _ in range(n):
            f(a, b, out)

    batch.exe = f
    return batch


def tirx_cycling(exe, a, b, out):
    """``Out`` a different tensor object on every call (eight, in turn): every call misses the
    memo, so the checks run in full (in C, where the extension is built)."""
    import torch

    outs = [torch.zeros_like(out) for _ in range(8)]

    def batch(n):
        for i in range(n):
            exe(a, b, outs[i & 7])

    return batch


def tirx_python_runner(exe, a, b, out):
    return _calls(_twin(exe, exe._launcher, 0, native=False), a, b, out)


def tirx_checks_only(exe, a, b, out, ordinal=0, native=False):
    """The fast path with a launch that does nothing: with ``native``, the C runner calling
    the extension's recording stand-in for cuLaunchKernel; else the Python runner calling a
    no-op Python entry."""
    launcher = _stub_launcher(exe._kinds)
    if native is not False:
        from tirx.backend.cuda import _launch

        launcher.entry_address = _launch.record_entry()
    return _calls(_twin(exe, launcher, ordinal, native), a, b, out)


def tirx_c_checks_only(exe, a, b, out, ordinal=0):
    return tirx_checks_only(exe, a, b, out, ordinal, native=None)


def raw_launcher(exe, a, b, out):
    import torch
    from cuda.bindings import driver as drv

    err, module = drv.cuModuleLoadData(exe.cubin)
    assert int(err) == 0, err
    err, fn = drv.cuModuleGetFunction(module, exe.lowered.name.encode())
    assert int(err) == 0, err
    values = (ctypes.c_void_p * 3)(a.data_ptr(), b.data_ptr(), out.data_ptr())
    slots = (ctypes.c_void_p * 3)(*(ctypes.addressof(values) + 8 * i for i in range(3)))
    params = ctypes.addressof(slots)
    stream = drv.CUstream(int(torch.cuda.current_stream().cuda_stream))
    launch = drv.cuLaunchKernel
    (err,) = launch(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, 0)
    assert int(err) == 0, err

    def batch(n):
        for _ in range(n):
            launch(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, 0)

    batch.keep = (module, values, slots)  # alive as long as the batch
    return batch


def cupy_launcher(exe, a, b, out):
    import cupy
    import torch

    from tirx.backend.cuda.build import NVRTC_OPTIONS
    from tirx.backend.cuda.nvrtc import DEFAULT_OPTIONS

    kernel = cupy.RawKernel(
        exe.source, exe.lowered.name, options=(*DEFAULT_OPTIONS, *NVRTC_OPTIONS), backend="nvrtc"
    )
    ca, cb, cout = cupy.asarray(a), cupy.asarray(b), cupy.asarray(out)
    out.zero_()
    kernel((1,), (32,), (ca, cb, cout))
    cupy.cuda.Device().synchronize()
    torch.testing.assert_close(out, a.float() @ b.float().T, rtol=2e-4, atol=2e-4)
    grid, block, args = (1,), (32,), (ca, cb, cout)

    def batch(n):
        for _ in range(n):
            kernel(grid, block, args)

    return batch


def triton_launcher(exe, a, b, out):
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr):
        x = tl.load(x_ptr)
        tl.store(x_ptr, x + 1)

    x = torch.zeros(1, device="cuda")
    add_one[(1,)](x)
    torch.cuda.synchronize()
    assert x.item() == 1.0
    grid = (1,)

    def batch(n):
        for _ in range(n):
            add_one[grid](x)

    return batch


def torch_launcher(exe, a, b, out):
    import torch

    x = torch.zeros(1, device="cuda")

    def batch(n):
        for _ in range(n):
            x.add_(1)

    return batch


LAUNCHERS = [
    # (label, factory, package it needs, diagnostic)
    ("tirx exe(a, b, out), checks on", tirx_launcher, "tirx", False),
    ("raw cuLaunchKernel, pre-packed args", raw_launcher, "cuda.bindings", False),
    ("CuPy RawKernel, same source", cupy_launcher, "cupy", False),
    ("Triton, trivial kernel (add_one[(1,)](x))", triton_launcher, "triton", False),
    ("torch x.add_(1), one element", torch_launcher, "torch", False),
    (
        "(tirx exe, Out cycling through 8 tensors: full checks each call)",
        tirx_cycling,
        "tirx",
        True,
    ),
    ("(tirx exe, Python runner: no C extension)", tirx_python_runner, "tirx", True),
    (
        "(tirx driver.Launcher alone: no checks, a new block per call)",
        tirx_launcher_only,
        "tirx",
        True,
    ),
    ("(tirx exe checks only, C runner, launch stubbed)", tirx_c_checks_only, "tirx", True),
    ("(tirx exe checks only, Python runner, launch stubbed)", tirx_checks_only, "tirx", True),
]


# ----------------------------------------------------------------------------- timing


def _per_launch(batch, n, sync) -> float:
    sync()
    t0 = time.perf_counter()
    batch(n)
    sync()
    return (time.perf_counter() - t0) / n


def _measure(batches: dict, n: int, reps: int, sync) -> dict[str, list[float]]:
    for batch in batches.values():  # warm up
        _per_launch(batch, max(n // 10, 100), sync)
    times = {label: [] for label in batches}
    gc.disable()
    try:
        for _ in range(reps):
            for label, batch in batches.items():
                times[label].append(_per_launch(batch, n, sync))
    finally:
        gc.enable()
    return times


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"python {platform.python_version()}"]
    for dist in ("torch", "triton", "cupy-cuda13x", "cupy-cuda12x", "cupy", "cuda-bindings"):
        try:
            parts.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            pass
    return ", ".join(parts)


def _gpu_line() -> str:
    from cuda.bindings import driver as drv

    _, dev = drv.cuDeviceGet(0)
    _, name = drv.cuDeviceGetName(64, dev)
    _, drv_version = drv.cuDriverGetVersion()
    name = name.split(b"\0")[0].decode()
    return f"GPU {name}, driver CUDA {drv_version // 1000}.{drv_version % 1000 // 10}"


def run_gpu(args) -> str:
    import torch

    exe, a, b, out = _seed()
    batches, notes = {}, {}
    for label, factory, package, _ in LAUNCHERS:
        try:
            __import__(package)
        except ImportError:
            notes[label] = f"skipped: {package} is not installed"
            continue
        try:
            batches[label] = factory(exe, a, b, out)
        except Exception as e:  # a baseline that cannot run here is reported, not fatal
            notes[label] = f"skipped: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
    times = _measure(batches, args.launches, args.reps, torch.cuda.synchronize)
    torch.testing.assert_close(out, a.float() @ b.float().T, rtol=2e-4, atol=2e-4)

    med = {label: statistics.median(t) * 1e6 for label, t in times.items()}
    raw = med.get(LAUNCHERS[1][0])
    lines = [
        f"tirx launch benchmark, {date.today().isoformat()}: {args.launches} launches per "
        f"batch, median of {args.reps} batches after a warm-up",
        f"{_gpu_line()}; {cpu_name()}, {os.cpu_count()} CPUs; {_versions()}",
        f"tirx fast path: {exe.fast_path}",
        "",
        "| launcher | median us/launch | best us/launch | x raw | note |",
        "|---|---|---|---|---|",
    ]
    for label, *_ in LAUNCHERS:
        if label in med:
            ratio = f"{med[label] / raw:.2f}" if raw else "-"
            best = min(times[label]) * 1e6
            lines.append(f"| {label} | {med[label]:.2f} | {best:.2f} | {ratio} | |")
        else:
            lines.append(f"| {label} | - | - | - | {notes[label]} |")
    ours = med.get(LAUNCHERS[0][0])
    lines.append("")
    if ours and raw:
        ok = "yes" if ours <= GOAL_RATIO * raw else "NO"
        lines.append(f"Goal tirx <= {GOAL_RATIO} x raw: {ours / raw:.2f} x -> {ok}")
    for label, name in ((LAUNCHERS[3][0], "Triton"), (LAUNCHERS[4][0], "torch")):
        if ours and label in med:
            ok = "yes" if ours < med[label] else "NO"
            lines.append(f"Goal tirx below {name}: {ours:.2f} vs {med[label]:.2f} us -> {ok}")
    return "\n".join(lines)


def run_cpu_stub(args) -> str:
    """No GPU: the Python cost of a call, the launch replaced by a no-op, CPU tensors."""
    import torch

    import tirx
    from tirx.backend.cuda import driver
    from tirx.examples.warp_matmul import warp_matmul

    a = torch.zeros((16, 16), dtype=torch.float16)
    b = torch.zeros((8, 16), dtype=torch.float16)
    out = torch.zeros((16, 8))
    exe = tirx.compile(warp_matmul, target="cuda -arch=sm_90")
    fast = tirx_checks_only(exe, a, b, out, ordinal=-1)  # -1: accept CPU tensors
    try:
        fast_c = tirx_c_checks_only(exe, a, b, out, ordinal=-1)
    except (ImportError, RuntimeError):
        fast_c = None

    # The per-call path every call took before the runner: ArgChecker on every argument.
    before = tirx.compile(warp_matmul, target="cuda -arch=sm_90")
    before._attach(_stub_launcher(exe._kinds), -1)
    launch, stream = before._launch, driver.current_torch_stream

    def checked(n):
        for _ in range(n):
            launch(stream(), *before.checked_values((a, b, out)))

    entry, s = _stub_launcher(exe._kinds).entry, driver.STREAMS[0]

    def floor(n):
        for _ in range(n):
            entry(None, 1, 1, 1, 32, 1, 1, 0, s, 0, 0)

    cycling = tirx_cycling(fast_c.exe, a, b, out) if fast_c is not None else None
    batches = {
        "no-op launcher called directly (floor)": floor,
        "tirx exe(a, b, out): C runner, checks on": fast_c,
        "tirx exe(a, b, outs[i % 8]): C runner, full checks each call": cycling,
        "tirx exe(a, b, out): Python runner, checks on": fast,
        "checked path: ArgChecker on every argument": checked,
    }
    batches = {label: batch for label, batch in batches.items() if batch is not None}
    times = _measure(batches, args.launches, args.reps, lambda: None)
    med = {label: statistics.median(t) * 1e9 for label, t in times.items()}
    base = med["no-op launcher called directly (floor)"]
    lines = [
        f"tirx per-call Python cost without a GPU, {date.today().isoformat()}: the seed "
        f"executable with its launch replaced by a no-op, torch CPU tensors standing in for "
        f"CUDA ones; {args.launches} calls per batch, median of {args.reps} batches",
        f"{cpu_name()}, {os.cpu_count()} CPUs, {_versions()}",
        "",
        "| path | median ns/call | over the floor, ns |",
        "|---|---|---|",
        *(f"| {label} | {ns:.0f} | {ns - base:.0f} |" for label, ns in med.items()),
        "",
        "The stream is 0 here (torch has no CUDA); on the GPU one C call reads torch's current "
        "stream. The C runner's floor is a C stand-in for cuLaunchKernel, cheaper than the "
        "Python no-op above, so its row can be below the floor.",
    ]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=15)  # the GPU host is shared: noisy
    ap.add_argument(
        "--cpu-stub",
        action="store_true",
        help="measure the per-call Python cost with a no-op launch (the default without a GPU)",
    )
    report.add_output_arguments(ap, "launch")
    args = ap.parse_args(argv)
    from tirx.backend.cuda import driver

    stub = args.cpu_stub or driver.gpu_count() == 0
    text = run_cpu_stub(args) if stub else run_gpu(args)
    print(text)
    report.write_result(
        "launch", text, args, __file__, argv, gpu=report.gpu_name(), suffix="-stub" if stub else ""
    )


if __name__ == "__main__":
    main()
