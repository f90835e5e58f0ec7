"""The CUDA executable: NVRTC output (cached), a loaded module, a checked call that costs little
more than ``cuLaunchKernel``.

A call checks every argument (tensors: dtype, shape, device, contiguity; scalars: type and
range) and launches on torch's current stream. The checks for one executable are compiled once
into a small Python function, the *runner*, from the kernel's parameters. For the seed kernel
``warp_matmul(A, B, Out)`` on device 0 it reads::

    def run(args):
        try:
            [a0, a1, a2] = args
            ok = (a0.dtype is d0 and a0.shape == s0 and a0.get_device() == 0
                  and a0.is_contiguous() and a1.dtype is d1 and ... and a2.is_contiguous())
        except Exception:
            return False
        if not ok:
            return False
        launch(stream(), a0.data_ptr(), a1.data_ptr(), a2.data_ptr())
        return True

``d0``/``s0`` are the expected torch dtype and shape, ``launch`` the pre-packed
:class:`~tirx.backend.cuda.driver.Launcher` with grid, block and shared memory bound. When the
runner says no (any check fails, a wrong count, something that is not a tensor), the call takes
the checked path: :class:`~tirx.executable.ArgChecker` raises the TypeError or ValueError that
names the parameter, exactly as before, or converts the values (an int for a float parameter)
and launches. Only the generated text's shape depends on the parameters (indices and integer
bounds); names and values never enter it.
"""

from __future__ import annotations

import builtins
import functools
import time
import types

from ...errors import LaunchError
from ...executable import ArgChecker, Executable, _int_range
from ...ir import nodes as ir
from . import driver
from .cache import cache_key, default_cache
from .codegen import CODEGEN_VERSION, generate, param_kinds
from .nvrtc import DEFAULT_OPTIONS, compile_cuda, nvrtc_version

__all__ = ["CudaExecutable", "build", "make_runner"]

# Bit-exact agreement with the simulator: no contraction of a*b+c into FMA.
NVRTC_OPTIONS = ("--fmad=false",)

# Modules load on this device (its primary context, the one torch uses); see driver.Module.
_ORDINAL = 0


def build(kernel, lowered: ir.Function, target, timings: dict) -> CudaExecutable:
    """Generate, compile (through the cache) and, when a GPU is visible, load."""
    t0 = time.perf_counter()
    source = generate(lowered)
    t1 = time.perf_counter()
    timings["codegen"] = (t1 - t0) * 1e3
    filename = f"{lowered.name}.cu"
    options = (*DEFAULT_OPTIONS, *NVRTC_OPTIONS)
    key = cache_key(source, options, target.arch, nvrtc_version(), CODEGEN_VERSION)
    out, state = default_cache().get_or_compile(
        key,
        lambda: compile_cuda(source, arch=target.arch, filename=filename, options=NVRTC_OPTIONS),
    )
    t2 = time.perf_counter()
    timings["nvrtc"] = (t2 - t1) * 1e3
    exe = CudaExecutable(kernel, lowered, target, timings, source, out)
    exe.cache = state
    if driver.gpu_count() > 0:
        exe.load()
        timings["load"] = (time.perf_counter() - t2) * 1e3
    return exe


def _sm_number(arch: str) -> str:
    """ "sm_90a" -> "90": a cubin for sm_90a is loaded on an sm_90 device and vice versa."""
    return arch.split("_")[1].rstrip("a")


def _never(args) -> bool:
    """The runner before one is built: every call takes the checked path."""
    return False


class CudaExecutable(Executable):
    def __init__(self, kernel, lowered, target, timings, source, nvrtc_out):
        super().__init__(kernel, lowered, target, timings)
        self.source = source
        self.ptx = nvrtc_out.ptx
        self.cubin = nvrtc_out.cubin
        self.nvrtc = nvrtc_out
        self.checker = ArgChecker(lowered, "cuda", _ORDINAL)
        self._kinds = param_kinds(lowered)
        self._module = None
        self._launcher = None  # driver.Launcher, once loaded
        self._launch = None  # the launcher with grid, block and shared memory bound
        self._run = _never  # checks + launch in one function; built at the first good call
        self._ordinal = _ORDINAL
        launch = lowered.launch
        self._grid, self._block, self._smem = launch.grid, launch.block, launch.dynamic_smem_bytes

    @functools.cached_property
    def sass(self) -> str | None:
        from .tools import disassemble

        return disassemble(self.cubin) if self.cubin else None

    @property
    def stats(self) -> dict:
        stats = {"shared_bytes": self.lowered.shared_bytes, **self.nvrtc.stats}
        stats.setdefault("registers", None)
        stats.setdefault("spill_stores", None)
        stats.setdefault("spill_loads", None)
        return stats

    def load(self) -> None:
        """Load the cubin into the GPU's primary context (once)."""
        if self._launcher is not None:
            return
        if driver.gpu_count() == 0:
            raise LaunchError(
                "no CUDA GPU is visible, so this kernel cannot be launched",
                hint='compile with target="sim" to run it on the CPU simulator',
            )
        device = driver.device_arch(_ORDINAL)
        if device and _sm_number(device) != _sm_number(self.target.arch):
            raise LaunchError(
                f"kernel compiled for {self.target.arch} but the GPU is {device}",
                hint='compile with target="cuda" to use the GPU\'s architecture',
            )
        self._module = driver.Module(self.cubin, _ORDINAL)
        kernel = self._module.function(self.lowered.name)
        self._attach(kernel.launcher(self._kinds), _ORDINAL)

    def _attach(self, launcher, ordinal: int) -> None:
        """Launch through ``launcher`` (called as ``launcher(grid, block, smem, stream,
        *values)``); the fast path accepts tensors on device ``ordinal``. :meth:`load` attaches
        the real one; tests and benchmarks attach a stub (``ordinal=-1``: CPU tensors)."""
        self._launcher = launcher
        self._launch = functools.partial(launcher, self._grid, self._block, self._smem)
        self._ordinal = ordinal
        self._run = _never

    def __call__(self, *args):
        if not self._run(args):
            self._call_checked(args)

    def _call_checked(self, args) -> None:
        """Check every argument (raising an error that names the parameter), launch, and
        build the runner so that the next good call is fast."""
        values = self.checked_values(args)
        if self._launch is None:
            self.load()
        self._launch(_stream_getter(self._ordinal)(), *values)
        if self._run is _never:
            self._run = self._make_runner()

    def checked_values(self, args) -> list:
        """The launch values of ``args`` (tensor pointers, scalars) after the full checks."""
        check = self.checker
        if len(args) != len(self._kinds):
            check.count(args)
        values = []
        for i, (p, a) in enumerate(zip(self.lowered.params, args)):
            if isinstance(p, ir.Buffer):
                values.append(check.tensor(i, p, a).data_ptr())
            else:
                values.append(check.scalar(p, a))
        return values

    def _make_runner(self):
        params = self.lowered.params
        dtypes = (
            self.checker.torch_dtypes()
            if any(isinstance(p, ir.Buffer) for p in params)
            else [None] * len(params)
        )
        stream = _stream_getter(self._ordinal)
        return make_runner(params, dtypes, self._launch, stream, self._ordinal)


@functools.cache
def _stream_getter(ordinal: int):
    """``() -> int``: torch's current stream on device ``ordinal``, where the kernel is loaded
    and its tensors live. One C call per launch when torch has CUDA; otherwise
    :func:`driver.current_torch_stream` (0, the default stream, without torch CUDA)."""
    if ordinal >= 0:
        try:
            import torch

            raw = torch._C._cuda_getCurrentRawStream
            if torch.cuda.is_available():
                return functools.partial(raw, ordinal)
        except (ImportError, AttributeError):
            pass
    return driver.current_torch_stream


# ------------------------------------------------------------------------------ the runner


def make_runner(params, torch_dtypes, launch, stream, ordinal: int):
    """``run(args) -> bool``: when every argument passes the fast checks, launch with
    ``launch(stream(), *values)`` and answer True; otherwise answer False (and launch nothing).

    ``params`` are the kernel's parameters (:class:`ir.Buffer` or scalar :class:`ir.Var`),
    ``torch_dtypes`` the torch dtype of each buffer parameter (None for scalars).
    """
    code = _runner_code(tuple(_slot(p) for p in params), ordinal)
    scope = {"__builtins__": builtins, "launch": launch, "stream": stream}
    for i, (p, dt) in enumerate(zip(params, torch_dtypes)):
        if isinstance(p, ir.Buffer):
            scope[f"d{i}"], scope[f"s{i}"] = dt, tuple(p.shape)
    return types.FunctionType(code, scope, "run")


def _slot(p) -> tuple:
    """What the fast check of one parameter looks like (the generated text depends on it)."""
    if isinstance(p, ir.Buffer):
        return ("tensor",)
    kind = p.dtype.kind
    if kind == "float":
        return ("float",)
    if kind == "bool":
        return ("bool",)
    return ("int", *_int_range(p.dtype))


@functools.lru_cache(maxsize=256)
def _runner_code(slots: tuple, ordinal: int) -> types.CodeType:
    module = compile(_runner_source(slots, ordinal), "<tirx runner>", "exec")
    return next(c for c in module.co_consts if isinstance(c, types.CodeType))


def _runner_source(slots: tuple, ordinal: int) -> str:
    """The runner's text (see the module docstring) for parameters described by ``slots``."""
    names = [f"a{i}" for i in range(len(slots))]
    checks, values = [], []
    for a, slot in zip(names, slots):
        if slot[0] == "tensor":
            i = a[1:]
            checks += [
                f"{a}.dtype is d{i}",
                f"{a}.shape == s{i}",
                f"{a}.get_device() == {int(ordinal)}",
                f"{a}.is_contiguous()",
            ]
            values.append(f"{a}.data_ptr()")
        elif slot[0] == "int":
            checks += [f"type({a}) is int", f"{int(slot[1])} <= {a} <= {int(slot[2])}"]
            values.append(a)
        else:  # float: a Python float as is (an int is converted on the checked path); bool
            checks.append(f"type({a}) is {slot[0]}")
            values.append(a)
    lines = [
        "def run(args):",
        "    try:",
        f"        [{', '.join(names)}] = args",
        f"        ok = {' and '.join(checks) or 'True'}",
        "    except Exception:",
        "        return False",
        "    if not ok:",
        "        return False",
        f"    launch(stream(), {', '.join(values)})",
        "    return True",
    ]
    return "\n".join(lines) + "\n"
