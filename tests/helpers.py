"""Test helpers: define kernels from source text in a real file (so errors show its lines)."""

from __future__ import annotations

import itertools
import json
import linecache
import subprocess
import sys
import textwrap
from pathlib import Path

from tirx.ir import nodes as ir

_counter = itertools.count()

PRELUDE = """\
import tirx
from tirx import T
from tirx.layout import S, R, TileLayout, ComposeLayout, laneid, warpid, m
"""


def define(source: str, tmp_dir: Path, name: str | None = None, **scope):
    """Execute ``PRELUDE + source`` from a file in ``tmp_dir``; return the namespace, or the
    object called ``name`` in it."""
    text = PRELUDE + textwrap.dedent(source)
    path = Path(tmp_dir) / f"kernel_{next(_counter)}.py"
    path.write_text(text)
    linecache.checkcache(str(path))
    ns = {"__name__": path.stem, **scope}
    exec(compile(text, str(path), "exec"), ns)
    return ns[name] if name else ns


def caret_line(message: str) -> str:
    """The source line an error message quotes (the line above the carets)."""
    lines = message.splitlines()
    for i, ln in enumerate(lines):
        if ln.strip() and set(ln.strip()) == {"^"} and i > 0:
            return lines[i - 1].strip()
    raise AssertionError(f"no caret line in:\n{message}")


def caret_text(message: str) -> str:
    """The quoted line of an error message from its first caret on (what the caret is under)."""
    lines = message.splitlines()
    for i, ln in enumerate(lines):
        if ln.strip() and set(ln.strip()) == {"^"} and i > 0:
            return lines[i - 1][ln.index("^") :]
    raise AssertionError(f"no caret line in:\n{message}")


class LaunchRecorder:
    """Stands in for ``cuLaunchKernel`` (a :class:`driver.Launcher`'s ``entry``) without a GPU:
    decodes the argument block the driver would read and records
    ``(grid, block, smem, stream, *values)`` per launch."""

    def __init__(self, param_types):
        import struct

        from tirx.backend.cuda.driver import PARAM_TYPES

        self.formats = [struct.Struct("<" + PARAM_TYPES[t]) for t in param_types]
        self.calls = []

    def __call__(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        import ctypes

        n = len(self.formats)
        slots = list((ctypes.c_uint64 * n).from_address(params)) if n else []
        values = tuple(
            f.unpack(ctypes.string_at(slot, f.size))[0] for f, slot in zip(self.formats, slots)
        )
        self.calls.append(((gx, gy, gz), (bx, by, bz), smem, int(stream), *values))
        return (0,)


def attach_recorder(exe, ordinal: int = -1) -> LaunchRecorder:
    """Give a CUDA executable a launcher whose launches are recorded instead of run
    (``ordinal=-1``: its fast path takes CPU tensors)."""
    from tirx.backend.cuda import driver

    class FakeKernel:
        name, handle, max_dynamic_smem = exe.lowered.name, None, 48 * 1024

    recorder = LaunchRecorder(exe._kinds)
    exe._attach(driver.Launcher(FakeKernel(), exe._kinds, entry=recorder), ordinal)
    return recorder


def seed_cpu_args():
    """CPU tensors shaped as the seed kernel's parameters ``(A, B, Out)``."""
    import torch

    a = torch.arange(256, dtype=torch.float16).reshape(16, 16)
    b = torch.ones((8, 16), dtype=torch.float16)
    out = torch.zeros((16, 8), dtype=torch.float32)
    return a, b, out


# Ways to change a tensor in place that leave it a wrong argument for the seed's ``Out``
# (16x8 float32); a remembered tensor changed like this must be checked again.
IN_PLACE_CHANGES = {
    "t_": lambda t: t.t_(),
    "resize_": lambda t: t.resize_(8, 16),
    "as_strided_": lambda t: t.as_strided_((8, 16), (16, 1)),
    "unsqueeze_": lambda t: t.unsqueeze_(0),
    "set_": lambda t: t.set_(t.new_zeros((8, 16))),
    "data=": lambda t: setattr(t, "data", t.new_zeros((8, 16))),
    "data=dtype": lambda t: setattr(t, "data", t.new_zeros((16, 8)).double()),
}


def run_in_threads(work, n: int = 4) -> list:
    """Run ``work(i)`` for i in range(n), each in its own thread, all at once; the exceptions
    they raised."""
    import threading

    errors = []

    def guarded(i):
        try:
            work(i)
        except Exception as e:  # reported to the caller
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def evaluate(e, env):
    """An integer index expression's value under ``env`` (variable name -> int, ``"lane"`` for
    every special), with Python's integer semantics (floor division and modulo), the IR's."""
    if isinstance(e, int):
        return e
    if isinstance(e, ir.Const):
        return int(e.value)
    if isinstance(e, ir.Special):
        return env["lane"]
    if isinstance(e, ir.Var):
        return env[e.name]
    if isinstance(e, ir.Cast):
        return evaluate(e.value, env)
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {
        ir.Op.ADD: lambda: a + b,
        ir.Op.SUB: lambda: a - b,
        ir.Op.MUL: lambda: a * b,
        ir.Op.FLOORDIV: lambda: a // b,
        ir.Op.FLOORMOD: lambda: a % b,
        ir.Op.BITXOR: lambda: a ^ b,
        ir.Op.BITAND: lambda: a & b,
        ir.Op.SHR: lambda: a >> b,
        ir.Op.SHL: lambda: a << b,
    }[e.op]()


_REFERENCE_CUDA = r"""
import importlib.util, sys
from tvm_tirx.tirx import compile
spec = importlib.util.spec_from_file_location("ref_kernel", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
ex = compile(getattr(module, sys.argv[2]), target={"kind": "cuda", "arch": "sm_90"})
print(ex.mod.imports[0].inspect_source("cuda"))
"""


def reference_cuda(path: Path, kernel: str) -> str:
    """The CUDA the real TIRx generates for ``kernel``, a ``@T.function`` of the file ``path``
    (written with ``from tvm_tirx.script import tirx as T``), compiled for sm_90 under
    ``TIRX_REFERENCE_PYTHON`` (skips the test without it; fails it if the real TIRx does)."""
    import os
    import shutil
    import subprocess

    import pytest

    reference = os.environ.get("TIRX_REFERENCE_PYTHON", "")
    if not reference:
        pytest.skip("set TIRX_REFERENCE_PYTHON to a python with apache-tvm-tirx==0.1.0a4")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    env = dict(os.environ, CUDA_PATH=os.path.dirname(os.path.dirname(nvcc)))
    out = subprocess.run(
        [reference, "-c", _REFERENCE_CUDA, str(path), kernel],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    if out.returncode:
        pytest.fail(f"the real TIRx failed:\n{out.stderr[-3000:]}")
    return out.stdout


def fresh_process_json(code: str) -> dict:
    """Run ``code`` (dedented) in a fresh interpreter from the repository root; the value of
    the JSON line it prints last."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
