"""``show_fragment`` and ``show_instruction``: any operand of any instruction tirx has, or any
layout, as the picture that suits it.

* a register operand of a warp (mma, ldmatrix, stmatrix, movmatrix) or of a warpgroup
  (wgmma's accumulator, its A in registers with ``form="registers"``): the element picture
  of :mod:`widgets.operands`, labelled ``T<lane>:<name><i>`` as the PTX ISA's figures are;
* a shared operand named by a matrix descriptor (wgmma's A and B): its tile as core
  matrices under a swizzle mode, with the descriptor's fields (:mod:`widgets.smem`);
* a family with no register fragment (the copies, the barriers): a TirxError with the reason
  its contract spec gives (``FamilySpec.no_picture``) and the pictures it has instead.
"""

from __future__ import annotations

from tirx.errors import TirxError
from tirx.isa import Role

from . import fragment as F
from . import operands as O
from .families import require_fragment
from .fragview import FragmentView
from .smem import shared_operand

__all__ = ["InstructionView", "show_fragment", "show_instruction"]


class InstructionView(FragmentView):
    """``show_instruction``: an operand's canonical fragment, clicked for the ISA's formula."""

    def __init__(self, contract, operand: str, *, lane=None, form=None, page: int = 0):
        self.contract = contract
        frag = O.operand_fragment(contract, operand, form=form)
        self.operand = contract.operand(operand)
        super().__init__(frag, lane=lane, summary=f"{operand}: {frag.about}", page=page)


def _operand(contract, operand):
    names = [op.name for op in contract.operands]
    if operand is None:
        drawable = [op.name for op in contract.operands if op.owner is not None]
        return (drawable or names or [None])[0]
    if operand not in names:
        raise TirxError(
            f"{contract.text} has no operand {operand!r}",
            hint="its operands are " + (", ".join(names) or "none"),
        )
    return operand


def show_instruction(instr, operand: str = None, *, lane=None, form=None, swizzle="128B", k=0,
                     page: int = 0):  # fmt: skip
    """The canonical fragment of one operand of a PTX instruction (text, ``T.ptx[...]`` or a
    contract), drawn from the contract table the compiler checks against: a register operand
    in elements, ``T5:a2`` as the PTX ISA labels it (clicking a cell shows the ISA's formula);
    a descriptor operand (wgmma's A, B) as its shared tile under ``swizzle`` (k-slice ``k``)."""
    contract = O.contract_of(instr)
    require_fragment(contract)  # cp.async, TMA, mbarrier: a plain message, no picture
    operand = _operand(contract, operand)
    spec = contract.operand(operand)
    if spec.role is Role.DESCRIPTOR and form != "registers":
        return shared_operand(contract, operand, swizzle=swizzle, k=k)
    return InstructionView(contract, operand, lane=lane, form=form, page=page)


def show_fragment(what, operand=None, *, shape=None, element_bits=None, unit_bits=32,
                  repeat=(), view: str = "elements", lane=None, title=None, prefix=None,
                  repeat_names=(), form=None, swizzle="128B", k=0, page: int = 0):  # fmt: skip
    """An element-level picture of an instruction operand or a layout.

    ``what`` is an instruction (text or ``T.ptx[...]``, with ``operand``) or a layout (spec
    text or object, over ``shape``). ``element_bits`` is the element width (16: f16/bf16,
    8: s8, 32: f32/tf32; default: the instruction's, or 32 for a layout); a layout's ``m``
    step holds ``unit_bits`` (32 for a register layout over u32 words, ``element_bits`` for
    one over elements). ``view``: ``"elements"`` (the logical matrix), ``"threads"`` (lane
    by lane) or ``"banks"`` (a shared layout, coloured by bank). ``form="registers"``: an
    operand's register form (wgmma's A); ``swizzle``/``k``: a descriptor operand's tile.
    ``page``: which page of columns a picture too wide to wrap whole shows.
    """
    if _is_instruction(what):
        contract = O.contract_of(what)
        require_fragment(contract)
        operand = _operand(contract, operand)
        if contract.operand(operand).role is Role.DESCRIPTOR and form != "registers":
            return shared_operand(contract, operand, swizzle=swizzle, k=k)
        frag = O.operand_fragment(contract, operand, repeat=repeat, element_bits=element_bits,
                                  prefix=prefix, form=form)  # fmt: skip
    elif view == "banks":
        frag = F.bank_fragment(what, shape, element_bits=element_bits or 16, title=title)
    else:
        bits = element_bits or 32
        frag = F.layout_fragment(
            what, shape, element_bits=bits, unit_bits=unit_bits if unit_bits >= bits else bits,
            title=title, prefix=prefix or "v", repeat_names=repeat_names,
        )  # fmt: skip
    if view == "threads":
        frag = F.thread_major(frag)
    elif view not in ("elements", "banks"):
        raise TirxError(f"unknown view {view!r}", hint="choose elements, threads or banks")
    summary = ""
    if frag.kind is F.FragmentKind.MEMORY:
        summary = f"worst column bank conflict: {F.bank_conflicts(frag)}-way"
    return FragmentView(frag, lane=lane, summary=summary, page=page)


def _is_instruction(what) -> bool:
    """Whether ``what`` names a PTX instruction (text, ``T.ptx[...]`` or a contract) rather
    than a layout (an object, or spec text, which always has brackets)."""
    if hasattr(what, "operands") and hasattr(what, "family"):
        return True
    text = getattr(what, "text", what)
    return isinstance(text, str) and "[" not in text and "(" not in text
