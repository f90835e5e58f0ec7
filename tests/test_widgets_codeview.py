"""The panel's linked code view (widgets.codeview): line maps from ``#line``, ``.loc`` and
nvdisasm's line comments, highlighting, and the HTML that lights a Python line's code."""

from __future__ import annotations

import linecache
import re

import pytest

import tirx
from widgets import codeview as CV

CUDA = """\
extern "C" __global__ void k(float* out) {
#line 3 "<cell>"
  int lane = threadIdx.x;
#line 4 "<cell>"
  out[lane] = 2.0f * lane;
#line 9 "other.cu"
  return;
}"""
PTX = """\
.visible .entry k(
{
\t.loc\t1 3 3
\tmov.u32 \t%r1, %tid.x;
\t.loc\t1 4 3
\tcvt.rn.f32.u32 \t%f1, %r1;
\tst.global.f32 \t[%rd1], %f1;
\t.loc\t2 9 1
\tret;
}
\t.file\t1 "/tmp/work/<cell>"
\t.file\t2 "other.cu"
"""
SASS = """\
\t//## File "/tmp/work/<cell>", line 3
        /*0000*/                   S2R R0, SR_TID.X ;
\t//## File "<cell>", line 4
        /*0010*/                   I2F R3, R0 ;
        /*0020*/                   STG.E [R4.64], R3 ;
"""


def test_line_maps_follow_each_tools_line_info():
    cuda = CV.line_map(CUDA, "cuda", "<cell>")
    assert cuda.lines_of(3) == [2] and cuda.lines_of(4) == [4]
    assert cuda.origin[6] is None  # after a #line for another file
    ptx = CV.line_map(PTX, "ptx", "<cell>")  # .file names come at the end of PTX
    assert [ptx.lines[i].split()[0] for i in ptx.lines_of(4)] == ["cvt.rn.f32.u32", "st.global.f32"]
    assert ptx.lines_of(9) == []  # NVRTC made "<cell>" absolute: still the cell's lines
    assert not CV.same_file("/tmp/other<cell>", "<cell>")
    sass = CV.line_map(SASS, "sass", "<cell>")
    assert len(sass.lines_of(4)) == 2 and "S2R" in sass.lines[sass.lines_of(3)[0]]


def test_highlight_escapes_and_marks_tokens():
    out = CV.highlight('  out[lane] = 2.0f * lane; // <x> "s"', "cuda")
    assert '<span class="tk-n">2.0f</span>' in out and "&lt;x&gt;" in out
    assert '<span class="tk-c">' in out
    assert '<span class="tk-r">%r1</span>' in CV.highlight("mov.u32 %r1, %tid.x;", "ptx")
    assert '<span class="tk-k">S2R</span>' in CV.highlight("/*0000*/ S2R R0, SR_TID.X ;", "sass")


def test_html_links_python_lines_to_every_pane():
    linecache.cache["<cell>"] = (0, None, ["@T.function\n", "def k(out):\n",
                                           "    lane = T.lane()\n", "    out[lane] = 2 * lane\n"],
                                 "<cell>")  # fmt: skip
    view = CV.code_view({"cuda": CUDA, "ptx": PTX, "sass": SASS}, "<cell>")
    assert view.linked_lines() == [3, 4]
    assert view.python.origin[0] == 1  # back to the decorator
    lit = view.lines_for(4)
    assert len(lit["cuda"]) == 1 and len(lit["ptx"]) == 2 and len(lit["sass"]) == 2
    page = view.html()
    uid = re.search(r'class="tirx-code (tirx-code\d+)"', page).group(1)
    assert f"#{uid}-p4:checked~.tirx-panes .o4" in page  # choosing line 4 lights its code
    assert f'<label class="py-line o4 mapped" data-line="4" for="{uid}-p4">' in page
    assert page.count('class="cl o4"') == 5  # 1 CUDA + 2 PTX + 2 SASS lines
    assert page.count("tirx-copy") >= 3 + 1  # a copy button per pane (and its CSS rule)


def test_file_names_show_as_the_kernel_gave_them(monkeypatch, tmp_path):
    """NVRTC writes a relative name (a cell's) as an absolute one against its working
    directory; the panes show it as given, so no machine's directories end up on the page."""
    monkeypatch.chdir(tmp_path)
    here = str(tmp_path)
    ptx = PTX.replace("/tmp/work/<cell>", f"{here}/<cell>")
    sass = SASS.replace("/tmp/work/<cell>", f"{here}/<cell>")
    view = CV.code_view({"cuda": CUDA, "ptx": ptx, "sass": sass}, "<cell>")
    assert len(view.lines_for(4)["ptx"]) == 2  # still linked
    page = view.html()
    assert here not in page
    assert "&quot;&lt;cell&gt;&quot;" in page  # the name as the kernel gave it


def test_no_line_info_is_said():
    view = CV.code_view({"cuda": CUDA, "ptx": "mov.u32 %r1, %tid.x;\n"}, "<cell>")
    assert view.notes == {"ptx": "no line info in this build"}
    assert "no line info in this build" in view.html()


def _seed_exe():
    from tirx.examples import warp_matmul

    kernel = next(v for v in vars(warp_matmul).values() if isinstance(v, tirx.Kernel))
    try:
        return tirx.compile(kernel, "cuda -arch=sm_90")
    except tirx.CompileError as e:  # NVRTC missing on this machine
        pytest.skip(f"no NVRTC: {e.message}")


def test_seed_kernel_python_lines_reach_ptx_and_sass(monkeypatch):
    exe = _seed_exe()
    assert "--generate-line-info" in exe.nvrtc.options and ".loc" in exe.ptx  # the normal build

    def no_second_compile(*args):
        raise AssertionError("the code view compiled the kernel again")

    monkeypatch.setattr(CV, "_nvrtc_with_lines", no_second_compile)
    texts = CV.with_line_info(exe)
    assert CV.with_line_info(exe) == texts  # shown again: from the in-process memo
    assert texts["ptx"] == exe.ptx  # the build's own PTX
    view = CV.code_view(texts)
    assert view.source_file.endswith("warp_matmul.py")
    mma_line = next(i + 1 for i, line in enumerate(linecache.getlines(view.source_file))
                    if 'T.ptx["mma.sync' in line)  # fmt: skip
    lit = view.lines_for(mma_line - 1)  # T.cuda.tile.apply( ... the mma, one statement
    lit = {k: v for k, v in lit.items() if v} or view.lines_for(mma_line)
    assert any("mma.sync.aligned.m16n8k16" in line for line in lit.get("cuda", []) + lit["ptx"])
    if texts.get("sass") and "//##" in texts["sass"]:
        assert any("HMMA" in line for line in lit["sass"])


def test_a_build_without_line_info_is_rebuilt_once_with_it():
    from types import SimpleNamespace

    from tirx.backend.cuda.nvrtc import compile_cuda

    exe = _seed_exe()
    plain = tuple(o for o in exe.nvrtc.options if o != "--generate-line-info")
    try:
        out = compile_cuda(exe.source, arch="sm_90", command=plain)
    except tirx.CompileError as e:
        pytest.skip(f"no NVRTC: {e.message}")
    assert ".loc" not in out.ptx
    old = SimpleNamespace(source=exe.source, ptx=out.ptx, cubin=out.cubin, nvrtc=out, sass=None)
    texts = CV.with_line_info(old)
    assert ".loc" in texts["ptx"] and (exe.source, plain) in CV._LINE_INFO


def test_line_info_leaves_the_machine_code_as_it_is():
    """--generate-line-info adds the line table and PTX .loc: the instructions the GPU runs
    (SASS without -g, the line comments) are the same."""
    from tirx.backend.cuda.nvrtc import compile_cuda
    from tirx.backend.cuda.tools import disassemble

    exe = _seed_exe()
    plain = tuple(o for o in exe.nvrtc.options if o != "--generate-line-info")
    without = compile_cuda(exe.source, arch="sm_90", command=plain)
    with_info = disassemble(exe.cubin)
    if with_info is None:
        pytest.skip("no nvdisasm or cuobjdump here")
    strip = lambda sass: [ln for ln in sass.splitlines() if "//##" not in ln]  # noqa: E731
    assert strip(with_info) == strip(disassemble(without.cubin))
    assert exe.nvrtc.stats.get("registers") == without.stats.get("registers")
