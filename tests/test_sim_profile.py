"""The simulator's profile, against counts made by hand from the hardware's rules: 32-byte
global sectors, 32 shared-memory banks of 4 bytes served in wavefronts (8-byte accesses per
half warp, 16-byte ones and ldmatrix rows per quarter warp), warp-level instruction counts."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import tirx
from tirx.layout import ComposeLayout, S, TileLayout, laneid
from tirx.sim.profile import Access, Space

from .helpers import PRELUDE, define


def build(tmp_path, src: str, **scope):
    """The sim executable of kernel ``kernel`` in ``src``, and a function from a marker text to
    the number of the line holding it."""
    kernel = define(src, tmp_path, "kernel", **scope)
    lines = (PRELUDE + textwrap.dedent(src)).splitlines()

    def line(marker: str) -> int:
        (n,) = [i + 1 for i, text in enumerate(lines) if marker in text]
        return n

    return tirx.compile(kernel, "sim"), line


def f32(n):
    return np.arange(n, dtype=np.float32)


# ------------------------------------------------------------------------ global memory

COPIES = """
@T.function
def kernel(A: T.Tensor((2048,), "float32"), B: T.Tensor((2048,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
    tid = T.cuda.thread_idx("x")
    lane = T.cuda.lane_id()
    x = A[tid]  # coalesced
    y = A[lane * 32]  # strided
    z = A[7]  # broadcast
    w = A[lane // 2]  # pairs of lanes share a float
    B[T.cuda.block_idx("x") * 64 + tid] = x + y + z + w
"""


def test_coalesced_strided_and_broadcast_global_loads(tmp_path):
    exe, line = build(tmp_path, COPIES)
    p = exe.profile(f32(2048), np.zeros(2048, np.float32))
    assert p.blocks == 2
    # 2 blocks x 2 warps = 4 warp requests per line
    coalesced = p.line(line("# coalesced")).cost(Space.GLOBAL, Access.LOAD)
    assert (coalesced.requests, coalesced.units, coalesced.ideal) == (4, 16, 16)  # 4 per warp
    assert coalesced.bytes == 4 * 128 and coalesced.efficiency == 1.0
    strided = p.line(line("# strided")).cost(Space.GLOBAL, Access.LOAD)
    assert (strided.requests, strided.units, strided.ideal) == (4, 128, 16)  # 32 per warp
    assert strided.efficiency == 0.125
    broadcast = p.line(line("# broadcast")).cost(Space.GLOBAL, Access.LOAD)
    assert (broadcast.units, broadcast.ideal, broadcast.bytes) == (4, 4, 4 * 128)
    pairs = p.line(line("# pairs")).cost(Space.GLOBAL, Access.LOAD)
    assert (pairs.units, pairs.ideal) == (8, 8)  # 16 floats: 64 bytes, 2 sectors per warp
    store = p.line(line("B[T.cuda")).cost(Space.GLOBAL, Access.STORE)
    assert (store.requests, store.units, store.ideal) == (4, 16, 16)
    assert p.metric("coalescing")[line("# strided")] == 12.5
    assert p.metric("excess_sectors")[line("# strided")] == 112
    assert p.line(line("# strided")).instructions == {"int": 4, "ld.global": 4}
    # x + y + z + w: 3 float adds; the address: 2 int ops (multiply, add)
    assert p.line(line("B[T.cuda")).instructions == {"float": 12, "int": 8, "st.global": 4}


VECTOR = """
@T.function
def kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    for v in T.vectorized(4):
        B[lane * 4 + v] = A[lane * 4 + v]  # copy
    for v in T.vectorized(4):
        B[lane * 4 + v] = A[lane * 4 + v] + T.float32(1)  # not a copy
"""


def test_a_vectorized_copy_is_one_16_byte_access_per_thread(tmp_path):
    exe, line = build(tmp_path, VECTOR)
    p = exe.profile(f32(128), np.zeros(128, np.float32))
    copy = p.line(line("# copy"))
    ld = copy.cost(Space.GLOBAL, Access.LOAD)
    assert (ld.requests, ld.units, ld.ideal, ld.bytes) == (1, 16, 16, 512)
    assert copy.instructions["ld.global"] == 1 and copy.instructions["st.global"] == 1
    # the GPU runs any other body as element accesses: 4 requests of 4 bytes 16 apart
    other = p.line(line("# not a copy")).cost(Space.GLOBAL, Access.LOAD)
    assert (other.requests, other.units, other.ideal) == (4, 64, 16)


# ------------------------------------------------------------------------ shared memory

BANKS = """
@T.function
def kernel(Out: T.Tensor((32,), "float32"), D: T.Tensor((32,), "float64")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    s = T.alloc_shared((2048,), "float32")
    d = T.alloc_shared((128,), "float64")
    s[lane] = T.float32(1)  # stride 1
    s[lane * 2 + 64] = T.float32(2)  # stride 2
    s[lane * 32 + 1024] = T.float32(3)  # stride 32
    d[lane] = T.float64(4)  # 8 bytes, stride 1
    d[lane * 2 + 64] = T.float64(5)  # 8 bytes, stride 2
    T.cuda.cta_sync()
    x = s[0]  # broadcast
    Out[lane] = x + s[lane] + s[lane * 32 + 1024]
    D[lane] = d[lane * 2 + 64]
"""


@pytest.mark.parametrize(
    "marker, wavefronts, ideal",
    [
        ("# stride 1", 1, 1),
        ("# stride 2", 2, 1),  # words 64, 66, ... : each even bank twice
        ("# stride 32", 32, 1),  # every lane in bank 0
        ("# 8 bytes, stride 1", 2, 2),  # a half warp fills the 32 banks once
        ("# 8 bytes, stride 2", 4, 2),  # each half warp meets every bank pair twice
        ("# broadcast", 1, 1),
    ],
)
def test_bank_conflicts_of_element_accesses(tmp_path, marker, wavefronts, ideal):
    exe, line = build(tmp_path, BANKS)
    p = exe.profile(np.zeros(32, np.float32), np.zeros(32, np.float64))
    cost = p.line(line(marker)).cost(Space.SHARED)
    assert (cost.requests, cost.units, cost.ideal) == (1, wavefronts, ideal)
    assert p.metric("conflicts").get(line(marker), 0) == wavefronts - ideal


def test_a_line_sums_its_accesses(tmp_path):
    exe, line = build(tmp_path, BANKS)
    p = exe.profile(np.zeros(32, np.float32), np.zeros(32, np.float64))
    both = p.line(line("Out[lane] = x + s[lane]"))
    assert both.cost(Space.SHARED, Access.LOAD).units == 1 + 32
    assert both.instructions["ld.shared"] == 2
    assert both.cost(Space.SHARED).bytes == 2 * 128


LDMATRIX = """
@T.function
def kernel(A: T.Tensor((16, 64), "float16"), Out: T.Tensor((32, 4), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 64), "float16", layout=layout)
    for q in range(32):
        i = lane + 32 * q
        a[i // 64, i % 64] = A[i // 64, i % 64]  # fill
    T.cuda.cta_sync()
    w = a.view("uint32")[:, 8:16].rearrange(
        "(group row) (chunk word) -> (chunk group) row word", group=2, chunk=2, word=4
    )
    ar = T.alloc_local((4,), "uint32")
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],  # load
        ar.view(4, 8, 4, layout=load), w, scope="warp",
    )
    for r in range(4):
        Out[lane, r] = ar[r]
"""
PLAIN = TileLayout(S[16, 64])  # rows of 128 bytes: a matrix's 8 rows share 4 banks
SWIZZLE_128B = ComposeLayout(3, 3, 3, TileLayout(S[16, 64]))
LOAD_X4 = TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])


@pytest.mark.parametrize(
    "layout, wavefronts", [(PLAIN, 32), (SWIZZLE_128B, 4)], ids=["unswizzled", "swizzled"]
)
def test_ldmatrix_rows_by_quarter_warp(tmp_path, layout, wavefronts):
    exe, line = build(tmp_path, LDMATRIX, layout=layout, load=LOAD_X4)
    a = (np.arange(16 * 64) % 2039).astype(np.float16).reshape(16, 64)
    p = exe.profile(a, np.zeros((32, 4), np.uint32))
    load = p.line(line("# load") - 1)  # the statement's line: T.cuda.tile.apply(
    cost = load.cost(Space.SHARED, Access.LOAD)
    # 4 matrices of 8 rows x 16 bytes: one wavefront each at best; 8-way when unswizzled
    assert (cost.requests, cost.units, cost.ideal, cost.bytes) == (1, wavefronts, 4, 512)
    assert load.instructions["ldmatrix"] == 1 and "ld.shared" not in load.instructions
    assert p.metric("conflicts").get(line("# load") - 1, 0) == wavefronts - 4
    fill = p.line(line("# fill")).cost(Space.SHARED, Access.STORE)
    assert (fill.requests, fill.units, fill.ideal) == (32, 32, 32)  # 64 bytes of one row each


@pytest.mark.parametrize(
    "layout, wavefronts", [(PLAIN, 32), (SWIZZLE_128B, 4)], ids=["unswizzled", "swizzled"]
)
def test_stmatrix_rows_by_quarter_warp(tmp_path, layout, wavefronts):
    from .test_swizzle_operands import STMATRIX

    exe, line = build(tmp_path, STMATRIX, layout=layout, load=LOAD_X4)
    p = exe.profile(np.zeros((16, 64), np.float16))
    store = p.line(line('T.ptx["stmatrix') - 1)
    cost = store.cost(Space.SHARED, Access.STORE)
    assert (cost.requests, cost.units, cost.ideal, cost.bytes) == (1, wavefronts, 4, 512)
    assert store.instructions["stmatrix"] == 1


CP_ASYNC = """
@T.function
def kernel(A: T.Tensor((32, 32), "float32"), Out: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    s = T.alloc_shared((32, 32), "float32")
    T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"],
        s[lane, 0:4], A[lane // 8, 4 * (lane % 8) : 4 * (lane % 8) + 4],
        scope="thread", chunk_bytes=16)  # copy
    T.ptx["cp.async.wait_all"]()
    T.cuda.cta_sync()
    Out[lane] = s[lane, 0]
"""


def test_cp_async_costs_its_global_source_and_shared_destination(tmp_path):
    exe, line = build(tmp_path, CP_ASYNC)
    p = exe.profile(f32(1024).reshape(32, 32), np.zeros(32, np.float32))
    copy = p.line(line("# copy") - 2)  # T.cuda.tile.apply(
    src = copy.cost(Space.GLOBAL, Access.LOAD)
    # 32 x 16 bytes of the first 4 rows, consecutive: 16 sectors
    assert (src.requests, src.units, src.ideal, src.bytes) == (1, 16, 16, 512)
    dst = copy.cost(Space.SHARED, Access.STORE)
    # rows of 128 bytes: each quarter's 8 chunks sit in banks 0-3, 8-way
    assert (dst.requests, dst.units, dst.ideal, dst.bytes) == (1, 32, 4, 512)
    assert copy.instructions["cp.async"] == 1
    assert p.line(line("wait_all")).instructions == {"cp.async": 1}


# ------------------------------------------------------------------------ instructions

MIX = """
@T.function
def kernel(A: T.Tensor((64,), "float32"), Out: T.Tensor((64,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((2,), "float32")
    r[0] = A[tid] * T.float32(2)  # local store
    if tid < 16:
        r[1] = T.float32(1)  # half of warp 0
    else:
        r[1] = T.float32(0)
    v = T.cuda.__shfl_xor_sync(0xFFFFFFFF, r[0] + r[1], 1)  # shuffle
    T.cuda.cta_sync()
    Out[tid] = T.cast(T.cast(v, "int32"), "float32")  # converts
"""


def test_instructions_by_class_count_warps(tmp_path):
    exe, line = build(tmp_path, MIX)
    p = exe.profile(f32(64), np.zeros(64, np.float32))
    assert p.line(line("# local store")).instructions == {
        "ld.global": 2, "float": 2, "st.local": 2,
    }  # fmt: skip
    assert p.line(line("# half of warp 0")).instructions == {"st.local": 1}
    assert p.line(line("r[1] = T.float32(0)")).instructions == {"st.local": 2}
    shuffle = p.line(line("# shuffle")).instructions
    assert shuffle == {"ld.local": 4, "float": 2, "warp_collectives": 2}
    assert p.line(line("T.cuda.cta_sync()")).instructions == {"barrier": 2}
    assert p.line(line("# converts")).instructions == {"convert": 4, "st.global": 2}
    assert p.total().cost(Space.LOCAL).bytes == 4 * 64 + 4 * 64 + 2 * 4 * 64


# ------------------------------------------------------------------------ the report


def test_the_profile_reads_as_a_table(tmp_path):
    exe, line = build(tmp_path, COPIES)
    p = exe.profile(f32(2048), np.zeros(2048, np.float32))
    text = str(p)
    assert text.splitlines()[0].startswith("profile of 'kernel' on the simulator: 2 blocks")
    strided = next(t for t in text.splitlines() if t.rstrip().endswith("# strided"))
    assert strided.split()[:6] == [str(line("# strided")), "8", "4", "128", "16", "12.5"]
    assert "total" in text and "instructions by class" in text
    html = p._repr_html_()
    assert "<table" in html and "A[lane * 32]" in html
    with pytest.raises(KeyError, match="unknown profile metric 'speed'"):
        p.metric("speed")


def test_run_with_profile_through_tirx_sim(tmp_path):
    from tirx import sim

    exe, line = build(tmp_path, COPIES)
    result = sim.run(exe.lowered, [f32(2048), np.zeros(2048, np.float32)], profile=True)
    assert result.profile.line(line("# strided")).cost(Space.GLOBAL).units == 128
    assert sim.run(exe.lowered, [f32(2048), np.zeros(2048, np.float32)]).profile is None


def test_a_run_without_profile_makes_no_recorder(tmp_path, monkeypatch):
    from tirx.sim import recorder

    def refuse(*a, **k):
        raise AssertionError("a run without profile=True made a recorder")

    monkeypatch.setattr(recorder.Recorder, "__init__", refuse)
    exe, _ = build(tmp_path, COPIES)
    out = np.zeros(2048, np.float32)
    exe(f32(2048), out)
    assert out[0] == 0 + 0 + 7 + 0


def test_bulk_and_tensor_copies_count_the_bytes_they_move(tmp_path):
    from .bulk_kernels import bulk_store
    from .tma_kernels import box_kernel

    a = np.arange(4 * 64, dtype=np.float32).reshape(4, 64)
    p = tirx.compile(bulk_store, "sim").profile(a, np.zeros_like(a))
    moved = p.total()
    # 2 blocks x 2 rows of 256 bytes, from shared to global; no warp-level request
    assert moved.cost(Space.SHARED, Access.LOAD).bytes == 2 * 2 * 256
    assert moved.cost(Space.GLOBAL, Access.STORE).bytes == 2 * 2 * 256
    assert moved.cost(Space.GLOBAL, Access.STORE).requests == 0
    kernel = box_kernel(tmp_path)  # one 64 x 64 f16 box into shared memory
    src = (np.arange(128 * 128) % 1000).astype(np.float16).reshape(128, 128)
    p = tirx.compile(kernel, "sim").profile(src, np.zeros((64, 64), np.float16))
    assert p.total().cost(Space.SHARED, Access.STORE).bytes == 64 * 64 * 2
    assert p.total().cost(Space.GLOBAL, Access.LOAD).bytes == 64 * 64 * 2


def test_a_tensor_store_counts_the_bytes_it_writes(tmp_path):
    from .tma_store_kernels import box_kernel, line

    kernel, source = box_kernel(tmp_path)  # the threads fill a 64 x 64 f16 tile, one stores it
    a = (np.arange(64 * 64) % 1000).astype(np.float16).reshape(64, 64)
    p = tirx.compile(kernel, "sim").profile(a, np.zeros((128, 128), np.float16))
    store = p.line(line(source, "store"))
    assert store.cost(Space.GLOBAL, Access.STORE).bytes == 64 * 64 * 2
    assert store.cost(Space.SHARED, Access.LOAD).bytes == 64 * 64 * 2
    assert store.instructions == {"cp.async.bulk.tensor": 1}
