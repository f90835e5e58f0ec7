"""The CPU simulator: runs a lowered tirx function on numpy, PTX-exact, with checks.

``run(fn, args)`` executes every block of ``fn``'s launch grid, one block after another (the
blocks of a thread-block cluster together: :mod:`tirx.sim.cluster_run`), all threads of a
block in lockstep. Global tensors are written in place. Faults — out-of-bounds
or misaligned accesses, reads of unwritten shared memory or registers, shared-memory races,
divergent barriers or warp-collective instructions, integer division by zero — stop the run
with a :class:`tirx.errors.SimulationError` naming the block, warp, lane and source line.
See docs/simulator.md.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from .. import collector, config
from ..errors import SimulationError
from ..ir import nodes as ir
from .budget import DEFAULT_SECONDS, check_budget
from .memory import BLOCK_SHAPE
from .trace import CopyTrace, PtxTrace, RegisterTrace, RunResult

__all__ = ["run", "RunResult", "PtxTrace", "RegisterTrace", "CopyTrace"]


def _as_array(value) -> np.ndarray:
    """A numpy array sharing memory with ``value`` (numpy array or torch CPU tensor)."""
    if isinstance(value, np.ndarray):
        return value
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.dtype == torch.bfloat16:
            value = value.view(torch.int16)
        elif value.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):  # numpy has no fp8
            value = value.view(torch.uint8)
        return value.numpy()
    if hasattr(value, "__array__"):
        return np.asarray(value)
    raise TypeError(f"expected an array or tensor, got {type(value).__name__}")


def run(
    fn: ir.Function,
    args: list,
    *,
    trace: bool = False,
    stdout=None,
    budget: float | None = None,
    profile: bool = False,
) -> RunResult:
    """Run ``fn`` (lowered) on the CPU.

    ``args``: one per parameter, in order — arrays (numpy, or anything exposing
    ``__array__`` such as a torch CPU tensor) for tensor parameters, written in place, and
    Python numbers for scalars. ``trace=True`` records every PTX instruction per warp in
    ``RunResult.traces``. ``stdout``: where ``printf`` output goes (default ``sys.stdout``
    at the time of the call). ``budget``: seconds of wall-clock time the run may take
    (default ``$TIRX_SIM_BUDGET``, else 20; ``0``: no limit) before it stops with a
    SimulationError; a run longer than a few seconds reports progress on stderr. A traced run
    that faults leaves what it recorded up to the fault on the error (``err.run``).
    ``profile=True`` also counts, per source line, the instructions executed and what their
    memory accesses cost (sectors, shared-memory wavefronts) in ``RunResult.profile``, a
    :class:`tirx.sim.profile.SimProfile` (docs/profiling.md); without it nothing is counted.
    """
    if not getattr(fn, "lowered", False):
        raise SimulationError(
            f"'{getattr(fn, 'name', fn)}' is not lowered; the simulator runs only lowered IR",
            getattr(fn, "span", None),
            "compile it with tirx.compile(..., target='sim')",
        )
    if fn.launch.sms_grid:  # its grid's x is a GPU's multiprocessor count: none here
        raise SimulationError(
            f"'{fn.name}' has grid=\"sms\", which the simulator sizes when it compiles",
            fn.span,
            "run exe.lowered of tirx.compile(..., target='sim', sms=N), or "
            "fn.launch.resolved(N) in its place",
        )
    if len(args) != len(fn.params):
        raise TypeError(f"'{fn.name}' takes {len(fn.params)} arguments, {len(args)} given")
    bound = []
    for p, a in zip(fn.params, args):
        if isinstance(p, ir.Buffer):
            arr = _as_array(a)
            if not arr.flags.c_contiguous:
                raise ValueError(f"argument '{p.name}' must be contiguous")
            bound.append(arr)
        else:
            bound.append(a)
    from .machine import Machine

    check_budget(budget)
    for name, flag in (("trace", trace), ("profile", profile)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    if stdout is not None and not callable(getattr(stdout, "write", None)):
        raise TypeError(f"stdout must be a file-like object with a write method (sys.stdout, "
                        f"io.StringIO()), or None, got {type(stdout).__name__}")  # fmt: skip
    start = time.perf_counter()
    # the cyclic collector off while the run compiles its closures and executes (the run's
    # objects are freed by reference counting; the pauses cost a run about 6 %)
    with np.errstate(all="ignore"), collector.paused():
        if budget is None:
            budget = config.sim_budget()
        if budget is None:
            budget = DEFAULT_SECONDS
        sink = stdout if stdout is not None else sys.stdout
        c = fn.launch.cluster_shape
        if c[0] * c[1] * c[2] > 1:  # the blocks of a cluster run together
            from .cluster_run import ClusterRun

            machine = ClusterRun(fn, bound, sink, trace, budget, profile)
        else:
            machine = Machine(fn, bound, sink, trace, budget, profile)
        shape = BLOCK_SHAPE.set(tuple(fn.launch.block))  # for the faults' thread names
        try:
            blocks = machine.run()
        except SimulationError as err:
            if trace:  # what ran up to the fault, for a timeline that ends in it
                err.run = RunResult(
                    machine.traces,
                    machine.budget.done,
                    time.perf_counter() - start,
                    machine.copy_traces,
                    machine.barrier_traces,
                )
            raise
        finally:
            BLOCK_SHAPE.reset(shape)
    return RunResult(
        traces=machine.traces or [],
        blocks=blocks,
        seconds=time.perf_counter() - start,
        copies=machine.copy_traces or [],
        barriers=machine.barrier_traces or [],
        profile=machine.recorder.result(blocks) if machine.recorder is not None else None,
    )
