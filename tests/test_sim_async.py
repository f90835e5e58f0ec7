"""Asynchronous copies (cp.async, commit_group, wait_group, wait_all) in the simulator.

Kernels are hand-built lowered IR in the agreed form (docs/simulator.md, "Asynchronous
copies"): each check fires on a kernel built to break it and stays silent on its twin.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_sim_kernels import TX, function, gbuf, sbuf, seq, span
from tirx.errors import SimulationError
from tirx.ir import nodes as ir
from tirx.sim import run

I32, U32 = ir.I32, ir.U32
CG = "cp.async.cg.shared.global"
CA = "cp.async.ca.shared.global"


def copy(dst, dst_byte, src, src_byte, line, *, size=16, src_size=None, text=CG):
    ops = [
        ir.AddressOperand(ir.SharedAddress(dst, dst_byte)),
        ir.AddressOperand(ir.GlobalAddress(src, src_byte)),
        ir.Immediate(size),
    ]
    if src_size is not None:
        ops.append(ir.ScalarOperand(ir.as_expr(src_size)))
    return ir.PtxCall(text, tuple(ops), span(line))


def commit(line=None):
    return ir.PtxCall("cp.async.commit_group", (), span(line) if line else None)


def wait(n, line=None):
    return ir.PtxCall("cp.async.wait_group", (ir.Immediate(n),), span(line) if line else None)


def wait_all(line=None):
    return ir.PtxCall("cp.async.wait_all", (), span(line) if line else None)


def read_back(s, Dst, index, line):
    """Dst[tid * 4 + j] = s[index * 4 + j] for j < 4 (int32 words of a 16-byte chunk)."""
    return seq(
        *[
            ir.Store(Dst, TX * 4 + j, ir.Load(s, index * 4 + j, I32), I32, span(line))
            for j in range(4)
        ]
    )


def staged(middle, *, reader=TX, stages=1, threads=32):
    """Each thread copies its 16-byte chunk of Src into stage 0 of s; then ``middle``; then
    thread t reads chunk ``reader`` of stage 0 (line 9)."""
    Src = gbuf("Src", (threads * 4 * stages,), "int32")
    Dst = gbuf("Dst", (threads * 4,), "int32")
    s = sbuf("s", (threads * 4 * stages,), "int32")
    body = seq(copy(s, TX * 16, Src, TX * 16, 3), *middle(s, Src), read_back(s, Dst, reader, 9))
    return function("cp", (Src, Dst), body, block=(threads, 1, 1), allocs=(s,))


def inputs(n=32, stages=1):
    return [np.arange(n * 4 * stages, dtype=np.int32) * 3 + 1, np.zeros(n * 4, np.int32)]


def fault(fn, args, pattern, **kw):
    with pytest.raises(SimulationError, match=pattern) as info:
        run(fn, args, **kw)
    return info.value


def test_a_waited_copy_is_visible_to_its_thread_and_after_a_barrier_to_all():
    args = inputs()
    run(staged(lambda s, src: [commit(), wait(0)]), args)
    np.testing.assert_array_equal(args[1], args[0])
    other = (TX + 1) % 32
    args = inputs()
    run(staged(lambda s, src: [commit(), wait(0), ir.Barrier("cta")], reader=other), args)
    np.testing.assert_array_equal(args[1], np.roll(args[0].reshape(32, 4), -1, axis=0).ravel())


def test_reading_before_the_wait_names_the_copy_and_the_read():
    err = fault(staged(lambda s, src: [commit()]), inputs(), "has not completed")
    msg = err.message
    assert "reads 's' byte 0" in msg and "at line 9" in msg, msg
    assert "the cp.async at line 3 issued by thread 0 (warp 0, lane 0)" in msg, msg
    assert msg.endswith("[block (0, 0, 0), warp 0, lane 0]"), msg
    assert err.span == span(9) and "wait_group" in err.hint


def test_other_threads_need_a_barrier_after_the_wait():
    other = (TX + 1) % 32
    err = fault(staged(lambda s, src: [commit(), wait(0)], reader=other), inputs(), "race")
    assert "thread 1 (warp 0, lane 1) wrote at line 3" in err.message, err.message
    assert "between line 3 and line 9" in err.hint
    # a barrier before the wait does not help: the bytes land at the wait
    early = staged(lambda s, src: [commit(), ir.Barrier("cta"), wait(0)], reader=other)
    fault(early, inputs(), "race")
    # another thread reading while the copy is in flight, even after a barrier
    in_flight = staged(lambda s, src: [commit(), ir.Barrier("cta")], reader=other)
    err = fault(in_flight, inputs(), "has not completed")
    assert "issued by thread 1 (warp 0, lane 1)" in err.message and "cta_sync" in err.hint


def test_wait_group_completes_all_but_the_newest_n_groups():
    def two_groups(n):
        def middle(s, src):
            return [commit(), copy(s, 512 + TX * 16, src, 512 + TX * 16, 5), commit(), wait(n)]

        return middle

    # group 0 (stage 0) is complete and read; group 1 is still in flight when the block ends
    fault(staged(two_groups(1), stages=2), inputs(stages=2), "exits while the cp.async at line 5")
    run(staged(two_groups(0), stages=2), inputs(stages=2))

    Src = gbuf("Src", (256,), "int32")
    Dst = gbuf("Dst", (128,), "int32")
    s = sbuf("s", (256,), "int32")

    def kernel(n):
        body = seq(
            copy(s, TX * 16, Src, TX * 16, 3),
            commit(),
            copy(s, 512 + TX * 16, Src, 512 + TX * 16, 5),
            commit(),
            wait(n),
            read_back(s, Dst, TX + 32, 7),  # stage 1: the newest group
        )
        return function("cp", (Src, Dst), body, allocs=(s,))

    err = fault(kernel(1), inputs(stages=2), "has not completed")
    assert "the cp.async at line 5" in err.message and "at line 7" in err.message
    args = inputs(stages=2)
    run(kernel(0), args)
    np.testing.assert_array_equal(args[1], args[0][128:])


def test_wait_all_covers_copies_not_yet_committed():
    run(staged(lambda s, src: [wait_all()]), inputs())
    fault(staged(lambda s, src: [wait(0)]), inputs(), "has not completed")  # never committed


def test_overwriting_a_pending_destination_is_an_error():
    store = staged(lambda s, src: [ir.Store(s, TX * 4, ir.const(0), I32, span(5)), wait_all()])
    err = fault(
        store,
        inputs(),
        "writes 's' byte 0 .shared address 0. at line 5, the destination of the cp.async",
    )
    assert "before reusing" in err.hint
    again = staged(lambda s, src: [copy(s, TX * 16, src, TX * 16, 5), wait_all()])
    fault(again, inputs(), "at line 5, the destination of the cp.async at line 3")
    fixed = staged(lambda s, src: [wait_all(), copy(s, TX * 16, src, TX * 16, 5), wait_all()])
    run(fixed, inputs())


def test_reusing_a_stage_another_warp_still_reads_needs_a_barrier():
    Src, Dst = gbuf("Src", (512,), "int32"), gbuf("Dst", (256,), "int32")
    s = sbuf("s", (256,), "int32")  # 64 threads x 16 bytes
    partner = (TX + 32) % 64  # a thread of the other warp

    def kernel(barrier_before_reuse):
        body = [
            copy(s, TX * 16, Src, TX * 16, 2),
            wait_all(),
            ir.Barrier("cta"),
            read_back(s, Dst, partner, 5),  # read the other warp's chunk
            *([ir.Barrier("cta", span(6))] if barrier_before_reuse else []),
            copy(s, TX * 16, Src, 1024 + TX * 16, 7),  # next stage into the same bytes
            wait_all(),
        ]
        return function("reuse", (Src, Dst), seq(*body), block=(64, 1, 1), allocs=(s,))

    args = [np.arange(512, dtype=np.int32), np.zeros(256, np.int32)]
    err = fault(kernel(False), args, "race")
    assert "writes 's' byte 0 (shared address 0) at line 7" in err.message, err.message
    assert "(warp 1, lane 0) read at line 5" in err.message, err.message
    assert "different warps" in err.hint
    run(kernel(True), args)


def test_copy_faults_bounds_alignment_and_sizes():
    Src, Dst = gbuf("Src", (128,), "int32"), gbuf("Dst", (128,), "int32")
    s = sbuf("s", (128,), "int32")

    def kernel(stmt):
        return function("c", (Src, Dst), seq(stmt, wait_all()), allocs=(s,))

    args = inputs()
    fault(kernel(copy(s, TX * 16 + 8, Src, TX * 16, 4)), args, "not 16-byte aligned")
    fault(kernel(copy(s, TX * 16 + 16, Src, TX * 16, 4)), args, "outside every shared allocation")
    err = fault(kernel(copy(s, TX * 16, Src, TX * 16 + 4, 4)), args, "source: byte 4")
    assert err.message.endswith("lane 0]") and err.span == span(4)
    fault(kernel(copy(s, TX * 16, Src, TX * 16 + 16, 4)), args, "out-of-bounds cp.async source")
    fault(kernel(copy(s, TX * 16, Src, TX * 16, 4, size=8)), args, "copies 16 bytes, not 8")
    fault(kernel(copy(s, TX * 16, Src, TX * 16, 4, size=12, text=CA)), args, "4, 8, 16 bytes")
    fault(kernel(copy(s, TX * 16, Src, TX * 16, 4, src_size=17)), args, "larger than its cp-size")
    run(kernel(copy(s, TX * 8, Src, TX * 8, 4, size=8, text=CA)), args)  # .ca, 8 bytes


def test_src_size_zero_fills_the_rest_and_reads_only_its_bytes():
    Src, Dst = gbuf("Src", (126,), "int32"), gbuf("Dst", (128,), "int32")  # the last chunk short
    s = sbuf("s", (128,), "int32")
    remaining = ir.Select(
        ir.cmp(ir.CmpOp.LT, TX, 31), ir.const(16, "uint32"), ir.const(8, "uint32"), U32
    )
    body = seq(
        copy(s, TX * 16, Src, TX * 16, 3, src_size=remaining), wait_all(), read_back(s, Dst, TX, 9)
    )
    src = np.arange(126, dtype=np.int32) + 1
    dst = np.zeros(128, np.int32)
    run(function("ragged", (Src, Dst), body, allocs=(s,)), [src, dst])
    np.testing.assert_array_equal(dst, np.concatenate([src, [0, 0]]))
    full = seq(copy(s, TX * 16, Src, TX * 16, 3), wait_all())
    fault(function("over", (Src, Dst), full, allocs=(s,)), [src, dst], "out-of-bounds")


def test_a_block_that_exits_with_a_copy_in_flight_is_a_fault():
    """The copy may still be writing shared memory the next block is given; the twin waits
    in block 0 too, and block 1 starts with nothing in flight."""
    Src, Dst = gbuf("Src", (256,), "int32"), gbuf("Dst", (256,), "int32")
    s = sbuf("s", (128,), "int32")
    first = ir.cmp(ir.CmpOp.EQ, ir.Special(ir.Builtin.BLOCK_IDX), 0)
    block = ir.Special(ir.Builtin.BLOCK_IDX)

    def kernel(block0_waits: bool):
        waits = (commit(), wait(0)) if block0_waits else ()
        return function(
            "b",
            (Src, Dst),
            seq(
                ir.If(first, seq(copy(s, TX * 16, Src, TX * 16, 3), *waits)),
                ir.If(
                    ir.Not(first),
                    seq(copy(s, TX * 16, Src, 512 + TX * 16, 5), commit(), wait(0)),
                ),
                ir.If(
                    ir.Not(first),
                    ir.Store(Dst, block * 128 + TX, ir.Load(s, TX * 4, I32), I32, span(8)),
                ),
            ),
            grid=(2, 1, 1),
            allocs=(s,),
        )

    err = fault(kernel(False), inputs(64), "the block exits while the cp.async at line 3")
    assert "never committed" in err.message and "[block (0, 0, 0), warp 0, lane 0]" in err.message
    assert "wait_all" in err.hint
    args = inputs(64)
    run(kernel(True), args)
    np.testing.assert_array_equal(args[1][128:160], args[0][128::4][:32])


def test_traces_show_copies_commits_and_waits():
    fn = staged(lambda s, src: [commit(4), wait(0, 5)])
    result = run(fn, inputs(), trace=True)
    events = [(c.event, c.span) for c in result.copies]
    assert events == [("copy", span(3)), ("commit_group", span(4)), ("wait_group", span(5))]
    cp_, cm, wt = result.copies
    np.testing.assert_array_equal(cp_.dst, np.arange(32) * 16)
    np.testing.assert_array_equal(cp_.nbytes, np.full(32, 16))
    np.testing.assert_array_equal(cm.group, np.zeros(32))
    np.testing.assert_array_equal(wt.completed, np.ones(32))
    assert cp_.active.all() and cp_.warp == 0 and cp_.block == (0, 0, 0)


def test_malformed_operands_are_rejected_when_the_run_is_prepared():
    Src = gbuf("Src", (128,), "int32")
    s = sbuf("s", (128,), "int32")
    swapped = ir.PtxCall(
        CG,
        (
            ir.AddressOperand(ir.GlobalAddress(Src, 0)),
            ir.AddressOperand(ir.SharedAddress(s, 0)),
            ir.Immediate(16),
        ),
        span(2),
    )
    with pytest.raises(SimulationError, match="destination must be a shared-memory address"):
        run(function("bad", (Src,), swapped, allocs=(s,)), [np.zeros(128, np.int32)])
    with pytest.raises(SimulationError, match="wait_group's N must be an integer immediate"):
        run(function("bad", (), ir.PtxCall("cp.async.wait_group", (ir.const(1),))), [])
    with pytest.raises(SimulationError, match="unknown PTX instruction"):
        run(function("bad", (), ir.PtxCall("cp.async.bulk.shared.global", ())), [])
