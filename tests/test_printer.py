"""The printed script (``exe.script()``): what a kernel holds is printed, not dropped: a tile
operation's keyword arguments (a TMA copy's box, coordinates, swizzle and mbarrier), an
allocation's alignment and dynamic scope, and float constants Python cannot write as
literals (infinities); a kernel of plain tensors and such statements is printed as source
that parses back to the same kernel."""

from __future__ import annotations

import re

import tirx
from tests.helpers import define
from tirx.examples.gemm_wgmma import make_gemm_wgmma

KERNEL = """
@T.function
def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    t = T.cuda.thread_idx("x")
    s = T.alloc_shared((64,), "float32", align=1024, scope="shared.dyn")
    s[t] = A[t]
    T.cuda.cta_sync()
    if s[63 - t] > 0.5:
        B[t] = T.infinity(ty="float32")
    else:
        B[t] = -T.infinity(ty="float32")
"""


def _cuda(kernel) -> str:
    source = tirx.compile(kernel, target="cuda -arch=sm_90").source
    return re.sub(r'(#line \d+ )?"[^"]*\.py"', "FILE", source)  # the files' names and lines


def test_allocation_keywords_and_infinities_print_and_parse_back(tmp_path):
    kernel = define(KERNEL, tmp_path, "k")
    text = kernel.script()
    assert 'align=1024, scope="shared.dyn")' in text
    assert 'T.infinity(ty="float32")' in text and '(-T.infinity(ty="float32"))' in text
    again = tmp_path / "again"
    again.mkdir()
    printed = define(text, again, "k")
    assert printed.script() == text
    assert _cuda(printed) == _cuda(kernel)


def test_a_tile_operations_keyword_arguments_are_printed():
    text = make_gemm_wgmma(256, 256, 256).script()
    loads = [x for x in text.splitlines() if "tile.apply" in x and "cp.async.bulk.tensor" in x]
    assert len(loads) == 4  # the prologue's stages and the main loop's, for A and B
    for line in loads:  # each TMA load: its box, coordinates, swizzle and mbarrier
        assert re.search(r"box=\(\d+, 64\), coords=\(b[mn] \* \d+, .+ \* 64\), swizzle=3, "
                         r"mbar=buf\[.+\], scope=\"thread\"\)$", line), line  # fmt: skip
    allocations = [x for x in text.splitlines() if "T.alloc_shared" in x]
    assert sum('align=1024, scope="shared.dyn")' in x for x in allocations) == 2


def test_an_else_if_chain_prints_as_elif_and_parses_back(tmp_path):
    """A chain of 150 ``elif``s prints at one depth (nested ``else: if`` would indent once per
    link, past Python's limit of 100 levels) and parses back to the same kernel."""
    links = "".join(f"    elif t == {i}:\n        B[t] = A[t] * {i + 2}\n" for i in range(1, 150))
    source = f"""
@T.function
def k(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
    t = T.cuda.thread_idx("x")
    if t == 0:
        B[t] = A[t]
{links}    else:
        B[t] = 0
"""
    kernel = define(source, tmp_path, "k")
    text = kernel.script()
    assert text.count("\n    elif t == ") == 149 and "\n    else:\n" in text
    assert max(len(line) - len(line.lstrip()) for line in text.splitlines()) == 8
    again = tmp_path / "again"
    again.mkdir()
    printed = define(text, again, "k")
    assert printed.script() == text
    assert _cuda(printed) == _cuda(kernel)
