"""``exe.profile(*args)`` on the GPU: Nsight Compute runs the kernel in a child process.

The parent saves what the child needs in a temporary folder (the lowered kernel, serialized by
:mod:`tirx.ir.serial`; its CUDA source, so the compile is a cache lookup; the arch; the
arguments, with ``torch.save``), then runs::

    ncu --csv --print-units base --clock-control none --kernel-name <kernel> --launch-count 1
        --metrics <METRICS> <python> -m tirx.profile_runner <folder>

The child (:mod:`tirx.profile_runner`) rebuilds the executable, loads the
arguments onto the GPU and launches the kernel once; ncu replays that launch as often as its
metrics need and prints one CSV table, which :func:`tirx.backend.cuda.ncu_report.parse_csv`
reads. The caller's tensors are not written (the child has copies). ``--clock-control none``
leaves the GPU at the clocks it runs at (ncu locks them to base otherwise).

A metric this ncu does not know (names change between versions and chips) is dropped and the
run repeated; the profile lists it as ``missing``. Where ncu is not installed, or no GPU is
visible, :func:`profile` raises a TirxError that says what to install or where to run.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ... import config
from ...errors import TirxError
from .ncu_report import METRICS, parse_csv
from .tools import find_tool

__all__ = ["find_ncu", "command", "profile", "NcuError"]

TIMEOUT_S = 600.0
_SEARCH = ("/usr/local/cuda", "/opt/nvidia")  # toolkit and standalone Nsight Compute installs


class NcuError(TirxError):
    """Nsight Compute is missing, or could not profile the kernel."""


def find_ncu() -> str | None:
    """The ``ncu`` to run: ``$TIRX_NCU``, else on ``PATH`` (or a pip-installed CUDA tool),
    else in a CUDA toolkit (``$CUDA_HOME``, ``$CUDA_PATH``, the folder of ``nvcc``,
    ``/usr/local/cuda``: ``bin/ncu`` or ``nsight-compute-*/ncu``) or under
    ``/opt/nvidia/nsight-compute/*``; None when there is none."""
    given = config.ncu_command()
    if given:
        return given
    found = find_tool("ncu")
    if found:
        return found
    homes = list(config.cuda_homes())
    nvcc = find_tool("nvcc")
    if nvcc:
        homes.append(str(Path(nvcc).resolve().parent.parent))
    homes += list(_SEARCH)
    for home in dict.fromkeys(homes):
        patterns = ("bin/ncu", "nsight-compute*/ncu", "nsight-compute/*/ncu")
        for pattern in patterns:
            hits = sorted(glob.glob(os.path.join(home, pattern)), reverse=True)  # newest first
            for hit in hits:
                if os.access(hit, os.X_OK):
                    return hit
    return None


def command(ncu: str, kernel: str, metrics, folder: str) -> list[str]:
    """The command line that profiles one launch of ``kernel`` in the runner."""
    return [
        ncu, "--csv", "--print-units", "base", "--clock-control", "none",
        "--kernel-name", kernel, "--launch-count", "1", "--metrics", ",".join(metrics),
        sys.executable, "-m", "tirx.profile_runner", folder,
    ]  # fmt: skip


def _no_ncu() -> NcuError:
    return NcuError(
        "exe.profile needs Nsight Compute (ncu), which is not installed here (not on PATH, "
        "not in $TIRX_NCU, not in a CUDA toolkit under $CUDA_HOME, $CUDA_PATH, nvcc's folder "
        "or /usr/local/cuda, not under /opt/nvidia/nsight-compute)",
        hint="install NVIDIA Nsight Compute (it comes with the CUDA toolkit, or as the "
        "'nsight-compute' package) on a machine with an NVIDIA GPU and put ncu on PATH (or "
        "set TIRX_NCU); without a GPU, tirx.compile(kernel, 'sim').profile(*args) gives the "
        "simulator's per-line profile (docs/profiling.md)",
    )


def profile(exe, args, *, flops: float | None = None, metrics=None, timeout=TIMEOUT_S):
    """Profile one launch of the CUDA executable ``exe`` on ``args`` under Nsight Compute;
    returns an :class:`~tirx.backend.cuda.ncu_report.NcuProfile`. ``flops``: the kernel's
    floating-point operations, for the roofline (default: counted by ncu). ``metrics``: the
    ncu metric names to collect (default :data:`~tirx.backend.cuda.ncu_report.METRICS`)."""
    from . import driver

    ncu = find_ncu()
    if ncu is None:
        raise _no_ncu()
    if driver.gpu_count() == 0:
        raise NcuError(
            "exe.profile runs the kernel on a GPU under Nsight Compute, and no CUDA GPU is "
            "visible here",
            hint="run it on a machine with an NVIDIA GPU; here, "
            "tirx.compile(kernel, 'sim').profile(*args) gives the simulator's per-line profile",
        )
    exe.checked_values(args)  # the errors of a call, naming the parameter, before any work
    wanted = list(metrics or METRICS)
    with tempfile.TemporaryDirectory(prefix="tirx-ncu-") as folder:
        _save(exe, args, Path(folder))
        missing: list[str] = []
        for _ in range(4):  # drop the metrics this ncu does not know, then again
            done = _run(command(ncu, exe.lowered.name, wanted, folder), timeout)
            unknown = [m for m in wanted if _refused(m, done.stdout + done.stderr)]
            if not unknown:
                break
            missing += unknown
            wanted = [m for m in wanted if m not in unknown]
    _check(done, exe.lowered.name)
    launches = parse_csv(done.stdout)
    found = [p for p in launches if p.kernel.split("(")[0] == exe.lowered.name] or launches
    result = found[0]
    result.missing, result.flops_given = tuple(missing), flops
    return result


def _save(exe, args, folder: Path) -> None:
    import torch

    from ...ir import serial

    (folder / "kernel.tirx").write_bytes(serial.dumps(exe.lowered))
    (folder / "kernel.cu").write_text(exe.source)
    meta = {"name": exe.lowered.name, "arch": exe.target.arch}
    (folder / "kernel.json").write_text(json.dumps(meta))
    saved = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    torch.save(saved, folder / "args.pt")


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])  # the folder holding this tirx
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise NcuError(
            f"Nsight Compute did not finish profiling within {timeout:.0f} s",
            hint="profile a smaller problem, or pass timeout= to exe.profile",
        ) from None
    except OSError as e:
        raise NcuError(f"could not run Nsight Compute ({cmd[0]}): {e}") from None


def _refused(metric: str, output: str) -> bool:
    """Whether ncu's output says it does not know ``metric``."""
    base = metric.split(".")[0]
    for line in output.splitlines():
        if line.startswith("==ERROR==") and (metric in line or re.search(rf"\b{base}\b", line)):
            return True
    return False


def _check(done: subprocess.CompletedProcess, kernel: str) -> None:
    text = done.stdout + done.stderr
    errors = [ln for ln in text.splitlines() if ln.startswith("==ERROR==")]
    if "ERR_NVGPUCTRPERM" in text:
        raise NcuError(
            "Nsight Compute may not read the GPU's performance counters here (ERR_NVGPUCTRPERM)",
            hint="run as root, or let every user profile (the driver option "
            "NVreg_RestrictProfilingToAdminUsers=0; see NVIDIA's ERR_NVGPUCTRPERM page)",
        )
    if done.returncode != 0 or errors:
        tail = "\n".join((errors or text.strip().splitlines())[-8:])
        raise NcuError(
            f"Nsight Compute failed (exit status {done.returncode}):\n{tail}",
            hint="run the command by hand to see all of its output",
        )
    if '"Metric Name"' not in done.stdout:
        raise NcuError(
            f"Nsight Compute profiled no launch of '{kernel}'",
            hint="the kernel did not run in the profiling process; see ncu's output",
        )
