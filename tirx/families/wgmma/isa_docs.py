"""The wgmma part of docs/instructions.md: one row per syntax line, accumulator and type pair
(N spelled as a set) instead of one per form, then every form's text."""

from __future__ import annotations

from .isa_forms import ELEMENT, N_ALL, SHAPE

__all__ = ["doc_rows"]


def _key(text: str) -> tuple:
    """A form's text with its N replaced by ``N`` (the group it belongs to), and its N."""
    parts = text.split(".")
    for i, token in enumerate(parts):
        got = SHAPE.match(token)
        if got:
            m, n, k = got.groups()
            parts[i] = f"m{m}nNk{k}"
            return ".".join(parts), int(n)
    return text, None


def _n_set(ns: list[int]) -> str:
    if tuple(ns) == N_ALL:
        return "8, 16, ..., 256 (every multiple of 8)"
    return "8, 16, 24, 32, 48, ..., 256 (multiples of 16 from 32)"


def doc_rows(forms) -> list[str]:
    from ...isa.registry import lookup  # the registry imports this module's family lazily

    groups: dict[str, list[int]] = {}
    singles = []
    for text in forms:
        key, n = _key(text)
        if n is None:
            singles.append(text)
        else:
            groups.setdefault(key, []).append(n)
    out = [
        "| form | operands (PTX order) | min arch |",
        "|---|---|---|",
    ]
    for text in singles:
        c = lookup(text)
        ops = "; ".join(f"{o.name}: immediate ({o.about})" for o in c.operands) or "none"
        out.append(f"| `{text}` | {ops} | sm_{c.min_arch}a |")
    out += [
        "",
        "| mma_async forms (N below) | N | D | A: ss (descriptor) / rs (registers) | B | "
        "immediates after scale-d: ss / rs |",
        "|---|---|---|---|---|---|",
    ]
    for key, ns in groups.items():
        c = lookup(key.replace("nN", f"n{ns[0]}"))
        d, a, b = c.operands[:3]
        regs = c.param("a_registers")
        imms = [o.name for o in c.operands[4:]]
        rs = [x for x in imms if x != "trans_a"]
        d_text = (
            f"{d.dtype} (64, N{'/2' if d.elements_per_word == 2 else ''}), "
            f"N/{4 if d.elements_per_word == 2 else 2} reg"
        )
        per = f" ×{regs.elements_per_word}" if regs.elements_per_word > 1 else ""
        a_text = (
            f"shared (64, {a.atom[1]}) {ELEMENT[c.param('a_type')]} / uint32{per} (64, 8), 4 reg"
        )
        b_text = f"shared (N, {b.atom[1]}) {ELEMENT[c.param('b_type')]}"
        imm_text = f"{', '.join(imms) or 'none'} / {', '.join(rs) or 'none'}"
        out.append(f"| `{key}` | {_n_set(ns)} | {d_text} | {a_text} | {b_text} | {imm_text} |")
    out += [
        "",
        f"The {sum(map(len, groups.values()))} mma_async forms, each accepted as written:",
        "",
    ]
    for key, ns in groups.items():
        out.append(" ".join(f"`{key.replace('nN', f'n{n}')}`" for n in ns))
        out.append("")
    return out[:-1]
