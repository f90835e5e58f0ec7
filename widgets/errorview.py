"""A ``ContractError`` drawn: the instruction's fragment beside the user's layout, with the
cells where they disagree marked.

:func:`contract_picture` builds the picture from an error; :func:`install` registers an
IPython handler (``%load_ext tirx`` and ``import widgets`` call it) that shows the usual short
error text and, under it, that picture. The core ``tirx`` package knows nothing of this.

What the error names is read from its message (``<instruction>: operand <name>: ...``);
the offending layout comes from the error's ``layout``/``shape`` attributes when tirx sets
them, else from the checker's frame in the traceback (its ``v``, the operand's view).
"""

from __future__ import annotations

import html
import itertools
import math
import re
import sys
from dataclasses import dataclass

from . import fragment as F
from . import operands as O
from . import picture
from .fragview import FragmentView

__all__ = ["ContractPicture", "contract_picture", "install", "show_contract_error"]

_WHERE = re.compile(r"^(?P<instr>(?:mma|ldmatrix|stmatrix)\.\S+): operand (?P<operand>\w+)")


@dataclass
class ContractPicture:
    """Expected fragment and the user's layout, side by side, disagreements marked."""

    message: str
    expected: FragmentView
    actual: FragmentView | None
    mismatches: int

    def __str__(self) -> str:
        parts = [str(self.expected)]
        if self.actual is not None:
            parts.append(str(self.actual))
        return "\n\n".join(parts)

    def _views(self) -> list:
        return [self.expected] + ([self.actual] if self.actual is not None else [])

    def still(self) -> str:
        """Both sides as coloured text tables (what an untrusted notebook shows)."""
        return "".join(v.still() for v in self._views())

    def _panels(self):
        from .panels import Panels

        return Panels(self.message.splitlines()[0], self._views(), linked=False)

    def figure(self):
        return self._panels().figure()

    def png(self, path=None, *, dpi: int = 150) -> bytes:
        return self._panels().png(path, dpi=dpi)

    def _repr_mimebundle_(self, include=None, exclude=None):
        from . import faces

        return faces.static_bundle(self)

    def _repr_html_(self) -> str:
        views = self._views()
        sides = [_side(view.svg()) for view in views]
        verdict = (
            f"{self.mismatches} element(s) held by a different lane than the instruction "
            "expects (marked ✗ on both sides); click an element to outline it on both sides"
            if self.actual is not None
            else "the layout could not be read back from the error; the expected fragment alone"
        )
        scope = f"tirx-cp{next(_ids)}"
        link = picture.linked_style(scope, len(self.expected.fragment.elements))
        return (
            f'<div class="tirx-contract-picture {scope}" style="background:#fff;color:#111;'
            'padding:6px;border-left:4px solid #d62728;max-width:100%;box-sizing:border-box">'
            f"{link}"
            f'<div class="tirx-contract-verdict">{html.escape(verdict)}</div>'
            '<div style="display:flex;gap:16px;align-items:flex-start;flex-wrap:wrap">'
            f"{''.join(sides)}</div></div>"
        )


_ids = itertools.count()
SIDE = 460  # px each side wraps at: two sit side by side in a 1,000 px notebook
WHOLE = 10**6  # an error's pictures wrap whole, never into pages


def _side(svg: str) -> str:
    """One picture as a flex item at its natural size (never scaled down: a side too wide
    for the output wraps into bands, drawn :data:`SIDE` px wide at most); two share a row
    when the output is wide enough, else the second goes below the first."""
    return f'<div class="tirx-contract-side" style="flex:0 0 auto;max-width:100%">{svg}</div>'


def _operand_view(err, operand: str):
    """The view (an ``ir.View``) of ``operand`` that the lowering was checking, read from the
    traceback's frames (the tile op and its contract), if they are still there."""
    found = None
    tb = err.__traceback__
    while tb is not None:
        local = tb.tb_frame.f_locals
        op, contract = local.get("op"), local.get("contract")
        names = [o.name for o in getattr(contract, "operands", ())]
        operands = getattr(op, "operands", None)
        if operand in names and operands is not None and len(operands) == len(names):
            view = operands[names.index(operand)]
            if hasattr(view, "layout") and hasattr(view, "shape"):
                found = view
        tb = tb.tb_next
    return found


def contract_picture(err) -> ContractPicture | None:
    """The picture of a ContractError about a register operand; None when the error names
    no instruction operand (a wrong dtype, say, has nothing to draw)."""
    err = getattr(err, "original", None) or err
    message = getattr(err, "message", str(err))
    m = _WHERE.match(message)
    if m is None:
        return None
    instr, operand = m.group("instr"), m.group("operand")
    try:
        facts = O.operand_facts(instr, operand)
    except Exception:  # an unknown instruction: nothing to draw
        return None
    if facts.grid.kind != "registers":
        return None
    layout = getattr(err, "layout", None)
    shape = getattr(err, "shape", None)
    if layout is None:
        view = _operand_view(err, operand)
        if view is not None:
            layout, shape = view.layout, tuple(int(s) for s in view.shape)
    repeat = ()
    if shape is not None:
        repeat = tuple(shape[: len(shape) - len(facts.atom)])
    if math.prod(repeat) > 16:
        repeat = ()
    expected = O.operand_fragment(instr, operand, repeat=repeat)
    actual = None
    if layout is not None and shape is not None:
        try:
            actual = F.layout_fragment(
                layout, shape, element_bits=facts.element_bits, unit_bits=facts.unit_bits,
                title=f"your layout: {layout!r}", prefix=expected.prefix,
                repeat_names=O.block_names(facts, repeat),  # the blocks named as expected's
            )  # fmt: skip
        except Exception:  # a layout that cannot be drawn over this shape
            actual = None
    marks = []
    if actual is not None and len(actual.elements) == len(expected.elements):
        marks = [
            i for i, (a, b) in enumerate(zip(actual.elements, expected.elements))
            if a.lane != b.lane
        ]  # fmt: skip
    exp_view = FragmentView(expected, marks=marks, summary=f"expected: {facts.formula}",
                            width=SIDE, max_rows=WHOLE)  # fmt: skip
    act_view = None if actual is None else FragmentView(actual, marks=marks, width=SIDE,
                                                        max_rows=WHOLE)  # fmt: skip
    return ContractPicture(message, exp_view, act_view, len(marks))


def show_contract_error(err) -> None:
    """Display the picture of ``err`` (nothing when it has none)."""
    from IPython.display import display

    pic = contract_picture(err)
    if pic is not None:
        display(pic)


def _handler(shell, etype, value, tb, tb_offset=None):
    """Show a tirx error from the user's side (:mod:`widgets.tracebacks`), then, for a
    ContractError, its picture."""
    from tirx.errors import TirxError

    from .tracebacks import HIDDEN_NOTE, trimmed

    hidden, whole = 0, tb
    if isinstance(value, TirxError) and tb is not None:
        short, hidden = trimmed(tb)
        if hidden:
            tb = short
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    if hidden:
        sys.last_traceback = whole  # what %tb shows: every frame
        print(HIDDEN_NOTE.format(n=hidden))
    try:
        show_contract_error(value)
    except Exception:  # the picture is a bonus: never hide the error behind another
        pass


def install(shell=None) -> bool:
    """Register the handler with IPython (the running shell by default); True if done."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    from tirx.errors import TirxError

    from .cellerror import CellError

    shell.set_custom_exc((TirxError, CellError), _handler)
    return True
