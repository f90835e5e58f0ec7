"""The mbarrier family as tirx/isa forms (tirx/isa/mbarrier.py): the forms and their archs,
the refusals of spellings tirx does not support (with the nearest supported form), the raw
calls' checks (each fires on a kernel built to break it, at the user's line, and stays silent
on its twin), the lowered operands, and the generated CUDA of every form compiled by NVRTC."""

from __future__ import annotations

import re

import pytest

import tirx
from tirx import isa
from tirx.errors import ContractError, TirxError
from tirx.ir import nodes as ir
from tirx.isa import Family, registry

from .helpers import caret_line, define

KERNEL = """
@T.function
def kernel(A: T.Tensor((64,), "float32"), Out: T.Tensor((64,), "float32"), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.linear_thread_id()
    bars = T.alloc_shared((4,), "uint64"{align})
    other = T.alloc_shared((4,), "float32")
    s = T.alloc_shared((64,), "float32")
    done = T.alloc_local((2,), "uint32")
    loc = T.alloc_local((1,), "uint64")
    if tid == 0:
        T.ptx["{init}"]({bar}, {count})
    T.cuda.cta_sync()
    s[tid] = A[tid]
    T.ptx["cp.async.ca.shared.global"](s[tid], A[tid], 4)
    T.ptx["{cp_arrive}"](bars[1])
    T.ptx["{arrive}"]({arrive_ops})
    T.ptx["{wait}"]({wait_ops})
    T.ptx["mbarrier.test_wait.parity.shared::cta.b64"]({done}, bars[0], 0)
    T.ptx["{test}"](done[0], bars[0], {parity})
    Out[tid] = s[tid] + T.float32(done[0])
"""

GOOD = dict(
    align="",
    init="mbarrier.init.shared::cta.b64",
    bar="bars[0]",
    count="64",
    cp_arrive="cp.async.mbarrier.arrive.shared::cta.b64",
    arrive="mbarrier.arrive.shared::cta.b64",
    arrive_ops="bars[0]",
    wait="mbarrier.try_wait.parity.shared::cta.b64",
    wait_ops="bars[0], 0",
    done="done[0]",
    test="mbarrier.test_wait.parity.shared::cta.b64",
    parity="n % 2",
)


def kernel(tmp_path, **changes):
    return define(KERNEL.format(**{**GOOD, **changes}), tmp_path, "kernel")


def refused(tmp_path, target="sim", **changes) -> str:
    fn = kernel(tmp_path, **changes)
    with pytest.raises(TirxError) as e:
        tirx.compile(fn, target)
    return str(e.value)


# ------------------------------------------------------------------------------ forms

FORMS_80 = [
    "mbarrier.init.shared::cta.b64",
    "mbarrier.arrive.shared::cta.b64",
    "mbarrier.test_wait.parity.shared::cta.b64",
    "mbarrier.inval.shared::cta.b64",
    "cp.async.mbarrier.arrive.shared::cta.b64",
    "cp.async.mbarrier.arrive.noinc.shared::cta.b64",
]
FORMS_90 = [
    "mbarrier.arrive.release.cta.shared::cta.b64",
    "mbarrier.arrive.expect_tx.shared::cta.b64",
    "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64",
    "mbarrier.expect_tx.shared::cta.b64",
    "mbarrier.expect_tx.relaxed.cta.shared::cta.b64",
    "mbarrier.try_wait.parity.shared::cta.b64",
    "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64",
    "mbarrier.test_wait.parity.acquire.cta.shared::cta.b64",
    "fence.mbarrier_init.release.cluster",
]


FORMS_CLUSTER = [
    "mbarrier.arrive.release.cluster.shared::cluster.b64",
    "mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64",
    "mbarrier.arrive.shared::cluster.b64",
    "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
]


def test_the_forms_and_their_archs():
    forms = isa.supported_forms()
    for text in FORMS_80 + FORMS_90:
        assert text in forms
        assert tirx.instruction_contract(text).min_arch == (80 if text in FORMS_80 else 90)
        assert text.replace("shared::cta", "shared") in forms  # .shared means ::cta
    assert registry.family_of_text(FORMS_80[4]).family is Family.CP_ASYNC_MBARRIER
    assert registry.family_of_text(FORMS_90[-1]).family is Family.FENCE_MBARRIER_INIT
    mine = [t for t in forms if "mbarrier" in t and not t.startswith("cp.async.bulk.tensor")]
    # 29 of one block, and 16 of clusters: the arrives on a peer block's barrier
    # (.shared::cluster, sm_90) and .release/.relaxed/.acquire at cluster scope
    clusters = [t for t in mine if "cluster" in t and not t.startswith("fence")]
    assert len(mine) == 29 + 16 and len(clusters) == 16
    for text in FORMS_CLUSTER:
        assert text in clusters and tirx.instruction_contract(text).min_arch == 90


@pytest.mark.parametrize(
    "text, nearest",
    [
        ("mbarrier.arrive.b64", "mbarrier.arrive.shared::cta.b64"),
        ("mbarrier.try_wait.shared::cta.b64", "mbarrier.try_wait.parity.shared::cta.b64"),
        ("mbarrier.init.shared::cluster.b64", "mbarrier.init.shared::cta.b64"),
        ("mbarrier.arrive.acquire.cluster.shared::cta.b64", "mbarrier.arrive.shared::cta.b64"),
        ("mbarrier.arrive.release.shared::cta.b64", "mbarrier.arrive.shared::cta.b64"),
        ("mbarrier.arrive_drop.shared::cta.b64", "mbarrier.arrive.shared::cta.b64"),
        ("mbarrier.pending_count.b64", "mbarrier.arrive.shared::cta.b64"),
        ("cp.async.mbarrier.arrive.b64", "cp.async.mbarrier.arrive.shared::cta.b64"),
    ],
)
def test_unsupported_spellings_name_the_nearest_form(text, nearest):
    with pytest.raises(ContractError) as e:
        isa.lookup(text)
    assert nearest in str(e.value)


def test_an_sm_90_form_on_sm_80_names_the_arch(tmp_path):
    msg = refused(tmp_path, "cuda -arch=sm_80")
    assert "needs sm_90 or newer; the target is sm_80" in msg
    assert caret_line(msg).startswith('T.ptx["mbarrier.try_wait')
    # the twin: the sm_80 forms only (test_wait as the waiting form)
    ok = kernel(tmp_path, wait="mbarrier.test_wait.parity.shared::cta.b64")
    exe = tirx.compile(ok, "cuda -arch=sm_80")
    assert "mbarrier.test_wait.parity.shared::cta.b64" in exe.ptx
    assert "cp.async.mbarrier.arrive.shared::cta.b64" in exe.ptx and exe.cubin


# ----------------------------------------------------------------------------- checks


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(bar="other[0]"), "the barrier must be an 8-byte element, got float32"),
        (dict(bar="loc[0]"), "the barrier must be an element of a shared tensor"),
        (dict(bar="A[0]"), "the barrier must be an element of a shared tensor"),
        (dict(align=", align=4"), "an mbarrier must be 8-byte aligned"),
        (dict(count="0"), "count is 0, outside 1..1048575"),
        (dict(count="1048576"), "count is 1048576, outside 1..1048575"),
        (dict(count="T.int32(A[0])"), "not read from a tensor"),
        (dict(count="2.5"), "must be an integer"),
        (dict(arrive_ops="bars[0], 0"), "count is 0, outside 1..1048575"),
        (
            dict(arrive="mbarrier.arrive.expect_tx.shared::cta.b64", arrive_ops="bars[0], 1 << 20"),
            "tx_count is 1048576, outside 0..1048575",
        ),
        (dict(parity="2"), "parity is 2, outside 0..1"),
        (dict(done="s[0]"), "the result must be an element of a local uint32 tensor"),
        (dict(done="done[n % 2]"), "the result needs a compile-time index"),
        (dict(arrive_ops="bars[0], 1, 2"), "takes 1 or 2 operands"),
        (dict(wait_ops="bars[0]"), "takes 2 or 3 operands"),
        (dict(init="mbarrier.init.shared::cluster.b64"), "takes arrives only in tirx"),
    ],
)
def test_each_check_fires_at_the_users_line(tmp_path, change, message):
    msg = refused(tmp_path, **change)
    assert message in msg
    assert "hint:" in msg or "outside" in msg or "index" in msg
    key = next(iter(change.values())).split(",")[0]
    if not key.startswith(", align"):
        assert key.strip() in caret_line(msg) or "T.ptx" in caret_line(msg)


def test_the_twins_compile(tmp_path):
    """The kernel the checks break, as it is, and with run-time counts (not checked)."""
    tirx.compile(kernel(tmp_path), "sim")
    tirx.compile(kernel(tmp_path, count="n + 1", arrive_ops="bars[0], n"), "cuda -arch=sm_90")
    expect = "mbarrier.arrive.expect_tx.shared::cta.b64"
    tirx.compile(kernel(tmp_path, arrive=expect, arrive_ops="bars[0], 1048575"), "sim")


# ------------------------------------------------------------------------ CUDA text


def test_cuda_text_of_every_form(tmp_path):
    body = "\n".join(
        [
            '    T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 32)',
            '    T.ptx["fence.mbarrier_init.release.cluster"]()',
            '    T.ptx["mbarrier.arrive.shared::cta.b64"](bars[0])',
            '    T.ptx["mbarrier.arrive.release.cta.shared::cta.b64"](bars[0], 2)',
            '    T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 128)',
            '    T.ptx["mbarrier.expect_tx.relaxed.cta.shared::cta.b64"](bars[1], 64)',
            '    T.ptx["mbarrier.try_wait.parity.acquire.cta.shared::cta.b64"](done[0], bars[0], 1)',
            '    T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](bars[0], 0)',
            '    T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](bars[1], 0)',
            '    T.ptx["mbarrier.test_wait.parity.shared::cta.b64"](done[0], bars[0], 0)',
            '    T.ptx["cp.async.mbarrier.arrive.noinc.shared::cta.b64"](bars[1])',
            '    T.ptx["mbarrier.inval.shared::cta.b64"](bars[1])',
        ]
    )
    src = (
        "@T.function\n"
        'def k(Out: T.Tensor((32,), "uint32")):\n'
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))\n"
        '    bars = T.alloc_shared((2,), "uint64")\n'
        '    done = T.alloc_local((1,), "uint32")\n'
        f"{body}\n"
        "    Out[T.cuda.lane_id()] = done[0]\n"
    )
    exe = tirx.compile(define(src, tmp_path, "k"), "cuda -arch=sm_90")
    asm = [ln.strip() for ln in exe.source.splitlines() if "asm volatile" in ln]
    bar0 = r'"r"\(\(unsigned int\)\(\(tirx_smem_addr \+ 0u[^"]*\)\)\)'
    expect = [
        r'"mbarrier\.init\.shared::cta\.b64 \[%0\], %1;" : : ' + bar0 + r', "r"\(32u\)',
        r'"fence\.mbarrier_init\.release\.cluster;" : : ',
        r'"mbarrier\.arrive\.shared::cta\.b64 _, \[%0\];" : : ' + bar0,
        r'"mbarrier\.arrive\.release\.cta\.shared::cta\.b64 _, \[%0\], %1;"',
        r'"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%0\], %1;"',
        r'"mbarrier\.expect_tx\.relaxed\.cta\.shared::cta\.b64 \[%0\], %1;"',
        r'"\{ \.reg \.pred tirx_p; mbarrier\.try_wait\.parity\.acquire\.cta\.shared::cta\.b64 '
        r'tirx_p, \[%1\], %2; selp\.u32 %0, 1, 0, tirx_p; \}" : "=r"\(done\[0\]\)',
        r"mbarrier\.try_wait\.parity\.shared::cta\.b64 tirx_p.*\"=r\"\(tirx_mbar_done\)",
        r"mbarrier\.try_wait\.parity\.shared::cta\.b64 tirx_p.*\"=r\"\(tirx_mbar_done\)",
        r'mbarrier\.test_wait\.parity\.shared::cta\.b64 tirx_p.*"=r"\(done\[0\]\)',
        r'"cp\.async\.mbarrier\.arrive\.noinc\.shared::cta\.b64 \[%0\];"',
        r'"mbarrier\.inval\.shared::cta\.b64 \[%0\];"',
    ]
    assert len(asm) == len(expect)
    for line, pattern in zip(asm, expect):
        assert re.search(pattern, line), (line, pattern)
        assert line.endswith(': "memory");'), line
    # the waiting form is a C loop, twice without duplicate PTX labels
    assert exe.source.count("} while (!tirx_mbar_done);") == 2
    ptx = exe.ptx
    assert ptx.count("mbarrier.try_wait.parity.shared::cta.b64") == 2
    for text in ("mbarrier.init.shared::cta.b64", "mbarrier.arrive.shared::cta.b64 _,"):
        assert text in ptx
    assert "cp.async.mbarrier.arrive.noinc.shared::cta.b64" in ptx
    assert exe.cubin  # ptxas (inside NVRTC) took the inline PTX


def test_the_lowered_operands(tmp_path):
    fn = tirx.compile(kernel(tmp_path), "sim").lowered
    calls = {}
    todo = [fn.body]
    while todo:
        s = todo.pop()
        if isinstance(s, ir.PtxCall) and "mbarrier" in s.instruction:
            calls.setdefault(s.instruction, s)
        for attr in ("stmts", "then_body", "else_body", "body"):
            v = getattr(s, attr, None)
            if isinstance(v, tuple):
                todo.extend(v)
            elif isinstance(v, ir.Stmt):
                todo.append(v)
    init = calls["mbarrier.init.shared::cta.b64"]
    assert isinstance(init.operands[0].address, ir.SharedAddress)
    assert init.operands[0].address.buffer.name == "bars"
    assert init.operands[1].value.dtype.name == "uint32"
    test = calls["mbarrier.test_wait.parity.shared::cta.b64"]
    assert isinstance(test.operands[0], ir.RegVector) and test.operands[0].is_output
    wait = calls["mbarrier.try_wait.parity.shared::cta.b64"]
    assert [type(o) for o in wait.operands] == [ir.AddressOperand, ir.ScalarOperand]


def test_an_arrive_count_needs_sm_90_at_its_operand(tmp_path):
    """The count operand of mbarrier.arrive is an sm_90 addition (the form itself is sm_80):
    refused on sm_80 at the count, with a hint; the count-less arrive and the sm_90 twin
    compile."""
    sm80 = dict(wait="mbarrier.test_wait.parity.shared::cta.b64", wait_ops="done[1], bars[0], 0")
    msg = refused(tmp_path, target="cuda -arch=sm_80", arrive_ops="bars[0], 2", **sm80)
    assert "with a count operand needs sm_90 or newer; the target is sm_80" in msg
    assert "hint:" in msg and "2" in caret_line(msg)
    tirx.compile(kernel(tmp_path, arrive_ops="bars[0], 2", **sm80), "cuda -arch=sm_90")
    tirx.compile(kernel(tmp_path, **sm80), "cuda -arch=sm_80")
