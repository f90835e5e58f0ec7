"""The script side of the mbarrier family: ``T.cuda.mbarrier_wait``."""

from __future__ import annotations

import ast

from ...errors import TirxSyntaxError
from ...ir import nodes as ir
from ...script.addresses import element_address

__all__ = ["parse_call"]


def parse_call(ev, key: str, node: ast.Call, name_hint=None) -> None:
    """``T.cuda.mbarrier_wait(barrier, phase)``, as the real TIRx spells it: wait until the phase
    of parity ``phase`` of the mbarrier completes -- the waiting form of
    ``mbarrier.try_wait.parity.shared::cta.b64`` (docs/instructions.md), so every check and the
    simulator's model are that form's. ``barrier``: ``bars[i]`` or ``bars.ptr_to([i])`` of a
    shared ``uint64`` tensor."""
    span = ev.p.span(node)
    if len(node.args) != 2 or node.keywords:
        raise TirxSyntaxError(
            "T.cuda.mbarrier_wait takes two operands, the barrier and the phase parity",
            span,
            hint="T.cuda.mbarrier_wait(bars[i], phase) or T.cuda.mbarrier_wait(bars.ptr_to([i]), phase)",
        )
    bar_node, phase_node = node.args
    if isinstance(bar_node, ast.Call):  # an address form: the element it names
        view, idx = element_address(ev, bar_node, "the barrier")
        bar = ir.ElemLoad(view, tuple(idx), view.dtype)
    else:
        bar = ir.as_expr(ev.scalar(bar_node))
    spans = (ev.p.span(bar_node), ev.p.span(phase_node))
    phase = ir.as_expr(ev.scalar(phase_node))
    ev.b.emit(ir.RawPtx("mbarrier.try_wait.parity.shared::cta.b64", (bar, phase), span, spans))
