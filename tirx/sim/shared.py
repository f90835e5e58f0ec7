"""The block's shared memory, with initialization, race and asynchronous-copy tracking.

Checks (each a :class:`tirx.sim.faults.Fault` naming the thread):

* bounds and alignment of element accesses (through :class:`SharedBuffer`) and of 16-byte
  matrix rows / copy chunks (inside one shared allocation);
* initialization: shared bytes must be written in this block before they are read;
* asynchronous copies: the destination of a copy that has not landed may be neither read nor
  written by anyone (the cp_async and tma families drive this), and bytes an asynchronous unit
  delivered are visible to a thread only once it observed their completion
  (:mod:`tirx.sim.races`);
* races (shared memory): an access conflicts with every earlier access of the byte that
  happens-before does not order before it (:mod:`tirx.sim.races`, :mod:`tirx.sim.order`):
  ``Barrier("cta")`` orders everything, ``Barrier("warp")`` the accesses of that warp's
  threads among themselves, an mbarrier phase its arrivals before its observers.
  ldmatrix/stmatrix are no fences; their rows are attributed to the lanes that supplied the
  rows' addresses (so two lanes of one stmatrix writing the same byte race, and a lane's
  ldmatrix row that another lane stored races unless a barrier lies between).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ..dtypes import DType
from .faults import Fault
from .memory import ONES, UINT, check_bounds, first, round_up, thread_name
from .numeric import storage_type
from .proxy import AsyncProxy
from .races import Races, line_of, race_hint

__all__ = ["SharedMemory", "SharedBuffer", "line_of", "race_hint"]


class Wait(NamedTuple):
    """A thread's last mbarrier wait: the barrier, its phase after the wait (0: none had
    completed, the wait passed at once), the expect-tx operations of the phase that completed
    last with the bytes its copies delivered, the wait's line."""

    barrier: str
    phase: int
    armed: tuple
    span: object


class SharedMemory:
    """The shared memory of the block being run, with initialization and race tracking."""

    recorder = None  # a profiling run's tirx.sim.recorder.Recorder (None: not profiling)
    relaxed_span = None  # the arrive of a .relaxed cluster phase the block passed (race hints)

    def __init__(self, allocations: list[tuple], total: int, threads: int):
        """``allocations``: ``(offset, bytes, name, buffer)`` of each shared allocation (the
        ``ir.Buffer``, or None, names the element a report points at)."""
        self.allocs = sorted(allocations, key=lambda a: a[:3])
        ends = [a[0] + a[1] for a in self.allocs]
        size = round_up(max([total, *ends, 16]), 16)
        self.starts = np.array([a[0] for a in self.allocs], dtype=np.int64)
        self.ends = np.array(ends, dtype=np.int64)
        self.data = np.zeros(size, dtype=np.uint8)
        self.written = np.zeros(size, dtype=np.uint8)
        self.sites: list = [None]  # site id -> span of the statement that made the access
        self._site_ids: dict = {}
        self.where = lambda: None  # the span of the statement now executing (set by the machine)
        self.races = Races(self, size, threads)
        # per thread, its last mbarrier wait (an index of ``waits``), for the hints of reads
        self.last_wait = np.full(threads, -1, dtype=np.int32)
        self.waits: list[Wait] = []
        self.order = self.races.order
        # bytes an asynchronous copy will write once it lands: issuing thread, line
        self.pend_tid = np.full(size, -1, dtype=np.int32)
        self.pend_site = np.zeros(size, dtype=np.int32)
        self.in_flight = 0  # bytes pending, to skip the check when there are none
        # site -> (copy's name, how to wait: a text, or hint(memory, reader, copy's line)),
        # for the copies other than cp.async's
        self.copy_kinds: dict = {}
        self.issuers: dict = {}  # site -> the thread that issued the copy delivered last there
        # the site of a cp.async's bytes landed by a wait (its span the copy's) -> (the wait's
        # span, the last CTA barrier between the copy and the wait or None), for race reports
        self.landings: dict = {}
        self.init_sites: set[int] = set()  # the sites of mbarrier.init (their races' hint)
        self.global_fences: dict[int, int] = {}  # thread -> its last fence.proxy.async.global
        # cp.async's: (thread, byte) -> whether that thread's copy pending there was never
        # committed to a group (set by its unit; None: no cp.async yet)
        self.never_committed = None
        # set by the cp.async family: why a thread's wait_group did not cover a pending copy
        self.wait_note = None
        # families' state that checks shared writes (an asynchronous reader's bytes in flight):
        # objects with shared_write(bytes, threads, record), called before every generic write
        self.observers: list = []
        self.proxy: AsyncProxy | None = None  # made by the first asynchronous-proxy reader
        # a block of a cluster of several: its accesses are recorded for its peers' checks
        # too (tirx/sim/distributed.py's LocalHook, with access(bytes, threads, write))
        self.cluster = None
        self.data16 = self.data.view(np.uint16)
        self.written64 = self.written.view(np.uint64)

    def reset(self) -> None:
        self.data.fill(0)
        self.written.fill(0)
        self.races.reset()
        self.pend_tid.fill(-1)
        self.in_flight = 0
        self.relaxed_span = None
        self.last_wait.fill(-1)
        self.waits.clear()
        self.global_fences.clear()
        if self.proxy is not None:
            self.proxy.reset()

    def waited(self, threads, barrier: str, phase: int, armed: tuple, span) -> None:
        """``threads`` passed an mbarrier wait at ``span`` on ``barrier``, now in ``phase``
        (0: no phase of it completed: the wait passed at once, parity 1 asked of a fresh
        barrier); ``armed``: the expect-tx operations of the phase that completed last and the
        bytes its copies delivered. Kept for the hint of a read of bytes nothing wrote."""
        self.last_wait[threads] = len(self.waits)
        self.waits.append(Wait(barrier, phase, armed, span))

    def last_wait_of(self, tid: int) -> Wait | None:
        """Thread ``tid``'s last mbarrier wait in this block, if it made one."""
        k = int(self.last_wait[tid])
        return self.waits[k] if k >= 0 else None

    def unwritten_hint(self, tid: int) -> str:
        """The hint of a read of bytes nothing wrote by thread ``tid``: its last mbarrier
        wait, where that wait is the likely cause."""
        last = self.last_wait_of(tid)
        if last is None:
            return "write shared memory (and synchronize) before reading it"
        barrier, phase, (armed, delivered), span = last
        if phase == 0:
            return (
                f"this thread's mbarrier wait at {line_of(span)} passed at once: no phase of "
                f"mbarrier {barrier} had completed (the ISA counts the phase before the first "
                "as complete, so parity 1 on a fresh barrier does not wait); the first phase's "
                "parity is 0, then 1, 0, ... ((use // stages) % 2 in a ring)"
            )
        if armed:
            lines = ", ".join(sorted({line_of(s) for s, _ in armed if s is not None}))
            return (
                f"this thread's mbarrier wait at {line_of(span)} passed phase {phase - 1} of "
                f"mbarrier {barrier}, which completed when {delivered} bytes had arrived "
                f"(armed by the expect_tx at {lines}): no copy among them wrote these bytes, so "
                "a copy that writes them was issued after the phase completed, or not at all; "
                "the expect_tx count must cover every copy the phase waits for (a multicast "
                "counts in every receiving block's)"
            )
        return "write shared memory (and synchronize) before reading it"

    def barrier(self) -> None:
        """Every thread of the block passed a CTA barrier."""
        self.races.barrier()
        if self.proxy is not None:
            self.proxy.barrier()

    def warp_barrier(self, warps: np.ndarray) -> None:
        """The whole of each of ``warps`` passed a warp barrier."""
        self.order.warp_barrier(warps)

    def describe(self, addr: int) -> str:
        """Shared byte ``addr`` in the kernel's words: the element of the allocation that holds
        it, as the allocation's layout places its elements (``'s'[1, 0] (byte 128, shared
        address 128)``); a byte no element holds (padding) by its offset (``'s' byte 130
        (shared address 130)``)."""
        for start, nbytes, name, buf in self.allocs:
            if start <= addr < start + nbytes:
                index = element_at(buf, addr - start)
                if index is not None:
                    at = ", ".join(map(str, index))
                    return f"'{name}'[{at}] (byte {addr - start}, shared address {addr})"
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

    def track_read(self, addr: np.ndarray, s: int, tids: np.ndarray) -> None:
        b, p = self.spread(addr, s, tids)
        self.races.read(b, p, self.site())
        if self.cluster is not None:
            self.cluster.access(b, p, False)

    def check_read(self, addr: np.ndarray, s: int, tids: np.ndarray) -> None:
        """The race checks of a read of ``s`` bytes at each of ``addr`` by ``tids``, without
        recording it (an asynchronous reader's operands at issue)."""
        b, p = self.spread(addr, s, tids)
        self.races.check_writer(b, p, "reads")
        self.races.check_accesses(self.races.atomics, b, p, "reads", "atomically updated")

    def track_write(self, addr: np.ndarray, s: int, tids: np.ndarray, record=True) -> None:
        """Check a write of ``s`` bytes at each of ``addr`` by ``tids``; ``record=False`` only
        checks (an asynchronous copy at issue: its bytes land later)."""
        b, p = self.spread(addr, s, tids)
        self.generic_write(b, p, record)
        self.races.write(b, p, self.site(), record)
        if self.cluster is not None:
            self.cluster.access(b, p, True)

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
        plain reads of other threads not ordered before it (never against other atomics)."""
        if self.in_flight:
            self.check_pending(addr, s, tids, "atomically updates")
        b, p = self.spread(addr, s, tids)
        self.generic_write(b, p)  # a write of the generic proxy, as a store is
        self.races.atomic(b, p, self.site())
        if self.cluster is not None:
            self.cluster.access(b, p, True)

    def agent(self, key, name: str, hint: str) -> int:
        """The happens-before column of an asynchronous unit (:meth:`tirx.sim.order.Order.
        agent`); ``name`` and ``hint`` say in messages what it is and how to observe it."""
        return self.races.agent(key, name, hint)

    def reads_done(self, b: np.ndarray, agent: int, site: int, observers: np.ndarray) -> None:
        """Agent ``agent`` has finished reading the distinct bytes ``b`` (for the statement at
        ``site``), and threads ``observers`` observed it (their wait covered the reads): a
        later write by a thread not ordered after one of them races with the reads."""
        self.races.readers.record_agent(b, agent, site)
        self.order.publish(agent, observers)

    # ------------------------------------------------------------ asynchronous copies

    def check_pending(self, addr: np.ndarray, s: int, tids: np.ndarray, verb: str) -> None:
        """Fault if one of the ``s`` bytes at each of ``addr`` is the destination of an
        asynchronous copy that has not landed (reading it, or writing it, is a race with the
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
        never = self.never_committed
        uncommitted = wait is None and never is not None and never(owner, int(b[k]))
        commit = (
            f'T.ptx["cp.async.commit_group"]() after the copy at {copy_line}, then '
            'T.ptx["cp.async.wait_group"](n) covering that group (or T.ptx["cp.async.wait_all"]'
            "(), which commits and waits)"
        )
        if wait is not None:  # the copy's kind says how to wait (a text, or one per reader)
            fix = wait(self, who, copy_line) if callable(wait) else wait
        elif uncommitted and verb == "reads":
            fix = "commit it: " + commit
            if owner != who:
                fix += ", then T.cuda.cta_sync(), before another thread reads it"
        elif verb == "reads":
            note = self.wait_note and self.wait_note(owner, int(b[k]))
            fix = note or (
                'wait for the copy first: T.ptx["cp.async.wait_group"](n) (or wait_all) '
                "covering its commit group"
            )
            if owner != who:
                fix += ", then T.cuda.cta_sync(), before another thread reads it"
        else:
            fix = "wait for the copy (and synchronize) before reusing its destination"
            if uncommitted:
                fix += "; the copy is in no commit group yet: " + commit
        raise Fault(
            f"{thread_name(who)} {verb} {self.describe(int(b[k]))} at {line_of(self.where())}, the "
            f"destination of the {name} at {copy_line} issued by {thread_name(owner)}, which has "
            f"not completed"
            + (
                ": it was never committed to a group, so no wait_group covers it"
                if uncommitted
                else ""
            ),
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

    def _landed(self, b: np.ndarray) -> None:
        pending = self.pend_tid[b] >= 0
        self.in_flight -= int(np.count_nonzero(pending))
        self.pend_tid[b] = -1

    def land_copy(self, addr: np.ndarray, data: np.ndarray, tids: np.ndarray, site: int,
                  barriers: int):  # fmt: skip
        """Copies complete: ``data`` ``[n, size]`` lands at ``addr``, written by ``tids`` now
        (so other threads need a barrier after this point), at the copy's line ``site``, by
        the wait now executing; ``barriers``: the count of CTA barriers when the copies were
        issued (a race report names a barrier between the copy and the wait)."""
        size = data.shape[1]
        b, p = self.spread(addr, size, tids)
        self.generic_write(b, p)
        self.data[b] = data.ravel()
        self.written[b] = 0xFF
        self._landed(b)
        self.races.set_writer(b, p, self._landing(site, barriers))

    def _landing(self, site: int, barriers: int) -> int:
        """The site of bytes the copy at ``site`` delivers at the wait now executing: the
        copy's span, with the wait (and a barrier between them) kept in :attr:`landings`."""
        wait = self.where()
        if wait is None:  # no line to name: the copy's own
            return site
        races = self.races
        barrier = races.barrier_span if races.barriers > barriers else None
        key = ("landed", site, wait, barrier)
        sid = self._site_ids.get(key)
        if sid is None:
            sid = self._site_ids[key] = len(self.sites)
            self.sites.append(self.sites[site])
            self.landings[sid] = (wait, barrier)
        return sid

    def land_async(self, b: np.ndarray, data: np.ndarray, agent: int, site: int, issuer,
                   proxy_write: bool) -> None:  # fmt: skip
        """An asynchronous unit (column ``agent``) delivers ``data`` to the distinct bytes
        ``b`` now, for the copy at ``site`` issued by ``issuer`` (a thread, or one per byte):
        a thread sees them once it observed the unit's completion (an mbarrier phase it
        waited for). Through the async proxy (``proxy_write``: a tensor copy) they need no
        proxy fence; otherwise (cp.async completing on an mbarrier) they are generic writes of
        the issuing threads."""
        issuers = np.broadcast_to(np.asarray(issuer, dtype=np.int32), b.shape)
        if proxy_write:
            if self.proxy is not None:
                self.proxy.async_write(b)
        else:
            self.generic_write(b, issuers)
        self.data[b] = data
        self.written[b] = 0xFF
        self._landed(b)
        self.issuers[site] = int(issuers[0])
        self.races.set_writer(b, agent, site)

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
                self.unwritten_hint(int(tids[k])),
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

    def check_rows(self, addr: np.ndarray, tids: np.ndarray, what: str, size=16) -> np.ndarray:
        """Fault where a row at ``addr`` is misaligned or outside every allocation; returns
        each row's allocation (its index in ``allocs``)."""
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
        return k_alloc

    def check_one_allocation(
        self, addr: np.ndarray, k_alloc: np.ndarray, tid: int, what: str, hint: str
    ) -> None:
        """The rows at ``addr`` (in allocations ``k_alloc``, as :meth:`check_rows` found them)
        belong to one operand, which lies in the allocation of its first row: a row in another
        is the operand running past its tile (the GPU reads the neighbour's bytes without a
        fault)."""
        other = k_alloc != k_alloc[0]
        if other.any():
            k = first(other)
            name = self.allocs[int(k_alloc[0])][2]
            raise Fault(
                f"{what} starts in '{name}' but a row of it lies in another allocation, "
                f"{self.describe(int(addr[k]))}",
                tid,
                hint,
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
                self.unwritten_hint(int(tids[k])),
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


def element_at(buf, offset: int) -> tuple[int, ...] | None:
    """The logical index of the element of shared buffer ``buf`` whose storage holds byte
    ``offset`` of it (the first, in row-major order, where a layout stores one slot for
    several), or None (no buffer, or no element there)."""
    if buf is None or buf.dtype.bits % 8:  # (a sub-byte element is not one byte's)
        return None
    flat = _slot_elements(buf.layout).get(offset // buf.dtype.bytes)
    if flat is None or not all(isinstance(e, int) for e in buf.shape):
        return None
    return tuple(int(i) for i in np.unravel_index(flat, buf.shape))


@functools.lru_cache(maxsize=64)
def _slot_elements(layout) -> dict[int, int]:
    """Storage slot -> the first flat index stored there, for a layout (built once per
    layout, when a report first names one of its elements)."""
    try:
        slots = layout.column("m") if hasattr(layout, "column") else [m for (m,) in layout.table()]
    except Exception:  # noqa: BLE001 - a report then names the byte instead
        return {}
    out: dict[int, int] = {}
    for flat, slot in enumerate(slots):
        out.setdefault(int(slot), flat)
    return out
