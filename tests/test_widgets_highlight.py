"""Token colouring of the code panes (widgets.highlight): Pygments for CUDA and Python, our
rules for PTX and SASS; one HTML line per input line, whatever the tokens span."""

from __future__ import annotations

import re

import pytest

from widgets.highlight import highlight, highlight_lines


def tokens(html_line: str) -> list[tuple[str, str]]:
    return re.findall(r'<span class="tk-(\w)">(.*?)</span>', html_line)


def test_cuda_is_read_a_pane_at_a_time():
    lines = ["", "/* a comment", "   over two lines */ int x = 0x1f;", '#line 3 "<cell>"', ""]
    out = highlight_lines(lines, "cuda")
    assert len(out) == len(lines) and out[0] == "" and out[-1] == ""
    assert ("c", "   over two lines */") in tokens(out[2])  # the comment's second line
    assert ("k", "int") in tokens(out[2]) and ("n", "0x1f") in tokens(out[2])
    assert {cls for cls, _ in tokens(out[3])} == {"p"}
    assert re.sub(r"<[^>]+>", "", out[2]) == "   over two lines */ int x = 0x1f;"


def test_cuda_keywords_strings_and_escaping():
    out = highlight('extern "C" __global__ void k(float* __restrict__ p) { // <x>', "cuda")
    found = tokens(out)
    assert ("k", "extern") in found and ("k", "__global__") in found and ("k", "void") in found
    assert ("s", "C") in found and ("c", "// &lt;x&gt;") in found
    assert "<x>" not in out


def test_python_lines():
    lines = ["@T.function", "def k(A):  # the kernel", '    s = "x"', "    for i in range(4):"]
    out = highlight_lines(lines, "python")
    cls, text = tokens(out[0])[0]  # the decorator (Pygments marks its first name)
    assert cls == "p" and text.startswith("@T")
    assert ("k", "def") in tokens(out[1]) and ("c", "# the kernel") in tokens(out[1])
    assert ("s", "x") in tokens(out[2])
    assert ("k", "for") in tokens(out[3]) and ("k", "range") in tokens(out[3])
    assert ("n", "4") in tokens(out[3])


@pytest.mark.parametrize(
    "line, want",
    [
        ("@%p1 bra $L__BB0_2;", ("k", "@%p1 bra")),  # a guarded instruction, one token
        (
            "\tcp.async.cg.shared.global.L2::128B [%r3], [%rd5], 16;",
            ("k", "\tcp.async.cg.shared.global.L2::128B"),
        ),  # fmt: skip
        ("\tmov.f32 %f1, 0f3F800000;", ("n", "0f3F800000")),  # a float literal, one token
        (
            "\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1}, {%r1}, {%r2}, {%f2};",
            ("r", "%f1"),
        ),  # fmt: skip
        ("\t.reg .b32 %r<5>;", ("p", "\t.reg")),
        ("// begin inline asm", ("c", "// begin inline asm")),
    ],
)
def test_ptx_by_our_rules(line, want):
    assert want in tokens(highlight(line, "ptx"))


def test_sass_by_our_rules():
    found = tokens(highlight("/*0070*/ HMMA.16816.F32 R4, R8, R12, RZ ;", "sass"))
    assert ("c", "/*0070*/") in found and ("k", "HMMA.16816.F32") in found
    assert ("r", "R4") in found and ("r", "RZ") in found


def test_an_unknown_language_is_refused():
    with pytest.raises(ValueError, match="no highlighting for 'rust'"):
        highlight("fn main() {}", "rust")
