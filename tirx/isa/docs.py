"""``docs/instructions.md``, generated from the forms (``python -m tirx.isa.docs`` rewrites
it; tests/test_isa.py checks it is current)."""

from __future__ import annotations

import sys
from pathlib import Path

from .core import Role
from .operands import element_atom
from .registry import FAMILIES, lookup, supported_forms

__all__ = ["instructions_markdown", "write"]

_HEAD = """\
# Supported instructions

Generated from `tirx/isa/` by `python -m tirx.isa.docs`; do not edit by hand.

Each form is checked against the PTX ISA's fragments when it appears in `T.cuda.tile.apply`
(every element of every register operand), and lowered to per-lane PTX. Register operands are
views of 32-bit words: the *view* column gives the dtype and atom (trailing view shape of one
instruction), then registers per lane. `A`/`B` words pack their elements (`×n` per word); where
a second dtype follows (`or float16 (16, 8)`), a view of those elements is accepted too, its
layout describing elements (the word layout unpacked) and checked element by element.
cp.async has no register fragment: its operands are a shared and a global chunk (given as views
to `T.cuda.tile.apply`, with the immediates as `chunk_bytes=`/`src_size=`) and, in raw
`T.ptx` calls, the cp-size and wait_group's N as immediates.
"""


def _operand(spec) -> str:
    if spec.role is Role.SHARED:
        return f"{spec.name}: shared rows {spec.dtype} {spec.atom}"
    if spec.role in (Role.SHARED_CHUNK, Role.GLOBAL_CHUNK):
        where = "shared" if spec.role is Role.SHARED_CHUNK else "global"
        return f"{spec.name}: {where} chunk ({spec.about})"
    if spec.role in (Role.GLOBAL_BLOCK_OUT, Role.SHARED_BLOCK_IN):
        where = "global" if spec.role is Role.GLOBAL_BLOCK_OUT else "shared"
        return f"{spec.name}: {where} block ({spec.about})"
    if spec.role in (Role.SHARED_BOX_OUT, Role.SHARED_BOX_IN):
        return f"{spec.name}: shared box image ({spec.about})"
    if spec.role in (Role.GLOBAL_TENSOR_IN, Role.GLOBAL_TENSOR_OUT):
        return f"{spec.name}: global tensor region ({spec.about})"
    if spec.role in (Role.IMMEDIATE, Role.SCALAR_IN):
        what = "immediate" if spec.role is Role.IMMEDIATE else "scalar"
        optional = ", optional" if spec.optional else ""
        return f"{spec.name}: {what}{optional} ({spec.about})"
    if spec.role is Role.DESCRIPTOR:  # wgmma's A and B: a shared view, or raw a uint64
        return f"{spec.name}: shared {spec.atom} via descriptor ({spec.about})"
    if spec.role in (Role.MBARRIER, Role.PRED_OUT):
        optional = ", optional" if spec.optional else ""
        return f"{spec.name}: {spec.role.value}{optional} ({spec.about})"
    per = f" ×{spec.elements_per_word}" if spec.elements_per_word > 1 else ""
    scalar = " or scalar" if spec.role is Role.ACCUM_IN else ""
    elements = f" or {spec.element_dtype} {element_atom(spec)}" if spec.element_dtype else ""
    return f"{spec.name}: {spec.dtype}{per} {spec.atom}{elements}, {spec.registers} reg{scalar}"


def instructions_markdown() -> str:
    forms = supported_forms()
    lines = [_HEAD]
    for spec in FAMILIES:
        mine = [t for t in forms if lookup(t).family is spec.family]
        lines += [f"## {spec.mnemonic} ({spec.isa_section})", ""]
        slots = " ".join(
            f"[.{'|'.join(s.choices)}]" if s.optional else f".{'|'.join(s.choices)}"
            for s in spec.slots
        )
        lines += [f"Syntax slots: `{spec.mnemonic}` {slots}", ""]
        if spec.notes:
            lines += [spec.notes.strip(), ""]
        if spec.doc_rows is not None:
            lines += [*spec.doc_rows(mine), ""]
            continue
        lines += ["| form | operands (PTX order) | min arch |", "|---|---|---|"]
        for text in mine:
            c = lookup(text)
            ops = "; ".join(_operand(o) for o in c.operands) or "none"
            arch = f"sm_{c.min_arch}" + ("a" if c.arch_specific else "")
            lines.append(f"| `{text}` | {ops} | {arch} |")
        lines.append("")
    lines.append(f"{len(forms)} forms.")
    return "\n".join(lines) + "\n"


def write(path: str | Path | None = None) -> Path:
    path = Path(path) if path else Path(__file__).resolve().parents[2] / "docs" / "instructions.md"
    path.write_text(instructions_markdown())
    return path


def main(argv: list[str]) -> int:
    """``python -m tirx.isa.docs [OUT]``: write the page (to docs/instructions.md by default)."""
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print("usage: python -m tirx.isa.docs [OUT]  (default: docs/instructions.md)")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    print(write(argv[0] if argv else None))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
