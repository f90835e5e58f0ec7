"""Planted kernels of the sanitizer parity suite written as TIRx text (``@T.function`` source
with a field or two that make the fault or its corrected twin), for fault classes the
hand-built table of tests/planted.py does not cover: a named barrier that leaves a warp out,
a shared atomic against another warp's plain store, a ``cp.async`` destination read before
its ``wait_group``, a CTA barrier at two sites, a barrier a whole warp skips, shared memory
read past one buffer into the next and past a dynamic segment's size, a strided global view
read one row too far, an mbarrier whose arrivals fall short, a read of what a warp that
skipped the barrier wrote; a warp that skips a CTA barrier and exits (legal: both clean); and
a kernel the PTX ISA and the GPU take but the simulator reports (the lanes of a warp meeting
at two ``warp_sync`` lines). Each also goes to the GPU through
``tirx.compile(..., "cuda")`` (``Planted.kernel``), which sizes the dynamic shared segment.
Where the sanitizer does not report what the simulator does, ``blind`` says why, as measured
on an H100 (docs/gpu-runs/sessions.md).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np

import tirx
from tests.helpers import define
from tests.planted import Kind, Planted

__all__ = ["TEXT_CASES", "BY_NAME"]

SOURCES = {
    # warps 0 and 1 meet at bar.sync 1, {count} after warp 0 stored the tile: with count 64
    # warp 2 takes no part and reads the tile all the same (a race with warp 0's stores); with
    # 96 every warp takes part
    "race_named_barrier_excludes_a_warp": """
@T.function
def kernel(A: T.Tensor((32,), "int32"), Out: T.Tensor((96,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=96))
    s = T.alloc_shared((32,), "int32")
    tid = T.cuda.thread_idx("x")
    if tid < 32:
        s[tid] = A[tid] * 3
    if tid < {count}:
        T.ptx["bar.sync"](1, {count})
    Out[tid] = s[31 - tid % 32]
""",
    # thread 0 (warp 0) stores s[0] and thread 32 (warp 1) adds to it atomically, {sync}
    "race_shared_atomic_vs_store": """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    s = T.alloc_shared((1,), "int32")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        s[0] = 0
    T.cuda.cta_sync()
    if tid == 0:
        s[0] = 100
    {sync}
    if tid == 32:
        T.cuda.atomic_add(s.ptr_to([0]), 1)
    T.cuda.cta_sync()
    Out[tid] = s[0]
""",
    # every thread copies its 16 bytes with cp.async and commits, {wait}, a cta_sync, and
    # reads its neighbour's 16 bytes
    "cp_async_read_before_wait_group": """
@T.function
def kernel(A: T.Tensor((256,), "float32"), Out: T.Tensor((256,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    s = T.alloc_shared((256,), "float32", align=16)
    tid = T.cuda.thread_idx("x")
    T.ptx["cp.async.ca.shared.global"](s[tid * 4], A[tid * 4], 16)
    T.ptx["cp.async.commit_group"]()
    {wait}
    T.cuda.cta_sync()
    for j in range(4):
        Out[tid * 4 + j] = s[((tid + 1) % 64) * 4 + j]
    T.ptx["cp.async.wait_all"]()
""",
    # every thread stores, meets the others at {barrier}, and reads another warp's element
    "cta_barrier_at_two_sites": """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    s = T.alloc_shared((64,), "int32")
    tid = T.cuda.thread_idx("x")
    {barrier}
""",
    # warp 0 stores; {cond} guards the cta_sync (tid < 32: warp 1 skips it and exits); warp 0
    # reads its lanes' stores in reverse
    "cta_barrier_skipped_by_a_whole_warp": """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    s = T.alloc_shared((32,), "int32")
    tid = T.cuda.thread_idx("x")
    if tid < 32:
        s[tid] = tid * 10
    if {cond}:
        T.cuda.cta_sync()
    if tid < 32:
        Out[tid] = s[31 - tid]
""",
    # two shared buffers; thread t reads a[t + {shift}]: with 1, lane 31 reads a[32], b[0]
    "oob_shared_into_the_next_buffer": """
@T.function
def kernel(A: T.Tensor((32,), "int32"), Out: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    a = T.alloc_shared((32,), "int32")
    b = T.alloc_shared((32,), "int32")
    tid = T.cuda.thread_idx("x")
    a[tid] = A[tid]
    b[tid] = A[tid] + 1
    T.cuda.cta_sync()
    Out[tid] = a[tid + {shift}] + b[tid]
""",
    # dynamic shared memory of 40 int32 (160 bytes); thread t reads s[t + {shift}]: with 9,
    # lane 31 reads s[40], byte 160, past the segment's size
    "oob_dynamic_shared_past_its_size": """
@T.function
def kernel(A: T.Tensor((40,), "int32"), Out: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    s = T.alloc_shared((40,), "int32", scope="shared.dyn")
    tid = T.cuda.thread_idx("x")
    s[tid] = A[tid]
    if tid < 8:
        s[tid + 32] = A[tid + 32]
    T.cuda.cta_sync()
    Out[tid] = s[tid + {shift}]
""",
    # A's odd elements as 32 rows of stride 2; thread t reads row t + {shift}: with 1, lane 31
    # reads row 32, element 65 of a 64-element tensor
    "oob_global_strided_view_last_row": """
@T.function
def kernel(A: T.Tensor((64,), "int32"), Out: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    odd = A.view((32,), layout=T.TileLayout(T.S[32 : 2] + 1))
    tid = T.cuda.thread_idx("x")
    Out[tid] = odd[tid + {shift}]
""",
    # an mbarrier initialized for {count} arrivals; warp 0 arrives; every thread waits for
    # phase 0: with 64 nobody completes it
    "mbarrier_arrival_count_short": """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    bars = T.alloc_shared((1,), "uint64")
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bars[0], {count})
    T.cuda.cta_sync()
    if tid < 32:
        T.ptx["mbarrier.arrive.shared::cta.b64"](bars[0])
    T.cuda.mbarrier_wait(bars[0], 0)
    Out[tid] = tid
""",
    # every thread stores; warp 0 passes {barrier} alone, warp 1 exits, and warp 0 reads warp
    # 1's elements, which no barrier orders before the reads (the twin: every warp meets there);
    # racecheck's verdict (a race) is predicted, not yet measured
    "race_with_a_warp_that_skipped_the_barrier": """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    s = T.alloc_shared((64,), "int32")
    tid = T.cuda.thread_idx("x")
    s[tid] = tid * 10
    {barrier}
    if tid < 32:
        Out[tid] = s[63 - tid]
""",
    # one warp: every lane stores, meets the others at {barrier}, reads lane ^ 16's element
    "warp_barrier_at_two_sites": """
@T.function
def kernel(Out: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    s = T.alloc_shared((32,), "int32")
    tid = T.cuda.thread_idx("x")
    {barrier}
""",
}

_TWO_SITES = """if tid < 16:
        s[tid] = tid * 10
        {b}
        Out[tid] = s[{peer}] + 1
    else:
        s[tid] = tid * 10 + 1
        {b}
        Out[tid] = s[{peer}] + 2"""
_ONE_SITE = """s[tid] = tid * 10 + T.int32(tid >= 16)
    {b}
    Out[tid] = s[{peer}] + 1 + T.int32(tid >= 16)"""

# name -> (the fault's fields, the twin's fields)
FIELDS = {
    "race_named_barrier_excludes_a_warp": ({"count": "64"}, {"count": "96"}),
    "race_shared_atomic_vs_store": ({"sync": "pass"}, {"sync": "T.cuda.cta_sync()"}),
    "cp_async_read_before_wait_group": (
        {"wait": "pass"},
        {"wait": 'T.ptx["cp.async.wait_group"](0)'},
    ),
    "cta_barrier_at_two_sites": (
        {"barrier": _TWO_SITES.format(b="T.cuda.cta_sync()", peer="63 - tid")},
        {"barrier": _ONE_SITE.format(b="T.cuda.cta_sync()", peer="63 - tid")},
    ),
    "cta_barrier_skipped_by_a_whole_warp": ({"cond": "tid < 32"}, {"cond": "tid < 64"}),
    "oob_shared_into_the_next_buffer": ({"shift": "1"}, {"shift": "0"}),
    "oob_dynamic_shared_past_its_size": ({"shift": "9"}, {"shift": "8"}),
    "oob_global_strided_view_last_row": ({"shift": "1"}, {"shift": "0"}),
    "mbarrier_arrival_count_short": ({"count": "64"}, {"count": "32"}),
    "race_with_a_warp_that_skipped_the_barrier": (
        {"barrier": "if tid < 32:\n        T.cuda.cta_sync()"},
        {"barrier": "T.cuda.cta_sync()"},
    ),
    "warp_barrier_at_two_sites": (
        {"barrier": _TWO_SITES.format(b="T.cuda.warp_sync()", peer="tid ^ 16")},
        {"barrier": _ONE_SITE.format(b="T.cuda.warp_sync()", peer="tid ^ 16")},
    ),
}


@functools.cache
def _folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="tirx_text_planted_"))


@functools.cache
def kernel(name: str, fault: bool):
    """The ``@T.function`` of ``name``: its fault, or its corrected twin."""
    source = SOURCES[name]
    for key, value in FIELDS[name][0 if fault else 1].items():
        source = source.replace("{" + key + "}", value)
    return define(source, _folder(), "kernel")


def _lowered(name: str, fault: bool):
    return tirx.compile(kernel(name, fault), target="sim").lowered


def _ints(*shapes, start=None):
    def inputs():
        arrays = [np.zeros(shape, np.int32) for shape in shapes]
        if start is not None:
            arrays[0] = np.arange(shapes[0], dtype=np.int32) + start
        return arrays

    return inputs


INPUTS = {
    "race_named_barrier_excludes_a_warp": _ints(32, 96, start=-7),
    "cp_async_read_before_wait_group": lambda: [
        np.arange(256, dtype=np.float32) * 0.5,
        np.zeros(256, np.float32),
    ],
    "oob_shared_into_the_next_buffer": _ints(32, 32, start=0),
    "oob_dynamic_shared_past_its_size": _ints(40, 32, start=0),
    "oob_global_strided_view_last_row": _ints(64, 32, start=0),
    "warp_barrier_at_two_sites": _ints(32),
}

_ATOMIC_VS_STORE = (
    "measured on the H100: racecheck does not report a plain shared store racing with another thread's atomicAdd "
    "on the same address (its hazards are between loads and stores)"
)
# a legal kernel the simulator reports (measured on an H100, docs/gpu-runs/sessions.md): its
# lockstep run cannot hold half a warp at one line while the other half reaches another
_TWO_WARP_SYNCS = (
    "measured on the H100: legal on sm_70 and later (PTX ISA, bar.warp.sync: only sm_6x asks "
    "the lanes to execute the same instruction), the right answer, synccheck silent; the "
    "simulator runs the warp's two branches one after the other and reports the first"
)
_NEXT_BUFFER = (
    "measured on the H100: memcheck checks an access against the block's shared-memory window, not against the "
    "buffer placed there: a[32] is b[0], inside the window"
)
_POOL = (
    "measured on the H100: the runner's tensors come from torch's caching allocator, so a read just past a tensor's "
    "end stays inside allocated memory, which is all memcheck checks"
)


def _pair(name: str, kind: Kind, blind: str | None = None, legal=False) -> list[Planted]:
    """The fault and its twin; with ``legal``, two clean kernels (the first is no fault)."""
    inputs = INPUTS.get(name, _ints(64))
    return [
        Planted(
            name if fault else name + ".fixed",
            kind,
            functools.partial(_lowered, name, fault),
            inputs,
            fault and not legal,
            blind,
            kernel=functools.partial(kernel, name, fault),
        )
        for fault in (True, False)
    ]


TEXT_CASES: list[Planted] = [
    *_pair("race_named_barrier_excludes_a_warp", Kind.RACE),
    *_pair("race_shared_atomic_vs_store", Kind.RACE, blind=_ATOMIC_VS_STORE),
    *_pair("cp_async_read_before_wait_group", Kind.ASYNC_VISIBILITY),
    *_pair("cta_barrier_at_two_sites", Kind.DIVERGENT_BARRIER),
    # legal (PTX ISA, barrier and exit: a barrier waits for the threads that have not exited;
    # measured on the H100: the right answer, synccheck silent), and so on the simulator
    *_pair("cta_barrier_skipped_by_a_whole_warp", Kind.DIVERGENT_BARRIER, legal=True),
    *_pair("race_with_a_warp_that_skipped_the_barrier", Kind.RACE),
    *_pair("oob_shared_into_the_next_buffer", Kind.OUT_OF_BOUNDS, blind=_NEXT_BUFFER),
    *_pair("oob_dynamic_shared_past_its_size", Kind.OUT_OF_BOUNDS),
    *_pair("oob_global_strided_view_last_row", Kind.OUT_OF_BOUNDS, blind=_POOL),
    *_pair("mbarrier_arrival_count_short", Kind.DEADLOCK),
    *_pair("warp_barrier_at_two_sites", Kind.DIVERGENT_BARRIER, blind=_TWO_WARP_SYNCS),
]

BY_NAME = {p.name: p for p in TEXT_CASES}
