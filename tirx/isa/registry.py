"""The families' specs, the supported forms, and ``lookup(text) -> Contract``.

A family's specs are the ``SPECS`` of its contract module, ``tirx/families/<folder>/isa.py``,
found through :mod:`tirx.catalog` and imported at the first lookup of one of its texts: a kernel
of ldmatrix and mma loads those two families' contracts and no others. ``FAMILIES`` (every
spec, in catalog order) and ``SPECS`` (``{Family: spec}``) load them all; every member of
:class:`Family` must have exactly one spec, checked when they are built, so a family nobody
declares fails loudly instead of falling into another's branch.
"""

from __future__ import annotations

import functools

from .. import catalog
from ..errors import ContractError
from .core import Contract, Family, FamilySpec

__all__ = [
    "lookup", "supported_forms", "spec_of", "family_of_text", "check_complete",
    "check_arch", "all_specs",
]  # fmt: skip


def check_complete(specs, what: str = "isa.FAMILIES") -> dict:
    """``{Family: value}`` from ``(family, value)`` pairs, refusing a missing or doubled family
    (used for every table keyed by family)."""
    table = {}
    for family, value in specs:
        if family in table:
            raise RuntimeError(f"{what}: {family} is declared twice")
        table[family] = value
    missing = [f.name for f in Family if f not in table]
    if missing:
        raise RuntimeError(f"{what}: no entry for {', '.join(missing)}")
    return table


@functools.cache
def _specs_of(folder: str) -> dict[Family, FamilySpec]:
    """The specs of one family folder, checked against its catalog row."""
    row = catalog.stage(folder, "isa")
    specs = {s.family: s for s in row.SPECS}
    declared = {Family(p) for p in catalog.row_of_family(next(iter(specs))).ptx}
    if set(specs) != declared or len(specs) != len(row.SPECS):
        raise RuntimeError(
            f"tirx/families/{folder}/isa.py declares {sorted(f.value for f in specs)}; its "
            f"catalog row says {sorted(f.value for f in declared)}"
        )
    for family, spec in specs.items():
        if spec.mnemonic != family.value:
            raise RuntimeError(f"{family}: its spec's mnemonic is {spec.mnemonic!r}")
    return specs


def spec_of(family: Family) -> FamilySpec:
    """The spec of one family (its contract module imported now if it was not)."""
    return _specs_of(catalog.row_of_family(family).folder)[family]


@functools.cache
def all_specs() -> tuple[FamilySpec, ...]:
    """Every family's spec, in catalog order (imports every contract module)."""
    out = [spec_of(f) for f in Family]
    check_complete((s.family, s) for s in out)
    return tuple(out)


def __getattr__(name):
    if name == "FAMILIES":
        return all_specs()
    if name == "SPECS":
        return {s.family: s for s in all_specs()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


CONTRACTS: dict[str, Contract] = {}  # text -> contract; tests replace it to redefine forms


def family_of_text(text: str) -> FamilySpec | None:
    """The spec of the family whose mnemonic is the longest dotted prefix of ``text``
    (``cp.async...``, ``mma...``), or None."""
    mnemonic = catalog.mnemonic_of(text)
    return spec_of(Family(mnemonic)) if mnemonic is not None else None


@functools.cache
def supported_forms() -> tuple[str, ...]:
    """Every instruction text tirx checks, lowers and runs, family by family."""
    out = []
    for spec in all_specs():
        for mods in spec.combinations():
            if spec.reject(mods) is None:
                out.append(spec.spell(mods))
    return tuple(out)


def lookup(text: str) -> Contract:
    """The contract of an instruction text; ContractError (with the nearest supported forms
    as the hint) for text that is not a supported form."""
    text = " ".join(text.split())
    if text in CONTRACTS:
        return CONTRACTS[text]
    spec = family_of_text(text)
    if spec is None:
        families = ", ".join(f.value for f in Family)
        raise _unknown(text, f"tirx knows the families {families}")
    mods, why = spec.parse(text)
    if mods is None:
        raise _unknown(text, why)
    reason = spec.reject(mods)
    if reason is not None:
        raise _unknown(text, reason, prefix=f"{text}: {reason}")
    CONTRACTS[text] = contract = spec.build(text, mods)
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
    import difflib  # an error's suggestions only

    near = difflib.get_close_matches(text, supported_forms(), n=3, cutoff=0.6)
    hint = ("nearest supported: " + ", ".join(near) + "; ") if near else ""
    hint += "every form: docs/instructions.md or tirx.isa.supported_forms()"
    if text.startswith("mma") and (".e4m3" in text or ".e5m2" in text):  # 8-bit float operands
        hint = "8-bit float mma (.e4m3/.e5m2, an sm_89 form, not SM80's) is not a form tirx "
        hint += "has: convert the fp8 values to float16 (T.float16(x)) and use an .f16 mma"
    message = prefix or f"unknown or unsupported instruction {text!r} ({why})"
    return ContractError(message, hint=hint)
