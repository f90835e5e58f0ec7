"""The panel's code as an IDE shows it: highlighted CUDA, PTX and SASS with line numbers and a
copy button, and the kernel's Python lines linked to the code they became.

The links come from line information the toolchain already writes: the generated CUDA carries
``#line N "file"`` before each statement; PTX built with line info (tirx's default) carries
``.loc F N``; SASS disassembled with ``nvdisasm -g`` carries ``//## File "...", line N``
comments. :func:`line_map` reads all three. :func:`with_line_info` disassembles the build's
CUBIN with ``-g`` (and rebuilds PTX and SASS only for a build without line information).

Tokens are coloured by :mod:`widgets.highlight` (Pygments for CUDA and Python; rules of our
own for PTX and SASS, which Pygments does not read well or at all).

The HTML needs no script for the links: each Python line is a ``<label>`` for a hidden radio
button, and CSS lights every line of the chosen Python line in every pane. A one-line
``onclick`` scrolls the open panes to the first line lit, and the copy buttons use one. The
lines are separated by newlines and the radio buttons carry ``hidden``, so the panel still
reads where the HTML is sanitized (an untrusted notebook drops its style and scripts).
"""

from __future__ import annotations

import html
import itertools
import linecache
import os
import re
from dataclasses import dataclass, field

from .highlight import COLORS, DARK_COLORS, highlight, highlight_lines

__all__ = ["CodeText", "line_map", "highlight", "CodeView", "code_view", "with_line_info"]

_LINE = re.compile(r'^\s*#line\s+(\d+)\s+"((?:[^"\\]|\\.)*)"')
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"((?:[^"\\]|\\.)*)"')
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+")
_SASS_LOC = re.compile(r'//##\s*File\s+"((?:[^"\\]|\\.)*)",\s*line\s+(\d+)')
_ids = itertools.count()
_DIR = re.compile(r'"/[^"\s]*/(?=[^"/]*")')  # the directory of a quoted absolute file name

LANGS = ("cuda", "ptx", "sass")
# a click on a Python line scrolls each open pane to the first line it lit (the one script of
# the panel besides the copy buttons; the lighting itself is CSS)
SCROLL = (
    "var l=event.target.closest('label[data-line]');if(!l)return;"
    "this.closest('.tirx-panes').querySelectorAll('details:not(.tirx-python)[open] pre')"
    ".forEach(function(p){var t=p.querySelector('.o'+l.dataset.line);if(t){p.scrollTop+="
    "t.getBoundingClientRect().top-p.getBoundingClientRect().top-p.clientHeight/3;}});"
)


@dataclass(frozen=True)
class CodeText:
    """One pane: its lines and, for each line, the Python line it came from (or None)."""

    lang: str  # "python", "cuda", "ptx" or "sass"
    lines: tuple[str, ...]
    origin: tuple[int | None, ...]

    def lines_of(self, py_line: int) -> list[int]:
        """0-based indices of the lines that came from ``py_line``."""
        return [i for i, o in enumerate(self.origin) if o == py_line]


def _unescape(name: str) -> str:
    return name.replace('\\"', '"').replace("\\\\", "\\")


def same_file(name: str | None, source_file: str | None) -> bool:
    """Whether a tool's file ``name`` is ``source_file``: NVRTC makes relative names (such as a
    notebook cell's ``<tirx-cell-3>``) absolute against its working directory."""
    if source_file is None:
        return True
    if name is None:
        return False
    return name == source_file or name.endswith("/" + source_file.lstrip("/"))


def line_map(text: str, lang: str, source_file: str | None = None) -> CodeText:
    """Each line of ``text`` (``lang``: cuda, ptx or sass) with the Python line it came from;
    only lines of ``source_file`` count when it is given."""
    lines = tuple(text.splitlines())
    origin: list[int | None] = []
    current: int | None = None
    files = {m.group(1): _unescape(m.group(2)) for m in map(_FILE.match, lines) if m}
    for line in lines:
        if lang == "cuda":
            m = _LINE.match(line)
            if m:
                ok = same_file(_unescape(m.group(2)), source_file)
                current = int(m.group(1)) if ok else None
                origin.append(None)
                continue
        elif lang == "ptx":
            m = _LOC.match(line)
            if m:
                name = files.get(m.group(1))
                ok = same_file(name, source_file)
                current = int(m.group(2)) if ok else None
                origin.append(None)
                continue
            if line.strip() in ("}", "ret;") or line.lstrip().startswith("."):
                current = None if line.strip() == "}" else current
        elif lang == "sass":
            m = _SASS_LOC.search(line)
            if m:
                ok = same_file(_unescape(m.group(1)), source_file)
                current = int(m.group(2)) if ok else None
                origin.append(None)
                continue
        origin.append(current)
    return CodeText(lang, lines, tuple(origin))


# --------------------------------------------------------------------------- highlighting
# widgets/highlight.py: Pygments for CUDA and Python, rules of our own for PTX and SASS.

MUTED = ("#57606a", "#a3acb6")  # line numbers and notes: light, dark
DARK = 'body[data-jp-theme-light="false"]'


# --------------------------------------------------------------------------- the view


@dataclass
class CodeView:
    """Python lines and the code panes, linked by line."""

    source_file: str | None
    python: CodeText | None
    panes: dict[str, CodeText] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # pane -> why it has no links
    heat: object | None = None  # a widgets.heat.HeatColumn beside the Python lines

    def lines_for(self, py_line: int) -> dict[str, list[str]]:
        """What clicking Python line ``py_line`` lights: each pane's lines (text)."""
        return {k: [p.lines[i] for i in p.lines_of(py_line)] for k, p in self.panes.items()}

    def linked_lines(self) -> list[int]:
        """The Python lines that some pane's code came from."""
        found = {o for p in self.panes.values() for o in p.origin if o is not None}
        return sorted(found)

    def __str__(self) -> str:
        out = []
        for n in self.linked_lines():
            counts = ", ".join(f"{k} {len(p.lines_of(n))}" for k, p in self.panes.items())
            out.append(f"line {n}: {counts}")
        return "\n".join(out)

    def _repr_html_(self) -> str:
        return self.html()

    def html(self, titles=None, open_panes=()) -> str:
        """The linked panes as one HTML block (``titles``: pane -> summary text)."""
        uid = f"tirx-code{next(_ids)}"
        linked = self.linked_lines()
        css = [
            f".{uid} pre{{margin:0;font-size:12px;line-height:1.35;max-height:400px;white-space:pre;"
            "overflow:auto;background:var(--jp-layout-color1,#fafafa);"
            "color:var(--jp-content-font-color1,#111)}",
            # line numbers are a CSS counter: not in the markup, not in what "copy" copies
            f".{uid} pre{{counter-reset:ln}}",
            f".{uid} .cl::before{{counter-increment:ln;content:counter(ln);display:inline-block;"
            f"width:3.5em;color:{MUTED[0]};text-align:right;margin-right:1em}}",
            f".{uid} .ln{{display:inline-block;width:3.5em;color:{MUTED[0]};text-align:right;"
            "margin-right:1em;user-select:none}",
            f".{uid} .tirx-note{{color:{MUTED[0]}}}",
            f"{DARK} .{uid} .cl::before,{DARK} .{uid} .ln,{DARK} .{uid} .tirx-note"
            f"{{color:{MUTED[1]}}}",
            f".{uid} .py-line{{cursor:pointer;display:inline-block;min-width:100%}}",
            f".{uid} .py-line.mapped:hover{{background:rgba(255,213,79,.35)}}",
            f".{uid} .tirx-copy{{margin-left:8px;font-size:11px;padding:0 6px;cursor:pointer}}",
            f".{uid} input.tirx-pick{{display:none}}",
        ]
        if self.heat is not None:
            css.append(self.heat.css(uid))
        css += [f".{uid} .tk-{k}{{color:{c}}}" for k, c in COLORS.items()]
        css += [f"{DARK} .{uid} .tk-{k}{{color:{c}}}" for k, c in DARK_COLORS.items()]
        if linked:  # one rule: the chosen Python line lights its lines in every pane
            css.append(
                ",".join(f"#{uid}-p{n}:checked~.tirx-panes .o{n}" for n in linked)
                + "{background:rgba(255,213,79,.55);outline:1px solid #e0a800}"
            )
            css.append(  # on a dark pane a fainter yellow keeps light text readable
                ",".join(f"{DARK} #{uid}-p{n}:checked~.tirx-panes .o{n}" for n in linked)
                + "{background:rgba(255,213,79,.18)}"
            )
        out = [f'<div class="tirx-code {uid}"><style>{"".join(css)}</style>']
        out += [
            f'<input type="radio" class="tirx-pick" name="{uid}" id="{uid}-p{n}" hidden="hidden">'
            for n in linked
        ]
        out.append('<div class="tirx-panes">')
        if self.python is not None:
            rows = []
            marked = highlight_lines(self.python.lines, "python")
            for i, text in enumerate(marked):
                n = self.python.origin[i]
                mapped = n in linked
                attr = f' for="{uid}-p{n}"' if mapped else ""
                cls = f"py-line o{n}" + (" mapped" if mapped else "")
                heat = self.heat.cell(n) if self.heat is not None else ""
                rows.append(
                    f'<label class="{cls}" data-line="{n}"{attr}><span class="ln">{n}</span>'
                    f'{heat}<span class="tx">{text}</span></label>'
                )
            key = f" · {self.heat.key_html()}" if self.heat is not None else ""
            out.append(
                '<details class="tirx-section tirx-python" open><summary>Python (click a line '
                f"to light its CUDA, PTX and SASS){key}</summary><pre style='white-space:pre' "
                f'onclick="{SCROLL}">{chr(10).join(rows)}</pre></details>'
            )
        titles = titles or {}
        for key, pane in self.panes.items():
            rows = []
            lines = pane.lines
            if key != "cuda":  # file names as given: NVRTC prefixed relative ones with the
                lines = [_DIR.sub('"', line) for line in lines]  # cwd of the compile
            for i, text in enumerate(highlight_lines(lines, key)):
                o = pane.origin[i]
                cls = f' class="cl o{o}"' if o is not None else ' class="cl"'
                rows.append(f"<span{cls}>{text}</span>")
            title = titles.get(key, f"{key.upper()} ({len(pane.lines)} lines)")
            note = self.notes.get(key)
            note = f' <span class="tirx-note">· {html.escape(note)}</span>' if note else ""
            copy = (
                '<button class="tirx-copy" title="copy to the clipboard" onclick="'
                "event.preventDefault();navigator.clipboard.writeText(Array.from(this.closest("
                "'details').querySelectorAll('pre .cl')).map(e=>e.textContent).join('\\n'))"
                '">copy</button>'
            )
            opened = " open" if key in open_panes else ""
            out.append(
                f'<details class="tirx-section tirx-{key}"{opened}><summary>{html.escape(title)}'
                f"{note}{copy}</summary><pre style='white-space:pre'>{chr(10).join(rows)}</pre></details>"
            )
        out.append("</div></div>")
        return "".join(out)


def _source_file(cuda: str) -> str | None:
    for line in cuda.splitlines():
        m = _LINE.match(line)
        if m:
            return _unescape(m.group(2))
    return None


def code_view(texts: dict[str, str], source_file: str | None = None) -> CodeView:
    """Link the code ``texts`` (pane -> text: cuda, ptx, sass) to the Python lines of
    ``source_file`` (default: the file the CUDA's ``#line`` directives name)."""
    cuda = texts.get("cuda") or ""
    source_file = source_file or _source_file(cuda)
    panes, notes = {}, {}
    for key in LANGS:
        if key in texts and texts[key] is not None:
            panes[key] = line_map(texts[key], key, source_file)
            if key != "cuda" and not any(o is not None for o in panes[key].origin):
                notes[key] = "no line info in this build"
    python = None
    linked = sorted({o for p in panes.values() for o in p.origin if o is not None})
    if source_file and linked:
        src = linecache.getlines(source_file)
        if src:
            first, last = linked[0], linked[-1]
            first = _def_line(src, first)
            rows = range(first, min(last, len(src)) + 1)
            python = CodeText("python", tuple(src[n - 1].rstrip("\n") for n in rows),
                              tuple(rows))  # fmt: skip
    return CodeView(source_file, python, panes, notes)


def _def_line(src: list[str], line: int) -> int:
    """The kernel's first line: back from ``line`` to its decorator or ``def``."""
    n = line
    while n > 1 and not src[n - 1].lstrip().startswith(("@", "def ")):
        n -= 1
    while n > 1 and src[n - 2].lstrip().startswith("@"):
        n -= 1
    return n


def with_line_info(exe) -> dict[str, str]:
    """The CUDA, PTX and SASS of ``exe`` (a CUDA executable), with line information.

    tirx builds with ``--generate-line-info``, so the PTX carries ``.loc`` and the CUBIN its
    line table: SASS is disassembled once more with ``nvdisasm -g`` (no compile). A build
    without line information (other NVRTC options) has its PTX and SASS rebuilt with
    ``-lineinfo`` from its own options (``exe.nvrtc.options``), through
    ``cuda.bindings.nvrtc`` directly. Either is remembered in this process; without NVRTC or
    nvdisasm the panes keep what ``exe`` has."""
    texts = {"cuda": exe.source, "ptx": exe.ptx, "sass": getattr(exe, "sass", None)}
    cubin = getattr(exe, "cubin", b"") or b""
    if exe.ptx and ".loc" in exe.ptx:
        key = ("sass -g", cubin)
        if key not in _LINE_INFO:
            sass = _sass_with_lines(cubin)
            _remember(key, {"sass": sass} if sass else {})
        return {**texts, **_LINE_INFO[key]}
    options = tuple(getattr(getattr(exe, "nvrtc", None), "options", ()) or ())
    key = (exe.source, options)
    if key not in _LINE_INFO:
        try:
            ptx, cubin = _nvrtc_with_lines(exe.source, options)
        except Exception:  # no NVRTC here, or it refuses: keep the plain build's text
            return texts
        rebuilt = {"ptx": ptx}
        sass = _sass_with_lines(cubin)
        if sass:
            rebuilt["sass"] = sass
        _remember(key, rebuilt)
    return {**texts, **_LINE_INFO[key]}


def _remember(key, texts: dict) -> None:
    if len(_LINE_INFO) > 32:
        _LINE_INFO.clear()
    _LINE_INFO[key] = texts


_LINE_INFO: dict[tuple, dict[str, str]] = {}  # (CUDA source, options) -> PTX, SASS


def _nvrtc_with_lines(source: str, options: tuple[str, ...]) -> tuple[str, bytes]:
    """PTX and CUBIN of ``source`` compiled with ``options`` and ``-lineinfo``."""
    from cuda.bindings import nvrtc

    opts = [o.encode() for o in options if o != "--ptxas-options=-v"] + [b"-lineinfo"]
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
    if int(err) != 0:
        raise RuntimeError(f"nvrtcCreateProgram: {err}")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if int(err) != 0:
            raise RuntimeError(f"nvrtcCompileProgram: {err}")
        ptx = _read(nvrtc, prog, nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX).decode(errors="replace")
        try:
            cubin = _read(nvrtc, prog, nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
        except RuntimeError:  # a compute_XX target has PTX only
            cubin = b""
        return ptx.rstrip("\0"), cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _read(nvrtc, prog, size_fn, get_fn) -> bytes:
    err, n = size_fn(prog)
    if int(err) != 0 or not n:
        raise RuntimeError(f"{size_fn.__name__}: {err}")
    buf = bytearray(n)
    (err,) = get_fn(prog, buf)
    if int(err) != 0:
        raise RuntimeError(f"{get_fn.__name__}: {err}")
    return bytes(buf)


def _nvdisasm() -> str | None:
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        found = find_nvidia_binary_utility("nvdisasm")
        if found:
            return str(found)
    except Exception:  # cuda.pathfinder missing or broken: PATH next
        pass
    import shutil

    return shutil.which("nvdisasm")


def _sass_with_lines(cubin: bytes) -> str | None:
    import subprocess
    import tempfile

    tool = _nvdisasm()
    if tool is None or not cubin:
        return None
    with tempfile.TemporaryDirectory(prefix="tirx-sass-") as d:
        path = os.path.join(d, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        try:
            done = subprocess.run([tool, "-c", "-g", path], capture_output=True, text=True,
                                  timeout=30)  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


def panel_html(panel, keys) -> str:
    """The code sections ``keys`` of a ``%%tirx`` panel as linked panes (the hook
    :class:`widgets.panel.KernelPanel` calls); rebuilt with line info once per panel."""
    texts = {k: panel.texts[k] for k in keys}
    code = getattr(panel, "code", None)
    if code is not None and getattr(code, "source", None):
        if not hasattr(panel, "_line_info"):
            panel._line_info = with_line_info(code)
        for k in keys:
            if panel._line_info.get(k):
                texts[k] = panel._line_info[k]
    view = code_view(texts)
    view.heat = panel.heat_column() if hasattr(panel, "heat_column") else None
    titles = {k: f"{k.upper()} ({len(texts[k].splitlines())} lines)" for k in keys}
    return view.html(titles)
