"""Syntax highlighting for the code panes: lines of CUDA, PTX, SASS or Python as HTML with
``<span class="tk-X">`` around tokens (X: c comment, p preprocessor or directive, s string,
k keyword or instruction, n number, r register), coloured by :data:`COLORS`.

CUDA and Python are read by Pygments (``CudaLexer``, ``PythonLexer``), a whole pane at a time
so that constructs spanning lines (block comments, strings) are read as one. PTX and SASS are
read by the small rule sets below, one line at a time:

- SASS: Pygments has no lexer for NVIDIA's machine code (its "Sass" is the CSS language);
- PTX: Pygments' ``PtxLexer`` (2.16+) reads the PTX tirx generates badly: a predicate guard
  (``@%p1 bra``) and the ``::`` of a qualifier (``shared::cta``, ``L2::128B``) come out as error
  tokens, a float literal (``0f3F800000``) splits into a number and a name, and an
  instruction's modifiers (``.sync.aligned.m16n8k16``) get the colour of registers.
"""

from __future__ import annotations

import functools
import html
import re

__all__ = ["highlight", "highlight_lines", "COLORS", "DARK_COLORS", "LANGS"]

LANGS = ("cuda", "ptx", "sass", "python")

_RULES = {
    "ptx": [
        ("c", r"//.*$"),
        ("p", r"^\s*\.\w+|\s\.(?:reg|param|shared|global|local|b\d+|u\d+|s\d+|f\d+)\b"),
        ("r", r"%\w+"),
        ("k", r"^\s*(?:@!?%\w+\s+)?[a-z][\w.:]*"),
        ("n", r"\b\d+\b|0[fFdD][0-9a-fA-F]+"),
    ],
    "sass": [
        ("c", r"/\*[0-9a-f]{4}\*/|//.*$|/\*.*?\*/"),
        ("r", r"\b(?:R\d+|RZ|UR\d+|URZ|P\d|PT|UP\d|UPT|SR_\w+)\b"),
        ("k", r"\b[A-Z][A-Z0-9_]{2,}(?:\.[A-Z0-9_]+)*\b"),
        ("n", r"\b0x[0-9a-f]+\b|\b\d+\b"),
    ],
}
_COMPILED = {
    lang: re.compile("|".join(f"(?P<{k}>{p})" for k, p in rules), re.MULTILINE)
    for lang, rules in _RULES.items()
}

# Token colours of our own, one set per theme, each at least 4.5:1 on its pane (JupyterLab
# Dark's editor colours for comments and directives are under that on its background). The
# dark set applies where JupyterLab says its theme is dark (body[data-jp-theme-light=false]);
# everywhere else (nbviewer, exported HTML) the light one.
COLORS = {"c": "#57606a", "p": "#6f42c1", "s": "#0a3069", "k": "#b31d28", "n": "#0550ae",
          "r": "#116329"}  # fmt: skip
DARK_COLORS = {"c": "#a3acb6", "p": "#d2a8ff", "s": "#a5d6ff", "k": "#ff7b72", "n": "#79c0ff",
               "r": "#7ee787"}  # fmt: skip


def highlight(line: str, lang: str) -> str:
    """One ``line`` of ``lang`` (cuda, ptx, sass or python) as escaped HTML with token spans."""
    return highlight_lines([line], lang)[0]


def highlight_lines(lines, lang: str) -> list[str]:
    """Each of ``lines`` (one pane of ``lang``) as escaped HTML with token spans."""
    if lang not in LANGS:
        raise ValueError(f"no highlighting for {lang!r}: one of {', '.join(LANGS)}")
    lines = list(lines)
    if lang in _COMPILED:
        return [_by_rules(line, _COMPILED[lang]) for line in lines]
    if not lines:
        return []
    out: list[str] = []
    current: list[str] = []
    for ttype, value in _lexer(lang).get_tokens("\n".join(lines)):
        cls = _token_class(ttype)
        for k, part in enumerate(value.split("\n")):
            if k:
                out.append("".join(current))
                current = []
            if part:
                text = html.escape(part)
                current.append(f'<span class="tk-{cls}">{text}</span>' if cls else text)
    out.append("".join(current))
    return out[: len(lines)] + [""] * (len(lines) - len(out))


def _by_rules(line: str, pattern: re.Pattern) -> str:
    out, pos = [], 0
    for m in pattern.finditer(line):
        if m.start() == m.end():
            continue
        out.append(html.escape(line[pos : m.start()]))
        out.append(f'<span class="tk-{m.lastgroup}">{html.escape(m.group())}</span>')
        pos = m.end()
    out.append(html.escape(line[pos:]))
    return "".join(out)


@functools.cache
def _lexer(lang: str):
    from pygments.lexers import CudaLexer, PythonLexer

    lexer = {"cuda": CudaLexer, "python": PythonLexer}[lang]
    # keep the leading and trailing blank lines, so that the tokens split back into the pane's
    # lines; the newline added at the end (a // comment's rule needs one) makes one line more
    return lexer(stripnl=False, ensurenl=True)


@functools.cache
def _token_class(ttype) -> str | None:
    """Our class for a Pygments token type: the first entry of the table it falls under."""
    from pygments.token import Comment, Keyword, Name, Number, Operator, String

    table = (
        (Comment.Preproc, "p"),
        (Comment.PreprocFile, "p"),
        (Comment, "c"),
        (String, "s"),
        (Keyword, "k"),
        (Operator.Word, "k"),
        (Name.Builtin, "k"),
        (Name.Decorator, "p"),
        (Number, "n"),
    )
    return next((cls for parent, cls in table if ttype in parent), None)
