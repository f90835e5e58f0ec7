"""The block's shared memory, with initialization, race and asynchronous-copy tracking.

Checks (each a :class:`tirx.sim.faults.Fault` naming the thread):

* bounds and alignment of element accesses (through :class:`SharedBuffer`) and of 16-byte
  matrix rows / copy chunks (inside one shared allocation);
* initialization: shared bytes must be written in this block before they are read;
* asynchronous copies: the destination of a ``cp.async`` that has not completed may be
  neither read nor written by anyone (:mod:`tirx.families.cp_async.sim` drives this);
* races (shared memory): between two barriers, a byte written by one thread may not be read
  or written by another thread. Only barriers order different threads' accesses, whatever
  instruction makes them (as on the machine, where ``compute-sanitizer --tool racecheck``
  reports the same pairs): ``Barrier("cta")`` orders everything; ``Barrier("warp")`` orders
  the accesses of that warp's threads among themselves. ldmatrix/stmatrix are no fences; their
  rows are attributed to the lanes that supplied the rows' addresses (so two lanes of one
  stmatrix writing the same byte race, and a lane's ldmatrix row that another lane stored
  races unless a barrier lies between).

Race bookkeeping is per byte: the last writer (thread, warp epoch at the write, source line)
and the readers since (one warp or "several", the reader thread at the latest epoch or
"several", the latest reader's line). This is exact for the first conflicting pair, which is
all the simulator reports, naming both threads and both lines.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType
from .atomics import AtomicAccesses
from .faults import Fault
from .memory import (
    ONES,
    UINT,
    accessors_per_byte,
    check_bounds,
    first,
    merge_accessors,
    round_up,
    thread_name,
)
from .numeric import storage_type
from .proxy import AsyncProxy

__all__ = ["SharedMemory", "SharedBuffer", "line_of", "race_hint"]


def line_of(span) -> str:
    """``line N`` of a statement's span (``an unknown line`` when it has none)."""
    return f"line {span.line}" if span is not None else "an unknown line"


def race_hint(first, second, same_warp: bool) -> str:
    """The fix for a race between the accesses at spans ``first`` (earlier) and ``second``."""
    where = f"between {line_of(first)} and {line_of(second)}"
    if same_warp:
        return f"put T.cuda.cta_sync() (or T.cuda.warp_sync() within one warp) {where}"
    return (
        f"put T.cuda.cta_sync() {where} (the threads are in different warps, so "
        f"T.cuda.warp_sync() does not order them)"
    )


class SharedMemory:
    """The shared memory of the block being run, with initialization and race tracking."""

    recorder = None  # a profiling run's tirx.sim.recorder.Recorder (None: not profiling)

    def __init__(self, allocations: list[tuple[int, int, str]], total: int, warps: int):
        self.allocs = sorted(allocations)
        ends = [o + n for o, n, _ in self.allocs]
        size = round_up(max([total, *ends, 16]), 16)
        self.starts = np.array([o for o, _, _ in self.allocs], dtype=np.int64)
        self.ends = np.array(ends, dtype=np.int64)
        self.data = np.zeros(size, dtype=np.uint8)
        self.written = np.zeros(size, dtype=np.uint8)
        self.w_tid = np.full(size, -1, dtype=np.int32)
        self.w_stamp = np.zeros(size, dtype=np.int32)
        self.r_warp = np.full(size, -1, dtype=np.int32)
        self.r_tid = np.zeros(size, dtype=np.int32)
        self.r_stamp = np.zeros(size, dtype=np.int32)
        self.w_site = np.zeros(size, dtype=np.int32)
        self.r_site = np.zeros(size, dtype=np.int32)
        self.sites: list = [None]  # site id -> span of the statement that made the access
        self._site_ids: dict = {}
        self.where = lambda: None  # the span of the statement now executing (set by the machine)
        # bytes an asynchronous copy will write once its wait completes: issuing thread, line
        self.pend_tid = np.full(size, -1, dtype=np.int32)
        self.pend_site = np.zeros(size, dtype=np.int32)
        self.in_flight = 0  # bytes pending, to skip the check when there are none
        self.copy_kinds: dict = {}  # site -> (copy's name, how to wait), other than cp.async's
        # families' state that checks shared writes (an asynchronous reader's bytes in flight):
        # objects with shared_write(bytes, threads, record), called before every generic write
        self.observers: list = []
        self.proxy: AsyncProxy | None = None  # made by the first asynchronous-proxy reader
        # a block of a cluster of several: its accesses are recorded for its peers' checks
        # too (tirx/sim/distributed.py's LocalHook, with access(bytes, threads, write))
        self.cluster = None
        self.scratch = np.zeros(size, dtype=np.int64)
        self.epoch = np.zeros(max(warps, 1), dtype=np.int32)
        self.atomics = AtomicAccesses(size)  # atomic updates since the last barrier
        self.data16 = self.data.view(np.uint16)
        self.written64 = self.written.view(np.uint64)

    def reset(self) -> None:
        self.data.fill(0)
        self.written.fill(0)
        self.barrier()
        self.epoch.fill(0)
        self.pend_tid.fill(-1)
        self.in_flight = 0
        if self.proxy is not None:
            self.proxy.reset()

    def barrier(self) -> None:
        self.w_tid.fill(-1)
        self.r_warp.fill(-1)
        self.atomics.clear()

    def describe(self, addr: int) -> str:
        for start, nbytes, name in self.allocs:
            if start <= addr < start + nbytes:
                return f"'{name}' byte {addr - start} (shared address {addr})"
        return f"shared address {addr}"

    # -------------------------------------------------------------------- race tracking

    def spread(self, addr: np.ndarray, s: int, tids: np.ndarray):
        if s == 1:
            return addr, tids
        return (addr[:, None] + np.arange(s)).ravel(), np.repeat(tids, s)

    def site(self, span=None) -> int:
        """The id of the statement now executing (or of ``span``), for the race bookkeeping."""
        span = self.where() if span is None else span
        sid = self._site_ids.get(span)
        if sid is None:
            sid = self._site_ids[span] = len(self.sites)
            self.sites.append(span)
        return sid

    def race(self, b, p, k: int, verb: str, other: str, other_tid: int, other_site) -> Fault:
        here, there = self.where(), self.sites[int(other_site)]
        same_warp = other_tid >= 0 and other_tid >> 5 == int(p[k]) >> 5
        wait = self.copy_kinds.get(int(other_site), (None, None))[1]  # a tensor copy's write
        return Fault(
            f"shared-memory race: {thread_name(int(p[k]))} {verb} {self.describe(int(b[k]))} at "
            f"{line_of(here)}, which {other} at {line_of(there)} with no barrier in between",
            int(p[k]),
            wait or race_hint(there, here, same_warp),
        )

    def _check_writer(self, b, p, verb: str):
        """Fault if another thread wrote one of bytes ``b`` since the last barrier that orders
        it before ``p``; returns (warp of p, epoch of that warp)."""
        wp = p >> 5
        e = self.epoch[wp]
        wt = self.w_tid[b]
        bad = (wt >= 0) & (wt != p) & (((wt >> 5) != wp) | (self.w_stamp[b] == e))
        if bad.any():
            k = first(bad)
            other = int(wt[k])
            raise self.race(b, p, k, verb, f"{thread_name(other)} wrote", other, self.w_site[b[k]])
        return wp, e

    def track_read(self, addr: np.ndarray, s: int, tids: np.ndarray) -> None:
        b, p = self.spread(addr, s, tids)
        wp, e = self._check_writer(b, p, "reads")
        self.atomics.check(self, b, p, wp, e, "reads")
        self.r_site[b] = self.site()
        if self.cluster is not None:
            self.cluster.access(b, p, False)
        n = b.size
        order = np.arange(n)
        self.scratch[b] = order
        if (self.scratch[b] == order).all():
            self._merge_readers(b, wp, p, e)
            return
        self._merge_readers(*accessors_per_byte(b, wp, p, e))

    def check_read(self, addr: np.ndarray, s: int, tids: np.ndarray) -> None:
        """The race checks of a read of ``s`` bytes at each of ``addr`` by ``tids``, without
        recording it (a wgmma.mma_async's operands at issue: tirx/sim/wgmma_async.py)."""
        b, p = self.spread(addr, s, tids)
        wp, e = self._check_writer(b, p, "reads")
        self.atomics.check(self, b, p, wp, e, "reads")

    def _merge_readers(self, b, in_w, in_p, in_e) -> None:
        merge_accessors(self.r_warp, self.r_stamp, self.r_tid, b, in_w, in_p, in_e)

    def track_write(self, addr: np.ndarray, s: int, tids: np.ndarray, record=True) -> None:
        """Check a write of ``s`` bytes at each of ``addr`` by ``tids``; ``record=False`` only
        checks (an asynchronous copy at issue: its bytes land later)."""
        b, p = self.spread(addr, s, tids)
        self.generic_write(b, p, record)
        wp, e = self._check_writer(b, p, "writes")
        self.atomics.check(self, b, p, wp, e, "writes")
        rw = self.r_warp[b]
        bad = (rw == -2) | (
            (rw >= 0) & ((rw != wp) | ((self.r_stamp[b] == e) & (self.r_tid[b] != p)))
        )
        if bad.any():
            k = first(bad)
            rt = int(self.r_tid[b[k]])
            if rw[k] == -2:
                other = "threads of several warps read"
            elif rw[k] != wp[k] or rt < 0:
                other = f"threads of warp {rw[k]} read" if rt < 0 else f"{thread_name(rt)} read"
            else:
                other = f"{thread_name(rt)} read"
            who = rt if rt >= 0 else (32 * int(rw[k]) if rw[k] >= 0 else -1)
            raise self.race(b, p, k, "writes", other, who, self.r_site[b[k]])
        self.scratch[b] = p
        bad = self.scratch[b] != p
        if bad.any():
            k = first(bad)
            other = int(self.scratch[b[k]])
            raise self.race(
                b,
                p,
                k,
                "writes",
                f"{thread_name(other)} also writes in the same step",
                other,
                self.site(),
            )
        if self.cluster is not None:
            self.cluster.access(b, p, True)
        if not record:
            return
        self.w_site[b] = self.site()
        self.w_tid[b] = p
        self.w_stamp[b] = e
        self.r_warp[b] = -1

    def generic_write(self, b: np.ndarray, p: np.ndarray, record: bool = True) -> None:
        """Bytes ``b`` are written by threads ``p`` through the generic proxy (a store, an
        atomic, stmatrix, a cp.async landing): the observers check them (``record=False``: a
        copy at issue, whose bytes land later) and the async proxy notes them unfenced."""
        for observer in self.observers:
            observer.shared_write(b, p, record)
        if record and self.proxy is not None:
            self.proxy.generic_write(b, p)

    def async_proxy(self) -> AsyncProxy:
        """The proxy-fence state, made when a kernel first has an asynchronous-proxy reader."""
        if self.proxy is None:
            self.proxy = AsyncProxy(self)
        return self.proxy

    def track_atomic(self, addr: np.ndarray, s: int, tids: np.ndarray) -> None:
        """Race checks of an atomic on ``s`` bytes at each of ``addr``: against plain writes and
        plain reads of other threads since the last barrier (never against other atomics)."""
        verb = "atomically updates"
        if self.in_flight:
            self.check_pending(addr, s, tids, verb)
        b, p = self.spread(addr, s, tids)
        self.generic_write(b, p)  # a write of the generic proxy, as a store is
        wp, e = self._check_writer(b, p, verb)
        rw = self.r_warp[b]
        bad = (rw == -2) | (
            (rw >= 0) & ((rw != wp) | ((self.r_stamp[b] == e) & (self.r_tid[b] != p)))
        )
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            rt = int(self.r_tid[b[k]])
            if rw[k] == -2 or rt < 0:
                other = (
                    "threads of several warps read"
                    if rw[k] == -2
                    else f"threads of warp {rw[k]} read"
                )
                who = -1 if rw[k] == -2 else 32 * int(rw[k])
            else:
                other, who = f"thread {rt} (warp {rt // 32}, lane {rt % 32}) read", rt
            raise self.race(b, p, k, verb, other, who, self.r_site[b[k]])
        if self.cluster is not None:
            self.cluster.access(b, p, True)
        self.atomics.record(b, p, wp, e, self.site())

    # ------------------------------------------------------------ asynchronous copies

    def check_pending(self, addr: np.ndarray, s: int, tids: np.ndarray, verb: str) -> None:
        """Fault if one of the ``s`` bytes at each of ``addr`` is the destination of an
        asynchronous copy that has not completed (reading it, or writing it, is a race with the
        copy engine, whoever does it)."""
        b, p = self.spread(addr, s, tids)
        pt = self.pend_tid[b]
        bad = pt >= 0
        if not bad.any():
            return
        k = first(bad)
        owner, who = int(pt[k]), int(p[k])
        copy_line = line_of(self.sites[int(self.pend_site[b[k]])])
        name, wait = self.copy_kinds.get(int(self.pend_site[b[k]]), ("cp.async", None))
        if wait is not None:
            fix = wait
        elif verb == "reads":
            fix = (
                'wait for the copy first: T.ptx["cp.async.wait_group"](n) (or wait_all) '
                "covering its commit group"
            )
            if owner != who:
                fix += ", then T.cuda.cta_sync(), before another thread reads it"
        else:
            fix = "wait for the copy (and synchronize) before reusing its destination"
        raise Fault(
            f"{thread_name(who)} {verb} {self.describe(int(b[k]))} at {line_of(self.where())}, the "
            f"destination of the {name} at {copy_line} issued by {thread_name(owner)}, which has "
            f"not completed",
            who,
            fix,
        )

    def start_copy(self, addr: np.ndarray, size: int, tids: np.ndarray) -> None:
        """Asynchronous copies of ``size`` bytes to each of ``addr`` were issued by ``tids``."""
        if self.in_flight:
            self.check_pending(addr, size, tids, "writes")
        self.track_write(addr, size, tids, record=False)
        b, p = self.spread(addr, size, tids)
        self.pend_tid[b] = p
        self.pend_site[b] = self.site()
        self.in_flight += b.size

    def land_copy(self, addr: np.ndarray, data: np.ndarray, tids: np.ndarray, site: int):
        """Copies complete: ``data`` ``[n, size]`` lands at ``addr``, written by ``tids`` now
        (so other threads need a barrier after this point), at the copy's line ``site``."""
        size = data.shape[1]
        b, p = self.spread(addr, size, tids)
        self.generic_write(b, p)
        self.data[b] = data.ravel()
        self.written[b] = 0xFF
        self.pend_tid[b] = -1
        self.in_flight -= b.size
        self.w_tid[b] = p
        self.w_stamp[b] = self.epoch[p >> 5]
        self.w_site[b] = site
        self.r_warp[b] = -1

    # ---------------------------------------------------------------- element accesses

    def read(self, addr: np.ndarray, d: DType, tids: np.ndarray) -> np.ndarray:
        dt = storage_type(d)
        s = dt.itemsize
        if self.in_flight:
            self.check_pending(addr, s, tids, "reads")
        w = addr // s
        ok = self.written.view(UINT[s])[w] == ONES[s]
        if not ok.all():
            k = first(~ok)
            raise Fault(
                f"read of shared memory that nothing wrote in this block: {d} at "
                f"{self.describe(int(addr[k]))}",
                tids[k],
                "write shared memory (and synchronize) before reading it",
            )
        self.track_read(addr, s, tids)
        if self.recorder is not None:
            self.recorder.shared_access(addr, s, tids, False)
        return self.data.view(dt)[w]

    def write(self, addr: np.ndarray, bits, d: DType, tids: np.ndarray) -> None:
        dt = storage_type(d)
        s = dt.itemsize
        if self.in_flight:
            self.check_pending(addr, s, tids, "writes")
        self.track_write(addr, s, tids)
        if self.recorder is not None:
            self.recorder.shared_access(addr, s, tids, True)
        w = addr // s
        self.data.view(dt)[w] = bits
        self.written.view(UINT[s])[w] = ONES[s]

    # ------------------------------------------------------------------- matrix rows

    def check_rows(self, addr: np.ndarray, tids: np.ndarray, what: str, size=16) -> None:
        bad = addr % size != 0
        if bad.any():
            k = first(bad)
            why = (
                "each 8x8 matrix row is 16 bytes and must start at a multiple of 16"
                if what in ("ldmatrix", "stmatrix")
                else f"a {size}-byte copy's shared destination must be a multiple of {size}"
            )
            raise Fault(f"{what} row address {addr[k]} is not {size}-byte aligned", tids[k], why)
        k_alloc = np.searchsorted(self.starts, addr, side="right") - 1
        inside = (k_alloc >= 0) & (addr >= 0)
        if self.ends.size:
            inside &= addr + size <= self.ends[np.maximum(k_alloc, 0)]
        else:
            inside[:] = False
        if not inside.all():
            k = first(~inside)
            raise Fault(
                f"{what} row [{addr[k]}, {addr[k] + size}) of shared memory lies outside every "
                f"shared allocation",
                tids[k],
            )

    def read_rows(self, addr: np.ndarray, tids: np.ndarray, what: str) -> np.ndarray:
        """16-byte rows at ``addr`` (one per entry) as uint16 ``[n, 8]``."""
        self.check_rows(addr, tids, what)
        if self.in_flight:
            self.check_pending(addr, 16, tids, "reads")
        words = (addr // 8)[:, None] + np.arange(2)
        ok = (self.written64[words] == ONES[8]).all(axis=1)
        if not ok.all():
            k = first(~ok)
            raise Fault(
                f"{what} reads a row of shared memory that nothing wrote in this block: "
                f"{self.describe(int(addr[k]))}",
                tids[k],
                "write shared memory (and synchronize) before reading it",
            )
        self.track_read(addr, 16, tids)
        if self.recorder is not None:
            self.recorder.shared_access(addr, 16, tids, False, rows=True)
        return self.data16[(addr // 2)[:, None] + np.arange(8)]

    def write_rows(self, addr: np.ndarray, rows: np.ndarray, tids: np.ndarray, what: str):
        self.check_rows(addr, tids, what)
        if self.in_flight:
            self.check_pending(addr, 16, tids, "writes")
        self.track_write(addr, 16, tids)
        if self.recorder is not None:
            self.recorder.shared_access(addr, 16, tids, True, rows=True)
        self.data16[(addr // 2)[:, None] + np.arange(8)] = rows
        self.written64[(addr // 8)[:, None] + np.arange(2)] = ONES[8]


class SharedBuffer:
    """One shared allocation seen by Load/Store: element indices relative to its start."""

    def __init__(self, memory: SharedMemory, name: str, offset: int, nbytes: int):
        self.memory = memory
        self.name = name
        self.offset = offset
        self.nbytes = nbytes

    def address(self, index: np.ndarray, d: DType, tids: np.ndarray, what: str) -> np.ndarray:
        s = check_bounds(index, d, tids, self.nbytes, f"{what} shared '{self.name}'")
        if self.offset % s:
            raise Fault(
                f"misaligned {what} shared '{self.name}' as {d}: the buffer starts at shared "
                f"address {self.offset}, not a multiple of {s}",
                tids[0],
            )
        return index * s + self.offset

    def load(self, index: np.ndarray, d: DType, tids: np.ndarray) -> np.ndarray:
        return self.memory.read(self.address(index, d, tids, "read of"), d, tids)

    def store(self, index: np.ndarray, bits, d: DType, tids: np.ndarray) -> None:
        addr = self.address(index, d, tids, "write to")
        self.memory.write(addr, bits, d, tids)
