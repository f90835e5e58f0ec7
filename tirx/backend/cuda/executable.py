"""The CUDA executable: NVRTC output (cached), a loaded module, a checked call that costs little
more than ``cuLaunchKernel``.

A call checks every argument (tensors: dtype, shape, device, contiguity; scalars: type and
range) and launches on torch's current stream. The checks and the launch of one executable are
compiled once into a small Python function, the *runner*, from the kernel's parameters. For the
seed kernel ``warp_matmul(A, B, Out)`` on device 0 it reads::

    def call(*args, **kw):
        try:
            [a0, a1, a2] = args
            p0 = a0.data_ptr()
            p1 = a1.data_ptr()
            p2 = a2.data_ptr()
            ok = True
            m = memo[0]
            if not (m[0]() is a0 and a0._version == m[1] and p0 == m[2]
                    and m[3]() is a1 and ... and p2 == m[8]):
                ok = (a0.dtype is d0 and a0.shape == s0 and a0.get_device() == 0
                      and a0.is_contiguous() and ... and a2.is_contiguous()
                      and distinct(p0, p1, p2))
                if ok:
                    m = memo[0] = remember((a0, a1, a2), (p0, p1, p2), pack(p0, p1, p2))
            s = streams[stream(0)]
        except Exception:
            ok = False
        if not ok or kw:
            return slow()(args, kw)
        (err,) = entry(fn, 1, 1, 1, 32, 1, 1, 0, s, m[10], 0)
        if err is not OK:
            fail(err, (1, 1, 1), (32, 1, 1), 0, s, m[10])

``exe(a, b, out)`` calls it directly (``CudaExecutable.__call__`` hands over to it, with no
frame in between). For a kernel whose parameters are all tensors, a compiled runner stands in
front of this one where the C extension ``_launch`` was built at install
(``exe.fast_path == "c"``): it does the memo comparison, the checks and the launch below in
C, calling ``cuLaunchKernel`` directly, and hands every call it declines to ``call`` (see
:func:`native_runner`). ``d0``/``s0`` are the expected torch dtype and shape, ``entry`` is
``cuLaunchKernel``, ``fn`` the kernel, ``pack`` the launcher's
:class:`~tirx.backend.cuda.driver.ArgPacker`, ``stream`` torch's current-stream getter and
``streams`` the map from stream handles to ``CUstream`` objects, ``distinct`` the check that no
written tensor overlaps another (``ArgChecker.distinct_pointers``; the code declares every
pointer ``__restrict__``; a tensor read as 16-byte vectors or copied by a 16-byte cp.async adds
``not p0 & 15``: alignment.py).
A twin, ``run(args)``, answers True or False instead of falling back (tests use it).

**The memo.** The runner remembers the tensors it last checked (weak references, so it keeps no
tensor alive), each one's version counter and data pointer, and the argument block it packed
for them. When the same tensor objects come again with the same versions and pointers, it
launches that block as it is: no checks re-read, nothing packed. Everything in torch that
changes a tensor's dtype, shape, strides or device in place (``t_``, ``resize_``,
``as_strided_``, ``set_``, ``unsqueeze_``, ...) bumps its version counter, and any change of
its memory changes its data pointer, so either sends the call back to the full checks. The one
change that touches neither is ``t.data = v`` with ``v`` a view of ``t``'s own storage that
starts at the same address; the kernel then still accesses memory of that storage. Inference
tensors (``torch.inference_mode``) have no version counter and are checked on every call.
Kernels with scalar parameters pack a new block on every call (their values change); their
tensors still use the memo. A block is never modified once built, so calls from several
threads cannot mix their arguments.

When the runner declines (any check fails, a wrong count, something that is not a tensor), the
call takes the checked path, ``slow``: :class:`~tirx.executable.ArgChecker` raises the
TypeError or ValueError that names the parameter, or converts the values (an int for a float
parameter) and launches through the :class:`~tirx.backend.cuda.driver.Launcher`. Only the generated text's
shape depends on the parameters (indices, integer bounds, grid and block); names and values
never enter it. The text and the memo's layout are written in tirx/backend/cuda/runner_text.py.
"""

from __future__ import annotations

import builtins
import functools
import operator
import types
import weakref

from ...errors import LaunchError
from ...executable import ArgChecker, Executable
from ...ir import nodes as ir
from . import driver
from .abi import param_kinds, uses_dynamic_shared

__all__ = ["CudaExecutable", "make_runner", "make_runners", "native_runner"]

# Modules load on this device (its primary context, the one torch uses); see driver.Module.
_ORDINAL = 0


def _sm_number(arch: str) -> str:
    """ "sm_90a" -> "90": a cubin for sm_90a is loaded on an sm_90 device and vice versa."""
    return arch.split("_")[1].rstrip("a")


def _never(args) -> bool:
    """The runner before one is built: every call takes the checked path."""
    return False


class CudaExecutable(Executable):
    # ``exe(*args)`` is ``exe._call(*args)``: the method below (the checked path) until the
    # first good call builds the runner, then the runner itself, stored on the instance. The
    # property hands the call straight to it: no wrapper frame between the user's call and
    # cuLaunchKernel (a frame is a measurable part of the few microseconds a launch costs).
    __call__ = property(operator.attrgetter("_call"))

    @property
    def __signature__(self):
        """``exe(A, B, Out)``: the kernel's parameters (what ``inspect.signature`` and notebook
        call tips show; the property above hides the runner's ``*args``)."""
        import inspect

        kind = inspect.Parameter.POSITIONAL_ONLY
        return inspect.Signature([inspect.Parameter(p.name, kind) for p in self.lowered.params])

    def __init__(self, kernel, lowered, target, timings, source, nvrtc_out, written=None):
        super().__init__(kernel, lowered, target, timings)
        self.source = source
        self.ptx = nvrtc_out.ptx
        self.cubin = nvrtc_out.cubin
        self.nvrtc = nvrtc_out
        self.arch = target.arch  # what NVRTC compiled for (build: sm_90a for wgmma on sm_90)
        self.checker = ArgChecker(lowered, "cuda", _ORDINAL, written)  # written: stored.py
        self._kinds = param_kinds(lowered)
        self._module = None
        self._launcher = None  # driver.Launcher, once loaded
        self._launch = None  # the launcher with grid, block and shared memory bound
        self._run = _never  # checks + launch, answering True/False; built at the first good call
        self._ordinal = _ORDINAL
        launch = lowered.launch
        self._grid, self._block, self._smem = launch.grid, launch.block, launch.dynamic_smem_bytes
        if uses_dynamic_shared(lowered):  # the block's shared memory lives in the dynamic segment
            self._smem = max(self._smem, lowered.shared_bytes)

    @functools.cached_property
    def _alignment(self):  # what vectors and copies ask of each data pointer (alignment.py)
        return self.pointer_requirements()

    @functools.cached_property
    def pointer_alignments(self) -> dict[str, int]:
        """:attr:`tirx.Executable.pointer_alignments`, read off the launcher's requirement (a
        saved kernel's from its manifest)."""
        return {a.name: a.nbytes for a in self._alignment.per_param if a is not None}

    def pointer_requirements(self):
        """What each parameter's data pointer must be aligned to (:class:`.alignment.Requirements`
        of the lowered program; a saved kernel answers from its manifest: stored.py)."""
        from .alignment import Requirements

        return Requirements.of(self.lowered)

    def map_sources(self) -> tuple:
        """Per TMA tensor map (hidden parameter), the index of the tensor parameter it reads
        and the :class:`~tirx.ir.tensor_map.TensorMap`; empty for a kernel without TMA."""
        if not self.lowered.tensor_maps:
            return ()
        from .tensor_maps import map_sources

        return map_sources(self.lowered)

    @property
    def launch_dims(self) -> tuple:
        """``(grid, block, dynamic shared bytes)`` of every launch."""
        return self._grid, self._block, self._smem

    @functools.cached_property
    def sass(self) -> str | None:
        from .tools import disassemble

        return disassemble(self.cubin) if self.cubin else None

    @property
    def stats(self) -> dict:
        stats = {**self.nvrtc.stats}
        # ptxas counts the static shared memory only (0 for a kernel whose shared memory is
        # dynamic, as every allocation past 48 KB is): what a block uses is the larger
        stats["static_shared_bytes"] = stats.get("shared_bytes", 0)
        stats["shared_bytes"] = max(self.lowered.shared_bytes, stats["static_shared_bytes"])
        mine = stats.get("kernels", {}).get(self.lowered.name)
        if mine is not None:  # the kernel's own entry says the same
            static = mine.get("shared_bytes", 0)
            mine = {**mine, "static_shared_bytes": static,
                    "shared_bytes": max(self.lowered.shared_bytes, static)}  # fmt: skip
            stats["kernels"] = {**stats["kernels"], self.lowered.name: mine}
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
        if self._smem > driver.STATIC_SMEM_LIMIT:  # opt in before the first launch
            kernel.allow_dynamic_smem(self._smem)
        self._attach(self._launcher_of(kernel), _ORDINAL)

    def _launcher_of(self, kernel):
        """The launcher of ``kernel``: ``cuLaunchKernel``'s, or for a kernel launched in
        clusters ``cuLaunchKernelEx``'s (:mod:`.cluster_launch`)."""
        cluster = self.lowered.launch.cluster
        if cluster is None:
            return kernel.launcher(self.launch_kinds)
        from .cluster_launch import cluster_launcher

        return cluster_launcher(kernel, self.launch_kinds, cluster)

    @property
    def launch_kinds(self) -> list[str]:
        """The launcher's argument kinds: the parameters', then one ``"tmap"`` per TMA tensor
        map (the hidden parameters, tirx/backend/cuda/tensor_maps.py)."""
        return self._kinds + ["tmap"] * len(self._map_encoders)

    # set before the first call to encode tensor maps another way (tests count encodes):
    # ``encode(fields, address) -> bytes``; None is the driver's cuTensorMapEncodeTiled
    encode_map = None

    @functools.cached_property
    def _map_encoders(self) -> tuple:
        """Per hidden parameter: (index of the tensor it reads, its encoder ``(pointer) ->
        bytes``), empty for a kernel without TMA (which never loads tma.py)."""
        sources = self.map_sources()
        if not sources:
            return ()
        from .tensor_maps import MapEncoder

        return tuple((i, MapEncoder(tm, self.encode_map)) for i, tm in sources)

    def _attach(self, launcher, ordinal: int) -> None:
        """Launch through ``launcher`` (a :class:`driver.Launcher`); the fast path accepts
        tensors on device ``ordinal``. :meth:`load` attaches the real one; tests and benchmarks
        attach one whose ``entry`` records instead of launching (``ordinal=-1``: CPU
        tensors)."""
        self._grid = self.launch_grid(ordinal)
        self._launcher = launcher
        self._launch = functools.partial(launcher, self._grid, self._block, self._smem)
        self._ordinal = ordinal
        if ordinal < 0:  # the checked path takes CPU tensors too
            self.checker = ArgChecker(self.lowered, "cpu", written=self.checker.written())
        self._forget_runner()

    def launch_grid(self, ordinal: int = _ORDINAL) -> tuple[int, int, int]:
        """The grid a launch on device ``ordinal`` uses: the kernel's, with a ``grid="sms"``
        kernel's x set to ``target.sms`` or else the device's multiprocessor count."""
        launch = self.lowered.launch
        if not launch.sms_grid:
            return launch.grid
        sms = self.target.sms or driver.multiprocessor_count(max(ordinal, 0))
        if not sms:
            raise LaunchError(
                f'{self.lowered.name} has grid="sms" (one block per multiprocessor), but no '
                "CUDA GPU is visible to count them",
                hint="launch it on a GPU, or give the count: tirx.compile(kernel, target, sms=132)",
            )
        return launch.resolved(sms).grid

    def twin(self, kernel, cache: str, timings: dict) -> CudaExecutable:
        other = super().twin(kernel, cache, timings)
        other._forget_runner()  # its own runner (and memo), built at its own first call
        return other

    def _forget_runner(self) -> None:
        self._run = _never
        self.__dict__.pop("_call", None)  # back to the method below

    def _call(self, *args, **kw) -> None:
        """A call before the runner exists (see ``__call__``): the checked path."""
        self._call_checked(args, kw)

    def _call_checked(self, args, kw=None) -> None:
        """Check every argument (raising an error that names the parameter), launch, and
        build the runner so that the next good call is fast."""
        if kw:
            self.checker.keywords(kw)
        values = self.checked_values(args)
        if self._launch is None:
            self.load()
        self._launch(_stream_getter(self._ordinal)(self._ordinal), *values)
        if self._run is _never:
            self._build_runner()

    def checked_values(self, args) -> list:
        """The launch values of ``args`` (tensor pointers, scalars) after the full checks."""
        check = self.checker
        if len(args) != len(self._kinds):
            check.count(args)
        values, tensors = [], []
        for i, (p, a) in enumerate(zip(self.lowered.params, args)):
            if isinstance(p, ir.Buffer):
                tensors.append((i, check.tensor(i, p, a)))
                values.append(tensors[-1][1].data_ptr())
                self._alignment.check(i, values[-1])
            else:
                values.append(check.scalar(p, a))
        check.distinct(tensors)
        return values + [encode(values[i]) for i, encode in self._map_encoders]

    def profile(self, *args, flops=None, metrics=None, timeout: float = 600.0):
        """One launch on ``args`` measured by Nsight Compute (``ncu``, run in a child process;
        the arguments are copied there and not written here): an
        :class:`~tirx.backend.cuda.ncu_report.NcuProfile` with duration, SM and tensor-pipe
        throughput, DRAM and L2 throughput, achieved occupancy, registers, spills and
        shared-memory bank conflicts (docs/profiling.md). ``flops``: the kernel's
        floating-point operations for the roofline (default: counted by ncu). Raises a
        TirxError where ncu or a GPU is missing."""
        from .ncu import profile

        return profile(self, args, flops=flops, metrics=metrics, timeout=timeout)

    @property
    def fast_path(self) -> str | None:
        """How a good call launches: ``"c"`` (the compiled memo-hit launch in front of the
        Python runner, see :func:`native_runner`), ``"python"`` (the Python runner alone), or
        None before the first good call has built either."""
        if self._run is _never:
            return None
        return "python" if isinstance(self._call, types.FunctionType) else "c"

    def _build_runner(self, native=None):
        """Build the runner for the attached launcher and make calls go to it; returns the
        answering variant, ``run(args) -> bool`` (which shares its memo). ``native=False``:
        the Python runner even where the compiled one exists."""
        params = self.lowered.params
        dtypes = (
            self.checker.torch_dtypes()
            if any(isinstance(p, ir.Buffer) for p in params)
            else [None] * len(params)
        )
        stream = _stream_getter(self._ordinal)
        slow = weakref.WeakMethod(self._call_checked)  # no cycle through the runner
        self._run, self._call = make_runners(
            params, dtypes, self._launcher, self._grid, self._block, self._smem, stream,
            self._ordinal, slow, native, distinct=self.checker.distinct_pointers(),
            alignment=self._alignment.masks, maps=self._map_encoders,
            written=[i in self.checker.written() for i in range(len(params))],
        )  # fmt: skip
        return self._run


@functools.cache
def _stream_getter(ordinal: int):
    """``(ordinal) -> int``, called with ``ordinal``: torch's current stream on that device,
    where the kernel is loaded and its tensors live. One C call per launch when torch has CUDA;
    otherwise :func:`driver.current_torch_stream` (0, the default stream, without torch CUDA)."""
    if ordinal >= 0:
        try:
            import torch

            raw = torch._C._cuda_getCurrentRawStream
            if torch.cuda.is_available():
                return raw
        except (ImportError, AttributeError):
            pass
    return _default_stream


def _default_stream(ordinal: int) -> int:
    return driver.current_torch_stream()


# ------------------------------------------------------------------------------ the runner


def make_runners(
    params, torch_dtypes, launcher, grid, block, smem, stream, ordinal, slow, native=None,
    distinct=None, alignment=None, maps=(), written=(),
):  # fmt: skip
    """``(run, call)``, two variants of the runner sharing one memo.

    Both launch the kernel of ``launcher`` (a :class:`~tirx.backend.cuda.driver.Launcher`)
    with ``grid``, ``block`` and ``smem`` on the stream ``stream(ordinal)`` when every argument
    passes the fast checks. Otherwise they launch nothing: ``run(args)`` answers False (and True
    after a launch); ``call(*args)`` hands the arguments to the checked path, ``slow()(args, kw)``
    (``slow`` is a weak reference to it).

    ``params`` are the kernel's parameters (:class:`ir.Buffer` or scalar :class:`ir.Var`),
    ``torch_dtypes`` the torch dtype of each buffer parameter (None for scalars). Tensors must
    be on CUDA device ``ordinal`` (-1: on the CPU, for tests with a recording ``entry``).

    ``call`` is the compiled :class:`_launch.Runner <native_runner>` around the Python one
    where it can be (see :func:`native_runner`); ``native=False`` keeps the Python one.
    ``distinct(*pointers) -> bool`` (:meth:`ArgChecker.distinct_pointers`) is the miss path's
    aliasing check of two or more tensors (None: never false); ``alignment``: alignment masks;
    ``maps``: per TMA tensor map, (tensor index, encoder): encoded when the tensors are checked,
    kept in the memo (the compiled runner launches memo hits and hands misses to Python);
    ``written``: per parameter, whether the kernel writes it (such a tensor that requires grad
    takes the checked path, hit or miss: see :func:`runner_text.slot`).
    """
    from . import runner_text  # loaded at the first launch, not by the compile before it

    launcher.prepare(smem)
    grid, block = tuple(int(x) for x in grid), tuple(int(x) for x in block)
    alignment = tuple(alignment or (0,) * len(params))
    written = tuple(bool(w) for w in written) if written else (False,) * len(params)
    slots = tuple(runner_text.slot(p, m, w) for p, m, w in zip(params, alignment, written))
    sources = tuple(i for i, _ in maps)
    run_code, call_code = runner_text.runner_code(slots, ordinal, grid, block, int(smem), sources)
    tensors = sum(isinstance(p, ir.Buffer) for p in params)
    memo = [runner_text.MEMO.empty(tensors)]
    scope = {
        "__builtins__": builtins,
        "entry": launcher.entry,
        "fn": launcher.kernel.handle,
        "OK": driver.OK(),
        "fail": launcher.failed,
        "pack": launcher.pack,
        "streams": driver.STREAMS,
        "stream": stream,
        "memo": memo,
        "remember": runner_text.remember,
        "slow": slow,
        "distinct": distinct or _always,
        **{f"t{k}": encode for k, (_, encode) in enumerate(maps)},
    }
    for i, (p, dt) in enumerate(zip(params, torch_dtypes)):
        if isinstance(p, ir.Buffer):
            scope[f"d{i}"], scope[f"s{i}"] = dt, _torch_size(p.shape)
    run = types.FunctionType(run_code, scope, "run")
    call = types.FunctionType(call_code, scope, "call")
    if native is not False and tensors and tensors == len(params):
        shapes = tuple(tuple(int(d) for d in p.shape) for p in params)
        call = (
            native_runner(launcher, grid, block, smem, tuple(torch_dtypes), shapes, memo,
                          stream, ordinal, call, alignment, bool(maps), written)
            or call
        )  # fmt: skip
    return run, call


def native_runner(
    launcher, grid, block, smem, dtypes, shapes, memo, stream, ordinal, call, align=(),
    maps=False, written=(),
):  # fmt: skip
    """The compiled runner (``tirx/backend/cuda/_launch.c``) in front of the Python runner
    ``call``, which takes every call it declines; None where there is none: the extension was
    not built (no C compiler at install), ``TIRX_NATIVE_LAUNCH=0``, the launcher has no C
    entry address (a Python stand-in for ``cuLaunchKernel``), or a pointer must be aligned
    (``align``, the masks of :func:`make_runners`) and the build predates that check.

    For a kernel whose parameters are all tensors (of ``dtypes`` and ``shapes``, on device
    ``ordinal``): a memo hit costs the identity, ``_version`` and ``data_ptr()`` reads in C; a
    miss, the full checks in C and a new block, remembered in the same memo the Python runner
    uses; then one stream lookup and ``cuLaunchKernel`` with the GIL released. Only calls that
    fail a check (or are not a kernel's arguments at all) reach Python, and, for a kernel with
    TMA tensor maps (``maps``), every miss: the Python runner encodes the maps into the block
    it remembers (a build that cannot hand misses over is not used for such a kernel). A tensor
    the kernel writes (``written``) that requires grad is declined, hit or miss (a build
    without that check is not used for a kernel that writes a tensor)."""
    native = _native_module()
    if native is None or not launcher.entry_address:
        return None
    from . import runner_text

    if tuple(getattr(native, "MEMO_LAYOUT", ())) != tuple(
        runner_text.MEMO
    ):  # built from another layout
        return None
    if any(align) and not getattr(native, "CHECKS_ALIGNMENT", False):
        return None
    if maps and not getattr(native, "MISSES_TO_PYTHON", False):
        return None
    if any(written) and not getattr(native, "CHECKS_GRAD", False):
        return None
    handle = launcher.kernel.handle
    dims = (grid, block, int(smem))

    def fail(err: int, stream_handle: int, params: int) -> None:
        launcher.failed(_cu_result(err), *dims, driver.STREAMS[stream_handle], params)

    extra = {"alignment": tuple(align)} if any(align) else {}
    if maps:  # a miss encodes TMA maps: the Python runner takes it, the memo hit stays in C
        extra["python_misses"] = True
    if any(written):
        extra["written"] = tuple(int(bool(w)) for w in written)
    return native.Runner(
        launcher.entry_address, int(handle) if handle is not None else 0, grid, block,
        int(smem), dtypes, shapes, memo, stream, ordinal, call, fail, **extra,
    )  # fmt: skip


def _cu_result(err: int):
    try:
        return driver.driver_api().CUresult(err)
    except ValueError:  # a code this cuda-bindings does not name
        return err


def _native_module():
    """``tirx.backend.cuda._launch`` when it was built and is wanted (``TIRX_NATIVE_LAUNCH``,
    read at each runner's build), else None."""
    from ... import config

    return _built_native_module() if config.native_launch() else None


@functools.cache
def _built_native_module():
    try:
        from . import _launch
    except ImportError:  # not built: no C compiler at install
        return None
    return _launch


def make_runner(params, torch_dtypes, launcher, grid, block, smem, stream, ordinal: int):
    """``run(args) -> bool`` alone (see :func:`make_runners`)."""
    return make_runners(
        params, torch_dtypes, launcher, grid, block, smem, stream, ordinal, None, native=False
    )[0]


def _torch_size(shape):
    """``torch.Size(shape)``: compared with ``tensor.shape`` (also a torch.Size) per call."""
    import torch

    return torch.Size(shape)


def _always(*pointers) -> bool:
    return True
