"""Memory with checks: global tensors, the block's shared memory, per-thread local arrays.

Every access names the threads performing it (linear thread ids in the block) so that a
fault can say which thread did what. The checks:

* bounds: an access must lie inside its buffer (global, shared or local); an ldmatrix or
  stmatrix row must lie inside one shared allocation;
* alignment: an access of ``s`` bytes must sit at an address that is a multiple of ``s``
  (16 for a matrix row);
* initialization: shared bytes must be written in this block before they are read, and a
  local array's bytes before the owning thread reads them;
* races and asynchronous-copy destinations: see :mod:`tirx.sim.shared`.
"""

from __future__ import annotations

import contextvars

import numpy as np

from ..dtypes import DType
from ..ir import nodes as ir
from .faults import Fault
from .numeric import constant, storage_type

__all__ = ["GlobalRegion", "LocalArray", "as_index", "constant_slot"]

UINT = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.uint16),
    4: np.dtype(np.uint32),
    8: np.dtype(np.uint64),
}
ONES = {s: d.type(np.iinfo(d).max) for s, d in UINT.items()}
U64 = np.dtype(np.uint64)


def as_index(values, n: int) -> np.ndarray:
    """``values`` (an integer array or 0-d array) as an int64 array of length ``n``."""
    v = np.asarray(values)
    if v.dtype != np.int64:
        v = v.astype(np.int64)
    if v.ndim == 0:
        v = np.broadcast_to(v, (n,))
    return v


def constant_slot(index) -> int | None:
    """The slot a local access with a constant index names, as the general path computes it
    (the constant converted to its dtype, C rules; it reads :meth:`LocalArray.load_slot`
    then); None for an index that is not an integer constant (or lies beyond int64)."""
    if isinstance(index, int) and not isinstance(index, bool):
        index = ir.const(index)
    if not isinstance(index, ir.Const) or index.dtype.kind not in ("int", "uint"):
        return None
    slot = int(constant(index.value, index.dtype))
    return slot if -(2**63) <= slot < 2**63 else None


def first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def check_bounds(index: np.ndarray, d: DType, tids, nbytes: int, what: str, unit="element") -> int:
    """Raise a Fault naming the first element of ``index`` (in units of ``d``) outside
    ``nbytes``; ``what`` says which access of which buffer. Returns the element size."""
    s = storage_type(d).itemsize
    bad = index.view(U64) >= nbytes // s
    if bad.any():
        k = first(bad)
        raise Fault(
            f"out-of-bounds {what}: {unit} {index[k]} as {d} (bytes {index[k] * s}.."
            f"{index[k] * s + s - 1}) but it holds {nbytes} bytes",
            tids[k],
        )
    return s


# The block shape (x, y, z) of the run in progress (tirx.sim.run sets it), for thread names.
BLOCK_SHAPE: contextvars.ContextVar[tuple[int, int, int] | None] = contextvars.ContextVar(
    "tirx_sim_block_shape", default=None
)


def thread_xyz(tid: int, shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """The ``threadIdx`` (x, y, z) of linear thread ``tid`` in a block of ``shape``."""
    bx, by, _ = shape
    return tid % bx, tid // bx % by, tid // (bx * by)


def _xyz_name(tid: int, shape) -> tuple[int, int, int] | None:
    """The ``threadIdx`` a report names a thread by: in a block of two or three dimensions
    (as compute-sanitizer does); None in one of one (the linear id is the name)."""
    return thread_xyz(tid, shape) if shape is not None and shape[1] * shape[2] > 1 else None


def place(block: tuple[int, int, int], tid: int, shape) -> str:
    """Where a fault happened, for the end of its message: ``block (0, 0, 0), warp 1, lane 5``;
    in a block of two or three dimensions with the thread's ``threadIdx`` too."""
    xyz = _xyz_name(tid, shape)
    named = f"thread {xyz}, " if xyz is not None else ""
    return f"block {block}, {named}warp {tid // 32}, lane {tid % 32}"


def thread_name(tid: int) -> str:
    """``thread 37 (warp 1, lane 5)``; in a block of two or three dimensions the thread is named
    by its ``threadIdx``: ``thread (5, 1, 0) (warp 1, lane 5)`` in a (32, 8) block."""
    xyz = _xyz_name(tid, BLOCK_SHAPE.get())
    return f"thread {tid if xyz is None else xyz} (warp {tid // 32}, lane {tid % 32})"


def round_up(n: int, m: int) -> int:
    return max(m, -(-n // m) * m)


class GlobalRegion:
    """A global tensor parameter: the caller's array, accessed as raw bytes in place."""

    guard = None  # a family's check of accesses to bytes its pending copies will write
    recorder = None  # a profiling run's tirx.sim.recorder.Recorder (None: not profiling)

    def __init__(self, name: str, array: np.ndarray):
        flat = array.reshape(-1)
        self.name = name
        self.bytes = flat.view(np.uint8)
        self.nbytes = self.bytes.size
        self.address = flat.ctypes.data
        self._views: dict[np.dtype, np.ndarray] = {}

    def view(self, dt: np.dtype) -> np.ndarray:
        v = self._views.get(dt)
        if v is None:
            n = self.nbytes // dt.itemsize
            v = self._views[dt] = self.bytes[: n * dt.itemsize].view(dt)
        return v

    def check(self, index: np.ndarray, d: DType, tids: np.ndarray, what: str) -> np.dtype:
        dt = storage_type(d)
        s = check_bounds(index, d, tids, self.nbytes, f"{what} global '{self.name}'")
        if self.guard is not None:  # bytes a pending bulk copy will write
            self.guard.check_global(self, index * s, s, tids, what)
        if self.address % s:
            raise Fault(
                f"misaligned {what} global '{self.name}' as {d}: the tensor's data pointer "
                f"{self.address:#x} is not a multiple of {s}",
                tids[0],
            )
        return dt

    def load(self, index: np.ndarray, d: DType, tids: np.ndarray) -> np.ndarray:
        dt = self.check(index, d, tids, "read of")
        if self.recorder is not None:
            self.recorder.global_access(index * dt.itemsize, dt.itemsize, tids, False)
        return self.view(dt)[index]

    def store(self, index: np.ndarray, bits: np.ndarray, d: DType, tids: np.ndarray) -> None:
        dt = self.check(index, d, tids, "write to")
        if self.recorder is not None:
            self.recorder.global_access(index * dt.itemsize, dt.itemsize, tids, True)
        self.view(dt)[index] = bits


class LocalArray:
    """A local buffer: one row of bytes per thread, plus a written-mask per byte."""

    guard = None  # a family's check of registers an asynchronous instruction holds

    def __init__(self, name: str, nbytes: int, threads: int):
        self.name = name
        self.nbytes = nbytes
        width = round_up(nbytes, 8)
        self.data = np.zeros((threads, width), dtype=np.uint8)
        self.written = np.zeros((threads, width), dtype=np.uint8)
        self._views: dict[np.dtype, tuple[np.ndarray, np.ndarray]] = {}

    def reset(self) -> None:
        self.data.fill(0)
        self.written.fill(0)

    def views(self, dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        v = self._views.get(dt)
        if v is None:
            v = self._views[dt] = (self.data.view(dt), self.written.view(UINT[dt.itemsize]))
        return v

    def _check(self, index: np.ndarray, d: DType, tids: np.ndarray, what: str) -> None:
        check_bounds(index, d, tids, self.nbytes, f"{what} local '{self.name}'", "slot")

    def load(self, index: np.ndarray, d: DType, tids: np.ndarray, rows) -> np.ndarray:
        """``rows`` indexes the thread axis: the active-thread array or a full slice."""
        self._check(index, d, tids, "read of")
        dt = storage_type(d)
        if self.guard is not None:  # wgmma accumulators: in flight, or read since the fence
            self.guard.access(index, dt.itemsize, tids, rows, False)
        data, written = self.views(dt)
        ok = written[rows, index] == ONES[dt.itemsize]
        if not ok.all():
            k = first(~ok)
            raise self._unwritten(index[k], d, tids[k])
        return data[rows, index]

    def load_slot(self, slot: int, d: DType, tids: np.ndarray, rows) -> np.ndarray:
        """:meth:`load` of one slot, the same for every thread (a register operand, ``x[3]``):
        the same checks and faults, without an index array."""
        dt = storage_type(d)
        if not self._direct(dt, slot, slot):
            return self.load(np.full(tids.size, slot, np.int64), d, tids, rows)
        data, written = self.views(dt)
        ok = written[rows, slot] == ONES[dt.itemsize]
        if not ok.all():
            raise self._unwritten(slot, d, tids[first(~ok)])
        return data[rows, slot]

    def load_slots(self, slots: tuple[int, ...], d: DType, tids: np.ndarray, rows) -> np.ndarray:
        """:meth:`load_slot` of each of ``slots``, a column each (a register vector): one
        gather for all, and the fault that reading them one after another would raise first."""
        dt = storage_type(d)
        if not self._direct(dt, min(slots), max(slots)):
            return np.stack([self.load_slot(s, d, tids, rows) for s in slots], axis=-1)
        data, written = self.views(dt)
        at = (rows[:, None], np.array(slots))
        bad = written[at] != ONES[dt.itemsize]
        if bad.any():
            j = first(bad.any(axis=0))
            raise self._unwritten(slots[j], d, tids[first(bad[:, j])])
        return data[at]

    def _direct(self, dt: np.dtype, lo: int, hi: int) -> bool:
        """Whether slots ``lo .. hi`` of ``dt`` take the fixed-slot paths: inside the array, and
        no guard watching it (else the general path raises or checks what it must)."""
        return self.guard is None and 0 <= lo <= hi < self.nbytes // dt.itemsize

    def _unwritten(self, slot, d: DType, tid) -> Fault:
        return Fault(
            f"read of local '{self.name}' slot {slot} as {d}, which this thread never wrote "
            f"(a register holding garbage on the GPU)",
            tid,
        )

    def store(self, index: np.ndarray, bits, d: DType, tids: np.ndarray, rows) -> None:
        self._check(index, d, tids, "write to")
        dt = storage_type(d)
        if self.guard is not None:
            self.guard.access(index, dt.itemsize, tids, rows, True)
        data, written = self.views(dt)
        data[rows, index] = bits
        written[rows, index] = ONES[dt.itemsize]

    def store_slot(self, slot: int, bits, d: DType, tids: np.ndarray, rows) -> None:
        """:meth:`store` to one slot, the same for every thread."""
        dt = storage_type(d)
        if not self._direct(dt, slot, slot):
            self.store(np.full(tids.size, slot, np.int64), bits, d, tids, rows)
            return
        data, written = self.views(dt)
        data[rows, slot] = bits
        written[rows, slot] = ONES[dt.itemsize]

    def store_slots(self, slots: tuple[int, ...], bits: np.ndarray, d: DType, tids, rows) -> None:
        """:meth:`store_slot` of column ``j`` of ``bits`` to ``slots[j]``, for every ``j``, in
        one scatter (one after another where a slot repeats or faults)."""
        dt = storage_type(d)
        if not self._direct(dt, min(slots), max(slots)) or len(set(slots)) < len(slots):
            for j, s in enumerate(slots):
                self.store_slot(s, np.ascontiguousarray(bits[:, j]), d, tids, rows)
            return
        data, written = self.views(dt)
        at = (rows[:, None], np.array(slots))
        data[at] = bits
        written[at] = ONES[dt.itemsize]

    def peek(self, index: int, dt: np.dtype, tids: np.ndarray) -> np.ndarray:
        """Raw contents without checks (for traces of output registers)."""
        return self.views(dt)[0][tids, index]
