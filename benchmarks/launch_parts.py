"""Where the time of one launch goes: the cost of each piece of a checked launch on this host.

    python benchmarks/launch_parts.py [--calls 20000] [--reps 7] [--out FILE]

Each row times one statement run ``--calls`` times in a loop (``timeit``, garbage collection
off), median of ``--reps`` repetitions, minus the cost of the empty loop. Rows that launch
synchronize once after each loop, so they measure the host's submission rate, and are measured
round-robin (a warm-up each, then the repetitions interleaved, so drift affects them alike).
The tensor rows use a 16x16 float16 CUDA tensor (a CPU tensor without a GPU, where the launch
rows are skipped). Use it to see what a launch path can afford; ``benchmarks/launch.py`` is
the benchmark of whole launchers. The table goes to ``benchmarks/results/launch_parts-<machine>.md``
(``benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import struct
import sys
import timeit
import weakref
from datetime import date

import report  # benchmarks/report.py (scripts run from this folder)
from machine import cpu_name  # benchmarks/machine.py


def _time(stmt: str, scope: dict, calls: int, reps: int) -> float:
    timer = timeit.Timer(stmt, globals=scope)
    timer.timeit(max(calls // 10, 100))
    return statistics.median(timer.timeit(calls) / calls for _ in range(reps))


def _round_robin(rows, scope: dict, calls: int, reps: int, sync) -> dict[str, float]:
    """Launch rows: a warm-up each, then the repetitions interleaved across rows (so that a
    drift of the GPU or the host affects them alike)."""
    import gc

    timers = {label: timeit.Timer(stmt, globals=scope) for label, stmt, _, _ in rows}
    for t in timers.values():
        t.timeit(max(calls // 10, 100))
    out = {label: [] for label in timers}
    gc.disable()
    try:
        for _ in range(reps):
            for label, t in timers.items():
                sync()
                t0 = timeit.default_timer()
                t.timeit(calls)
                sync()
                out[label].append((timeit.default_timer() - t0) / calls)
    finally:
        gc.enable()
    return {label: statistics.median(v) for label, v in out.items()}


def _cuda_scope():
    """The seed kernel loaded three ways: tirx's executable, cuda.bindings, ctypes on libcuda."""
    import torch
    from cuda.bindings import driver as drv

    import tirx
    from tirx.examples.warp_matmul import warp_matmul

    exe = tirx.compile(warp_matmul, target="cuda")
    a = torch.randn((16, 16), device="cuda").half()
    b = torch.randn((8, 16), device="cuda").half()
    out = torch.zeros((16, 8), device="cuda")
    exe(a, b, out)
    exe_py = tirx.compile(warp_matmul, target="cuda")  # a twin: its own runner, Python only
    exe_py.load()  # (an executable loads its module at its first launch; this one has none)
    exe_py._build_runner(native=False)
    fn = exe._module.function(exe.lowered.name).handle
    values = (ctypes.c_void_p * 3)(a.data_ptr(), b.data_ptr(), out.data_ptr())
    slots = (ctypes.c_void_p * 3)(*(ctypes.addressof(values) + 8 * i for i in range(3)))
    params = ctypes.addressof(slots)
    sraw = torch._C._cuda_getCurrentRawStream(0)
    stream = drv.CUstream(sraw)

    argtypes = (ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p)
    argtypes = (*argtypes, ctypes.c_void_p)
    err, addr, _ = drv.cuGetProcAddress(b"cuLaunchKernel", 12000, 0)
    assert int(err) == 0, err
    addr = int(addr)
    c_launch = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(addr)  # releases the GIL
    py_launch = ctypes.PYFUNCTYPE(ctypes.c_int, *argtypes)(addr)  # keeps it
    lib = ctypes.CDLL("libcuda.so.1")
    dll_launch = lib.cuLaunchKernel
    dll_launch.argtypes, dll_launch.restype = argtypes, ctypes.c_int
    fn_int = int(fn)
    assert c_launch(fn_int, 1, 1, 1, 32, 1, 1, 0, sraw, params, None) == 0
    buf = ctypes.create_string_buffer(24)
    pack = struct.Struct("<QQQ").pack_into
    import functools

    packp = functools.partial(pack, buf, 0)
    scope = dict(
        torch=torch,
        drv=drv,
        exe=exe,
        exe_py=exe_py,
        a=a,
        b=b,
        out=out,
        fn=fn,
        fn_int=fn_int,
        params=params,
        stream=stream,
        sraw=sraw,
        c_launch=c_launch,
        py_launch=py_launch,
        dll_launch=dll_launch,
        d=torch.float16,
        s=torch.Size((16, 16)),
        st=(16, 1),
        s_tuple=(16, 16),
        raw=torch._C._cuda_getCurrentRawStream,
        packp=packp,
        launcher=exe._launcher,
        grid=exe._grid,
        block=exe._block,
        smem=exe._smem,
        pa=a.data_ptr(),
        pb=b.data_ptr(),
        po=out.data_ptr(),
        w=weakref.ref(a),
        keep=(values, slots, lib),
    )
    return scope, torch.cuda.synchronize


ROWS = [
    # (label, statement, needs a GPU, launches)
    ("empty loop (subtracted from the rows below)", "pass", False, False),
    ("a.dtype is d", "a.dtype is d", False, False),
    ("a.shape == s (torch.Size)", "a.shape == s", False, False),
    ("a.shape == s (tuple)", "a.shape == s_tuple", False, False),
    ("a.get_device() == 0", "a.get_device() == 0", False, False),
    ("a.is_contiguous()", "a.is_contiguous()", False, False),
    ("a.stride() == st", "a.stride() == st", False, False),
    ("a.data_ptr()", "a.data_ptr()", False, False),
    ("a.is_cuda", "a.is_cuda", False, False),
    ("a._version", "a._version", False, False),
    ("weak reference check", "w() is a", False, False),
    ("torch's current raw stream", "raw(0)", True, False),
    ("pack 3 pointers (struct.pack_into)", "packp(pa, pb, po)", False, False),
    ("cuda.bindings cuLaunchKernel, pre-packed", "drv.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, 0)", True, True),
    ("cuda.bindings cuLaunchKernel, stream as int", "drv.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, sraw, params, 0)", True, True),
    ("ctypes CFUNCTYPE cuLaunchKernel (GIL released)", "c_launch(fn_int, 1, 1, 1, 32, 1, 1, 0, sraw, params, None)", True, True),
    ("ctypes PYFUNCTYPE cuLaunchKernel (GIL held)", "py_launch(fn_int, 1, 1, 1, 32, 1, 1, 0, sraw, params, None)", True, True),
    ("ctypes CDLL cuLaunchKernel with argtypes", "dll_launch(fn_int, 1, 1, 1, 32, 1, 1, 0, sraw, params, None)", True, True),
    ("tirx driver.Launcher, ready values", "launcher(grid, block, smem, sraw, pa, pb, po)", True, True),
    ("tirx exe(a, b, out)", "exe(a, b, out)", True, True),
    ("tirx exe(a, b, out), Python runner", "exe_py(a, b, out)", True, True),
    ("cuda.bindings cuLaunchKernel, pre-packed (again)", "drv.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, 0)", True, True),
]  # fmt: skip


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=7)
    report.add_output_arguments(ap, "launch_parts")
    args = ap.parse_args(argv)
    import torch

    from tirx.backend.cuda import driver

    gpu = driver.gpu_count() > 0
    if gpu:
        scope, sync = _cuda_scope()
    else:
        a = torch.randn((16, 16)).half()
        scope = dict(
            a=a, w=weakref.ref(a), d=torch.float16, s=torch.Size((16, 16)), s_tuple=(16, 16), st=(16, 1),
            packp=lambda *v: None, pa=1, pb=2, po=3,
        )  # fmt: skip
        sync = None
    rows, floor = [], None
    launch_times = _round_robin(
        [r for r in ROWS if r[3] and gpu], scope, args.calls, args.reps, sync
    )
    for label, stmt, needs_gpu, launches in ROWS:
        if needs_gpu and not gpu:
            continue
        if launches:
            rows.append((label, stmt, (launch_times[label] - floor) * 1e9, "launch"))
            continue
        if label.startswith("pack") and not gpu:
            import functools

            buf = ctypes.create_string_buffer(24)
            scope["packp"] = functools.partial(struct.Struct("<QQQ").pack_into, buf, 0)
        t = _time(stmt, scope, args.calls, args.reps)
        if floor is None:
            floor = t
            rows.append((label, stmt, t * 1e9, ""))
            continue
        rows.append((label, stmt, (t - floor) * 1e9, "launch" if launches else ""))
    where = "GPU" if gpu else "CPU (no GPU: tensor rows on a CPU tensor, launch rows skipped)"
    lines = [
        f"tirx launch parts, {date.today().isoformat()}: {where}; {cpu_name()}; "
        f"python {sys.version.split()[0]}, torch {torch.__version__}; "
        f"{args.calls} calls per repetition, median of {args.reps}",
        "",
        "| piece | statement | ns per call |",
        "|---|---|---|",
    ]
    for label, stmt, ns, _ in rows:
        lines.append(f"| {label} | `{stmt}` | {ns:,.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    report.write_result("launch_parts", text, args, __file__, argv, gpu=report.gpu_name())


if __name__ == "__main__":
    main()
