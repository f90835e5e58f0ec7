"""cp.async: the tile form and the raw calls, their checks (each fires on a kernel built to
break it and stays silent on its twin), the lowered IR, the generated CUDA and its PTX."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

import tirx
from tirx.errors import ContractError, SimulationError, TirxError
from tirx.ir import nodes as ir

from .helpers import PRELUDE, caret_line, define

COPY = """
@T.function
def kernel(A: T.Tensor((32, 8), "float16"), Out: T.Tensor((32, 8), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    s = T.alloc_shared((32, 8), "float16")
    T.cuda.tile.apply(T.ptx["{instr}"], {dst}, {src}, scope="{scope}", {params})
    T.ptx["cp.async.commit_group"]()
    T.ptx["cp.async.wait_group"]({n})
    T.cuda.cta_sync()
    for j in range(8):
        Out[lane, j] = s[lane, j]
"""

GOOD = dict(
    instr="cp.async.cg.shared.global",
    dst="s[lane, :]",
    src="A[lane, :]",
    scope="thread",
    params="chunk_bytes=16",
    n="0",
)


def copy_kernel(tmp_path, **changes):
    return define(COPY.format(**{**GOOD, **changes}), tmp_path, "kernel")


def calls(lowered, prefix="cp.async"):
    out = []

    def walk(s):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, ir.For):
            walk(s.body)
        elif isinstance(s, ir.If):
            walk(s.then_body)
            if s.else_body is not None:
                walk(s.else_body)
        elif isinstance(s, ir.PtxCall) and s.instruction.startswith(prefix):
            out.append(s)

    walk(lowered.body)
    return out


def test_tile_copy_lowers_to_the_agreed_ir(tmp_path):
    exe = tirx.compile(copy_kernel(tmp_path), "cuda -arch=sm_80")
    copy, commit, wait = calls(exe.lowered)
    dst, src, size = copy.operands
    assert copy.instruction == "cp.async.cg.shared.global"
    assert isinstance(dst.address, ir.SharedAddress) and dst.address.buffer.name == "s"
    assert isinstance(src.address, ir.GlobalAddress) and src.address.buffer.name == "A"
    assert src.address.dtype.name == "uint64"
    assert isinstance(size, ir.Immediate) and size.value == 16
    assert (commit.instruction, commit.operands) == ("cp.async.commit_group", ())
    assert wait.instruction == "cp.async.wait_group" and wait.operands[0].value == 0


def test_generated_cuda_and_ptx(tmp_path):
    exe = tirx.compile(copy_kernel(tmp_path, n="1"), "cuda -arch=sm_80")
    lines = [ln.strip() for ln in exe.source.splitlines() if "cp.async" in ln]
    assert lines[0].startswith('asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :  : "r"(')
    assert '"l"((unsigned long long)(reinterpret_cast<const unsigned char*>(A) + (' in lines[0]
    assert lines[1] == 'asm volatile("cp.async.commit_group;" :  : );'
    assert lines[2] == 'asm volatile("cp.async.wait_group 1;" :  :  : "memory");'
    ptx = exe.ptx
    assert re.search(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16;", ptx)
    assert "cp.async.commit_group;" in ptx and "cp.async.wait_group 1;" in ptx


def test_repeats_issue_one_copy_each(tmp_path):
    src = """
    @T.function
    def kernel(A: T.Tensor((64, 16), "float16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        s = T.alloc_shared((64, 16), "float16")
        T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"],
            s[2 * lane : 2 * lane + 2, :].view(2, 2, 8), A[2 * lane : 2 * lane + 2, :].view(2, 2, 8),
            scope="thread", chunk_bytes=16)
        T.ptx["cp.async.wait_all"]()
    """
    exe = tirx.compile(define(src, tmp_path, "kernel"), "cuda -arch=sm_90")
    copies = calls(exe.lowered, "cp.async.cg")
    assert len(copies) == 4
    assert exe.ptx.count("cp.async.cg.shared.global") == 4 and "cp.async.wait_all;" in exe.ptx


def test_src_size_zero_fill_operand(tmp_path):
    exe = tirx.compile(copy_kernel(tmp_path, params="chunk_bytes=16, src_size=lane % 17"), "sim")
    (copy,) = calls(exe.lowered, "cp.async.cg")
    assert isinstance(copy.operands[3], ir.ScalarOperand)
    assert copy.operands[3].value.dtype.name == "uint32"
    cuda = tirx.compile(
        copy_kernel(tmp_path, params="chunk_bytes=16, src_size=8"), "cuda -arch=sm_80"
    )
    assert "cp.async.cg.shared.global [%0], [%1], 16, %2;" in cuda.source
    assert re.search(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;", cuda.ptx)


def test_pred_guards_the_copies(tmp_path):
    exe = tirx.compile(copy_kernel(tmp_path, params="chunk_bytes=16, pred=lane < 16"), "sim")
    guard = exe.lowered.body
    ifs = []

    def walk(s):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, ir.If):
            ifs.append(s)

    walk(guard)
    (only,) = ifs
    assert calls(ir.Function("f", (), only.then_body, exe.lowered.launch))[0].instruction == (
        "cp.async.cg.shared.global"
    )
    cuda = tirx.compile(copy_kernel(tmp_path, params="chunk_bytes=16, pred=lane < 16"), "cuda")
    assert re.search(r"if \(\(lane < 16\)\) \{\n.*\n\s*asm volatile\(\"cp\.async", cuda.source)
    with pytest.raises(ContractError, match="pred must be computed from kernel values"):
        tirx.compile(copy_kernel(tmp_path, params="chunk_bytes=16, pred=A[0, 0] > 0"), "sim")


def test_ca_with_smaller_chunks(tmp_path):
    exe = tirx.compile(
        copy_kernel(
            tmp_path,
            instr="cp.async.ca.shared.global",
            dst="s[lane, 4:8]",
            src="A[lane, 4:8]",
            params="chunk_bytes=8",
        ),
        "cuda -arch=sm_80",
    )
    assert re.search(r"cp\.async\.ca\.shared\.global \[%r\d+\], \[%rd\d+\], 8;", exe.ptx)


def test_raw_copy_with_element_operands(tmp_path):
    src = """
    @T.function
    def kernel(A: T.Tensor((32, 8), "float16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        s = T.alloc_shared((32, 8), "float16")
        T.ptx["cp.async.ca.shared.global"](s[lane, 2], A[lane, 2], 4)
        T.ptx["cp.async.commit_group"]()
        T.ptx["cp.async.wait_group"](0)
    """
    exe = tirx.compile(define(src, tmp_path, "kernel"), "cuda -arch=sm_80")
    (copy,) = calls(exe.lowered, "cp.async.ca")
    assert copy.operands[2].value == 4
    assert re.search(r"cp\.async\.ca\.shared\.global \[%r\d+\], \[%rd\d+\], 4;", exe.ptx)


# --------------------------------------------------------------- checks: broken and twin

# (changes that break the kernel, the message, the text the caret must sit on, the twin)
BROKEN = {
    "dst_not_shared": (
        dict(dst="A[lane, :]", src="A[lane, :]"),
        "operand dst must be in shared memory",
        'T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], A[lane, :]',
        {},
    ),
    "src_not_global": (
        dict(src="s[lane, :]"),
        "operand src must be in a global tensor",
        "s[lane, :]",
        {},
    ),
    "cg_needs_16": (
        dict(dst="s[lane, 0:4]", src="A[lane, 0:4]", params="chunk_bytes=8"),
        "chunk_bytes must be 16",
        None,
        dict(
            instr="cp.async.ca.shared.global",
            dst="s[lane, 0:4]",
            src="A[lane, 0:4]",
            params="chunk_bytes=8",
        ),
    ),
    "ca_sizes": (
        dict(instr="cp.async.ca.shared.global", params="chunk_bytes=12"),
        "chunk_bytes must be 4, 8, 16",
        None,
        dict(instr="cp.async.ca.shared.global", params="chunk_bytes=16"),
    ),
    "chunk_bytes_missing": (dict(params="src_size=16"), "needs chunk_bytes", None, {}),
    "chunk_is_the_last_axis": (
        dict(dst="s[lane, 0:4]", src="A[lane, 0:4]"),
        "a row must be 16 bytes",
        "s[lane, 0:4]",
        {},
    ),
    "chunk_contiguous": (
        dict(dst="s[0:8, lane % 8]", src="A[0:8, lane % 8]"),
        "is not 16 contiguous bytes",
        "s[0:8, lane % 8]",
        dict(dst="s[lane % 8, 0:8]", src="A[lane % 8, 0:8]"),
    ),
    "chunk_aligned": (
        dict(
            instr="cp.async.ca.shared.global",
            dst="s[lane, 1:5]",
            src="A[lane, 4:8]",
            params="chunk_bytes=8",
        ),
        "starts at 2 bytes past a multiple of 8",
        "s[lane, 1:5]",
        dict(
            instr="cp.async.ca.shared.global",
            dst="s[lane, 4:8]",
            src="A[lane, 4:8]",
            params="chunk_bytes=8",
        ),
    ),
    "global_chunk_aligned": (
        dict(
            instr="cp.async.ca.shared.global",
            dst="s[lane, 4:8]",
            src="A[lane, 2:6]",
            params="chunk_bytes=8",
        ),
        "operand src: row () starts at 4 bytes past a multiple of 8",
        "A[lane, 2:6]",
        dict(
            instr="cp.async.ca.shared.global",
            dst="s[lane, 4:8]",
            src="A[lane, 0:4]",
            params="chunk_bytes=8",
        ),
    ),
    "scope_thread": (dict(scope="warp"), 'use scope="thread"', None, {}),
    "src_size_in_range": (
        dict(params="chunk_bytes=16, src_size=17"),
        "src_size must be between 0 and chunk_bytes",
        None,
        dict(params="chunk_bytes=16, src_size=0"),
    ),
    "src_size_not_a_load": (
        dict(params="chunk_bytes=16, src_size=T.int32(A[0, 0])"),
        "src_size must be computed from thread indices",
        None,
        dict(params="chunk_bytes=16, src_size=lane % 17"),
    ),
    "wait_group_constant": (dict(n="lane"), "n must be a compile-time int", "lane", {}),
    "unknown_form": (
        dict(instr="cp.async.cg.global.shared"),
        "unknown or unsupported instruction",
        None,
        {},
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_check_fires_and_its_twin_is_silent(tmp_path, name):
    broken, message, caret, twin = BROKEN[name]
    with pytest.raises(TirxError, match=re.escape(message)) as info:
        tirx.compile(copy_kernel(tmp_path, **broken), "cuda -arch=sm_80")
    text = str(info.value)
    assert info.value.span is not None
    line = caret_line(text)
    assert line.startswith("T.") or caret is not None
    if caret is not None:
        assert caret in line or caret in text.split("\n")[1], text
    tirx.compile(copy_kernel(tmp_path, **twin), "cuda -arch=sm_80")  # the twin compiles


def test_error_sits_on_the_users_line(tmp_path):
    with pytest.raises(ContractError) as info:
        tirx.compile(copy_kernel(tmp_path, src="s[lane, :]"), "cuda -arch=sm_80")
    text = (PRELUDE + textwrap.dedent(COPY)).splitlines()
    want = next(i for i, ln in enumerate(text, 1) if "tile.apply" in ln)
    assert info.value.span.line == want
    assert caret_line(str(info.value)).startswith("T.cuda.tile.apply(")


def test_needs_sm80(tmp_path):
    # tirx targets sm_80 and newer, so only the lowering can be asked for an older arch
    from tirx.transform.lower import lower_function

    kernel = copy_kernel(tmp_path)
    with pytest.raises(ContractError, match="needs sm_80 or newer; the target is sm_75"):
        lower_function(kernel.ir, arch=75)
    lower_function(kernel.ir, arch=80)


def test_raw_copy_misaligned_and_twin(tmp_path):
    src = """
    @T.function
    def kernel(A: T.Tensor((32, 8), "float16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        s = T.alloc_shared((32, 8), "float16")
        T.ptx["cp.async.ca.shared.global"](s[lane, {col}], A[lane, 0], 8)
    """
    with pytest.raises(ContractError, match="operand dst starts 2 bytes past a multiple of 8") as e:
        tirx.compile(define(src.format(col=1), tmp_path, "kernel"), "cuda -arch=sm_80")
    assert caret_line(str(e.value)).startswith('T.ptx["cp.async.ca.shared.global"](s[lane, 1]')
    tirx.compile(define(src.format(col=4), tmp_path, "kernel"), "cuda -arch=sm_80")


@pytest.mark.gpu
def test_copy_runs_on_the_gpu(tmp_path):
    import torch

    exe = tirx.compile(copy_kernel(tmp_path, params="chunk_bytes=16, src_size=8"), "cuda")
    a = torch.arange(256, dtype=torch.float16, device="cuda").reshape(32, 8)
    out = torch.full_like(a, -1)
    exe(a, out)
    torch.cuda.synchronize()
    want = a.clone()
    want[:, 4:] = 0  # src_size=8: the last 8 bytes of each chunk are zero-filled
    assert torch.equal(out, want)


# ----------------------------------------------------------------- messages of the simulator

_LANDED = """
@T.function
def kernel(A: T.Tensor((64, 8), "float16"), Out: T.Tensor((64, 8), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    s = T.alloc_shared((64, 8), "float16", align=16)
    T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], s[tid, 0:8], A[tid, 0:8], scope="thread", chunk_bytes=16)
{middle}
    for j in range(8):
        Out[tid, j] = s[63 - tid, j]
"""


def _line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def _sim_fault(tmp_path, source: str, block: int = 64):
    k = define(source, tmp_path, "kernel")
    a = np.arange(block * 8, dtype=np.float16).reshape(block, 8)
    with pytest.raises(SimulationError) as e:
        tirx.compile(k, "sim")(a, np.zeros_like(a))
    return e.value, PRELUDE + textwrap.dedent(source)


def test_a_barrier_before_the_wait_is_named_and_moved_after_it(tmp_path):
    """cp.async, commit, cta_sync, wait_group(0), then another thread's row: the bytes count as
    written at the wait, so the race names the wait, and the hint the barrier before it."""
    middle = (
        '    T.ptx["cp.async.commit_group"]()\n    T.cuda.cta_sync()\n'
        '    T.ptx["cp.async.wait_group"](0)'
    )
    err, text = _sim_fault(tmp_path, _LANDED.format(middle=middle))
    copy, sync = _line_of(text, "tile.apply"), _line_of(text, "cta_sync")
    wait, read = _line_of(text, "wait_group"), _line_of(text, "Out[tid, j]")
    assert (
        f"wrote at line {copy} (its cp.async, whose bytes count as written at its wait at "
        f"line {wait}), with no barrier between that wait and line {read}" in err.message
    )
    assert f"the barrier at line {sync} comes before the wait at line {wait}" in err.hint
    assert f"move the barrier after the wait (between line {wait} and line {read})" in err.hint
    assert f"between line {copy} and line {read}" not in err.hint
    # no barrier at all: the hint puts one after the wait, not after the copy
    middle = '    T.ptx["cp.async.commit_group"]()\n    T.ptx["cp.async.wait_group"](0)'
    err, text = _sim_fault(tmp_path, _LANDED.format(middle=middle))
    wait, read = _line_of(text, "wait_group"), _line_of(text, "Out[tid, j]")
    assert f"between line {wait} and line {read}" in err.hint, err.hint
    # the barrier after the wait: no race
    middle += "\n    T.cuda.cta_sync()"
    k = define(_LANDED.format(middle=middle), tmp_path, "kernel")
    a = np.arange(64 * 8, dtype=np.float16).reshape(64, 8)
    out = np.zeros_like(a)
    tirx.compile(k, "sim")(a, out)
    assert np.array_equal(out, a[::-1])


def test_a_copy_never_committed_says_to_commit_it(tmp_path):
    middle = '    T.ptx["cp.async.wait_group"](0)'
    err, text = _sim_fault(tmp_path, _LANDED.format(middle=middle))
    copy = _line_of(text, "tile.apply")
    assert "it was never committed to a group, so no wait_group covers it" in err.message
    assert err.hint.startswith(
        f'commit it: T.ptx["cp.async.commit_group"]() after the copy at line {copy}'
    ), err.hint
    assert "covering its commit group" not in err.hint
    # a committed copy read before its wait keeps the wait_group hint
    middle = '    T.ptx["cp.async.commit_group"]()'
    err, _ = _sim_fault(tmp_path, _LANDED.format(middle=middle))
    assert "never committed" not in err.message and "covering its commit group" in err.hint


def test_a_wait_group_that_leaves_the_copy_pending_is_named_with_the_count_that_covers_it(tmp_path):
    """Two groups committed (the copy's, then an empty one) and wait_group(2): the copy's group
    is one of the two newest left pending. The hint names that wait and wait_group(1); with it
    the read is ordered (the barrier after the wait)."""
    middle = (
        '    T.ptx["cp.async.commit_group"]()\n    T.ptx["cp.async.commit_group"]()\n'
        '    T.ptx["cp.async.wait_group"]({n})\n    T.cuda.cta_sync()'
    )
    err, text = _sim_fault(tmp_path, _LANDED.format(middle=middle.format(n=2)))
    wait = _line_of(text, "wait_group")
    assert err.hint.startswith(
        f'the T.ptx["cp.async.wait_group"](2) at line {wait} leaves the 2 newest groups of '
        "thread 63 (warp 1, lane 31) pending, and this copy's group is one of them (1 committed "
        "after it): wait_group(1) there covers it, then T.cuda.cta_sync()"
    ), err.hint
    k = define(_LANDED.format(middle=middle.format(n=1)), tmp_path, "kernel")
    a = np.arange(64 * 8, dtype=np.float16).reshape(64, 8)
    out = np.zeros_like(a)
    tirx.compile(k, "sim")(a, out)
    assert np.array_equal(out, a[::-1])
