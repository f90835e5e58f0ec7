"""The compact panel that ``%%tirx`` shows for each kernel of a cell.

One header line (kernel, target, cache badge), the timing split, resource use, the result of
an optional run against a torch reference, an optional profile (the simulator's per-line
counts, drawn as a heat column beside the kernel's Python; or Nsight Compute's table and a
roofline), and collapsible sections for CUDA, PTX, SASS and the IR. ``_repr_html_`` uses only ``<details>`` (no JavaScript), so the panel reads the same
in JupyterLab, nbviewer and exported HTML; ``str(panel)`` is a text summary.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

__all__ = ["RunReport", "KernelPanel", "SECTIONS"]

# section key -> (title, how to get the text from an executable)
SECTIONS = {
    "cuda": ("CUDA", lambda exe: exe.source),
    "ptx": ("PTX", lambda exe: exe.ptx),
    "sass": ("SASS", lambda exe: exe.sass),
    "ir": ("IR", lambda exe: exe.script()),
    "lowered": ("lowered IR", lambda exe: exe.script(lowered=True)),
}
# The stages of one tirx.compile call, in order; they add up to the call's wall time ("other"
# is the rest). "parse" is not among them: @T.function parsed the kernel when the cell defined
# it, once for every executable made from it, so the panel shows it once (see total_text).
TIMING_NAMES = (("frontend", "front-end cache"), ("lower", "lower"), ("codegen", "codegen"),
                ("nvrtc", "NVRTC"), ("load", "load"), ("memo", "memo"),
                ("other", "other"))  # fmt: skip
_ONLY_WHEN_TAKEN = {"frontend", "memo", "other"}  # stages most compiles lack: no "—" for them


_DARK = 'body[data-jp-theme-light="false"]'  # JupyterLab marks its dark themes so


@dataclass
class RunReport:
    """What running the kernel on the cell's inputs gave."""

    where: str
    ms: float
    max_error: float | None = None
    passed: bool | None = None
    note: str = ""

    def text(self) -> str:
        out = f"ran on {self.where} in {self.ms:.1f} ms"
        if self.max_error is not None:
            out += f"; max |out - ref| = {self.max_error:.3g}"
        if self.passed is not None:
            out += "; PASS" if self.passed else "; FAIL"
        if self.note:
            out += f" ({self.note})"
        return out


@dataclass
class KernelPanel:
    """The kernel's executables and what to show of them."""

    name: str
    exe: object  # the executable the cell runs (the --target one)
    code: object | None = None  # the cuda executable the code sections come from
    code_error: str = ""
    sections: tuple = ("cuda", "ptx", "sass", "ir", "resources")
    run: RunReport | None = None
    texts: dict = field(default_factory=dict)
    profile: object | None = None  # exe.profile's result: the simulator's, or Nsight Compute's
    heat: str = "instructions"  # the simulator profile's metric the heat column shows

    def __post_init__(self):
        for key in self.sections:
            if key not in SECTIONS:
                continue
            source = self.exe if key in ("ir", "lowered") else self.code
            text = None
            if source is not None:
                try:
                    text = SECTIONS[key][1](source)
                except Exception as e:  # a missing tool, say: show why, keep the panel
                    text = f"(unavailable: {e})"
            if text is None:
                text = self._missing(key)
            self.texts[key] = text

    def _missing(self, key: str) -> str:
        if self.code_error:
            return f"(no CUDA build: {self.code_error})"
        if key == "sass":
            return "(no SASS: nvdisasm is not installed; pip install 'tirx[sass]')"
        return "(not available for this target)"

    # ------------------------------------------------------------------ pieces

    def heat_column(self):
        """The heat column of a simulator profile (None for none, or for ncu's)."""
        if self.profile is None or not hasattr(self.profile, "metric"):
            return None
        from .heat import heat_column

        return heat_column(self.profile, self.heat)

    def profile_text(self) -> str:
        """The profile as text: the simulator's heat column beside the kernel's lines, or
        Nsight Compute's table and the roofline in words."""
        heat = self.heat_column()
        if heat is not None:
            lines = {lp.line: lp.source() for lp in self.profile.lines
                     if lp.file == self.profile.file}  # fmt: skip
            return f"{self.profile.header()}\n{heat.text(lines)}"
        from .roofline import roofline_text

        return f"{self.profile}\n{roofline_text(self.profile)}"

    def profile_html(self, linked: bool) -> str:
        """The profile's section (``linked``: the heat column is on the code panes' Python)."""
        heat = self.heat_column()
        if heat is None:
            from .roofline import roofline_html

            body = self.profile._repr_html_() + roofline_html(self.profile)
            title = "Profile (Nsight Compute)"
        else:
            body = "" if linked else f"<pre>{html.escape(self.profile_text())}</pre>"
            body += self.profile._repr_html_()
            title = f"Profile (simulator, per line; heat column: {heat.title})"
        return (f'<details class="tirx-section tirx-profile-section" open><summary>{title}'
                f"</summary>{body}</details>")  # fmt: skip

    def executables(self) -> list:
        seen, out = set(), []
        for exe in (self.exe, self.code):
            if exe is not None and id(exe) not in seen:
                seen.add(id(exe))
                out.append(exe)
        return out

    @staticmethod
    def timing_text(exe) -> str:
        """The stages of the compile call that made ``exe`` and their sum, the call's wall
        time: ``lower 2.0 ms · codegen 0.5 ms · NVRTC 40.0 ms · load — = 42.5 ms`` (— for a
        stage that has not happened, such as loading without a GPU)."""
        t = exe.timings
        parts = [
            f"{label} {t[key]:.1f} ms" if key in t else f"{label} —"
            for key, label in TIMING_NAMES
            if key in t or (exe.target.kind == "cuda" and key not in _ONLY_WHEN_TAKEN)
        ]
        return " · ".join(parts) + f" = {_compile_ms(exe):.1f} ms"

    def total_text(self) -> str:
        """Each timing once: the parse (one for all the kernel's executables) and every
        compile call, and what they come to."""
        exes = self.executables()
        parse = max((exe.timings.get("parse", 0.0) for exe in exes), default=0.0)
        compiles = [_compile_ms(exe) for exe in exes]
        terms = " + ".join(f"{ms:.1f}" for ms in compiles)
        word = "compile" if len(compiles) == 1 else "compiles"
        return f"parse {parse:.1f} ms + {word} {terms} ms = {parse + sum(compiles):.1f} ms"

    def resources_text(self) -> str:
        stats = dict(getattr(self.code or self.exe, "stats", {}) or {})
        regs = stats.get("registers")
        parts = [
            f"{regs if regs is not None else '?'} registers",
            f"{stats.get('shared_bytes', 0)} shared bytes",
            f"{stats.get('spill_stores', 0)} spill stores",
            f"{stats.get('spill_loads', 0)} spill loads",
        ]
        return " · ".join(parts)

    def header(self) -> str:
        out = f"{self.name} · target {self.exe.target}"
        if self.code is not None and self.code is not self.exe:
            out += f" (code shown for {self.code.target})"
        return out

    # ------------------------------------------------------------------ faces

    def __str__(self) -> str:
        lines = [self.header()]
        for exe in self.executables():
            lines.append(f"  {exe.target} · cache {exe.cache} · {self.timing_text(exe)}")
        lines.append(f"  {self.total_text()}")
        if "resources" in self.sections:
            lines.append(f"  resources: {self.resources_text()}")
        if self.run is not None:
            lines.append(f"  {self.run.text()}")
        if self.profile is not None:
            lines += ["  " + x for x in self.profile_text().splitlines()]
        if self.code_error:
            lines.append(f"  no CUDA build: {self.code_error}")
        shown = [f"{SECTIONS[k][0]} ({len(self.texts[k].splitlines())} lines)"
                 for k in self.sections if k in self.texts]  # fmt: skip
        if shown:
            lines.append("  sections: " + ", ".join(shown))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        e = html.escape
        badge = (
            '<span class="tirx-badge tirx-cache-{c}" style="background:{bg};color:#fff;'
            'border-radius:8px;padding:0 6px;margin-left:6px;font-size:85%">cache {c}</span>'
        )
        out = [
            '<div class="tirx-panel" style="border:1px solid #ccc;border-radius:6px;'
            'padding:6px 10px;margin:4px 0;font-size:13px">',
            f'<div class="tirx-header"><b>{e(self.name)}</b> · target '
            f"<code>{e(str(self.exe.target))}</code>",
        ]
        if self.code is not None and self.code is not self.exe:
            out.append(f" <span>(code shown for <code>{e(str(self.code.target))}</code>)</span>")
        out.append("</div>")
        for exe in self.executables():
            bg = "#2e7d32" if exe.cache == "hit" else "#b45309"  # white on each: 5:1 or more
            out.append(
                f'<div class="tirx-timings"><code>{e(str(exe.target))}</code>'
                f"{badge.format(c=e(exe.cache), bg=bg)} · {e(self.timing_text(exe))}</div>"
            )
        out.append(f'<div class="tirx-timings tirx-total">{e(self.total_text())}</div>')
        if "resources" in self.sections:
            out.append(f'<div class="tirx-resources">{e(self.resources_text())}</div>')
        if self.run is not None:
            # a colour per theme, each 6:1 or more on its ground; the inline one is the light
            # theme's (and what a page without style blocks shows), the rule the dark theme's
            verdict, color = {True: ("tirx-pass", "#1b5e20"), False: ("tirx-fail", "#b71c1c"),
                              None: ("", "inherit")}[self.run.passed]  # fmt: skip
            out.append(
                f"<style>{_DARK} .tirx-run.tirx-pass{{color:#7ee787!important}}"
                f"{_DARK} .tirx-run.tirx-fail{{color:#ff7b72!important}}</style>"
                f'<div class="tirx-run {verdict}" style="color:{color}">{e(self.run.text())}</div>'
            )
        if self.code_error:
            out.append(f'<div class="tirx-note">no CUDA build: {e(self.code_error)}</div>')
        linked = [k for k in ("cuda", "ptx", "sass") if k in self.sections and k in self.texts]
        if self.profile is not None:
            out.append(self.profile_html(bool(linked) and self.code is not None))
        if linked and self.code is not None:  # highlighted, numbered, linked to the Python
            from .codeview import panel_html

            out.append(panel_html(self, linked))
        for key in self.sections:
            if key not in self.texts or (key in linked and self.code is not None):
                continue
            text = self.texts[key]
            out.append(
                f'<details class="tirx-section tirx-{key}"><summary>{SECTIONS[key][0]} '
                f"({len(text.splitlines())} lines)</summary>"
                f'<pre style="max-height:400px;overflow:auto;font-size:12px">{e(text)}</pre>'
                "</details>"
            )
        out.append("</div>")
        return "".join(out)


def _compile_ms(exe) -> float:
    """The wall time of the tirx.compile call that made ``exe``: its stages but parse."""
    return sum(v for k, v in exe.timings.items() if k != "parse")
