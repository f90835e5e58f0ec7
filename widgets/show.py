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

from . import args
from . import fragment as F
from . import operands as O
from .families import require_fragment
from .fragview import FragmentView
from .model import register_notes
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
    if not isinstance(operand, str) or operand not in names:
        raise TirxError(
            f"{contract.text} has no operand {operand!r}",
            hint="its operands are " + (", ".join(names) or "none"),
        )
    return operand


def show_instruction(instr, operand: str = None, *, lane=None, form=None, swizzle=None, k=None,
                     page: int = 0):  # fmt: skip
    """The canonical fragment of one operand of a PTX instruction (text, ``T.ptx[...]`` or a
    contract), drawn from the contract table the compiler checks against: a register operand
    in elements, ``T5:a2`` as the PTX ISA labels it (clicking a cell shows the ISA's formula);
    a descriptor operand (wgmma's A, B) as its shared tile under ``swizzle`` (default
    ``"128B"``, k-slice ``k``, default 0)."""
    contract = O.contract_of(args.instruction(instr, "instr"))
    require_fragment(contract)  # cp.async, TMA, mbarrier: a plain message, no picture
    operand = _operand(contract, operand)
    spec = contract.operand(operand)
    if spec.role is Role.DESCRIPTOR and form != "registers":
        return shared_operand(contract, operand, swizzle=swizzle or "128B", k=k or 0)
    _no_tile_options(contract, operand, swizzle=swizzle, k=k)
    return _paged(InstructionView(contract, operand, lane=lane, form=form, page=page), page)


def _no_tile_options(contract, operand, **given) -> None:
    """Refuse the options of a descriptor operand's shared tile on a register operand."""
    for name, value in given.items():
        if value is not None:
            raise args.ArgumentError(
                f"{name}= draws a descriptor operand's shared tile; operand {operand} of "
                f"{contract.text} is a register fragment",
                hint=f"leave {name}= out here (wgmma's A and B in shared memory take it)",
            )


def _paged(view, page):
    """``view``, once ``page`` is one of its pages."""
    args.page(page, view.pages)
    return view


def show_fragment(what, operand=None, *, shape=None, element_bits=None, unit_bits=None,
                  repeat=(), view: str = "elements", lane=None, title=None, prefix=None,
                  repeat_names=(), form=None, swizzle=None, k=None, page: int = 0):  # fmt: skip
    """An element-level picture of an instruction operand or a layout.

    ``what`` is an instruction (text or ``T.ptx[...]``, with ``operand``) or a layout (spec
    text or object, over ``shape``). ``element_bits`` is the element width (16: f16/bf16,
    8: s8, 32: f32/tf32; default: the instruction's); a layout's ``m`` step holds
    ``unit_bits``. A layout's defaults follow what it lays out. A register layout (on
    ``laneid``/``tx``) steps over 32-bit registers: 32-bit elements, one per register
    (``element_bits=16`` splits each in two). A memory layout (``m`` only) steps over the
    elements of a shared tile, which the notebooks' tiles hold as f16/bf16: 16-bit elements,
    one per step, so the tile gets the banks that ``show_layout`` (``dtype_bytes=2``) and
    ``view="banks"`` give it. ``view``: ``"elements"`` (the logical matrix), ``"threads"``
    (lane by lane) or ``"banks"`` (a shared layout, coloured by bank). ``form="registers"``:
    an operand's register form (wgmma's A); ``swizzle``/``k``: a descriptor operand's tile.
    ``page``: which page of columns a picture too wide to wrap whole shows. ``lane``: a lane
    (0..31; a thread 0..127 of a warpgroup operand) to highlight. A picture of more than
    16384 elements is refused (show one tile).
    """
    if view not in ("elements", "threads", "banks"):
        raise TirxError(f"unknown view {view!r}", hint="choose elements, threads or banks")
    title = args.text(title, "title")
    if what is None or _is_instruction(what):
        contract = O.contract_of(args.instruction(what, "what", "a PTX instruction or a layout"))
        require_fragment(contract)
        operand = _operand(contract, operand)
        if contract.operand(operand).role is Role.DESCRIPTOR and form != "registers":
            return shared_operand(contract, operand, swizzle=swizzle or "128B", k=k or 0)
        _no_tile_options(contract, operand, swizzle=swizzle, k=k)
        if shape is not None:
            raise args.ArgumentError(
                f"shape= draws a layout; an instruction operand's shape is its own ({operand} "
                f"of {contract.text})", hint="repeat=(2, 2) tiles the operand; leave shape= out",
            )  # fmt: skip
        frag = O.operand_fragment(contract, operand, repeat=repeat, element_bits=element_bits,
                                  prefix=prefix, form=form)  # fmt: skip
    else:
        what = args.layout(what, "what")
        memory = not (what.axes() - {"m"})  # a shared tile: m counts its elements
        bits = (16 if memory else 32) if element_bits is None else element_bits
        F.check_bits(bits)  # 8, 16 or 32
        unit = (bits if memory else 32) if unit_bits is None else unit_bits
        if unit not in (8, 16, 32):
            F.check_bits(bits, unit)  # the same refusal for unit_bits
        if view == "banks":
            frag = F.bank_fragment(what, shape, element_bits=bits, title=title)
        else:
            frag = F.layout_fragment(
                what, shape, element_bits=bits, unit_bits=max(unit, bits), title=title,
                prefix=prefix or "v", repeat_names=repeat_names,
            )  # fmt: skip
    if view == "threads":
        frag = F.thread_major(frag)
    summary = ""
    if frag.kind is F.FragmentKind.MEMORY:
        summary = f"worst column bank conflict: {F.bank_conflicts(frag)}-way"
    elif not _is_instruction(what):
        summary = _register_notes(frag)
    return _paged(FragmentView(frag, lane=lane, summary=summary, page=page), page)


def _register_notes(frag) -> str:
    """What no warp can hold in a register layout's picture (:func:`model.register_notes`)."""
    per = max(frag.unit_bits // frag.element_bits, 1)
    entries = [
        (e.coord, e.threads, lane, f"{frag.prefix}{reg * per + part}")
        for e in frag.elements
        for lane, reg, part in e.copies or ((e.lane, e.register, e.part),)
    ]
    return register_notes(entries, frag.holder)


def _is_instruction(what) -> bool:
    """Whether ``what`` names a PTX instruction (text, ``T.ptx[...]`` or a contract) rather
    than a layout (an object, or spec text, which always has brackets)."""
    if hasattr(what, "operands") and hasattr(what, "family"):
        return True
    text = getattr(what, "text", what)
    return isinstance(text, str) and "[" not in text and "(" not in text
