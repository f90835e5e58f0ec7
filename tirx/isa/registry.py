"""The families, the supported forms, and ``lookup(text) -> Contract``.

``FAMILIES`` is the one list of family modules; a family is added by writing its module
(a :class:`~tirx.isa.core.FamilySpec` named ``SPEC``) and adding it here. Every member of
:class:`Family` must have exactly one spec: checked at import, so a family nobody handles
fails loudly instead of falling into another's branch.
"""

from __future__ import annotations

import difflib
import functools

from ..errors import ContractError
from . import cp_async, cp_async_bulk, fence_proxy, ldmatrix, mbarrier, mma, stmatrix, tma, wgmma
from .core import Contract, Family, FamilySpec

__all__ = [
    "FAMILIES", "SPECS", "lookup", "supported_forms", "spec_of", "family_of_text", "check_complete",
    "check_arch",
]  # fmt: skip

FAMILIES: tuple[FamilySpec, ...] = (
    mma.SPEC, ldmatrix.SPEC, stmatrix.SPEC, cp_async.SPEC, cp_async_bulk.SPEC, fence_proxy.SPEC,
    mbarrier.SPEC, mbarrier.CP_ASYNC_SPEC, mbarrier.FENCE_SPEC,
    wgmma.SPEC,
    tma.SPEC,
)  # fmt: skip


def check_complete(specs, what: str = "isa.FAMILIES") -> dict:
    """``{Family: value}`` from ``(family, value)`` pairs, refusing a missing or doubled family
    (used for every table keyed by family, here and in the lowering and the widgets)."""
    table = {}
    for family, value in specs:
        if family in table:
            raise RuntimeError(f"{what}: {family} is declared twice")
        table[family] = value
    missing = [f.name for f in Family if f not in table]
    if missing:
        raise RuntimeError(f"{what}: no entry for {', '.join(missing)}")
    return table


SPECS: dict[Family, FamilySpec] = check_complete((s.family, s) for s in FAMILIES)
# Longest mnemonic first, so that a family whose mnemonic is a dotted prefix of another's
# (cp.async of cp.async.bulk) does not swallow the longer one's texts.
_BY_LENGTH = sorted(FAMILIES, key=lambda s: -len(s.mnemonic))

_CACHE: dict[str, Contract] = {}  # text -> contract; tests replace it to redefine forms


def spec_of(family: Family) -> FamilySpec:
    return SPECS[family]


def family_of_text(text: str) -> FamilySpec | None:
    """The family whose mnemonic is the longest dotted prefix of ``text`` (``cp.async...``,
    ``mma...``), or None."""
    return next((s for s in _BY_LENGTH if s.names(text)), None)


@functools.cache
def supported_forms() -> tuple[str, ...]:
    """Every instruction text tirx checks, lowers and runs, family by family."""
    out = []
    for spec in FAMILIES:
        for mods in spec.combinations():
            if spec.reject(mods) is None:
                out.append(spec.spell(mods))
    return tuple(out)


def lookup(text: str) -> Contract:
    """The contract of an instruction text; ContractError (with the nearest supported forms
    as the hint) for text that is not a supported form."""
    text = " ".join(text.split())
    if text in _CACHE:
        return _CACHE[text]
    spec = family_of_text(text)
    if spec is None:
        families = ", ".join(s.mnemonic for s in FAMILIES)
        raise _unknown(text, f"tirx knows the families {families}")
    mods, why = spec.parse(text)
    if mods is None:
        raise _unknown(text, why)
    reason = spec.reject(mods)
    if reason is not None:
        raise _unknown(text, reason, prefix=f"{text}: {reason}")
    _CACHE[text] = contract = spec.build(text, mods)
    return contract


def check_arch(contract: Contract, arch: int) -> None:
    """ContractError when the target ``sm_`` number is older than the form's minimum (or,
    for an arch-specific form, is not exactly its arch)."""
    if contract.arch_specific and arch != contract.min_arch:
        raise ContractError(
            f"{contract.text} needs sm_{contract.min_arch}a (the arch-specific features of "
            f"sm_{contract.min_arch}); the target is sm_{arch}",
            hint=f'compile with target="cuda -arch=sm_{contract.min_arch}" (tirx builds it for '
            f"sm_{contract.min_arch}a) or run it on the simulator",
        )
    if arch < contract.min_arch:
        raise ContractError(
            f"{contract.text} needs sm_{contract.min_arch} or newer; the target is sm_{arch}",
            hint=f'compile with target="cuda -arch=sm_{max(contract.min_arch, 80)}" or newer',
        )


def _unknown(text: str, why: str, prefix: str | None = None) -> ContractError:
    near = difflib.get_close_matches(text, supported_forms(), n=3, cutoff=0.6)
    hint = ("nearest supported: " + ", ".join(near) + "; ") if near else ""
    hint += "every form: docs/instructions.md or tirx.isa.supported_forms()"
    if text.startswith("mma") and (".e4m3" in text or ".e5m2" in text):  # 8-bit float operands
        hint = "8-bit float mma (.e4m3/.e5m2, an sm_89 form, not SM80's) is not a form tirx "
        hint += "has: convert the fp8 values to float16 (T.float16(x)) and use an .f16 mma"
    message = prefix or f"unknown or unsupported instruction {text!r} ({why})"
    return ContractError(message, hint=hint)
