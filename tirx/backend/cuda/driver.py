"""The CUDA driver: probe for a GPU, load a cubin into a module, launch a kernel cheaply.

Modules load into the device's *primary* context, the one torch's runtime uses, so pointers
from torch tensors and torch's streams work with our kernels. When no context is current on
the calling thread, the primary context is retained and made current.

A :class:`Launcher` lays its arguments out with an :class:`ArgPacker` (one 8-byte slot per
parameter and the ``void*`` array pointing at the slots, built by one ``struct.pack_into``) and
calls ``cuLaunchKernel``.

Without a driver or a GPU, :func:`gpu_count` answers 0 and loading raises :class:`LaunchError`.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence

from tirx.errors import LaunchError

__all__ = [
    "gpu_count",
    "driver_probed",
    "device_arch",
    "multiprocessor_count",
    "current_torch_stream",
    "synchronize",
    "Module",
    "Kernel",
    "Launcher",
    "ArgPacker",
    "launch_entry_address",
    "STREAMS",
    "PARAM_TYPES",
]

# Each parameter gets an 8-byte slot (a tensor map 128); the driver reads the parameter's own size.
PARAM_TYPES = {
    "ptr": "Q",
    "u64": "Q",
    "i64": "q",
    "f64": "d",
    "i32": "i4x",
    "u32": "I4x",
    "f32": "f4x",
    "tmap": "128s",  # a CUtensorMap, by value (tirx/backend/cuda/tensor_maps.py)
}
STATIC_SMEM_LIMIT = 48 * 1024  # dynamic shared memory beyond this needs an opt-in attribute

_HINTS = {
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "the cubin was built for another architecture: compile for "
    "the device's, driver.device_arch() (an sm_80 cubin does not run on sm_90)",
    "CUDA_ERROR_INVALID_IMAGE": "the bytes are not a cubin for this device; compile for "
    "driver.device_arch()",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the PTX is newer than the driver accepts: use NVRTC "
    "13.0 (nvidia-cuda-nvrtc==13.0.88) or load the cubin instead of PTX",
    "CUDA_ERROR_NOT_FOUND": "no kernel of that name in the module: is it declared "
    '`extern "C" __global__` (C++ names are mangled)?',
    "CUDA_ERROR_INVALID_VALUE": "check grid and block sizes (block at most 1024 threads, "
    "z at most 64), dynamic shared memory and the number of arguments",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "too many threads per block for the registers the "
    "kernel uses (see its stats) or too much shared memory",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "the kernel accessed memory out of bounds; the CUDA context "
    "is now unusable (restart the process); run with target='sim' to find the access",
    "CUDA_ERROR_MISALIGNED_ADDRESS": "a load or store was misaligned (ldmatrix rows need 16 "
    "bytes); the context is now unusable; target='sim' reports the lane",
    "CUDA_ERROR_INVALID_CONTEXT": "no CUDA context is current on this thread",
    "CUDA_ERROR_OUT_OF_MEMORY": "the GPU is out of memory",
}


def driver_api():
    """The CUDA driver bindings (``cuda.bindings.driver``), imported at their first use."""
    from cuda.bindings import driver

    return driver


def _result_name(result) -> str:
    return getattr(result, "name", None) or f"CUresult {int(result)}"


def _error(result, what: str) -> LaunchError:
    name = _result_name(result)
    try:
        err, text = driver_api().cuGetErrorString(result)
        detail = f" ({text.decode()})" if int(err) == 0 and text else ""
    except Exception:
        detail = ""
    return LaunchError(f"{what} failed: {name}{detail}", hint=_HINTS.get(name))


def _check(result, what: str) -> None:
    if int(result) != 0:
        raise _error(result, what)


@functools.cache
def _probe() -> tuple[int, str]:
    """(number of devices, why there are none). Safe without a driver: never raises."""
    try:
        drv = driver_api()
        (err,) = drv.cuInit(0)
        if int(err) != 0:
            return 0, _result_name(err)
        err, n = drv.cuDeviceGetCount()
        return (int(n), "") if int(err) == 0 else (0, _result_name(err))
    except Exception as e:  # no libcuda: cuda.pathfinder raises on the first call
        return 0, str(e).splitlines()[0] if str(e) else type(e).__name__


def driver_probed() -> bool:
    """Whether this process asked the driver for its devices already (:func:`gpu_count`)."""
    return _probe.cache_info().currsize > 0


def gpu_count() -> int:
    """How many CUDA devices the driver sees (0 without a driver); probed once per process."""
    return _probe()[0]


def _require_gpu(ordinal: int = 0) -> None:
    n, why = _probe()
    if n == 0:
        raise LaunchError(
            f"no CUDA GPU is visible ({why or 'the driver reports no device'})",
            hint="use target='sim' to run the kernel on the CPU simulator; compiling and "
            "viewing PTX/SASS work without a GPU",
        )
    if not 0 <= ordinal < n:
        raise LaunchError(f"no CUDA device {ordinal}: {n} visible", hint=f"use 0..{n - 1}")


def _attribute(ordinal: int, name: str) -> int:
    """``cuDeviceGetAttribute`` of ``CU_DEVICE_ATTRIBUTE_<name>`` for device ``ordinal``."""
    drv = driver_api()
    err, dev = drv.cuDeviceGet(ordinal)
    _check(err, "cuDeviceGet")
    err, v = drv.cuDeviceGetAttribute(
        getattr(drv.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}"), dev
    )
    _check(err, "cuDeviceGetAttribute")
    return int(v)


@functools.cache
def device_arch(ordinal: int = 0) -> str | None:
    """``"sm_XY"`` of device ``ordinal`` (e.g. ``"sm_90"``), None when there is no such GPU."""
    if not 0 <= ordinal < gpu_count():
        return None
    major, minor = (_attribute(ordinal, f"COMPUTE_CAPABILITY_{x}") for x in ("MAJOR", "MINOR"))
    return f"sm_{major}{minor}"


@functools.cache
def multiprocessor_count(ordinal: int = 0) -> int | None:
    """How many multiprocessors (SMs) device ``ordinal`` has, None when there is no such GPU."""
    if not 0 <= ordinal < gpu_count():
        return None
    return _attribute(ordinal, "MULTIPROCESSOR_COUNT")


@functools.cache
def _primary_context(ordinal: int):
    """The device's primary context, retained once for the life of the process (as torch does)."""
    drv = driver_api()
    err, dev = drv.cuDeviceGet(ordinal)
    _check(err, "cuDeviceGet")
    err, ctx = drv.cuDevicePrimaryCtxRetain(dev)
    _check(err, "cuDevicePrimaryCtxRetain")
    return ctx


def _make_current(ordinal: int):
    """The context to use for device ``ordinal``: the current one if it is that device's, else
    its primary context, made current on this thread."""
    drv = driver_api()
    err, ctx = drv.cuCtxGetCurrent()
    _check(err, "cuCtxGetCurrent")
    if int(ctx) != 0:
        err, dev = drv.cuCtxGetDevice()
        if int(err) == 0 and int(dev) == ordinal:
            return ctx
    ctx = _primary_context(ordinal)
    _check(drv.cuCtxSetCurrent(ctx)[0], "cuCtxSetCurrent")
    return ctx


def synchronize(ordinal: int = 0) -> None:
    """Wait for all work on the device's context (raises the launch's error if one failed)."""
    _require_gpu(ordinal)
    _make_current(ordinal)
    _check(driver_api().cuCtxSynchronize()[0], "cuCtxSynchronize")


def current_torch_stream() -> int:
    """The handle of torch's current CUDA stream (0, the default stream, without torch CUDA).

    Cheap enough to call per launch: ~0.2 us through torch's raw-stream getter, against ~4 us
    for ``torch.cuda.current_stream().cuda_stream`` (H200 machine).
    """
    get = _torch_stream_getter()
    return get() if get is not None else 0


@functools.cache
def _torch_stream_getter():
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    device = getattr(torch._C, "_cuda_getDevice", None)
    if raw is not None and device is not None:
        return lambda: raw(device())
    return lambda: int(torch.cuda.current_stream().cuda_stream)


class Module:
    """A cubin (or NUL-free PTX text, JIT-compiled by the driver) loaded on device ``ordinal``."""

    def __init__(self, image: bytes | str, ordinal: int = 0):
        _require_gpu(ordinal)
        drv = driver_api()
        self.ordinal = ordinal
        self.context = _make_current(ordinal)
        data = image.encode() + b"\0" if isinstance(image, str) else bytes(image)
        err, self.handle = drv.cuModuleLoadData(data)
        _check(err, "cuModuleLoadData")
        self._kernels: dict[str, Kernel] = {}

    def function(self, name: str) -> Kernel:
        """The kernel ``name`` (its ``extern "C"`` name, or the mangled one)."""
        k = self._kernels.get(name)
        if k is None:
            err, fn = driver_api().cuModuleGetFunction(self.handle, name.encode())
            _check(err, f"cuModuleGetFunction({name!r})")
            k = self._kernels[name] = Kernel(self, name, fn)
        return k

    def unload(self) -> None:
        """Free the module now (its kernels must not be launched afterwards)."""
        handle, self.handle = getattr(self, "handle", None), None
        if handle is not None:
            try:
                driver_api().cuModuleUnload(handle)
            except Exception:  # at interpreter exit the driver may be gone already
                pass

    def __del__(self):
        self.unload()


class Kernel:
    """One ``__global__`` function of a loaded :class:`Module` (which it keeps alive)."""

    def __init__(self, module: Module, name: str, handle):
        self.module, self.name, self.handle = module, name, handle
        self.max_dynamic_smem = STATIC_SMEM_LIMIT

    def attributes(self) -> dict[str, int]:
        """Registers, local/shared/constant bytes and the largest block the kernel can run."""
        drv = driver_api()
        a = drv.CUfunction_attribute
        names = {
            "registers": a.CU_FUNC_ATTRIBUTE_NUM_REGS,
            "max_threads_per_block": a.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            "shared_bytes": a.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            "local_bytes": a.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
            "const_bytes": a.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
            "ptx_version": a.CU_FUNC_ATTRIBUTE_PTX_VERSION,
            "binary_version": a.CU_FUNC_ATTRIBUTE_BINARY_VERSION,
        }
        out = {}
        for key, attr in names.items():
            err, v = drv.cuFuncGetAttribute(attr, self.handle)
            _check(err, f"cuFuncGetAttribute({key})")
            out[key] = int(v)
        return out

    def allow_dynamic_smem(self, nbytes: int) -> None:
        """Opt in to ``nbytes`` of dynamic shared memory (needed above 48 KiB)."""
        drv = driver_api()
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _check(
            drv.cuFuncSetAttribute(self.handle, attr, nbytes)[0],
            f"cuFuncSetAttribute(max dynamic shared memory = {nbytes})",
        )
        self.max_dynamic_smem = max(self.max_dynamic_smem, nbytes)

    def launcher(self, param_types: Sequence[str]) -> Launcher:
        """A :class:`Launcher` for parameters of these types (see :data:`PARAM_TYPES`)."""
        return Launcher(self, tuple(param_types))

    def __repr__(self) -> str:
        return f"Kernel({self.name!r})"


class ArgPacker:
    """``packer(*values) -> (block, params)``: a kernel's arguments laid out for the driver.

    A block is one ctypes array of 8-byte words: a slot per parameter holding its value (8
    bytes each; a TMA tensor map, kind ``"tmap"``, 128 bytes given as ``bytes``) and, after
    the slots, the ``n`` pointers to them that ``cuLaunchKernel`` reads; ``params`` is the
    address of that pointer array (0, a NULL pointer, for a kernel without parameters). A
    block is never written after it is built, so a launch cannot see another thread's values
    and a block can be launched again (the executable keeps one per set of tensors it has
    checked). Wrong values raise :class:`struct.error`.
    """

    __slots__ = ("param_types", "_n", "_array", "_pack", "_offsets", "_words", "_addressof")

    def __init__(self, param_types: Sequence[str]):
        self.param_types = tuple(param_types)
        self._n = n = len(self.param_types)
        codes = [PARAM_TYPES[t] for t in self.param_types]
        sizes = [struct.calcsize("<" + c) for c in codes]
        self._offsets = tuple(sum(sizes[:i]) for i in range(n))
        self._words = sum(sizes) // 8
        import ctypes  # here, not at the top: a compile the disk cache answers never packs

        self._addressof = ctypes.addressof
        self._array = ctypes.c_uint64 * (self._words + n)
        self._pack = struct.Struct("<" + "".join(codes) + "Q" * n).pack_into

    def __call__(self, *values):
        n = self._n
        if not n:
            if values:
                raise struct.error(f"expected 0 values, got {len(values)}")
            return None, 0
        block = self._array()
        base = self._addressof(block)
        if self._words == n:  # 8-byte slots only: the pointers are every 8 bytes
            self._pack(block, 0, *values, *range(base, base + 8 * n, 8))
        else:
            self._pack(block, 0, *values, *(base + o for o in self._offsets))
        return block, base + 8 * self._words


@functools.cache
def launch_entry_address() -> int | None:
    """The address of the driver's ``cuLaunchKernel``, the same entry point
    ``cuda.bindings`` calls (legacy default stream unless ``CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM``
    asks for the per-thread one); None when the driver does not give it."""
    from tirx import config

    drv = driver_api()
    try:
        err, version = drv.cuDriverGetVersion()
        if int(err) != 0:
            return None
        flags = drv.CUdriverProcAddress_flags
        flag = (
            flags.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
            if config.per_thread_default_stream()
            else flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM
        )
        err, address, *_ = drv.cuGetProcAddress(b"cuLaunchKernel", version, flag)
    except Exception:  # no driver
        return None
    return (int(address) or None) if int(err) == 0 else None


def OK():
    """``CUresult.CUDA_SUCCESS`` (what a launch answers when it went well)."""
    return driver_api().CUresult.CUDA_SUCCESS


class _Streams(dict):
    """``CUstream`` wrappers by handle, built once per handle (the driver call takes objects)."""

    def __missing__(self, handle: int):
        if len(self) >= 64:  # streams come and go; keep the map small
            self.clear()
        obj = self[handle] = driver_api().CUstream(handle)
        return obj


STREAMS = _Streams()


class Launcher:
    """``launcher(grid, block, smem, stream, *values)`` launches the kernel.

    ``grid`` and ``block`` are 3-tuples (an int means ``(n, 1, 1)``), ``smem`` the dynamic shared
    memory in bytes, ``stream`` a ``CUstream`` handle as an int (0: the default stream; see
    :func:`current_torch_stream`). ``values`` are Python ints/floats, pointers as ints
    (``tensor.data_ptr()``). The launch is asynchronous.

    ``entry`` is the function called with ``cuLaunchKernel``'s arguments (the driver's by
    default; tests pass a recorder). :class:`~tirx.backend.cuda.executable.CudaExecutable`
    calls ``entry`` itself on its fast path, with blocks from :attr:`pack`. ``entry_address``
    is the address of the C function that ``entry`` stands for, for the executable's compiled
    fast path (by default ``cuLaunchKernel``'s, see :func:`launch_entry_address`; None with a
    Python ``entry`` unless one is given).
    """

    __slots__ = ("kernel", "param_types", "pack", "entry", "entry_address", "_smem_ok", "_ok")

    def __init__(
        self,
        kernel: Kernel,
        param_types: tuple[str, ...],
        entry=None,
        entry_address: int | None = None,
    ):
        bad = [t for t in param_types if t not in PARAM_TYPES]
        if bad:
            raise LaunchError(
                f"unknown parameter type(s) {bad} for kernel {kernel.name!r}",
                hint=f"use {sorted(PARAM_TYPES)}",
            )
        drv = driver_api()
        self.kernel, self.param_types = kernel, tuple(param_types)
        self.pack = ArgPacker(self.param_types)
        self.entry = drv.cuLaunchKernel if entry is None else entry
        if entry is None and entry_address is None:
            entry_address = launch_entry_address()
        self.entry_address = entry_address
        self._smem_ok = kernel.max_dynamic_smem
        self._ok = OK()

    def __call__(self, grid, block, smem: int, stream: int, *values) -> None:
        try:
            keep, params = self.pack(*values)
        except struct.error as e:
            raise self._bad_values(values, e) from None
        self.prepare(smem)
        try:
            gx, gy, gz = grid
            bx, by, bz = block
        except (TypeError, ValueError):
            (gx, gy, gz), (bx, by, bz) = _dim3(grid, "grid"), _dim3(block, "block")
        s = STREAMS[stream]
        (err,) = self.entry(self.kernel.handle, gx, gy, gz, bx, by, bz, smem, s, params, 0)
        if err is not self._ok:
            self.failed(err, (gx, gy, gz), (bx, by, bz), smem, s, params)

    def prepare(self, smem: int) -> None:
        """Opt in to ``smem`` bytes of dynamic shared memory where that needs the attribute."""
        if smem > self._smem_ok:
            self.kernel.allow_dynamic_smem(smem)
            self._smem_ok = smem

    def failed(self, err, grid, block, smem, stream, params) -> None:
        """After a launch that did not answer ``CUDA_SUCCESS``: retry once where the thread had
        no current context (e.g. a worker thread), else raise the :class:`LaunchError`."""
        if int(err) == 0:
            return
        if _result_name(err) == "CUDA_ERROR_INVALID_CONTEXT":
            _check(driver_api().cuCtxSetCurrent(self.kernel.module.context)[0], "cuCtxSetCurrent")
            (err,) = self.entry(self.kernel.handle, *grid, *block, smem, stream, params, 0)
            if int(err) == 0:
                return
        raise _error(
            err, f"cuLaunchKernel({self.kernel.name!r}, grid={grid}, block={block}, smem={smem})"
        )

    def _bad_values(self, values, e: struct.error) -> LaunchError:
        name, types = self.kernel.name, self.param_types
        if len(values) != len(types):
            return LaunchError(
                f"kernel {name!r} takes {len(types)} arguments {list(types)}, got {len(values)}"
            )
        for i, (t, v) in enumerate(zip(types, values)):
            try:
                struct.pack("<" + PARAM_TYPES[t], v)
            except struct.error as err:
                hint = "pass tensor.data_ptr() for a pointer" if t == "ptr" else None
                return LaunchError(
                    f"argument {i} ({t}) of kernel {name!r} cannot be {v!r}: {err}", hint=hint
                )
        return LaunchError(f"arguments of kernel {name!r}: {e}")


def _dim3(v, what: str) -> tuple[int, int, int]:
    if isinstance(v, int):
        return v, 1, 1
    t = tuple(v)
    if len(t) > 3 or not all(isinstance(x, int) for x in t):
        raise LaunchError(f"{what} must be an int or up to 3 ints, got {v!r}")
    return (*t, 1, 1)[:3]
