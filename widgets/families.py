"""The families the notebook layer draws and probes, in one table, and what every tool asks of it.

Every family whose operands are register fragments of a warp is drawn from its contract's
ownership maps (``show_instruction``, ``show_fragment``); a family that is not says in its
contract spec why (``FamilySpec.no_picture``), and the tools answer with that reason. A family
whose forms the probes also run on the machine (``check_layout``, ``run_instruction``) has a
:class:`Picture` here: how its native registers are laid out, which of its forms the probes run,
its probe kernel, the check of a drawing against the machine and a run with real data (its
picture module, :mod:`widgets.mma_picture` or :mod:`widgets.matrix_picture`, holds them). A
family added without probes touches no file of the notebook layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tirx
from tirx.errors import TirxError
from tirx.isa import Family, Role, spec_of, supported_forms

from . import matrix_picture, mma_picture

__all__ = [
    "Picture", "DRAWN", "picture", "require_fragment", "require_drawable", "canonical_layout",
    "view_shape", "OTHER_PICTURES",
    "probed_forms", "require_probed", "kernel_for", "instruments",
]  # fmt: skip


@dataclass(frozen=True)
class Picture:
    """How the notebook layer draws and probes one family's lane fragments.

    ``canonical(contract, operand)``: the TileLayout whose slots are the operand's native
    registers (one instruction); ``repeats``: the leading dims of one instruction's register
    view (``(1, 1)`` for mma's M and N repeats); ``probed(contract)``: whether the probes run
    the form; ``operands``: the register operands a probe kernel takes layouts for;
    ``kernel(contract, chosen, slots)``: the probe kernel; ``check(contract, operand, kernel,
    slots, target)`` and ``run(contract, kernel, slots, given, target)``: (result, where)."""

    canonical: Callable
    repeats: tuple[int, ...]
    probed: Callable
    operands: tuple[str, ...]
    kernel: Callable
    check: Callable
    run: Callable
    inputs: tuple[str, ...] = ()  # the operands run_instruction takes (A=, shared=, ...)


def _always(contract) -> bool:
    return True


DRAWN: dict[Family, Picture] = {
    Family.MMA: Picture(
        mma_picture.canonical, (1, 1), mma_picture.probed, mma_picture.OPERANDS,
        mma_picture.probe_kernel, mma_picture.check, mma_picture.run, ("A", "B", "C"),
    ),
    Family.LDMATRIX: Picture(
        matrix_picture.canonical, (), _always, matrix_picture.OPERANDS,
        matrix_picture.ldmatrix_kernel, matrix_picture.check_ldmatrix, matrix_picture.run_ldmatrix,
        ("shared",),
    ),
    Family.STMATRIX: Picture(
        matrix_picture.canonical, (), _always, matrix_picture.OPERANDS,
        matrix_picture.stmatrix_kernel, matrix_picture.check_stmatrix, matrix_picture.run_stmatrix,
        ("registers",),
    ),
}  # fmt: skip


OTHER_PICTURES = (
    "its other pictures: show_layout(view.layout, view.shape) for an operand's layout, "
    "show_tma_box for a tensor copy's box and where it lands, show_pipeline for what a run's "
    "warps issued and waited for; the operands are listed in docs/instructions.md"
)


def require_fragment(contract) -> None:
    """TirxError (not a crash) for a form whose operands have no fragment to draw, with the
    reason its family's spec gives."""
    why = spec_of(contract.family).no_picture
    if not why:
        return
    raise TirxError(f"{contract.text} has no register fragment to draw: {why}", hint=OTHER_PICTURES)


def require_drawable(contract, spec) -> None:
    """TirxError for an operand with nothing to draw as lanes: an immediate or a scalar, a
    memory operand that is not rows of lane addresses (a wgmma descriptor's tile is drawn by
    :func:`widgets.show_fragment` as core matrices instead)."""
    if spec.owner is not None or spec.role is Role.SHARED:
        return
    what = {
        Role.DESCRIPTOR: "a shared-memory matrix descriptor: show_fragment draws its tile "
        "as core matrices",
        Role.IMMEDIATE: "an immediate",
        Role.SCALAR_IN: "a scalar",
    }
    raise TirxError(
        f"operand {spec.name} of {contract.text} is {what.get(spec.role, spec.role.value)}, "
        "not a register fragment",
        hint="the register operands of this form: "
        + (", ".join(op.name for op in contract.operands if op.owner is not None) or "none"),
    )


def picture(contract) -> Picture:
    """The family's :class:`Picture` (a TirxError saying why for a family without one)."""
    require_probed(contract)
    return DRAWN[contract.family]


def canonical_layout(contract, operand: str):
    """A TileLayout whose slots are the native registers of ``operand`` (one instruction)."""
    require_fragment(contract)
    return _drawn(contract).canonical(contract, operand)


def _drawn(contract) -> Picture:
    found = DRAWN.get(contract.family)
    if found is None:
        raise TirxError(
            f"the probes do not run {contract.text} yet",
            hint="show_instruction draws its fragments; probed forms: widgets.families.probed_forms()",
        )
    return found


def view_shape(contract, operand: str) -> tuple[int, ...]:
    """The register view shape one instruction covers: (1, 1, *atom) for mma, the atom else."""
    return (*_drawn(contract).repeats, *contract.operand(operand).atom)


def probed_forms() -> tuple[str, ...]:
    """The forms :func:`widgets.check_layout` and :func:`widgets.run_instruction` can probe:
    ldmatrix, stmatrix, and the mma forms with 16-bit A/B and f32 accumulation (the probe
    codes are halves; the other mma forms are drawn by show_instruction, not probed yet)."""
    return tuple(t for t in supported_forms() if _probed(tirx.instruction_contract(t)))


def _probed(contract) -> bool:
    drawn = DRAWN.get(contract.family)
    return drawn is not None and drawn.probed(contract)


def instruments() -> dict[str, tuple[str, ...]]:
    """The instrument lists of the notebook tools, from the isa's forms: what
    ``show_instruction`` draws (every form) and what the probes run."""
    return {"show_instruction": supported_forms(), "check_layout": probed_forms()}


def require_probed(contract) -> None:
    require_fragment(contract)
    _drawn(contract)  # a family without probes
    if not _probed(contract):
        raise TirxError(
            f"the probes do not run {contract.text} yet (their codes are 16-bit floats)",
            hint="show_instruction draws its fragments; probed forms: widgets.families.probed_forms()",
        )


def kernel_for(contract, layouts: dict):
    """The probe kernel of ``contract`` with ``layouts`` {operand: layout} (canonical for the
    operands not given). Returns (kernel, slots per operand)."""
    require_probed(contract)
    drawn = picture(contract)
    names, build = drawn.operands, drawn.kernel
    chosen = {n: layouts.get(n) or canonical_layout(contract, n) for n in names}
    slots = {n: chosen[n].span() for n in names}
    return build(contract, chosen, slots), slots
