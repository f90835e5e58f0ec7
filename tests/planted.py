"""Planted-bug kernels and their corrected twins: one table for the simulator's check tests
(tests/test_sim_checks.py) and the sanitizer parity suite (tests/test_sanitizer_parity.py).

Each :class:`Planted` entry is a hand-built lowered kernel (only global tensor parameters, so
the same kernel can be compiled for cuda by tirx's code generator and launched on its own),
its inputs, what the simulator must say (a :class:`Fault` kind and a message pattern, or clean)
and the ``compute-sanitizer`` tool that looks for the same kind of fault. Where the sanitizer
cannot see what the simulator reports, ``blind`` says why.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.test_sim_kernels import (
    LANE,
    TX,
    function,
    gbuf,
    lbuf,
    regs,
    sbuf,
    seed_kernel,
    seq,
    span,
    var,
)
from tirx.families.warp_collectives.nodes import WarpCollective, WarpOp
from tirx.ir import nodes as ir

I32, U32 = ir.I32, ir.U32
U16 = ir.dtype_of("uint16")
LDM4 = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
STM1 = "stmatrix.sync.aligned.m8n8.x1.shared.b16"


class Tool(enum.Enum):
    """The compute-sanitizer tool that checks a kind of fault."""

    RACECHECK = "racecheck"
    MEMCHECK = "memcheck"
    INITCHECK = "initcheck"
    SYNCCHECK = "synccheck"


class Kind(enum.Enum):
    """The kind of fault a planted kernel has (what both checkers should call it); a message
    is of the first kind whose pattern it matches."""

    # bytes an asynchronous unit delivered, read by a thread not ordered after their completion
    ASYNC_VISIBILITY = (
        Tool.RACECHECK,
        "whose completion this thread has not observed|which has not completed",
    )
    # a generic-proxy store read by the async proxy without a fence ordered before the read
    PROXY_ORDER = (Tool.RACECHECK, "may read stale bytes")
    # a block that ends while an asynchronous copy may still write its shared memory
    EXIT_IN_FLIGHT = (Tool.MEMCHECK, "the block exits while")
    # an mbarrier armed for its next phase before the copy completing the current one landed:
    # the arrive counts toward the earlier phase, and the GPU traps (memcheck's report is the
    # launch failure alone, no access of its own)
    EARLY_ARM = (Tool.MEMCHECK, "has not observed phase \\d+ complete")
    RACE = (Tool.RACECHECK, "shared-memory race")
    OUT_OF_BOUNDS = (Tool.MEMCHECK, "out-of-bounds|outside every shared allocation")
    MISALIGNED = (Tool.MEMCHECK, "misaligned|not 16-byte aligned")
    UNINITIALIZED = (Tool.INITCHECK, "nothing wrote|never wrote")
    DIVERGENT_BARRIER = (Tool.SYNCCHECK, "barrier \\((cta|warp)\\) reached by")
    # an mbarrier phase no thread will complete, waited for (the GPU hangs)
    DEADLOCK = (Tool.SYNCCHECK, "^deadlock")
    PARTIAL_COLLECTIVE = (Tool.SYNCCHECK, "executed by \\d+ of 32 lanes")
    ARITHMETIC = (Tool.MEMCHECK, "division by zero|shift count|signed integer overflow")
    WARP_MASK = (Tool.SYNCCHECK, "not in its mask|is in the mask .* but does not execute")

    @property
    def tool(self) -> Tool:
        return self.value[0]

    @property
    def pattern(self) -> str:
        return self.value[1]


@dataclass(frozen=True)
class Planted:
    """One kernel of the table: ``fault`` None means the corrected twin (clean)."""

    name: str
    kind: Kind  # the kind of bug this kernel (or the one it corrects) plants
    build: Callable[[], ir.Function]
    inputs: Callable[[], list]
    fault: bool
    blind: str | None = None  # why the sanitizer cannot see it (None: it should)
    misaligned_arg: int | None = None  # an argument to pass 2 bytes past an aligned address
    # the @T.function, for a kernel the runner launches through tirx's CUDA path (one with
    # TMA tensor maps, which travel as hidden parameters)
    kernel: Callable[[], object] | None = None
    # the sanitizer reports this fault on some machines or runs and not on others (``blind``
    # says where it was measured):
    # either verdict is accepted, and a report must name the simulator's kind
    seen_sometimes: bool = False


def lt(a, b):
    return ir.cmp(ir.CmpOp.LT, a, b)


# ------------------------------------------------------------------------- builders


def copy_kernel(src_n, dst_n, shift, scope="global", threads=32):
    """dst[tid] = src[tid + shift] through a buffer of the given scope."""
    Src, Dst = gbuf("Src", (src_n,), "int32"), gbuf("Dst", (dst_n,), "int32")
    if scope == "global":
        body = ir.Store(Dst, TX, ir.Load(Src, TX + shift, I32), I32, span(3))
        return function("copy", (Src, Dst), body, block=(threads, 1, 1))
    if scope == "shared":
        s = sbuf("s", (src_n,), "int32")
        body = seq(
            ir.Store(s, TX, ir.Load(Src, TX, I32), I32, span(2)),
            ir.Barrier("cta"),
            ir.Store(Dst, TX, ir.Load(s, TX + shift, I32), I32, span(3)),
        )
        return function("copy", (Src, Dst), body, block=(threads, 1, 1), allocs=(s,))
    loc = lbuf("l", 2, "int32")
    body = seq(
        ir.Store(loc, 0, ir.Load(Src, TX, I32), I32, span(2)),
        ir.Store(loc, 1, ir.const(7), I32, span(2)),
        ir.Store(Dst, TX, ir.Load(loc, shift, I32), I32, span(3)),
    )
    return function("copy", (Src, Dst), body, block=(threads, 1, 1), allocs=(loc,))


def ldmatrix_kernel(
    row_offset, *, threads=32, guard=None, fill=True, rows_per_warp=32, barrier="warp"
):
    """Each warp fills its own 32 shared rows, synchronizes (``barrier``: "warp", "cta" or
    None), then loads them with ldmatrix.x4."""
    n_warps = threads // 32
    Out = gbuf("Out", (threads * 4,), "uint32")
    s = sbuf("s", (n_warps * rows_per_warp * 8,), "uint16")
    r = lbuf("r", 4, "uint32")
    q, x = var("q"), var("x")
    base = ir.Special(ir.Builtin.WARP_ID) * (rows_per_warp * 8)
    fill_loop = ir.For(
        q,
        ir.const(0),
        ir.const(8),
        1,
        seq(
            ir.Assign(x, base + LANE + 32 * q),
            ir.Store(s, x, ir.cast(x, "uint16"), U16, span(2)),
        ),
    )
    addr = ir.SharedAddress(s, (base + LANE * 8) * 2 + row_offset)
    ldm = ir.PtxCall(LDM4, (regs(r, range(4), True), ir.AddressOperand(addr)), span(7))
    stores = [ir.Store(Out, TX * 4 + k, ir.Load(r, k, U32), U32) for k in range(4)]
    use = seq(ldm, *stores) if guard is None else ir.If(guard, seq(ldm, *stores))
    sync = [ir.Barrier(barrier, span(5))] if barrier else []
    body = seq(*([fill_loop] if fill else []), *sync, use)
    return function("ldm", (Out,), body, block=(threads, 1, 1), allocs=(s, r), variables=(q, x))


def race_kernel(reader_shift, *, barrier=None, threads=32):
    """Thread t writes s[t]; then thread t reads s[(t + shift) % n]."""
    s = sbuf("s", (threads,), "int32")
    Dst = gbuf("Dst", (threads,), "int32")
    stmts = [ir.Store(s, TX, TX * 10, I32, span(1))]
    if barrier:
        stmts.append(ir.Barrier(barrier))
    stmts.append(ir.Store(Dst, TX, ir.Load(s, (TX + reader_shift) % threads, I32), I32, span(3)))
    return function("race", (Dst,), seq(*stmts), block=(threads, 1, 1), allocs=(s,))


def seed_without_barrier(scope=None):
    """The seed guide's kernel with its cta_sync removed (or replaced by ``scope``)."""
    fn = seed_kernel()
    stmts = []
    for x in fn.body.stmts:
        if isinstance(x, ir.Barrier):
            if scope is None:
                continue
            x = ir.Barrier(scope, span(6))
        stmts.append(x)
    return ir.Function(**{**fn.__dict__, "body": seq(*stmts)})


def seed_inputs():
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 4, (16, 16)).astype(np.float16)
    b = rng.integers(-4, 4, (8, 16)).astype(np.float16)
    return [a, b, np.zeros((16, 8), np.float32)]


def write_write_kernel(only_one: bool):
    s = sbuf("s", (4,), "int32")
    Dst = gbuf("Dst", (1,), "int32")
    store = ir.Store(s, ir.const(0), TX, I32, span(2))
    if only_one:
        store = ir.If(ir.cmp(ir.CmpOp.EQ, TX, 0), store)
    publish = ir.If(
        ir.cmp(ir.CmpOp.EQ, TX, 0), ir.Store(Dst, 0, ir.Load(s, ir.const(0), I32), I32, span(3))
    )
    return function("ww", (Dst,), seq(store, ir.Barrier("cta"), publish), allocs=(s,))


def write_after_read_kernel(fixed: bool):
    s = sbuf("s", (1,), "int32")
    Dst = gbuf("Dst", (32,), "int32")
    lane0 = ir.cmp(ir.CmpOp.EQ, TX, 0)
    body = [
        ir.If(lane0, ir.Store(s, ir.const(0), ir.const(5), I32)),
        ir.Barrier("cta"),
        ir.Store(Dst, TX, ir.Load(s, ir.const(0), I32), I32),  # everyone reads
        *([ir.Barrier("cta")] if fixed else []),
        ir.If(lane0, ir.Store(s, ir.const(0), ir.const(6), I32, span(8))),  # lane 0 overwrites
    ]
    return function("war", (Dst,), seq(*body), allocs=(s,))


def stmatrix_overlap_kernel(overlap: bool):
    s = sbuf("s", (64 * 8,), "uint16")
    r = lbuf("r", 1, "uint32")
    Out = gbuf("Out", (64 * 8,), "uint16")
    row = (LANE % 8) * 16
    dup = ir.Select(ir.cmp(ir.CmpOp.EQ, LANE, 3), ir.const(0), row, I32)  # lane 3 reuses row 0
    q, x = var("q"), var("x")
    body = seq(
        ir.Store(r, 0, ir.cast(LANE, "uint32"), U32),
        ir.PtxCall(
            STM1,
            (ir.AddressOperand(ir.SharedAddress(s, dup if overlap else row)), regs(r, [0])),
            span(4),
        ),
        ir.Barrier("cta"),
        ir.For(
            q,
            ir.const(0),
            ir.const(2),
            1,
            seq(ir.Assign(x, LANE + 32 * q), ir.Store(Out, x, ir.Load(s, x, U16), U16)),
        ),
    )
    return function("st", (Out,), body, allocs=(s, r), variables=(q, x))


def uninitialized_register_kernel(fixed: bool):
    d, a, b = lbuf("d", 4, "float32"), lbuf("a", 4, "uint32"), lbuf("b", 2, "uint32")
    Out = gbuf("Out", (128,), "float32")
    text = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    zero = ir.RegVector(tuple(ir.ValueReg(ir.const(0.0)) for _ in range(4)), False)
    init = [ir.Store(a, k, ir.const(0, U32), U32) for k in range(4)]
    init += [ir.Store(b, k, ir.const(0, U32), U32) for k in range(2 if fixed else 1)]
    mma = ir.PtxCall(
        text, (regs(d, range(4), True), regs(a, range(4)), regs(b, range(2)), zero), span(3)
    )
    out = [ir.Store(Out, TX * 4 + k, ir.Load(d, k, ir.F32), ir.F32) for k in range(4)]
    return function("r", (Out,), seq(*init, mma, *out), allocs=(d, a, b))


def uninitialized_shared_kernel(fixed: bool):
    s = sbuf("s", (64,), "int32")
    Src, Dst = gbuf("Src", (32,), "int32"), gbuf("Dst", (32,), "int32")
    body = seq(
        ir.Store(s, TX, ir.Load(Src, TX, I32), I32),
        ir.Barrier("cta"),
        ir.Store(Dst, TX, ir.Load(s, TX + (0 if fixed else 32), I32), I32, span(9)),
    )
    return function("u", (Src, Dst), body, allocs=(s,))


def misaligned_shared_kernel(offset: int):
    Out = gbuf("Out", (32,), "uint32")
    s = sbuf("s", (80,), "uint16")
    body = seq(
        ir.Store(s, TX, ir.const(1, "uint16"), U16),
        ir.Store(s, TX + 32, ir.const(1, "uint16"), U16),
        ir.Barrier("cta"),
        ir.Store(Out, TX, ir.Load(s, TX // 2, U32), U32, span(5)),
    )
    fn = function("m", (Out,), body, allocs=(s,))
    return ir.Function(**{**fn.__dict__, "shared_offsets": {s: offset}, "shared_bytes": 176})


def global_copy_kernel():
    Src, Dst = gbuf("Src", (8,), "uint32"), gbuf("Dst", (8,), "uint32")
    return function("g", (Src, Dst), ir.Store(Dst, TX, ir.Load(Src, TX, U32), U32), block=(8, 1, 1))


def division_kernel(guarded: bool):
    Dst = gbuf("Dst", (32,), "int32")
    value = ir.BinOp(ir.Op.FLOORDIV, ir.const(100), TX - 3, I32)
    if guarded:
        value = ir.Select(ir.cmp(ir.CmpOp.NE, TX, 3), value, ir.const(0), I32)
    return function("d", (Dst,), ir.Store(Dst, TX, value, I32, span(6)))


def shift_kernel(in_range: bool):
    Dst = gbuf("Dst", (32,), "int32")
    count = TX if in_range else TX + 1
    return function(
        "s", (Dst,), ir.Store(Dst, TX, ir.BinOp(ir.Op.SHL, ir.const(1), count, I32), I32)
    )


def overflow_kernel(in_range: bool):
    """``(2**31 - 32 + lane) + 1``: lane 31 passes INT_MAX (undefined in C); the twin adds 0."""
    Dst = gbuf("Dst", (32,), "int32")
    x = ir.BinOp(ir.Op.ADD, ir.const(2**31 - 32), TX, I32)
    value = ir.BinOp(ir.Op.ADD, x, ir.const(0 if in_range else 1), I32)
    return function("o", (Dst,), ir.Store(Dst, TX, value, I32))


def barrier_kernel(scope: str, divergent: bool):
    Dst = gbuf("Dst", (64,), "int32")
    cut = 16 if scope == "cta" else 48
    cond = lt(TX, cut) if divergent else lt(ir.Special(ir.Builtin.BLOCK_DIM), 100)
    if scope == "warp" and not divergent:
        cond = lt(TX, 32)
    body = seq(ir.If(cond, ir.Barrier(scope, span(2))), ir.Store(Dst, TX, TX, I32))
    return function("b", (Dst,), body, block=(64, 1, 1))


def shuffle_mask_kernel(mask: int):
    """Lanes 0..15 shuffle with ``mask``: 0xffffffff names lanes 16..31, which do not execute
    it (undefined); 0x0000ffff is the corrected twin."""
    Dst = gbuf("Dst", (32,), "int32")
    shfl = WarpCollective(
        WarpOp.SHFL_BFLY, ir.const(mask, U32), TX, ir.const(1), ir.const(32), I32, span(2)
    )
    body = ir.If(lt(TX, 16), ir.Store(Dst, TX, shfl, I32, span(2)), None, span(1))
    return function("shfl", (Dst,), body, block=(32, 1, 1))


# --------------------------------------------------------------------------- the table


def _zeros(shape, dtype):
    return lambda: [np.zeros(shape, dtype)]


def _copy_pair():
    return [np.arange(8, dtype=np.uint32), np.zeros(8, np.uint32)]


def _pair(name, kind, bad, good, inputs, blind=None, **kw):
    return [
        Planted(name, kind, bad, inputs, True, blind, **kw),
        Planted(name + ".fixed", kind, good, inputs, False, blind),
    ]


def _src_dst(n=32):
    return lambda: [np.arange(n, dtype=np.int32), np.zeros(n, np.int32)]


_LOCAL = "memcheck cannot see a local array's slot past its end: it stays in the thread's frame"
_SHARED_INIT = "initcheck tracks device global memory, not shared memory"
_REGS = "initcheck tracks device global memory, not registers or local arrays"
_ARITH = (
    "the GPU does not trap integer division by zero, a shift count out of range or a signed "
    "overflow"
)
_POOL = (
    "measured on the H200: the runner's tensors come from cupy's memory pool, so a read just "
    "past a tensor's end stays inside allocated memory, which is all memcheck checks"
)
_STMATRIX = (
    "measured on the H200: racecheck does not report two lanes of one stmatrix writing the "
    "same row (a conflict inside one instruction)"
)
_SYNCWARP = (
    "measured on the H200: synccheck does not report a warp barrier reached by half of a warp "
    "whose other lanes go on and exit"
)
_LANES = (
    "measured on the H200: synccheck checks barriers, not the lanes taking part in a "
    ".sync.aligned matrix instruction"
)
_SHFL_MASK = (
    "measured on an H100: synccheck stays silent; its guide describes its checks as barrier "
    "checks (__syncthreads, __syncwarp, cooperative groups), with no word on shuffle masks"
)

PLANTED: list[Planted] = [
    *_pair(
        "oob_global_read",
        Kind.OUT_OF_BOUNDS,
        lambda: copy_kernel(32, 32, 1),
        lambda: copy_kernel(32, 32, 0),
        _src_dst(),
        blind=_POOL,
    ),
    *_pair(
        "oob_shared_read",
        Kind.OUT_OF_BOUNDS,
        lambda: copy_kernel(32, 32, 1, "shared"),
        lambda: copy_kernel(32, 32, 0, "shared"),
        _src_dst(),
    ),
    *_pair(
        "oob_local_slot",
        Kind.OUT_OF_BOUNDS,
        lambda: copy_kernel(32, 32, 2, "local"),
        lambda: copy_kernel(32, 32, 1, "local"),
        _src_dst(),
        blind=_LOCAL,
    ),
    *_pair(
        "misaligned_shared",
        Kind.MISALIGNED,
        lambda: misaligned_shared_kernel(2),
        lambda: misaligned_shared_kernel(0),
        _zeros((32,), np.uint32),
    ),
    Planted(
        "misaligned_global",
        Kind.MISALIGNED,
        global_copy_kernel,
        _copy_pair,
        True,
        misaligned_arg=0,
    ),
    Planted(
        "misaligned_global.fixed",
        Kind.MISALIGNED,
        global_copy_kernel,
        _copy_pair,
        False,
    ),
    *_pair(
        "ldmatrix_row_misaligned",
        Kind.MISALIGNED,
        lambda: ldmatrix_kernel(8),
        lambda: ldmatrix_kernel(0),
        _zeros((128,), np.uint32),
    ),
    *_pair(
        "ldmatrix_row_outside",
        Kind.OUT_OF_BOUNDS,
        lambda: ldmatrix_kernel(16),
        lambda: ldmatrix_kernel(0),
        _zeros((128,), np.uint32),
    ),
    *_pair(
        "uninitialized_shared",
        Kind.UNINITIALIZED,
        lambda: uninitialized_shared_kernel(False),
        lambda: uninitialized_shared_kernel(True),
        _src_dst(),
        blind=_SHARED_INIT,
    ),
    *_pair(
        "uninitialized_register",
        Kind.UNINITIALIZED,
        lambda: uninitialized_register_kernel(False),
        lambda: uninitialized_register_kernel(True),
        _zeros((128,), np.float32),
        blind=_REGS,
    ),
    *_pair(
        "race_read_after_write",
        Kind.RACE,
        lambda: race_kernel(1),
        lambda: race_kernel(1, barrier="cta"),
        _zeros((32,), np.int32),
    ),
    Planted(
        "race_read_after_write.warp_sync",
        Kind.RACE,
        lambda: race_kernel(1, barrier="warp"),
        _zeros((32,), np.int32),
        False,
    ),
    *_pair(
        "race_warp_sync_across_warps",
        Kind.RACE,
        lambda: race_kernel(32, barrier="warp", threads=64),
        lambda: race_kernel(32, barrier="cta", threads=64),
        _zeros((64,), np.int32),
    ),
    *_pair(
        "race_write_write",
        Kind.RACE,
        lambda: write_write_kernel(False),
        lambda: write_write_kernel(True),
        _zeros((1,), np.int32),
    ),
    *_pair(
        "race_write_after_read",
        Kind.RACE,
        lambda: write_after_read_kernel(False),
        lambda: write_after_read_kernel(True),
        _zeros((32,), np.int32),
    ),
    *_pair(
        "race_seed_without_cta_sync",
        Kind.RACE,
        lambda: seed_without_barrier(None),
        lambda: seed_without_barrier("cta"),
        seed_inputs,
    ),
    Planted(
        "race_seed_without_cta_sync.warp_sync",
        Kind.RACE,
        lambda: seed_without_barrier("warp"),
        seed_inputs,
        False,
    ),
    *_pair(
        "race_ldmatrix_own_warp",
        Kind.RACE,
        lambda: ldmatrix_kernel(0, barrier=None),
        lambda: ldmatrix_kernel(0, barrier="warp"),
        _zeros((128,), np.uint32),
    ),
    *_pair(
        "race_stmatrix_rows_overlap",
        Kind.RACE,
        lambda: stmatrix_overlap_kernel(True),
        lambda: stmatrix_overlap_kernel(False),
        _zeros((512,), np.uint16),
        blind=_STMATRIX,
    ),
    *_pair(
        "division_by_zero",
        Kind.ARITHMETIC,
        lambda: division_kernel(False),
        lambda: division_kernel(True),
        _zeros((32,), np.int32),
        blind=_ARITH,
    ),
    *_pair(
        "shift_count_out_of_range",
        Kind.ARITHMETIC,
        lambda: shift_kernel(False),
        lambda: shift_kernel(True),
        _zeros((32,), np.int32),
        blind=_ARITH,
    ),
    *_pair(
        "signed_overflow",
        Kind.ARITHMETIC,
        lambda: overflow_kernel(False),
        lambda: overflow_kernel(True),
        _zeros((32,), np.int32),
        blind=_ARITH,
    ),
    *_pair(
        "divergent_cta_barrier",
        Kind.DIVERGENT_BARRIER,
        lambda: barrier_kernel("cta", True),
        lambda: barrier_kernel("cta", False),
        _zeros((64,), np.int32),
    ),
    *_pair(
        "divergent_warp_barrier",
        Kind.DIVERGENT_BARRIER,
        lambda: barrier_kernel("warp", True),
        lambda: barrier_kernel("warp", False),
        _zeros((64,), np.int32),
        blind=_SYNCWARP,
    ),
    *_pair(
        "collective_missing_lane",
        Kind.PARTIAL_COLLECTIVE,
        lambda: ldmatrix_kernel(0, guard=lt(LANE, 31)),
        lambda: ldmatrix_kernel(0, threads=64, guard=lt(TX, 32)),
        _zeros((256,), np.uint32),
        blind=_LANES,
    ),
    *_pair(
        "shuffle_mask_misses_executing_lanes",
        Kind.WARP_MASK,
        lambda: shuffle_mask_kernel(0xFFFFFFFF),
        lambda: shuffle_mask_kernel(0x0000FFFF),
        _zeros((32,), np.int32),
        blind=_SHFL_MASK,
    ),
]

BY_NAME = {p.name: p for p in PLANTED}


def misaligned_view(array: np.ndarray) -> np.ndarray:
    """``array``'s contents in a buffer whose data pointer is 2 bytes past an aligned one."""
    raw = np.zeros(array.nbytes + 16, dtype=np.uint8)
    start = (-raw.ctypes.data) % 16 + 2
    view = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    view[...] = array
    return view


def simulator_inputs(case: Planted) -> list:
    args = case.inputs()
    if case.misaligned_arg is not None:
        args[case.misaligned_arg] = misaligned_view(args[case.misaligned_arg])
    return args
