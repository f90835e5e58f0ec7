"""The script side of the mbarrier family: ``T.cuda.mbarrier_wait`` and
``T.cuda.mbarrier_wait_acquire_cluster``."""

from __future__ import annotations

import ast

from ...errors import TirxSyntaxError
from ...ir import nodes as ir
from ...script.addresses import element_address

__all__ = ["parse_call"]


_TEXTS = {
    "cuda.mbarrier_wait": "mbarrier.try_wait.parity.shared::cta.b64",
    "cuda.mbarrier_wait_acquire_cluster": "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
}


def parse_call(ev, key: str, node: ast.Call, name_hint=None) -> None:
    """``T.cuda.mbarrier_wait(barrier, phase)``, as the real TIRx spells it: wait until the phase
    of parity ``phase`` of the mbarrier completes -- the waiting form of
    ``mbarrier.try_wait.parity.shared::cta.b64`` (docs/instructions.md), so every check and the
    simulator's model are that form's. ``barrier``: ``bars[i]`` or ``bars.ptr_to([i])`` of a
    shared ``uint64`` tensor. ``T.cuda.mbarrier_wait_acquire_cluster`` is the same wait with
    ``.acquire.cluster`` (the arrivals of other blocks of the cluster are acquired)."""
    span = ev.p.span(node)
    name = key.removeprefix("cuda.")
    if len(node.args) != 2 or node.keywords:
        raise TirxSyntaxError(
            f"T.cuda.{name} takes two operands, the barrier and the phase parity",
            span,
            hint=f"T.cuda.{name}(bars[i], phase) or T.cuda.{name}(bars.ptr_to([i]), phase)",
        )
    bar_node, phase_node = node.args
    if isinstance(bar_node, ast.Call):  # an address form: the element it names
        view, idx = element_address(ev, bar_node, "the barrier")
        bar = ir.ElemLoad(view, tuple(idx), view.dtype)
    else:
        bar = ir.as_expr(ev.scalar(bar_node))
    spans = (ev.p.span(bar_node), ev.p.span(phase_node))
    phase = ir.as_expr(ev.scalar(phase_node))
    ev.b.emit(ir.RawPtx(_TEXTS[key], (bar, phase), span, spans))
