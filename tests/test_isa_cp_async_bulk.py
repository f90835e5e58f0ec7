"""cp.async.bulk (the shared-to-global bulk store) and fence.proxy.async as tirx/isa families:
their forms (the PTX ISA's syntax lines, written out here by hand), the longest-mnemonic lookup
that keeps them out of cp.async, the refusals of the spellings tirx does not support, the raw
calls' checks (each fires on a kernel built to break it and stays silent on its twin), the
lowered IR, and the generated CUDA compiled by NVRTC for sm_90."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tirx
from tirx import isa, sim
from tirx.errors import ContractError, TirxError
from tirx.ir import nodes as ir
from tirx.isa import Family, Role, registry
from tirx.layout import ComposeLayout, S, TileLayout

from .helpers import caret_line, define

COPY = "cp.async.bulk.global.shared::cta.bulk_group"
BULK_FORMS = [
    COPY,
    "cp.async.bulk.commit_group",
    "cp.async.bulk.wait_group",
    "cp.async.bulk.wait_group.read",
]
FENCES = ["fence.proxy.async", "fence.proxy.async.global", "fence.proxy.async.shared::cta"]

KERNEL = """
@T.function
def kernel(A: T.Tensor((4, 64), "float32"), Out: T.Tensor((4, 64), "float32"), k: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.linear_thread_id()
    s = T.alloc_shared((4, 64), "float32")
    for j in range(2):
        s[tid // 32, (tid % 32) * 2 + j] = A[tid // 32, (tid % 32) * 2 + j]
    T.ptx["{fence}"]()
    T.cuda.cta_sync()
    if tid < 4:
        T.ptx["{copy}"]({dst}, {src}, {size})
        T.ptx["cp.async.bulk.commit_group"]({commit})
        T.ptx["{wait}"]({n})
    T.ptx["cp.async.bulk.wait_group"](0)
"""

GOOD = dict(
    fence="fence.proxy.async.shared::cta",
    copy=COPY,
    dst="Out[tid, 0]",
    src="s[tid, 0]",
    size="256",
    commit="",
    wait="cp.async.bulk.wait_group.read",
    n="0",
)


def kernel(tmp_path, **changes):
    return define(KERNEL.format(**{**GOOD, **changes}), tmp_path, "kernel")


def bulk_calls(lowered):
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
        elif isinstance(s, ir.PtxCall) and s.instruction.startswith(("cp.async.bulk", "fence")):
            out.append(s)

    walk(lowered.body)
    return out


# ----------------------------------------------------------------------------- the forms


def test_the_forms_are_the_isa_syntax_lines():
    forms = isa.supported_forms()
    bulk = [t for t in forms if tirx.instruction_contract(t).family is Family.CP_ASYNC_BULK]
    fences = [t for t in forms if tirx.instruction_contract(t).family is Family.FENCE_PROXY]
    assert sorted(bulk) == sorted(BULK_FORMS)
    assert sorted(fences) == sorted(FENCES)
    for text in bulk + fences:
        assert tirx.instruction_contract(text).min_arch == 90


def test_bulk_texts_do_not_fall_into_the_cp_async_family():
    for text in BULK_FORMS:
        assert registry.family_of_text(text).family is Family.CP_ASYNC_BULK
        assert tirx.instruction_contract(text).family is Family.CP_ASYNC_BULK
    # and cp.async's own texts stay cp.async's
    assert registry.family_of_text("cp.async.wait_group").family is Family.CP_ASYNC
    # a broken bulk text is explained by the bulk family, not by cp.async's slots
    with pytest.raises(ContractError) as info:
        tirx.instruction_contract("cp.async.bulk.global.shared::cta")
    assert ".bulk_group" in info.value.message
    assert "expected .ca, .cg" not in info.value.message


def test_the_copy_declares_its_operands():
    c = tirx.instruction_contract(COPY)
    assert [(o.name, o.role) for o in c.operands] == [
        ("dst", Role.GLOBAL_BLOCK_OUT),
        ("src", Role.SHARED_BLOCK_IN),
        ("size", Role.SCALAR_IN),
    ]
    assert [o.name for o in c.tile_operands] == ["dst", "src"]
    assert registry.spec_of(Family.CP_ASYNC_BULK).exec_scope is ir.ExecScope.THREAD
    for text in ("cp.async.bulk.wait_group", "cp.async.bulk.wait_group.read"):
        assert [o.role for o in tirx.instruction_contract(text).operands] == [Role.IMMEDIATE]
    assert tirx.instruction_contract("cp.async.bulk.commit_group").operands == ()


@pytest.mark.parametrize(
    "text, fragment",
    [
        (COPY + ".L2::cache_hint", ".L2::cache_hint is not supported"),
        (COPY + ".cp_mask", ".cp_mask is not supported"),
        ("cp.async.bulk.shared::cluster.shared::cta.bulk_group", "only the shared-to-global"),
        (
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
            "only the shared-to-global",
        ),
        ("cp.async.bulk.commit_group.read", "only cp.async.bulk.wait_group has a .read"),
        ("cp.async.bulk.wait_group.bulk_group", "takes no modifiers"),
        ("fence.proxy.alias", "fence.proxy.alias is not supported"),
        ("fence.proxy.async.shared::cluster", "not supported by tirx (it has no clusters)"),
    ],
)
def test_spellings_tirx_does_not_support_are_refused_with_the_nearest_form(text, fragment):
    with pytest.raises(ContractError) as info:
        tirx.instruction_contract(text)
    assert fragment in info.value.message
    supported = FENCES if text.startswith("fence") else BULK_FORMS
    assert any(form in info.value.message + info.value.hint for form in supported)


def test_the_docs_table_lists_the_forms():
    from tirx.isa.docs import instructions_markdown

    md = instructions_markdown()
    for text in BULK_FORMS + FENCES:
        assert f"| `{text}` |" in md
    assert "dst: global block" in md and "src: shared block" in md


# ------------------------------------------------------------ lowering and generated code


def test_the_raw_calls_lower_to_the_agreed_ir(tmp_path):
    exe = tirx.compile(kernel(tmp_path), "sim")
    fence, copy, commit, wait, wait_all = bulk_calls(exe.lowered)
    assert (fence.instruction, fence.operands) == ("fence.proxy.async.shared::cta", ())
    dst, src, size = copy.operands
    assert copy.instruction == COPY
    assert isinstance(dst.address, ir.GlobalAddress) and dst.address.buffer.name == "Out"
    assert isinstance(src.address, ir.SharedAddress) and src.address.buffer.name == "s"
    assert isinstance(size, ir.ScalarOperand) and size.value.dtype.name == "uint32"
    assert (commit.instruction, commit.operands) == ("cp.async.bulk.commit_group", ())
    assert wait.instruction == "cp.async.bulk.wait_group.read" and wait.operands[0].value == 0
    assert wait_all.instruction == "cp.async.bulk.wait_group"


def test_generated_cuda_compiles_with_nvrtc_for_sm_90(tmp_path):
    exe = tirx.compile(kernel(tmp_path, size="k * 16", n="1"), "cuda -arch=sm_90")
    lines = [ln.strip() for ln in exe.source.splitlines() if "asm" in ln and "proxy" in ln]
    assert lines == ['asm volatile("fence.proxy.async.shared::cta;" :  :  : "memory");']
    (copy,) = [ln.strip() for ln in exe.source.splitlines() if "bulk_group [" in ln]
    assert copy.startswith(f'asm volatile("{COPY} [%0], [%1], %2;" :  : "l"(')
    assert '"r"((unsigned int)((tirx_smem_addr + ' in copy  # the 32-bit shared address
    assert copy.endswith(': "memory");')
    assert 'asm volatile("cp.async.bulk.commit_group;" :  :  : "memory");' in exe.source
    assert 'asm volatile("cp.async.bulk.wait_group.read 1;" :  :  : "memory");' in exe.source
    ptx = exe.ptx
    assert re.search(
        r"cp\.async\.bulk\.global\.shared::cta\.bulk_group \[%rd\d+\], \[%r\d+\], %r\d+;", ptx
    )
    for text in ("fence.proxy.async.shared::cta;", "cp.async.bulk.commit_group;"):
        assert text in ptx
    assert "cp.async.bulk.wait_group.read 1;" in ptx and "cp.async.bulk.wait_group 0;" in ptx


@pytest.mark.parametrize("fence", FENCES)
def test_every_fence_spelling_compiles(tmp_path, fence):
    exe = tirx.compile(kernel(tmp_path, fence=fence), "cuda -arch=sm_90")
    assert f"\t{fence};" in exe.ptx


def test_sm_80_is_refused_naming_the_arch(tmp_path):
    with pytest.raises(ContractError) as info:
        tirx.compile(kernel(tmp_path), "cuda -arch=sm_80")
    assert "needs sm_90 or newer; the target is sm_80" in info.value.message
    assert caret_line(str(info.value)).startswith('T.ptx["fence.proxy.async.shared::cta"]')
    with pytest.raises(ContractError) as info:
        tirx.compile(kernel(tmp_path, fence="fence.proxy.async"), "cuda -arch=sm_80")
    assert "sm_90" in info.value.hint


# ------------------------------------------------------------------------ contract checks


@pytest.mark.parametrize(
    "change, fragment, where",
    [
        (
            dict(dst="s[tid, 0]", src="Out[tid, 0]"),
            "operand dst must be an element of a global",
            "dst",
        ),
        (dict(src="A[tid, 0]"), "operand src must be an element of a shared", "src"),
        (dict(dst="k"), "operand dst must be an element of a global tensor", "dst"),
        (dict(dst="Out[tid, 1]"), "operand dst starts 4 bytes past a multiple of 16", "dst"),
        (dict(src="s[tid, 2]"), "operand src starts 8 bytes past a multiple of 16", "src"),
        (dict(size="100"), "size must be a positive multiple of 16 bytes, got 100", "size"),
        (dict(size="0"), "size must be a positive multiple of 16 bytes, got 0", "size"),
        (dict(size="T.float32(256)"), "size must be an integer number of bytes", "size"),
        (dict(size="T.int32(A[0, 0])"), "not read from a tensor", "size"),
        (dict(src="s[3, 32]"), "covers bytes 896..1151 of 's', which holds 1024", "src"),
        (dict(dst="Out[3, 16]", size="512"), "covers bytes 832..1343 of 'Out'", "dst"),
        (dict(n="k"), "n must be a compile-time int", "n"),
        (dict(n="-1"), "n must be a non-negative int, got -1", "n"),
        (dict(commit="1"), "takes no operands, got 1", None),
    ],
)
def test_each_check_fires_at_its_operand(tmp_path, change, fragment, where):
    with pytest.raises(TirxError) as info:
        tirx.compile(kernel(tmp_path, **change), "sim")
    assert fragment in info.value.message
    assert info.value.hint or where is None
    line = caret_line(str(info.value))
    if where is not None:
        operand = {**GOOD, **change}[where]
        assert line == operand or operand in line


@pytest.mark.parametrize(
    "change",
    [
        dict(),
        dict(size="k * 16"),  # a run-time size is the simulator's (and the GPU's) to check
        dict(size="(tid + 1) * 16", dst="Out[0, 0]", src="s[0, 0]"),
        dict(dst="Out[tid, 4 * k]"),  # alignment unknown until run time
        dict(dst="Out[3, 0]", size="256", src="s[3, 0]"),  # the last row: just fits
        dict(n="3", wait="cp.async.bulk.wait_group"),
    ],
)
def test_the_corrected_twins_compile(tmp_path, change):
    tirx.compile(kernel(tmp_path, **change), "sim")


def test_wrong_operand_counts(tmp_path):
    with pytest.raises(ContractError, match="takes 3 operands"):
        tirx.compile(kernel(tmp_path, size="256, 16"), "sim")
    src = KERNEL.format(**GOOD).replace(
        'T.ptx["fence.proxy.async.shared::cta"]()', 'T.ptx["fence.proxy.async.shared::cta"](1)'
    )
    with pytest.raises(ContractError, match=r"takes no operands, got 1"):
        tirx.compile(define(src, tmp_path, "kernel"), "sim")
    src = KERNEL.format(**GOOD).replace(
        '"cp.async.bulk.wait_group"](0)', '"cp.async.bulk.wait_group"]()'
    )
    with pytest.raises(ContractError, match="takes one operand"):
        tirx.compile(define(src, tmp_path, "kernel"), "sim")


# ----------------------------------------------------------------------------- tile form

TILE = """
@T.function
def kernel(A: T.Tensor((16, 64), "float16"), Out: T.Tensor((16, 64), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.linear_thread_id()
    s = T.alloc_shared((16, 64), "float16", layout=layout)
    for q in range(32):
        i = tid + 32 * q
        s[i // 64, i % 64] = A[i // 64, i % 64]
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.cta_sync()
    if tid < 16:
        T.cuda.tile.apply(T.ptx["{instr}"], {dst}, {src}, scope="{scope}"{params})
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group"](0)
"""
PLAIN = TileLayout(S[16, 64])
SWIZZLE_128B = ComposeLayout(3, 3, 3, TileLayout(S[16, 64]))  # 16-byte units in 128-byte rows


def tile_kernel(tmp_path, layout=PLAIN, **changes):
    fields = dict(instr=COPY, dst="Out[tid, :]", src="s[tid, :]", scope="thread", params="")
    return define(TILE.format(**{**fields, **changes}), tmp_path, "kernel", layout=layout)


@pytest.mark.parametrize(
    "layout, dst, src, copies",
    [
        (PLAIN, "Out[tid, :]", "s[tid, :]", 1),  # one 128-byte row
        (PLAIN, "Out[tid, :].view(2, 32)", "s[tid, :].view(2, 32)", 2),  # repeats
        # through the swizzle, each 16-byte unit stays whole: one copy per unit
        (SWIZZLE_128B, "Out[tid, :].view(8, 8)", "s[tid, :].view(8, 8)", 8),
    ],
)
def test_tile_copies_lower_run_and_compile(tmp_path, layout, dst, src, copies):
    fn = tile_kernel(tmp_path, layout, dst=dst, src=src)
    exe = tirx.compile(fn, "sim")
    calls = [c for c in bulk_calls(exe.lowered) if c.instruction == COPY]
    assert len(calls) == copies
    assert {c.operands[2].value.value for c in calls} == {128 // copies}
    a = (np.arange(16 * 64) % 251).astype(np.float16).reshape(16, 64)
    out = np.zeros_like(a)
    sim.run(exe.lowered, [a, out])
    np.testing.assert_array_equal(out, a)
    ptx = tirx.compile(fn, "cuda -arch=sm_90").ptx
    assert ptx.count(COPY + " [") == copies


@pytest.mark.parametrize(
    "layout, changes, fragment, operand",
    [
        (SWIZZLE_128B, {}, "span several swizzle units of 16 bytes", "s[tid, :]"),
        (
            SWIZZLE_128B,
            dict(dst="Out[1, :]", src="s[1, :]"),
            "is not 128 contiguous bytes",
            "s[1, :]",
        ),
        (PLAIN, dict(src="s[tid, 0:32]"), "operand src's last axis holds 64 bytes", "s[tid, 0:32]"),
        (
            PLAIN,
            dict(dst="Out[tid, 0:60]", src="s[tid, 0:60]"),
            "a positive multiple of 16 bytes, got 120",
            None,
        ),
        (
            PLAIN,
            dict(dst="s[tid, :]", src="Out[tid, :]"),
            "operand dst must be in a global",
            "s[tid, :]",
        ),
        (
            PLAIN,
            dict(dst="Out[tid, 4:36]", src="s[tid, 0:32]"),
            "not a multiple of 16",
            "Out[tid, 4:36]",
        ),
        (
            PLAIN,
            dict(dst="Out[tid, :].view(2, 32)", src="s[tid, :].view(1, 64)"),
            "operand src's last axis holds 128 bytes",
            None,
        ),
        (PLAIN, dict(params=", chunk_bytes=16"), "unexpected parameters ['chunk_bytes']", None),
        (PLAIN, dict(scope="warp"), "scope='warp' is not supported", None),
        (PLAIN, dict(instr="cp.async.bulk.commit_group"), "takes 0 operands", None),
        (PLAIN, dict(instr="fence.proxy.async"), "takes 0 operands", None),
    ],
)
def test_tile_checks_fire(tmp_path, layout, changes, fragment, operand):
    with pytest.raises(TirxError) as info:
        tirx.compile(tile_kernel(tmp_path, layout, **changes), "sim")
    assert fragment in info.value.message
    if operand is not None:
        err = str(info.value).splitlines()
        caret = next(i for i, ln in enumerate(err) if ln.strip() and set(ln.strip()) == {"^"})
        start = err[caret].index("^")
        assert err[caret - 1][start:].startswith(operand)


def test_the_widgets_refuse_to_draw_the_bulk_families():
    from widgets.families import require_fragment

    for text in (COPY, "fence.proxy.async"):
        with pytest.raises(TirxError, match="has no register fragment to draw"):
            require_fragment(tirx.instruction_contract(text))


@pytest.mark.gpu
def test_swizzled_tile_copies_on_the_gpu_equal_the_simulator(tmp_path):
    import torch

    fn = tile_kernel(
        tmp_path, SWIZZLE_128B, dst="Out[tid, :].view(8, 8)", src="s[tid, :].view(8, 8)"
    )
    a = (np.arange(16 * 64) % 251).astype(np.float16).reshape(16, 64)
    out = np.zeros_like(a)
    sim.run(tirx.compile(fn, "sim").lowered, [a, out])
    exe = tirx.compile(fn, "cuda")
    gout = torch.zeros(16, 64, dtype=torch.float16, device="cuda")
    exe(torch.from_numpy(a).cuda(), gout)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(gout.cpu().numpy().view(np.uint16), out.view(np.uint16))
